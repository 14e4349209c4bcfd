"""What a minimax solve returns: the coefficients, the certified value and how it got there."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class MinimaxSolution:
    """Output of a first-order minimax solve on arrays (full LP or column generation).

    Attributes
    ----------
    mu : ndarray (K, D)
        Coefficients after the empty-cell post-processing (see :func:`marg.learners.minimax.empty_cells.fix_empty_cells_first_order`).
    value : float
        R(μ) = 1 − τᵀμ + φ(μ) + λᵀ|μ|, evaluated exactly at ``mu`` (φ by the oracle).
    phi : float
        φ(μ) over the whole domain.
    iterations : list of float
        R^k per column-generation iteration (a single entry for the full solver).
    lower, upper : list of float
        Per LP solve (row-generation round, or compact solve): LP value and exact R(μ).
    selected : ndarray of int
        Block indices in the final working set (column generation) or with a non-zero
        coefficient (full solver).
    converged : bool
        Column (and row) generation finished with nothing left to add (False after
        ``k_max`` or a time limit).
    n_rows : int
        Rows of the final LP.
    impossible : ndarray of bool (K, D)
        One-hot entries with τ + λ = 0 (empty cells), whose μ was fixed at −B.
    bound : float
        B used for empty cells (one-hot scale).
    info : dict
        ``seconds``, ``history`` (per CG iteration), ``max_dual_violation`` (the largest
        v = |Fᵀα − τ| − λ over all features at the end; ≤ ε when converged).
    """

    mu: np.ndarray
    value: float
    phi: float
    iterations: list[float]
    lower: list[float]
    upper: list[float]
    selected: np.ndarray
    converged: bool
    n_rows: int
    impossible: np.ndarray
    bound: float
    simplex_iterations: int = 0
    lp_columns: int = 0
    info: dict = field(default_factory=dict)
