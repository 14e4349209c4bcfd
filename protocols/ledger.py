"""The site's release ledger: an append-only, hash-chained, signed file with a signed checkpoint.

Its files (``DIR/ledger.jsonl``, ``checkpoint.json``, ``rounds/ID``, ``.lock``) are
:mod:`protocols.ledger_file`'s; one entry's form is :mod:`protocols.ledger_format`'s.

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

**A round is answered once** (:func:`protocols.ledger_file.mark_round`, under the lock, before
the line is written). A ledger without a checkpoint
(written by an older marg, or the checkpoint deleted) is verified in full once.

**What verification proves** (:meth:`Ledger.verify`, ``marg audit verify``): every line, its
chain link, its signature under the pinned (or given) key and every rule of
:func:`~protocols.ledger_state.apply_entry`; that the checkpoint and the configuration's head
are states of this chain. Appends check the checkpoint and the lines after it, not every line:
an edit deep inside the file cannot change the spend an append sees (that comes from the signed
checkpoint), and ``marg audit verify`` finds it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from cryptography.hazmat.primitives.asymmetric import ed25519

from marg._util import atomic_write_bytes, canonical_json, now_iso
from marg.errors import InputError, RefusedError
from marg.marginals.accounting import PrivacyCost, check_budget
from marg.marginals.budget_file import BUDGET_FILE, read_budget

from .keys import key_id, load_verify_key, short_id
from .ledger_entries import as_cost, bundle_cost, cap_entry, release_entry, release_facts
from .ledger_file import append_line, clean_stale, line_ending_at, locked, mark_round
from .ledger_format import LEDGER_FILE, entry_signing_bytes, kind_of, line_hash, parse_entry, split_lines
from .ledger_state import CHECKPOINT_FILE, LedgerState, apply_entry, apply_exact, checkpoint_bytes, parse_checkpoint
from .ledger_verify import LedgerReport, verify_ledger
from .signing import b64, sign_bytes, unb64, verify_bytes
from .site import DEFAULT_LEDGER_DIR

__all__ = ["Ledger"]


def _pub(key: Any) -> ed25519.Ed25519PublicKey | None:
    if key is None or isinstance(key, ed25519.Ed25519PublicKey):
        return key
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return key.public_key()
    if isinstance(key, (str, os.PathLike)):
        return load_verify_key(key)
    raise InputError(f"ledger key must be an Ed25519 public key or a .sign.pub path, got {type(key).__name__}")


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

    def __init__(self, directory: str | os.PathLike[str] = DEFAULT_LEDGER_DIR, public_key: Any = None,
                 site: Any = None) -> None:
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

    def _check_signature(self, e: Mapping[str, Any], keys: Mapping[str, ed25519.Ed25519PublicKey] | None,
                         where: str) -> None:
        if e["signature"] is None or e["key_id"] is None:
            if self.public_key is not None:
                raise RefusedError(f"{where}: unsigned entry in a ledger pinned to key "
                                   f"{short_id(key_id(self.public_key))}")
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

    def _load_state(self, signer: ed25519.Ed25519PrivateKey | None = None,
                    recording_cap: bool = False) -> tuple[LedgerState, int]:
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
                raise RefusedError(f"ledger {self.path} is missing, but its checkpoint records {cp.n} entries "
                                   "(deleted)")
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
                ok = cp.size <= end and (cp.n == 0 or line_hash(line_ending_at(fh, cp.size)) == cp.head)
            if not ok:
                raise RefusedError(f"ledger {self.path} does not match its checkpoint at entry {cp.n} (edited or "
                                   "replaced)")
        else:
            state, end = self._resume(cp, size, keys)
        self._check_site_head(state)
        if state.cap is None and not recording_cap and (self.directory / BUDGET_FILE).exists():
            raise RefusedError(f"ledger {self.directory} has a cap in {BUDGET_FILE}, outside the signed chain (an "
                               f"older marg): record it with marg audit budget --ledger {self.directory} --key "
                               "SITE.sign.key")
        if keys is not None and state.key_id is not None and state.key_id not in keys:
            raise RefusedError(f"ledger {self.path} is signed by key {short_id(state.key_id)}, not "
                               f"{short_id(next(iter(keys)))}")
        return state, end

    def _resume(self, cp: LedgerState, size: int, keys: Any) -> tuple[LedgerState, int]:
        if size < cp.size:
            raise RefusedError(f"ledger {self.path} is shorter than its checkpoint records ({size} bytes, {cp.n} "
                               f"entries in {cp.size} bytes): truncated or edited")
        with open(self.path, "rb") as fh:
            if cp.n > 0 and line_hash(line_ending_at(fh, cp.size)) != cp.head:
                raise RefusedError(f"ledger {self.path} does not match its checkpoint at entry {cp.n} (edited or "
                                   "replaced)")
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
                ok = head["size"] <= state.size and line_hash(line_ending_at(fh, head["size"])) == head["hash"]
            if not ok:
                raise RefusedError(f"ledger {self.path} does not contain entry {head['n']} as site {self.site.site!r} "
                                   f"recorded it ({self.site.path}): replaced or rolled back")

    def state(self) -> LedgerState:
        """The verified current state (O(1) with a checkpoint); RefusedError if the ledger is not intact."""
        with locked(self.directory, create=False):
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
        with locked(self.directory, create=False):
            state, _end = self._load_state()
            origin = prev_bundle = None
            if state.n > 0:
                with open(self.path, "rb") as fh:
                    first = fh.readline().rstrip(b"\n")
                    last = line_ending_at(fh, state.size)
                origin = line_hash(first)
                prev_bundle = parse_entry(last, f"ledger {self.path} entry {state.n}").get("bundle")
        return {"seq": state.n + 1, "prev": state.head, "origin": origin, "prev_bundle": prev_bundle}

    def check(self, cost: Any, round_id: str | None = None) -> None:
        """Refuse now (before any data is read) a release of ``cost`` the budget would refuse,
        or one for a round this site already answered."""
        state = self.state()
        if state.cap is not None:
            check_budget(state.cap, state.spend, as_cost(cost, "release cost"))
        if round_id is not None:
            self.mark_round(round_id, create=False)

    def mark_round(self, round_id: str, create: bool = True) -> Path:
        """Refuse a round this site already answered; with ``create``, mark it answered
        (:func:`protocols.ledger_file.mark_round`). Returns the marker's path."""
        return mark_round(self.directory, round_id, create)

    # ------------------------------------------------------------------ writing
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
        with locked(self.directory):
            state, end = self._load_state(private_key, recording_cap=kind_of(entry) == "cap")
            if state.key_id is not None and private_key is None:
                raise RefusedError(f"ledger {self.path} is signed by key {short_id(state.key_id)}; sign this entry "
                                   "too (--key)")
            if position is not None and (position.get("seq") != state.n + 1 or position.get("prev") != state.head):
                raise RefusedError(f"ledger {self.directory} moved during the export (the bundle states position "
                                   f"{position.get('seq')}, the next entry is {state.n + 1}): nothing written; export "
                                   "again")
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
            clean_stale(self.directory)
            try:
                append_line(self.path, line, end)
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
        with locked(self.directory):
            state, _ = self._load_state(private_key)
            if state.key_id is not None and state.key_id != key_id(private_key):
                raise RefusedError(f"ledger {self.path} is signed by key {short_id(state.key_id)}, not "
                                   f"{short_id(key_id(private_key))}")
            atomic_write_bytes(self.checkpoint_path, checkpoint_bytes(state, private_key, now_iso()), mode=0o600)
            if self.site is not None and self.site.owns(self.directory):
                self.site = self.site.with_head(state.n, state.size, state.head)
                self.site.save(private_key)
        return state

    def append(self, *, private_key: ed25519.Ed25519PrivateKey | None = None, position: Mapping[str, Any] | None = None,
               **facts: Any) -> dict[str, Any]:
        """Append one release entry; refuse it (writing nothing) if a rule forbids it.

        Parameters
        ----------
        private_key : the site's signing key (required for a signed or pinned ledger)
        position : the bundle's stated ledger position (:meth:`position`): refused if the entry would land elsewhere
        **facts
            The release: ``bundle_digest``, ``site``, ``statistics``, ``cost`` and the optional
            fields of :func:`protocols.ledger_entries.release_entry` (a ``round`` already
            answered is refused).

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
        return self._write(release_entry(**facts), private_key, position)

    def set_cap(self, cap: Any, private_key: ed25519.Ed25519PrivateKey, site: str,
                time: str | None = None) -> dict[str, Any]:
        """Record the dataset's privacy cap as a signed ``cap`` entry (or lower it; never raise it).

        A cap needs a signing key: an unsigned cap could be edited away.
        """
        entry = cap_entry(cap, site, time)
        c = PrivacyCost.from_dict(entry["cap"])
        if private_key is None:
            raise InputError("a privacy cap is recorded signed: give the site's key (--key SITE.sign.key)")
        legacy = read_budget(self.directory) if (self.directory / BUDGET_FILE).exists() else None
        if legacy is not None and legacy != c:
            raise RefusedError(f"{self.directory / BUDGET_FILE} sets cap {legacy.describe_cap()}; record that one "
                               f"(requested {c.describe()})")
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
        evaluation: Mapping[str, Any] | None = None,
        own_cost: Any = None,
    ) -> dict[str, Any]:
        """Append the entry for a (final, signed) bundle: site, recipient, statistics, source,
        cost and digest are read from it; an exact release also records what it disclosed.

        The cost is ``cost`` if given, else the header's ``privacy``, else
        :func:`marginals.privacy.tables_cost` of its tables; a bundle holding an exact table
        always costs ``inf``. Call it *before* writing the bundle file: a crash then leaves a
        ledger that over-states what left, never one that under-states it.

        Parameters
        ----------
        suppressed : the min-cell rule's suppressed cells (``SuppressedCell``: ``table``, ``cell``)
        round : the round id answered (default: the header's ``round``)
        evaluation : an evaluation release's record against its held-out set
            (:func:`protocols.evaluation_ledger.record_of`), kept as ``source.evaluation``
        own_cost : a shared-noise share's own guarantee (its share alone, ``SharedNoisePlan.site_cost()``),
            recorded beside ``cost`` (then the study's guarantee, the one charged: ``SharedNoisePlan.study_cost()``)

        The bundle's ``ledger`` header field (its position, :meth:`position`), if any, must be
        where the entry lands.
        """
        stats, c, exact = release_facts(bundle, bundle_cost(bundle, cost), suppressed)
        source = bundle.header.get("source")
        unit = (bundle.header.get("privacy") or {}).get("unit")
        if unit is not None:  # the privacy unit and its row bound, beside where the rows were counted
            source = {**(source or {}), "privacy_unit": unit}
        if evaluation is not None:
            source = {**(source or {}), "evaluation": dict(evaluation)}
        return self.append(
            bundle_digest=bundle.digest(), site=bundle.site, statistics=stats, cost=c,
            recipient=bundle.header.get("recipient"), recipient_name=recipient_name, file_digest=file_digest,
            n_rows=bundle.header.get("n_rows"), private_key=private_key, source=source,
            round=round if round is not None else bundle.header.get("round"), exact=exact, suppressed=len(suppressed),
            position=bundle.header.get("ledger"), own_cost=own_cost,
        )

    def preview(self, bundle: Any, cost: Any, suppressed: Sequence[Any] = ()) -> LedgerState:
        """Refuse now what :meth:`record` would refuse for ``bundle`` (the budget, the exact-release
        rules), writing nothing: ``marg export --dry-run``. Returns the state before the release."""
        state = self.state()
        _, c, exact = release_facts(bundle, cost, suppressed)
        if state.cap is not None:
            check_budget(state.cap, state.spend, c)
        if exact:
            apply_exact(state, {"exact": exact, "site": bundle.site, "suppressed": len(suppressed), "seq": state.n + 1})
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

