"""Leave-one-site-out evaluation of binary additive rules from pairwise statistics.

A binary rule that predicts class 1 iff ``f(x) > 0`` with ``f`` additive over one-hot
features, ``f(x) = b + wᵀW(x)`` (W the one-hot encoding of the discrete features; Rényi,
naive Bayes and first-order MRC rules are all of this form), errs on a row exactly when
``s·f(x) ≤ 0`` with ``s = ±1`` the label. By Cantelli's inequality (equivalently: the best
quadratic surrogate ``(1 − c·s f)²`` over the scale c > 0)::

    P(s f ≤ 0) ≤ 1 − E[s f]² / E[f²]      when E[s f] > 0 (else the bound is 1),
    E[s f] = b·E[s] + wᵀd,   E[f²] = b² + 2b·wᵀ diag(Q) + wᵀQw,

with ``d = E[sW]`` (first-order tables) and ``Q = E[WWᵀ]`` (pair tables) — so the bound is
a function of first-order and pairwise statistics alone (:func:`cantelli_bound`).

**Leave one site out.** The learner has every site's tables. For each site k a candidate
is fitted on the other sites' sum and its bound evaluated on site k's tables
(:func:`loso_scores`); a candidate's score is the row-weighted mean over the sites. The
rule is never evaluated on the tables it was fitted on, so a learner that over-fits the
noise (an unregularised Rényi solve) scores badly. This is a **model choice** criterion,
not a certificate: site k's tables carry noise, and the bound is that of the fold's rule,
not of the final one fitted on every site.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from marg.errors import InputError

from .features.quadratic import discrete_blocks, label_contrast, second_moments

MIN_SITES = 2
MAX_SITES = 20  # beyond this a leave-one-site-out sweep costs more fits than it is worth


def rule_direction(rule: Any, codebook: Any) -> tuple[np.ndarray, float] | None:
    """``(w, b)`` of a binary :class:`~marg.learners.minimax.fixed_rule.LinearRule` over the
    codebook's discrete one-hot layout (shape (M,)): ``f = scores[1] − scores[0]``.

    None when the rule is not binary or uses a raw numeric feature.
    """
    if rule.n_classes != 2:
        return None
    layout = {b.name: b for b in discrete_blocks(codebook)}
    M = sum(b.size for b in layout.values())
    w = np.zeros(M)
    diff = rule.weights[1] - rule.weights[0]
    for blk in rule.fmap.blocks:
        if blk.kind != "onehot" or blk.name not in layout:
            return None
        target = layout[blk.name]
        w[target.slice] += diff[blk.offset:blk.offset + blk.size]
    return w, float(rule.intercept[1] - rule.intercept[0])


def cantelli_bound(w: np.ndarray, b: float, summary: Any) -> float:
    """``1 − E[s f]² / E[f²]`` for ``f = b + wᵀW`` under ``summary``'s tables (1 if E[s f] ≤ 0).

    Parameters
    ----------
    w : ndarray, shape (M,)
        Weights over the discrete one-hot layout (:func:`discrete_blocks` order).
    b : float
    summary : Summary
        Binary label; first-order and every pair table of the discrete features.
    """
    if summary.n_classes != 2:
        raise InputError(f"the leave-one-site-out bound needs a binary label, got {summary.n_classes} classes")
    Q = second_moments(summary)
    d = label_contrast(summary)
    s_mean = float(summary.prior[1] - summary.prior[0])
    m = b * s_mean + float(w @ d)
    v = b * b + 2.0 * b * float(w @ np.diag(Q)) + float(w @ Q @ w)
    if m <= 0.0 or v <= 0.0:
        return 1.0
    return float(min(1.0, max(0.0, 1.0 - m * m / v)))


@dataclass
class FoldScore:
    """A candidate's leave-one-site-out score: the row-weighted mean of its fold bounds."""

    score: float
    folds: list[float]


def loso_scores(
    candidates: Sequence[tuple[str, Callable[[Any], Any]]],
    codebook: Any,
    parts: Sequence[tuple[str, Sequence[Any]]],
    make_summary: Callable[[Sequence[Any]], Any],
    combine: Callable[[Sequence[Sequence[Any]]], Sequence[Any]],
    rule_of: Callable[[Any], Any],
) -> dict[str, FoldScore | str]:
    """Score each candidate by leave-one-site-out Cantelli bounds.

    Parameters
    ----------
    candidates : sequence of (name, fit)
        ``fit(summary)`` returns a fitted estimator.
    codebook : Codebook
    parts : sequence of (site, tables)
        Each site's released tables (2 ≤ sites ≤ :data:`MAX_SITES`).
    make_summary : tables → Summary
    combine : list of table lists → summed tables
    rule_of : fitted estimator → LinearRule

    Returns
    -------
    dict
        name → :class:`FoldScore`, or a one-line reason the candidate could not be scored.
    """
    if not MIN_SITES <= len(parts) <= MAX_SITES:
        raise InputError(f"leave-one-site-out needs {MIN_SITES} to {MAX_SITES} sites, got {len(parts)}")
    folds: list[tuple[Any, Any]] = []
    for k in range(len(parts)):
        held = make_summary(parts[k][1])
        rest = make_summary(combine([p[1] for j, p in enumerate(parts) if j != k]))
        folds.append((rest, held))
    out: dict[str, FoldScore | str] = {}
    for name, fit in candidates:
        bounds, weights = [], []
        try:
            for rest, held in folds:
                est = fit(rest)
                wb = rule_direction(rule_of(est), codebook)
                if wb is None:
                    raise InputError("not a binary additive rule over one-hot features")
                bounds.append(cantelli_bound(wb[0], wb[1], held))
                weights.append(held.n)
        except InputError as exc:
            out[name] = str(exc)
            continue
        wts = np.asarray(weights, dtype=np.float64)
        out[name] = FoldScore(float(np.average(bounds, weights=wts)), [float(x) for x in bounds])
    return out
