"""What a minimax solve returns — the one result type of every fit path on the minimax engine.

:func:`marg.learners.minimax.fit.fit` returns a :class:`MinimaxSolution`; so do the pieces it
runs before the finish (a formulation's ``read``: the LP's point, φ NaN where not evaluated
yet) and boosting's column generation (:mod:`marg.learners.boost.minimax_cg`). What is
particular to a formulation is its typed ``read`` record (the forest LP's flows, the local
polytope's reparametrisation, the hinge LP's score, …), never an untyped dict. A
formulation's ``finish`` returns a :class:`Finished`. The fitted classifier's state is set
from a solution (:meth:`marg.learners.classifiers.minimax_rules.MinimaxRules._set_minimax_state`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

if TYPE_CHECKING:
    from ..core.certificate import CertificateKind


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
    kind : {"R*", "R*_L", "hinge", "W(h)"}
        What ``value`` is (``"W(h)"``: a fixed rule's worst case, :mod:`.fixed_rule`).
    selected : ndarray of int
        Block indices in the final working set (column generation) or with a non-zero
        coefficient (MRC's full solver).
    edges : list of (int, int)
        The forest's or graph's node pairs (DCC; greedy: in the order they entered).
    simplex_iterations, lp_columns : int
    stop : {"converged", "k_max", "stalled", "time_limit"}
        Why the search stopped (:data:`marg.learners.minimax.generation.STOPS`).
    history : list of dict
        One record per priced iteration of the search (:func:`.generation.generate_columns`).
    seconds : float
        Wall time of the fit (NaN where not measured).
    formulation : str
        The formulation's registry name (:mod:`.registry`).
    fmap : FeatureMap or PairwiseFeatureMap or None
        The map μ lives on after the finish (DCC: the chosen forest's, not the candidates').
    read : object or None
        The formulation's typed read-out: :class:`.first_order.FirstOrderRead` (working set,
        largest dual violation), :class:`.forest_lp.Flows` (the forest LP's worst-case
        distribution), :class:`.local.Reparametrisation` (ν, offsets, vacuous subsets),
        :class:`marg.learners.classifiers.dcc_hinge.HingeScore` (f, θ, ν) or boosting's
        :class:`marg.learners.boost.minimax_cg.MonomialRead` (pricing and φ exact).
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
    kind: CertificateKind = "R*"
    selected: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    edges: list[tuple[int, int]] = field(default_factory=list)
    simplex_iterations: int = 0
    lp_columns: int = 0
    stop: str = "converged"
    history: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = float("nan")
    formulation: str = ""
    fmap: Any = None
    read: Any = None


class Finished(NamedTuple):
    """What a formulation's ``finish`` gives back: definite coefficients on the map the model keeps.

    ``mu``, ``tau``, ``lam``, ``impossible`` (K, D') on ``fmap`` (D' its columns), ``phi`` φ(μ)
    over the whole domain (or its certified bound), ``bound`` the B the model records;
    ``iterate`` the search iterate whose R^k the certificate replaces (−1: the last, whose μ
    was finished; None: none — boosting reports its best iterate and keeps every R^k as recorded).
    """

    fmap: Any
    mu: np.ndarray
    tau: np.ndarray
    lam: np.ndarray
    impossible: np.ndarray
    phi: float
    bound: float | np.ndarray
    iterate: int | None = -1
