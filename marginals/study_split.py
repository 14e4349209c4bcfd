"""The split rule of select, then measure: the label share, the selection's share and k, and round 2's share, chosen to
minimise an expected-error proxy from what is known before anything is spent (or every candidate measured, when round 2
affords them all).

**Known before spending.** The rows per site n_s as stated publicly (``--plan-rows``, as for
``marg plan``; N = Σ n_s over S sites, w_s = n_s/N), the codebook (p discrete candidates,
their levels m_i, C classes), the site's study total ρ_T and the bound r on a patient's rows
(every count's and score's sensitivity). Nothing is read from the data. The pooled tables' noise
is S curators' variance when each site adds its own; under noise shared through a secure sum of S
sites with threshold t it is S/t curators' (``SplitInputs.noise_sites``, :mod:`marg.marginals.study_design`):
every pooled std below reads sqrt(S) as sqrt(curators).

**The planning world.** The rule scores a split (a_L, a_S, a_2 = 1 − a_L − a_S of ρ_T) and a
k on a stylised study: the larger class leads by ``GAP`` of the rows, and F = min(``F_PLAN``,
⌊p/2⌋) features each raise a one-feature rule's accuracy by ``EFFECT`` (the rest carry
nothing). The error of the learner's answer in that world is

    E = P_any·e_found + (1 − P_any)·(P_chance·1/2 + (1 − P_chance)·e_prior)

- **The selection.** At site s, OpenDP's zCDP top-k adds Gumbel noise of scale
  b = r·sqrt(k/(8·a_S·ρ_T)) to each score; a null feature's correct count spreads by about
  sqrt(n_s)/2 (a fair coin's). The top max(k − F, 1) of the p − F null noisy scores begin near
  the t_s where (p − F)·P(s + G > t_s) = max(k − F, 1), s ~ N(0, n_s/4), G ~ Gumbel(0, b)
  (Gauss–Hermite over s, exact in G: the Gumbel's exponential right tail reaches far beyond a
  normal of its variance — on the planted study's sites, 1,000 patients and 2,990 null
  features at a_S = 0.08, t_s = 208 counts where the normal gave 123, so the rule under-spent
  on selection); an informative feature, whose count leads by EFFECT·n_s, is chosen with
  h_s = P(s + G > t_s − EFFECT·n_s) (beating the m-th best null: with k ≈ F a lower bound on
  top-k membership — simulated there 0.78 against h = 0.53 at a_S = 0.08, 0.96 against 0.99 at
  0.15, where the normal model said 0.98 and 1.00 — so the rule errs towards selection), a null one with
  (k − min(k, F)·h_s)/(p − F). The learner keeps a feature chosen by sites of weight above
  max(1/2, (1 + Σ w_s·k/p)/2), at least two of them (:func:`agreement_probability`, the
  learner's own rule): P_agree for an informative feature, λ = (p − F)·P(agree) for the nulls.
  P_any = 1 − (1 − P_agree)^min(k, F); given that, j = min(k, F)·P_agree/P_any are found.
- **Round 2** measures the agreed features' first-order tables, at most k_max(a_2) of them
  (below), informative and chance ones in proportion (the learner cannot tell them apart):
  j + λ tables of |T| = C·m̃ cells (m̃ the median levels) at a_2·ρ_T/(j + λ) each, pooled std
  per cell σ_2 = sqrt(S)·r/sqrt(2·a_2·ρ_T/(j + λ)). A level of an informative feature separates
  the classes by 2·EFFECT·N/m̃ rows; noise flips that comparison with
  P_flip = Φ(−2·EFFECT·N/(m̃·sqrt(2)·σ_2)), leaving each feature right with q = 1/2 +
  EFFECT·(1 − 2·P_flip). **e_found** is the error of the vote of the j features (λ chance
  ones add ±1 noise): Φ(−j·(2q − 1)/sqrt(4j·q(1 − q) + λ)).
- **Nothing found.** The learner keeps a chance agreement with P_chance (its own test,
  :func:`chance_passes`) and a model on chance features errs 1/2; otherwise it answers the
  larger class: **e_prior** = (1 − GAP)/2 + GAP·P_wrong, where the prior reads the least noisy
  label counts — the label table, σ_L² = r²/(2·a_L·ρ_T) per cell per site, or the column sums
  of the one table round 2 then measures (the fewest levels m_min at all of a_2·ρ_T:
  m_min·r²/(2·a_2·ρ_T)) — and the pooled difference of two classes has std σ·sqrt(2S):
  P_wrong = Φ(−GAP·N/(σ·sqrt(2S))).

**The rule.** Round 2 measures at most k_max(a_2) tables (:func:`k_max`): the largest number
of first-order tables of the median size that keep σ_2 ≤ ``NOISE_RATIO``·N/|T| (the noise rule
of the learner's round-2 plan, :mod:`marg.learners.study.two_round`; at least 1, at most ⌊p/2⌋).
Unless every candidate is measured (below), k ranges over 1 … ⌊p/2⌋ (:func:`k_candidates`); each share is at least
``MIN_SHARE`` (every part is a valid release), and the label share at least
:func:`label_floor`: the same noise rule on each site's noisy row count n̂_s, which weighs the
site's vote in the learner's pooling and the models' class prior (std sqrt(C)·σ_L ≤
``NOISE_RATIO``·n_s at the smallest site). The choice minimises E over a grid of shares in
steps of ``STEP`` and every candidate k, then over a finer grid (``STEP``/10) around the best;
splits within ``TIE`` of the least E are ties, won by the largest round-2 share (what the
learner reads), then the smaller k (fewer chance agreements), then the larger label share. Tiny
sites (leukemia: 19 patients a site) find nothing whatever the split (P_any ≈ 0), so E is
the prior's error and the label table takes nearly everything; large sites find their
features at a small selection share, and round 2 takes most. It is a planning rule, not a
guarantee: every split is (ε, δ)-DP at the site's total, and the certificate holds whatever
the split.

**Measuring every candidate** (:func:`measures_all`, checked first). Selection exists to spend
round 2 on few tables; when round 2 could measure the whole one-round workload — the p
first-order tables and the p(p − 1)/2 pair tables, p(p + 1)/2 tables counted at the median pair
size C·m̃² and equal shares of round 2's 1 − a_L − ``MIN_SHARE`` — with σ_2 ≤
``NOISE_RATIO``·N/(C·m̃²) (:func:`workload_max`), every table the learner might read is above
the noise, so a selection can only drop features (and the agreement bar drops those some site
missed: on adult, k = 7 of 14 left a few features and a larger error than the one-round release's, BENCHMARKS.md,
"adult on the select-then-measure default: measuring every candidate" and "Issue 47: numbers moved out of
docstrings"). Then the split is the label floor,
``MIN_SHARE`` for a noisy top-p *ranking* (k = p: nothing dropped; the ranking orders the features for the learner's
pair plan) and round 2 the rest (:func:`measure_all_split`); the learner keeps every feature and asks for
every pair when the median pair table, at its least-squares weight on the sites' actual rests,
meets the noise rule (:func:`marg.learners.study.two_round.whole_workload`), else the pairs among the
best-ranked first M. The proxy E does not compare the two (its vote model counts every chance
feature as noise, which a learner reading tables above the noise does not do); the recorded
expected error is e_found for the F planted features with no chance vote. adult's sites
(19,537/11,722/7,815 rows, 14 features) measure every candidate; kr-vs-kp's (36 features, 2,557
rows) and every smaller or wider study keep the grid's choice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from itertools import product
from typing import Any, Sequence

import numpy as np

from marg.errors import InputError


def ndtr(x):
    """``scipy.special.ndtr``, imported on first use: every export imports this module (through
    the release kind), only round 1's split rule calls it, and scipy costs a tenth of a second."""
    from scipy.special import ndtr as _ndtr

    return _ndtr(x)


GAP = 0.10
"""The larger class's lead (share of the rows) the label share must call reliably."""
EFFECT = 0.20
"""The single-feature accuracy gain of a feature worth finding."""
F_PLAN = 10
"""How many such features the planning world holds (at most p)."""
NOISE_RATIO = 0.25
"""A measured table is worth its budget while its pooled noise std per cell is at most this times its expected count."""
MIN_SHARE = 0.01
STEP = 0.01
TIE = 1e-4
"""Splits whose E differ by less than this (0.01 point of error) are ties: the proxy is coarse."""
SELECT_TIE = 2e-3
"""The study design's final split (:func:`marg.marginals.study_design.design_study`): splits within this of the least
E are ties, won by the largest round-2 share. Where the selection finds the planning world's features (P_agree near 1)
E moves by 1e-4 while the selection takes half of round 2's budget (kr-vs-kp: a select share of 0.65 against 0.36 of
the rest), and the proxy does not see what round 2's budget buys the learner (its pair tables: the proxy's round 2 is
first-order tables, whose flips are ≈ 0 at these sizes); measured in BENCHMARKS.md, issue 44 large."""
EXACT_SITES = 12
DEFAULT_ROWS = (300, 300, 300)
"""The rows the rule assumes when the site states none (sites of a few hundred patients)."""


@dataclass(frozen=True)
class SplitInputs:
    """What the split rule knows before spending: rows per site, levels, classes, ρ_T, rows per unit."""

    rows: tuple[int, ...]
    levels: tuple[int, ...]
    classes: int
    rho_total: float
    max_rows: int = 1
    noise_sites: float | None = None
    """How many curators' noise the pooled tables carry: S when each site adds its own (None: S), S/t under
    noise shared through a secure sum of S sites with threshold t (:mod:`marg.marginals.study_design`)."""

    @property
    def p(self) -> int:
        return len(self.levels)

    @property
    def curators(self) -> float:
        """The pooled tables' noise variance in units of one curator's: ``noise_sites``, else S."""
        return float(len(self.rows) if self.noise_sites is None else self.noise_sites)


def agreement_probability(weights: Sequence[float], chosen: Sequence[Any], bar: float) -> Any:
    """P(a feature is agreed on) when site s chooses it with probability ``chosen[s]`` (a number or an
    array), independently: summed over every set of sites, at least two (one when there is one site),
    whose weights sum above ``bar``. Beyond ``EXACT_SITES`` sites (2^S sets) the weighted vote
    Σ w_s·B_s is taken as normal, mean Σ w_s·h_s and variance Σ w_s²·h_s(1 − h_s), the bar raised by
    half a mean site's weight (continuity)."""
    S = len(weights)
    if S > EXACT_SITES:
        mean = sum(w * h for w, h in zip(weights, chosen))
        var = sum(w * w * h * (1.0 - h) for w, h in zip(weights, chosen))
        half = 0.5 * sum(weights) / S  # continuity: the vote moves in steps of about one site's weight
        return ndtr((mean - bar - half) / np.sqrt(np.maximum(var, 1e-300)))
    q: Any = 0.0
    for pick in product((0, 1), repeat=S):
        if sum(pick) >= min(2, S) and sum(w for w, c in zip(weights, pick) if c) > bar:
            term: Any = 1.0
            for h, c in zip(chosen, pick):
                term = term * (h if c else 1.0 - h)
            q = q + term
    return q


def agreement_bar(weights: Sequence[float], k: Sequence[int] | int, p: int) -> float:
    """The vote a feature needs: max(1/2, (1 + c)/2), c = Σ_s w_s·k_s/p (the vote of a random pick)."""
    ks = [k] * len(weights) if isinstance(k, (int, np.integer)) else list(k)
    c = sum(w * kk / max(1, p) for w, kk in zip(weights, ks))
    return max(0.5, (1.0 + c) / 2.0)


def label_floor(x: SplitInputs) -> float:
    """The least label share: the noise rule on each site's noisy row count n̂_s = Σ_y N_s[y], which
    weighs the site's vote and the class prior — std sqrt(C)·σ_L at most ``NOISE_RATIO``·n_s at the
    smallest site: a_L ≥ C·r²/(2·ρ_T·(NOISE_RATIO·n_min)²), within [``MIN_SHARE``, 1 − 2·``MIN_SHARE``]."""
    need = x.classes * x.max_rows ** 2 / (2.0 * x.rho_total * (NOISE_RATIO * min(x.rows)) ** 2)
    return float(min(1.0 - 2.0 * MIN_SHARE, max(MIN_SHARE, math.ceil(need * 1e6) / 1e6)))


def _shares_within(x: SplitInputs, a2: Any, size: float) -> Any:
    """How many equal shares of round 2's ``a2`` keep a table of ``size`` cells within the noise rule (not rounded):
    σ_2 = sqrt(S)·r·sqrt(k/(2·a2·ρ)) ≤ NOISE_RATIO·N/|T|  ⇔  k ≤ 2·a2·ρ·(NOISE_RATIO·N/(|T|·r))²/S."""
    N, S = float(sum(x.rows)), x.curators
    return 2.0 * a2 * x.rho_total * (NOISE_RATIO * N / (size * x.max_rows)) ** 2 / S


def k_max(x: SplitInputs, a2: Any) -> Any:
    """The most first-order tables round 2 can measure at share ``a2`` within the noise rule (≥ 1, ≤ p/2);
    elementwise over an array of shares."""
    k = np.floor(_shares_within(x, np.asarray(a2, dtype=np.float64), x.classes * float(np.median(x.levels))))
    out = np.clip(k, 1, max(1, x.p // 2)).astype(np.int64)
    return int(out) if out.ndim == 0 else out


def _p_wrong(x: SplitInputs, aL: Any, a2: Any) -> Any:
    """P_wrong: the prior calls the wrong larger class, reading the least noisy label counts (the label table at
    ``aL`` or the fewest-levels table's column sums at ``a2``); elementwise."""
    rho, r, S, N = x.rho_total, float(x.max_rows), x.curators, float(sum(x.rows))
    var_label = np.minimum(r * r / (2.0 * aL * rho), float(min(x.levels)) * r * r / (2.0 * a2 * rho))
    return ndtr(-GAP * N / np.sqrt(var_label * 2.0 * S))


def _p_flip(x: SplitInputs, a2: Any, tables: Any) -> Any:
    """P_flip: a level's class comparison flipped by round 2's noise, ``a2`` shared equally by ``tables``;
    elementwise."""
    rho, r, S, N = x.rho_total, float(x.max_rows), x.curators, float(sum(x.rows))
    sigma2 = np.sqrt(S) * r * np.sqrt(tables / (2.0 * a2 * rho))
    return ndtr(-2.0 * EFFECT * N / (float(np.median(x.levels)) * np.sqrt(2.0) * sigma2))


@lru_cache(maxsize=1)
def _quadrature() -> tuple[np.ndarray, np.ndarray]:
    """The 40 Gauss–Hermite nodes (probabilists') and their weights summing to 1, made on first use: every
    export imports this module through its release kind, and ``numpy.polynomial`` is only this rule's."""
    from numpy.polynomial.hermite_e import hermegauss

    nodes, weights = hermegauss(40)
    return nodes, weights / weights.sum()


def _above(t: np.ndarray, sd: float, b: np.ndarray) -> np.ndarray:
    """P(s + G > t) for s ~ N(0, sd²) (a score's sampling spread) and G ~ Gumbel(0, b) (the top-k's noise),
    by 40-node Gauss–Hermite quadrature over s; elementwise over ``t`` and ``b``. The Gumbel's right tail is
    exponential, e^(−u/b): a normal of the same variance understates how far the best of many null scores reaches."""
    nodes, weights = _quadrature()
    u = (np.asarray(t, dtype=np.float64)[..., None] - sd * nodes) / np.asarray(b, dtype=np.float64)[..., None]
    return (weights * -np.expm1(-np.exp(-np.clip(u, -700.0, 700.0)))).sum(-1)


def _p_picked(sd: float, b: Any, lead: float, m: int, nulls: int) -> Any:
    """h: P(a feature whose score leads the nulls' by ``lead`` beats the threshold t that ``m`` of the ``nulls``
    null noisy scores exceed on average (nulls·P(s + G > t) = m, :func:`_above`; bisection on the distinct
    scales b only). Elementwise over ``b``; 1 when there are at most m nulls."""
    b = np.asarray(b, dtype=np.float64)
    if nulls <= m:
        return np.ones_like(b)
    ub, inv = np.unique(b.reshape(-1), return_inverse=True)
    lo = np.full(ub.shape, -10.0 * sd)
    hi = 10.0 * sd + ub * (math.log(nulls) + 40.0)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        over = nulls * _above(mid, sd, ub) > m
        lo, hi = np.where(over, mid, lo), np.where(over, hi, mid)
    return _above(0.5 * (lo + hi) - lead, sd, ub)[inv].reshape(b.shape)


def terms(x: SplitInputs, aL: Any, aS: Any, k: int) -> dict[str, Any]:
    """The parts of E (module docstring), elementwise over arrays of shares: P_wrong, P_agree, λ, j,
    P_any, P_flip, the found model's error and the prior's."""
    aL, aS = np.asarray(aL, dtype=np.float64), np.asarray(aS, dtype=np.float64)
    a2 = 1.0 - aL - aS
    rho, r, S, p = x.rho_total, float(x.max_rows), len(x.rows), x.p
    n = np.asarray(x.rows, dtype=np.float64)
    N = float(n.sum())
    w = n / N
    F = min(F_PLAN, max(1, p // 2))
    kf = min(k, F)
    p_wrong = _p_wrong(x, aL, a2)
    e_prior = (1.0 - GAP) / 2.0 + GAP * p_wrong
    # the selection at each site, then the learner's agreement
    b2 = r * r * k / (8.0 * aS * rho)
    nulls = p - F
    hs, ns_ = [], []
    for ns in n:
        h = _p_picked(math.sqrt(ns) / 2.0, np.sqrt(b2), EFFECT * ns, max(k - F, 1), nulls)
        hs.append(h)
        ns_.append(np.clip((k - kf * h) / nulls, 0.0, 1.0) if nulls > 0 else np.zeros_like(h))
    bar = agreement_bar(w, k, p)
    p_agree = agreement_probability(w, hs, bar)
    lam = nulls * agreement_probability(w, ns_, bar)
    p_any = 1.0 - (1.0 - p_agree) ** kf
    p_chance = chance_passes(nulls * agreement_probability(w, [min(1.0, k / nulls) if nulls > 0 else 0.0] * S, bar))
    j = kf * p_agree / np.maximum(p_any, 1e-300)  # informative features found, given at least one
    # round 2: the agreed features' first-order tables, as many as the noise rule lets the learner measure;
    # a level's class comparison flipped by the noise
    # (agreed by chance or not, the features compete for those; the learner cannot tell them apart)
    keep = np.minimum(1.0, k_max(x, a2) / np.maximum(j + lam, 1e-300))
    j, lam = j * keep, lam * keep
    p_flip = _p_flip(x, a2, np.maximum(1.0, j + lam))
    q = 0.5 + EFFECT * (1.0 - 2.0 * p_flip)
    spread = np.sqrt(4.0 * j * q * (1.0 - q) + lam)
    # none found: 1/2
    e_found = np.where(spread > 0, ndtr(-j * (2.0 * q - 1.0) / np.where(spread > 0, spread, 1.0)), 0.5)
    return {"p_wrong": p_wrong, "p_agree": p_agree, "chance_agreements": lam, "found": j, "p_any": p_any,
            "p_flip": p_flip, "e_found": e_found, "e_prior": e_prior, "p_chance": p_chance + 0.0 * p_wrong}


def chance_passes(lam: float) -> float:
    """P(the learner keeps a chance agreement when nothing carries the label), by its own test
    (:func:`marg.learners.study.two_round.above_chance`): with λ expected chance agreements, the count must
    exceed Poisson(λ)'s 95 % quantile when λ < 1; otherwise any agreement passes (1 − e^(−λ))."""
    if lam <= 0.0:
        return 0.0
    if lam < 1.0:
        # scipy.stats.poisson's sf(ppf(0.95, λ), λ) as it computes them, from scipy.special (scipy.stats
        # costs seconds of import at every DP export)
        from scipy.special import pdtr, pdtrc, pdtrik

        top = math.ceil(pdtrik(0.95, lam))
        below = max(top - 1, 0)
        return float(pdtrc(below if pdtr(below, lam) >= 0.95 else top, lam))
    return float(1.0 - math.exp(-lam))


def objective(x: SplitInputs, aL: np.ndarray, aS: np.ndarray, k: int) -> np.ndarray:
    """E(a_L, a_S, k) = P_any·e_found + (1 − P_any)·(P_chance/2 + (1 − P_chance)·e_prior) (module docstring),
    elementwise."""
    t = terms(x, aL, aS, k)
    e_none = t["p_chance"] * 0.5 + (1.0 - t["p_chance"]) * t["e_prior"]  # a model on chance features errs 1/2
    return t["p_any"] * t["e_found"] + (1.0 - t["p_any"]) * e_none


@dataclass(frozen=True)
class Split:
    """The rule's choice: shares of ρ_T, k, the objective there and its parts (for ``marg plan`` and the bundle)."""

    label: float
    select: float
    round2: float
    k: int
    expected_error: float
    parts: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return {"label_share": self.label, "select_share": self.select, "round2_share": self.round2, "k": self.k,
                "expected_error": self.expected_error, **self.parts,
                "assumed": {"gap": GAP, "effect": EFFECT, "features": F_PLAN}}


def _grid(lo_l: float, hi_l: float, lo_s: float, hi_s: float, step: float) -> tuple[np.ndarray, np.ndarray]:
    ls = np.arange(max(MIN_SHARE, lo_l), hi_l + step / 2, step)
    ss = np.arange(max(MIN_SHARE, lo_s), hi_s + step / 2, step)
    L, Sg = np.meshgrid(ls, ss, indexing="ij")
    ok = 1.0 - L - Sg >= MIN_SHARE - 1e-12
    return L[ok], Sg[ok]


def k_candidates(p: int) -> list[int]:
    """The k the rule tries: 1 … 32, then steps of a quarter up to ⌊p/2⌋ (at least 1)."""
    top = max(1, p // 2)
    ks = list(range(1, min(32, top) + 1))
    while ks[-1] < top:
        ks.append(min(top, int(math.ceil(ks[-1] * 1.25))))
    return ks


def evaluate_grid(x: SplitInputs, L: np.ndarray, Sg: np.ndarray,
                  objective: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """(E, k): E over every grid point (rows) and every candidate k (columns); ``objective`` (x, a_L, a_S, k) → E
    elementwise, by default this module's :func:`objective`."""
    objective = globals()["objective"] if objective is None else objective
    ks = np.asarray(k_candidates(x.p))
    E = np.empty((L.size, ks.size))
    for j, k in enumerate(ks):
        E[:, j] = objective(x, L, Sg, int(k))
    return E, ks


def pick(x: SplitInputs, L: np.ndarray, Sg: np.ndarray, objective: Any = None,
         tie: float = TIE) -> tuple[float, float, float, int]:
    """The rule on a grid: among (shares, k) within ``tie`` (default ``TIE``) of the least E, the largest round-2
    share, then the smaller k, then the larger label share. Returns (E, a_L, a_S, k)."""
    E, ks = evaluate_grid(x, L, Sg, objective)
    E = np.where(np.isnan(E), np.inf, E)
    best = float(E.min())
    i, j = np.nonzero(E <= best + tie)
    a2 = 1.0 - L[i] - Sg[i]
    o = np.lexsort((L[i], -ks[j], np.round(a2, 9)))[-1]
    return float(E[i[o], j[o]]), float(L[i[o]]), float(Sg[i[o]]), int(ks[j[o]])


def workload_max(x: SplitInputs, a2: float) -> int:
    """How many equal shares of round 2's ``a2`` keep a table of the median pair size, C·m̃², within the noise
    rule: ⌊2·a2·ρ_T·(``NOISE_RATIO``·N/(C·m̃²·r))²/S⌋ (σ_2 = sqrt(S)·r·sqrt(shares/(2·a2·ρ_T)))."""
    m = float(np.median(x.levels))
    return int(math.floor(_shares_within(x, a2, x.classes * m * m)))


def measures_all(x: SplitInputs) -> bool:
    """Whether round 2, at all but the label floor and the ranking's ``MIN_SHARE``, affords the whole one-round
    workload — the p first-order tables and the p(p − 1)/2 pairs, p(p + 1)/2 tables counted at the median pair
    size and equal shares — within the noise rule: :func:`workload_max` ≥ p(p + 1)/2 (module docstring,
    "Measuring every candidate")."""
    return x.p >= 2 and workload_max(x, 1.0 - label_floor(x) - MIN_SHARE) >= x.p * (x.p + 1) // 2


def measure_all_split(x: SplitInputs) -> Split:
    """The split that drops nothing: the label floor, ``MIN_SHARE`` for a noisy ranking of all p (k = p: the
    learner's pairs go to the best-ranked features first), round 2 the rest. Its expected error is the proxy's
    e_found with the F planted features found and no chance vote (every candidate's table is within the noise
    rule, so the learner weighs a chance feature by its own measured table)."""
    aL = min(label_floor(x), 1.0 - 2.0 * MIN_SHARE)
    a2 = 1.0 - aL - MIN_SHARE
    F = float(min(F_PLAN, max(1, x.p // 2)))
    p_wrong, p_flip = float(_p_wrong(x, aL, a2)), float(_p_flip(x, a2, x.p))
    q = 0.5 + EFFECT * (1.0 - 2.0 * p_flip)
    e_found = float(ndtr(-F * (2.0 * q - 1.0) / math.sqrt(4.0 * F * q * (1.0 - q))))
    parts = {"p_wrong": p_wrong, "p_agree": 1.0, "chance_agreements": 0.0, "found": F, "p_any": 1.0, "p_flip": p_flip,
             "e_found": e_found, "e_prior": (1.0 - GAP) / 2.0 + GAP * p_wrong, "p_chance": 0.0,
             "measure_all": 1.0, "workload": float(x.p * (x.p + 1) // 2), "workload_max": float(workload_max(x, a2))}
    aL = round(aL, 6)
    return Split(aL, MIN_SHARE, round(1.0 - aL - MIN_SHARE, 6), x.p, e_found, parts)


def choose_split(x: SplitInputs, objective: Any = None, parts_of: Any = None, tie: float = TIE) -> Split:
    """The rule (module docstring): every candidate measured when round 2 affords the one-round workload
    (:func:`measures_all`); else the shares and k minimising E, on a grid then a finer one around the best.

    ``objective`` (x, a_L, a_S, k) → E and ``parts_of`` (x, a_L, a_S, k) → its parts replace this module's
    :func:`objective` and :func:`terms` (the study design's pooled selection, :mod:`marg.marginals.study_design`);
    ``tie``: splits within it of the least E are ties (default ``TIE``; the study design's final split:
    ``SELECT_TIE``)."""
    parts_of = terms if parts_of is None else parts_of
    if not x.rows or min(x.rows) <= 0:
        raise InputError(f"the split rule needs positive rows per site, got {list(x.rows)!r}")
    if not x.levels:
        raise InputError("the split rule needs at least one discrete feature")
    if not (x.rho_total > 0 and math.isfinite(x.rho_total)):
        raise InputError(f"the study total must be finite and > 0, got rho = {x.rho_total!r}")
    if measures_all(x):
        return measure_all_split(x)
    lo = label_floor(x)
    e, aL, aS, k = pick(x, *_grid(lo, 1.0, MIN_SHARE, 1.0, STEP), objective, tie)
    e2, aL2, aS2, k2 = pick(x, *_grid(max(lo, aL - 2 * STEP), aL + 2 * STEP, aS - 2 * STEP, aS + 2 * STEP, STEP / 10.0),
                            objective, tie)
    if e2 < e - tie:  # the finer grid only moves the choice when it is clearly better
        e, aL, aS, k = e2, aL2, aS2, k2
    parts = {key: float(np.asarray(v).reshape(-1)[0])
             for key, v in parts_of(x, np.array([aL]), np.array([aS]), k).items()}
    aL, aS = round(aL, 6), round(aS, 6)
    return Split(aL, aS, round(1.0 - aL - aS, 6), k, e, parts)
