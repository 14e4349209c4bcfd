"""The learner's round 1 of a study: the pooled round's weights (the design's shares) and the private round's vote.

Under the design's ``"pooled"`` selection round 1 pools the label table and every first-order table N[x_i, y]
(:func:`select_weights`: the label table at ``rho_label``, each first-order table at ``rho_select``/p, as
:mod:`marg.marginals.study_design` planned them). Under ``"private"`` it pools the label table only and each site
runs its own OpenDP top-k (:mod:`marg.protocols.study_top_k`); the learner pools the sites' lists by the per-site
path's vote (:func:`voted_features`, :func:`marg.learners.study.two_round.above_chance`): post-processing of what the
sites released.
"""

from __future__ import annotations

from typing import Any

from marg.errors import InputError


def select_weights(plan: Any, p: int) -> list[float] | None:
    """Round 1's weights under the pooled selection: the design's split — the label table at ``rho_label``, each of
    the ``p`` first-order tables at ``rho_select``/p (:mod:`marg.marginals.study_design`, ``"pooled"``) —, or None
    (the half split: a study file written before the plan recorded them, or no first-order table)."""
    try:
        r_label, r_select = float(plan["rho_label"]), float(plan["rho_select"])
    except (KeyError, TypeError, ValueError):
        return None
    if p < 1 or not (r_label > 0.0 and r_select > 0.0):
        return None
    return [r_label] + [r_select / p] * p


def voted_features(study: Any, bundle: Any) -> tuple[list[str], dict[str, Any]]:
    """Round 2's features under the private selection: the features chosen by sites holding more than half the
    patients (and above chance, :func:`marg.learners.study.two_round.above_chance`), best pooled rank first; when none
    is, the best-ranked one, measured only so that the study's summary has a table: the model is then the larger
    class (:func:`marg.study_learner.nothing_agreed`; a model on a chance feature, compared with the larger class on a
    handful of held-out patients whose bounds both are 1, was kept on leukemia's split 1 and erred more than the larger
    class: BENCHMARKS.md, "Issue 47: numbers moved out of docstrings").

    Each site's weight is its stated rows (public, the study file's), not a noisy count: the label table is
    pooled. ``bundle`` is round 1's summed bundle; the sites' selections are in its ``privacy.per_site`` (each
    site's signed upload states its own)."""
    from marg.learners.study.two_round import SiteRound1, above_chance, pool
    from marg.protocols.study_top_k import selections_of

    sels = selections_of((bundle.header.get("privacy") or {}).get("per_site"))
    if not sels:
        raise InputError("round 'select' asked for the sites' private selections; its sum carries none")
    rows = dict(zip(study.names, study.plan.get("rows") or [])) if study.plan.get("rows_stated") else {}
    sites = [SiteRound1(s, float(rows.get(s, 1.0)), sel, 0.0) for s, sel in sels]
    agreed = above_chance(sites)
    kept = agreed or [pool(sites)[0][0]]
    return kept, {"rule": "each site's private top-k; the features chosen by sites holding more than max(1/2, "
                          "(1 + chance)/2) of the stated rows, above chance (else the best-ranked one)",
                  "agreed": len(agreed), "sites_selections": {s: list(sel.features) for s, sel in sels}}
