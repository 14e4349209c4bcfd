"""Two formulations of the first-order minimax LP that features can enter and leave in place.

Column generation over features (:class:`.fit.Columns` on the formulations of :mod:`.first_order`) needs an
LP over a working set of features that grows and shrinks between warm-started solves:

- :class:`CompactModel` (the default, "epigraph"): for first-order features the maximum
  over the domain separates per feature, so the exponentially many rows (x, C) have an
  exact polynomial epigraph form — the forest epigraph of :mod:`.forest_lp` with no edges,
  laid out feature by feature so a feature's rows and columns can be deleted;
- :class:`RowModel` ("rows"): row generation (:meth:`.lp_model.MinimaxModel.for_rows`) with
  the exact first-order oracle; rows generated while a feature was out get its pricing
  split's coefficients when it enters.

Both keep their LP on the one model (``model``, a :class:`.lp_model.MinimaxModel`: μ, the rows,
the solve are read there, nothing is forwarded) and report per feature the dual violation
v = |Fᵀα − τ| − λ that SELECT needs.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import scipy.sparse as sp

from marg.lp import INF

from ..features.blocks import FeatureMap
from .lp_model import MinimaxModel
from .layout import column_bounds, every_label, flat_index
from .pricing import SplitPricer
from .generation import solve_boxed
from .problem import risk
from .separation import FirstOrderOracle


def _block_flat_cols(fmap: FeatureMap, K: int, blocks: np.ndarray) -> np.ndarray:
    """Flat μ indices (y·D + column) of the given blocks, label-major."""
    if len(blocks) == 0:
        return np.zeros(0, dtype=np.int64)
    cols = np.concatenate([np.arange(fmap.blocks[int(i)].offset, fmap.blocks[int(i)].offset + fmap.blocks[int(i)].size)
                           for i in blocks])
    return every_label(K, fmap.dim, cols)


class _WorkingSet:
    """The features in the model, for :class:`CompactModel` and :class:`RowModel`: ``in_model`` per
    feature (block), the oracle told of every change, and the per-feature maxima SELECT reads."""

    fmap: FeatureMap
    in_model: np.ndarray
    oracle: FirstOrderOracle

    @property
    def active(self) -> np.ndarray:
        """The features (block indices) in the model."""
        return np.flatnonzero(self.in_model)

    def _entering(self, blocks: np.ndarray) -> np.ndarray:
        """``blocks`` not yet in the model, each once, in order."""
        blocks = np.unique(np.asarray(blocks, dtype=np.int64))
        out: np.ndarray = blocks[~self.in_model[blocks]]
        return out

    def _leaving(self, blocks: np.ndarray) -> np.ndarray:
        """``blocks`` in the model, each once, in order."""
        blocks = np.unique(np.asarray(blocks, dtype=np.int64))
        out: np.ndarray = blocks[self.in_model[blocks]]
        return out

    def _mark(self, blocks: np.ndarray, present: bool) -> None:
        """Record ``blocks`` as in (or out of) the model and tell the oracle."""
        self.in_model[blocks] = present
        self.oracle.set_active(self.active)

    def _per_block(self, blocks: np.ndarray, owner: np.ndarray, v: np.ndarray,
                   mu_abs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(blocks, max_j v_j, max_j |μ_j|) over each block's columns (``owner``: the block of each column)."""
        vmax = np.full(self.fmap.n_blocks, -np.inf)
        np.maximum.at(vmax, owner, v)
        mmax = np.zeros(self.fmap.n_blocks)
        np.maximum.at(mmax, owner, mu_abs)
        return blocks, vmax[blocks], mmax[blocks]


class CompactModel(_WorkingSet):
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

    def __init__(self, fmap: FeatureMap, tau: np.ndarray, lam: np.ndarray, subsets: Sequence[tuple[int, ...]],
                 feas_tol: float = 1e-8, lp_solver: str = "simplex"):
        self.fmap = fmap
        self.tau = np.asarray(tau, dtype=np.float64)
        self.lam = np.asarray(lam, dtype=np.float64)
        self.K, self.D = self.tau.shape
        self.subsets = list(subsets)
        self.nC = len(self.subsets)
        self.csize = np.array([len(c) for c in self.subsets], dtype=np.float64)
        self.lower = (self.tau - self.lam).ravel()
        self.model = MinimaxModel(self.tau, self.lam, layout="blocks", solver=lp_solver,
                                  presolve=False if lp_solver == "simplex" else None, feas_tol=feas_tol,
                                  what="the minimax LP (first-order epigraph)")
        nC = self.nC
        # the sum rows Σ_i t_{C,i} − |C|·ν ≤ 1 − |C|, one per subset, shared (tag −1)
        self.model.add_rows(np.full(nC, -INF), 1.0 - self.csize, np.arange(nC), np.zeros(nC), -self.csize)
        self.in_model = np.zeros(fmap.n_blocks, dtype=bool)
        self.oracle = FirstOrderOracle(fmap, self.K)
        self.oracle.set_active(np.zeros(0, np.int64))
        self.nu = np.nan
        self.W = np.zeros(nC)
        self.lp_value = np.nan
        self.value = np.nan
        self.phi = np.nan
        self.lower_hist: list[float] = []
        self.upper_hist: list[float] = []

    def add_blocks(self, blocks: np.ndarray, W: np.ndarray | None = None,
                   splits: dict[int, np.ndarray] | None = None) -> None:
        """Bring features into the model at μ = 0, t = 0 (the current point stays feasible)."""
        blocks = self._entering(blocks)
        if blocks.size == 0:
            return
        fm, K, D, nC = self.fmap, self.K, self.D, self.nC
        model = self.model
        flat = _block_flat_cols(fm, K, blocks)
        # μ+ then μ− (no entries yet), owned by their feature
        model.add_mu(flat, tag=fm.block_of_column[flat % D])
        # t_{C,i}: one entry each, in sum row C
        nb = blocks.size
        nt = nb * nC
        t_base = model.add_aux(np.zeros(nt), np.full(nt, -INF), np.full(nt, INF), np.arange(nt),
                               np.tile(np.arange(nC), nb),
                               np.ones(nt), tag=np.repeat(blocks, nC))[0]
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
            # (g, nC, nv)
            rows_g = (r0 + (np.arange(g)[:, None, None] * nC + np.arange(nC)[None, :, None]) * nv
                      + np.arange(nv)[None, None, :])
            for c, C in enumerate(self.subsets):
                rows_c = rows_g[:, c, :]  # (g, nv)
                for y in C:
                    t, cols, vals = model.mu_entries(flat_index(D, y, vcol).ravel(), vval.ravel())
                    rr.append(rows_c.ravel()[t])
                    cc.append(cols)
                    vv.append(vals)
                tcol = t_base + sel * nC + c  # (g,)
                rr.append(rows_c.ravel())
                cc.append(np.repeat(tcol, nv))
                vv.append(np.full(g * nv, -1.0))
            row_owner.append(np.repeat(ids, nC * nv))
            r0 += g * nC * nv
        R = sp.csr_array((np.concatenate(vv), (np.concatenate(rr), np.concatenate(cc))), shape=(r0, model.n_cols))
        R.eliminate_zeros()
        R.sort_indices()
        model.add_rows(np.full(r0, -INF), np.zeros(r0), R.indptr[:-1], R.indices, R.data, tag=np.concatenate(row_owner))
        self._mark(blocks, True)

    def remove_blocks(self, blocks: np.ndarray) -> None:
        """Take features (with μ = 0) out of the model: their columns and epigraph rows go."""
        blocks = self._leaving(blocks)
        if blocks.size == 0:
            return
        self.model.delete_tagged(blocks)
        self._mark(blocks, False)

    def solve(self, deadline: float | None = None, tol: float = 1e-9,
              callback: Callable[[dict[str, Any]], None] | None = None) -> str:
        """Solve from the current basis; returns "optimal" or "time_limit"."""
        model = self.model
        if model.solve(deadline) != "optimal":
            return model.status
        self.nu = model.nu
        mu = model.mu
        self.W = np.clip(-model.row_dual[: self.nC], 0.0, None)
        self.lp_value = model.objective
        top = self.oracle.most_violated(mu)
        vmax = max(float(c.violation) for c in top)
        self.phi = vmax - 1.0
        self.value = risk(self.tau, self.lam, mu.reshape(self.K, self.D), self.phi)
        self.lower_hist.append(self.lp_value)
        self.upper_hist.append(self.value)
        if callback is not None:
            callback({"stage": "lp", "lower": self.lp_value, "upper": self.value, "rows": model.n_rows})
        return model.status

    def block_violation(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For the features in the model: (blocks, max_j v_j, max_j |μ_j|), v = |Fᵀα − τ| − λ.

        Fᵀα on a μ⁺ column is its reduced cost plus (τ − λ) (HiGHS: d = c − Aᵀy).
        """
        blocks = self.active
        model = self.model
        pl = np.flatnonzero(model.sign == 1)
        if blocks.size == 0 or model.col_dual.size != model.n_cols:
            return blocks, np.zeros(blocks.size), np.zeros(blocks.size)
        j = model.ref[pl]
        fa = model.col_dual[pl] + self.lower[j]
        tau, lam = self.tau.ravel()[j], self.lam.ravel()[j]
        v = np.abs(fa - tau) - lam
        return self._per_block(blocks, model.tag[pl], v, np.abs(model.mu[j]))

    def bound_flat(self, bound: float) -> np.ndarray:
        return column_bounds(self.fmap, self.K, bound)


class RowModel(_WorkingSet):
    """LP (13) by row generation (:meth:`MinimaxModel.for_rows` + :class:`FirstOrderOracle`), same interface
    as :class:`CompactModel`. Rows built while a feature was out of the model get, when it
    enters, the coefficients of the pricing split (a convex combination of valid rows)."""

    def __init__(self, fmap: FeatureMap, tau: np.ndarray, lam: np.ndarray, subsets: Sequence[tuple[int, ...]],
                 bound: float = 1e3, tol: float = 1e-9):
        self.fmap = fmap
        self.tau, self.lam = tau, lam
        self.K, self.D = tau.shape
        self.subsets = list(subsets)
        self.sub_index = {c: k for k, c in enumerate(self.subsets)}
        self.B0 = column_bounds(fmap, self.K, bound)
        self.model = MinimaxModel.for_rows(tau, lam, self.B0)
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

    def add_blocks(self, blocks: np.ndarray, W: np.ndarray | None = None,
                   splits: dict[int, np.ndarray] | None = None) -> None:
        blocks = self._entering(blocks)
        if blocks.size == 0:
            return
        K, D, lp = self.K, self.D, self.model
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
                val = q @ self._pricer.vertices(int(i))  # (nC, size)
                for r in np.flatnonzero(~has):
                    lab = lp.labels[r]
                    c = self.sub_index[lab]
                    for y in lab:
                        for s_ in range(blk.size):
                            fr.append(r)
                            fc.append(colpos[flat_index(D, y, blk.offset + s_)])
                            fv.append(val[c, s_] / len(lab))
            fill = sp.csc_array((np.asarray(fv, dtype=np.float64),
                                 (np.asarray(fr, dtype=np.int64), np.asarray(fc, dtype=np.int64))),
                                shape=(lp.n_rows, new_cols.size))
        lp.add_mu(new_cols, fill=fill)
        self._mark(blocks, True)
        if not self._started:
            lp.add_cuts(self.oracle.covering_cuts())
            self._started = True

    def remove_blocks(self, blocks: np.ndarray) -> None:
        blocks = self._leaving(blocks)
        if blocks.size == 0:
            return
        self.model.remove_mu(_block_flat_cols(self.fmap, self.K, blocks))
        self._mark(blocks, False)

    def solve(self, deadline: float | None = None, tol: float | None = None,
              callback: Callable[[dict[str, Any]], None] | None = None) -> str:
        if not self._started:
            self.model.add_cuts(self.oracle.covering_cuts())
            self._started = True
        res = solve_boxed(self.model, self.oracle, tol=self.tol if tol is None else tol, deadline=deadline,
                          callback=callback)
        self.lower_hist += res.lower
        self.upper_hist += res.upper
        if not res.upper:
            self.status = "time_limit"
            return self.status
        self.value = res.upper[-1]
        self.phi = res.phi
        self.lp_value = res.lower[-1]
        self.status = "optimal" if res.converged else "time_limit"
        alpha = np.clip(-self.model.row_dual, 0.0, None)
        if alpha.sum() > 0:
            alpha = alpha / alpha.sum()
        W = np.zeros(len(self.subsets))
        for r, lab in enumerate(self.model.labels):
            if alpha[r] > 0:
                W[self.sub_index[lab]] += alpha[r] / len(lab)
        self.W = W
        return self.status

    def block_violation(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        blocks = self.active
        if blocks.size == 0:
            return blocks, np.zeros(0), np.zeros(0)
        cols = _block_flat_cols(self.fmap, self.K, blocks)
        v = self.model.dual_violation(cols)
        return self._per_block(blocks, self.fmap.block_of_column[cols % self.D], v, np.abs(self.model.mu[cols]))

    def bound_flat(self, bound: float) -> np.ndarray:
        return self.model.bound.copy()
