"""The 0-1 minimax problem every minimax learner solves, and its label subsets.

For a feature map Φ(x, y) = e_y ⊗ Ψ(x) (laid out (K, D)), expectations τ and half-widths λ
(the uncertainty set U = {p : |E_pΦ − τ| ≤ λ} over the WHOLE codebook domain), the minimax
risk is (seed 000, LP (13))::

    R* = min_μ R(μ),   R(μ) = 1 − τᵀμ + φ(μ) + λᵀ|μ|,
    φ(μ) = max_{x ∈ X, ∅≠C⊆Y} (Σ_{y∈C} Φ(x,y)ᵀμ − 1)/|C|.

R* is the worst-case 0-1 error over U of the randomized rule (6) — the certificate. The
inner maximum runs over the non-empty label subsets C (:class:`LabelSubsets`); a separator
(:mod:`.separation`, :mod:`.forest`) computes it exactly for forests, and a formulation
(:mod:`.first_order_models`, :mod:`.forest_lp`, :mod:`.local`, :mod:`.rows`) writes it as rows on the
one LP model (:mod:`.lp_model`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations
from typing import Any, NamedTuple

import numpy as np

from .layout import MuLayout


def label_subsets(n_classes: int) -> list[tuple[int, ...]]:
    """All non-empty subsets C of {0..K−1}, by size then lexicographically."""
    return [c for k in range(1, n_classes + 1) for c in combinations(range(n_classes), k)]


class LabelSubsets:
    """The 2^K − 1 non-empty label subsets C, their sizes |C| and membership matrix.

    Attributes
    ----------
    subsets : list of tuple of int
        By size, then lexicographically (:func:`label_subsets`).
    sizes : ndarray (n_subsets,)
        |C| as floats.
    member : ndarray (n_subsets, K)
        member[k, y] = 1 if y ∈ subsets[k]; ``member @ μ`` gives s_C = Σ_{y∈C} μ[y].
    """

    def __init__(self, n_classes: int):
        self.K = int(n_classes)
        self.subsets = label_subsets(self.K)
        self.sizes = np.array([len(c) for c in self.subsets], dtype=np.float64)
        self.member = np.zeros((len(self.subsets), self.K))
        for k, c in enumerate(self.subsets):
            self.member[k, list(c)] = 1.0
        self.index = {c: k for k, c in enumerate(self.subsets)}

    def __len__(self) -> int:
        return len(self.subsets)


@lru_cache(maxsize=16)
def subsets_for(n_classes: int) -> LabelSubsets:
    """The (shared, read-only) :class:`LabelSubsets` of K classes."""
    return LabelSubsets(n_classes)


def risk(tau: np.ndarray, lam: np.ndarray, mu: np.ndarray, phi: float) -> float:
    """R(μ) = 1 − τᵀμ + φ(μ) + λᵀ|μ| for μ, τ, λ of the same shape (φ given)."""
    return float(-np.sum(tau * mu) + np.sum(lam * np.abs(mu)) + phi + 1.0)


class MuColumns(NamedTuple):
    """Costs and bounds of the LP columns μ⁺, μ⁻ (μ = μ⁺ − μ⁻) from :func:`mu_columns`, each (2n,)."""

    costs: np.ndarray
    lower: np.ndarray
    upper: np.ndarray


def mu_columns(tau: np.ndarray, lam: np.ndarray, cols: np.ndarray | None = None,
               bound: float | np.ndarray = np.inf, pairs: bool = False) -> MuColumns:
    """The μ columns of every minimax LP: the objective ν − (τ − λ)ᵀμ⁺ + (τ + λ)ᵀμ⁻ (= R(μ) at the
    optimum, ν = φ(μ) + 1 the free column of cost 1) with 0 ≤ μ± ≤ bound; written on the LP by the
    one model, :meth:`marg.learners.minimax.lp_model.MinimaxModel.add_mu`.

    Parameters
    ----------
    tau, lam : ndarray, K·D entries (any shape; flattened)
    cols : ndarray of int (n,), optional
        Flat μ indices that are LP columns (default: all).
    bound : float or ndarray (n,)
        Box on μ± (``inf``: none).
    pairs : bool
        Layout: μ⁺_1, μ⁻_1, μ⁺_2, … (True) or μ⁺ (n) then μ⁻ (n) (False).

    Returns
    -------
    MuColumns
        ``costs`` −(τ − λ) for μ⁺ and τ + λ for μ⁻, ``lower`` 0, ``upper`` the bound, each (2n,).
    """
    tau = np.asarray(tau, dtype=np.float64).ravel()
    lam = np.asarray(lam, dtype=np.float64).ravel()
    if cols is not None:
        tau, lam = tau[cols], lam[cols]
    n = tau.size
    plus, minus = -(tau - lam), tau + lam
    hi = np.broadcast_to(np.asarray(bound, dtype=np.float64), (n,))
    if pairs:
        costs = np.empty(2 * n)
        costs[0::2], costs[1::2] = plus, minus
        return MuColumns(costs, np.zeros(2 * n), np.repeat(hi, 2))
    return MuColumns(np.concatenate([plus, minus]), np.zeros(2 * n), np.concatenate([hi, hi]))


@dataclass(frozen=True)
class MinimaxProblem:
    """One minimax problem: a feature map with its moments, the box, μ's layout and what the statistics were.

    Built from a Summary by :func:`marg.learners.minimax.from_summary.problem_from` (the one
    place a minimax learner reads the released tables, the moments and the box), or from
    arrays by :meth:`first_order`.

    Attributes
    ----------
    fmap : FeatureMap or PairwiseFeatureMap
        Φ's layout (for a structure search: nodes and every candidate edge).
    tau, lam : ndarray (K, D)
        Expectations and half-widths of the uncertainty set.
    layout : MuLayout
        The flat indices of μ, the cells excluded from the LP and the LP columns
        (:class:`.layout.MuLayout`).
    n : float
        The sample size the statistics stand for (the empty-cell ``"evidence"`` test); NaN unknown.
    approximate : bool
        The box's coverage is approximate (:class:`marg.learners.features.calibration.ConfidenceBox`).
    """

    fmap: Any
    tau: np.ndarray
    lam: np.ndarray
    layout: MuLayout
    n: float = float("nan")
    approximate: bool = False

    @classmethod
    def first_order(cls, fmap: Any, tau: np.ndarray, lam: np.ndarray, n: float = float("nan"),
                    approximate: bool = False) -> "MinimaxProblem":
        """MRC's problem: every entry of μ is an LP column (nothing excluded: the first-order
        formulations fix the empty cells after the solve, by the empty-cell policy)."""
        tau = np.asarray(tau, dtype=np.float64)
        return cls(fmap, tau, np.asarray(lam, dtype=np.float64), MuLayout.full(*tau.shape), float(n), bool(approximate))

    @property
    def K(self) -> int:
        return self.layout.K

    @property
    def D(self) -> int:
        return self.layout.D

    def risk(self, mu: np.ndarray, phi: float) -> float:
        """R(μ) for μ (K, D) on this problem's map."""
        return risk(self.tau, self.lam, mu, phi)
