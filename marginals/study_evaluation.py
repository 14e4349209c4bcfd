"""The study design's evaluation round: the held-out fraction f and the share a_E of each site's total, chosen from what
is public before anything is spent.

**The evaluation round and the held-out fraction** (``evaluate=True``, the other modes). A share a_E of ρ_T goes to
the evaluation round (one pooled confusion table N[predicted, y], C² cells, sensitivity r) and a
fraction f of each site's patients is held out of training. The rule minimises the **expected
certificate** J(f, a_E) = p_m + W: the planning world's error of the model trained on the rest,

    p_m(f, a_E) = E(rows·(1 − f), (1 − a_E)·ρ_T)   (the mode's split at full rows, its shares kept),

plus the expected width W of the holdout bound (:mod:`marg.learners.certification.holdout_certificate`) on
n_h = f·N held-out patients, at level α' = (1 − coverage)·g(1)/2 (the first model evaluated on the
held-out set, g(j) = 6/(π²·j²), its α shared with the larger class it is compared with), whose
pooled error count (C(C − 1) cells) and held-out count (C² cells) carry noise of variance
v = curators·r²/(2·a_E·ρ_T) a cell:

    n⁻ = n_h − z(α_n)·sqrt(C²·v),    p_m + W = min(1, (p_m·n_h + z(α_e)·sqrt(n_h·p_m(1 − p_m) + C(C − 1)·v))/n⁻)

(α_n = ``ROWS_SHARE``·α', α_e = α' − α_n, z(α) = Φ⁻¹(1 − α); 1 when n⁻ ≤ 0): the normal form of the
exact bound at its expected counts. J − E(rows, ρ_T) is the bound's width plus the training loss
of holding rows out and spending on the evaluation.

**A width below the one needed buys nothing.** A certificate within ``WIDTH_NEED`` of the model's error is
informative (issue 44 asks the mean certificate within 0.08 of the mean error), and the round must also tell
the K models it evaluates apart, since the final model is the one with the fewest released held-out errors
(:func:`marg.learners.study.final_choice.final_among`): two models whose errors differ by ``SEPARATE`` are ordered
right with probability (:func:`separation`)

    P_sep = Φ(n_h·SEPARATE/sqrt(n_h·(2·p_m + SEPARATE) + 2·C(C − 1)·v))

(the patients where exactly one of them errs, at most n_h·(2p_m + SEPARATE), and the 2·C(C − 1) noisy cells of
the two error counts). A width W has the error count's std ≈ W·n_h/z(α_e), so the difference of two counts
≈ √2·W·n_h/z: ``WIDTH_NEED`` = 0.02 keeps P_sep ≈ 0.98 for ``SEPARATE`` = 0.025 on adult's shape (what a larger
need did to the study: BENCHMARKS.md, "Issue 44 (design)"). The rule minimises

    J(f, a_E) = p_m + max(W, WIDTH_NEED)

over f ∈ {0.10, 0.15, …, 0.50} and a_E ∈ {0.02, 0.04, …, 0.50}; values within ``J_TIE`` of the least are
ties, won by the round that leaves training the most signal, (1 − f)²·(1 − a_E) (:func:`training_signal`:
a training cell's count over its noise std, squared, against a study without the round), then the smaller f.
Where the planning world sees no training loss (large studies: p_m flat, the F planted features found
whatever the shares) the width alone used to decide and bought a width the certificate does not need; now the
least round whose width is within ``WIDTH_NEED`` is chosen. Where no round reaches ``WIDTH_NEED`` (kr-vs-kp, the smaller
sets) J is the expected certificate itself, as before. The rest, (1 − a_E)·ρ_T, is split by the mode's rule on the
training rows (1 − f)·n_s: the label table and the selection (round "select"), round 2 (round "measure"); splits within
``SELECT_TIE`` of that rule's least E are ties won by round 2 (:data:`marg.marginals.study_split.SELECT_TIE`: the
proxy's round 2 is first-order tables and does not see the pair tables its budget buys).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
from scipy.special import ndtr, ndtri

from . import study_split as ss
from .study_first_order import COMPARISON_MAX, DETECT, POWER, comparison_power, first_order_split
from .study_modes import split_error

FRACTIONS = tuple(float(f) for f in np.round(np.arange(0.10, 0.501, 0.05), 2))
EVAL_SHARES = tuple(float(a) for a in np.round(np.arange(0.02, 0.501, 0.02), 2))
J_TIE = 0.002
"""Expected certificates within this of the least are ties (the training side is modelled coarsely)."""
WIDTH_NEED = 0.02
"""The expected width of the holdout bound beyond which a narrower one buys nothing (module docstring)."""
SEPARATE = 0.025
"""The difference in error between two evaluated models that the round should order right (module docstring)."""
COVERAGE = 0.95
ROWS_SHARE = 0.25
"""The share of the bound's α spent on the held-out count's lower bound (as
:mod:`marg.learners.certification.holdout_certificate`)."""


def first_level(coverage: float = COVERAGE) -> float:
    """α' = (1 − coverage)·g(1)/2 with g(j) = 6/(π²·j²): the α of the first model evaluated on a held-out set
    (:func:`marg.learners.certification.holdout_certificate.evaluation_alpha`), shared with the larger class it is
    compared with."""
    return (1.0 - coverage) * 6.0 / (math.pi ** 2) / 2.0


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


def separation(p_m: float, n_h: float, var_cell: float, classes: int, gap: float = SEPARATE) -> float:
    """P_sep: two models whose errors (about p_m) differ by ``gap`` are ordered right by their released error counts
    on n_h held-out patients, each count's C(C − 1) cells of noise variance ``var_cell`` (module docstring)."""
    C = float(classes)
    return float(ndtr(n_h * gap / math.sqrt(n_h * (2.0 * p_m + gap) + 2.0 * C * (C - 1.0) * var_cell)))


def training_signal(f: Any, a_e: Any) -> Any:
    """(1 − f)²·(1 − a_E): a training cell's count ((1 − f)·N patients) over its noise std (∝ 1/sqrt((1 − a_E)·ρ_T)),
    squared, against a study with no evaluation round — what an evaluation round of (f, a_E) leaves training."""
    return (1.0 - np.asarray(f, dtype=np.float64)) ** 2 * (1.0 - np.asarray(a_e, dtype=np.float64))


def choose_evaluation(x: ss.SplitInputs, split: ss.Split, mode: str, coverage: float = COVERAGE) -> dict[str, float]:
    """(f, a_E) minimising J = p_m + max(W, ``WIDTH_NEED``) (module docstring) with ``split``'s shares kept; ties within
    ``J_TIE`` won by the larger :func:`training_signal`, then the smaller f. ``expected_certificate`` is p_m + W at the
    choice, ``least_certificate`` the least p_m + W over the grid."""
    N, C = float(sum(x.rows)), x.classes
    shares = np.asarray(EVAL_SHARES)
    grid = []
    for f in FRACTIONS:
        p_ms = np.minimum(0.5, split_error(_training(x, f, shares), split, mode, True))
        for a_e, p_m in zip(EVAL_SHARES, p_ms):
            cert = expected_bound(float(p_m), f * N, _cell_var(x, a_e), C, coverage)
            grid.append((float(p_m) + max(cert - float(p_m), WIDTH_NEED), cert, f, a_e, float(p_m)))
    best = min(g[0] for g in grid)
    _, cert, f, a_e, p_m = max((g for g in grid if g[0] <= best + J_TIE),
                               key=lambda g: (float(training_signal(g[2], g[3])), -g[2]))
    return {"holdout": f, "evaluate_share": a_e, "expected_certificate": cert, "model_error": p_m,
            "expected_width": cert - p_m, "least_certificate": min(g[1] for g in grid), "width_need": WIDTH_NEED}


def choose_comparison(x: ss.SplitInputs, coverage: float = COVERAGE) -> dict[str, float] | None:
    """(f, a_E) for the first-order mode, or None (then the ``GUARD`` round) — :mod:`marg.marginals.study_first_order`.

    The least held-out fraction f, then the least share a_E, on the design's grid (at most ``COMPARISON_MAX``) whose
    comparison keeps a model that beats the larger class by ``DETECT`` with probability at least ``POWER``
    (:func:`comparison_power`); None when no point of the grid reaches it: the comparison cannot be decisive at these
    sizes, and rather than a coin flip between the model and the larger class the study runs the ``GUARD`` round with
    the "not-worse" rule. ``least_width``: the least expected width of the holdout bound over the whole grid (f ≤ 0.5,
    a_E ≤ 0.5) at the same model error, training loss ignored — what no choice of (f, a_E) can beat at these sizes
    (``marg plan`` says it: a certificate that informative would cost the training side more than the comparison
    does)."""
    N, C, r = float(sum(x.rows)), x.classes, float(x.max_rows)
    for f in (f for f in FRACTIONS if f <= COMPARISON_MAX[0]):
        for a_e in (a for a in EVAL_SHARES if a <= COMPARISON_MAX[1]):
            v = x.curators * r * r / (2.0 * a_e * x.rho_total)
            power = comparison_power(f * N, v, C)
            if power >= POWER:
                p_m = min(0.5, first_order_split(_training(x, f, a_e)).expected_error)
                cert = expected_bound(p_m, f * N, v, C, coverage)
                least = min(expected_bound(p_m, g * N, _cell_var(x, b), C, coverage) for g in FRACTIONS
                            for b in EVAL_SHARES)
                return {"holdout": f, "evaluate_share": a_e, "power": power, "detect": DETECT, "model_error": p_m,
                        "expected_certificate": cert, "expected_width": cert - p_m, "least_width": least - p_m}
    return None
