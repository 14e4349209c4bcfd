"""The site's release ledger: an append-only, hash-chained, signed file with a signed checkpoint.

Layout of a ledger folder ``DIR``::

    DIR/ledger.jsonl       one canonical-JSON entry per line (:mod:`protocols.ledger_format`)
    DIR/checkpoint.json    the state after the last entry, signed (:mod:`protocols.ledger_state`)
    DIR/rounds/ID          one empty file per learner's round a release answered
    DIR/.lock              advisory lock serialising appends

The **privacy cap lives in the chain** (a signed ``cap`` entry, :meth:`Ledger.set_cap`), so
editing or deleting a side file cannot raise it. A site configured with ``marg audit init``
(:mod:`protocols.site`) pins its key: every entry and checkpoint must be signed by it, and the
configuration keeps the last checkpoint's head, so a deleted, truncated, rolled-back or
re-signed ledger is refused before anything is appended.

**O(1) appends.** :meth:`Ledger.append` holds an exclusive ``flock``; reads and verifies the
checkpoint (signature under the pinned key; the file is at least as long as it says and its
line there hashes to its head); verifies any complete lines past it (an append that crashed
after writing its line); drops a torn tail (a crashed partial write, never an entry); checks
the new entry against the state (:func:`protocols.ledger_state.apply_entry`: chain, budget,
rounds, exact releases) — nothing is written if it is refused; then appends the line with one
``write`` + ``fsync`` (``O_APPEND``), writes the new checkpoint atomically (temp + fsync +
rename) and the site configuration's head. A crash anywhere leaves the old ledger, or the old
ledger plus one whole entry (accounted at the next append), plus possibly a torn tail or a
stale temp file. Cost: independent of the number of entries.

**A round is answered once.** A release for a learner's round (:mod:`protocols.rounds`)
creates ``DIR/rounds/ID`` (``O_EXCL``, under the lock, before its line is written); a second
release for the same round id is refused, so a learner cannot make the site mask or release
twice under one round (for secure aggregation that would leak the difference of the two
vectors). A crash after the marker and before the line burns the round id: refusing is the
safe side. A ledger without a checkpoint
(written by an older marg, or the checkpoint deleted) is verified in full once.

**What verification proves** (:meth:`Ledger.verify`, ``marg audit verify``): every line, its
chain link, its signature under the pinned (or given) key and every rule of
:func:`~protocols.ledger_state.apply_entry`; that the checkpoint and the configuration's head
are states of this chain. Appends check the checkpoint and the lines after it, not every line:
an edit deep inside the file cannot change the spend an append sees (that comes from the signed
checkpoint), and ``marg audit verify`` finds it.
"""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from cryptography.hazmat.primitives.asymmetric import ed25519

from marg._util import atomic_write_bytes, canonical_json
from marg.errors import InputError, MargError, RefusedError
from marg.marginals.accounting import PrivacyCost, check_budget
from marg.marginals.budget_file import BUDGET_FILE, read_budget
from marg.marginals.privacy import release_cost

from .exact_releases import release_digests
from .keys import key_id, load_verify_key, short_id
from .ledger_format import (
    ENTRY_VERSION,
    GENESIS,
    HEX64,
    LEDGER_FILE,
    ROUND_ID,
    entry_signing_bytes,
    kind_of,
    line_hash,
    parse_entry,
    split_lines,
    statistics_of,
)
from .ledger_state import CHECKPOINT_FILE, LedgerState, _apply_exact, apply_entry, checkpoint_bytes, parse_checkpoint
from .ledger_verify import LedgerReport, verify_ledger
from .signing import b64, sign_bytes, unb64, verify_bytes

DEFAULT_LEDGER_DIR = "marg-ledger"
LOCK_FILE = ".lock"
ROUNDS_DIR = "rounds"
_CHUNK = 1 << 16

__all__ = ["DEFAULT_LEDGER_DIR", "GENESIS", "LEDGER_FILE", "Ledger", "LedgerReport", "LedgerState",
           "entry_signing_bytes", "line_hash", "parse_entry", "statistics_of"]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _as_cost(x: Any, what: str) -> PrivacyCost:
    if isinstance(x, PrivacyCost):
        return x
    if isinstance(x, Mapping):
        return PrivacyCost.from_dict(x)
    raise InputError(f"{what} must be a privacy cost {{epsilon, delta, rho}}, got {x!r}")


def _pub(key: Any) -> ed25519.Ed25519PublicKey | None:
    if key is None or isinstance(key, ed25519.Ed25519PublicKey):
        return key
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return key.public_key()
    if isinstance(key, (str, os.PathLike)):
        return load_verify_key(key)
    raise InputError(f"ledger key must be an Ed25519 public key or a .sign.pub path, got {type(key).__name__}")


def _line_ending_at(fh: Any, end: int) -> bytes:
    """The line that ends (with its ``"\\n"``) at byte ``end`` of an open file, without the newline.

    Reads backwards in 64 KiB chunks: the cost is one line's length, not the file's.
    Returns ``b"\\x00"`` (which hashes to no head) when ``end`` is not a line boundary.
    """
    if end <= 0:
        return b"\x00"
    fh.seek(end - 1)
    if fh.read(1) != b"\n":
        return b"\x00"
    buf, pos = b"", end - 1
    while pos > 0:
        start = max(0, pos - _CHUNK)
        fh.seek(start)
        buf = fh.read(pos - start) + buf
        pos = start
        cut = buf.rfind(b"\n")
        if cut >= 0:
            return buf[cut + 1:]
    return buf


class Ledger:
    """A site's append-only release ledger in folder ``directory``.

    Parameters
    ----------
    directory : path
        Created on the first append (mode 0700).
    public_key : Ed25519PublicKey or path to ``SITE.sign.pub``, optional
        The pinned key every entry must be signed by. Default: the site configuration's,
        when ``site`` is given.
    site : protocols.site.SiteConfig, optional
        The site's configuration when this is its configured ledger: pins its key and
        records the head after each append (rollback detection).
    """

    def __init__(self, directory: str | os.PathLike[str] = DEFAULT_LEDGER_DIR, public_key: Any = None, site: Any = None) -> None:
        self.directory = Path(directory)
        self.path = self.directory / LEDGER_FILE
        self.checkpoint_path = self.directory / CHECKPOINT_FILE
        self.site = site
        pub = _pub(public_key)
        if pub is None and site is not None:
            pub = site.public_key
        self.public_key = pub

    def __repr__(self) -> str:
        return f"Ledger({str(self.directory)!r})"

    # ------------------------------------------------------------------ reading
    def _check_dir(self) -> None:
        if self.directory.exists() and not self.directory.is_dir():
            raise InputError(f"ledger {str(self.directory)!r} is not a directory")

    def read_lines(self) -> tuple[list[bytes], bytes]:
        """All complete lines and the torn tail (reads the whole file)."""
        self._check_dir()
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return [], b""
        except OSError as exc:
            raise InputError(f"cannot read ledger {self.path}: {exc.strerror or exc}") from None
        return split_lines(data)

    def entries(self) -> list[dict[str, Any]]:
        """All complete entries, in order; :class:`InputError` naming the line if one is malformed."""
        lines, _ = self.read_lines()
        return [parse_entry(ln, f"ledger {self.path} line {k}") for k, ln in enumerate(lines, 1)]

    def _keys(self, signer: ed25519.Ed25519PrivateKey | None = None) -> dict[str, ed25519.Ed25519PublicKey] | None:
        pub = self.public_key or (signer.public_key() if signer is not None else None)
        return None if pub is None else {key_id(pub): pub}

    def _check_signature(self, e: Mapping[str, Any], keys: Mapping[str, ed25519.Ed25519PublicKey] | None, where: str) -> None:
        if e["signature"] is None or e["key_id"] is None:
            if self.public_key is not None:
                raise RefusedError(f"{where}: unsigned entry in a ledger pinned to key {short_id(key_id(self.public_key))}")
            return
        if keys is None:
            return
        pub = keys.get(e["key_id"])
        if pub is None:
            raise RefusedError(f"{where}: signed by key {short_id(e['key_id'])}, not the site's key "
                               f"{short_id(next(iter(keys)))} (re-signed or another site's ledger)")
        sig = unb64(e["signature"], 64)
        if sig is None or not verify_bytes(entry_signing_bytes(e), sig, pub):
            raise RefusedError(f"{where}: bad signature (entry edited)")

    def _fold(self, state: LedgerState, lines: Sequence[bytes], keys: Any) -> LedgerState:
        for ln in lines:
            where = f"ledger {self.path} entry {state.n + 1}"
            try:
                e = parse_entry(ln, where)
            except InputError as exc:
                raise RefusedError(f"refusing a malformed ledger: {exc}") from None
            self._check_signature(e, keys, where)
            state = apply_entry(state, e, ln)
        return state

    def _load_state(self, signer: ed25519.Ed25519PrivateKey | None = None, recording_cap: bool = False) -> tuple[LedgerState, int]:
        """The verified state and the file's length up to its last complete line.

        Raises RefusedError for a missing, truncated, edited, rolled-back or re-signed ledger.
        """
        self._check_dir()
        keys = self._keys(signer)
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            size = -1
        cp = None
        if self.checkpoint_path.exists():
            cp, _ = parse_checkpoint(self.checkpoint_path.read_bytes(), keys, str(self.checkpoint_path))
        if size < 0:
            if cp is not None and cp.n > 0:
                raise RefusedError(f"ledger {self.path} is missing, but its checkpoint records {cp.n} entries (deleted)")
            state, end = LedgerState(), 0
        elif cp is None:
            with open(self.path, "rb") as fh:
                lines, tail = split_lines(fh.read())
            state = self._fold(LedgerState(), lines, keys)
            end = state.size
        elif cp.spend is None:  # a checkpoint of an older marg: fold every line, then check it is a state of them
            with open(self.path, "rb") as fh:
                lines, tail = split_lines(fh.read())
            state = self._fold(LedgerState(), lines, keys)
            end = state.size
            with open(self.path, "rb") as fh:
                ok = cp.size <= end and (cp.n == 0 or line_hash(_line_ending_at(fh, cp.size)) == cp.head)
            if not ok:
                raise RefusedError(f"ledger {self.path} does not match its checkpoint at entry {cp.n} (edited or replaced)")
        else:
            state, end = self._resume(cp, size, keys)
        self._check_site_head(state)
        if state.cap is None and not recording_cap and (self.directory / BUDGET_FILE).exists():
            raise RefusedError(f"ledger {self.directory} has a cap in {BUDGET_FILE}, outside the signed chain (an older "
                               f"marg): record it with marg audit budget --ledger {self.directory} --key SITE.sign.key")
        if keys is not None and state.key_id is not None and state.key_id not in keys:
            raise RefusedError(f"ledger {self.path} is signed by key {short_id(state.key_id)}, not {short_id(next(iter(keys)))}")
        return state, end

    def _resume(self, cp: LedgerState, size: int, keys: Any) -> tuple[LedgerState, int]:
        if size < cp.size:
            raise RefusedError(f"ledger {self.path} is shorter than its checkpoint records ({size} bytes, {cp.n} entries "
                               f"in {cp.size} bytes): truncated or edited")
        with open(self.path, "rb") as fh:
            if cp.n > 0 and line_hash(_line_ending_at(fh, cp.size)) != cp.head:
                raise RefusedError(f"ledger {self.path} does not match its checkpoint at entry {cp.n} (edited or replaced)")
            fh.seek(cp.size)
            lines, _tail = split_lines(fh.read())
        state = self._fold(cp, lines, keys)
        return state, state.size

    def _check_site_head(self, state: LedgerState) -> None:
        head = self.site.head if self.site is not None else None
        if not head:
            return
        if head["n"] > state.n:
            raise RefusedError(f"ledger {self.path} has {state.n} entries, but site {self.site.site!r} recorded "
                               f"{head['n']} ({self.site.path}): truncated, deleted or rolled back")
        if head["n"] > 0:
            with open(self.path, "rb") as fh:
                ok = head["size"] <= state.size and line_hash(_line_ending_at(fh, head["size"])) == head["hash"]
            if not ok:
                raise RefusedError(f"ledger {self.path} does not contain entry {head['n']} as site {self.site.site!r} "
                                   f"recorded it ({self.site.path}): replaced or rolled back")

    def state(self) -> LedgerState:
        """The verified current state (O(1) with a checkpoint); RefusedError if the ledger is not intact."""
        with self._locked(create=False):
            return self._load_state()[0]

    def spent(self) -> PrivacyCost:
        """Field sums of every recorded release's cost (from the verified state); the composed
        spend the cap holds is ``state().spend`` (:class:`marginals.accounting.Spend`)."""
        return self.state().cumulative

    def cap(self) -> PrivacyCost | None:
        """The cap in force (a signed ``cap`` entry of the chain), or None."""
        return self.state().cap

    def position(self) -> dict[str, Any]:
        """Where the next entry will stand, for the bundle's header (equivocation detection).

        Returns
        -------
        dict
            ``{"seq": n + 1, "prev": head after entry n, "origin": line hash of entry 1 (null
            while the ledger is empty), "prev_bundle": the bundle digest entry n records (null
            for a cap entry or an empty ledger)}``. The learner keeps these per signing key
            (:mod:`protocols.history`): two bundles at one position, a position going back, or
            a bundle whose ``prev_bundle``/``origin`` disagrees with what it received are forks.
            :meth:`record` refuses the entry if the ledger moved since (a concurrent export).
        """
        with self._locked(create=False):
            state, _end = self._load_state()
            origin = prev_bundle = None
            if state.n > 0:
                with open(self.path, "rb") as fh:
                    first = fh.readline().rstrip(b"\n")
                    last = _line_ending_at(fh, state.size)
                origin = line_hash(first)
                prev_bundle = parse_entry(last, f"ledger {self.path} entry {state.n}").get("bundle")
        return {"seq": state.n + 1, "prev": state.head, "origin": origin, "prev_bundle": prev_bundle}

    def check(self, cost: Any, round_id: str | None = None) -> None:
        """Refuse now (before any data is read) a release of ``cost`` the budget would refuse,
        or one for a round this site already answered."""
        state = self.state()
        if state.cap is not None:
            check_budget(state.cap, state.spend, _as_cost(cost, "release cost"))
        if round_id is not None:
            self.mark_round(round_id, create=False)

    def mark_round(self, round_id: str, create: bool = True) -> Path:
        """Refuse a round this site already answered; with ``create``, mark it answered
        (``DIR/rounds/ID``, created exclusively). Returns the marker's path."""
        if not isinstance(round_id, str) or not ROUND_ID.match(round_id):
            raise InputError(f"malformed round id {round_id!r}")
        marker = self.directory / ROUNDS_DIR / round_id
        if marker.exists():
            raise RefusedError(f"round {round_id} was already answered by this site (ledger {self.directory}): a reused "
                               "or replayed round; ask the learner for a new one")
        if create:
            marker.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            try:
                os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            except FileExistsError:
                raise RefusedError(f"round {round_id} was already answered by this site (ledger {self.directory})") from None
        return marker

    # ------------------------------------------------------------------ writing
    @contextmanager
    def _locked(self, create: bool = True) -> Iterator[None]:
        if not self.directory.is_dir():
            if not create:
                yield
                return
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _clean_stale(self) -> None:
        for p in self.directory.glob(".*.tmp"):
            try:
                p.unlink()
            except OSError:
                pass

    def _write(self, entry: dict[str, Any], private_key: ed25519.Ed25519PrivateKey | None,
               position: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Under the lock: verify the state, check and append ``entry``, checkpoint it.

        ``position`` (:meth:`position`, signed into the bundle): refused unless the entry
        lands exactly there."""
        if private_key is not None and not isinstance(private_key, ed25519.Ed25519PrivateKey):
            raise InputError(f"ledger entries are signed with an Ed25519 private key, got {type(private_key).__name__}")
        if self.public_key is not None and (private_key is None or key_id(private_key) != key_id(self.public_key)):
            have = "no key" if private_key is None else f"key {short_id(key_id(private_key))}"
            raise RefusedError(f"ledger {self.directory} is pinned to key {short_id(key_id(self.public_key))}; "
                               f"refusing an entry signed with {have}")
        with self._locked():
            state, end = self._load_state(private_key, recording_cap=kind_of(entry) == "cap")
            if state.key_id is not None and private_key is None:
                raise RefusedError(f"ledger {self.path} is signed by key {short_id(state.key_id)}; sign this entry too (--key)")
            if position is not None and (position.get("seq") != state.n + 1 or position.get("prev") != state.head):
                raise RefusedError(f"ledger {self.directory} moved during the export (the bundle states position "
                                   f"{position.get('seq')}, the next entry is {state.n + 1}): nothing written; export again")
            entry.update(seq=state.n + 1, prev=state.head)
            if kind_of(entry) == "release":
                entry["cumulative"] = (state.cumulative + PrivacyCost.from_dict(entry["cost"])).to_dict()
                entry["cap"] = None if state.cap is None else state.cap.to_dict()
            else:
                entry["cumulative"] = state.cumulative.to_dict()
            entry["key_id"] = key_id(private_key) if private_key is not None else None
            entry["signature"] = None
            if private_key is not None:
                entry["signature"] = b64(sign_bytes(entry_signing_bytes(entry), private_key))
            line = canonical_json(entry)
            parse_entry(line, "new ledger entry")  # the writer obeys its own format
            new = apply_entry(state, entry, line)  # refuses (budget, exact releases) before any byte is written
            marker = self.mark_round(entry["round"], create=True) if entry.get("round") else None
            self._clean_stale()
            try:
                self._append_line(line, end)
            except BaseException:
                if marker is not None:
                    marker.unlink()  # the entry was not written: the round is not answered
                raise
            # the line is durable; the checkpoint and the recorded head only need to be atomic: a crash
            # may leave the previous ones, which the next append extends (lines after the checkpoint
            # are verified, an older head is a prefix)
            atomic_write_bytes(self.checkpoint_path, checkpoint_bytes(new, private_key, entry["time"]), mode=0o600,
                               sync_dir=False)
            if self.site is not None and self.site.owns(self.directory) and private_key is not None:
                self.site = self.site.with_head(new.n, new.size, new.head)
                self.site.save(private_key, sync_dir=False)
        return entry

    def checkpoint(self, private_key: ed25519.Ed25519PrivateKey) -> LedgerState:
        """Verify the ledger (in full if it has no checkpoint yet) and write its signed checkpoint.

        ``marg audit init`` runs it once, so a ledger written by an older marg (no checkpoint,
        maybe unsigned entries) is taken over only after it verifies.
        """
        with self._locked():
            state, _ = self._load_state(private_key)
            if state.key_id is not None and state.key_id != key_id(private_key):
                raise RefusedError(f"ledger {self.path} is signed by key {short_id(state.key_id)}, not {short_id(key_id(private_key))}")
            atomic_write_bytes(self.checkpoint_path, checkpoint_bytes(state, private_key, _now()), mode=0o600)
            if self.site is not None and self.site.owns(self.directory):
                self.site = self.site.with_head(state.n, state.size, state.head)
                self.site.save(private_key)
        return state

    def _append_line(self, line: bytes, end: int) -> None:
        created = not self.path.exists()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            if os.fstat(fd).st_size != end:
                os.ftruncate(fd, end)  # drop a torn tail left by a crashed append
            data = line + b"\n"
            while data:
                n = os.write(fd, data)
                data = data[n:]
            os.fsync(fd)
        finally:
            os.close(fd)
        if created:
            dfd = os.open(self.directory, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)

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
        time: str | None = None,
        source: Mapping[str, Any] | None = None,
        round: str | None = None,
        exact: Mapping[str, str] | None = None,
        suppressed: int = 0,
        position: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Append one release entry; refuse it (writing nothing) if a rule forbids it.

        Parameters
        ----------
        bundle_digest : ``Bundle.digest()`` of the signed bundle (sha256 hex)
        site : the releasing site
        statistics : ``{name, kind, clique, shape, mechanism, std}`` per table (:func:`statistics_of`)
        cost : PrivacyCost or {epsilon, delta, rho}; ``inf`` for exact releases
        recipient, recipient_name : the learner's sealing key id and name, if sealed
        mechanism : default derived from ``statistics``
        file_digest : sha256 hex of the file written, if it differs from the bundle (sealed)
        n_rows : the row count the bundle states
        private_key : the site's signing key (required for a signed or pinned ledger)
        time : default now (UTC)
        source : where the site counted (``Source.describe()``)
        round : the learner's round id answered (refused if already answered)
        exact : :func:`protocols.exact_releases.release_digests` of an exact release
        suppressed : cells suppressed by the min-cell rule
        position : the bundle's stated ledger position (:meth:`position`): refused if the entry would land elsewhere

        Returns
        -------
        dict
            The entry as written.

        Raises
        ------
        RefusedError
            Budget exhausted, a replayed round, a differencing exact release, or a ledger
            that is not intact (missing, truncated, edited, re-signed).
        """
        for name, v in (("bundle digest", bundle_digest), ("file digest", file_digest)):
            if v is not None and (not isinstance(v, str) or not HEX64.match(v)):
                raise InputError(f"{name} must be a sha256 hex string, got {v!r}")
        if bundle_digest is None:
            raise InputError("a release entry needs the bundle digest")
        if not isinstance(site, str) or not site:
            raise InputError(f"site must be a non-empty string, got {site!r}")
        stats = [dict(s) for s in statistics]
        for s in stats:
            if not isinstance(s.get("name"), str) or not isinstance(s.get("clique"), list):
                raise InputError(f"malformed statistic record {s!r} (needs name and clique list)")
        mechs = sorted({str(s.get("mechanism", "none")) for s in stats})
        entry: dict[str, Any] = {
            "v": ENTRY_VERSION, "kind": "release", "time": time or _now(), "site": site,
            "recipient": recipient, "recipient_name": recipient_name, "bundle": bundle_digest,
            "file_sha256": file_digest, "n_rows": None if n_rows is None else int(n_rows), "statistics": stats,
            "mechanism": mechanism or (mechs[0] if len(mechs) == 1 else ("mixed" if mechs else "none")),
            "cost": _as_cost(cost, "release cost").to_dict(), "source": dict(source) if source else None,
            "round": round or None, "exact": dict(exact) if exact else None,
            "suppressed": int(suppressed),
        }
        return self._write(entry, private_key, position)

    def set_cap(self, cap: Any, private_key: ed25519.Ed25519PrivateKey, site: str, time: str | None = None) -> dict[str, Any]:
        """Record the dataset's privacy cap as a signed ``cap`` entry (or lower it; never raise it).

        A cap needs a signing key: an unsigned cap could be edited away.
        """
        c = _as_cost(cap, "budget cap")
        if c.epsilon == 0.0 and c.rho == 0.0:
            raise InputError(f"privacy budget cap sets neither epsilon nor rho: {c.describe()}")
        if c.epsilon == float("inf") or c.rho == float("inf"):
            raise InputError(f"privacy budget cap must be finite, got {c.describe()}")
        if private_key is None:
            raise InputError("a privacy cap is recorded signed: give the site's key (--key SITE.sign.key)")
        legacy = read_budget(self.directory) if (self.directory / BUDGET_FILE).exists() else None
        if legacy is not None and legacy != c:
            raise RefusedError(f"{self.directory / BUDGET_FILE} sets cap {legacy.describe()}; record that one "
                               f"(requested {c.describe()})")
        entry: dict[str, Any] = {
            "v": ENTRY_VERSION, "kind": "cap", "time": time or _now(), "site": site, "recipient": None,
            "recipient_name": None, "bundle": None, "file_sha256": None, "n_rows": None, "statistics": [],
            "mechanism": "none", "cost": PrivacyCost.zero().to_dict(), "cap": c.to_dict(), "source": None,
            "round": None, "exact": None, "suppressed": 0,
        }
        out = self._write(entry, private_key)
        if legacy is not None:
            os.replace(self.directory / BUDGET_FILE, self.directory / f"{BUDGET_FILE}.recorded")
        return out

    def record(
        self,
        bundle: Any,
        private_key: ed25519.Ed25519PrivateKey | None = None,
        file_digest: str | None = None,
        cost: Any = None,
        recipient_name: str | None = None,
        suppressed: Sequence[Any] = (),
        round: str | None = None,
    ) -> dict[str, Any]:
        """Append the entry for a (final, signed) bundle: site, recipient, statistics, source,
        cost and digest are read from it; an exact release also records what it disclosed.

        The cost is ``cost`` if given, else the header's ``privacy``, else
        :func:`marginals.privacy.release_cost` of its tables; a bundle holding an exact table
        always costs ``inf``. Call it *before* writing the bundle file: a crash then leaves a
        ledger that over-states what left, never one that under-states it.

        Parameters
        ----------
        suppressed : the min-cell rule's suppressed cells (``SuppressedCell``: ``table``, ``cell``)
        round : the round id answered (default: the header's ``round``)

        The bundle's ``ledger`` header field (its position, :meth:`position`), if any, must be
        where the entry lands.
        """
        if cost is None:
            try:
                cost = _as_cost(bundle.header.get("privacy"), "bundle privacy")
            except MargError:
                cost = release_cost(bundle.tables)
        stats, c, exact = _release_facts(bundle, cost, suppressed)
        return self.append(
            bundle_digest=bundle.digest(), site=bundle.site, statistics=stats, cost=c,
            recipient=bundle.header.get("recipient"), recipient_name=recipient_name, file_digest=file_digest,
            n_rows=bundle.header.get("n_rows"), private_key=private_key, source=bundle.header.get("source"),
            round=round if round is not None else bundle.header.get("round"), exact=exact, suppressed=len(suppressed),
            position=bundle.header.get("ledger"),
        )

    def preview(self, bundle: Any, cost: Any, suppressed: Sequence[Any] = ()) -> LedgerState:
        """Refuse now what :meth:`record` would refuse for ``bundle`` (the budget, the exact-release
        rules), writing nothing: ``marg export --dry-run``. Returns the state before the release."""
        state = self.state()
        _, c, exact = _release_facts(bundle, cost, suppressed)
        if state.cap is not None:
            check_budget(state.cap, state.spend, c)
        if exact:
            _apply_exact(state, {"exact": exact, "site": bundle.site, "suppressed": len(suppressed), "seq": state.n + 1})
        return state

    # ------------------------------------------------------------------ verifying
    def verify(self, bundle_paths: Sequence[Any] | None = None, public_key: Any = None, allow_unsigned: bool = False,
               require_key: bool = True, head: str | None = None) -> LedgerReport:
        """Check every line, the checkpoint, the site's recorded head and the given bundles.

        Parameters
        ----------
        bundle_paths : released bundle files (plain or sealed), each must have its entry
        public_key : Ed25519PublicKey or ``.sign.pub`` path; default the pinned key
        allow_unsigned : accept unsigned entries (of an unpinned ledger)
        require_key : without any key, fail (signatures unchecked) when entries are signed
        head : a head hash recorded earlier (``marg audit show``): the chain must contain it

        Returns
        -------
        LedgerReport
            Never raises for ledger content; ``ok`` and ``reason`` name the first failure.
        """
        if not self.directory.is_dir():
            raise InputError(f"no ledger directory at {str(self.directory)!r}")
        pub = _pub(public_key) or self.public_key
        return verify_ledger(self, pub, bundle_paths or (), allow_unsigned, require_key, head)


def _release_facts(bundle: Any, cost: Any, suppressed: Sequence[Any]) -> tuple[list[dict[str, Any]], PrivacyCost, Any]:
    """What the ledger records of a release, for :meth:`Ledger.record` and :meth:`Ledger.preview` alike:
    its statistics, its cost (``inf`` when it holds an exact table) and the digests of what an exact
    release disclosed (scoped to held-out rows for an evaluation, else the study's rows)."""
    c = _as_cost(cost, "release cost")
    stats = statistics_of(bundle)
    if any(s["mechanism"] == "none" for s in stats):
        c = PrivacyCost.unbounded()
    hidden = sorted({getattr(s, "table", None) or s["table"] for s in suppressed})
    rows = "evaluation" if bundle.header.get("evaluation") else "study"
    exact = release_digests(bundle.tables, bundle.header.get("n_rows"), hidden, bundle.codebook, rows)
    return stats, c, exact
