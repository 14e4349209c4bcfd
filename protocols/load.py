"""The learner's way in: open, verify and aggregate site bundle files into one Summary.

Every bundle is opened (if sealed to the learner), parsed and verified against the trust
store; any failure — an altered byte, an unknown signer, an unsigned bundle without
``allow_unsigned``, a bundle sealed to another key — is a one-line refusal naming the file
(exit 1). The verified bundles are then summed into a Summary
(:func:`marg.protocols.aggregate.summary_from_bundles`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

from marg.errors import InputError
from marg.marginals.summary import Summary

from .aggregate import summary_from_files
from .bundle import Bundle
from .drop_box import source_name


def _opener(trust, allow_unsigned, key, passphrase_file, rounds=None, history=None, observe=None):
    """``open(path) -> Bundle``: open (if sealed), parse and verify one file (its round, and
    its ledger position against ``history``, a :class:`protocols.history.History`)."""
    from .keys import load_seal_key, read_passphrase_file
    from .trust_store import TrustStore
    from .signing import load_verified_bundle

    seal_key = None
    if key is not None:
        pw = read_passphrase_file(passphrase_file) if passphrase_file else None
        seal_key = load_seal_key(key, pw)
    store = TrustStore(trust) if trust is not None else None
    from .rounds import check_round

    def open_checked(p):
        b = load_verified_bundle(p, store, allow_unsigned=allow_unsigned, seal_key=seal_key)
        if rounds:
            check_round(b.header.get("round"), rounds, str(p))
        if history is not None:
            history.check(b, source_name(p))
        if observe is not None:
            observe(b)
        return b

    return open_checked


def load_verified_bundles(
    paths: Sequence[str | Path],
    trust: str | Path | None = None,
    allow_unsigned: bool = False,
    key: str | Path | None = None,
    passphrase_file: str | Path | None = None,
) -> list[Bundle]:
    """Open (if sealed), parse and verify every bundle file.

    Parameters
    ----------
    paths : bundle files
    trust : folder of SITE.sign.pub files (the trust store), or None
    allow_unsigned : accept unsigned bundles (their site is not authenticated)
    key : the learner's sealing key (LEARNER.seal.key), to open sealed bundles
    passphrase_file : file holding ``key``'s passphrase
    """
    if not paths:
        raise InputError("give at least one bundle")
    open_ = _opener(trust, allow_unsigned, key, passphrase_file)
    return [open_(p) for p in paths]


def load_summary(
    paths: Sequence[str | Path],
    trust: str | Path | None = None,
    allow_unsigned: bool = False,
    key: str | Path | None = None,
    passphrase_file: str | Path | None = None,
    progress: Callable[[int, int], None] | None = None,
    rounds: Sequence[str] | None = None,
    history: Any = None,
    observe: Callable[[Bundle], None] | None = None,
) -> Summary:
    """Open, verify and sum the bundle files into one Summary, one bundle at a time
    (:func:`marg.protocols.aggregate.summary_from_files`: memory of one bundle, however many
    sites); ``progress(k, total)`` after each file; provenance names the files. With
    ``rounds``, a bundle whose signed round id is not among them is refused
    (:mod:`marg.protocols.rounds`). With ``history`` (a :class:`protocols.history.History`),
    a bundle that forks its site's ledger as received before, stands beyond the next position
    expected of its site with the positions between not shown, or a signed bundle recorded in
    no ledger, is refused; the history is saved once every bundle is accepted. ``observe(bundle)``
    sees every accepted bundle (e.g. to report the rounds they answer)."""
    if not paths:
        raise InputError("give at least one bundle")
    summary = summary_from_files(list(paths), _opener(trust, allow_unsigned, key, passphrase_file, rounds, history,
                                                      observe), progress)
    if history is not None:
        history.check_positions()
        history.save()
    return summary
