"""The 0-1 MRC linear program (LP (13) of seed 000) over the whole domain, on HiGHS.

With Φ(x, y) ∈ R^m (flattened μ space), rows indexed by pairs (x, C), x in the whole
domain and C a non-empty label subset, g_{x,C} = Σ_{y∈C} Φ(x, y)/|C| and
b_C = 1/|C| − 1, the problem is::

    R* = min_{μ⁺, μ⁻ ≥ 0, ν}  −(τ − λ)ᵀμ⁺ + (τ + λ)ᵀμ⁻ + ν
         s.t.  g_{x,C}ᵀ(μ⁺ − μ⁻) − ν ≤ b_C     for all (x, C),

with μ = μ⁺ − μ⁻, ν = φ(μ) + 1 and φ(μ) = max_{x,C} (Σ_{y∈C} Φ(x,y)ᵀμ − 1)/|C|. Its
dual (17) is max −bᵀα over distributions α on rows with τ − λ ≤ Fᵀα ≤ τ + λ: α is the
worst-case distribution p(x, y) = Σ_C α_{x,C} 1{y∈C}/|C|.

Pieces (objective/penalty, rows, solver kept apart):

- Row generation, for any feature map with an exact separation oracle:
  :class:`MinimaxLP` holds ONE HiGHS model over a working set of columns and a growing
  set of rows, edited in place so every re-solve starts from the previous basis; μ is
  boxed (|μ_j| ≤ B_j, checked slack at the end) so a restricted row set never makes it
  unbounded. A row oracle is any object with ``most_violated(mu) -> list of Cut``
  (:class:`RowOracle`); :class:`FirstOrderOracle` is the exact one for first-order
  features (the max over the domain separates per feature); a pairwise (DCC-style)
  learner plugs in a max-sum dynamic program and reuses :func:`generate_rows` /
  :func:`solve_boxed` unchanged.
- For first-order features the separation is a sum of per-feature maxima, so the
  exponentially many rows have an exact polynomial epigraph form (:class:`CompactModel`:
  t_{C,i} ≥ Σ_{y∈C} μ[y, i, a] for every level a, Σ_i t_{C,i} − |C|ν ≤ 1 − |C|). It is
  the default: the same optimum, without row generation (which needs about one round per
  non-zero coefficient and stalls on thousands of features).
- Column generation over features (seed 000, Algorithms 1-2, :func:`solve_cg`) runs on
  either formulation (:class:`CompactModel` or :class:`RowModel`); the violation of a
  feature outside the model is priced by :class:`SplitPricer`. :func:`solve_full` is the
  same LP with every feature at once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, Callable, NamedTuple, Protocol, Sequence

import highspy
import numpy as np
import scipy.sparse as sp

from marg.errors import InputError

from .featuremap import FeatureMap
from .lp import new_highs

INF = highspy.kHighsInf


class Cut(NamedTuple):
    """One row (x, C) of the LP.

    Attributes
    ----------
    g : ndarray (m,), scipy sparse (1, m) or tuple (indices, values)
        The row vector g = Σ_{y∈C} Φ(x, y)/|C| in flat μ space.
    b : float
        Right-hand side, 1/|C| − 1.
    violation : float
        gᵀμ − b at the μ the oracle was asked about: the value ν must reach for this row.
    labels : tuple of int or None
        The label subset C (used by column generation to extend rows to new features).
    """

    g: Any
    b: float
    violation: float
    labels: tuple[int, ...] | None = None


class RowOracle(Protocol):
    """Separation oracle: the most violated rows at μ (flat, shape (m,))."""

    def most_violated(self, mu: np.ndarray) -> list[Cut]: ...


def label_subsets(n_classes: int) -> list[tuple[int, ...]]:
    """All non-empty subsets C of {0..K−1}, by size then lexicographically."""
    return [c for k in range(1, n_classes + 1) for c in combinations(range(n_classes), k)]


def as_sparse_row(g: Any, m: int) -> tuple[np.ndarray, np.ndarray]:
    """(indices, values) of a row given dense, scipy-sparse or (indices, values) form; zeros dropped."""
    if isinstance(g, tuple) and len(g) == 2:
        idx = np.asarray(g[0], dtype=np.int64).ravel()
        val = np.asarray(g[1], dtype=np.float64).ravel()
    elif sp.issparse(g):
        r = sp.csr_array(g)
        if r.shape[0] != 1:
            raise InputError(f"a sparse cut row must have shape (1, m), got {r.shape}")
        idx, val = r.indices.astype(np.int64), r.data.astype(np.float64)
    else:
        d = np.asarray(g, dtype=np.float64).ravel()
        if d.size != m:
            raise InputError(f"a dense cut row must have {m} entries, got {d.size}")
        idx = np.flatnonzero(d)
        val = d[idx]
    if idx.size != val.size:
        raise InputError("a cut row has different numbers of indices and values")
    if idx.size and (idx.min() < 0 or idx.max() >= m):
        raise InputError(f"a cut row has a column index outside 0..{m - 1}")
    keep = val != 0.0
    idx, val = idx[keep], val[keep]
    order = np.argsort(idx, kind="stable")
    return idx[order], val[order]


class MinimaxLP:
    """LP (13) over a working set of columns, with rows added in place (one HiGHS model).

    Model layout: column 0 is ν (free, cost 1); working column k (flat μ index
    ``active[k]``) is HiGHS columns 1+2k (μ⁺, cost −(τ−λ)_j) and 2+2k (μ⁻, cost (τ+λ)_j),
    both in [0, B_j]. Row r is gᵀ(μ⁺ − μ⁻) − ν ≤ b_r over the working columns. All rows
    ever added are also kept in flat μ space (``row_matrix``) so that columns entering
    later get their coefficients.

    Parameters
    ----------
    lower, upper : ndarray, shape (m,)
        τ − λ and τ + λ (flat).
    bound : float or ndarray (m,)
        Box B on |μ_j|.
    feas_tol : float
        HiGHS primal and dual feasibility tolerance.
    accept_tol : float
        A solve HiGHS ends with status "Unknown" is accepted when its primal and dual
        infeasibilities are below this (the objective is re-evaluated exactly from μ).
    """

    def __init__(self, lower: np.ndarray, upper: np.ndarray, bound: float | np.ndarray = 1e3, feas_tol: float = 1e-8, accept_tol: float = 1e-6):
        self.lower = np.asarray(lower, dtype=np.float64).ravel()
        self.upper = np.asarray(upper, dtype=np.float64).ravel()
        if self.lower.shape != self.upper.shape:
            raise InputError(f"lower {self.lower.shape} and upper {self.upper.shape} differ in shape")
        if np.any(self.lower > self.upper):
            raise InputError("the uncertainty box needs tau - lambda <= tau + lambda (lambda >= 0)")
        self.m = self.lower.size
        self.bound = np.broadcast_to(np.asarray(bound, dtype=np.float64), (self.m,)).copy()
        if not np.all(self.bound > 0):
            raise InputError("the box bound on mu must be positive")
        self.accept_tol = float(accept_tol)
        h = new_highs()
        h.setOptionValue("presolve", "off")
        h.setOptionValue("solver", "simplex")
        h.setOptionValue("primal_feasibility_tolerance", feas_tol)
        h.setOptionValue("dual_feasibility_tolerance", feas_tol)
        h.addCol(1.0, -INF, INF, 0, np.zeros(0, np.int32), np.zeros(0))
        self.h = h
        self.active = np.zeros(0, dtype=np.int64)
        self.pos = np.full(self.m, -1, dtype=np.int64)
        self.b: list[float] = []
        self.labels: list[tuple[int, ...] | None] = []
        self._coo_r: list[np.ndarray] = []
        self._coo_c: list[np.ndarray] = []
        self._coo_v: list[np.ndarray] = []
        self._F: sp.csc_array | None = None
        self._seen: set[int] = set()
        self.status = "unsolved"
        self.objective = np.nan
        self.nu = np.nan
        self.mu = np.zeros(self.m)
        self.alpha = np.zeros(0)
        self._x = np.zeros(1)
        self._d = np.zeros(1)
        self.simplex_iterations = 0

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
            p = self.pos[idx]
            on = p >= 0
            p, v = p[on], val[on]
            mi = np.concatenate([[0], 1 + 2 * p, 2 + 2 * p]).astype(np.int32)
            mv = np.concatenate([[-1.0], v, -v])
            starts.append(nnz)
            idxs.append(mi)
            vals.append(mv)
            ub.append(b)
            nnz += mi.size
        if not ub:
            return 0
        self._F = None
        k = len(ub)
        self.h.addRows(
            k,
            np.full(k, -INF),
            np.asarray(ub, dtype=np.float64),
            nnz,
            np.asarray(starts, dtype=np.int32),
            np.concatenate(idxs),
            np.concatenate(vals),
        )
        return k

    def delete_rows(self, rows: np.ndarray) -> None:
        """Remove rows (indices into the current row list) from the model and the store."""
        rows = np.unique(np.asarray(rows, dtype=np.int64))
        if rows.size == 0:
            return
        self.h.deleteRows(int(rows.size), rows.astype(np.int32))
        keep = np.ones(self.n_rows, dtype=bool)
        keep[rows] = False
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
        if np.any(self.pos[cols] >= 0) or np.unique(cols).size != cols.size:
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
        C = self.row_matrix()[:, cols]
        C = sp.csc_array(C)
        C.sort_indices()
        k = cols.size
        costs = np.empty(2 * k)
        costs[0::2] = -self.lower[cols]
        costs[1::2] = self.upper[cols]
        lo = np.zeros(2 * k)
        hi = np.repeat(self.bound[cols], 2)
        starts, idxs, vals = [], [], []
        nnz = 0
        for t in range(k):
            s, e = C.indptr[t], C.indptr[t + 1]
            ri = C.indices[s:e].astype(np.int32)
            rv = C.data[s:e].astype(np.float64)
            for sign in (1.0, -1.0):
                starts.append(nnz)
                idxs.append(ri)
                vals.append(sign * rv)
                nnz += ri.size
        self.h.addCols(
            2 * k,
            costs,
            lo,
            hi,
            nnz,
            np.asarray(starts, dtype=np.int32),
            np.concatenate(idxs) if idxs else np.zeros(0, np.int32),
            np.concatenate(vals) if vals else np.zeros(0),
        )
        base = self.active.size
        self.active = np.concatenate([self.active, cols])
        self.pos[cols] = base + np.arange(k)

    def remove_columns(self, cols: np.ndarray) -> None:
        """Take flat μ columns out of the model (their μ becomes 0; rows keep their entries in the store)."""
        cols = np.asarray(cols, dtype=np.int64).ravel()
        if cols.size == 0:
            return
        ks = self.pos[cols]
        if np.any(ks < 0):
            raise InputError("remove_columns: a column is not in the working set")
        model = np.sort(np.concatenate([1 + 2 * ks, 2 + 2 * ks])).astype(np.int32)
        self.h.deleteCols(int(model.size), model)
        keep = np.ones(self.active.size, dtype=bool)
        keep[ks] = False
        self.pos[self.active] = -1
        self.active = self.active[keep]
        self.pos[self.active] = np.arange(self.active.size)
        self.mu[cols] = 0.0

    def set_bound(self, bound: np.ndarray | float) -> None:
        """Change the box B on |μ_j| (all columns; working columns updated in the model)."""
        self.bound = np.broadcast_to(np.asarray(bound, dtype=np.float64), (self.m,)).copy()
        k = self.active.size
        if k:
            idx = np.concatenate([1 + 2 * np.arange(k), 2 + 2 * np.arange(k)]).astype(np.int32)
            hi = np.concatenate([self.bound[self.active], self.bound[self.active]])
            self.h.changeColsBounds(int(idx.size), idx, np.zeros(idx.size), hi)

    # ------------------------------------------------------------------ solve
    def solve(self, time_limit: float | None = None) -> str:
        """Re-solve from the current basis. Returns "optimal" or "time_limit"."""
        # HiGHS compares time_limit with the run time accumulated over all runs of the instance
        limit = INF if time_limit is None else self.h.getRunTime() + max(float(time_limit), 1e-3)
        self.h.setOptionValue("time_limit", limit)
        self.h.run()
        st = self.h.getModelStatus()
        name = self.h.modelStatusToString(st)
        info = self.h.getInfo()
        self.simplex_iterations += int(info.simplex_iteration_count)
        if st == highspy.HighsModelStatus.kTimeLimit or st == highspy.HighsModelStatus.kIterationLimit:
            self.status = "time_limit"  # keep the last optimal point (mu, nu, alpha) as it was
            return self.status
        elif st != highspy.HighsModelStatus.kOptimal:
            # HiGHS may stop with status "Unknown" when its tight tolerances are missed by a
            # hair (μ at the box ~1e3 gives absolute errors ~1e-8): accept a near-KKT point
            # (R is re-evaluated exactly from μ anyway), else retry once from scratch.
            if max(info.max_primal_infeasibility, info.max_dual_infeasibility) <= self.accept_tol:
                self.status = "optimal"
            elif not getattr(self, "_retried", False):
                self._retried = True
                self.h.clearSolver()
                try:
                    return self.solve(time_limit)
                finally:
                    self._retried = False
            else:
                raise RuntimeError(
                    f"HiGHS failed on the MRC LP: status {name!r}, infeasibilities "
                    f"{info.max_primal_infeasibility:.2g} / {info.max_dual_infeasibility:.2g}"
                )
        else:
            self.status = "optimal"
        sol = self.h.getSolution()
        x = np.asarray(sol.col_value, dtype=np.float64)
        d = np.asarray(sol.col_dual, dtype=np.float64)
        self._x, self._d = x, d
        self.nu = float(x[0])
        self.mu = np.zeros(self.m)
        if self.active.size:
            self.mu[self.active] = x[1::2] - x[2::2]
        self.alpha = -np.asarray(sol.row_dual, dtype=np.float64)
        self.objective = float(info.objective_function_value)
        return self.status

    # ------------------------------------------------------------- read-outs
    def penalty(self, mu: np.ndarray) -> float:
        """−(τ−λ)ᵀμ⁺ + (τ+λ)ᵀμ⁻ = −τᵀμ + λᵀ|μ| at a flat μ."""
        mu = np.asarray(mu, dtype=np.float64).ravel()
        return float(-self.lower @ np.maximum(mu, 0.0) + self.upper @ np.maximum(-mu, 0.0))

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
        """Σ_j B_j·|d_j| over μ± sitting at their upper bound B with reduced cost d_j < −dtol.

        A variable at B with a (significantly) negative reduced cost is held there by the box:
        every optimum of the boxed LP has it at B, so the box binds. Reduced costs within
        ``dtol`` (above the solver's dual tolerance) are numerical noise of degenerate
        optima (e.g. the free directions of λ = 0 problems) and are ignored.
        """
        k = self.active.size
        if k == 0 or self._x.size != 1 + 2 * k:
            return 0.0
        x, d = self._x[1:], self._d[1:]
        B = np.repeat(self.bound[self.active], 2)
        at = (x >= B * (1.0 - 1e-9)) & (d < -dtol)
        return float(np.sum(B[at] * -d[at]))


class FirstOrderOracle:
    """Exact separation for first-order features: max over the whole domain, per feature.

    For a label subset C, max_x Σ_{y∈C} Φ(x, y)ᵀμ = Σ_i max_{v ∈ vertices(i)} vᵀ s_C[block i],
    s_C = Σ_{y∈C} μ[y] (one-hot: the best level; numeric on [lo, hi]: max(lo·c, hi·c)).
    ``most_violated`` returns, for every C, the maximizing row with its value
    gᵀμ − b = (max_x Σ_{y∈C} Φ(x,y)ᵀμ − 1)/|C| + 1. Only the blocks in ``active`` are
    looked at (μ is zero elsewhere during column generation, so the value is the same);
    rows then carry entries for those blocks only.

    Parameters
    ----------
    fmap : FeatureMap
    n_classes : int
    """

    def __init__(self, fmap: FeatureMap, n_classes: int):
        self.fmap = fmap
        self.K = int(n_classes)
        self.D = fmap.dim
        self.subsets = label_subsets(self.K)
        self.sizes = np.array([len(c) for c in self.subsets], dtype=np.float64)
        self.member = np.zeros((len(self.subsets), self.K))
        for k, c in enumerate(self.subsets):
            self.member[k, list(c)] = 1.0
        self.set_active(None)

    def set_active(self, blocks: np.ndarray | None) -> None:
        """Restrict the oracle to a set of block indices (None: all blocks)."""
        fm = self.fmap
        if blocks is None:
            blocks = np.arange(fm.n_blocks)
        blocks = np.sort(np.asarray(blocks, dtype=np.int64))
        self.active_blocks = blocks
        nv = np.array([fm.blocks[i].n_vertices for i in blocks], dtype=np.int64)
        if blocks.size:
            first = fm.vertex_start[blocks]
            vid = np.concatenate([np.arange(f, f + k) for f, k in zip(first, nv)])
        else:
            vid = np.zeros(0, dtype=np.int64)
        self._vid = vid
        self._vcol = fm.vertex_col[vid]
        self._vval = fm.vertex_val[vid]
        self._vstart = np.concatenate([[0], np.cumsum(nv)[:-1]]).astype(np.int64) if blocks.size else np.zeros(0, np.int64)
        self._vcount = nv

    def separate(self, mu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per label subset C: max_x Σ_{y∈C} Φ(x,y)ᵀμ and the maximizing vertex of each active block.

        Returns
        -------
        values : ndarray, shape (n_subsets,)
        choice : ndarray of int, shape (n_subsets, n_active_blocks)
            Global vertex ids (indices into ``fmap.vertex_col``).
        """
        mu = np.asarray(mu, dtype=np.float64).reshape(self.K, self.D)
        nC = len(self.subsets)
        if self._vid.size == 0:
            return np.zeros(nC), np.zeros((nC, 0), dtype=np.int64)
        S = self.member @ mu  # (nC, D)
        vv = S[:, self._vcol] * self._vval[None, :]  # (nC, V)
        mx = np.maximum.reduceat(vv, self._vstart, axis=1)  # (nC, nb)
        hit = vv >= np.repeat(mx, self._vcount, axis=1)
        pos = np.where(hit, np.arange(vv.shape[1])[None, :], vv.shape[1])
        first = np.minimum.reduceat(pos, self._vstart, axis=1)
        return mx.sum(axis=1), self._vid[first]

    def cut_for(self, k: int, vertices: np.ndarray, value: float) -> Cut:
        """The row of label subset k at the given vertices (one per active block)."""
        c = self.subsets[k]
        size = len(c)
        cols = self.fmap.vertex_col[vertices]
        vals = self.fmap.vertex_val[vertices] / size
        idx = np.concatenate([y * self.D + cols for y in c])
        val = np.tile(vals, size)
        b = 1.0 / size - 1.0
        return Cut((idx, val), b, (value - 1.0) / size + 1.0, tuple(c))

    def most_violated(self, mu: np.ndarray) -> list[Cut]:
        values, choice = self.separate(mu)
        return [self.cut_for(k, choice[k], values[k]) for k in range(len(self.subsets))]

    def phi(self, mu: np.ndarray) -> float:
        """φ(μ) = max_{x, C} (Σ_{y∈C} Φ(x,y)ᵀμ − 1)/|C| over the active blocks."""
        values, _ = self.separate(mu)
        return float(np.max((values - 1.0) / self.sizes))

    def covering_cuts(self) -> list[Cut]:
        """Rows that touch every vertex of every active block: for each C and t, x_i = vertex min(t, n_i − 1)."""
        out = []
        for t in range(int(self._vcount.max()) if self._vid.size else 1):
            verts = self._vid[self._vstart + np.minimum(t, self._vcount - 1)] if self._vid.size else self._vid
            for k in range(len(self.subsets)):
                out.append(self.cut_for(k, verts, np.nan))
        return out


@dataclass
class RowGenerationResult:
    """What :func:`generate_rows` did.

    Attributes
    ----------
    lower : list of float
        LP value of each round (non-decreasing: rows are only added).
    upper : list of float
        Exact R(μ) of each round's μ (μ is feasible for all rows once ν = φ(μ) + 1).
    converged : bool
        No row violated beyond the tolerance (False after a time limit).
    rows_added : int
    """

    lower: list[float] = field(default_factory=list)
    upper: list[float] = field(default_factory=list)
    converged: bool = False
    rows_added: int = 0
    phi: float = float("nan")


def generate_rows(
    lp: MinimaxLP,
    oracle: RowOracle,
    tol: float = 1e-9,
    max_rounds: int = 100_000,
    deadline: float | None = None,
    callback: Callable[[dict], None] | None = None,
) -> RowGenerationResult:
    """Row generation: solve, ask the oracle for the most violated rows, add them, repeat.

    Stops when no proposed row has gᵀμ − b > ν + tol·max(1, |ν|) (or every such row is
    already in the model: violated only within the LP solver's tolerance), at
    ``max_rounds``, or at ``deadline`` (a ``time.perf_counter()`` value).

    Returns
    -------
    RowGenerationResult
    """
    res = RowGenerationResult()
    for _ in range(max_rounds):
        remaining = None if deadline is None else max(0.0, deadline - time.perf_counter())
        status = lp.solve(time_limit=remaining)
        if status != "optimal":
            return res
        cuts = oracle.most_violated(lp.mu)
        top = max(float(c[2]) for c in cuts)
        res.lower.append(lp.objective)
        res.upper.append(lp.penalty(lp.mu) + top)
        res.phi = top - 1.0
        if callback is not None:
            callback({"stage": "rows", "lower": lp.objective, "upper": res.upper[-1], "rows": lp.n_rows})
        thr = lp.nu + tol * max(1.0, abs(lp.nu))
        new = [c for c in cuts if float(c[2]) > thr]
        if not new:
            res.converged = True
            return res
        added = lp.add_rows(new)
        res.rows_added += added
        if added == 0:
            res.converged = True
            return res
        if deadline is not None and time.perf_counter() > deadline:
            return res
    return res


def solve_boxed(
    lp: MinimaxLP,
    oracle: RowOracle,
    tol: float = 1e-9,
    grow: float = 100.0,
    max_grow: int = 2,
    deadline: float | None = None,
    callback: Callable[[dict], None] | None = None,
) -> RowGenerationResult:
    """Row generation, then check the box |μ| ≤ B is slack; enlarge it (×``grow``) while it binds.

    Raises
    ------
    InputError
        When the box still binds after ``max_grow`` enlargements: no distribution matches
        τ within λ (the statistics are inconsistent), so the minimax problem is unbounded.
    """
    total = RowGenerationResult()
    for attempt in range(max_grow + 1):
        res = generate_rows(lp, oracle, tol=tol, deadline=deadline, callback=callback)
        total.lower += res.lower
        total.upper += res.upper
        total.rows_added += res.rows_added
        total.converged = res.converged
        total.phi = res.phi
        if not res.converged:
            return total
        gap = lp.box_gap()
        if gap <= tol * max(1.0, abs(lp.objective)):
            return total
        if attempt < max_grow:
            lp.set_bound(lp.bound * grow)
    raise InputError(
        f"no distribution matches the statistics within lambda: the MRC problem is unbounded "
        f"(box |mu| <= {float(lp.bound.max()):g} still binds by {gap:.3g}); the released tables are inconsistent"
    )


# --------------------------------------------------------------------------------------
# Whole-problem drivers
# --------------------------------------------------------------------------------------
@dataclass
class MRCSolution:
    """Output of an MRC solve on arrays.

    Attributes
    ----------
    mu : ndarray (K, D)
        Coefficients after the empty-cell post-processing (see :func:`fix_empty_cells`).
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


def column_bounds(fmap: FeatureMap, n_classes: int, bound: float) -> np.ndarray:
    """Box B_j per flat μ column: ``bound`` for one-hot columns, bound/max(|lo|, |hi|) numeric."""
    per = np.full(fmap.dim, float(bound))
    for b in fmap.blocks:
        if b.kind == "numeric":
            per[b.offset] = float(bound) / max(abs(b.lo), abs(b.hi), 1e-12)
    return np.tile(per, n_classes)


def fix_empty_cells(fmap: FeatureMap, mu: np.ndarray, tau: np.ndarray, lam: np.ndarray, bound: np.ndarray, blocks: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Give empty one-hot cells (τ + λ = 0) a definite coefficient without changing R(μ).

    Such a column costs nothing in the objective and lowering it only relaxes rows, so the
    LP leaves it anywhere below some value. Two cases (blocks in ``blocks`` only, all if
    None):

    - level a of block i is empty for every label ("unseen level"): μ[y, i, a] = c_i for
      all y, c_i = min_C max_{a' seen} mean_{y∈C} μ[y, i, a'] — the largest label-neutral
      constant that keeps every row with x_i = a dominated by a row with a seen level;
    - empty for some labels only: μ[y, i, a] = −B (label y is impossible there: every
      distribution in the uncertainty set gives it probability 0, so ruling it out can only
      lower the error under each of them).

    Neither changes φ(μ) (rows through the cell stay dominated) nor the objective.

    Returns
    -------
    mu : ndarray (K, D)
    impossible : ndarray of bool (K, D)
    """
    K, D = mu.shape
    mu = mu.copy()
    empty = np.zeros((K, D), dtype=bool)
    B = np.asarray(bound, dtype=np.float64).reshape(K, D)
    subsets = label_subsets(K)
    ids = range(fmap.n_blocks) if blocks is None else [int(i) for i in blocks]
    for i in ids:
        blk = fmap.blocks[i]
        if blk.kind != "onehot":
            continue
        sl = blk.slice
        e = (tau[:, sl] + lam[:, sl]) <= 0.0
        if not e.any():
            continue
        empty[:, sl] = e
        part = e & ~e.all(axis=0, keepdims=True)
        m = mu[:, sl]
        m[part] = -B[:, sl][part]
        unseen = e.all(axis=0)
        seen = ~unseen
        if unseen.any() and seen.any():
            c = min(float(np.max(m[list(C)][:, seen].mean(axis=0))) for C in subsets)
            m[:, unseen] = c
        mu[:, sl] = m
    return mu, empty


def _block_flat_cols(fmap: FeatureMap, K: int, blocks: np.ndarray) -> np.ndarray:
    """Flat μ indices (y·D + column) of the given blocks, label-major."""
    D = fmap.dim
    if len(blocks) == 0:
        return np.zeros(0, dtype=np.int64)
    cols = np.concatenate([np.arange(fmap.blocks[int(i)].offset, fmap.blocks[int(i)].offset + fmap.blocks[int(i)].size) for i in blocks])
    return (np.arange(K)[:, None] * D + cols[None, :]).ravel()


def _highs_status_error(h: highspy.Highs) -> str:
    return h.modelStatusToString(h.getModelStatus())


class CompactModel:
    """LP (13) for first-order features in exact epigraph form, on one HiGHS model.

    Because max_x Σ_{y∈C} Φ(x,y)ᵀμ = Σ_i max_{v∈vertices(i)} vᵀ s_C[i] separates over the
    features, the exponentially many rows (x, C) are equivalent to, per label subset C and
    feature i, a variable t_{C,i} with

        t_{C,i} ≥ Σ_{y∈C} v_a·μ[y, i, a]     for every vertex a of feature i,
        Σ_i t_{C,i} − |C|·ν ≤ 1 − |C|,

    i.e. (Σ_{y∈C}Φ(x,y)ᵀμ − 1)/|C| + 1 ≤ ν for all x at once: Σ_C (2^K−1)·(Σ_i n_vertices_i)
    rows instead of row generation. The dual of the epigraph row (C, i, a) is the mass the
    worst-case distribution puts on rows of subset C with x_i = a; the dual α_C of the sum
    row is that subset's total per-label mass W_C (Σ_C |C|·W_C = 1).

    Features enter and leave in place (columns μ±, t and their rows added or deleted), so
    each re-solve starts from the previous basis. No box is needed: the LP is bounded
    exactly when some distribution matches τ within λ.

    Parameters
    ----------
    fmap : FeatureMap
    tau, lam : ndarray (K, D)
    subsets : list of label subsets C
    feas_tol : float
        HiGHS primal/dual feasibility tolerance.
    lp_solver : {"simplex", "ipm", "choose"}
        HiGHS algorithm ("ipm" runs crossover to a basic solution).
    """

    def __init__(self, fmap: FeatureMap, tau: np.ndarray, lam: np.ndarray, subsets: Sequence[tuple[int, ...]], feas_tol: float = 1e-8, lp_solver: str = "simplex"):
        self.fmap = fmap
        self.tau = np.asarray(tau, dtype=np.float64)
        self.lam = np.asarray(lam, dtype=np.float64)
        self.K, self.D = self.tau.shape
        self.subsets = list(subsets)
        self.nC = len(self.subsets)
        self.csize = np.array([len(c) for c in self.subsets], dtype=np.float64)
        self.lower = (self.tau - self.lam).ravel()
        self.upper = (self.tau + self.lam).ravel()
        h = new_highs()
        h.setOptionValue("solver", lp_solver)
        h.setOptionValue("primal_feasibility_tolerance", feas_tol)
        h.setOptionValue("dual_feasibility_tolerance", feas_tol)
        if lp_solver == "simplex":
            h.setOptionValue("presolve", "off")
        h.addCol(1.0, -INF, INF, 0, np.zeros(0, np.int32), np.zeros(0))
        nC = self.nC
        h.addRows(nC, np.full(nC, -INF), 1.0 - self.csize, nC, np.arange(nC, dtype=np.int32), np.zeros(nC, np.int32), -self.csize)
        self.h = h
        # bookkeeping of model columns / rows: owner block (-1: ν or sum rows), kind, reference
        self.col_block = np.array([-1], dtype=np.int64)
        self.col_kind = np.array([0], dtype=np.int8)  # 0 ν, 1 μ+, 2 μ−, 3 t
        self.col_ref = np.array([0], dtype=np.int64)  # flat μ index (μ±) or subset index (t)
        self.row_block = np.full(nC, -1, dtype=np.int64)
        self.in_model = np.zeros(fmap.n_blocks, dtype=bool)
        self.oracle = FirstOrderOracle(fmap, self.K)
        self.oracle.set_active(np.zeros(0, np.int64))
        self.mu = np.zeros(self.K * self.D)
        self.nu = np.nan
        self.W = np.zeros(nC)
        self.lp_value = np.nan
        self.value = np.nan
        self.phi = np.nan
        self.lower_hist: list[float] = []
        self.upper_hist: list[float] = []
        self.simplex_iterations = 0
        self.status = "unsolved"
        self._x = np.zeros(1)
        self._d = np.zeros(1)

    @property
    def active(self) -> np.ndarray:
        return np.flatnonzero(self.in_model)

    @property
    def n_rows(self) -> int:
        return int(self.row_block.size)

    @property
    def n_cols(self) -> int:
        return int(self.col_block.size)

    def add_blocks(self, blocks: np.ndarray, W: np.ndarray | None = None, splits: dict | None = None) -> None:
        """Bring features into the model at μ = 0, t = 0 (the current point stays feasible)."""
        blocks = np.unique(np.asarray(blocks, dtype=np.int64))
        blocks = blocks[~self.in_model[blocks]]
        if blocks.size == 0:
            return
        fm, K, D, nC = self.fmap, self.K, self.D, self.nC
        flat = _block_flat_cols(fm, K, blocks)
        n = flat.size
        base = self.n_cols
        zeros_i = np.zeros(n + 1, dtype=np.int32)
        # μ+ then μ− (no entries yet)
        self.h.addCols(n, -self.lower[flat], np.zeros(n), np.full(n, INF), 0, zeros_i[:n], np.zeros(0, np.int32), np.zeros(0))
        self.h.addCols(n, self.upper[flat], np.zeros(n), np.full(n, INF), 0, zeros_i[:n], np.zeros(0, np.int32), np.zeros(0))
        pos_p = np.full(K * D, -1, dtype=np.int64)
        pos_p[flat] = base + np.arange(n)
        # t_{C,i}: one entry each, in sum row C
        nb = blocks.size
        nt = nb * nC
        t_base = base + 2 * n
        self.h.addCols(
            nt, np.zeros(nt), np.full(nt, -INF), np.full(nt, INF), nt,
            np.arange(nt, dtype=np.int32), np.tile(np.arange(nC, dtype=np.int32), nb), np.ones(nt),
        )
        blk_of_flat = fm.block_of_column[flat % D]
        self.col_block = np.concatenate([self.col_block, blk_of_flat, blk_of_flat, np.repeat(blocks, nC)])
        self.col_kind = np.concatenate([self.col_kind, np.full(n, 1, np.int8), np.full(n, 2, np.int8), np.full(nt, 3, np.int8)])
        self.col_ref = np.concatenate([self.col_ref, flat, flat, np.tile(np.arange(nC), nb)])
        # epigraph rows, grouped by number of vertices
        nv_all = np.array([fm.blocks[int(i)].n_vertices for i in blocks], dtype=np.int64)
        rr, cc, vv = [], [], []
        row_owner = []
        r0 = 0
        for nv in np.unique(nv_all):
            sel = np.flatnonzero(nv_all == nv)
            ids = blocks[sel]
            vid = fm.vertex_start[ids][:, None] + np.arange(nv)[None, :]  # (g, nv)
            vcol = fm.vertex_col[vid]
            vval = fm.vertex_val[vid]
            g = ids.size
            rows_g = r0 + (np.arange(g)[:, None, None] * nC + np.arange(nC)[None, :, None]) * nv + np.arange(nv)[None, None, :]  # (g, nC, nv)
            for c, C in enumerate(self.subsets):
                rows_c = rows_g[:, c, :]  # (g, nv)
                for y in C:
                    pc = pos_p[y * D + vcol]
                    rr += [rows_c.ravel(), rows_c.ravel()]
                    cc += [pc.ravel(), (pc + n).ravel()]
                    vv += [vval.ravel(), -vval.ravel()]
                tcol = t_base + sel * nC + c  # (g,)
                rr.append(rows_c.ravel())
                cc.append(np.repeat(tcol, nv))
                vv.append(np.full(g * nv, -1.0))
            row_owner.append(np.repeat(ids, nC * nv))
            r0 += g * nC * nv
        R = sp.csr_array((np.concatenate(vv), (np.concatenate(rr), np.concatenate(cc))), shape=(r0, self.n_cols))
        R.eliminate_zeros()
        R.sort_indices()
        self.h.addRows(r0, np.full(r0, -INF), np.zeros(r0), int(R.nnz), R.indptr[:-1].astype(np.int32), R.indices.astype(np.int32), R.data)
        self.row_block = np.concatenate([self.row_block, np.concatenate(row_owner)])
        self.in_model[blocks] = True
        self.oracle.set_active(self.active)

    def remove_blocks(self, blocks: np.ndarray) -> None:
        """Take features (with μ = 0) out of the model: their columns and epigraph rows go."""
        blocks = np.unique(np.asarray(blocks, dtype=np.int64))
        blocks = blocks[self.in_model[blocks]]
        if blocks.size == 0:
            return
        drop_r = np.flatnonzero(np.isin(self.row_block, blocks)).astype(np.int32)
        drop_c = np.flatnonzero(np.isin(self.col_block, blocks)).astype(np.int32)
        self.h.deleteRows(int(drop_r.size), drop_r)
        self.h.deleteCols(int(drop_c.size), drop_c)
        keep_c = np.ones(self.n_cols, dtype=bool)
        keep_c[drop_c] = False
        keep_r = np.ones(self.n_rows, dtype=bool)
        keep_r[drop_r] = False
        self.col_block, self.col_kind, self.col_ref = self.col_block[keep_c], self.col_kind[keep_c], self.col_ref[keep_c]
        self.row_block = self.row_block[keep_r]
        self.in_model[blocks] = False
        self.mu[_block_flat_cols(self.fmap, self.K, blocks)] = 0.0
        self.oracle.set_active(self.active)

    def solve(self, deadline: float | None = None, tol: float = 1e-9, callback: Callable[[dict], None] | None = None) -> str:
        """Solve from the current basis; returns "optimal" or "time_limit"."""
        remaining = None if deadline is None else max(1e-3, deadline - time.perf_counter())
        self.h.setOptionValue("time_limit", INF if remaining is None else self.h.getRunTime() + remaining)
        self.h.run()
        st = self.h.getModelStatus()
        info = self.h.getInfo()
        self.simplex_iterations += int(info.simplex_iteration_count)
        S = highspy.HighsModelStatus
        if st in (S.kTimeLimit, S.kIterationLimit):
            self.status = "time_limit"
            return self.status
        if st in (S.kUnbounded, S.kUnboundedOrInfeasible):
            raise InputError(
                "no distribution matches the statistics within lambda: the MRC problem is unbounded "
                "(the released tables are inconsistent; widen lambda)"
            )
        if st != S.kOptimal:
            if max(info.max_primal_infeasibility, info.max_dual_infeasibility) > 1e-6:
                self.h.clearSolver()
                self.h.run()
                st = self.h.getModelStatus()
                info = self.h.getInfo()
                if st != S.kOptimal and max(info.max_primal_infeasibility, info.max_dual_infeasibility) > 1e-6:
                    raise RuntimeError(f"HiGHS failed on the MRC LP: status {_highs_status_error(self.h)!r}")
        self.status = "optimal"
        sol = self.h.getSolution()
        x = np.asarray(sol.col_value, dtype=np.float64)
        d = np.asarray(sol.col_dual, dtype=np.float64)
        rd = np.asarray(sol.row_dual, dtype=np.float64)
        self._x, self._d = x, d
        self.nu = float(x[0])
        mu = np.zeros(self.K * self.D)
        pl = self.col_kind == 1
        mi = self.col_kind == 2
        np.add.at(mu, self.col_ref[pl], x[pl])
        np.add.at(mu, self.col_ref[mi], -x[mi])
        self.mu = mu
        self.W = np.clip(-rd[: self.nC], 0.0, None)
        self.lp_value = float(info.objective_function_value)
        top = self.oracle.most_violated(mu)
        vmax = max(float(c.violation) for c in top)
        self.phi = vmax - 1.0
        self.value = float(-self.lower @ np.maximum(mu, 0.0) + self.upper @ np.maximum(-mu, 0.0) + vmax)
        self.lower_hist.append(self.lp_value)
        self.upper_hist.append(self.value)
        if callback is not None:
            callback({"stage": "lp", "lower": self.lp_value, "upper": self.value, "rows": self.n_rows})
        return self.status

    def block_violation(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For the features in the model: (blocks, max_j v_j, max_j |μ_j|), v = |Fᵀα − τ| − λ.

        Fᵀα on a μ⁺ column is its reduced cost plus (τ − λ) (HiGHS: d = c − Aᵀy).
        """
        blocks = self.active
        pl = np.flatnonzero(self.col_kind == 1)
        if blocks.size == 0 or self._d.size != self.n_cols:
            return blocks, np.zeros(blocks.size), np.zeros(blocks.size)
        j = self.col_ref[pl]
        fa = self._d[pl] + self.lower[j]
        tau, lam = self.tau.ravel()[j], self.lam.ravel()[j]
        v = np.abs(fa - tau) - lam
        owner = self.col_block[pl]
        vmax = np.full(self.fmap.n_blocks, -np.inf)
        np.maximum.at(vmax, owner, v)
        mmax = np.zeros(self.fmap.n_blocks)
        np.maximum.at(mmax, owner, np.abs(self.mu[j]))
        return blocks, vmax[blocks], mmax[blocks]

    def bound_flat(self, bound: float) -> np.ndarray:
        return column_bounds(self.fmap, self.K, bound)


class RowModel:
    """LP (13) by row generation (:class:`MinimaxLP` + :class:`FirstOrderOracle`), same interface
    as :class:`CompactModel`. Rows built while a feature was out of the model get, when it
    enters, the coefficients of the pricing split (a convex combination of valid rows)."""

    def __init__(self, fmap: FeatureMap, tau: np.ndarray, lam: np.ndarray, subsets: Sequence[tuple[int, ...]], bound: float = 1e3, tol: float = 1e-9):
        self.fmap = fmap
        self.tau, self.lam = tau, lam
        self.K, self.D = tau.shape
        self.subsets = list(subsets)
        self.sub_index = {c: k for k, c in enumerate(self.subsets)}
        self.B0 = column_bounds(fmap, self.K, bound)
        self.lp = MinimaxLP((tau - lam).ravel(), (tau + lam).ravel(), self.B0)
        self.oracle = FirstOrderOracle(fmap, self.K)
        self.oracle.set_active(np.zeros(0, np.int64))
        self.in_model = np.zeros(fmap.n_blocks, dtype=bool)
        self.tol = tol
        self.lower_hist: list[float] = []
        self.upper_hist: list[float] = []
        self._started = False
        self.value = np.nan
        self.phi = np.nan
        self.status = "unsolved"
        self.W = np.zeros(len(self.subsets))
        self._pricer: SplitPricer | None = None

    @property
    def active(self) -> np.ndarray:
        return np.flatnonzero(self.in_model)

    @property
    def mu(self) -> np.ndarray:
        return self.lp.mu

    @property
    def n_rows(self) -> int:
        return self.lp.n_rows

    @property
    def simplex_iterations(self) -> int:
        return self.lp.simplex_iterations

    def add_blocks(self, blocks: np.ndarray, W: np.ndarray | None = None, splits: dict | None = None) -> None:
        blocks = np.unique(np.asarray(blocks, dtype=np.int64))
        blocks = blocks[~self.in_model[blocks]]
        if blocks.size == 0:
            return
        K, D, lp = self.K, self.D, self.lp
        new_cols = _block_flat_cols(self.fmap, K, blocks)
        fill = None
        if lp.n_rows:
            if self._pricer is None:
                self._pricer = SplitPricer(self.fmap, self.tau, self.lam, self.subsets)
            Wv = self.W if W is None else W
            F = lp.row_matrix()
            colpos = {int(c): t for t, c in enumerate(new_cols)}
            fr, fc, fv = [], [], []
            for i in blocks:
                blk = self.fmap.blocks[int(i)]
                bcols = _block_flat_cols(self.fmap, K, np.array([i]))
                has = np.asarray((F[:, bcols] != 0).sum(axis=1)).ravel() > 0
                q = (splits or {}).get(int(i))
                if q is None:
                    q = self._pricer.pooled_split(int(i), Wv)
                g = int(self._pricer.group_of[i])
                Vi = self._pricer._V[g][int(self._pricer.index_in_group[i])]
                val = q @ Vi  # (nC, size)
                for r in np.flatnonzero(~has):
                    lab = lp.labels[r]
                    c = self.sub_index[lab]
                    for y in lab:
                        for s_ in range(blk.size):
                            fr.append(r)
                            fc.append(colpos[y * D + blk.offset + s_])
                            fv.append(val[c, s_] / len(lab))
            fill = sp.csc_array((np.asarray(fv, dtype=np.float64), (np.asarray(fr, dtype=np.int64), np.asarray(fc, dtype=np.int64))), shape=(lp.n_rows, new_cols.size))
        lp.add_columns(new_cols, fill)
        self.in_model[blocks] = True
        self.oracle.set_active(self.active)
        if not self._started:
            lp.add_rows(self.oracle.covering_cuts())
            self._started = True

    def remove_blocks(self, blocks: np.ndarray) -> None:
        blocks = np.unique(np.asarray(blocks, dtype=np.int64))
        blocks = blocks[self.in_model[blocks]]
        if blocks.size == 0:
            return
        self.lp.remove_columns(_block_flat_cols(self.fmap, self.K, blocks))
        self.in_model[blocks] = False
        self.oracle.set_active(self.active)

    def solve(self, deadline: float | None = None, tol: float | None = None, callback: Callable[[dict], None] | None = None) -> str:
        if not self._started:
            self.lp.add_rows(self.oracle.covering_cuts())
            self._started = True
        res = solve_boxed(self.lp, self.oracle, tol=self.tol if tol is None else tol, deadline=deadline, callback=callback)
        self.lower_hist += res.lower
        self.upper_hist += res.upper
        if not res.upper:
            self.status = "time_limit"
            return self.status
        self.value = res.upper[-1]
        self.phi = res.phi
        self.lp_value = res.lower[-1]
        self.status = "optimal" if res.converged else "time_limit"
        alpha = np.clip(self.lp.alpha, 0.0, None)
        if alpha.sum() > 0:
            alpha = alpha / alpha.sum()
        W = np.zeros(len(self.subsets))
        for r, lab in enumerate(self.lp.labels):
            if alpha[r] > 0:
                W[self.sub_index[lab]] += alpha[r] / len(lab)
        self.W = W
        return self.status

    def block_violation(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        blocks = self.active
        if blocks.size == 0:
            return blocks, np.zeros(0), np.zeros(0)
        cols = _block_flat_cols(self.fmap, self.K, blocks)
        v = self.lp.dual_violation(cols)
        owner = self.fmap.block_of_column[cols % self.D]
        vmax = np.full(self.fmap.n_blocks, -np.inf)
        np.maximum.at(vmax, owner, v)
        mmax = np.zeros(self.fmap.n_blocks)
        np.maximum.at(mmax, owner, np.abs(self.lp.mu[cols]))
        return blocks, vmax[blocks], mmax[blocks]

    def bound_flat(self, bound: float) -> np.ndarray:
        return self.lp.bound.copy()


# --------------------------------------------------------------------------------------
# Pricing of features outside the model
# --------------------------------------------------------------------------------------
class SplitPricer:
    """Dual violation of features outside the model (Algorithm 2's v, over the whole domain).

    The LP dual is a distribution over rows (x, C). A feature i outside the model has
    μ_i = 0, so every level of x_i is equally tight: the dual may spread each row's mass
    over the vertices of feature i freely. Rows of the same label subset C pool: with W_C
    their per-label mass and u_{C,a} ≥ 0, Σ_a u_{C,a} = W_C the part put on vertex a,

        (Fᵀα)[y, i] = Σ_{C∋y} Σ_a u_{C,a} v_a        (v_a: Ψ_i at vertex a),

    and the violation of feature i is v_i = min_u max_{y, j∈i} |(Fᵀα)[y, j] − τ[y, j]| − λ[y, j].
    Given W the features are independent (splits combine as a product over features), so
    v_i ≤ ε for every outside feature means ONE dual α is ε-feasible for the full problem —
    Theorem 3's condition — and v_i ≤ 0 means the restricted optimum is the full optimum.

    ``heuristic`` gives an upper bound on v_i (vectorized): the pooled-conditional split
    q_C(a) ∝ Σ_{y∈C} τ[y, a] improved by a few multiplicative (IPF-style) sweeps toward the
    box; ``exact`` solves the min-max split LP for a batch of features (HiGHS). The split's
    q_{C,a} = u_{C,a}/W_C are also the coefficients old rows get when the feature enters
    (row-generation formulation).
    """

    def __init__(self, fmap: FeatureMap, tau: np.ndarray, lam: np.ndarray, subsets: Sequence[tuple[int, ...]], ipf_sweeps: int = 30):
        self.fmap = fmap
        self.tau = tau
        self.lam = lam
        self.K, self.D = tau.shape
        self.subsets = list(subsets)
        self.ipf_sweeps = int(ipf_sweeps)
        self.member = np.zeros((len(self.subsets), self.K))
        for k, c in enumerate(self.subsets):
            self.member[k, list(c)] = 1.0
        self.csize = self.member.sum(axis=1)
        groups: dict[tuple[str, int], list[int]] = {}
        for i, b in enumerate(fmap.blocks):
            groups.setdefault((b.kind, b.size), []).append(i)
        self.keys = list(groups)
        self.group_of = np.zeros(fmap.n_blocks, dtype=np.int64)
        self.index_in_group = np.zeros(fmap.n_blocks, dtype=np.int64)
        self._V, self._T, self._L = [], [], []
        for g, key in enumerate(self.keys):
            ids = np.asarray(groups[key], dtype=np.int64)
            self.group_of[ids] = g
            self.index_in_group[ids] = np.arange(ids.size)
            kind, size = key
            cols = np.stack([np.arange(fmap.blocks[i].offset, fmap.blocks[i].offset + size) for i in ids])
            if kind == "onehot":
                V = np.broadcast_to(np.eye(size), (ids.size, size, size))
            else:
                lo = np.array([fmap.blocks[i].lo for i in ids])
                hi = np.array([fmap.blocks[i].hi for i in ids])
                V = np.stack([lo, hi], axis=1)[:, :, None]
            self._V.append(np.ascontiguousarray(V))
            self._T.append(np.transpose(tau[:, cols], (1, 0, 2)))  # (nb, K, size)
            self._L.append(np.transpose(lam[:, cols], (1, 0, 2)))

    def _pooled(self, g: int, sel: np.ndarray, W: np.ndarray) -> np.ndarray:
        """Pooled-conditional split q (nb, nC, n_vertices)."""
        kind, size = self.keys[g]
        T = self._T[g][sel]
        if kind == "onehot":
            num = np.einsum("ck,bks->bcs", self.member, T)
            den = num.sum(axis=2, keepdims=True)
            return np.where(den > 0, num / np.where(den > 0, den, 1.0), 1.0 / size)
        V = self._V[g][sel]
        lo, hi = V[:, 0, 0], V[:, 1, 0]
        py = self.member.T @ W  # P_α(y)
        num = np.einsum("ck,bk->bc", self.member, T[:, :, 0])
        den = self.member @ py
        mean = np.where(den[None, :] > 0, num / np.where(den > 0, den, 1.0)[None, :], 0.5 * (lo + hi)[:, None])
        w_hi = np.clip((mean - lo[:, None]) / (hi - lo)[:, None], 0.0, 1.0)
        return np.stack([1.0 - w_hi, w_hi], axis=2)

    def _peeled(self, g: int, sel: np.ndarray, W: np.ndarray) -> np.ndarray:
        """Split built from the largest label subsets down: C takes (up to W_C) mass where all
        its labels still have target left, u_C(a) ∝ min_{y∈C} R[y, a], and R[y, a] −= u_C(a);
        singletons take their residual. Exact (zero violation at λ = 0) whenever every C
        finds enough common mass and the dual's label masses equal τ's."""
        T = self._T[g][sel]  # (nb, K, m)
        R = T.copy()
        nb, _, m = T.shape
        u = np.zeros((nb, len(self.subsets), m))
        for c in sorted(range(len(self.subsets)), key=lambda k: -self.csize[k]):
            if W[c] <= 0:
                continue
            C = list(self.subsets[c])
            cap = np.clip(R[:, C, :].min(axis=1), 0.0, None)  # (nb, m)
            tot = cap.sum(axis=1, keepdims=True)
            share = np.where(tot > 0, cap / np.where(tot > 0, tot, 1.0), 1.0 / m)
            u[:, c, :] = W[c] * share
            R[:, C, :] -= u[:, c, None, :]
        return u

    def _F(self, g: int, sel: np.ndarray, u: np.ndarray) -> np.ndarray:
        """(Fᵀα)[b, y, s] = Σ_{C∋y} Σ_a u[b, C, a]·V[b, a, s]."""
        if self.keys[g][0] == "onehot":  # V = identity
            return np.matmul(self.member.T[None, :, :], u)
        return np.einsum("ck,bca,bas->bks", self.member, u, self._V[g][sel])

    def _viol(self, g: int, sel: np.ndarray, u: np.ndarray) -> np.ndarray:
        v = np.abs(self._F(g, sel, u) - self._T[g][sel]) - self._L[g][sel]
        return v.reshape(v.shape[0], -1).max(axis=1)

    def _heuristic_group(self, g: int, sel: np.ndarray, W: np.ndarray, tol_stop: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """Pooled split, then multiplicative sweeps u_{C,a} ← u_{C,a}·(Π_{y∈C} r_{y,a})^{1/|C|}
        (r: ratio of the box-clipped to the current (Fᵀα)[y, a]) renormalized to Σ_a u_{C,a} = W_C,
        on the features still above ``tol_stop`` (each leaves as soon as it is below).
        Returns the best violation seen per feature and its split u (nb, nC, n_vertices)."""
        q = self._pooled(g, sel, W)
        u_all = W[None, :, None] * q
        v_all = self._viol(g, sel, u_all)
        kind, _ = self.keys[g]
        if kind == "onehot":
            u_p = self._peeled(g, sel, W)
            v_p = self._viol(g, sel, u_p)
            b = v_p < v_all
            u_all[b], v_all[b] = u_p[b], v_p[b]
        todo = np.flatnonzero(v_all > tol_stop)
        if kind != "onehot" or self.ipf_sweeps <= 0 or todo.size == 0:
            return v_all, u_all
        act = W > 0
        Ma = self.member[act]
        sz = Ma.sum(axis=1)
        T_all, L_all = self._T[g][sel], self._L[g][sel]
        lo_all, hi_all = np.maximum(T_all - L_all, 0.0), T_all + L_all
        u = u_all[todo]
        for _ in range(self.ipf_sweeps):
            F = np.matmul(self.member.T[None, :, :], u)  # (nb, K, m)
            target = np.clip(F, lo_all[todo], hi_all[todo])
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(F > 0, target / np.where(F > 0, F, 1.0), 1.0)
            ratio = np.where((F <= 0) & (target > 0), 2.0, ratio)
            logr = np.log(np.clip(ratio, 1e-12, 1e12))
            fac = np.exp(np.einsum("ck,bka->bca", Ma, logr) / sz[None, :, None])  # geometric mean over y ∈ C
            ua = u[:, act, :] * fac
            ua = np.where(ua.sum(axis=2, keepdims=True) > 0, ua, 1.0)
            ua *= (W[act] / ua.sum(axis=2))[:, :, None]
            u[:, act, :] = ua
            F = np.matmul(self.member.T[None, :, :], u)
            v = (np.abs(F - T_all[todo]) - L_all[todo]).reshape(todo.size, -1).max(axis=1)
            better = v < v_all[todo]
            v_all[todo[better]] = v[better]
            u_all[todo[better]] = u[better]
            keep = v > tol_stop
            if not keep.any():
                break
            todo, u = todo[keep], u[keep]
        return v_all, u_all
        sel = sel[todo]
        u = u_all[todo]
        best_v = v_all[todo]
        best_u = u.copy()
        T, L = self._T[g][sel], self._L[g][sel]
        lo_t, hi_t = np.maximum(T - L, 0.0), T + L
        act = W > 0
        Ma = self.member[act]
        sz = Ma.sum(axis=1)
        for _ in range(self.ipf_sweeps):
            F = self._F(g, sel, u)  # (nb, K, m)
            target = np.clip(F, lo_t, hi_t)
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(F > 0, target / np.where(F > 0, F, 1.0), 1.0)
            ratio = np.where((F <= 0) & (target > 0), 2.0, ratio)
            logr = np.log(np.clip(ratio, 1e-12, 1e12))  # (nb, K, m)
            fac = np.exp(np.einsum("ck,bka->bca", Ma, logr) / sz[None, :, None])  # geometric mean over y∈C
            ua = u[:, act, :] * fac
            ua = np.where(ua.sum(axis=2, keepdims=True) > 0, ua, 1.0)
            ua *= (W[act] / ua.sum(axis=2))[:, :, None]
            u[:, act, :] = ua
            v = self._viol(g, sel, u)
            better = v < best_v
            best_v = np.where(better, v, best_v)
            best_u[better] = u[better]
            if np.all(best_v <= tol_stop):
                break
        v_all[todo] = best_v
        u_all[todo] = best_u
        return v_all, u_all

    def heuristic(self, blocks: np.ndarray, W: np.ndarray, eps: float = 0.0) -> np.ndarray:
        """Upper bound on v_i for ``blocks`` (violation of a good explicit split).

        IPF sweeps run only on features the pooled split leaves above ``eps`` and stop once
        all of them are at or below it (only "≤ eps or not" matters to SELECT).
        """
        blocks = np.asarray(blocks, dtype=np.int64)
        out = np.empty(blocks.size)
        for g in range(len(self.keys)):
            mask = self.group_of[blocks] == g
            if mask.any():
                out[mask] = self._heuristic_group(g, self.index_in_group[blocks[mask]], W, tol_stop=eps)[0]
        return out

    def exact(self, blocks: np.ndarray, W: np.ndarray) -> tuple[np.ndarray, dict[int, np.ndarray]]:
        """min over splits of the max violation, one LP per batch (scipy/HiGHS).

        Returns
        -------
        v : ndarray (len(blocks),)
            The minimal violation, floored at 0 (0: satisfiable within λ).
        splits : dict block -> ndarray (nC, n_vertices)
            q_{C,a} = u_{C,a}/W_C (pooled conditional for subsets with W_C = 0).
        """
        from scipy.optimize import linprog

        blocks = np.asarray(blocks, dtype=np.int64)
        v_out = np.zeros(blocks.size)
        splits: dict[int, np.ndarray] = {}
        act = np.flatnonzero(W > 1e-15)
        nCa = act.size
        Wa = W[act]
        Ma = self.member[act]
        for g in range(len(self.keys)):
            mask = self.group_of[blocks] == g
            if not mask.any():
                continue
            ids = blocks[mask]
            sel = self.index_in_group[ids]
            nb = ids.size
            V, T, L = self._V[g][sel], self._T[g][sel], self._L[g][sel]
            nv, size = V.shape[1], V.shape[2]
            per = nCa * nv + 1
            nvar = nb * per
            base = np.arange(nb) * per
            uidx = base[:, None, None] + np.arange(nCa)[None, :, None] * nv + np.arange(nv)[None, None, :]
            er = np.repeat(np.arange(nb * nCa), nv)
            Aeq = sp.csr_array((np.ones(er.size), (er, uidx.ravel())), shape=(nb * nCa, nvar))
            beq = np.tile(Wa, nb)
            bb, yy, ss, cc, aa = np.meshgrid(np.arange(nb), np.arange(self.K), np.arange(size), np.arange(nCa), np.arange(nv), indexing="ij")
            coef = V[bb, aa, ss] * Ma[cc, yy]
            row = (bb * self.K + yy) * size + ss
            col = base[bb] + cc * nv + aa
            keep = coef != 0
            row, col, coef = row[keep], col[keep], coef[keep]
            nrow = nb * self.K * size
            trow = np.arange(nrow)
            tcol = base[trow // (self.K * size)] + per - 1
            A1 = sp.csr_array((np.concatenate([coef, -np.ones(nrow)]), (np.concatenate([row, trow]), np.concatenate([col, tcol]))), shape=(nrow, nvar))
            A2 = sp.csr_array((np.concatenate([-coef, -np.ones(nrow)]), (np.concatenate([row, trow]), np.concatenate([col, tcol]))), shape=(nrow, nvar))
            Aub = sp.vstack([A1, A2]).tocsr()
            bub = np.concatenate([(T + L).ravel(), -(T - L).ravel()])
            c = np.zeros(nvar)
            c[base + per - 1] = 1.0
            r = linprog(c, A_ub=Aub, b_ub=bub, A_eq=Aeq, b_eq=beq, bounds=(0, None), method="highs")
            if r.status != 0:
                raise RuntimeError(f"the split-pricing LP failed: {r.message}")
            x = r.x
            v_out[mask] = x[base + per - 1]
            q = self._pooled(g, sel, W)
            q[:, act, :] = x[uidx] / Wa[None, :, None]
            q = np.clip(q, 0.0, None)
            q /= np.maximum(q.sum(axis=2, keepdims=True), 1e-300)
            for k, i in enumerate(ids):
                splits[int(i)] = q[k]
        return v_out, splits

    def pooled_split(self, block: int, W: np.ndarray) -> np.ndarray:
        g = int(self.group_of[block])
        return self._pooled(g, np.array([self.index_in_group[block]]), W)[0]


def screening_scores(fmap: FeatureMap, tau: np.ndarray) -> np.ndarray:
    """Initial-set screening per feature: the largest total-variation distance between two
    classes' conditional distributions of the feature (one-hot), or the largest gap between
    class means relative to the range (numeric; class masses from the one-hot blocks)."""
    K = tau.shape[0]
    out = np.zeros(fmap.n_blocks)
    pairs = [(a, c) for a in range(K) for c in range(a + 1, K)]
    groups: dict[int, list[int]] = {}
    for i, b in enumerate(fmap.blocks):
        if b.kind == "onehot":
            groups.setdefault(b.size, []).append(i)
    prior = np.full(K, 1.0 / K)
    for size, ids in groups.items():
        ids_a = np.asarray(ids, dtype=np.int64)
        cols = np.array([fmap.blocks[i].offset for i in ids])[:, None] + np.arange(size)[None, :]
        T = tau[:, cols]  # (K, nb, size)
        pi = T.sum(axis=2, keepdims=True)
        cond = np.where(pi > 0, T / np.where(pi > 0, pi, 1.0), 0.0)
        out[ids_a] = np.max([0.5 * np.abs(cond[a] - cond[c]).sum(axis=1) for a, c in pairs], axis=0)
        prior = pi[:, 0, 0]
    for i, b in enumerate(fmap.blocks):
        if b.kind == "numeric":
            m = tau[:, b.offset] / np.maximum(prior, 1e-300)
            out[i] = (m.max() - m.min()) / (b.hi - b.lo)
    return out


# --------------------------------------------------------------------------------------
# Drivers
# --------------------------------------------------------------------------------------
FORMULATIONS = ("compact", "rows")


def _make_model(formulation: str, fmap: FeatureMap, tau: np.ndarray, lam: np.ndarray, bound: float, tol: float, lp_solver: str = "simplex"):
    subsets = label_subsets(tau.shape[0])
    if formulation == "compact":
        return CompactModel(fmap, tau, lam, subsets, lp_solver=lp_solver)
    if formulation == "rows":
        return RowModel(fmap, tau, lam, subsets, bound=bound, tol=tol)
    raise InputError(f"unknown MRC LP formulation {formulation!r} (expected one of {', '.join(FORMULATIONS)})")


def _finish(fmap: FeatureMap, model, tau: np.ndarray, lam: np.ndarray, bound: float, blocks: np.ndarray, empty_cells: str = "veto") -> tuple[np.ndarray, np.ndarray, float, float]:
    """Empty-cell post-processing on ``blocks`` and the exact R(μ), φ(μ) over the whole domain.

    ``empty_cells="veto"``: :func:`fix_empty_cells`; ``"keep"``: μ as the LP left it (the
    empty cells are still reported).
    """
    K, D = tau.shape
    mu = model.mu.reshape(K, D)
    if empty_cells == "veto":
        mu_fixed, empty = fix_empty_cells(fmap, mu, tau, lam, model.bound_flat(bound), blocks)
    elif empty_cells == "keep":
        mu_fixed = mu.copy()
        empty = np.zeros((K, D), dtype=bool)
        for i in blocks:
            b = fmap.blocks[int(i)]
            if b.kind == "onehot":
                empty[:, b.slice] = (tau[:, b.slice] + lam[:, b.slice]) <= 0.0
    else:
        raise InputError(f"unknown empty_cells {empty_cells!r} (expected 'veto' or 'keep')")
    oracle = FirstOrderOracle(fmap, K)
    nzb = np.zeros(fmap.n_blocks, dtype=bool)
    nzb[fmap.block_of_column[np.flatnonzero(np.any(mu_fixed != 0, axis=0))]] = True
    oracle.set_active(np.flatnonzero(nzb))
    phi = oracle.phi(mu_fixed.ravel())
    value = float(-tau.ravel() @ mu_fixed.ravel() + lam.ravel() @ np.abs(mu_fixed.ravel()) + phi + 1.0)
    if value > model.value + 1e-8 * max(1.0, abs(model.value)):
        # cannot happen at an optimum (see fix_empty_cells); keep the LP's μ if it does
        mu_fixed, empty = mu.copy(), np.zeros_like(empty)
        value, phi = float(model.value), float(model.phi)
    return mu_fixed, empty, phi, value


def solve_full(
    fmap: FeatureMap,
    tau: np.ndarray,
    lam: np.ndarray,
    tol: float = 1e-9,
    bound: float = 1e3,
    time_limit: float | None = None,
    callback: Callable[[dict], None] | None = None,
    formulation: str = "compact",
    lp_solver: str = "simplex",
    empty_cells: str = "veto",
) -> MRCSolution:
    """LP (13) with every feature in the model (no column generation).

    Parameters
    ----------
    fmap : FeatureMap
    tau, lam : ndarray, shape (K, D)
    tol : float
        Relative row-violation tolerance (row formulation).
    bound : float
        Box on |μ| (row formulation, enlarged while it binds) and the −B of impossible cells.
    time_limit : float, optional
        Seconds; on expiry the last LP point is returned with ``converged=False``.
    formulation : {"compact", "rows"}
        Exact epigraph LP (:class:`CompactModel`) or row generation (:class:`RowModel`).
    lp_solver : {"simplex", "ipm", "choose"}
        HiGHS algorithm for the compact formulation.
    empty_cells : {"veto", "keep"}
        Fix μ = −B on the empty cells of every feature (:func:`fix_empty_cells`) or leave
        the LP's value; R is the same.
    """
    t0 = time.perf_counter()
    deadline = None if time_limit is None else t0 + float(time_limit)
    K, D = tau.shape
    model = _make_model(formulation, fmap, tau, lam, bound, tol, lp_solver)
    model.add_blocks(np.arange(fmap.n_blocks))
    status = model.solve(deadline=deadline, callback=callback)
    if not model.upper_hist:
        raise RuntimeError(f"the MRC LP produced no solution within the time limit ({time_limit} s)")
    allb = np.arange(fmap.n_blocks)
    mu, empty, phi, value = _finish(fmap, model, tau, lam, bound, allb, empty_cells)
    nzb = np.zeros(fmap.n_blocks, dtype=bool)
    nzb[fmap.block_of_column[np.flatnonzero(np.any(np.abs(model.mu.reshape(K, D)) > 1e-12, axis=0))]] = True
    sel = np.flatnonzero(nzb)
    return MRCSolution(
        mu=mu, value=value, phi=phi, iterations=[value], lower=list(model.lower_hist), upper=list(model.upper_hist),
        selected=sel, converged=status == "optimal", n_rows=model.n_rows, impossible=empty, bound=float(bound),
        simplex_iterations=model.simplex_iterations, lp_columns=int(model.in_model.sum()),
        info={"seconds": time.perf_counter() - t0, "formulation": formulation},
    )


def solve_cg(
    fmap: FeatureMap,
    tau: np.ndarray,
    lam: np.ndarray,
    n_max: int = 100,
    eps: float = 1e-4,
    k_max: int = 10,
    tol: float = 1e-9,
    bound: float = 1e3,
    init: Sequence[int] | None = None,
    n_init: int | None = None,
    time_limit: float | None = None,
    callback: Callable[[dict], None] | None = None,
    formulation: str = "compact",
    exact_batch: int | None = None,
    empty_cells: str = "veto",
) -> MRCSolution:
    """Algorithm 1 of seed 000 with the SELECT of Algorithm 2; features = blocks of Φ.

    Iteration k solves the LP restricted to the working set J (warm-started from the
    previous basis), giving R^k; SELECT then drops the features of J whose dual constraints
    are all over-satisfied (v < 0, hence μ = 0 there) and adds the at most ``n_max`` outside
    features with the largest violation v_i > ``eps`` (:class:`SplitPricer`: the IPF bound
    filters, the exact split LP decides). It stops when nothing enters (``converged``) or
    after ``k_max`` iterations past the first (Algorithm 1's loop). R^k never increases (the
    previous point stays feasible: dropped features had μ = 0, entering ones start at 0);
    at ε = 0 the result is optimal for the whole problem, and in general
    R* ≤ R^k ≤ R* + ε‖μ*‖₁ (Theorem 3).

    Parameters
    ----------
    fmap : FeatureMap
    tau, lam : ndarray (K, D)
    n_max, eps, k_max : see above (seed 000 §4: 100, 1e-4, 10).
    init : block indices of the initial set; default: the ``n_init`` (default ``n_max``)
        best by :func:`screening_scores`.
    formulation : {"compact", "rows"}
    exact_batch : int
        How many outside features (in decreasing order of the heuristic bound) get the
        exact split LP at a time; default max(4·n_max, 200).
    empty_cells : {"veto", "keep"}
        Fix μ = −B on the empty cells of the features in the final working set (features
        outside it keep μ = 0), or leave the LP's value; R is the same.

    Returns
    -------
    MRCSolution
        ``iterations`` = R^1, R^2, ...; ``selected`` = the final working set.
    """
    t0 = time.perf_counter()
    deadline = None if time_limit is None else t0 + float(time_limit)
    K, D = tau.shape
    nb = fmap.n_blocks
    model = _make_model(formulation, fmap, tau, lam, bound, tol)
    pricer = SplitPricer(fmap, tau, lam, label_subsets(K))
    batch = int(exact_batch) if exact_batch is not None else max(4 * n_max, 200)
    if init is None:
        k0 = min(nb, n_max if n_init is None else int(n_init))
        J = np.sort(np.argsort(-screening_scores(fmap, tau), kind="stable")[:k0])
    else:
        J = np.unique(np.asarray(init, dtype=np.int64))
        if J.size and (J.min() < 0 or J.max() >= nb):
            raise InputError(f"initial feature index outside 0..{nb - 1}")
    model.add_blocks(J)
    iterations: list[float] = []
    history: list[dict] = []
    converged = False
    max_dual_violation = np.inf
    k = 0
    while True:
        k += 1
        status = model.solve(deadline=deadline, callback=callback)
        if status != "optimal":
            break
        iterations.append(model.value)
        # ------------------------------------------------------------- SELECT
        W = model.W
        Jb, vJ, mJ = model.block_violation()
        drop = Jb[(vJ < -1e-8) & (mJ == 0.0)]
        out = np.flatnonzero(~model.in_model)
        v_heur = pricer.heuristic(out, W, eps) if out.size else np.zeros(0)
        over = v_heur > eps
        order = out[over][np.argsort(-v_heur[over], kind="stable")]
        exact_v: dict[int, float] = {}
        splits: dict[int, np.ndarray] = {}
        for s0 in range(0, order.size, batch):
            chunk = order[s0 : s0 + batch]
            v, q = pricer.exact(chunk, W)
            exact_v.update({int(i): float(t) for i, t in zip(chunk, v)})
            splits.update(q)
            if sum(t > eps for t in exact_v.values()) >= n_max:
                break
        viol = sorted(((t, i) for i, t in exact_v.items() if t > eps), reverse=True)
        enter = np.array(sorted(i for _, i in viol[:n_max]), dtype=np.int64)
        v_known = v_heur.copy()
        for j, i in enumerate(out):
            if int(i) in exact_v:
                v_known[j] = exact_v[int(i)]
        max_dual_violation = float(max(vJ.max() if vJ.size else -np.inf, v_known.max() if v_known.size else -np.inf))
        history.append({
            "k": k, "R": iterations[-1], "features": int(model.in_model.sum()), "entered": int(enter.size),
            "dropped": int(drop.size), "rows": model.n_rows, "heuristic_flagged": int(over.sum()),
            "exact_priced": len(exact_v), "seconds": time.perf_counter() - t0,
        })
        if callback is not None:
            callback({"stage": "cg", **history[-1]})
        if enter.size == 0:
            converged = True
            break
        if k > k_max or (deadline is not None and time.perf_counter() > deadline):
            break
        model.remove_blocks(drop)
        model.add_blocks(enter, W=W, splits=splits)

    if not iterations:
        raise RuntimeError(f"the MRC LP produced no solution within the time limit ({time_limit} s)")
    Jb = model.active
    mu, empty, phi, value = _finish(fmap, model, tau, lam, bound, Jb, empty_cells)
    return MRCSolution(
        mu=mu, value=value, phi=phi, iterations=iterations, lower=list(model.lower_hist), upper=list(model.upper_hist),
        selected=Jb, converged=converged, n_rows=model.n_rows, impossible=empty, bound=float(bound),
        simplex_iterations=model.simplex_iterations, lp_columns=int(model.in_model.sum()),
        info={"seconds": time.perf_counter() - t0, "history": history, "max_dual_violation": max_dual_violation, "formulation": formulation},
    )
