"""A site's ledger lines shown to the learner: signed entries read as the positions they hold.

The learner expects each known site's next ledger position (:mod:`protocols.history`); a bundle
beyond it is taken only when the releases in between are shown. The site shows them by giving its
ledger file, ``ledger.jsonl``, or any run of consecutive lines of it (``marg learn --site-ledger
FILE``). Each line is an entry the site signed (:mod:`protocols.ledger_format`), so the file may
come from anywhere: a line is taken only when

* it parses as a ledger entry (canonical JSON, every field), is signed, and its signature verifies
  under a key of the learner's trust store that belongs to the site the entry names;
* it follows the line before it in the file (``seq`` one more, ``prev`` the previous line's hash).

What the learner keeps of entry ``seq`` (its line ``L``)::

    bundle       the released bundle's digest (null: a cap entry, no release)
    prev         the line hash before it (entry seq - 1)
    line         sha256(L): the ``prev`` a bundle at seq + 1 must state
    prev_bundle  the bundle of entry seq - 1, when that line was shown too
    origin       sha256 of line 1, when the file starts at line 1

A forker can show the lines of its forked copy (they are signed by the same key); what the shown
lines buy is that the learner then holds every position up to the new bundle, so the first release
it receives from the other branch contradicts a position it holds (:mod:`protocols.history`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from marg.errors import InputError, RefusedError

from .keys import short_id
from .ledger_format import entry_signing_bytes, line_hash, parse_entry, split_lines
from .signing import unb64, verify_bytes


def read_shown_ledger(path: str | Path, store: Any) -> list[tuple[str, str, int, dict[str, Any]]]:
    """The signed entries of a site's ledger file (or consecutive lines of it), checked.

    Parameters
    ----------
    path : a local file of ledger lines
    store : :class:`protocols.trust_store.TrustStore` (``lookup(key id) -> (site, public key)``)

    Returns
    -------
    list of (key id, site, seq, record)
        One per line, in order; ``record`` as in the module docstring (``file`` names the line).

    Raises
    ------
    InputError
        The file cannot be read, or holds no complete line.
    RefusedError
        A line is malformed, unsigned, signed by a key the trust store does not hold for its site,
        badly signed, or does not follow the line before it.
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise InputError(f"--site-ledger {p}: cannot read ({exc.strerror or exc})") from None
    lines, _ = split_lines(data)
    if not lines:
        raise InputError(f"--site-ledger {p}: holds no ledger line")
    out: list[tuple[str, str, int, dict[str, Any]]] = []
    before: tuple[int, str, str | None] | None = None  # (seq, line hash, bundle) of the previous line
    origin: str | None = None
    for k, ln in enumerate(lines, 1):
        where = f"--site-ledger {p} line {k}"
        try:
            e = parse_entry(ln, where)
        except InputError as exc:
            raise RefusedError(f"{where} refused: {str(exc).split(': ', 1)[-1]} (edited or not a ledger)") from None
        kid, sig = e.get("key_id"), unb64(e.get("signature"), 64)
        if kid is None or sig is None:
            raise RefusedError(f"{where} refused: the entry is unsigned (an unsigned line shows nothing)")
        known = store.lookup(kid)
        if known is None or known[0] != e["site"]:
            raise RefusedError(f"{where} refused: entry seq {e['seq']} is signed by key {short_id(kid)}, not a key the "
                               f"trust store holds for site {e['site']!r}")
        if not verify_bytes(entry_signing_bytes(e), sig, known[1]):
            raise RefusedError(f"{where} refused: entry seq {e['seq']} has a bad signature (edited)")
        if before is not None and (e["seq"] != before[0] + 1 or e["prev"] != before[1]):
            raise RefusedError(f"{where} refused: entry seq {e['seq']} does not follow the line before it (seq "
                               f"{before[0]}): give consecutive lines of one ledger")
        h = line_hash(ln)
        if e["seq"] == 1:
            origin = h
        rec: dict[str, Any] = {"bundle": e["bundle"], "prev": e["prev"], "line": h, "file": where,
                               "origin": origin if e["seq"] > 1 else None}
        if before is not None:
            rec["prev_bundle"] = before[2]
        out.append((kid, e["site"], e["seq"], rec))
        before = (e["seq"], h, e["bundle"])
    return out
