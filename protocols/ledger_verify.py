"""Full verification of a ledger: every line, the checkpoint, recorded heads and bundle files.

:func:`verify_ledger` is what ``marg audit verify`` runs. It folds every line through
:func:`protocols.ledger_state.apply_entry` (the rules appends obey), checks each signature
under the site's pinned key (or one given independently — never keys found in the ledger
folder, which whoever rewrote the ledger could have put there), and then checks that the
signed checkpoint, the site configuration's recorded head and any head the auditor recorded
earlier are all states of this chain (so truncation and rollback show). It never raises for
ledger content: the :class:`LedgerReport` names the first failure.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from cryptography.hazmat.primitives.asymmetric import ed25519

from marg.errors import InputError, MargError

from .keys import key_id, short_id
from .ledger_format import entry_signing_bytes, kind_of, line_hash, parse_entry, split_lines, statistics_of
from .ledger_state import LedgerState, apply_entry, parse_checkpoint
from .signing import unb64, verify_bytes


@dataclass
class LedgerReport:
    """Outcome of :func:`verify_ledger`.

    Attributes
    ----------
    ledger : str
    ok : bool
        Every line, signature, rule, checkpoint, head and bundle checks out.
    n_entries : int
        Complete lines read.
    first_bad_line, first_bad_seq : int or None
    reason : str or None
        One line naming the first failure.
    torn_tail : bool
        The file ends in an incomplete line (a crashed append's partial write; ignored).
    head : str or None
        ``line_hash`` of the last entry: record it, and later pass it as ``head`` to detect
        truncation or rollback.
    key_source : str
        ``"given"``, ``"site configuration"`` or ``"none"`` (signatures unchecked).
    unsigned : list of int
        Seqs of unsigned entries.
    bundles : list of dict
        ``{path, seq, ok}`` per bundle file checked.
    spent : dict
        Field sums of the costs of the verified prefix (as its entries record them).
    spend : dict
        The composed spend of the verified prefix (:class:`marginals.accounting.Spend`).
    cap : dict or None
        The cap in force at the end of the verified prefix.
    checkpoint : int or None
        Entries the checkpoint records (None: no checkpoint).
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
    spend: dict[str, Any] = field(default_factory=dict)
    cap: dict[str, Any] | None = None
    checkpoint: int | None = None

    def fail(self, line: int | None, seq: int | None, reason: str) -> None:
        if self.ok:
            self.ok = False
            self.first_bad_line, self.first_bad_seq, self.reason = line, seq, reason

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def message(self) -> str:
        """One line: ``ledger ... OK: ...`` or the first failure."""
        if self.ok:
            extra = " (ignored an incomplete last line)" if self.torn_tail else ""
            return f"ledger {self.ledger} OK: {self.n_entries} entries, head {short_id(self.head)}{extra}"
        return f"ledger {self.ledger} FAILED: {self.reason}"


def check_lines(
    report: LedgerReport,
    lines: Sequence[bytes],
    keys: Mapping[str, ed25519.Ed25519PublicKey] | None,
    allow_unsigned: bool,
    require_key: bool = True,
) -> list[LedgerState]:
    """Check every line into ``report``; return the states after 0, 1, ..., k good entries.

    Folding stops at the first entry that breaks a rule (what follows builds on it), but
    every line is still parsed and counted.
    """
    states = [LedgerState()]
    broken = False
    for k, ln in enumerate(lines, 1):
        try:
            e = parse_entry(ln, f"line {k}")
        except InputError as exc:
            report.fail(k, None, f"line {k}: malformed entry ({str(exc).split(': ', 1)[-1]}): truncated or edited")
            broken = True
            continue
        seq = e["seq"]
        where = f"entry seq {seq} at line {k}"
        if e["signature"] is None or e["key_id"] is None:
            report.unsigned.append(seq)
            if not allow_unsigned:
                report.fail(k, seq, f"{where}: unsigned")
        elif keys is None:
            if require_key:
                report.fail(k, seq, f"{where}: signed by key {short_id(e['key_id'])}, but no key to check it was given "
                            "(--key SITE.sign.pub, from an independent copy)")
        else:
            pub = keys.get(e["key_id"])
            sig = unb64(e["signature"], 64)
            if pub is None:
                report.fail(k, seq, f"{where}: signed by key {short_id(e['key_id'])}, not the site's key "
                            f"{short_id(next(iter(keys)))} (re-signed, or another site's ledger)")
            elif sig is None or not verify_bytes(entry_signing_bytes(e), sig, pub):
                report.fail(k, seq, f"{where}: bad signature (entry edited)")
        if broken:
            continue
        try:
            states.append(apply_entry(states[-1], e, ln))
        except MargError as exc:
            msg = str(exc)
            report.fail(k, seq, msg if msg.startswith("entry seq") else f"{where}: {msg}")
            broken = True
    end = states[-1]
    report.spent = end.cumulative.to_dict()
    report.spend = end.spend.to_dict()
    report.cap = None if end.cap is None else end.cap.to_dict()
    return states


def verify_ledger_bytes(
    data: bytes,
    keys: Mapping[str, ed25519.Ed25519PublicKey] | None,
    allow_unsigned: bool = False,
    name: str = "ledger",
) -> LedgerReport:
    """Verify ledger file contents against ``{key id: public key}`` (the pure core; no
    checkpoint or bundles). Never raises for any ``data``."""
    lines, tail = split_lines(bytes(data))
    report = LedgerReport(ledger=name, n_entries=len(lines), torn_tail=bool(tail),
                          head=line_hash(lines[-1]) if lines else None,
                          key_source="given" if keys else "none")
    check_lines(report, lines, keys or None, allow_unsigned)
    return report


def verify_ledger(
    ledger: Any,
    public_key: ed25519.Ed25519PublicKey | None,
    bundle_paths: Sequence[Any] = (),
    allow_unsigned: bool = False,
    require_key: bool = True,
    head: str | None = None,
) -> LedgerReport:
    """Verify a :class:`protocols.ledger.Ledger` in full (see the module docstring)."""
    report = LedgerReport(ledger=str(ledger.path))
    lines, tail = ledger.read_lines()
    report.n_entries = len(lines)
    report.torn_tail = bool(tail)
    report.head = line_hash(lines[-1]) if lines else None
    keys = None if public_key is None else {key_id(public_key): public_key}
    if public_key is not None:
        given = ledger.site is None or key_id(public_key) != ledger.site.key_id
        report.key_source = "given" if given else "site configuration"
    states = check_lines(report, lines, keys, allow_unsigned, require_key)
    heads = {s.head: s.n for s in states}
    site = ledger.site
    if site is not None and site.head and site.owns(ledger.directory):
        if heads.get(site.head["hash"]) != site.head["n"]:
            report.fail(None, site.head["n"], f"the ledger does not contain entry {site.head['n']} as site "
                        f"{site.site!r} recorded it ({site.path}): truncated, deleted or rolled back")
    if ledger.checkpoint_path.exists():
        try:
            cp, _ = parse_checkpoint(ledger.checkpoint_path.read_bytes(), keys, str(ledger.checkpoint_path))
        except MargError as exc:
            report.fail(None, None, str(exc))
        else:
            report.checkpoint = cp.n
            if cp.n > len(lines):
                report.fail(None, None, f"ledger truncated: the checkpoint records {cp.n} entries, the file holds "
                                        f"{len(lines)}")
            elif cp.n < len(states) and not _same_state(states[cp.n], cp):
                report.fail(None, cp.n, f"the checkpoint at entry {cp.n} does not match the chain (edited or replaced)")
    elif lines and ledger.public_key is not None and not lines[-1].endswith(b'"v":1}'):
        # this release checkpoints every append; only a ledger last written by an older marg has none
        report.fail(None, None, f"checkpoint {ledger.checkpoint_path} is missing (deleted)")
    if head is not None and head not in heads:
        report.fail(None, None, f"the ledger does not contain head {short_id(head)} recorded earlier (truncated, "
                    "rolled back or replaced)")
    if bundle_paths:
        _verify_bundles(report, lines, bundle_paths)
    return report


def _verify_bundles(report: LedgerReport, lines: Sequence[bytes], paths: Sequence[Any]) -> None:
    from .bundle import Bundle

    by_digest: dict[str, dict[str, Any]] = {}
    for k, ln in enumerate(lines, 1):
        try:
            e = parse_entry(ln, f"line {k}")
        except InputError:
            continue
        if kind_of(e) != "release":
            continue
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
            report.fail(None, None, f"bundle {p} (sha256 {short_id(digest)}) has no ledger entry: "
                                    f"{_why_absent(data, lines)}")
            continue
        ok = True
        pos = _position(data)
        if pos is not None and (pos.get("seq") != e["seq"] or pos.get("prev") != e["prev"]):
            ok = False
            report.fail(None, e["seq"], f"bundle {p}: states ledger position {pos.get('seq')} after head "
                        f"{short_id(str(pos.get('prev')))}, but is entry seq {e['seq']} after {short_id(e['prev'])} "
                        "(a forked ledger)")
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
                    report.fail(None, e["seq"], f"bundle {p}: contents differ from entry seq {e['seq']} (site, "
                                                "recipient or statistics)")
        report.bundles.append({"path": str(p), "seq": e["seq"], "ok": ok})


def _same_state(folded: LedgerState, cp: LedgerState) -> bool:
    """The checkpoint records the folded state (a checkpoint of an older marg has no composed
    spend: the rest must match)."""
    a, b = folded.to_dict(), cp.to_dict()
    if cp.spend is None:
        a.pop("spend"), b.pop("spend")
    return a == b


def _position(data: bytes) -> dict[str, Any] | None:
    """The ledger position a plain bundle states (None: sealed, unparsable or none)."""
    from .bundle import Bundle

    try:
        pos = Bundle.from_bytes(data).header.get("ledger")
    except InputError:
        return None
    return pos if isinstance(pos, dict) else None


def _why_absent(data: bytes, lines: Sequence[bytes]) -> str:
    """Why a bundle the learner received is not in this ledger, naming the fork when it says where it stood."""
    from .bundle import Bundle

    try:
        header = Bundle.from_bytes(data).header
    except InputError:
        return "released without record, or its entry was deleted (sealed: its position is not readable here)"
    pos = header.get("ledger")
    if not isinstance(pos, dict):
        return "it carries no ledger position (exported with --no-ledger, or by an older marg): recorded nowhere"
    seq = pos.get("seq")
    if isinstance(seq, int) and 1 <= seq <= len(lines):
        try:
            e = parse_entry(lines[seq - 1], f"line {seq}")
        except InputError:
            e = None
        held = "a cap entry" if e is not None and e["bundle"] is None else \
            (f"bundle {short_id(e['bundle'])}" if e is not None else "a malformed line")
        return (f"it states ledger position {seq} after head {short_id(str(pos.get('prev')))}, where this ledger holds "
                f"{held}: a forked (copied and restored, or rolled back) ledger")
    branch = ""
    if isinstance(seq, int) and seq == len(lines) + 1 and lines and pos.get("prev") == line_hash(lines[-1]):
        branch = f", after this ledger's present head (entry {len(lines)})"
    return (f"a fork at a fresh position: it states ledger position {seq}{branch}, but this ledger has {len(lines)} "
            "entries: released from a copy of this ledger that was then discarded (rolled back), or from another "
            "ledger signed with this site's key")
