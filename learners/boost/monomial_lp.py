"""Boosting's minimax LP: the one minimax model with monomial columns and rows at domain points.

Column k of μ is a pair (c, u): monomial u of the map in class c, the feature m_u(x)·1{y = c}.
A row is a domain point x and a label subset C (free features completed at their most likely
code under the pooled class-conditional distribution of C)::

    |C|·ν − Σ_{y∈C} Σ_u m_u(x) μ[y, u] ≥ −1,

i.e. (Σ_{y∈C} Φ(x, y)ᵀμ − 1)/|C| + 1 ≤ ν. :class:`MonomialLP` is a
:class:`marg.learners.minimax.lp_model.MinimaxModel` — the model owns the columns and the rows
(coefficients, label subsets, the points, deletion); this class only says what a boosting column
and a boosting row are: the coefficients of a new column are its monomial at the recorded points
(:meth:`MonomialLP.add_column`), a row's are the columns' monomials at its point
(:meth:`MonomialLP.add_cuts`), and a round's bounds certify φ from above (:meth:`MonomialLP.bounds`).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from marg.lp import INF

from ..minimax.lp_model import MinimaxModel
from .columns import MonomialMap


class MonomialLP(MinimaxModel):
    """LP (13) over (class, monomial) columns with rows at domain points (module docstring).

    Parameters
    ----------
    fmap : MonomialMap
        The map the columns' monomials are on (grows as monomials enter).
    pooled : list of (K, m_f) arrays
        P(x_f = a, y) per feature: the completion of a row's free features.
    n_classes : int
    bound : float
        The box on |μ| of every column.

    Attributes
    ----------
    cols : list of (int, int)
        (class, map column) of flat μ index k.
    col_of : dict
        Its inverse.
    """

    def __init__(self, fmap: MonomialMap, pooled: Sequence[np.ndarray], n_classes: int, bound: float = 1e3):
        super().__init__(np.zeros(0), np.zeros(0), bound, layout="pairs", solver="simplex", presolve=None,
                         feas_tol=None,
                         what="the monomial minimax LP", dedup=False)
        self.fmap, self.pooled, self.K, self.box = fmap, pooled, int(n_classes), float(bound)
        self.cols: list[tuple[int, int]] = []
        self.col_of: dict[tuple[int, int], int] = {}

    # ------------------------------------------------------------------ columns
    def add_column(self, c: int, u: int, tau: float, lam: float) -> None:
        """Column (c, u) with its τ, λ; its coefficient in row r is −m_u(x_r)·1{c ∈ C_r}."""
        m = np.zeros(self.n_rows)
        if self.n_rows:
            psi = np.asarray(self.fmap.psi_column(np.stack(self.points), u), dtype=np.float64)
            m = np.where([c in C for C in self.labels], psi, 0.0)
        nz = np.flatnonzero(m)
        k = self.extend([tau], [lam])
        self.add_mu(k, self.box, fill=sp.csc_array((-m[nz], (nz, np.zeros(nz.size, dtype=np.int64))),
                                                   shape=(m.size, 1)))
        self.col_of[(c, u)] = len(self.cols)
        self.cols.append((c, u))

    def mu_matrix(self, flat: np.ndarray | None = None) -> np.ndarray:
        """μ (K, D) on the map from flat μ (default: the last optimal solve's)."""
        flat = self.mu if flat is None else flat
        mu = np.zeros((self.K, self.fmap.dim))
        for k, (c, u) in enumerate(self.cols):
            mu[c, u] = flat[k]
        return mu

    # --------------------------------------------------------------------- rows
    def complete(self, x: np.ndarray, C: tuple[int, ...]) -> np.ndarray:
        """A copy of ``x`` with its free features (code −1) at their most likely code under the pooled distribution of
        C."""
        x = x.copy()
        for f in np.flatnonzero(x < 0):
            x[f] = int(np.argmax(self.pooled[f][list(C)].sum(axis=0)))
        return x

    def add_cuts(self, cuts: Sequence[Any]) -> int:
        """The rows of separator cuts (x, C, …): one row per cut, at x completed; returns the count added."""
        g, nu, labels, points = [], [], [], []
        for cut in cuts:
            x, C = self.complete(cut[0], cut[1]), tuple(cut[1])
            psi = self.fmap.psi(x[None, :])[0] if self.fmap.dim else np.zeros(0)
            ks = [k for k, (c, u) in enumerate(self.cols) if c in C and psi[u] != 0.0]
            g.append((np.asarray(ks, dtype=np.int64),
                      np.asarray([-psi[self.cols[k][1]] for k in ks], dtype=np.float64)))
            nu.append(float(len(C)))
            labels.append(C)
            points.append(x)
        # −Σ m_u(x) μ[y, u] + |C|·ν ≥ −1
        return self.add_flat_rows(g, np.asarray(nu), -1.0, INF, labels=labels, points=points)

    def bounds(self, cuts: Sequence[Any]) -> tuple[float, float, float]:
        """(LP value, R(μ) with φ certified from above, that φ) at the current μ; cuts (x, C, value, upper bound).

        The linear part −τᵀμ + λᵀ|μ| is summed column by column in the LP's order (the
        sum boosting has always recorded, so its R^k history is reproducible to the bit).
        """
        phi_up = max(c[3] for c in cuts)
        t = -self.tau * self.mu + self.lam * np.abs(self.mu)
        lin = float(np.cumsum(t)[-1]) if t.size else 0.0
        return lin + self.nu + 1.0, lin + phi_up + 1.0, phi_up
