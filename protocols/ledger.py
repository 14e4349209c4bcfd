"""The site's release ledger: an append-only, hash-chained, signed JSON-lines file.

Layout of a ledger directory ``DIR`` (default ``marg-ledger``)::

    DIR/ledger.jsonl       one canonical-JSON entry per line, "\\n"-terminated
    DIR/keys/ID.sign.pub   copies of the public keys that signed entries (self-attested)
    DIR/budget.json        the dataset's privacy cap (marginals.privacy.write_budget)
    DIR/.lock              advisory lock serialising appends

Each entry (keys sorted, no spaces, UTF-8) records one release::

    v            format version (1)
    seq          1, 2, 3, ... (line k holds seq k)
    time         UTC ISO-8601 time of the release
    prev         sha256 hex of the previous entry's line (without "\\n"); 64 zeros for seq 1
    site         releasing site
    recipient    key id of the learner the bundle was sealed to, or null
    recipient_name  the learner's name as the site knows it (its key file's name), or null
    bundle       sha256 hex of the signed bundle's bytes (Bundle.digest())
    file_sha256  sha256 hex of the file written (the sealed envelope), or null
    n_rows       the row count stated in the bundle (null if not released)
    statistics   [{name, kind, clique, shape, mechanism, std}] exactly as released
    mechanism    "laplace" | "gaussian" | "none" | "mixed"
    cost         {epsilon, delta, rho} of this release ("inf" = exact, no DP guarantee)
    cumulative   {epsilon, delta, rho} spent by all releases up to and including this one
    cap          {epsilon, delta, rho} budget cap in force (budget.json), or null
    key_id       sha256 hex of the signing key, or null
    signature    base64 Ed25519 signature over the entry without "signature", or null

**Appends.** :meth:`Ledger.append` holds an exclusive ``flock``, reads the ledger from the
site's checkpoint on (:mod:`marg.protocols.checkpoint`: the checkpointed entry's hash pins the
prefix and its cumulative spend; the whole file when there is no checkpoint), verifies what it
read, checks the budget (nothing is written if it is exceeded), appends the new entry as one
line with ``write`` + ``fsync`` and updates the checkpoint: O(1) in the ledger's length
(``bench/ledger.py``). A crash leaves the old ledger, or the old ledger plus one whole entry
(the ledger then over-states what left the site, never under-states it), or a torn last
line that readers ignore and the next append removes first.

**Torn tail.** This writer never leaves a partial line, but a ledger copied mid-write or
written by another tool might end in an incomplete line (no final ``"\\n"``). If that
tail is a whole valid entry that only lost its newline, it counts as an entry; otherwise
it is a torn write: readers ignore it (:meth:`Ledger.entries`, :meth:`Ledger.spent`),
:meth:`Ledger.verify` reports it (``torn_tail``, also in its message) without failing, and
the next append drops it (repair). A malformed *complete* line is never ignored:
entries() raises, verify() fails there.

**What verification proves.** The chain (seq, prev) catches an edited, deleted, inserted,
reordered or truncated entry anywhere but at the very end; signatures catch any edit by
someone without the site key. Removing the *last* entries leaves a valid shorter chain:
catch that by giving the released bundle files (each must have an entry) or by comparing
the ``head`` hash with one recorded earlier (``marg audit show`` prints it).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import re
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from marg._util import atomic_write_bytes, canonical_json
from marg.errors import InputError, MargError, RefusedError
from marg.marginals.privacy import PrivacyCost, check_budget, read_budget, release_cost

from . import checkpoint
from .keys import SIGN_PUB_SUFFIX, key_id, load_verify_key, short_id
from .signing import b64, sign_bytes, unb64, verify_bytes

DEFAULT_LEDGER_DIR = "marg-ledger"
LEDGER_FILE = "ledger.jsonl"
KEYS_DIR = "keys"
LOCK_FILE = ".lock"
GENESIS = "0" * 64
ENTRY_VERSION = 1
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_TOL = 1e-9
_FIELDS = {
    "v": int,
    "seq": int,
    "time": str,
    "prev": str,
    "site": str,
    "recipient": (str, type(None)),
    "recipient_name": (str, type(None)),
    "bundle": str,
    "file_sha256": (str, type(None)),
    "n_rows": (int, type(None)),
    "statistics": list,
    "mechanism": str,
    "cost": dict,
    "cumulative": dict,
    "cap": (dict, type(None)),
    "key_id": (str, type(None)),
    "signature": (str, type(None)),
}


def line_hash(line: bytes) -> str:
    """sha256 hex of one ledger line (without its ``"\\n"``): the next entry's ``prev``."""
    return hashlib.sha256(line).hexdigest()


def entry_signing_bytes(entry: Mapping[str, Any]) -> bytes:
    """Canonical JSON of ``entry`` without its ``signature`` field (what gets signed)."""
    return canonical_json({k: v for k, v in entry.items() if k != "signature"})


def statistics_of(bundle: Any) -> list[dict[str, Any]]:
    """The ledger's list of released statistics from a bundle header.

    Returns
    -------
    list of dict
        ``{name, kind, clique, shape, mechanism, std}`` per statistic, in bundle order.
    """
    out = []
    for st in bundle.header.get("statistics") or []:
        noise = st.get("noise") or {}
        out.append(
            {
                "name": str(st.get("name")),
                "kind": str(st.get("kind", "counts")),
                "clique": [str(c) for c in st.get("clique") or []],
                "shape": [int(s) for s in st.get("shape") or []],
                "mechanism": str(noise.get("mechanism", "none")),
                "std": float(noise.get("std", 0.0)),
            }
        )
    return out


def _as_cost(x: Any, what: str) -> PrivacyCost:
    if isinstance(x, PrivacyCost):
        return x
    if isinstance(x, Mapping):
        return PrivacyCost.from_dict(x)
    if all(hasattr(x, f) for f in ("epsilon", "delta", "rho")):
        return PrivacyCost(epsilon=x.epsilon, delta=x.delta, rho=x.rho)
    raise InputError(f"{what} must be a privacy cost {{epsilon, delta, rho}}, got {x!r}")


def _close(a: float, b: float) -> bool:
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= _TOL * max(1.0, abs(a), abs(b))


def _same_cost(a: PrivacyCost, b: PrivacyCost) -> bool:
    return _close(a.epsilon, b.epsilon) and _close(a.delta, b.delta) and _close(a.rho, b.rho)


def _mechanism(stats: Sequence[Mapping[str, Any]]) -> str:
    mechs = sorted({str(s.get("mechanism", "none")) for s in stats})
    if not mechs:
        return "none"
    return mechs[0] if len(mechs) == 1 else "mixed"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# ---------------------------------------------------------------------------------------
# parsing
# ---------------------------------------------------------------------------------------
def split_lines(data: bytes) -> tuple[list[bytes], bytes]:
    """Split ledger bytes into complete lines and a torn tail.

    A last line without ``"\\n"`` that parses as a whole valid entry counts as a line (only
    its newline was lost); any other unterminated tail is a torn write.

    Returns
    -------
    lines : list of bytes
        The entry lines, without their ``"\\n"``.
    tail : bytes
        The torn tail to ignore (empty for a well-formed file).
    """
    parts = bytes(data).split(b"\n")
    lines, tail = parts[:-1], parts[-1]
    if tail:
        try:
            parse_entry(tail)
        except InputError:
            return lines, tail
        lines.append(tail)
    return lines, b""


def parse_entry(line: bytes, where: str = "ledger entry") -> dict[str, Any]:
    """Parse and type-check one ledger line; :class:`InputError` naming ``where`` if bad.

    The line must be the canonical JSON of its object (so any byte edit that keeps valid
    JSON is still caught), with every field of the entry format and the right types.
    """
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{where}: not UTF-8 (corrupted)") from None
    try:
        obj = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        raise InputError(f"{where}: not valid JSON (truncated or corrupted)") from None
    if not isinstance(obj, dict):
        raise InputError(f"{where}: not a JSON object")
    try:
        canon = canonical_json(obj)
    except (ValueError, TypeError):
        raise InputError(f"{where}: not canonical JSON") from None
    if canon != line:
        raise InputError(f"{where}: not in canonical form (edited)")
    if set(obj) != set(_FIELDS):
        extra = sorted(set(obj) ^ set(_FIELDS))
        raise InputError(f"{where}: unexpected or missing field {extra[0]!r}")
    for k, typ in _FIELDS.items():
        v = obj[k]
        if isinstance(v, bool) or not isinstance(v, typ):
            raise InputError(f"{where}: field {k!r} has the wrong type ({type(v).__name__})")
    if obj["v"] != ENTRY_VERSION:
        raise InputError(f"{where}: unsupported entry version {obj['v']!r}")
    for k in ("prev", "bundle"):
        if not _HEX64.match(obj[k]):
            raise InputError(f"{where}: field {k!r} is not a sha256 hex digest")
    for k in ("file_sha256", "key_id"):
        if obj[k] is not None and not _HEX64.match(obj[k]):
            raise InputError(f"{where}: field {k!r} is not a sha256 hex digest")
    try:
        for k in ("cost", "cumulative") + (("cap",) if obj["cap"] is not None else ()):
            PrivacyCost.from_dict(obj[k])
    except MargError as exc:
        raise InputError(f"{where}: bad privacy field ({exc})") from None
    for st in obj["statistics"]:
        if not isinstance(st, dict) or not isinstance(st.get("name"), str) or not isinstance(st.get("clique"), list):
            raise InputError(f"{where}: malformed statistics list")
    return obj


# ---------------------------------------------------------------------------------------
# verification report
# ---------------------------------------------------------------------------------------
@dataclass
class LedgerReport:
    """Outcome of :meth:`Ledger.verify`.

    Attributes
    ----------
    ledger : str
        The ledger file.
    ok : bool
        Whole chain, every signature and every given bundle check out.
    n_entries : int
        Complete entries read (all of them, also past a bad one).
    first_bad_line, first_bad_seq : int or None
        Where verification first failed (1-based line; the seq written there, if readable).
    reason : str or None
        One line naming the first bad entry (or bundle) and why.
    torn_tail : bool
        The file ended in an incomplete line (ignored; a crash of a non-atomic writer).
    head : str or None
        ``line_hash`` of the last complete entry: record it to detect later truncation.
    key_source : str
        Where the verification keys came from: ``"given"``, ``"ledger directory"``
        (self-attested copies) or ``"none"``.
    unsigned : list of int
        Seqs of entries without a signature.
    bundles : list of dict
        One ``{path, seq, ok}`` per bundle file checked.
    spent : dict
        Cumulative cost of the verified prefix (PrivacyCost.to_dict()).
    """

    ledger: str
    ok: bool = True
    n_entries: int = 0
    first_bad_line: int | None = None
    first_bad_seq: int | None = None
    reason: str | None = None
    torn_tail: bool = False
    head: str | None = None
    key_source: str = "none"
    unsigned: list[int] = field(default_factory=list)
    bundles: list[dict[str, Any]] = field(default_factory=list)
    spent: dict[str, Any] = field(default_factory=dict)

    def fail(self, line: int | None, seq: int | None, reason: str) -> None:
        if self.ok:
            self.ok = False
            self.first_bad_line, self.first_bad_seq, self.reason = line, seq, reason

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def message(self) -> str:
        """One line: ``ledger OK: ...`` or the first failure."""
        if self.ok:
            extra = " (ignored an incomplete last line)" if self.torn_tail else ""
            return f"ledger {self.ledger} OK: {self.n_entries} entries, head {short_id(self.head)}{extra}"
        return f"ledger {self.ledger} FAILED: {self.reason}"


# ---------------------------------------------------------------------------------------
# the ledger
# ---------------------------------------------------------------------------------------
class Ledger:
    """A site's append-only release ledger in directory ``directory``.

    Parameters
    ----------
    directory : path
        Created on the first append (mode 0700).
    """

    def __init__(self, directory: str | os.PathLike[str] = DEFAULT_LEDGER_DIR) -> None:
        self.directory = Path(directory)
        self.path = self.directory / LEDGER_FILE

    def __repr__(self) -> str:
        return f"Ledger({str(self.directory)!r})"

    # ------------------------------------------------------------------ reading
    def _read(self) -> tuple[list[bytes], bytes]:
        if self.directory.exists() and not self.directory.is_dir():
            raise InputError(f"ledger {str(self.directory)!r} is not a directory")
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return [], b""
        except OSError as exc:
            raise InputError(f"cannot read ledger {self.path}: {exc.strerror or exc}") from None
        return split_lines(data)

    def _parse_all(self, lines: Sequence[bytes]) -> list[dict[str, Any]]:
        return [parse_entry(ln, f"ledger {self.path} line {k}") for k, ln in enumerate(lines, 1)]

    def entries(self) -> list[dict[str, Any]]:
        """All complete entries, in order (an incomplete last line is ignored).

        Raises :class:`InputError` naming the line if a complete line is malformed (run
        :meth:`verify` for the full diagnosis).
        """
        lines, _ = self._read()
        return self._parse_all(lines)

    def spent(self) -> PrivacyCost:
        """Cumulative privacy cost of every recorded release (fields add; δ capped at 1).

        Recomputed from the entries' ``cost`` fields (not trusted from ``cumulative``).
        An exact release makes the spend unbounded (``inf``).

        Raises
        ------
        RefusedError
            The ledger is unreadable or malformed: the spend cannot be established, so no
            budget check can pass.
        """
        try:
            entries = self.entries()
        except InputError as exc:
            raise RefusedError(f"cannot establish privacy spend: {exc}") from None
        total = PrivacyCost.zero()
        for e in entries:
            total = total + PrivacyCost.from_dict(e["cost"])
        return total

    def cap(self) -> PrivacyCost | None:
        """The configured budget cap (``budget.json``), or None."""
        return read_budget(self.directory)

    # ------------------------------------------------------------------ writing
    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _store_key(self, pub: ed25519.Ed25519PublicKey) -> None:
        kdir = self.directory / KEYS_DIR
        target = kdir / f"{key_id(pub)}{SIGN_PUB_SUFFIX}"
        if target.exists():
            return
        kdir.mkdir(exist_ok=True, mode=0o700)
        pem = pub.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        atomic_write_bytes(target, pem)

    def _clean_stale(self) -> None:
        for p in self.directory.glob(f".{LEDGER_FILE}.*.tmp"):
            try:
                p.unlink()
            except OSError:
                pass

    def append(
        self,
        *,
        bundle_digest: str,
        site: str,
        statistics: Sequence[Mapping[str, Any]],
        cost: Any,
        recipient: str | None = None,
        recipient_name: str | None = None,
        mechanism: str | None = None,
        file_digest: str | None = None,
        n_rows: int | None = None,
        private_key: ed25519.Ed25519PrivateKey | None = None,
        cap: Any = None,
        time: str | None = None,
    ) -> dict[str, Any]:
        """Append one release entry, atomically; refuse it if the budget would be exceeded.

        Under an exclusive lock: read and verify the ledger from the site's checkpoint on
        (a contradiction or a line that does not verify refuses the append — never extend a
        broken chain), compute ``cumulative = spent + cost``, check it against the cap
        (``cap`` if given, else ``budget.json``; :func:`marginals.privacy.check_budget`), then
        append the entry as one fsynced line and update the checkpoint. Nothing is written if
        any step before the append fails.

        Parameters
        ----------
        bundle_digest : str
            ``Bundle.digest()`` of the signed bundle (sha256 hex).
        site : str
        statistics : list of dict
            ``{name, kind, clique, shape, mechanism, std}`` (see :func:`statistics_of`).
        cost : PrivacyCost or mapping {epsilon, delta, rho}
            This release's cost (``inf`` for exact releases).
        recipient : str, optional
            Key id of the learner's sealing key.
        recipient_name : str, optional
            The learner's name (e.g. the ``--to`` key file name before ``.seal.pub``).
        mechanism : str, optional
            Default: derived from ``statistics``.
        file_digest : str, optional
            sha256 hex of the file written, if it differs from the bundle (sealed).
        n_rows : int, optional
        private_key : Ed25519PrivateKey, optional
            Signs the entry (recommended; unsigned entries fail ``verify`` by default).
        cap : PrivacyCost or mapping, optional
            Overrides ``budget.json``.
        time : str, optional
            Default: now (UTC).

        Returns
        -------
        dict
            The entry as written.

        Raises
        ------
        RefusedError
            Budget exhausted, or the existing ledger is malformed.
        InputError
            Malformed arguments.
        """
        if not isinstance(bundle_digest, str) or not _HEX64.match(bundle_digest):
            raise InputError(f"bundle digest must be a sha256 hex string, got {bundle_digest!r}")
        if file_digest is not None and (not isinstance(file_digest, str) or not _HEX64.match(file_digest)):
            raise InputError(f"file digest must be a sha256 hex string, got {file_digest!r}")
        if not isinstance(site, str) or not site:
            raise InputError(f"site must be a non-empty string, got {site!r}")
        if private_key is not None and not isinstance(private_key, ed25519.Ed25519PrivateKey):
            raise InputError(f"ledger entries are signed with an Ed25519 private key, got {type(private_key).__name__}")
        c = _as_cost(cost, "release cost")
        stats = [dict(s) for s in statistics]
        for s in stats:
            if not isinstance(s.get("name"), str) or not isinstance(s.get("clique"), list):
                raise InputError(f"malformed statistic record {s!r} (needs name and clique list)")
        with self._locked():
            cap_cost = _as_cost(cap, "budget cap") if cap is not None else self.cap()
            st = self._verified_state(private_key, cap_cost)
            spent, n_entries, last_line = st.spent, st.n, st.last
            if cap_cost is not None:
                check_budget(cap_cost, spent, c)
            entry: dict[str, Any] = {
                "v": ENTRY_VERSION,
                "seq": n_entries + 1,
                "time": time or _now(),
                "prev": line_hash(last_line) if last_line is not None else GENESIS,
                "site": site,
                "recipient": recipient,
                "recipient_name": recipient_name,
                "bundle": bundle_digest,
                "file_sha256": file_digest,
                "n_rows": None if n_rows is None else int(n_rows),
                "statistics": stats,
                "mechanism": mechanism or _mechanism(stats),
                "cost": c.to_dict(),
                "cumulative": (spent + c).to_dict(),
                "cap": cap_cost.to_dict() if cap_cost is not None else None,
                "key_id": key_id(private_key) if private_key is not None else None,
                "signature": None,
            }
            if private_key is not None:
                entry["signature"] = b64(sign_bytes(entry_signing_bytes(entry), private_key))
                self._store_key(private_key.public_key())
            line = canonical_json(entry)
            parse_entry(line, "new ledger entry")  # the writer obeys its own format
            self._clean_stale()
            start = checkpoint.append_line(self.path, line, st.size, st.torn)
            checkpoint.update(self.path, n_entries + 1, line_hash(line), entry["cap"], start=start,
                              cumulative=entry["cumulative"], kid=entry["key_id"])
        return entry

    def _verified_state(self, private_key: Any, cap_cost: PrivacyCost | None) -> "checkpoint.State":
        """The ledger's state for an append, verified: from the site's checkpoint on (the
        entries after it; O(1) in the ledger's length), or the whole file when there is no
        usable checkpoint. Refuses a ledger that contradicts its checkpoint or does not verify
        (chain, sums, signatures against the exporting key)."""
        keys = self._keys(private_key)[0] if private_key is not None else self._keys(None)[0]
        checkpoint.check_key(self.path, key_id(private_key) if private_key is not None else None)
        st = checkpoint.read_state(self.path, cap_cost.to_dict() if cap_cost is not None else None, line_hash)
        report = LedgerReport(ledger=str(self.path))
        if st.pinned is None:  # no checkpoint: the whole file
            _check_chain(report, st.lines, keys, allow_unsigned=True)
            total = PrivacyCost.from_dict(report.spent) if report.spent else PrivacyCost.zero()
        else:
            try:
                pin = parse_entry(st.pinned, f"ledger {self.path} entry {st.pinned_seq}")
            except InputError as exc:
                raise RefusedError(f"refusing to append to a malformed ledger: {exc}") from None
            _check_chain(report, st.lines, keys, allow_unsigned=True, start=st.pinned_seq + 1,
                         prev=line_hash(st.pinned), total=PrivacyCost.from_dict(pin["cumulative"]))
            total = PrivacyCost.from_dict(report.spent) if report.spent else PrivacyCost.from_dict(pin["cumulative"])
        if not report.ok:
            raise RefusedError(f"refusing to append to a ledger that does not verify: {report.reason}")
        st.spent = total
        return st

    def record(
        self,
        bundle: Any,
        private_key: ed25519.Ed25519PrivateKey | None = None,
        file_digest: str | None = None,
        cap: Any = None,
        cost: Any = None,
        recipient_name: str | None = None,
    ) -> dict[str, Any]:
        """Append the entry for a (final, signed) bundle: site, recipient, statistics,
        cost and digest are read from it.

        The cost is ``cost`` if given, else the bundle header's ``privacy`` field, else
        :func:`marginals.privacy.release_cost` of its tables; a bundle holding an exact
        (noise-free) table always costs ``inf`` (no DP guarantee).

        Call it *before* writing the bundle file: if the export then crashes, the ledger
        over-states what left (safe), never under-states it.
        """
        if cost is None:
            try:
                cost = _as_cost(bundle.header.get("privacy"), "bundle privacy")
            except MargError:
                cost = release_cost(bundle.tables)
        c = _as_cost(cost, "release cost")
        stats = statistics_of(bundle)
        if any(s["mechanism"] == "none" for s in stats):
            c = PrivacyCost.unbounded()
        return self.append(
            bundle_digest=bundle.digest(),
            site=bundle.site,
            statistics=stats,
            cost=c,
            recipient=bundle.header.get("recipient"),
            recipient_name=recipient_name,
            file_digest=file_digest,
            n_rows=bundle.header.get("n_rows"),
            private_key=private_key,
            cap=cap,
        )

    # ------------------------------------------------------------------ verifying
    def _keys(self, public_key: Any) -> tuple[dict[str, ed25519.Ed25519PublicKey], str]:
        keys: dict[str, ed25519.Ed25519PublicKey] = {}
        if public_key is None:
            kdir = self.directory / KEYS_DIR
            for f in sorted(kdir.glob(f"*{SIGN_PUB_SUFFIX}")) if kdir.is_dir() else []:
                try:
                    k = load_verify_key(f)
                except InputError:
                    continue  # a broken copy simply does not verify anything
                keys[key_id(k)] = k
            return keys, ("ledger directory" if keys else "none")
        items = public_key if isinstance(public_key, (list, tuple)) else [public_key]
        for item in items:
            if isinstance(item, (str, os.PathLike)):
                p = Path(item)
                files = sorted(p.glob(f"*{SIGN_PUB_SUFFIX}")) if p.is_dir() else [p]
                for f in files:
                    k = load_verify_key(f)
                    keys[key_id(k)] = k
            elif isinstance(item, ed25519.Ed25519PrivateKey):
                keys[key_id(item)] = item.public_key()
            elif isinstance(item, ed25519.Ed25519PublicKey):
                keys[key_id(item)] = item
            else:
                raise InputError(f"ledger verification key must be an Ed25519 public key or a path, got {type(item).__name__}")
        return keys, "given"

    def verify(
        self,
        bundle_paths: Sequence[str | os.PathLike[str]] | None = None,
        public_key: Any = None,
        allow_unsigned: bool = False,
    ) -> LedgerReport:
        """Check the hash chain, every signature, the running totals and the given bundles.

        Per line k: a parseable canonical entry; ``seq == k``; ``prev`` = hash of line
        k−1 (genesis zeros for k = 1); a valid Ed25519 signature by a known key (unless
        ``allow_unsigned``); ``cumulative`` = sum of the costs so far; not over its
        recorded cap. Then each bundle file must match an entry (its sha256 equals the
        entry's ``bundle`` or ``file_sha256``; a plain bundle must also agree on site,
        recipient and statistics).

        Parameters
        ----------
        bundle_paths : sequence of paths, optional
            Released bundle files (plain or sealed) to account for.
        public_key : Ed25519PublicKey, path to a ``.sign.pub`` or a directory of them, or
            a list of those; optional
            Default: the key copies in ``DIR/keys`` (self-attested; pass the site's
            public key from an independent copy for a real audit).
        allow_unsigned : bool, default False

        Returns
        -------
        LedgerReport
            Never raises for ledger *content* problems; ``report.ok`` and
            ``report.reason`` name the first bad entry.
        """
        if not self.directory.is_dir():
            raise InputError(f"no ledger directory at {str(self.directory)!r}")
        report = LedgerReport(ledger=str(self.path))
        lines, tail = self._read()
        report.n_entries = len(lines)
        report.torn_tail = bool(tail)
        report.head = line_hash(lines[-1]) if lines else None
        keys, report.key_source = self._keys(public_key)
        parsed = _check_chain(report, lines, keys, allow_unsigned)
        if bundle_paths:
            self._verify_bundles(report, [e for e in parsed if e is not None], bundle_paths)
        return report

    def _verify_bundles(self, report: LedgerReport, entries: list[dict[str, Any]], paths: Sequence[Any]) -> None:
        from .bundle import Bundle

        by_digest: dict[str, dict[str, Any]] = {}
        for e in entries:
            by_digest.setdefault(e["bundle"], e)
            if e["file_sha256"]:
                by_digest.setdefault(e["file_sha256"], e)
        for p in paths:
            p = Path(p)
            try:
                data = p.read_bytes()
            except OSError as exc:
                report.bundles.append({"path": str(p), "seq": None, "ok": False})
                report.fail(None, None, f"bundle {p}: cannot read ({exc.strerror or exc})")
                continue
            digest = hashlib.sha256(data).hexdigest()
            e = by_digest.get(digest)
            if e is None:
                report.bundles.append({"path": str(p), "seq": None, "ok": False})
                report.fail(None, None, f"bundle {p} (sha256 {short_id(digest)}) has no ledger entry "
                            "(released without record, or its entry was deleted)")
                continue
            ok = True
            if digest == e["bundle"]:
                try:
                    b = Bundle.from_bytes(data, source=str(p))
                except InputError as exc:
                    ok = False
                    report.fail(None, e["seq"], f"bundle {p}: matches entry seq {e['seq']} but does not parse ({exc})")
                else:
                    stats = [{k: s[k] for k in ("name", "clique", "shape")} for s in statistics_of(b)]
                    want = [{k: s.get(k) for k in ("name", "clique", "shape")} for s in e["statistics"]]
                    if b.site != e["site"] or b.header.get("recipient") != e["recipient"] or stats != want:
                        ok = False
                        report.fail(None, e["seq"], f"bundle {p}: contents differ from entry seq {e['seq']} (site, recipient or statistics)")
            report.bundles.append({"path": str(p), "seq": e["seq"], "ok": ok})


def _check_chain(
    report: LedgerReport,
    lines: Sequence[bytes],
    keys: Mapping[str, ed25519.Ed25519PublicKey],
    allow_unsigned: bool,
    start: int = 1,
    prev: str = GENESIS,
    total: PrivacyCost | None = None,
) -> list[dict[str, Any] | None]:
    """Check every line (format, seq, prev hash, signature, sums, cap) into ``report``;
    return the parsed entries (None where a line does not parse). ``lines`` may be a
    ledger's tail: its first line is entry ``start``, ``prev`` the hash of the line before it
    and ``total`` the cumulative spend before it."""
    parsed: list[dict[str, Any] | None] = []
    total = PrivacyCost.zero() if total is None else total
    for k, ln in enumerate(lines, start):
        try:
            e = parse_entry(ln, f"line {k}")
        except InputError as exc:
            report.fail(k, None, f"line {k}: malformed entry ({str(exc).split(': ', 1)[-1]}): truncated or edited")
            parsed.append(None)
            prev = line_hash(ln)
            continue
        parsed.append(e)
        seq = e["seq"]
        if seq != k:
            what = "deleted" if seq > k else "reordered or duplicated"
            report.fail(k, seq, f"entry seq {seq} at line {k}: expected seq {k} (an entry was {what})")
        if e["prev"] != prev:
            report.fail(k, seq, f"entry seq {seq} at line {k}: previous-entry hash does not match line {k - 1} "
                        "(an earlier entry was edited, deleted or reordered)")
        if e["signature"] is None or e["key_id"] is None:
            report.unsigned.append(seq)
            if not allow_unsigned:
                report.fail(k, seq, f"entry seq {seq} at line {k}: unsigned")
        else:
            pub = keys.get(e["key_id"])
            sig = unb64(e["signature"], 64)
            if pub is None:
                report.fail(k, seq, f"entry seq {seq} at line {k}: signed by unknown key {short_id(e['key_id'])}")
            elif sig is None or not verify_bytes(entry_signing_bytes(e), sig, pub):
                report.fail(k, seq, f"entry seq {seq} at line {k}: bad signature (entry edited)")
        cost = PrivacyCost.from_dict(e["cost"])
        before, total = total, total + cost
        if not _same_cost(total, PrivacyCost.from_dict(e["cumulative"])):
            report.fail(k, seq, f"entry seq {seq} at line {k}: cumulative spend {PrivacyCost.from_dict(e['cumulative']).describe()} "
                        f"does not equal the sum of costs {total.describe()}")
        if e["cap"] is not None:
            cap = PrivacyCost.from_dict(e["cap"])
            try:
                check_budget(cap, before, cost)
            except MargError:
                report.fail(k, seq, f"entry seq {seq} at line {k}: cumulative spend {total.describe()} exceeds its cap {cap.describe()}")
        prev = line_hash(ln)
    report.spent = total.to_dict()
    return parsed


def verify_ledger_bytes(
    data: bytes,
    keys: Mapping[str, ed25519.Ed25519PublicKey],
    allow_unsigned: bool = False,
    name: str = "ledger",
) -> LedgerReport:
    """Verify ledger file contents against ``{key id: Ed25519 public key}``.

    The pure core of :meth:`Ledger.verify` (no bundle checks). Never raises for any
    ``data``: the outcome is in the returned :class:`LedgerReport`.
    """
    lines, tail = split_lines(bytes(data))
    report = LedgerReport(ledger=name, n_entries=len(lines), torn_tail=bool(tail),
                          head=line_hash(lines[-1]) if lines else None,
                          key_source="given" if keys else "none")
    _check_chain(report, lines, keys, allow_unsigned)
    return report
