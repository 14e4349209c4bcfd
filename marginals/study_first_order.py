"""The study design's first-order mode: no selection, every first-order table pooled, and an evaluation round sized for
the comparison with the larger class.

**Every first-order table** (the third mode of :mod:`marg.marginals.study_design`, ``"first-order"``,
:func:`first_order_fits`). Where the study is narrow (p ≤ ``FIRST_ORDER_MAX_P``) and small — each of the p tables N[x_i,
y], measured pooled at an equal share of ρ_T with the label table, keeps its noise std per cell within
``FIRST_ORDER_RATIO`` of its expected count N/(C·m̃), but not one pair table beside them would stay within the split
rule's noise rule — no model can read more than first-order tables, and a selection only spends rows and ρ to
drop some of them. The study then selects nothing: round "select" is the label table at a_L = 1/(p + 1)
of the training ρ, round "measure" every first-order table at equal shares, and the learner fits naive
Bayes on them (:mod:`marg.study_learner`). The mode is chosen by the gate, not by E: the planning world
(one effect size, F planted features) rates it below the private top-k on every small set measured, where
measured it is more accurate (BENCHMARKS.md, "Issue 44 (studyacc)" and "Issue 47: numbers moved out of
docstrings").

Its evaluation round answers one question — does the model beat the larger class? — so it is sized for
that (:func:`marg.marginals.study_design.choose_comparison`): the least held-out fraction f, then the least a_E, within
``COMPARISON_MAX``, whose comparison keeps a model that beats the larger class by ``DETECT`` with
probability ≥ ``POWER`` (:func:`comparison_power`: the difference of the two rules' released error
counts, 2(C − 1) cells of the confusion table). Where none does (the smallest studies: the comparison
would be a coin flip), the round is the ``GUARD`` (f = 0.15, a_E = 0.04) and the final rule is
"not-worse" (:func:`marg.learners.study.final_choice.final_against_prior`): the model is returned unless the
evaluation shows it worse than the larger class; its certificate is still the holdout bound.

**No evaluation round where even the guard is blind** (:func:`guard_sees`). The guard returns the larger
class only when the model's released error count exceeds the larger class's by the margin
z(level)·sqrt(2(K − 1)·v) that the noise alone passes with probability ≤ 1 − level. On the smallest
studies that margin is larger than the held-out patients (cleveland's 3 sites of 243: 36 held-out
patients, a margin of ≈ 85 counts), so not even a model erring on every held-out patient is caught:
the round would spend ``GUARD``'s rows and ρ for a certificate of 1 and a choice made in advance. The
rule, from public quantities only: when no decisive comparison exists and the guard catches a model
that errs on every held-out patient (against the larger class's e_prior = (1 − GAP)/2) with probability
below ``POWER``, the study has **no evaluation round** — holdout 0 in the study file, rounds "select"
and "measure" only, the whole total to training — and the model's certificate is its own (the
confidence box's, :mod:`marg.study_learner`), as for a study run without the evaluation round.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy.special import ndtr, ndtri

from . import study_split as ss

FIRST_ORDER = "first-order"
"""The third mode: no selection, every first-order table pooled (module docstring, "Every first-order table")."""
FIRST_ORDER_RATIO = 1.0
"""Every first-order table is worth measuring while its pooled noise std per cell is at most this times the
cell's expected count N/(C·m̃) (naive Bayes reads each level's class ratio; beyond it the tables are noise)."""
DETECT = 0.25
"""The margin by which a model worth returning beats the larger class (a share of the held-out patients)."""
POWER = 0.95
"""The first-order mode's evaluation round keeps such a model with at least this probability, or is not run."""
COMPARISON_MAX = (0.30, 0.30)
"""The most held-out fraction and ρ share a decisive comparison may take (beyond, training loses more than the
comparison saves on these sizes)."""
GUARD = (0.15, 0.04)
"""(f, a_E) of the first-order mode's evaluation round when no point of the grid makes the comparison decisive:
the least round that still guards against a model worse than the larger class (:func:`comparison_decisive`)."""
FIRST_ORDER_MAX_P = 64
"""At most this many candidates for the first-order mode: beyond, the p − F chance features' noise swamps naive
Bayes's score (the planning world's E: 0.24 at 16 features of 3 levels on 348 patients, 0.41 at 300 binary ones
on 2,400) and a selection that drops them is worth its rows and ρ."""

def first_order_fits(x: ss.SplitInputs) -> bool:
    """Whether the study should measure every first-order table and select nothing (module docstring): at the
    training share (all of ρ_T but the label's equal share), each of the p tables N[x_i, y] at an equal share
    keeps its pooled noise std per cell within ``FIRST_ORDER_RATIO`` of its expected count N/(C·m̃), and not one
    pair table N[x_i, x_j, y] (C·m̃² cells) beside them stays within the split rule's ``NOISE_RATIO``: a model
    can read nothing but first-order tables here, and a selection on them would spend rows and ρ to drop some."""
    if not 1 <= x.p <= FIRST_ORDER_MAX_P:
        return False
    N, C, m, r = float(sum(x.rows)), float(x.classes), float(np.median(x.levels)), float(x.max_rows)
    std = math.sqrt(x.curators * r * r * (x.p + 1) / (2.0 * x.rho_total))  # p tables and the label table
    std_pair = math.sqrt(x.curators * r * r * (x.p + 2) / (2.0 * x.rho_total))
    return std <= FIRST_ORDER_RATIO * N / (C * m) and std_pair > ss.NOISE_RATIO * N / (C * m * m)


def first_order_split(x: ss.SplitInputs) -> ss.Split:
    """The split with no selection: the label table and the p first-order tables at equal shares of ρ_T
    (a_L = 1/(p + 1) in round "select", the rest in round "measure", k = p). E is the planning world's naive
    Bayes on all p tables: the F informative ones found, the p − F others read as chance features,

        E = Φ(−F·(2q − 1)/sqrt(4·F·q(1 − q) + p − F)),   q = 1/2 + EFFECT·(1 − 2·P_flip(p tables)),

    (the split rule's e_found with λ = p − F)."""
    p = x.p
    aL = 1.0 / (p + 1.0)
    a2 = 1.0 - aL
    F = float(min(ss.F_PLAN, max(1, p // 2)))
    p_wrong, p_flip = float(ss._p_wrong(x, aL, a2)), float(ss._p_flip(x, a2, p))
    q = 0.5 + ss.EFFECT * (1.0 - 2.0 * p_flip)
    lam = float(p) - F
    e_found = float(ndtr(-F * (2.0 * q - 1.0) / math.sqrt(4.0 * F * q * (1.0 - q) + lam)))
    parts = {"p_wrong": p_wrong, "p_agree": 1.0, "chance_agreements": lam, "found": F, "p_any": 1.0,
             "p_flip": p_flip, "e_found": e_found, "e_prior": (1.0 - ss.GAP) / 2.0 + ss.GAP * p_wrong,
             "p_chance": 0.0, "first_order": 1.0}
    return ss.Split(aL, 0.0, a2, p, e_found, parts)


def comparison_power(n_h: float, var_cell: float, classes: int, margin: float | None = None) -> float:
    """P(the model is kept) when it beats the larger class by ``margin`` (default ``DETECT``) of the held-out
    patients, in the planning world (the larger class errs e_prior = (1 − GAP)/2, the model e_prior − margin):

        P_keep = Φ(n_h·margin/sqrt(n_h·(2·e_prior − margin) + 2(C − 1)·v)),

    the difference of the two rules' released error counts (it reads 2(C − 1) cells of the confusion table,
    each of noise variance v; a patient counts ±1 in it when exactly one of the rules errs)."""
    d = DETECT if margin is None else float(margin)
    e = (1.0 - ss.GAP) / 2.0
    return float(ndtr(n_h * d / math.sqrt(n_h * (2.0 * e - d) + 2.0 * (classes - 1.0) * var_cell)))


def guard_sees(n_h: float, var_cell: float, classes: int, coverage: float = 0.95) -> float:
    """P(the guard's "not-worse" rule returns the larger class) for a model that errs on every held-out patient, in
    the planning world (the larger class errs e_prior = (1 − GAP)/2 of them):

        P_caught = Φ((n_h·(1 − e_prior) − z·sqrt(2(K − 1)·v))/sqrt(n_h·e_prior(1 − e_prior) + 2(K − 1)·v)),

    z = Φ⁻¹(1 − (1 − coverage)·g(1)/2) the bounds' level (:func:`marg.learners.study.final_choice.final_against_prior`'s
    margin), n_h·(1 − e_prior) the mean difference of the two rules' error counts (the model errs on every patient,
    the larger class on e_prior of them), its variance the larger class's binomial errors and the 2(K − 1) cells'
    noise. Below ``POWER`` the guard round is not run (module docstring, "No evaluation round")."""
    e = (1.0 - ss.GAP) / 2.0
    noise = 2.0 * (classes - 1.0) * float(var_cell)
    z = float(ndtri(1.0 - (1.0 - coverage) * 6.0 / math.pi ** 2 / 2.0))
    return float(ndtr((n_h * (1.0 - e) - z * math.sqrt(noise)) / math.sqrt(n_h * e * (1.0 - e) + noise)))


def comparison_decisive(rows: Sequence[int], holdout: float, rho_evaluate: float, curators_: float, classes: int,
                        max_rows: int = 1) -> bool:
    """Whether an evaluation round of ``holdout`` of the patients at ``rho_evaluate`` keeps a model that beats the
    larger class by ``DETECT`` with probability ≥ ``POWER`` (:func:`comparison_power`): then the study returns the
    larger class unless the model beats it; otherwise (the ``GUARD`` round) unless the model is shown worse."""
    v = curators_ * float(max_rows) ** 2 / (2.0 * float(rho_evaluate))
    return comparison_power(float(holdout) * float(sum(rows)), v, int(classes)) >= POWER - 1e-9
