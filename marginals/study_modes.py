"""The study design's selection modes and their expected error: the pooled noise in curators' units, the pooled top-k's
planning-world error beside the private one's, and the choice between them.

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
(:func:`marg.learners.study.final_choice.final_against_prior`), so E's "nothing found" term is the prior's
error e_prior (without the evaluation round, the split rule's own P_chance/2 + (1 − P_chance)·e_prior).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

import numpy as np
from scipy.special import ndtr, ndtri

from . import study_split as ss

MODES = ("pooled", "private")
FINDS = 0.5
"""A mode whose planned selection keeps an informative feature with probability P_any below this finds nothing."""


def curators(noise: str, n_sites: int, threshold: int) -> float:
    """The pooled noise variance in curators' units: S/t under shared noise, S per site (module docstring)."""
    return float(n_sites) / float(threshold) if noise == "shared" else float(n_sites)


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
