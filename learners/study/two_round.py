"""The learner's side of select, then measure: what round 2 measures, how its budget is split, and the model on what it
measured.

**Pooling the sites' selections** (:func:`pool`). Each site released, in round 1, the k
features its noisy top-k chose (:mod:`marg.marginals.selection`) and its noisy label table.
With w_s = n̂_s / Σ n̂ (the noisy row counts), feature i's vote is v_i = Σ_s w_s·1[i chosen at
s] and its rank score b_i = Σ_s w_s·(k_s − rank_s(i)). The request keeps the features chosen
by sites holding more than half the patients (v_i > 1/2), best b_i first — a feature chosen
by noise at one site is rarely chosen at another (k of p at random), one that carries the
label is chosen everywhere. The bar is raised above chance: v_i > max(1/2, (1 + c)/2), c = Σ_s
w_s·k_s/p the vote a feature gets when the sites pick at random (k of p: c ≈ 0.44 for 16 of 36).
In a wide study, where random picks rarely coincide (λ, their expected number of chance
agreements, below 1), the count of agreed features must also exceed Poisson(λ)'s 95 % quantile
(:func:`above_chance`: two sites of 19 patients choosing the same gene of 7,129 by chance is
no signal). When every site ranked all p features (the split rule's "measure every candidate",
:func:`marg.marginals.study_split.measures_all`: k = p, the chance vote is 1 and the bar
unreachable) every feature is kept, best rank score first, and nothing can agree by chance. When none qualifies —
nothing rises above the selection's noise — one chosen feature is measured anyway (the study's summary needs one): the
one with the fewest levels, whose column sums give the label counts with the least noise, and the model is the larger
class.

**What round 2 measures, and how much** (:func:`plan_request`). The kept features'
first-order tables N[x_i, y] — but not a table whose pooled noise std per cell would exceed
``NOISE_RATIO`` times its expected count n̂/|T| (:func:`first_order_rule`: such a table, a
feature with many levels at a small site, is mostly noise and takes budget from the others) —, plus the pair tables
N[x_i, x_j, y] among the first M kept features, M the largest for which the pooled noise std of the largest pair table's
cells, sqrt(Σ_s σ_s²), stays below ``NOISE_RATIO`` times its expected cell count n̂/|T| (a pair table
noisier than that adds variance, not information); when every candidate was ranked, every pair
(the one-round workload) if its median pair table at its least-squares weight meets the same rule
(:func:`whole_workload`). The sites' rest ρ_s (their round-1 bundles
record it) is split among the tables by the least-squares rule
(:func:`marg.marginals.allocation.least_squares_weights`: weights ∝ √|T| minimise the summed
noise variance Σ_T |T|·σ_T² for the budget); σ_s of table T is 1/sqrt(2·w_T·ρ_s).

**Against the larger class, on evidence that did not select the features** (:func:`finish`,
:mod:`marg.learners.study.unselected`; issues 44 and 49): once a feature was agreed, the final rule is refitted in
each fold on the features the *other* sites' round 1 agrees on and judged, with the label-only rule, on the
left-out site's rows; not beaten there, the larger class is the model.

**The model** (:func:`finish`). The summary of both rounds holds the measured features only
(:func:`marg.protocols.aggregate.measured_only`); the learner fits on it as usual. Its
certificate must hold although the features were chosen from the same patients: the summary
carries the round-1 records (``summary.selection``), and every estimator's own fit certifies
(:mod:`marg.learners.certification.selection_certificate`, the fit's last step ``cover_selection``) with
W(h) of the model's rule over the first-order box with λ calibrated for
**every candidate feature's** cells together (``n_intervals`` = K·Σ_i m_i over all p
candidates, as :func:`marg.learners.certification.certify.certify_projected` does for screened genes): on
the event that all p candidates' cells lie in their intervals — an event fixed before any
selection — the selected ones do too, whichever were chosen. When the sites agreed on no
feature (:func:`agreed`), the model is the label-only rule (``prior``), certified by the
label counts alone — the least noisy of the label table and a measured table's column sums
(:func:`label_source`). **Coverage of whichever model is returned**: the model returned is the prior or ``est``
depending on the data, so its certificate holds at ``coverage`` only if both possible events do together (union
bound): α/2 for ``est``'s selection-wide box, α/2 for the prior's, which is the sampling event and one noise event of
the source :func:`label_source` picks — the label table's or a round-2 table's (the pick depends on round 2's plan,
itself on round 1's noisy counts, so both noise events count): the label-only bound at α/3
(:func:`marg.learners.classifiers.label_only.share_lower_bounds`: α/6 each, three events). Neither box needs the
selection-wide Bonferroni of the other (the prior reads no selected feature). The automatic choice runs with
``prefer="accuracy"`` unless the user sets ``prefer`` (the automatic choice's default since issue 49 too): the
certificates ``"certificate"`` (formerly ``"balanced"``) would compare are each candidate's own, for the measured tables
as if they had not been selected, and the chosen model's is replaced by the selection-wide one (measured on the planted
wide study: that rule chose the MRC, whose rule erred far more on the 10 right features than naive Bayes and Rényi).
Its candidates are the defaults without the MRC (:data:`STUDY_CHOICE`): on these noisy tables the MRC's
leave-one-site-out estimate was far below its error (on the planted study — its minimax rule under the wide box read
one feature —, house-votes-84 and credit-a), so the choice by estimated error took it (both measured: BENCHMARKS.md,
"Issue 47: numbers moved out of docstrings").

**The choice's defaults** (:func:`study_choice`): the candidates whose leave-one-site-out estimates
the simulated held-out world flatters least, kept unless another is estimated better beyond the noise
at 95 % (:mod:`marg.learners.choice.choice_rule`, "Defaults": max(TOLERANCE, 1.96·se) of the paired
difference over the folds), in this order:

1. Naive Bayes on the measured feature the sites' round-1 selections ranked first (:func:`pool`; a
   ranking released before round 2 measured anything, so every fold refits it on the same feature),
   a candidate added for this. Its estimate is the one the measured tables determine without the
   simulated world: it reads one first-order table N[x_1, y], which round 2 measured, while a rule
   combining features whose pair tables were not measured is judged on rows that simulate them
   independent given the label — naive Bayes's own world, which flatters it when they are not
   (credit-a: A9, A10 and A11).
2. Rényi: its rule is the minimum-HGR rule over every distribution with the measured marginals
   (:mod:`marg.learners.classifiers.renyi`), not the plug-in rule of a model of the rows; naive Bayes and the DCCs
   are the Bayes rules of an independence or tree model — the kind of model the held-out rows are
   drawn from (tree-augmented naive Bayes), so within noise their estimates are the flattered ones.

Measured on the same DP summaries (BENCHMARKS.md, "Issue 34: the study's choice on the narrow sets
(i34h)"; ``bench/study_choice.py``), against the choice by estimated error alone: better on credit-a
(in the split-runs collected after the rule was fixed, and in those before) and kr-vs-kp (Rényi where
naive Bayes tied it), level on house-votes-84, a little worse on the planted wide study (Rényi where naive
Bayes, the Bayes rule of its independent features, tied it; there just above its Bayes error).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Any, Mapping, Sequence

import numpy as np

from marg.errors import InputError
from marg.marginals.allocation import least_squares_weights
from marg.marginals.request import StudyRequest
from marg.marginals.selection import Selection
from marg.marginals.study import STUDY_MECHANISM
from marg.marginals.study_split import NOISE_RATIO, agreement_probability

from ..features.statistics import released
from ..certification.selection_certificate import candidate_entries, label_source  # noqa: F401  (their home: selection_certificate)

STUDY_CHOICE: dict[str, Any] = {
    "prefer": "accuracy",
    "candidates": (("dcc", {"edge_weight": "label"}), ("dcc", {"edge_weight": "cmi"}), ("nb", {"certify": "bound"}),
                   ("renyi", {})),
}
"""The automatic choice on a study's measured features, unless ``--prefer`` / candidates are given (module
docstring)."""


def study_choice(summary: Any) -> dict[str, Any]:
    """:data:`STUDY_CHOICE` for this study with the choice's ``defaults`` (module docstring): naive Bayes on the
    best-ranked measured feature alone — the first of :func:`pool`'s order over the round-1 records that is in the
    summary's codebook, added as a candidate when more than one feature was measured —, then Rényi."""
    names = {f.name for f in summary.codebook.features}
    ranked = [a for a, _, _ in pool(pool_records(summary)) if a in names] if len(names) > 1 else []
    if not ranked:
        return {**STUDY_CHOICE, "defaults": (("renyi", {}),)}
    one = ("nb", {"certify": "bound", "features": [ranked[0]]})
    return {**STUDY_CHOICE, "candidates": (*STUDY_CHOICE["candidates"], one), "defaults": (one, ("renyi", {}))}


@dataclass(frozen=True)
class SiteRound1:
    """What one site's round-1 bundle tells the learner: its name, noisy n, selection and what it has left."""

    site: str
    n_hat: float
    selection: Selection
    rho_rest: float


def site_round1(site: str, record: Mapping[str, Any], label_counts: np.ndarray) -> SiteRound1:
    """A :class:`SiteRound1` from a round-1 bundle's study record and its noisy label table."""
    if record.get("round") != 1:
        raise InputError(f"site {site!r}: not a round-1 bundle of select-then-measure (marg export --epsilon TOTAL)")
    plan = record.get("plan") or {}
    try:
        # what round 1 took from ρ_total: ``rho_study`` (a Laplace label table's ε_L is not its ε_L²/2), else its ρ
        rest = float(plan["rho_total"]) - float(record.get("rho_study", record["spent"]["rho"]))
    except (KeyError, TypeError, ValueError):
        raise InputError(f"site {site!r}: its round-1 record has no study total") from None
    return SiteRound1(site, max(1.0, float(np.sum(label_counts))), Selection.from_dict(record["selection"]),
                      max(0.0, rest))


def pool(sites: Sequence[SiteRound1]) -> list[tuple[str, float, float]]:
    """(feature, vote v_i, rank score b_i) for every feature some site chose, best b_i first (module docstring)."""
    total = sum(s.n_hat for s in sites)
    vote: dict[str, float] = {}
    borda: dict[str, float] = {}
    for s in sites:
        w = s.n_hat / total
        k = len(s.selection.features)
        for r, a in enumerate(s.selection.features):
            vote[a] = vote.get(a, 0.0) + w
            borda[a] = borda.get(a, 0.0) + w * (k - r)
    return sorted(((a, vote[a], borda[a]) for a in vote), key=lambda t: (-t[2], -t[1], t[0]))


def chance_vote(sites: Sequence[SiteRound1]) -> float:
    """The vote a feature gets by chance when no feature carries the label: Σ_s w_s·k_s/p_s."""
    total = sum(s.n_hat for s in sites)
    return sum(s.n_hat / total * len(s.selection.features) / max(1, s.selection.candidates) for s in sites)


def agreed(sites: Sequence[SiteRound1]) -> list[str]:
    """The features the sites agree on, best first: vote v_i above the majority and above halfway
    from the chance vote c to 1 (v_i > max(1/2, (1 + c)/2)), and chosen by at least two sites (a
    site's weight comes from its noisy n, which at a tiny site can be far off: one site never
    agrees with itself); empty when nothing rises above the selection's noise."""
    if not sites:
        return []
    if all(s.selection.measures_all for s in sites):  # every site ranked all p (the split rule's measure-all)
        return [a for a, _, _ in pool(sites)]  # every candidate, best pooled rank score first
    bar = max(0.5, (1.0 + chance_vote(sites)) / 2.0)
    need = min(2, len(sites))
    count: dict[str, int] = {}
    for s in sites:
        for a in s.selection.features:
            count[a] = count.get(a, 0) + 1
    return [a for a, v, _ in pool(sites) if v > bar and count[a] >= need]


def chance_agreements(sites: Sequence[SiteRound1]) -> float:
    """λ, the expected number of features :func:`agreed` would keep if every site picked its k at random:
    p·P(a given feature is chosen by ≥ 2 sites whose weights sum above the bar), exactly over the
    subsets of sites (:func:`marg.marginals.study_split.agreement_probability`, the split rule's own
    model of agreement); ``inf`` beyond 12 sites (not computed)."""
    if len(sites) > 12:
        return float("inf")
    total = sum(s.n_hat for s in sites)
    w = [s.n_hat / total for s in sites]
    pk = [len(s.selection.features) / max(1, s.selection.candidates) for s in sites]
    bar = max(0.5, (1.0 + chance_vote(sites)) / 2.0)
    return agreement_probability(w, pk, bar) * max(s.selection.candidates for s in sites)


def above_chance(sites: Sequence[SiteRound1]) -> list[str]:
    """:func:`agreed`, or [] when that many agreements are what random picks give: where the test has
    power (λ = :func:`chance_agreements` < 1, wide studies), the count must exceed Poisson(λ)'s 95 %
    quantile. Narrow studies (k a large share of p: λ ≥ 1) keep :func:`agreed` as it is."""
    from scipy.stats import poisson

    keep = agreed(sites)
    if sites and all(s.selection.measures_all for s in sites):
        return keep  # every site ranked every candidate: nothing was dropped, so nothing agrees by chance
    lam = chance_agreements(sites)
    if lam < 1.0 and len(keep) <= int(poisson.ppf(0.95, lam)):
        return []
    return keep


def _pooled_std(rests: Sequence[float], weight: float) -> float:
    """Pooled noise std of one cell of a table given share ``weight`` of each site's rest ρ_s:
    sqrt(Σ_s σ_s²), σ_s the discrete Gaussian's scale for ρ = weight·ρ_s at sensitivity 1."""
    from marg.marginals.mechanisms import get_mechanism

    g = get_mechanism(STUDY_MECHANISM)
    return float(np.sqrt(sum(g.scale_for(weight * r, 1.0) ** 2 for r in rests if r > 0)))


@dataclass(frozen=True)
class TablePlan:
    """What round 2 measures: the cliques (features only), their weights, M (pairs among the first M),
    and the pooled noise std per cell of the first-order and the largest pair table."""

    tables: tuple[tuple[str, ...], ...]
    weights: tuple[float, ...]
    pairs_among: int
    first_std: float
    pair_std: float | None


def first_order_rule(kept: Sequence[str], m: Mapping[str, int], K: int, rests: Sequence[float],
                     n_hat: float) -> list[str]:
    """The agreed features whose first-order table would not be mostly noise: drop, worst first, a
    table whose pooled noise std per cell exceeds ``NOISE_RATIO``·n̂/|T| (least-squares weights over
    the tables left; dropping one gives the others more); the best-ranked feature always stays."""
    keep = list(kept)
    while len(keep) > 1:
        sizes = [K * m[a] for a in keep]
        w = least_squares_weights(sizes, STUDY_MECHANISM)
        ratio = [_pooled_std(rests, float(w[i])) * sizes[i] / max(n_hat, 1.0) for i in range(len(keep))]
        worst = max(range(1, len(keep)), key=lambda i: (round(ratio[i], 9), i))  # ties: the lowest-ranked
        if ratio[worst] <= NOISE_RATIO:
            break
        del keep[worst]
    return keep


def whole_workload(kept: Sequence[str], codebook: Any, rests: Sequence[float], n_hat: float) -> TablePlan | None:
    """Every first-order and every pair table of ``kept`` — the one-round workload — when round 2 affords it
    within the noise rule at the workload's median pair table (the split rule's criterion for measuring every
    candidate, :func:`marg.marginals.study_split.measures_all`, here on the sites' actual rests): that table's
    pooled noise std per cell at most ``NOISE_RATIO``·n̂/|T| under the least-squares weights round 2 uses; else None."""
    if len(kept) < 2:
        return None
    plan = every_table(kept, codebook, rests)
    K = int(codebook.label.n_classes)
    sizes = [K * int(np.prod([int(codebook.feature(a).n_levels) for a in c])) for c in plan.tables]
    pair = list(range(len(kept), len(plan.tables)))
    med = sorted(pair, key=lambda t: (sizes[t], t))[len(pair) // 2]
    if _pooled_std(rests, float(plan.weights[med])) > NOISE_RATIO * n_hat / sizes[med]:
        return None
    return plan


def every_table(kept: Sequence[str], codebook: Any, rests: Sequence[float]) -> TablePlan:
    """Every first-order table of ``kept`` and every pair table among them (the one-round workload: p first-order and
    p(p − 1)/2 pair tables, each pair in the codebook's order), least-squares weights; no noise rule (the caller's:
    :func:`whole_workload`'s median pair table, or the study design's :func:`marg.marginals.study_split.measures_all`).

    Parameters
    ----------
    kept : sequence of str
        The features, best-ranked first (p of them).
    codebook : Codebook
    rests : sequence of float
        The ρ each noise source gives round 2 (the pooled std of a cell is :func:`_pooled_std` of them).
    """
    K = int(codebook.label.n_classes)
    m = {a: int(codebook.feature(a).n_levels) for a in kept}
    # each pair in the codebook's order, whatever order the sites' noisy ranking gave ``kept``
    cand = [(a,) for a in kept] + list(combinations(sorted(kept, key=codebook.index), 2))
    sizes = [K * int(np.prod([m[a] for a in c])) for c in cand]
    w = least_squares_weights(sizes, STUDY_MECHANISM)
    pair = list(range(len(kept), len(cand)))
    return TablePlan(tuple(cand), tuple(float(x) for x in w), len(kept) if pair else 0,
                     _pooled_std(rests, float(w[max(range(len(kept)), key=lambda t: sizes[t])])),
                     _pooled_std(rests, float(w[max(pair, key=lambda t: sizes[t])])) if pair else None)


def choose_tables(kept: Sequence[str], codebook: Any, rests: Sequence[float], n_hat: float,
                  every: bool = False) -> TablePlan:
    """The first-order tables of ``kept`` and the pairs among its first M, M the largest for which the
    largest pair table's pooled noise std per cell is at most ``NOISE_RATIO``·n̂/|T|; least-squares weights.
    ``every`` (the sites ranked every candidate): the whole workload when it is affordable (:func:`whole_workload`)."""
    whole = whole_workload(kept, codebook, rests, n_hat) if every else None
    if whole is not None:
        return whole
    K = int(codebook.label.n_classes)
    m = {a: int(codebook.feature(a).n_levels) for a in kept}
    kept = first_order_rule(kept, m, K, rests, n_hat)
    first = [(a,) for a in kept]
    fsizes = [K * m[a] for a in kept]
    for size in range(len(kept), 1, -1):
        cand = first + list(combinations(kept[:size], 2))
        sizes = fsizes + [K * m[a] * m[b] for a, b in cand[len(first):]]
        w = least_squares_weights(sizes, STUDY_MECHANISM)
        worst = max(range(len(first), len(cand)), key=lambda t: sizes[t])
        pstd = _pooled_std(rests, float(w[worst]))
        if pstd <= NOISE_RATIO * n_hat / sizes[worst]:
            return TablePlan(tuple(cand), tuple(float(x) for x in w), size,
                             _pooled_std(rests, float(w[int(np.argmax(fsizes))])), pstd)
    w = least_squares_weights(fsizes, STUDY_MECHANISM)
    return TablePlan(tuple(first), tuple(float(x) for x in w), 0, _pooled_std(rests, float(w[int(np.argmax(fsizes))])),
                     None)


def plan_request(sites: Sequence[SiteRound1], codebook: Any) -> StudyRequest:
    """The round-2 request (module docstring): tables, their weights and each site's ρ."""
    if not sites:
        raise InputError("no round-1 bundle to plan from")
    pooled = pool(sites)
    if not pooled:
        raise InputError("the round-1 bundles carry no selection")
    # nothing agreed: the one table measured serves the label counts (its column sums), so the
    # chosen feature with the fewest levels (the least noise summed per class; ties: the best ranked)
    kept = above_chance(sites) or [min(pooled, key=lambda t: int(codebook.feature(t[0]).n_levels))[0]]
    # a site bounding each patient to K rows adds K times a row's noise: plan at its ρ/K² per row
    every = all(s.selection.measures_all for s in sites)
    rests, n_hat = [s.rho_rest / s.selection.sensitivity ** 2 for s in sites], sum(s.n_hat for s in sites)
    tp = choose_tables(kept, codebook, rests, n_hat, every)
    why = {"pooled": [{"feature": a, "vote": round(v, 4), "rank_score": round(b, 4)} for a, v, b in pooled[:50]],
           "kept": kept, "pairs_among": [a for a in kept if any(len(c) == 2 and a in c for c in tp.tables)],
           "pairs": sum(len(c) == 2 for c in tp.tables), "chance_vote": chance_vote(sites),
           "noise_std": {"first_order": tp.first_std, "pair": tp.pair_std},
           "rule": ("every candidate (the sites ranked all p: round 2 affords them all) and every pair while the "
                    f"median pair table's pooled noise std per cell <= {NOISE_RATIO:g} x its expected count, else "
                    "pairs among the best-ranked first M by the largest pair table; weights: least squares" if every
                    else
                    "features chosen by sites holding more than max(1/2, (1 + chance)/2) of the patients; pairs among "
                    f"the first M while the pooled noise std of a pair cell <= {NOISE_RATIO:g} x its expected count; "
                    "weights: least squares")}
    return StudyRequest(codebook.fingerprint, tp.tables, tp.weights, {s.site: s.rho_rest for s in sites}, why)


def preview(codebook: Any, rows: Sequence[int], epsilon: float, delta: float, max_rows: int = 1) -> dict[str, Any]:
    """What the DP path will measure and at what noise, before anything is spent (``marg plan``).

    Round 1 is the site's plan (:func:`marg.marginals.study.study_plan` for these rows: the split
    rule's shares, k and why); for round 2 it assumes the sites agree on all k features they each
    select, taken as the k with the most levels (the noisiest case)."""
    from marg.marginals.selection import calibrate_top_k
    from marg.marginals.study import label_noise_std, study_plan

    plan = study_plan(codebook, epsilon, delta, rows, max_rows)
    names = sorted(codebook.discrete_names, key=lambda a: (-int(codebook.feature(a).n_levels),
                                                           codebook.index(a)))[:plan.k]
    rests = [plan.rho_rest / max_rows ** 2] * len(rows)
    tp = choose_tables(names, codebook, rests, float(sum(rows)), plan.k == plan.candidates)
    return {"plan": plan.to_dict(), "sites": len(rows), "rows": list(rows),
            "label_std": label_noise_std(plan, max_rows), "label_mechanism": plan.label_mechanism,
            "selection_scale": calibrate_top_k(plan.k, plan.rho_select, max_rows)[0],
            "round2_first_order": sum(len(c) == 1 for c in tp.tables), "round2_pairs_among": tp.pairs_among,
            "round2_pairs": sum(len(c) == 2 for c in tp.tables),
            "round2_first_std": tp.first_std, "round2_pair_std": tp.pair_std}


def is_selected(summary: Any) -> bool:
    """Whether ``summary`` holds a select-then-measure study (its bundles carry round-1 study records:
    ``summary.selection``, :class:`marg.marginals.selected_from.SelectedFrom`)."""
    return summary.selection is not None


def _round1_by_site(summary: Any) -> list[tuple[str, Mapping[str, Any]]]:
    sel = summary.selection
    return [] if sel is None else list(sel.rounds)


def pool_records(summary: Any) -> list[SiteRound1]:
    """The sites' round-1 selections from a summary's provenance, weighted by the site's share of n
    (its tables as summed: the label table's per-site part when kept, else equal weights)."""
    lab = summary.codebook.label.name
    parts = dict(summary.site_parts) if summary.site_parts else {}
    out = []
    for site, st in _round1_by_site(summary):
        ts = [t for t in parts.get(site, ()) if t.clique == (lab,) and t.kind == "counts"]
        counts = np.asarray(ts[0].counts, dtype=np.float64) if ts else np.ones(1)
        out.append(site_round1(site, st, counts))
    return out


def measured_within_noise(summary: Any) -> bool:
    """Whether every first-order table the study measured is within the noise rule of round 2's plan: its pooled
    noise std per cell at most ``NOISE_RATIO``·n̂/|T| (:func:`first_order_rule`; the table is above the noise)."""
    rel = released(summary)
    lab = summary.codebook.label.name
    n_hat = max(float(np.sum(summary.counts((lab,)))), 1.0)
    for f in summary.codebook.features:
        size = int(f.n_levels) * int(summary.n_classes)
        if float(rel.count_noise_std((f.name, lab))) > NOISE_RATIO * n_hat / size:
            return False
    return True


def beats_prior(rows: Sequence[Any] | None) -> bool:
    """Whether the automatic choice's chosen candidate is estimated better than the label-only rule by more than the
    noise of that comparison: ê_chosen + max(``TOLERANCE``, se(chosen, prior)) < ê_prior, se over the paired
    leave-one-site-out folds (:func:`marg.learners.choice.choice_rule.noise_margin`, the choice's own margin); False
    without both estimates or without paired folds (an in-sample estimate is optimistic for every rule)."""
    from ..choice.choice_rule import PRIOR, TOLERANCE, noise_margin

    chosen = next((r for r in rows or () if getattr(r, "chosen", False)), None)
    prior = next((r for r in rows or () if r.learner == PRIOR), None)
    if chosen is None or prior is None or chosen is prior or chosen.error is None or prior.error is None:
        return False
    if len(chosen.folds) < 2 or len(chosen.folds) != len(prior.folds):  # in-sample estimates flatter every rule
        return False
    margin = noise_margin(chosen, prior, TOLERANCE, list(chosen.fold_weights) or None)
    return float(chosen.error) + margin < float(prior.error)


def finish(est: Any, summary: Any, coverage: float = 0.95, rows: Sequence[Any] | None = None,
           record: dict[str, Any] | None = None) -> tuple[Any, str]:
    """The model of a select-then-measure study: the prior when nothing is above the noise, else ``est``
    as fitted — its certificate already covers the selection, its fit's own (module docstring;
    :mod:`marg.learners.certification.selection_certificate`). Returns (estimator, note).

    ``rows``: the automatic choice's candidate rows (``AutoLearner.candidates_``). When the sites agreed on no
    feature, round 2 still measured one chosen feature's table (:func:`plan_request`), with fresh noise after the
    selection; ``est`` is kept only when that table is within the noise rule (:func:`measured_within_noise`) and
    ``est`` beats the prior by more than the noise of the comparison (:func:`beats_prior`) — issue 34, measured on
    house-votes-84: noisy row counts pushed λ below 1 in a few split-runs, the agreement test then kept nothing,
    and the prior erred far more than the measured table's model was estimated to (BENCHMARKS.md, "Issue 34, narrow
    sets: the acceptance run after i34g's change"). Otherwise the prior,
    fitted on ``summary`` at ``coverage`` (:class:`marg.learners.classifiers.label_only.LabelOnly` certifies itself by
    the least noisy label counts at α/2).

    **On evidence that did not select its features** (issue 44; :mod:`marg.learners.study.unselected`): with the sites'
    own tables, ``est`` is kept only when it beats the larger class on folds whose features were selected without
    the left-out site; not beaten, the larger class is the model. ``record`` (a dict, optional) receives that
    comparison under ``"unselected"`` (its numbers, or why there is none)."""
    from ..classifiers.label_only import LabelOnly
    from .unselected import unselected_comparison

    entries = candidate_entries(summary)
    records = pool_records(summary)
    above = len(above_chance(records))
    rescued = above == 0 and est.learner != "prior" and beats_prior(rows) and measured_within_noise(summary)
    if (above == 0 and not rescued) or est.learner == "prior":
        prior = est if est.learner == "prior" else LabelOnly(coverage=float(coverage)).fit(summary)
        return prior, ("the sites' private selections agreed on no feature (nothing above the noise): the "
                       "larger class, certified by the label table" if above == 0 else "")
    # a feature agreed: the rule against the larger class on evidence that did not select it (the rescued rule's one
    # table was measured after a selection that agreed on nothing, and beat the prior beyond the noise already)
    check = "rescued: no feature was agreed" if rescued else unselected_comparison(est, summary, records, above_chance)
    if record is not None:
        record["unselected"] = check if isinstance(check, str) else check.to_dict()
    if not isinstance(check, str) and not check.beaten:
        return LabelOnly(coverage=float(coverage)).fit(summary), f"the larger class: {check.words()}"
    why = ("the sites' private selections agreed on no feature, but round 2's table, measured after the selection "
           "and within the noise rule, gives a rule estimated better than the larger class by more than the noise; "
           if rescued else "")
    why += "" if isinstance(check, str) else f"{check.words()}; "
    return est, (why + f"certificate W(h) over the first-order box of the {len(summary.codebook.features)} measured "
                 f"features, lambda calibrated for all {entries} candidate cells (the features were selected from the "
                 "data)")

