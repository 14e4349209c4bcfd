"""The 0-1 MRC linear program (LP (13) of seed 000), solved on HiGHS by row generation.

With Φ(x, y) ∈ R^m (flattened μ space), rows indexed by pairs (x, C), x in the whole
domain and C a non-empty label subset, g_{x,C} = Σ_{y∈C} Φ(x, y)/|C| and
b_C = 1/|C| − 1, the problem is::

    R* = min_{μ⁺, μ⁻ ≥ 0, ν}  −(τ − λ)ᵀμ⁺ + (τ + λ)ᵀμ⁻ + ν
         s.t.  g_{x,C}ᵀ(μ⁺ − μ⁻) − ν ≤ b_C     for all (x, C),

with μ = μ⁺ − μ⁻, ν = φ(μ) + 1 and φ(μ) = max_{x,C} (Σ_{y∈C} Φ(x,y)ᵀμ − 1)/|C|. Its
dual (17) is max −bᵀα over distributions α on rows with τ − λ ≤ Fᵀα ≤ τ + λ: α is the
worst-case distribution p(x, y) = Σ_C α_{x,C} 1{y∈C}/|C|.

Pieces, kept separate (objective/penalty in :class:`MinimaxLP`, rows from an oracle, the
loop in :func:`generate_rows`):

- :class:`MinimaxLP` holds ONE HiGHS model over a working set of columns (μ entries) and a
  growing set of rows; rows and columns are added and removed in place, so every re-solve
  starts from the previous basis (warm start). Every μ entry is boxed, |μ_j| ≤ B_j, so a
  restricted row set never makes the LP unbounded; the box is checked to be slack at the
  end (:meth:`MinimaxLP.box_gap`).
- A row oracle is any object with ``most_violated(mu) -> list of Cut`` (``mu`` the flat
  (m,) vector): for the rows it proposes, ``Cut.violation`` is gᵀμ − b, the value ν must
  reach; φ(μ) = max over the oracle's cuts − 1 when the oracle is exact.
  :class:`FirstOrderOracle` is the exact oracle for first-order features, where the max
  over the domain separates per feature; a pairwise (DCC-style) learner plugs in a
  max-sum dynamic program instead and reuses :func:`generate_rows` unchanged.
- :func:`generate_rows` alternates LP solves and oracle calls until no row is violated by
  more than ``tol·max(1, |ν|)``, recording the lower bound (LP value) and the exact upper
  bound R(μ) = −τᵀμ + λᵀ|μ| + φ(μ) + 1 of every round.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, Callable, NamedTuple, Protocol, Sequence

import highspy
import numpy as np
import scipy.sparse as sp

from marginals.errors import InputError

from .featuremap import FeatureMap

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
    """

    def __init__(self, lower: np.ndarray, upper: np.ndarray, bound: float | np.ndarray = 1e3, feas_tol: float = 1e-10):
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
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
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
    def add_columns(self, cols: np.ndarray, coef: sp.spmatrix | None = None) -> None:
        """Bring flat μ columns into the model at value 0.

        Parameters
        ----------
        cols : ndarray of int
            Flat μ indices, not yet in the working set.
        coef : sparse (n_rows, len(cols)), optional
            Coefficients of the existing rows in these columns; they are recorded in the row
            store (rows that had no entry there get these). None: take them from the store.
        """
        cols = np.asarray(cols, dtype=np.int64).ravel()
        if cols.size == 0:
            return
        if np.any(self.pos[cols] >= 0) or np.unique(cols).size != cols.size:
            raise InputError("add_columns: a column is already in the working set or repeated")
        if coef is None:
            C = self.row_matrix()[:, cols]
        else:
            C = sp.csc_array(coef)
            if C.shape != (self.n_rows, cols.size):
                raise InputError(f"add_columns: coefficients must have shape {(self.n_rows, cols.size)}, got {C.shape}")
            coo = C.tocoo()
            if coo.nnz:
                self._coo_r.append(coo.row.astype(np.int64))
                self._coo_c.append(cols[coo.col])
                self._coo_v.append(coo.data.astype(np.float64))
                self._F = None
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
        self.h.setOptionValue("time_limit", float(time_limit) if time_limit is not None else INF)
        self.h.run()
        st = self.h.getModelStatus()
        name = self.h.modelStatusToString(st)
        info = self.h.getInfo()
        self.simplex_iterations += int(info.simplex_iteration_count)
        if st == highspy.HighsModelStatus.kTimeLimit or st == highspy.HighsModelStatus.kIterationLimit:
            self.status = "time_limit"
            if info.primal_solution_status != 2:  # no feasible primal point to report
                return self.status
        elif st != highspy.HighsModelStatus.kOptimal:
            raise RuntimeError(f"HiGHS failed on the MRC LP: status {name!r}")
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

    def box_gap(self) -> float:
        """Σ_j B_j·max(0, −reduced cost) over μ± at their upper bound B.

        The boxed LP value minus this gap is a lower bound on the unboxed LP value over the
        same rows; a gap ≈ 0 means the box does not bind.
        """
        k = self.active.size
        if k == 0 or self._x.size != 1 + 2 * k:
            return 0.0
        x, d = self._x[1:], self._d[1:]
        B = np.repeat(self.bound[self.active], 2)
        at = x >= B * (1.0 - 1e-9)
        return float(np.sum(B[at] * np.maximum(0.0, -d[at])))


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
        R(μ) = 1 − τᵀμ + φ(μ) + λᵀ|μ|, evaluated exactly at ``mu`` with the oracle.
    phi : float
        φ(μ) over the whole domain.
    iterations : list of float
        R^k per column-generation iteration (a single entry for the full solver).
    lower, upper : list of float
        Per row-generation round: LP value and exact R(μ) (all iterations concatenated).
    selected : ndarray of int
        Block indices in the final working set (column generation) or with a non-zero
        coefficient (full solver).
    converged : bool
    n_rows : int
    impossible : ndarray of bool (K, D)
        One-hot entries with τ + λ = 0 (empty cells), whose μ was fixed at −B.
    bound : float
        The final box B on |μ| (one-hot scale).
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
    """Box B_j per flat μ column: ``bound`` for one-hot columns, bound/max(|lo|, |hi|, 1e-12)·1 numeric."""
    per = np.full(fmap.dim, float(bound))
    for b in fmap.blocks:
        if b.kind == "numeric":
            per[b.offset] = float(bound) / max(abs(b.lo), abs(b.hi), 1e-12)
    return np.tile(per, n_classes)


def fix_empty_cells(fmap: FeatureMap, mu: np.ndarray, tau: np.ndarray, lam: np.ndarray, bound: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Give empty one-hot cells (τ + λ = 0) a definite coefficient without changing R(μ).

    Such a column costs nothing in the objective and lowering it only relaxes rows, so the
    LP leaves it anywhere below some value. Two cases:

    - level a of block i is empty for every label ("unseen level"): μ[y, i, a] = c_i for
      all y, c_i = min_C max_{a' seen} mean_{y∈C} μ[y, i, a'] — the largest label-neutral
      constant that keeps every row with x_i = a dominated by a row with a seen level;
    - empty for some labels only: μ[y, i, a] = −B (label y is impossible there).

    Neither changes φ(μ) (rows through the cell stay dominated) nor the objective.

    Returns
    -------
    mu : ndarray (K, D)
    impossible : ndarray of bool (K, D)
    """
    K, D = mu.shape
    mu = mu.copy()
    empty = np.zeros((K, D), dtype=bool)
    B = bound.reshape(K, D)
    subsets = label_subsets(K)
    for blk in fmap.blocks:
        if blk.kind != "onehot":
            continue
        sl = blk.slice
        e = (tau[:, sl] + lam[:, sl]) <= 0.0
        if not e.any():
            continue
        empty[:, sl] = e
        part = e & ~e.all(axis=0, keepdims=True)
        mu[:, sl][part] = -B[:, sl][part]
        unseen = e.all(axis=0)
        seen = ~unseen
        if unseen.any() and seen.any():
            m = mu[:, sl]
            c = min(float(np.max(m[list(C)][:, seen].mean(axis=0))) for C in subsets)
            m[:, unseen] = c
            mu[:, sl] = m
    return mu, empty


def _finish(fmap, K, mu_flat, tau, lam, bound_flat, oracle_all, lp_value_upper):
    mu = mu_flat.reshape(K, fmap.dim)
    mu, empty = fix_empty_cells(fmap, mu, tau, lam, bound_flat)
    phi = oracle_all.phi(mu.ravel())
    value = float(-tau.ravel() @ mu.ravel() + lam.ravel() @ np.abs(mu.ravel()) + phi + 1.0)
    if value > lp_value_upper + 1e-8 * max(1.0, abs(lp_value_upper)):
        raise RuntimeError(f"empty-cell post-processing raised R from {lp_value_upper!r} to {value!r}")
    return mu, empty, phi, value


def solve_full(
    fmap: FeatureMap,
    tau: np.ndarray,
    lam: np.ndarray,
    tol: float = 1e-9,
    bound: float = 1e3,
    time_limit: float | None = None,
    callback: Callable[[dict], None] | None = None,
) -> MRCSolution:
    """LP (13) with every feature in the model, rows generated by the exact oracle.

    Parameters
    ----------
    fmap : FeatureMap
    tau, lam : ndarray, shape (K, D)
    tol : float
        Relative row-violation tolerance.
    bound : float
        Initial box on |μ| (one-hot scale); enlarged if it binds.
    time_limit : float, optional
        Seconds; on expiry the best μ so far is returned with ``converged=False``.
    """
    t0 = time.perf_counter()
    deadline = None if time_limit is None else t0 + float(time_limit)
    K, D = tau.shape
    Bflat = column_bounds(fmap, K, bound)
    lp = MinimaxLP((tau - lam).ravel(), (tau + lam).ravel(), Bflat)
    lp.add_columns(np.arange(K * D))
    oracle = FirstOrderOracle(fmap, K)
    lp.add_rows(oracle.covering_cuts())
    res = solve_boxed(lp, oracle, tol=tol, deadline=deadline, callback=callback)
    if not res.upper:
        raise RuntimeError("the MRC LP did not produce a solution within the time limit")
    mu, empty, phi, value = _finish(fmap, K, lp.mu, tau, lam, lp.bound, oracle, res.upper[-1])
    nz = np.abs(lp.mu.reshape(K, D)) > 1e-12
    sel = np.flatnonzero(np.array([nz[:, b.slice].any() for b in fmap.blocks], dtype=bool))
    return MRCSolution(
        mu=mu,
        value=value,
        phi=phi,
        iterations=[value],
        lower=res.lower,
        upper=res.upper,
        selected=sel,
        converged=res.converged,
        n_rows=lp.n_rows,
        impossible=empty,
        bound=float(bound) * float(lp.bound[0] / Bflat[0]) if Bflat.size else float(bound),
        simplex_iterations=lp.simplex_iterations,
        lp_columns=lp.n_active,
        info={"seconds": time.perf_counter() - t0},
    )
