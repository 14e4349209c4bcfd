"""The minimax LP on any edge set: the separation's max replaced by its local-polytope (MAP-LP) bound.

On a graph with a cycle the max over x of a pairwise score is intractable in general; the
dual of the MAP-LP over the local polytope (a reparametrisation δ per label subset) bounds
it, jointly linearly in (μ, δ, u, ν), so one LP gives R*_L ≥ R*: a valid certificate for the
distributions matching every edge's pair-with-label table, exact on a forest
(:func:`solve_local`). :class:`GraphLayout` holds the index arrays of a pairwise map on any
edge set; :func:`local_phi` evaluates the certified φ_L(μ; δ) ≥ φ(μ).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..features.pairwise import PairwiseFeatureMap
from .forest_lp import MuTerms, RowBuffer, one_shot_model
from .problem import subsets_for
from .solution import MinimaxSolution


@dataclass(frozen=True)
class Reparametrisation:
    """The local-polytope LP's read-out: ``nu`` (ν = φ_L + 1), ``offsets`` (n_subsets, D) the optimal
    reparametrisation δ per label subset as each Ψ column's δ part, ``vacuous`` (n_subsets,) the
    subsets with no row (:func:`solve_local`)."""

    nu: float
    offsets: np.ndarray
    vacuous: np.ndarray


class GraphLayout:
    """Index arrays of a :class:`PairwiseFeatureMap` on any edge set (cycles allowed).

    Vertices (node values: one-hot levels, or {lo, hi} of a raw numeric node) as in
    :class:`marg.learners.features.blocks.FeatureMap`; one δ "slot" per (edge, endpoint, value of the
    endpoint); per edge cell its two endpoint slots. Factors are the nodes then the edges,
    and every factor's Ψ columns are contiguous (``starts``)."""

    def __init__(self, pmap: PairwiseFeatureMap):
        fm = pmap.nodes
        n, E = pmap.n_nodes, pmap.n_edges
        self.n, self.E, self.D = n, E, pmap.dim
        nv = np.array([b.n_vertices for b in fm.blocks], dtype=np.int64)
        self.vnode = np.repeat(np.arange(n), nv)
        self.vcol = fm.vertex_col
        self.vval = fm.vertex_val
        onehot = np.array([b.kind == "onehot" for b in fm.blocks], dtype=bool)
        self.vonehot = onehot[self.vnode]
        slot_vertex, slot_i, slot_j, ecol, e_of = [], [], [], [], []
        s0 = 0
        for e, (i, j) in enumerate(pmap.edges):
            mi, mj = pmap.edge_shape[e]
            slot_vertex += [fm.vertex_start[i] + np.arange(mi), fm.vertex_start[j] + np.arange(mj)]
            a, b = np.divmod(np.arange(mi * mj), mj)
            slot_i.append(s0 + a)
            slot_j.append(s0 + mi + b)
            ecol.append(pmap.edge_columns(e))
            e_of.append(np.full(mi * mj, e, dtype=np.int64))
            s0 += mi + mj
        def cat(xs: list[np.ndarray]) -> np.ndarray:
            return np.concatenate(xs).astype(np.int64) if xs else np.zeros(0, dtype=np.int64)

        self.slot_vertex, self.slot_i, self.slot_j = cat(slot_vertex), cat(slot_i), cat(slot_j)
        self.ecol, self.e_of = cat(ecol), cat(e_of)
        self.n_slots = s0
        self.starts = np.concatenate([[b.offset for b in fm.blocks], pmap.edge_offset]).astype(np.int64)
        self.numeric = [(b.offset, float(b.lo), float(b.hi)) for b in fm.blocks if b.kind != "onehot"]

    def offsets(self, delta: np.ndarray) -> np.ndarray:
        """Per Ψ column, the δ part of its row: Σ_{e∋i} δ_{e→i}(a) at node column (i, a),
        −δ_{e→i}(a) − δ_{e→j}(b) at edge cell (a, b); 0 at raw numeric columns. (…, D)."""
        delta = np.asarray(delta, dtype=np.float64)
        out = np.zeros(delta.shape[:-1] + (self.D,))
        if self.n_slots:
            for idx in np.ndindex(delta.shape[:-1]):
                per_v = np.bincount(self.slot_vertex, weights=delta[idx], minlength=self.vcol.size)
                on = self.vonehot
                out[idx + (self.vcol[on],)] = per_v[on]
                out[idx + (self.ecol,)] = -delta[idx + (self.slot_i,)] - delta[idx + (self.slot_j,)]
        return out

    def row_values(self, theta: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """θ + offsets per Ψ column; a raw numeric column holds max(lo·θ, hi·θ) (its two vertex rows)."""
        val: np.ndarray = theta + offsets
        for col, lo, hi in self.numeric:
            val[..., col] = np.maximum(lo * theta[..., col], hi * theta[..., col])
        return val

    def factor_max(self, val: np.ndarray) -> np.ndarray:
        """u_f = max of the rows of every factor f, (…, n + E)."""
        return np.maximum.reduceat(val, self.starts, axis=-1)


def solve_local(
    pmap: PairwiseFeatureMap,
    n_classes: int,
    tau: np.ndarray,
    lam: np.ndarray,
    columns: np.ndarray,
    exclude: np.ndarray | None = None,
) -> MinimaxSolution:
    """LP (13) on ANY edge set, with the separation replaced by its local-polytope (MAP-LP) bound.

    For a label subset C and θ = Σ_{y∈C} μ[y] (node potentials θ_i, edge potentials θ_ij),
    the dual of the MAP-LP over the local polytope (a reparametrisation δ) bounds the max::

        max_x Σ_i θ_i(x_i) + Σ_ij θ_ij(x_i, x_j) ≤ Σ_i u_i + Σ_ij u_ij   whenever
        u_i ≥ θ_i(a) + Σ_{j∈N(i)} δ_{ij→i}(a)                for every a,
        u_ij ≥ θ_ij(a, b) − δ_{ij→i}(a) − δ_{ij→j}(b)        for every (a, b)

    (sum the rows at x: the δ cancel), for every δ; the least such bound is the local
    polytope's value, exact on a forest. With Σ_f u_f − |C|·ν ≤ 1 − |C| per C, jointly linear
    in (μ, δ, u, ν), one LP gives R*_L = min_μ 1 − τᵀμ + φ_L(μ) + λᵀ|μ| ≥ R* (φ_L ≥ φ): a
    valid certificate for the distributions matching every edge's pair-with-label table
    and the first-order tables.

    Cells excluded for a label of C (``exclude``, τ = λ = 0) are −∞: their rows are dropped,
    and so are the cells through an excluded node value (its δ is then unconstrained, so
    those rows were vacuous). A subset where some node or edge has no allowed value puts
    no constraint (``vacuous``).

    Parameters
    ----------
    pmap : PairwiseFeatureMap
        Nodes and edges (any graph).
    n_classes : int
    tau, lam : ndarray (K, D)
    columns : ndarray of int
        Flat μ indices in the LP (the others are fixed at 0).
    exclude : ndarray of bool (K, D), optional

    Returns
    -------
    MinimaxSolution
        ``kind`` "R*_L", ``value`` the LP optimum R*_L (≥ R*, = R* on a forest; = R(μ) with
        φ = φ_L(μ; δ) = ν − 1), ``mu`` (K, D), ``impossible`` the excluded cells, ``bound`` inf,
        ``lp_columns`` the LP's variables, and ``read`` its :class:`Reparametrisation`: ``nu`` (ν = φ_L + 1),
        ``offsets`` (n_subsets, D) the optimal reparametrisation δ per label subset as each Ψ column's δ
        part (:meth:`GraphLayout.offsets`; 0 on vertices and cells without a row; :func:`local_phi`),
        ``vacuous`` (n_subsets,) the subsets with no row (some node or edge has no allowed
        value: the max is −∞).

    Raises
    ------
    InconsistentStatistics, SolverError
        The LP is unbounded (no distribution matches τ within λ), or HiGHS fails
        (:meth:`.lp_model.MinimaxModel.solve`).
    """
    K, D = int(n_classes), pmap.dim
    ls = subsets_for(K)
    subsets, member = ls.subsets, ls.member
    ex = np.zeros((K, D), dtype=bool) if exclude is None else np.asarray(exclude, dtype=bool).reshape(K, D)
    dead_all = (member @ ex) > 0
    g = GraphLayout(pmap)
    n, E = g.n, g.E
    model = one_shot_model(tau, lam, columns, "the local-polytope minimax LP")
    mt = MuTerms(model, D, subsets)
    nvar = model.n_cols
    rows = RowBuffer()
    vacuous = np.zeros(len(subsets), dtype=bool)
    dslots: list[tuple[int, np.ndarray] | None] = []
    for k, Cset in enumerate(subsets):
        dead = dead_all[k]
        valive = ~(dead[g.vcol] & g.vonehot)
        calive = ~dead[g.ecol] & valive[g.slot_vertex[g.slot_i]] & valive[g.slot_vertex[g.slot_j]]
        if (np.any(np.bincount(g.vnode[valive], minlength=n) == 0)
            or np.any(np.bincount(g.e_of[calive], minlength=E) == 0)):
            vacuous[k] = True
            dslots.append(None)
            continue
        u0 = nvar
        d0 = nvar + n + E
        nvar = d0 + g.n_slots
        dslots.append((d0, valive[g.slot_vertex]))
        # node rows: θ_i(a) + Σ δ_{e→i}(a) − u_i ≤ 0
        vr = np.flatnonzero(valive)
        nr = vr.size
        row_of_v = np.full(g.vcol.size, -1, dtype=np.int64)
        row_of_v[vr] = np.arange(nr)
        R1, C1, V1 = mt.entries(k, np.arange(nr), g.vcol[vr], g.vval[vr])
        sl = np.flatnonzero(valive[g.slot_vertex])
        # edge rows: θ_ij(a, b) − δ_{e→i}(a) − δ_{e→j}(b) − u_ij ≤ 0
        cr = np.flatnonzero(calive)
        rid = nr + np.arange(cr.size)
        R2, C2, V2 = mt.entries(k, rid, g.ecol[cr], np.ones(cr.size))
        R = [R1, np.arange(nr), row_of_v[g.slot_vertex[sl]], R2, rid, rid, rid]
        C = [C1, u0 + g.vnode[vr], d0 + sl, C2, d0 + g.slot_i[cr], d0 + g.slot_j[cr], u0 + n + g.e_of[cr]]
        V = [V1, -np.ones(nr), np.ones(sl.size), V2, -np.ones(cr.size), -np.ones(cr.size), -np.ones(cr.size)]
        rows.add_block(np.concatenate(R), np.concatenate(C), np.concatenate(V), np.zeros(nr + cr.size), (k,))
        size = len(Cset)
        rows.add(np.concatenate([u0 + np.arange(n + E), [0]]), np.concatenate([np.ones(n + E), [-float(size)]]),
                 1.0 - size, (k,))
    rows.solve(model, nvar)
    delta = np.zeros((len(subsets), g.n_slots))
    for k, ds in enumerate(dslots):
        if ds is not None:
            d0, live = ds
            delta[k] = np.where(live, model.x[d0 : d0 + g.n_slots], 0.0)
    value = model.objective
    return MinimaxSolution(mu=model.mu.reshape(K, D), tau=np.asarray(tau, dtype=np.float64).reshape(K, D),
                           lam=np.asarray(lam, dtype=np.float64).reshape(K, D), phi=model.nu - 1.0, value=value,
                           iterations=[value], lower=[value], upper=[value], converged=True, n_rows=rows.n,
                           impossible=ex, bound=np.inf, kind="R*_L", simplex_iterations=model.lp.simplex_iterations,
                           lp_columns=nvar, read=Reparametrisation(model.nu, g.offsets(delta), vacuous))


def local_phi(pmap: PairwiseFeatureMap, mu: np.ndarray, offsets: np.ndarray) -> float:
    """φ_L(μ; δ) = max_C (Σ_f u_f^C − 1)/|C|, u_f^C the largest row of factor f at the fixed
    reparametrisation ``offsets`` (n_subsets, D): an upper bound on φ(μ) for every δ."""
    K = mu.shape[0]
    ls = subsets_for(K)
    member = ls.member
    g = GraphLayout(pmap)
    u = g.factor_max(g.row_values(member @ mu, offsets))
    return float(np.max((u.sum(axis=1) - 1.0) / member.sum(axis=1)))
