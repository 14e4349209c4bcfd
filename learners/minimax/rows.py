"""Row generation for the minimax LP: one HiGHS model over a working set of columns, rows added in place.

With Φ(x, y) ∈ R^m (flattened μ space), rows indexed by pairs (x, C), x in the whole
domain and C a non-empty label subset, g_{x,C} = Σ_{y∈C} Φ(x, y)/|C| and
b_C = 1/|C| − 1, the problem is::

    R* = min_{μ⁺, μ⁻ ≥ 0, ν}  −(τ − λ)ᵀμ⁺ + (τ + λ)ᵀμ⁻ + ν
         s.t.  g_{x,C}ᵀ(μ⁺ − μ⁻) − ν ≤ b_C     for all (x, C),

with μ = μ⁺ − μ⁻, ν = φ(μ) + 1. Its dual (17) is max −bᵀα over distributions α on rows
with τ − λ ≤ Fᵀα ≤ τ + λ: α is the worst-case distribution p(x, y) = Σ_C α_{x,C} 1{y∈C}/|C|.

:class:`MinimaxLP` writes the rows on the one model (:class:`.lp_model.MinimaxModel`; μ boxed,
|μ_j| ≤ B_j, so a restricted row set never makes it unbounded; :func:`.generation.solve_boxed`
checks the box is slack at the end); row generation — the rows a separation oracle
(:class:`SeparationOracle`) reports as violated, added until none is — is the engine's one
driver, :func:`.generation.generate_rows`.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from marg.errors import InputError
from marg.lp import INF

from .lp_model import MinimaxModel
from .separation import as_sparse_row


class MinimaxLP:
    """LP (13) by row generation: the rows gᵀ(μ⁺ − μ⁻) − ν ≤ b a separator reports, on a :class:`MinimaxModel`.

    The model (``self.model``: ν, the working μ columns in pairs μ⁺_k, μ⁻_k with costs
    −(τ−λ)_j, (τ+λ)_j and box [0, B_j]) is shared with every formulation; this class writes
    the rows. All rows ever added are also kept in flat μ space (``row_matrix``) so that
    columns entering later get their coefficients.

    Parameters
    ----------
    tau, lam : ndarray, shape (m,) or (K, D)
        The box's centre τ and half-widths λ ≥ 0 (flattened).
    bound : float or ndarray (m,)
        Box B on |μ_j|.
    feas_tol : float
        HiGHS primal and dual feasibility tolerance.
    accept_tol : float
        A solve HiGHS ends with status "Unknown" is accepted when its primal and dual
        infeasibilities are below this (the objective is re-evaluated exactly from μ).
    """

    def __init__(self, tau: np.ndarray, lam: np.ndarray, bound: float | np.ndarray = 1e3, feas_tol: float = 1e-8, accept_tol: float = 1e-6):
        self.model = MinimaxModel(tau, lam, bound, layout="pairs", solver="simplex", presolve=False, feas_tol=feas_tol,
                                  accept_tol=accept_tol, what="the minimax LP (row generation)")
        self.tau, self.lam = self.model.tau, self.model.lam
        self.lower = self.tau - self.lam
        self.upper = self.tau + self.lam
        self.m = self.model.m
        self.b: list[float] = []
        self.labels: list[tuple[int, ...] | None] = []
        self._coo_r: list[np.ndarray] = []
        self._coo_c: list[np.ndarray] = []
        self._coo_v: list[np.ndarray] = []
        self._F: sp.csc_array | None = None
        self._seen: set[int] = set()
        self.alpha = np.zeros(0)

    # ------------------------------------------------------- the model's read-outs
    @property
    def mu(self) -> np.ndarray:
        return self.model.mu

    @property
    def nu(self) -> float:
        return self.model.nu

    @property
    def objective(self) -> float:
        return self.model.objective

    @property
    def status(self) -> str:
        return self.model.status

    @property
    def bound(self) -> np.ndarray:
        return self.model.bound

    @property
    def active(self) -> np.ndarray:
        return self.model.active

    @property
    def simplex_iterations(self) -> int:
        return self.model.simplex_iterations

    # ------------------------------------------------------------------ sizes
    @property
    def n_rows(self) -> int:
        return len(self.b)

    @property
    def n_active(self) -> int:
        return int(self.active.size)

    def row_matrix(self) -> sp.csc_array:
        """All stored rows in flat μ space, shape (n_rows, m) (CSC)."""
        if self._F is None:
            if self._coo_r:
                r = np.concatenate(self._coo_r)
                c = np.concatenate(self._coo_c)
                v = np.concatenate(self._coo_v)
            else:
                r = c = np.zeros(0, np.int64)
                v = np.zeros(0)
            self._F = sp.csc_array((v, (r, c)), shape=(self.n_rows, self.m))
        return self._F

    # ------------------------------------------------------------------- rows
    def add_rows(self, cuts: Sequence[Any]) -> int:
        """Add rows (Cut or (g, b, ...) tuples), skipping exact duplicates; returns the count added."""
        starts, idxs, vals, ub = [], [], [], []
        nnz = 0
        for c in cuts:
            g, b = c[0], float(c[1])
            lab = getattr(c, "labels", None)
            idx, val = as_sparse_row(g, self.m)
            key = hash((idx.tobytes(), np.round(val, 12).tobytes(), round(b, 12)))
            if key in self._seen:
                continue
            self._seen.add(key)
            r = self.n_rows
            self.b.append(b)
            self.labels.append(tuple(lab) if lab is not None else None)
            self._coo_r.append(np.full(idx.size, r, dtype=np.int64))
            self._coo_c.append(idx)
            self._coo_v.append(val)
            _, cols, vs = self.model.mu_entries(idx, val)
            mi = np.concatenate([[0], cols]).astype(np.int32)
            mv = np.concatenate([[-1.0], vs])
            starts.append(nnz)
            idxs.append(mi)
            vals.append(mv)
            ub.append(b)
            nnz += mi.size
        if not ub:
            return 0
        self._F = None
        k = len(ub)
        self.model.add_rows(np.full(k, -INF), np.asarray(ub, dtype=np.float64), starts, np.concatenate(idxs), np.concatenate(vals))
        return k

    def delete_rows(self, rows: np.ndarray) -> None:
        """Remove rows (indices into the current row list) from the model and the store."""
        if np.size(rows) == 0:
            return
        keep = self.model.delete_rows(rows)
        F = self.row_matrix().tocsr()[keep]
        coo = F.tocoo()
        self.b = [b for b, k in zip(self.b, keep) if k]
        self.labels = [lab for lab, k in zip(self.labels, keep) if k]
        self._coo_r = [coo.row.astype(np.int64)]
        self._coo_c = [coo.col.astype(np.int64)]
        self._coo_v = [coo.data.astype(np.float64)]
        self._F = None
        if self.alpha.size == keep.size:
            self.alpha = self.alpha[keep]
        # Deleted rows may be needed again later: forget their keys by rebuilding.
        Fr = self.row_matrix().tocsr()
        self._seen = set()
        for r in range(self.n_rows):
            s, e = Fr.indptr[r], Fr.indptr[r + 1]
            idx, val = Fr.indices[s:e].astype(np.int64), Fr.data[s:e]
            self._seen.add(hash((idx.tobytes(), np.round(val, 12).tobytes(), round(self.b[r], 12))))

    # ---------------------------------------------------------------- columns
    def add_columns(self, cols: np.ndarray, fill: sp.spmatrix | None = None) -> None:
        """Bring flat μ columns into the model at value 0 (the current point stays feasible).

        Parameters
        ----------
        cols : ndarray of int
            Flat μ indices, not yet in the working set.
        fill : sparse (n_rows, len(cols)), optional
            Coefficients for rows that have no entry in these columns yet (e.g. rows
            generated while the feature was out of the model); recorded in the row store.
            The model column is the stored rows' entries after the fill.
        """
        cols = np.asarray(cols, dtype=np.int64).ravel()
        if cols.size == 0:
            return
        if np.any(self.model.plus[cols] >= 0) or np.unique(cols).size != cols.size:
            raise InputError("add_columns: a column is already in the working set or repeated")
        if fill is not None:
            Fl = sp.csc_array(fill)
            if Fl.shape != (self.n_rows, cols.size):
                raise InputError(f"add_columns: fill must have shape {(self.n_rows, cols.size)}, got {Fl.shape}")
            coo = Fl.tocoo()
            keep = coo.data != 0.0
            if keep.any():
                self._coo_r.append(coo.row[keep].astype(np.int64))
                self._coo_c.append(cols[coo.col[keep]])
                self._coo_v.append(coo.data[keep].astype(np.float64))
                self._F = None
        self.model.add_mu(cols, coef=self.row_matrix()[:, cols])

    def remove_columns(self, cols: np.ndarray) -> None:
        """Take flat μ columns out of the model (their μ becomes 0; rows keep their entries in the store)."""
        cols = np.asarray(cols, dtype=np.int64).ravel()
        if cols.size and np.any(self.model.plus[cols] < 0):
            raise InputError("remove_columns: a column is not in the working set")
        self.model.remove_mu(cols)

    def set_bound(self, bound: np.ndarray | float) -> None:
        """Change the box B on |μ_j| (all columns; working columns updated in the model)."""
        self.model.set_bound(bound)

    # ------------------------------------------------------------------ solve
    def solve(self, time_limit: float | None = None) -> str:
        """Re-solve from the current basis. Returns "optimal" or "time_limit".

        On a time limit the last optimal point (μ, ν, α) is kept as it was.

        Raises
        ------
        InconsistentStatistics
            The boxed LP cannot be unbounded; an unbounded status means HiGHS met no box.
        SolverError
            HiGHS failed twice (see :meth:`marg.lp.HighsLP.solve`).
        """
        deadline = None if time_limit is None else time.perf_counter() + max(float(time_limit), 1e-3)
        status = self.model.solve(deadline)
        if status == "optimal":
            self.alpha = -self.model.row_dual
        return status

    # ------------------------------------------------------------- read-outs
    def risk(self, mu: np.ndarray, phi: float) -> float:
        """R(μ) at a flat μ given φ(μ) (:func:`marg.learners.minimax.problem.risk`)."""
        return self.model.risk(mu, phi)

    def bounds(self, cuts: Sequence[Any]) -> tuple[float, float, float]:
        """One row-generation round's (LP value, R(μ), φ(μ)) at the current μ, φ(μ) = max value − 1 of ``cuts``
        (one per label subset, as a separator reports them: the exact maximum over the domain)."""
        phi = max(float(c[2]) for c in cuts) - 1.0
        return self.objective, self.risk(self.mu, phi), phi

    def dual_features(self, cols: np.ndarray | None = None) -> np.ndarray:
        """Fᵀα at flat columns ``cols`` (all m if None), from the stored rows and the LP duals."""
        F = self.row_matrix()
        if cols is not None:
            F = F[:, np.asarray(cols, dtype=np.int64)]
        a = self.alpha if self.alpha.size == self.n_rows else np.zeros(self.n_rows)
        return np.asarray(F.T @ a).ravel()

    def dual_violation(self, cols: np.ndarray | None = None) -> np.ndarray:
        """v = |Fᵀα − τ| − λ at ``cols`` (Algorithm 2, line 1): > 0 where α breaks the box."""
        cols_ = np.arange(self.m) if cols is None else np.asarray(cols, dtype=np.int64)
        fa = self.dual_features(cols_)
        lo, hi = self.lower[cols_], self.upper[cols_]
        tau, lam = 0.5 * (lo + hi), 0.5 * (hi - lo)
        return np.abs(fa - tau) - lam

    def box_gap(self, dtol: float = 1e-8) -> float:
        """The model's :meth:`MinimaxModel.box_gap`: > 0 when the box |μ| ≤ B binds."""
        return self.model.box_gap(dtol)
