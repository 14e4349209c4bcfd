"""Which kind of release a request is: one round, round 1 or round 2 of select-then-measure, or an evaluation.

The one place the kind is decided (:func:`release_kind`), from a
:class:`~marg.protocols.release_request.ReleaseRequest`, the codebook and the
:class:`~marg.protocols.release_request.Delivery`: :func:`marg.protocols.export.export_site`,
its dry run :func:`marg.protocols.export_plan.plan_export` and ``marg export`` all ask it, so
``export_site(data, codebook, site, out, ReleaseRequest(epsilon=1.0), delivery)`` releases what
``marg export --epsilon 1`` releases.

The rule (DESIGN.md, "Select, then measure"):

- ``study_request`` (a learner's signed round-2 request file, checked against ``trust``) is
  **round 2**: it measures exactly what the learner asked, with the rest of the site's study
  total, so a budget (``epsilon``), ``rounds=1`` or any option choosing the tables or their
  protection is refused;
- ``rounds`` defaults to 2 for a DP table release stated by ``epsilon`` with the default
  mechanism and tables: **round 1**, ``epsilon`` the site's **total** for the study (the
  label table and a private selection, :class:`marg.protocols.study.Round1`, its split by the
  rule of :mod:`marg.marginals.study_split` for the rows per site stated in ``plan_rows``);
- any option that chooses the tables or the release (``stats``, ``pairs``, ``rho``,
  ``mechanism`` other than Gaussian, ``holdout``, an evaluation, ``round_id``,
  ``first_share``, ``allocation``) or no ledger keeps the **one-round** release (refused with
  ``rounds=2``); ``rounds=1`` asks for it;
- an **evaluation** (:func:`marg.protocols.evaluation.evaluate_site`) is never a study round.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from marg.errors import InputError, option

from .release_request import Delivery, ReleaseRequest

KINDS = ("one-round", "round-1", "round-2", "evaluation")
"""The kinds of release (:attr:`ReleaseKind.kind`)."""


@dataclass(frozen=True)
class ReleaseKind:
    """What :func:`release_kind` decided: ``kind`` (one of :data:`KINDS`) and the request to release, its
    ``study`` set to the round (:class:`marg.protocols.study.Round1` / ``Round2``) and its ``epsilon`` cleared
    for a study round (the round spends its own share of the site's total)."""

    kind: str
    request: ReleaseRequest

    @property
    def study(self) -> bool:
        """Whether the release is a round of select-then-measure."""
        return self.kind in ("round-1", "round-2")


def release_kind(request: ReleaseRequest, codebook: Any, delivery: Delivery | None = None, *,
                 evaluation: bool = False) -> ReleaseKind:
    """The kind of release ``request`` is, and the request as released (module docstring).

    Parameters
    ----------
    request : ReleaseRequest
        Its ``rounds``, ``study_request`` (with ``trust``), ``plan_rows``, budget and table options decide.
        A request whose ``study`` is already set is that round (the decision is made once).
    codebook : Codebook
        The study's codebook (round 1's plan; round 2's request must be for it).
    delivery : Delivery, optional
        Its ``ledger_dir``: without a ledger the release is one round (the study's total is remembered there).
    evaluation : bool
        The release is an evaluation (:func:`marg.protocols.evaluation.evaluate_site`).

    Raises
    ------
    InputError
        Options that contradict the kind (one line naming the first of them); a request for another codebook.
    RefusedError
        A round-2 request unsigned, altered, or signed by a key ``trust`` does not hold as a learner's.
    """
    from .study import Round1, Round2, read_request

    r = request
    if r.study is not None:
        return ReleaseKind("round-1" if isinstance(r.study, Round1) else "round-2", r)
    rounds = r.rounds
    if rounds not in (None, 1, 2):
        raise InputError(f"{option('rounds')} must be 1 or 2, got {rounds}")
    no_ledger = delivery is not None and delivery.ledger_dir is None
    chosen = {option("stats"): r.stats != "auto", option("pairs"): bool(r.pairs), option("rho"): r.rho is not None,
              option("mechanism"): r.mechanism not in (None, "gaussian"),
              option("holdout"): r.holdout is not None or r.holdout_plan is not None,
              option("evaluate"): evaluation, option("round"): r.round_id is not None,
              option("first_order_share"): r.first_share is not None, option("allocation"): r.allocation != "half",
              option("no_ledger"): no_ledger}
    clash = [k for k, v in chosen.items() if v]
    if r.study_request is not None:
        if rounds == 1:
            raise InputError(f"{option('request')} is round 2 of select-then-measure; {option('rounds', 1)} "
                             "contradicts it")
        if r.epsilon is not None:
            raise InputError("round 2 spends the rest of this site's study total (stated in round 1): drop "
                             f"{option('epsilon')}")
        if clash:
            raise InputError(f"{option('request')} measures exactly what the learner asked: {clash[0]} does not apply")
        req, signer, digest = read_request(r.study_request, codebook.fingerprint, r.trust)
        return ReleaseKind("round-2", r.with_(study=Round2(req, digest, signer)))
    kind = "evaluation" if evaluation else "one-round"
    if rounds == 1 or r.epsilon is None:
        if rounds == 2 and r.epsilon is None:
            raise InputError(f"{option('rounds', 2)} needs {option('epsilon')}: this site's total for the study")
        return ReleaseKind(kind, r)
    if clash:
        if rounds == 2:
            raise InputError(f"{option('rounds', 2)} (select, then measure) chooses its tables and mechanism itself: "
                             f"{clash[0]} does not apply (give {option('rounds', 1)} for a one-round release)")
        return ReleaseKind(kind, r)
    from marg.marginals.study import study_plan

    rows = None
    if r.plan_rows is not None:
        rows, sites = [int(v) for v in r.plan_rows], r.plan_sites
        if sites is not None and len(rows) not in (1, sites):
            raise InputError(f"{option('plan_rows')} gives {len(rows)} counts for {option('plan_sites', sites)}")
        rows = rows * sites if (sites and len(rows) == 1) else rows
    return ReleaseKind("round-1", r.with_(epsilon=None, study=Round1(study_plan(codebook, r.epsilon, r.delta, rows))))


__all__ = ["KINDS", "ReleaseKind", "release_kind"]
