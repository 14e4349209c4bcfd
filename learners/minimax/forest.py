"""Separation on a forest of pairwise features: exact max-sum dynamic programming over the domain.

For a label subset C, with s_C = Σ_{y∈C} μ[y], the score max_x s_Cᵀ Ψ(x) =
max_x Σ_i θ_i(x_i) + Σ_{(i,j)∈E} θ_ij(x_i, x_j) is a max-sum problem on a forest: leaves-to-
root messages m_{c→p}(x_p) = max_{x_c} θ_pc(x_p, x_c) + θ_c(x_c) + Σ_{children k of c}
m_{k→c}(x_c), then backtracking — exact, O(|E|·m²) per subset (:class:`ForestOracle`). With
no edges it is the first-order oracle's per-feature maximum. Beyond the most violated rows it
gives constrained maxima (x_i = v), max-marginals (used to fix empty cells) and covering
assignments (initial rows of row generation).
"""

from __future__ import annotations

from collections import deque
from typing import Sequence, cast

import numpy as np
from numpy.typing import NDArray

from marg.errors import InputError

from ..features.pairwise import PairwiseFeatureMap
from ..features.structure import UnionFind
from .layout import flat_index
from .problem import risk, subsets_for
from .separation import Cut


EXCLUDED = 1e12  # potential of an excluded (empty) cell: a row through it is never the maximum
_OUTSIDE = np.zeros(0)
"""A max-sum message slot of a node outside the pass (:meth:`ForestOracle._upward`): never read."""


class ForestOracle:
    """Exact separation for node + edge features: max-sum DP on a forest, all label subsets at once.

    For each label subset C (rows of ``subsets``), θ = s_C = Σ_{y∈C} μ[y] gives node
    potentials θ_i(v) = val_v·θ[col_v] over node i's vertices (levels, or {lo, hi} for a raw
    numeric node) and edge potentials θ_ij(a, b) = θ[off_ij + a·m_j + b]. Only the ``active``
    edges enter the DP (they must form a forest; μ is zero on the others), but every cut
    carries the coefficients of ALL the map's edges at its x, so a row stays exact when an
    edge enters the LP later (greedy structure search).

    Parameters
    ----------
    pmap : PairwiseFeatureMap
    n_classes : int
    active : sequence of int, optional
        Edge indices (into ``pmap.edges``) used by the DP; default all.

    Raises
    ------
    InputError
        If the active edges contain a cycle.
    """

    def __init__(
        self,
        pmap: PairwiseFeatureMap,
        n_classes: int,
        active: Sequence[int] | None = None,
        tau: np.ndarray | None = None,
        lam: np.ndarray | None = None,
        stabilize: float = 0.5,
        extra_rows: int | None = 0,
        exclude: np.ndarray | None = None,
    ):
        self.pmap = pmap
        self.K = int(n_classes)
        self.D = pmap.dim
        ls = subsets_for(self.K)
        self.subsets, self.sizes, self.member = ls.subsets, ls.sizes, ls.member
        fm = pmap.nodes
        self.n_vertices = np.array([b.n_vertices for b in fm.blocks], dtype=np.int64)
        self.vertex_cols = [fm.vertex_col[fm.vertex_start[i] : fm.vertex_start[i] + self.n_vertices[i]]
                            for i in range(fm.n_blocks)]
        self.vertex_vals = [fm.vertex_val[fm.vertex_start[i] : fm.vertex_start[i] + self.n_vertices[i]]
                            for i in range(fm.n_blocks)]
        self.tau = None if tau is None else np.asarray(tau, dtype=np.float64).ravel()
        self.lam = None if lam is None else np.asarray(lam, dtype=np.float64).ravel()
        if (self.tau is None) != (self.lam is None):
            raise InputError("ForestOracle: give both tau and lam (for stabilized separation) or neither")
        if not 0.0 <= stabilize < 1.0:
            raise InputError(f"stabilize must be in [0, 1), got {stabilize!r}")
        self.stabilize = float(stabilize)
        if extra_rows is not None and not (isinstance(extra_rows, (int, np.integer)) and extra_rows >= 0):
            raise InputError(f"extra_rows must be an integer >= 0 or None, got {extra_rows!r}")
        self.extra_rows = extra_rows
        self.penalty: NDArray[np.float64] | None = None
        self._dead: NDArray[np.bool_] | None = None
        if exclude is not None:
            ex = np.asarray(exclude, dtype=bool).reshape(self.K, self.D)
            self._dead = cast("NDArray[np.bool_]", ex.all(axis=0))  # numpy types an axis reduction as array or scalar
            hit = (self.member @ ex) > 0  # (nC, D): some label of C is excluded at the column
            if hit.any():
                self.penalty = np.where(hit, -EXCLUDED, 0.0)
        self.set_active(range(pmap.n_edges) if active is None else active)

    def set_active(self, active: Sequence[int]) -> None:
        """Use the edges ``active`` (indices into ``pmap.edges``) in the DP; they must form a forest."""
        pm = self.pmap
        n = pm.n_nodes
        active = [int(e) for e in active]
        uf = UnionFind(n)
        adj: list[list[tuple[int, int]]] = [[] for _ in range(n)]
        for e in active:
            if not 0 <= e < pm.n_edges:
                raise InputError(f"edge index {e} outside 0..{pm.n_edges - 1}")
            a, b = pm.edges[e]
            if not uf.union(a, b):
                raise InputError(f"edges do not form a forest: ({pm.blocks[a].name!r}, {pm.blocks[b].name!r}) closes "
                                 "a cycle")
            adj[a].append((b, e))
            adj[b].append((a, e))
        self.active = sorted(active)
        parent = np.full(n, -1, dtype=np.int64)
        pedge = np.full(n, -1, dtype=np.int64)
        order: list[int] = []
        roots: list[int] = []
        seen = np.zeros(n, dtype=bool)
        for r in range(n):
            if seen[r]:
                continue
            roots.append(r)
            seen[r] = True
            q = deque([r])
            while q:
                u = q.popleft()
                order.append(u)
                for v, e in sorted(adj[u]):
                    if not seen[v]:
                        seen[v] = True
                        parent[v] = u
                        pedge[v] = e
                        q.append(v)
        self.order = order
        self.roots = roots
        root_of = np.zeros(n, dtype=np.int64)
        for v in order:
            root_of[v] = v if parent[v] < 0 else root_of[parent[v]]
        self.root_of = root_of
        self.parent = parent
        self.parent_edge = pedge
        self.children: list[list[int]] = [[] for _ in range(n)]
        for v in order:
            if parent[v] >= 0:
                self.children[int(parent[v])].append(v)
        self.center: np.ndarray | None = None
        self.center_value = np.inf
        # the same component re-rooted at every node (constrained maxima x_i = a)
        self._rooted: list[tuple[list[int], np.ndarray, np.ndarray]] = []
        for r in range(n):
            par = np.full(n, -1, dtype=np.int64)
            ped = np.full(n, -1, dtype=np.int64)
            od = [r]
            seen_r = {r}
            q = deque([r])
            while q:
                u = q.popleft()
                for v, e in sorted(adj[u]):
                    if v not in seen_r:
                        seen_r.add(v)
                        par[v] = u
                        ped[v] = e
                        od.append(v)
                        q.append(v)
            self._rooted.append((od, par, ped))

    # ---------------------------------------------------------------- potentials
    def _potentials(self, mu: np.ndarray) -> np.ndarray:
        """s_C = Σ_{y∈C} μ[y] per label subset (nC, D); excluded cells get −EXCLUDED."""
        S = self.member @ np.asarray(mu, dtype=np.float64).reshape(self.K, self.D)
        if self.penalty is not None:
            S = S + self.penalty
        return S

    def _node_pot(self, S: np.ndarray, i: int) -> np.ndarray:
        return S[:, self.vertex_cols[i]] * self.vertex_vals[i][None, :]

    def _edge_pot(self, S: np.ndarray, c: int, pedge: np.ndarray | None = None) -> np.ndarray:
        """θ_{p c}(x_p, x_c) for the edge from c to its parent p, shape (nC, m_p, m_c)."""
        e = int((self.parent_edge if pedge is None else pedge)[c])
        mi, mj = self.pmap.edge_shape[e]
        off = int(self.pmap.edge_offset[e])
        E = S[:, off : off + mi * mj].reshape(S.shape[0], mi, mj)
        if self.pmap.edges[e][0] == c:  # stored (c, p): transpose to (p, c)
            E = E.transpose(0, 2, 1)
        return E

    def _upward(self, S: np.ndarray, order: Sequence[int] | None = None, parent: np.ndarray | None = None,
                pedge: np.ndarray | None = None) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
        """Leaves-to-root max-sum messages over ``order`` (default: the whole forest, BFS order); a node
        outside ``order`` keeps an empty array."""
        n = self.pmap.n_nodes
        if order is None:
            order, parent, pedge = self.order, self.parent, self.parent_edge
        assert parent is not None, "an order comes with its parents"
        acc: list[np.ndarray] = [_OUTSIDE] * n
        for i in order:
            acc[i] = self._node_pot(S, i)
        msg: list[np.ndarray] = [_OUTSIDE] * n
        arg: list[np.ndarray] = [_OUTSIDE] * n
        for c in reversed(order):
            p = int(parent[c])
            if p < 0:
                continue
            T = self._edge_pot(S, c, pedge) + acc[c][:, None, :]  # (nC, m_p, m_c)
            arg[c] = T.argmax(axis=2)
            msg[c] = T.max(axis=2)
            acc[p] = acc[p] + msg[c]
        return acc, msg, arg

    def separate(self, mu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per label subset C: max_x Σ_{y∈C} Φ(x,y)ᵀμ and a maximizing x.

        Returns
        -------
        values : ndarray (n_subsets,)
        assign : ndarray of int (n_subsets, n_nodes)
            Vertex index of each node (the level for a one-hot node; 0 = lo, 1 = hi numeric).
        """
        S = self._potentials(mu)
        nC = S.shape[0]
        n = self.pmap.n_nodes
        acc, _, arg = self._upward(S)
        x = np.zeros((nC, n), dtype=np.int64)
        values = np.zeros(nC)
        rows = np.arange(nC)
        for r in self.roots:
            values += acc[r].max(axis=1)
            x[:, r] = acc[r].argmax(axis=1)
        for c in self.order:
            p = int(self.parent[c])
            if p >= 0:
                x[:, c] = arg[c][rows, x[:, p]]
        return values, x

    def constrained_maxima(self, mu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For every label subset C, node i and vertex v: max over x with x_i = v, and a maximizer.

        The forest component of i is re-rooted at i and solved by the same max-sum pass; the
        other components keep their unconstrained maximizer.

        Returns
        -------
        values : ndarray (n_subsets, V)
            V = total number of node vertices (node after node, as ``FeatureMap.vertex_start``).
        assign : ndarray of int (n_subsets, V, n_nodes)
        """
        S = self._potentials(mu)
        values0, x0 = self.separate(mu)
        nC, n = x0.shape
        V = int(self.n_vertices.sum())
        vals = np.empty((nC, V))
        X = np.empty((nC, V, n), dtype=np.int64)
        start = 0
        for i in range(n):
            order, parent, pedge = self._rooted[i]
            acc, _, arg = self._upward(S, order, parent, pedge)
            m = int(self.n_vertices[i])
            sl = slice(start, start + m)
            vals[:, sl] = values0[:, None] - acc[i].max(axis=1, keepdims=True) + acc[i]
            Xi = np.repeat(x0[:, None, :], m, axis=1)
            Xi[:, :, i] = np.arange(m)[None, :]
            for c in order[1:]:
                Xi[:, :, c] = np.take_along_axis(arg[c], Xi[:, :, int(parent[c])], axis=1)
            X[:, sl, :] = Xi
            start += m
        return vals, X

    def max_marginals(self, mu: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray | None]]:
        """Max-marginals of every node and active edge, per label subset.

        Returns
        -------
        node : list of ndarray (nC, n_vertices_i)
            max over x (the whole domain) with x_i = v of Σ_{y∈C} Φ(x,y)ᵀμ (node i's own
            term included).
        edge : list (one per map edge) of ndarray (nC, m_i, m_j) or None
            For an active edge (i, j): max over x with (x_i, x_j) = (a, b) of the score
            WITHOUT the edge's own term θ_ij(a, b); None for inactive edges.
        """
        S = self._potentials(mu)
        n = self.pmap.n_nodes
        acc, msg, _ = self._upward(S)
        down = [np.zeros_like(a) for a in acc]
        edge: list[np.ndarray | None] = [None] * self.pmap.n_edges
        for c in self.order:
            p = int(self.parent[c])
            if p < 0:
                continue
            out_p = acc[p] + down[p] - msg[c]  # (nC, m_p): everything at p except c's subtree
            E = self._edge_pot(S, c)  # (nC, m_p, m_c)
            down[c] = (E + out_p[:, :, None]).max(axis=1)
            mm = out_p[:, :, None] + acc[c][:, None, :]  # (nC, m_p, m_c) without θ_pc
            e = int(self.parent_edge[c])
            edge[e] = mm.transpose(0, 2, 1) if self.pmap.edges[e][0] == c else mm
        # the other components contribute their unconstrained maxima
        best = {r: acc[r].max(axis=1) for r in self.roots}
        total = sum(best.values())
        rest = {r: (total - best[r])[:, None] for r in self.roots}
        node = [acc[i] + down[i] + rest[int(self.root_of[i])] for i in range(n)]
        for e in range(self.pmap.n_edges):
            if edge[e] is not None:
                edge[e] = edge[e] + rest[int(self.root_of[self.pmap.edges[e][0]])][:, :, None]
        return node, edge

    # ---------------------------------------------------------------------- rows
    def cut_for(self, k: int, x: np.ndarray, value: float) -> Cut:
        """The row (x, C = subsets[k]): g = Σ_{y∈C} Φ(x, y)/|C| over ALL map edges, b = 1/|C| − 1."""
        c = self.subsets[k]
        size = len(c)
        pm = self.pmap
        fm = pm.nodes
        vid = fm.vertex_start + np.asarray(x, dtype=np.int64)
        cols = fm.vertex_col[vid]
        vals = fm.vertex_val[vid]
        if pm.n_edges:
            ecols = pm.edge_offset + x[pm.edge_i] * pm.edge_mj + x[pm.edge_j]
            cols = np.concatenate([cols, ecols])
            vals = np.concatenate([vals, np.ones(ecols.size)])
        idx = np.concatenate([flat_index(self.D, y, cols) for y in c])
        val = np.tile(vals / size, size)
        return Cut((idx, val), 1.0 / size - 1.0, (value - 1.0) / size + 1.0, tuple(c))

    def most_violated(self, mu: np.ndarray) -> list[Cut]:
        """The most violated row of every label subset at μ; with ``tau``/``lam`` given, also
        the rows most violated at the in-out point s·μ_c + (1 − s)·μ (μ_c: the best μ so far
        by R(μ)), their violation evaluated at μ — extra valid rows that damp the
        oscillation of plain cutting planes."""
        mu = np.asarray(mu, dtype=np.float64).ravel()
        values, x = self.separate(mu)
        cuts = [self.cut_for(k, x[k], values[k]) for k in range(len(self.subsets))]
        if self.extra_rows is None or self.extra_rows > 0:
            cv, CX = self.constrained_maxima(mu)
            cap = CX.shape[1] if self.extra_rows is None else int(self.extra_rows)
            for k in range(len(self.subsets)):
                seen = {x[k].tobytes()}
                for t in np.argsort(-cv[k], kind="stable"):
                    key = CX[k, t].tobytes()
                    if key in seen:
                        continue
                    seen.add(key)
                    cuts.append(self.cut_for(k, CX[k, t], cv[k, t]))
                    if len(seen) > cap:
                        break
        if self.tau is None or self.lam is None:  # given together (__init__)
            return cuts
        if self.center is not None and self.stabilize > 0:
            mid = self.stabilize * self.center + (1.0 - self.stabilize) * mu
            _, xm = self.separate(mid)
            for k in range(len(self.subsets)):
                if np.array_equal(xm[k], x[k]):
                    continue
                c = self.cut_for(k, xm[k], np.nan)
                idx, val = c.g
                viol = float(mu[idx] @ val) - c.b
                cuts.append(c._replace(violation=viol))
        R = risk(self.tau, self.lam, mu, float(np.max((values - 1.0) / self.sizes)))
        if R < self.center_value:
            self.center_value, self.center = R, mu.copy()
        return cuts

    def phi(self, mu: np.ndarray) -> float:
        """φ(μ) = max_{x, C} (Σ_{y∈C} Φ(x,y)ᵀμ − 1)/|C| over the whole domain (active edges)."""
        values, _ = self.separate(mu)
        return float(np.max((values - 1.0) / self.sizes))

    def covering_assignments(self, edges: Sequence[int] | None = None, nodes: bool = True) -> list[np.ndarray]:
        """Assignments x (vertex per node) that together hit every vertex of every node (if
        ``nodes``) and every cell of the given active edges (default: all active edges),
        except cells excluded for every label (no row through them is a constraint).

        Greedy: pick the first cell not yet hit, force its two nodes, and fill the rest of
        the forest top-down preferring cells (then vertices) not yet hit and not excluded.
        Each assignment hits at least one new cell, so this terminates.
        """
        pm = self.pmap
        n = pm.n_nodes
        edges = self.active if edges is None else [int(e) for e in edges]
        if any(e not in self.active for e in edges):
            raise InputError("covering_assignments: every edge to cover must be active")
        dead = self._dead if self._dead is not None else np.zeros(self.D, dtype=bool)
        node_ok = [~dead[self.vertex_cols[i]] if pm.blocks[i].kind == "onehot"
                   else np.ones(int(self.n_vertices[i]), dtype=bool) for i in range(n)]
        node_left = [ok.copy() if nodes else np.zeros_like(ok) for ok in node_ok]
        edge_ok = {e: ~dead[pm.edge_columns(e)].reshape(pm.edge_shape[e]) for e in self.active}
        edge_left = {e: edge_ok[e].copy() for e in edges}
        out: list[np.ndarray] = []

        def pick(*masks: np.ndarray) -> int:
            for m in masks:
                w = np.flatnonzero(m)
                if w.size:
                    return int(w[0])
            return 0

        while True:
            force: dict[int, int] = {}
            target = next((e for e in edges if edge_left[e].any()), None)
            if target is not None:
                a, b = np.argwhere(edge_left[target])[0]
                i, j = pm.edges[target]
                force = {i: int(a), j: int(b)}
            elif not any(nl.any() for nl in node_left):
                break
            x = np.zeros(n, dtype=np.int64)
            for v in self.order:
                p = int(self.parent[v])
                if v in force:
                    x[v] = force[v]
                elif p < 0:
                    x[v] = pick(node_left[v], node_ok[v])
                else:
                    e = int(self.parent_edge[v])
                    stored_pv = pm.edges[e][0] == p
                    ok = (edge_ok[e][x[p], :] if stored_pv else edge_ok[e][:, x[p]]) & node_ok[v]
                    if e in edge_left:
                        row = edge_left[e][x[p], :] if stored_pv else edge_left[e][:, x[p]]
                        x[v] = pick(row & node_left[v] & ok, row & ok, node_left[v] & ok, ok)
                    else:
                        x[v] = pick(node_left[v] & ok, ok)
            for v in range(n):
                node_left[v][x[v]] = False
            for e in edges:
                i, j = pm.edges[e]
                edge_left[e][x[i], x[j]] = False
            out.append(x)
        return out

    def allowed(self, k: int, x: np.ndarray) -> bool:
        """False when the row (x, C = subsets[k]) crosses an excluded cell of a label in C
        (on a node or an active edge): such a row is vacuous, not a constraint."""
        if self.penalty is None:
            return True
        pm = self.pmap
        fm = pm.nodes
        cols = fm.vertex_col[fm.vertex_start + np.asarray(x, dtype=np.int64)]
        if self.active:
            a = np.asarray(self.active, dtype=np.int64)
            cols = np.concatenate([cols, pm.edge_offset[a] + x[pm.edge_i[a]] * pm.edge_mj[a] + x[pm.edge_j[a]]])
        return not np.any(self.penalty[k, cols] < 0)

    def covering_cuts(self, edges: Sequence[int] | None = None, nodes: bool = True) -> list[Cut]:
        """Rows (x, C) for every C and every assignment of :meth:`covering_assignments`
        (rows crossing an excluded cell left out)."""
        return [
            self.cut_for(k, x, np.nan)
            for x in self.covering_assignments(edges, nodes)
            for k in range(len(self.subsets))
            if self.allowed(k, x)
        ]
