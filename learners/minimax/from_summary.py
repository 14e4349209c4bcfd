"""A minimax problem from a Summary: the one place a minimax learner reads the released tables, the moments and the box.

:func:`problem_from` takes a feature map (nodes, or nodes and candidate edges), reads τ and
its noise from the tables as released (:func:`marg.learners.features.statistics.map_moments`),
builds the box λ (:func:`marg.learners.features.calibration.confidence_box`) and lays out μ
(:class:`.layout.MuLayout`): a first-order map keeps every entry as an LP column (its empty
cells are fixed after the solve); a map with pair columns leaves its empty cells (τ = λ = 0)
out of the LP as −∞ and, when λ = 0 everywhere, fixes the gauge (:mod:`.gauge`).

:class:`TableReader` is the step every minimax problem takes from a Summary — ``problem_from``
here and boosting's (:func:`marg.learners.boost.from_summary.problem_from`, whose columns enter
one by one): the moments as released (n = ``Summary.n_released``, refused otherwise) give τ and
the box λ, and the problem's n is the reported ``Summary.n``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from marg.errors import InputError

from ..features.calibration import ConfidenceBox, confidence_box
from ..features.pairwise import PairwiseFeatureMap
from ..features.statistics import map_moments
from .empty_cells import empty_cells
from .gauge import common_constant, reference_mask
from .layout import MuLayout
from .problem import MinimaxProblem


@dataclass(frozen=True)
class TableReader:
    """How a minimax problem reads ``summary``: τ and the box λ of moments read from its tables as
    released, and the problem's n.

    Parameters
    ----------
    summary : marginals.summary.Summary
    s, coverage : the box (:func:`marg.learners.features.calibration.confidence_box`).
    n_intervals : int, optional
        The box's Bonferroni count when it exceeds the entries of one call (column generation:
        every candidate column).
    """

    summary: Any
    s: float | None = None
    coverage: float = 0.95
    n_intervals: int | None = None

    @property
    def n(self) -> float:
        """The problem's n: the reported ``Summary.n`` (post-processed under DP; the box's is ``n_released``)."""
        return float(self.summary.n)

    def box(self, moments: Any, binary: np.ndarray) -> tuple[np.ndarray, ConfidenceBox]:
        """(τ, the box) of ``moments``, which must be read from the tables as released
        (:mod:`marg.learners.features.statistics`: their n is ``Summary.n_released``)."""
        if float(moments.n) != float(self.summary.n_released):
            raise InputError(f"moments over n = {moments.n!r} rows are not the tables as released "
                             f"(n = {self.summary.n_released!r}): read them with features.statistics")
        return moments.tau, confidence_box(moments, binary, s=self.s, coverage=self.coverage,
                                           n_intervals=self.n_intervals)


def problem_from(summary: Any, fmap: Any, s: float | None = None, coverage: float = 0.95) -> MinimaxProblem:
    """The minimax problem of ``fmap`` on ``summary``'s tables with the box at ``coverage`` (or λ = s·std/√n).

    Parameters
    ----------
    summary : marginals.summary.Summary
    fmap : FeatureMap or PairwiseFeatureMap
        A pairwise map (even with no edges yet) excludes its empty cells from the LP and, at
        λ = 0, fixes the gauge; a first-order map keeps every entry of μ as an LP column.
    s, coverage : the box (:func:`marg.learners.features.calibration.confidence_box`).

    Returns
    -------
    MinimaxProblem
        τ, λ (K, D), the layout, ``n`` the Summary's n and whether the box is approximate.
    """
    read = TableReader(summary, s, coverage)
    tau, box = read.box(map_moments(summary, fmap), fmap.indicator_columns())
    lam = box.lam
    if not isinstance(fmap, PairwiseFeatureMap):
        return MinimaxProblem.first_order(fmap, tau, lam, read.n, box.approximate)
    excluded = empty_cells(fmap, tau, lam)  # τ = λ = 0: −∞ in the LP, out of the columns, excluded by the oracle
    mask = ~excluded
    if not np.any(lam > 0):  # λ = 0: R* depends on the score functions only: fix the gauge
        mask &= reference_mask(fmap, tau)[None, :]
        mask &= ~common_constant(fmap, tau, excluded)
    return MinimaxProblem(fmap, tau, lam, MuLayout(excluded, mask), read.n, bool(box.approximate))
