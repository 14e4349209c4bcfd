"""The learner's history of each site's ledger: equivocation detection, as a Certificate Transparency monitor.

A site's own administrator can always fork its ledger (copy the ledger folder and
``site.json``, export, restore; or export with ``--no-ledger`` under another ``MARG_HOME``):
local state cannot stop whoever owns the disk. Every bundle therefore carries, under the
site's signature, where it stands in the site's ledger (``header["ledger"]``,
:meth:`protocols.ledger.Ledger.position`)::

    seq          the entry the release occupies (1, 2, ...)
    prev         the ledger head before it (line hash of entry seq - 1)
    origin       line hash of entry 1 (which ledger this is; null for seq 1)
    prev_bundle  the bundle digest entry seq - 1 records (null: a cap entry, or seq 1)

The learner keeps what it received, per signing key, in one JSON file (default
``$MARG_HOME/learner-history.json``, ``marg learn --history PATH``)::

    {"format": "marg-learner-history", "version": 1,
     "keys": {KEY_ID: {"site": NAME, "origin": HASH | null,
                       "positions": {"SEQ": {"bundle", "prev", "prev_bundle", "origin", "file"}}}}}

(a position shown by the site's ledger lines adds ``"line"``, the line's hash, and may lack ``prev_bundle``)

and refuses a bundle that forks it, naming the fork in one line (and ``"replaced"``, below):

* **a known site under a new key**: a bundle of a site the history knows under another signing
  key is refused unless the new key was re-trusted explicitly (``marg keys trust --replace``,
  which records ``{"site", "from", "to", "time"}`` in the history's ``"replaced"`` list): a trust
  store someone else could write (a copied folder, a store) cannot swap a site's key unseen;

* **same position, another release**: a bundle at a ``seq`` already held with another
  digest or another ``prev`` (the restored-copy attack: both exports stand at one position);
* **a position going back**: a new bundle below the highest position received before that no
  bundle received beside it confirms (a consistent earlier bundle — its predecessor's digest,
  or its successor naming it — is accepted: learning round 1 after round 2 is no rollback);
* **a head it cannot chain to**: ``prev_bundle`` differs from the bundle received at
  ``seq - 1`` (or the bundle at ``seq + 1`` names another predecessor), or ``origin``
  differs from the ledger's first entry seen before (a fresh ledger elsewhere);
* **a fresh position**: a bundle of a site the history knows, beyond the next position it expects
  (one past the highest it holds), unless every position in between is held at the end of the run:
  a bundle of the same run, or an entry of the site's signed ledger lines shown
  (:meth:`History.show`, ``marg learn --site-ledger FILE``, :mod:`protocols.shown_ledger`).
  Otherwise a fork made from a copy of the ledger at positions the real ledger has not reached would
  be accepted until the real release at that position arrived, perhaps never; held without gaps,
  the first release received from the other branch contradicts a position held. A site's first
  bundle is taken at any position (trust on first use; show its ledger lines to check it too);
* **unledgered**: a signed bundle with no position (``--no-ledger``, or an older marg) is
  recorded nowhere, so it is refused unless ``allow_unledgered``.

A secure-aggregation sum (signed by the learner) is not tracked: the sites' uploads carry no
position (each is recorded in its site's ledger; ``marg audit verify --bundles UPLOAD`` checks it).
The same bundle read again is no fork (``marg learn`` on the same files twice). Only signed
bundles are tracked: an unsigned bundle's position is unauthenticated (anyone could forge a
"fork" against a site). The file is updated only when every bundle of the run is accepted.

What the learner cannot see: a fork of which it receives one side only. ``marg audit verify
--bundles B...`` at the site (:func:`protocols.ledger_verify.verify_ledger`) checks the ledger
against the bundles the learner received: each must be the entry at its stated position.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from marg._util import atomic_write_bytes, canonical_json, now_iso
from marg.errors import InputError, RefusedError

from .bundle import Bundle
from .keys import short_id
from .ledger_format import GENESIS, HEX64

FORMAT = "marg-learner-history"
VERSION = 1
HISTORY_FILE = "learner-history.json"


def default_history_path() -> Path:
    """``$MARG_HOME/learner-history.json`` (:func:`protocols.site.site_home`)."""
    from .site import site_home

    return site_home() / HISTORY_FILE


def parse_position(header: Mapping[str, Any], source: str) -> dict[str, Any] | None:
    """The bundle's ``ledger`` field checked for form; None when the bundle carries none."""
    pos = header.get("ledger")
    if pos is None:
        return None
    ok = (isinstance(pos, dict) and isinstance(pos.get("seq"), int) and not isinstance(pos.get("seq"), bool)
          and pos["seq"] >= 1 and isinstance(pos.get("prev"), str) and HEX64.match(pos["prev"]) is not None
          and all(pos.get(k) is None or (isinstance(pos.get(k), str) and HEX64.match(pos[k]) is not None)
                  for k in ("origin", "prev_bundle"))
          and (pos["seq"] == 1) == (pos["prev"] == GENESIS))
    if not ok:
        raise RefusedError(f"{source} refused: malformed ledger position {pos!r}")
    return {k: pos.get(k) for k in ("seq", "prev", "origin", "prev_bundle")}


class History:
    """The learner's record of every site ledger position it received (see the module docstring).

    Parameters
    ----------
    path : path
        The history file (created on the first :meth:`save`).
    allow_unledgered : bool
        Accept signed bundles that carry no ledger position (recorded nowhere: the site's
        budget does not cover them).
    """

    def __init__(self, path: str | os.PathLike[str], allow_unledgered: bool = False) -> None:
        self.path = Path(path)
        self.allow_unledgered = allow_unledgered
        self.keys: dict[str, dict[str, Any]] = {}
        self.replaced: list[dict[str, Any]] = []
        self.changed = False
        self.before: dict[str, int] = {}  # the highest position per key received by earlier runs
        self.received: dict[str, list[tuple[int, str]]] = {}  # key id -> (position, file) of this run's new bundles
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise InputError(f"cannot read the learner history {self.path}: {exc.strerror or exc}") from None
        try:
            doc = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise InputError(f"learner history {self.path} is not JSON (corrupt?)") from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != VERSION \
                or not isinstance(doc.get("keys"), dict):
            raise InputError(f"{self.path} is not a marg learner history ({FORMAT} version {VERSION})")
        self.keys = doc["keys"]
        self.replaced = [r for r in doc.get("replaced", []) if isinstance(r, dict)]
        self.before = {k: max((int(s) for s in v.get("positions", {})), default=0) for k, v in self.keys.items()}

    def check(self, bundle: Bundle, source: str) -> None:
        """Refuse ``bundle`` (a verified bundle) if it forks what was received; remember it."""
        sig = bundle.signature
        if sig is None:
            return  # unauthenticated: nothing to hold the site to
        if bundle.header.get("secagg") is not None:
            return  # a secure sum, signed by the learner itself: each site's upload is in its own ledger
        pos = parse_position(bundle.header, source)
        name = f"site {bundle.site!r} (key {short_id(sig['key_id'])})"
        if pos is None:
            if self.allow_unledgered:
                return
            raise RefusedError(f"{source} refused: {name} released it without a ledger position (--no-ledger or an "
                               "older marg): recorded nowhere, its privacy cost is on no budget (--allow-unledgered "
                               "to accept)")
        self._check_key(bundle.site, sig["key_id"], source)
        digest = bundle.digest()
        rec = self.keys.setdefault(sig["key_id"], {"site": bundle.site, "origin": None, "positions": {}})
        held = rec["positions"]
        seq = pos["seq"]
        mine = {"bundle": digest, "prev": pos["prev"], "prev_bundle": pos["prev_bundle"], "origin": pos["origin"],
                "file": str(source)}
        old = held.get(str(seq))
        if old is not None:
            if old["bundle"] == digest:
                return
            raise RefusedError(f"{source} refused: fork in {name}'s ledger: position {seq} holds "
                               f"{_named(old['bundle'])} ({old.get('file')}) and bundle {short_id(digest)} "
                               f"(prev {short_id(old['prev'])} / {short_id(pos['prev'])}): a rolled-back or copied "
                               "ledger")
        top = self.before.get(sig["key_id"], 0)
        below, above = held.get(str(seq - 1)), held.get(str(seq + 1))
        if seq < top and below is None and above is None:
            # an earlier position is accepted when a bundle received beside it confirms the chain (below)
            raise RefusedError(f"{source} refused: fork in {name}'s ledger: position {seq} goes back behind position "
                               f"{top} received earlier, and no bundle received beside it (position {seq - 1} or "
                               f"{seq + 1}) confirms it (a rolled-back ledger?)")
        origin = pos["origin"] if seq > 1 else None
        known = rec.get("origin") or self._origin_of(held)
        if origin is not None and known is not None and origin != known:
            raise RefusedError(f"{source} refused: fork in {name}'s ledger: position {seq} descends from first entry "
                               f"{short_id(origin)}, earlier bundles from {short_id(known)} (another ledger)")
        if below is not None and (below["bundle"] != pos["prev_bundle"]
                                  or below.get("line", pos["prev"]) != pos["prev"]):
            raise RefusedError(f"{source} refused: fork in {name}'s ledger: position {seq} follows "
                               f"{_named(pos['prev_bundle'])}, but bundle {short_id(below['bundle'])} was received at "
                               f"position {seq - 1}")
        if above is not None and above.get("prev_bundle", digest) != digest:
            raise RefusedError(f"{source} refused: fork in {name}'s ledger: position {seq + 1} follows "
                               f"{_named(above['prev_bundle'])}, not this bundle {short_id(digest)} at position {seq}")
        held[str(seq)] = mine
        if origin is not None and rec.get("origin") is None:
            rec["origin"] = origin
        self.received.setdefault(sig["key_id"], []).append((seq, str(source)))
        self.changed = True

    def show(self, entries: Sequence[tuple[str, str, int, Mapping[str, Any]]]) -> None:
        """Hold the site's signed ledger entries (:func:`protocols.shown_ledger.read_shown_ledger`) as positions.

        An entry that contradicts a position held (another release there, or a chain that does
        not link to the bundle or line beside it) is refused as a fork; one that agrees is kept.
        """
        for kid, site, seq, shown in entries:
            where = str(shown["file"])
            self._check_key(site, kid, where)
            rec = self.keys.setdefault(kid, {"site": site, "origin": None, "positions": {}})
            held, name = rec["positions"], f"site {site!r} (key {short_id(kid)})"
            old, below, above = held.get(str(seq)), held.get(str(seq - 1)), held.get(str(seq + 1))
            clash = None
            if old is not None and (old.get("line", shown["line"]) != shown["line"] or old["bundle"] != shown["bundle"]
                                    or old["prev"] != shown["prev"]):
                clash = (f"position {seq} holds {_named(old['bundle'])} ({old.get('file')}), the line "
                         f"{_named(shown['bundle'])}")
            elif below is not None and (below.get("line", shown["prev"]) != shown["prev"]
                                        or below["bundle"] != shown.get("prev_bundle", below["bundle"])):
                clash = (f"the line at position {seq} does not follow what is held at position {seq - 1} "
                         f"({below.get('file')})")
            elif above is not None and (above["prev"] != shown["line"]
                                        or above.get("prev_bundle", shown["bundle"]) != shown["bundle"]):
                clash = f"position {seq + 1} ({above.get('file')}) does not follow the line at position {seq}"
            known = rec.get("origin") or self._origin_of(held)
            if clash is None and shown["origin"] is not None and known is not None and shown["origin"] != known:
                clash = (f"the line at position {seq} descends from first entry {short_id(shown['origin'])}, earlier "
                         f"ones from {short_id(known)}")
            if clash is not None:
                raise RefusedError(f"{where} refused: fork in {name}'s ledger: {clash}")
            held[str(seq)] = {**(old or {}), **dict(shown)}
            if shown["origin"] is not None and rec.get("origin") is None:
                rec["origin"] = shown["origin"]
            self.changed = True

    def check_positions(self) -> None:
        """Refuse this run's bundles that stand beyond the next expected position of a known site
        with a position in between held by nothing (see the module docstring: a fresh position)."""
        for kid, got in self.received.items():
            top = self.before.get(kid, 0)
            if top == 0:
                continue  # the site's first bundles: trust on first use
            held = self.keys[kid]["positions"]
            for seq, source in sorted(got):
                missing = [p for p in range(top + 1, seq) if str(p) not in held]
                if missing:
                    gap = f"{missing[0]}" if len(missing) == 1 else f"{missing[0]}-{missing[-1]}"
                    raise RefusedError(
                        f"{source} refused: site {self.keys[kid]['site']!r} (key {short_id(kid)}) releases it at "
                        f"ledger position {seq}, beyond the next expected position {top + 1} (the learner history "
                        f"{self.path} holds up to {top}): position {gap} is not shown, so this may be a fork made at "
                        "a fresh position; give the releases in between in this run or the site's signed ledger lines "
                        "(--site-ledger its ledger.jsonl)")

    def _check_key(self, site: str, kid: str, source: str) -> None:
        """Refuse a site the history knows under other signing keys arriving under ``kid``, unless re-trusted."""
        if kid in self.keys:
            return
        old = sorted(k for k, rec in self.keys.items() if rec.get("site") == site)
        if not old or any(r.get("site") == site and r.get("to") == kid for r in self.replaced):
            return
        raise RefusedError(f"{source} refused: site {site!r} arrives under signing key {short_id(kid)}, but the "
                           f"learner history {self.path} knows it under {', '.join(short_id(k) for k in old)}: if the "
                           "site did replace its key, confirm the new id with it and re-trust it (marg keys trust "
                           "SITE.sign.pub --trust DIR --replace)")

    def record_replacement(self, site: str, old: str, new: str) -> None:
        """Say in the history that ``site``'s signing key ``old`` was replaced by ``new`` (``keys trust --replace``)."""
        self.replaced.append({"site": site, "from": old, "to": new, "time": now_iso()})
        self.changed = True

    @staticmethod
    def _origin_of(held: Mapping[str, Any]) -> str | None:
        for v in held.values():
            if v.get("origin"):
                return v["origin"]
        return None

    def save(self) -> None:
        """Write the history (atomically) if a new position was received."""
        if not self.changed:
            return
        if not self.path.parent.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        atomic_write_bytes(self.path, canonical_json({"format": FORMAT, "version": VERSION, "keys": self.keys,
                                                   **({"replaced": self.replaced} if self.replaced else {})}),
                           mode=0o600)
        self.changed = False


def _named(digest: str | None) -> str:
    return "no release (a cap entry or the start)" if digest is None else f"bundle {short_id(digest)}"
