"""A minimax problem from a Summary: the one place a minimax learner reads the released tables, the moments and the box.

:func:`problem_from` takes a feature map (nodes, or nodes and candidate edges), reads τ and
its noise from the tables as released (:func:`marg.learners.features.statistics.map_moments`),
builds the box λ (:func:`marg.learners.calibration.confidence_box`) and lays out μ
(:class:`.layout.MuLayout`): a first-order map keeps every entry as an LP column (its empty
cells are fixed after the solve); a map with pair columns leaves its empty cells (τ = λ = 0)
out of the LP as −∞ and, when λ = 0 everywhere, fixes the gauge (:mod:`.gauge`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..features.calibration import confidence_box
from ..features.pairwise import PairwiseFeatureMap
from ..features.statistics import map_moments
from .empty_cells import empty_cells
from .gauge import common_constant, reference_mask
from .layout import MuLayout
from .problem import MinimaxProblem


def problem_from(summary: Any, fmap: Any, s: float | None = None, coverage: float = 0.95) -> MinimaxProblem:
    """The minimax problem of ``fmap`` on ``summary``'s tables with the box at ``coverage`` (or λ = s·std/√n).

    Parameters
    ----------
    summary : marginals.summary.Summary
    fmap : FeatureMap or PairwiseFeatureMap
        A pairwise map (even with no edges yet) excludes its empty cells from the LP and, at
        λ = 0, fixes the gauge; a first-order map keeps every entry of μ as an LP column.
    s, coverage : the box (:func:`marg.learners.calibration.confidence_box`).

    Returns
    -------
    MinimaxProblem
        τ, λ (K, D), the layout, ``n`` the Summary's n and whether the box is approximate.
    """
    m = map_moments(summary, fmap)
    box = confidence_box(m, fmap.indicator_columns(), s=s, coverage=coverage)
    tau, lam = m.tau, box.lam
    if not isinstance(fmap, PairwiseFeatureMap):
        return MinimaxProblem.first_order(fmap, tau, lam, float(summary.n), box.approximate)
    excluded = empty_cells(fmap, tau, lam)  # τ = λ = 0: −∞ in the LP, out of the columns, excluded by the oracle
    mask = ~excluded
    if not np.any(lam > 0):  # λ = 0: R* depends on the score functions only: fix the gauge
        mask &= reference_mask(fmap, tau)[None, :]
        mask &= ~common_constant(fmap, tau, excluded)
    return MinimaxProblem(fmap, tau, lam, MuLayout(excluded, mask), float(summary.n), bool(box.approximate))
