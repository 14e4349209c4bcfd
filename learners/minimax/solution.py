"""What a minimax solve returns — the one result type of every fit path on the minimax engine.

MRC's drivers (:mod:`.drivers`), DCC's forest drivers (:mod:`.forest_drivers`), the one-shot
LPs (:func:`.forest_lp.solve_compact`, :func:`.local.solve_local`,
:func:`marg.learners.dcc_hinge.solve_hinge`) and boosting's column generation
(:mod:`marg.learners.boost.minimax_cg`) all return a :class:`MinimaxSolution`; the fitted
classifier's state is set from one (:meth:`marg.learners.minimax.rules.MinimaxRules._set_minimax_state`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class MinimaxSolution:
    """Coefficients μ on a map, the box they were fitted in, the certified value and how it got there.

    Attributes
    ----------
    mu : ndarray (K, D)
        Coefficients (after the empty-cell post-processing where the path has one; the forest
        drivers return the LP's μ on the full candidate map, which DCC then post-processes).
    tau, lam : ndarray (K, D)
        The uncertainty box's centre and half-widths on the same columns.
    phi : float
        φ(μ) over the whole domain (or its certified upper bound); NaN when the path has not
        evaluated it yet (the forest drivers).
    value : float
        The certificate: R(μ) = 1 − τᵀμ + φ(μ) + λᵀ|μ| (:func:`marg.learners.minimax.problem.risk`),
        R_L(μ) for the local polytope, the hinge LP's value for ``kind="hinge"``.
    iterations : list of float
        R^k per column-generation iteration or greedy step (a single entry for one solve).
    lower, upper : list of float
        Per LP solve (row-generation round, or compact solve): LP value and exact R(μ).
    converged : bool
        Column (and row) generation finished with nothing left to add (False after
        ``k_max`` or a time limit).
    n_rows : int
        Rows of the final LP (0 for a compact LP without row generation).
    impossible : ndarray of bool (K, D)
        Entries with τ + λ = 0 (empty cells) the LP left out or fixed at −B.
    bound : float or ndarray (K·D,)
        B: the box on |μ| (per flat entry for row generation) and the −B of impossible cells.
    kind : {"R*", "R*_L", "hinge"}
        What ``value`` is.
    selected : ndarray of int
        Block indices in the final working set (column generation) or with a non-zero
        coefficient (MRC's full solver).
    edges : list of (int, int)
        The forest's or graph's node pairs (DCC; greedy: in the order they entered).
    simplex_iterations, lp_columns : int
    info : dict
        Path-specific records: ``seconds``, ``history`` (per CG iteration),
        ``max_dual_violation`` (MRC: the largest v = |Fᵀα − τ| − λ over all features at the
        end; ≤ ε when converged), ``pricing_exact`` and ``phi_exact`` (boost); ``flows`` (the
        forest LP's worst-case distribution per label subset, :func:`.forest_lp.solve_compact`);
        ``nu``, ``offsets`` (n_subsets, D) and ``vacuous`` (n_subsets,) (the local polytope,
        :func:`.local.solve_local`); ``f`` (D,), ``theta`` (2, D) and ``nu`` (the hinge LP,
        :func:`marg.learners.dcc_hinge.solve_hinge`).
    """

    mu: np.ndarray
    tau: np.ndarray
    lam: np.ndarray
    phi: float
    value: float
    iterations: list[float]
    lower: list[float]
    upper: list[float]
    converged: bool
    n_rows: int
    impossible: np.ndarray
    bound: float | np.ndarray
    kind: str = "R*"
    selected: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    edges: list[tuple[int, int]] = field(default_factory=list)
    simplex_iterations: int = 0
    lp_columns: int = 0
    info: dict = field(default_factory=dict)
