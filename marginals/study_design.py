"""A study's design before anything is spent: each site's total as ρ, its split into the rounds (select, measure, evaluate), the held-out fraction and the selection mode (pooled, private, or none: every first-order table).

**Known before spending** (nothing is read from the data): the codebook (p discrete candidates, their
levels m_i, C classes), the number of sites S and the rows per site n_s as stated publicly (None: the
split rule's ``DEFAULT_ROWS``, 300 a site, and the design says so), each site's study total (ε, δ) —
ρ_T, the largest ρ whose zCDP guarantee is (ε, δ)-DP (OpenDP's conversion,
:func:`marg.marginals.dp_conversions.rho_for_epsilon`) —, the bound r on a patient's rows, the
secure-aggregation threshold t and how the noise is added.

**The pooled noise.** With ``noise="per-site"`` each site adds one curator's noise to its tables, so
a pooled cell's noise variance is S·σ² (σ² = r²/(2ρ_cell)); with ``noise="shared"`` each of the S sites
adds a share of variance σ²/t, so that any t survivors carry one curator's σ² and all S carry
(S/t)·σ² (:mod:`marg.marginals.shared_noise`). The design plans for every site answering: the split
rule's pooled noise model (:mod:`marg.marginals.study_split`: the label table, round 2's tables)
takes ``curators`` = S/t (shared) or S (per-site) curators' variance in place of S.

**The selection mode** (round 1). Two ways to choose round 2's features:

- ``"private"``: each site's own OpenDP top-k (Gumbel noise of scale b = r·sqrt(k/(8·a_S·ρ)) on
  each of its p scores), then the learner's agreement vote — the split rule's model as it is. Its
  cost in p grows like log p (the best of p − F null Gumbels reaches b·ln p), but each site decides
  on its own n_s patients;
- ``"pooled"``: the p first-order tables N[x_i, y], pooled (summed through the secure sum), at equal
  shares a_S·ρ_T/p, and the top-k of the one-feature scores computed from the noisy sums
  (post-processing, no vote). A pooled cell's noise variance is σ_S² = curators·r²·p/(2·a_S·ρ_T),
  so a score's noise std grows like √p; the scores are read on all N = Σ n_s patients at once.

In the planning world of the split rule (the larger class leads by GAP, F = min(10, ⌊p/2⌋)
features each raise a one-feature rule's accuracy by EFFECT) a pooled null feature's score
(correct count, centred) is normal with variance N/4 + m̃·σ_S² (sampling, and the noise of the
m̃ = median(m_i) cells the score reads), an informative one leads it by EFFECT·N; the top-k keeps an
informative feature with probability

    h = Φ((EFFECT·N − τ)/sd),   sd² = N/4 + m̃·σ_S²,   τ = sd·Φ⁻¹(1 − max(k − F, 1)/(p − F))

(τ: the score the max(k − F, 1)-th best of the p − F null scores reaches on average), and
k − min(k, F)·h null features ride along. Round 2 then follows the split rule's model (at most
k_max(a_2) first-order tables within its noise rule, a vote of the j found and λ chance features).
The mode is the one whose split (each at its own best shares and k, the split rule's grid)
has the smaller expected error E; ties (within the rule's ``TIE``) go to ``"pooled"``, except where neither
mode expects to find a feature (P_any < ``FINDS`` at both: the gene sets' 20–30 patients a site), where
``"private"`` releases one pooled table instead of p + 1 for the same E (:func:`choose_mode`). The study
runs the mode chosen (:mod:`marg.protocols.study_top_k` for ``"private"``). When round 2
affords every candidate (:func:`marg.marginals.study_split.measures_all`) nothing is dropped and
the mode is ``"pooled"`` (its ranking only orders the pairs). With the evaluation round the study
returns the larger class when the model does not beat it on the evaluation counts
(:func:`marg.learners.final_choice.final_against_prior`), so E's "nothing found" term is the prior's
error e_prior (without the evaluation round, the split rule's own P_chance/2 + (1 − P_chance)·e_prior).

**Every first-order table** (the third mode, ``"first-order"``): where the study is narrow and small, no
selection — :mod:`marg.marginals.study_first_order` holds its gate, its split and its evaluation round
(sized for the comparison with the larger class).

**The evaluation round and the held-out fraction** (``evaluate=True``, the other modes). A share a_E of ρ_T goes to
the evaluation round (one pooled confusion table N[predicted, y], C² cells, sensitivity r) and a
fraction f of each site's patients is held out of training. The rule minimises the **expected
certificate** J(f, a_E) = p_m + W: the planning world's error of the model trained on the rest,

    p_m(f, a_E) = E(rows·(1 − f), (1 − a_E)·ρ_T)   (the mode's split at full rows, its shares kept),

plus the expected width W of the holdout bound (:mod:`marg.learners.holdout_certificate`) on
n_h = f·N held-out patients, at level α' = (1 − coverage)·g(1)/2 (the first model evaluated on the
held-out set, g(j) = 6/(π²·j²), its α shared with the larger class it is compared with), whose
pooled error count (C(C − 1) cells) and held-out count (C² cells) carry noise of variance
v = curators·r²/(2·a_E·ρ_T) a cell:

    n⁻ = n_h − z(α_n)·sqrt(C²·v),    p_m + W = min(1, (p_m·n_h + z(α_e)·sqrt(n_h·p_m(1 − p_m) + C(C − 1)·v))/n⁻)

(α_n = ``ROWS_SHARE``·α', α_e = α' − α_n, z(α) = Φ⁻¹(1 − α); 1 when n⁻ ≤ 0): the normal form of the
exact bound at its expected counts. J − E(rows, ρ_T) is the bound's width plus the training loss
of holding rows out and spending on the evaluation. Over f ∈ {0.10, 0.15, …, 0.50} and
a_E ∈ {0.02, 0.04, …, 0.50}; values within ``J_TIE`` of the least are ties, won by the smallest f,
then the smallest a_E. The rest, (1 − a_E)·ρ_T, is split by the mode's rule on the training rows
(1 − f)·n_s: the label table and the selection (round "select"), round 2 (round "measure"); splits within
``SELECT_TIE`` of that rule's least E are ties won by round 2 (:data:`marg.marginals.study_split.SELECT_TIE`: the
proxy's round 2 is first-order tables and does not see the pair tables its budget buys).

It is a planning rule, not a guarantee: every split is (ε, δ)-DP at the site's total (the rounds'
ρ add to ρ_T), and every certificate holds whatever the split.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Mapping, Sequence

import numpy as np
from scipy.special import ndtr, ndtri

from marg.errors import InputError

from . import study_split as ss
from .dp_conversions import rho_for_epsilon
from .study_first_order import (COMPARISON_MAX, DETECT, FIRST_ORDER, FIRST_ORDER_MAX_P, FIRST_ORDER_RATIO,  # noqa: F401
                                GUARD, POWER, comparison_decisive, comparison_power,
                                first_order_fits, first_order_split, guard_sees)

NOISES = ("shared", "per-site")
MODES = ("pooled", "private")
FRACTIONS = tuple(float(f) for f in np.round(np.arange(0.10, 0.501, 0.05), 2))
EVAL_SHARES = tuple(float(a) for a in np.round(np.arange(0.02, 0.501, 0.02), 2))
FINDS = 0.5
"""A mode whose planned selection keeps an informative feature with probability P_any below this finds nothing."""
J_TIE = 0.002
"""Expected certificates within this of the least are ties (the training side is modelled coarsely)."""
COVERAGE = 0.95
ROWS_SHARE = 0.25
"""The share of the bound's α spent on the held-out count's lower bound (as :mod:`marg.learners.holdout_certificate`)."""


def first_level(coverage: float = COVERAGE) -> float:
    """α' = (1 − coverage)·g(1)/2 with g(j) = 6/(π²·j²): the α of the first model evaluated on a held-out set
    (:func:`marg.learners.holdout_certificate.evaluation_alpha`), shared with the larger class it is compared with."""
    return (1.0 - coverage) * 6.0 / (math.pi ** 2) / 2.0


def curators(noise: str, n_sites: int, threshold: int) -> float:
    """The pooled noise variance in curators' units: S/t under shared noise, S per site (module docstring)."""
    return float(n_sites) / float(threshold) if noise == "shared" else float(n_sites)


# -- the selection modes' expected error ---------------------------------------------------------------

def pooled_terms(x: ss.SplitInputs, aL: Any, aS: Any, k: int) -> dict[str, Any]:
    """The parts of E with the pooled selection (module docstring), elementwise over arrays of shares."""
    aL, aS = np.asarray(aL, dtype=np.float64), np.asarray(aS, dtype=np.float64)
    a2 = 1.0 - aL - aS
    rho, r, p = x.rho_total, float(x.max_rows), x.p
    N = float(sum(x.rows))
    F = min(ss.F_PLAN, max(1, p // 2))
    kf = min(k, F)
    m = float(np.median(x.levels))
    p_wrong = ss._p_wrong(x, aL, a2)
    e_prior = (1.0 - ss.GAP) / 2.0 + ss.GAP * p_wrong
    var_cell = x.curators * r * r * p / (2.0 * aS * rho)  # a pooled first-order cell, equal shares over p tables
    sd = np.sqrt(N / 4.0 + m * var_cell)
    nulls = p - F
    if nulls > 0 and max(k - F, 1) < nulls:
        tau = sd * ndtri(1.0 - max(k - F, 1) / nulls)
        h = ndtr((ss.EFFECT * N - tau) / sd)
    else:
        h = np.ones_like(sd)
    lam = np.clip(k - kf * h, 0.0, max(nulls, 0))
    p_any = 1.0 - (1.0 - h) ** kf
    j = kf * h / np.maximum(p_any, 1e-300)
    keep = np.minimum(1.0, ss.k_max(x, a2) / np.maximum(j + lam, 1e-300))
    j, lam = j * keep, lam * keep
    p_flip = ss._p_flip(x, a2, np.maximum(1.0, j + lam))
    q = 0.5 + ss.EFFECT * (1.0 - 2.0 * p_flip)
    spread = np.sqrt(4.0 * j * q * (1.0 - q) + lam)
    e_found = np.where(spread > 0, ndtr(-j * (2.0 * q - 1.0) / np.where(spread > 0, spread, 1.0)), 0.5)
    p_chance = np.where(lam > 0, 1.0, 0.0) + 0.0 * p_wrong  # the top-k is measured whatever it holds
    return {"p_wrong": p_wrong, "p_agree": h, "chance_agreements": lam, "found": j, "p_any": p_any, "p_flip": p_flip,
            "e_found": e_found, "e_prior": e_prior, "p_chance": p_chance}


def _combine(t: Mapping[str, Any], guarded: bool) -> Any:
    """E = P_any·e_found + (1 − P_any)·e_none; e_none = e_prior when the study compares with the prior at the end."""
    e_none = t["e_prior"] if guarded else t["p_chance"] * 0.5 + (1.0 - t["p_chance"]) * t["e_prior"]
    return t["p_any"] * t["e_found"] + (1.0 - t["p_any"]) * e_none


def mode_functions(mode: str, guarded: bool) -> tuple[Any, Any]:
    """(objective, parts) of a selection mode for :func:`marg.marginals.study_split.choose_split`."""
    parts = pooled_terms if mode == "pooled" else ss.terms
    return (lambda x, aL, aS, k: _combine(parts(x, aL, aS, k), guarded)), parts


def mode_split(x: ss.SplitInputs, mode: str, guarded: bool, tie: float = ss.TIE) -> ss.Split:
    """The split rule's choice for ``mode`` (every candidate measured when round 2 affords them all); ``tie``: the
    split rule's (:func:`marg.marginals.study_split.choose_split`)."""
    objective, parts = mode_functions(mode, guarded)
    return ss.choose_split(x, objective, parts, tie)


def split_error(x: ss.SplitInputs, split: ss.Split, mode: str, guarded: bool) -> Any:
    """E of ``split``'s shares and k kept, on inputs ``x`` (other rows or ρ; ``x.rho_total`` may be an array of
    totals: E is then an array, one per total — every term reads ρ only through a share times it)."""
    if split.parts.get("measure_all"):
        rhos = np.atleast_1d(np.asarray(x.rho_total, dtype=np.float64))
        out = np.array([ss.measure_all_split(replace(x, rho_total=float(r))).expected_error for r in rhos])
        return out if np.ndim(x.rho_total) else float(out[0])
    objective, _ = mode_functions(mode, guarded)
    shape = np.shape(x.rho_total) or (1,)
    E = np.asarray(objective(x, np.full(shape, split.label), np.full(shape, split.select), split.k), dtype=np.float64)
    return E.reshape(shape) if np.ndim(x.rho_total) else float(E.reshape(-1)[0])


def choose_mode(splits: Mapping[str, ss.Split]) -> str:
    """The selection mode from each mode's best split (module docstring): the smaller expected error E; ties (within
    ``TIE``) go to ``"pooled"`` — unless neither mode expects to find a feature (P_any below ``FINDS`` at both), where
    the selection buys nothing and ``"private"`` releases one pooled table in round 1 instead of p + 1."""
    pooled, private = splits["pooled"], splits["private"]
    if private.expected_error < pooled.expected_error - ss.TIE:
        return "private"
    if private.expected_error <= pooled.expected_error + ss.TIE and \
            max(float(pooled.parts.get("p_any", 1.0)), float(private.parts.get("p_any", 1.0))) < FINDS:
        return "private"
    return "pooled"


# -- the evaluation round ------------------------------------------------------------------------------

def expected_bound(p_m: float, n_h: float, var_cell: float, classes: int, coverage: float = COVERAGE) -> float:
    """p_m + W: the holdout bound's normal form at its expected counts (module docstring)."""
    a = first_level(coverage)
    a_n, a_e = ROWS_SHARE * a, (1.0 - ROWS_SHARE) * a
    C = float(classes)
    n_low = n_h - float(ndtri(1.0 - a_n)) * math.sqrt(C * C * var_cell)
    if n_low <= 0.0:
        return 1.0
    up = p_m * n_h + float(ndtri(1.0 - a_e)) * math.sqrt(n_h * p_m * (1.0 - p_m) + C * (C - 1.0) * var_cell)
    return float(min(1.0, up / n_low))


def _cell_var(x: ss.SplitInputs, a_e: float) -> float:
    """The pooled noise variance of one evaluation cell at share ``a_e``: curators·r²/(2·a_E·ρ_T)."""
    return x.curators * float(x.max_rows) ** 2 / (2.0 * a_e * x.rho_total)


def _training(x: ss.SplitInputs, f: float, a_e: Any) -> ss.SplitInputs:
    """The training side's inputs: rows (1 − f)·n_s, total (1 − a_E)·ρ_T (an array for an array of shares)."""
    rho = (1.0 - np.asarray(a_e, dtype=np.float64)) * x.rho_total
    return replace(x, rows=tuple(max(1, int(round((1.0 - f) * n))) for n in x.rows),
                   rho_total=rho if np.ndim(rho) else float(rho))


def choose_evaluation(x: ss.SplitInputs, split: ss.Split, mode: str, coverage: float = COVERAGE) -> dict[str, float]:
    """(f, a_E) minimising the expected certificate J (module docstring) with ``split``'s shares kept."""
    N, C, r = float(sum(x.rows)), x.classes, float(x.max_rows)
    shares = np.asarray(EVAL_SHARES)
    grid = []
    for f in FRACTIONS:
        p_ms = np.minimum(0.5, split_error(_training(x, f, shares), split, mode, True))
        for a_e, p_m in zip(EVAL_SHARES, p_ms):
            var_cell = x.curators * r * r / (2.0 * a_e * x.rho_total)
            grid.append((expected_bound(float(p_m), f * N, var_cell, C, coverage), f, a_e, float(p_m)))
    best = min(g[0] for g in grid)
    J, f, a_e, p_m = min((g for g in grid if g[0] <= best + J_TIE), key=lambda g: (g[1], g[2]))
    return {"holdout": f, "evaluate_share": a_e, "expected_certificate": J, "model_error": p_m,
            "expected_width": J - p_m, "least_certificate": best}


def choose_comparison(x: ss.SplitInputs, coverage: float = COVERAGE) -> dict[str, float] | None:
    """(f, a_E) for the first-order mode, or None (then the ``GUARD`` round) — :mod:`marg.marginals.study_first_order`.

    The least held-out fraction f, then the least share a_E, on the design's grid (at most ``COMPARISON_MAX``) whose comparison keeps a model
    that beats the larger class by ``DETECT`` with probability at least ``POWER`` (:func:`comparison_power`);
    None when no point of the grid reaches it: the comparison cannot be decisive at these sizes, and rather than
    a coin flip between the model and the larger class the study runs the ``GUARD`` round with the "not-worse" rule.
    ``least_width``: the least expected width of the holdout bound over the whole grid (f ≤ 0.5, a_E ≤ 0.5) at the
    same model error, training loss ignored — what no choice of (f, a_E) can beat at these sizes (``marg plan`` says
    it: a certificate that informative would cost the training side more than the comparison does)."""
    N, C, r = float(sum(x.rows)), x.classes, float(x.max_rows)
    for f in (f for f in FRACTIONS if f <= COMPARISON_MAX[0]):
        for a_e in (a for a in EVAL_SHARES if a <= COMPARISON_MAX[1]):
            v = x.curators * r * r / (2.0 * a_e * x.rho_total)
            power = comparison_power(f * N, v, C)
            if power >= POWER:
                p_m = min(0.5, first_order_split(_training(x, f, a_e)).expected_error)
                cert = expected_bound(p_m, f * N, v, C, coverage)
                least = min(expected_bound(p_m, g * N, _cell_var(x, b), C, coverage) for g in FRACTIONS for b in EVAL_SHARES)
                return {"holdout": f, "evaluate_share": a_e, "power": power, "detect": DETECT, "model_error": p_m,
                        "expected_certificate": cert, "expected_width": cert - p_m, "least_width": least - p_m}
    return None


# -- the design ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class StudyDesign:
    """A study's design (module docstring): what each site spends in each round, the held-out fraction, the mode.

    Attributes
    ----------
    epsilon, delta, rho_total : float
        Each site's study total, (ε, δ) and its ρ_T (OpenDP's conversion).
    n_sites, threshold : int
        S and the secure-aggregation threshold t.
    noise : {"shared", "per-site"}
    rows : tuple of int
        The rows per site planned for (stated, or the split rule's default); ``rows_stated`` says which.
    max_rows : int
        r, the bound on a patient's rows (every count's sensitivity).
    levels, classes : the codebook's discrete levels and C.
    selection : {"pooled", "private"}
        Round 1's selection mode.
    k : int
        Features round 1 keeps.
    rho_label, rho_select, rho_measure, rho_evaluate : float
        Each site's ρ for the label table and the selection (round "select"), round 2 ("measure") and the
        evaluation ("evaluate"); they add to ρ_T. ``rho_select`` is, for ``"pooled"``, the p first-order tables
        N[x_i, y] at ``rho_select``/p each (pooled, the top-k computed from their noisy sums), for ``"private"``
        each site's OpenDP top-k at ``rho_select``. Under shared noise each ρ is what the round's sum over any t
        survivors meets (one curator's budget for the round).
    holdout : float
        The fraction of each site's patients held out (0 without the evaluation round).
    expected_error, expected_certificate : float
        The planning world's error at the chosen split, and the certificate to expect (1 without evaluation).
    split : dict
        :class:`marg.marginals.study_split.Split`'s record of the chosen split on the training rows.
    mode_errors : dict
        E of each selection mode at its own best split (full rows and ρ_T).
    evaluation : dict
        The evaluation rule's choice and what it minimised.
    """

    epsilon: float
    delta: float
    rho_total: float
    n_sites: int
    threshold: int
    noise: str
    rows: tuple[int, ...]
    rows_stated: bool
    max_rows: int
    levels: tuple[int, ...]
    classes: int
    selection: str
    k: int
    rho_label: float
    rho_select: float
    rho_measure: float
    rho_evaluate: float
    holdout: float
    expected_error: float
    expected_certificate: float
    split: dict[str, Any] = field(default_factory=dict)
    mode_errors: dict[str, float] = field(default_factory=dict)
    evaluation: dict[str, float] = field(default_factory=dict)

    @property
    def round_names(self) -> tuple[str, ...]:
        """The study's rounds, in order."""
        return ("select", "measure", "evaluate") if self.rho_evaluate > 0 else ("select", "measure")

    @property
    def rounds(self) -> dict[str, float]:
        """Each round's ρ per site: ``{"select": ρ_label + ρ_select, "measure": …, "evaluate": …}`` (sum ρ_T)."""
        out = {"select": self.rho_label + self.rho_select, "measure": self.rho_measure}
        if self.rho_evaluate > 0:
            out["evaluate"] = self.rho_evaluate
        return out

    @property
    def curators(self) -> float:
        return curators(self.noise, self.n_sites, self.threshold)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["rows"], d["levels"] = list(self.rows), list(self.levels)
        d["rounds"], d["round_names"] = self.rounds, list(self.round_names)
        rows = "; rows " + ("stated" if self.rows_stated else "assumed (none stated)")
        if self.selection == FIRST_ORDER:
            d["rule"] = ("marg.marginals.study_first_order: no selection (narrow and small: every first-order table "
                         "pooled at equal shares with the label table); "
                         + ("no evaluation round (too small for even the guard to see a model worse than the larger "
                            "class)" if self.evaluation.get("none") else
                            "the evaluation round sized for the comparison with the larger class")
                         + f"; the pooled noise {self.curators:g} curators' variance" + rows)
            return d
        d["rule"] = ("marg.marginals.study_design: the evaluation share and held-out fraction minimise the expected "
                     "certificate; the rest split by marg.marginals.study_split's rule on the training rows, the pooled "
                     f"noise {self.curators:g} curators' variance; selection {self.selection!r} by the smaller expected "
                     "error" + rows)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "StudyDesign":
        """The design recorded by :meth:`to_dict` (derived keys ignored); InputError naming a missing key."""
        names = [f for f in cls.__dataclass_fields__]
        missing = [n for n in names if n not in d and n not in ("split", "mode_errors", "evaluation")]
        if missing:
            raise InputError(f"study design: missing {', '.join(missing)}")
        kw = {n: d[n] for n in names if n in d}
        kw["rows"], kw["levels"] = tuple(int(v) for v in kw["rows"]), tuple(int(v) for v in kw["levels"])
        for n in ("split", "mode_errors", "evaluation"):
            kw[n] = dict(kw.get(n) or {})
        return cls(**kw)


def _check(n_sites: Any, epsilon: Any, delta: Any, threshold: Any, noise: str, max_rows: Any) -> None:
    if not isinstance(n_sites, (int, np.integer)) or isinstance(n_sites, bool) or n_sites < 1:
        raise InputError(f"the study needs a whole number of sites >= 1, got {n_sites!r}")
    if epsilon is None or not (float(epsilon) > 0.0 and math.isfinite(float(epsilon))):
        raise InputError(f"the study needs each site's total epsilon (> 0), got {epsilon!r}")
    if delta is None or not (0.0 < float(delta) < 1.0):
        raise InputError(f"the study needs 0 < delta < 1, got {delta!r}")
    if noise not in NOISES:
        raise InputError(f"noise must be one of {', '.join(NOISES)}, got {noise!r}")
    if noise == "shared" and (threshold is None or not 1 <= int(threshold) <= int(n_sites)):
        raise InputError(f"shared noise needs a secure-aggregation threshold 1 <= t <= {n_sites} sites, got {threshold!r}")
    if int(max_rows) != max_rows or max_rows < 1:
        raise InputError(f"max_rows must be a whole number >= 1, got {max_rows!r}")


def design_study(codebook: Any, n_sites: int, rows: Sequence[int] | None = None, epsilon: float | None = None,
                 delta: float | None = None, threshold: int | None = None, max_rows: int = 1, evaluate: bool = True,
                 noise: str = "shared", coverage: float = COVERAGE) -> StudyDesign:
    """The study's design from what is public (module docstring).

    Parameters
    ----------
    codebook : Codebook
        Its discrete features are the candidates (p, levels m_i) and its label the C classes.
    n_sites : int
        S.
    rows : sequence of int, optional
        The rows per site as stated publicly (never the data's count); None: 300 a site assumed.
    epsilon, delta : float
        Each site's total for the study.
    threshold : int
        The secure-aggregation threshold t (needed for ``noise="shared"``; per-site: ignored, recorded as S).
    max_rows : int
        r, the bound on a patient's rows.
    evaluate : bool
        Whether the study has the evaluation round (a held-out fraction and its share).
    noise : {"shared", "per-site"}

    Returns
    -------
    StudyDesign
    """
    _check(n_sites, epsilon, delta, threshold, noise, max_rows)
    S = int(n_sites)
    t = int(threshold) if noise == "shared" else S
    p = len(codebook.discrete_names)
    if p == 0:
        raise InputError("the study selects among discrete features; this codebook has none")
    levels = tuple(int(codebook.feature(a).n_levels) for a in codebook.discrete_names)
    stated = rows is not None
    rows_t = tuple(int(v) for v in rows) if stated else (ss.DEFAULT_ROWS[0],) * S
    if len(rows_t) != S or min(rows_t) <= 0:
        raise InputError(f"the rows per site must be {S} positive counts, got {list(rows_t)!r}")
    rho = rho_for_epsilon(float(epsilon), float(delta))
    C = int(codebook.label.n_classes)
    x = ss.SplitInputs(rows_t, levels, C, rho, int(max_rows), curators(noise, S, t))
    guarded = bool(evaluate)
    if ss.measures_all(x):
        splits = {"pooled": ss.measure_all_split(x)}
        mode = "pooled"
    else:
        splits = {m: mode_split(x, m, guarded) for m in MODES}
        mode = choose_mode(splits)
        if first_order_fits(x):  # measured, not the planning world's E (BENCHMARKS.md, issue 44 studyacc)
            splits[FIRST_ORDER] = first_order_split(x)
            mode = FIRST_ORDER
    errors = {m: float(s.expected_error) for m, s in splits.items()}
    ev_fo = choose_comparison(x, coverage) if evaluate and mode == FIRST_ORDER else None
    if ev_fo is not None:
        ev, f, a_e = ev_fo, ev_fo["holdout"], ev_fo["evaluate_share"]
        final = first_order_split(_training(x, f, a_e))
        cert = ev["expected_certificate"]
    elif evaluate and mode == FIRST_ORDER and guard_sees(GUARD[0] * sum(rows_t), _cell_var(x, GUARD[1]), C,
                                                         coverage) >= POWER:
        f, a_e = GUARD  # not decisive at these sizes: the least evaluation round, a guard only
        v = _cell_var(x, a_e)
        final = first_order_split(_training(x, f, a_e))
        p_m = min(0.5, float(final.expected_error))
        cert = expected_bound(p_m, f * sum(rows_t), v, C, coverage)
        ev = {"holdout": f, "evaluate_share": a_e, "power": comparison_power(f * sum(rows_t), v, C), "detect": DETECT,
              "model_error": p_m, "expected_certificate": cert, "expected_width": cert - p_m, "guard": 1.0}
    elif evaluate and mode == FIRST_ORDER:  # even the guard is blind here: no evaluation round (study_first_order)
        f, a_e = 0.0, 0.0
        final = splits[mode]
        cert = 1.0
        v = _cell_var(x, GUARD[1])
        ev = {"none": 1.0, "guard_caught": guard_sees(GUARD[0] * sum(rows_t), v, C, coverage),
              "power": comparison_power(GUARD[0] * sum(rows_t), v, C), "detect": DETECT}
        evaluate = False
    elif evaluate:
        ev = choose_evaluation(x, splits[mode], mode, coverage)
        f, a_e = ev["holdout"], ev["evaluate_share"]
        xt = _training(x, f, a_e)
        # the final split: ties within SELECT_TIE go to round 2 (the proxy does not see what its budget buys)
        final = ss.measure_all_split(xt) if ss.measures_all(xt) else mode_split(xt, mode, guarded, ss.SELECT_TIE)
        p_m = min(0.5, float(final.expected_error))
        var_cell = x.curators * float(max_rows) ** 2 / (2.0 * a_e * rho)
        cert = expected_bound(p_m, f * sum(rows_t), var_cell, C, coverage)
        ev = {**ev, "expected_certificate": cert, "model_error": p_m, "expected_width": cert - p_m}
    else:
        f, a_e, ev = 0.0, 0.0, {}
        final = splits[mode]
        cert = 1.0
    rest = (1.0 - a_e) * rho
    rho_eval = rho - rest if evaluate else 0.0
    return StudyDesign(float(epsilon), float(delta), rho, S, t, noise, rows_t, stated, int(max_rows), levels, C, mode,
                       int(final.k), final.label * rest, final.select * rest, rho - rho_eval - (final.label + final.select) * rest,
                       rho_eval, float(f), float(final.expected_error), float(cert), final.to_dict(), errors, ev)


def design_lines(d: Mapping[str, Any]) -> list[str]:
    """``marg plan``'s words for a study design (:meth:`StudyDesign.to_dict`)."""
    r = d["rounds"]
    rows = "/".join(str(v) for v in d["rows"])
    out = [f"study design ({d['n_sites']} sites, {'stated' if d['rows_stated'] else 'assumed'} rows {rows}, "
           f"ε = {d['epsilon']:g} per site in total, ρ = {d['rho_total']:.4g}, noise {d['noise']}"
           + (f", t = {d['threshold']}" if d["noise"] == "shared" else "") + "):",
           (f"  select: ρ = {r['select']:.4g} (the label table only: no selection, every first-order table is "
            "measured in round 2)" if d["selection"] == FIRST_ORDER else
            f"  select: ρ = {r['select']:.4g} (label table {d['rho_label']:.4g}, {d['selection']} top-{d['k']} "
            f"{d['rho_select']:.4g}; expected error pooled {d['mode_errors'].get('pooled', float('nan')):.3f}"
            + (f", private {d['mode_errors']['private']:.3f}" if "private" in d["mode_errors"] else "") + ")"),
           f"  measure: ρ = {r['measure']:.4g}" + (f" (the {d['k']} first-order tables, naive Bayes)"
                                                  if d["selection"] == FIRST_ORDER else "")]
    if "evaluate" in r:
        ev = d["evaluation"]
        head = f"  evaluate: ρ = {r['evaluate']:.4g}, hold out {d['holdout']:.0%} of each site's patients; expected "
        if d["selection"] != FIRST_ORDER:
            out.append(head + f"certificate {d['expected_certificate']:.3f} (model error {ev['model_error']:.3f} + width "
                              f"{ev['expected_width']:.3f}, chosen to minimise it)")
        elif not ev.get("guard"):
            out.append(head + f"certificate {d['expected_certificate']:.3f}; the comparison with the larger class keeps a "
                              f"model {ev['detect']:g} better with probability {ev['power']:.2f}"
                       + (f" (at these sizes no evaluation round within 50 % of the patients and 50 % of ρ expects a "
                          f"certificate closer than {ev['least_width']:.2f} to the model's error)" if "least_width" in ev
                          else ""))
        else:
            out.append(head + f"certificate {d['expected_certificate']:.3f}; a guard only: no round within "
                              f"{COMPARISON_MAX[0]:.0%} of the patients and {COMPARISON_MAX[1]:.0%} of ρ tells a model "
                              f"{ev['detect']:g} better from the larger class (probability {ev['power']:.2f}), so the "
                              "larger class is returned only when the model is shown worse")
    elif d["evaluation"].get("none"):
        ev = d["evaluation"]
        out.append(f"  evaluate: none (no patient held out): a guard round of {GUARD[0]:.0%} of the patients and "
                   f"{GUARD[1]:.0%} of ρ would catch even a model erring on every held-out patient with probability "
                   f"{ev['guard_caught']:.2f}, so every patient and the whole total train the model; its certificate is "
                   "its own (the confidence box's)")
    return out
