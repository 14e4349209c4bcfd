"""The DCC-style pairwise classifier: the 0-1 MRC with node and edge indicators on a forest.

Feature map. With node blocks as in :mod:`learners.featuremap` (one-hot 1{x_i = a}, or the
clipped value of a raw numeric feature) and, for every edge (i, j) of a forest over the
discrete features, the m_i·m_j indicators 1{x_i = a, x_j = b} (column a·m_j + b of the edge
block), Ψ(x) ∈ R^D is their concatenation and Φ(x, y) = e_y ⊗ Ψ(x), stored (K, D).

The learner solves the MRC of seed 000 over the WHOLE codebook domain X::

    R* = min_μ 1 − τᵀμ + φ(μ) + λᵀ|μ|,
    φ(μ) = max_{x ∈ X, ∅≠C⊆Y} (Σ_{y∈C} Φ(x,y)ᵀμ − 1)/|C|,

with τ from the first-order tables N[x_i, y] (nodes) and the pair-with-label tables
N[x_i, x_j, y] (edges). With λ = 0 this is the Discrete Chebyshev Classifier's minimax
problem (Eban et al., ICML 2014): R* is the largest Bayes error — equivalently the
worst-case error of the randomized rule (6) — over all distributions whose (X_i, Y) and
(X_i, X_j, Y) marginals equal the released ones.

Separation oracle. For a label subset C, with s_C = Σ_{y∈C} μ[y], the score
max_x s_Cᵀ Ψ(x) = max_x Σ_i θ_i(x_i) + Σ_{(i,j)∈E} θ_ij(x_i, x_j) is a max-sum problem on
a forest: leaves-to-root messages m_{c→p}(x_p) = max_{x_c} θ_pc(x_p, x_c) + θ_c(x_c) +
Σ_{children k of c} m_{k→c}(x_c), then backtracking — exact, O(|E|·m²) per subset
(:class:`ForestOracle`). It plugs into the MRC's row generation
(:func:`learners.mrc_lp.solve_boxed` on a :class:`learners.mrc_lp.MinimaxLP`) unchanged.

Structure. Either the maximum-weight spanning forest on I(X_i; X_j | Y)
(:mod:`learners.structure`), or greedily (``greedy=True``): starting from the first-order
model, add the edge (keeping a forest) whose R* is lowest while R* drops by more than
``greedy_tol``. Candidates are ranked by how much the current worst-case distribution (the
LP dual α) breaks their marginals, v_e = max |F_eᵀα − τ_e| − λ_e; an edge with v_e ≤ 0
provably cannot lower R* (α stays dual feasible), and the best ``greedy_candidates`` of the
others are solved exactly.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any, Callable, Sequence

import numpy as np

from marginals.errors import InputError

from .calibration import confidence_lambda
from .featuremap import Block, FeatureMap
from .mrc_lp import Cut, MinimaxLP, column_bounds, label_subsets, solve_boxed
from .structure import UnionFind, max_spanning_forest, pair_weights


# --------------------------------------------------------------------------------------
# Feature map
# --------------------------------------------------------------------------------------
class PairwiseFeatureMap:
    """Ψ(x) = [node blocks | edge blocks]: node one-hots (or raw values) and pair indicators.

    Parameters
    ----------
    blocks : sequence of node blocks (``name``, ``kind``, ``size``, ``lo``, ``hi``), as for
        :class:`learners.featuremap.FeatureMap`.
    columns : sequence of int
        Data column (codebook index) of each node block.
    edges : sequence of (k_i, k_j)
        Node-index pairs (indices into ``blocks``), both one-hot, k_i ≠ k_j. Edge block e
        has m_{k_i}·m_{k_j} columns; column a·m_{k_j} + b is 1{x_{k_i} = a, x_{k_j} = b}.

    Attributes
    ----------
    nodes : FeatureMap
        The node part (columns 0..D_node−1).
    edges : list of (int, int)
    edge_offset : ndarray of int (n_edges,)
        First Ψ column of each edge block.
    edge_shape : list of (int, int)
        (m_i, m_j) of each edge.
    dim : int
        D = D_node + Σ_e m_i·m_j.
    """

    def __init__(self, blocks: Sequence[Any], columns: Sequence[int], edges: Sequence[tuple[int, int]] = ()):
        self.nodes = FeatureMap(blocks, columns)
        nb = self.nodes.n_blocks
        off = self.nodes.dim
        self.edges: list[tuple[int, int]] = []
        offs, shapes = [], []
        seen = set()
        for e in edges:
            a, b = int(e[0]), int(e[1])
            if not (0 <= a < nb and 0 <= b < nb) or a == b:
                raise InputError(f"edge {tuple(e)!r} is not a pair of distinct node indices in 0..{nb - 1}")
            ba, bb = self.nodes.blocks[a], self.nodes.blocks[b]
            if ba.kind != "onehot" or bb.kind != "onehot":
                name = ba.name if ba.kind != "onehot" else bb.name
                raise InputError(f"edge ({ba.name!r}, {bb.name!r}): feature {name!r} is raw numeric; edges need discrete features")
            key = (min(a, b), max(a, b))
            if key in seen:
                raise InputError(f"edge ({ba.name!r}, {bb.name!r}) given twice")
            seen.add(key)
            self.edges.append((a, b))
            offs.append(off)
            shapes.append((ba.size, bb.size))
            off += ba.size * bb.size
        self.edge_offset = np.asarray(offs, dtype=np.int64)
        self.edge_shape = shapes
        self.dim = off
        self._ei = np.asarray([e[0] for e in self.edges], dtype=np.int64)
        self._ej = np.asarray([e[1] for e in self.edges], dtype=np.int64)
        self._emj = np.asarray([s[1] for s in shapes], dtype=np.int64)

    @property
    def blocks(self) -> list[Block]:
        return self.nodes.blocks

    @property
    def n_nodes(self) -> int:
        return self.nodes.n_blocks

    @property
    def n_edges(self) -> int:
        return len(self.edges)

    @property
    def names(self) -> list[str]:
        return self.nodes.names

    @property
    def edge_names(self) -> list[tuple[str, str]]:
        return [(self.blocks[a].name, self.blocks[b].name) for a, b in self.edges]

    def edge_columns(self, e: int) -> np.ndarray:
        """Ψ columns of edge block e."""
        mi, mj = self.edge_shape[e]
        return np.arange(self.edge_offset[e], self.edge_offset[e] + mi * mj)

    def flat_columns(self, psi_cols: np.ndarray, n_classes: int) -> np.ndarray:
        """Flat μ indices y·D + j for all labels y and the given Ψ columns j (label-major)."""
        psi_cols = np.asarray(psi_cols, dtype=np.int64)
        return (np.arange(n_classes)[:, None] * self.dim + psi_cols[None, :]).ravel()

    def _edge_cells(self, X: np.ndarray) -> np.ndarray:
        """(n, n_edges) Ψ column hit by each edge (X already validated)."""
        if not self.edges:
            return np.zeros((X.shape[0], 0), dtype=np.int64)
        ci = np.asarray([self.blocks[a].column for a in self._ei], dtype=np.int64)
        cj = np.asarray([self.blocks[b].column for b in self._ej], dtype=np.int64)
        xi = X[:, ci].astype(np.int64)
        xj = X[:, cj].astype(np.int64)
        return self.edge_offset[None, :] + xi * self._emj[None, :] + xj

    def psi(self, X: np.ndarray) -> np.ndarray:
        """Ψ(X), shape (n, D)."""
        P0 = self.nodes.psi(X)  # validates X
        X = np.asarray(X, dtype=np.float64)
        n = X.shape[0]
        out = np.zeros((n, self.dim))
        out[:, : self.nodes.dim] = P0
        cells = self._edge_cells(X)
        if cells.size:
            out[np.arange(n)[:, None], cells] = 1.0
        return out

    def scores(self, X: np.ndarray, mu: np.ndarray) -> np.ndarray:
        """Φ(x, y)ᵀμ for every row and label, shape (n, K), with μ of shape (K, D)."""
        mu = np.asarray(mu, dtype=np.float64)
        if mu.ndim != 2 or mu.shape[1] != self.dim:
            raise InputError(f"mu must have shape (K, {self.dim}), got {mu.shape}")
        s = self.nodes.scores(X, mu[:, : self.nodes.dim])  # validates X
        cells = self._edge_cells(np.asarray(X, dtype=np.float64))
        if cells.size:
            s += mu[:, cells].sum(axis=2).T
        return s

    def to_dict(self) -> dict[str, Any]:
        return {"blocks": [b.to_dict() for b in self.blocks], "edges": [[int(a), int(b)] for a, b in self.edges]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "PairwiseFeatureMap":
        try:
            blocks = [Block.from_dict(b) for b in d["blocks"]]
            edges = [(int(e[0]), int(e[1])) for e in d.get("edges", [])]
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise InputError(f"malformed pairwise feature map: {exc}") from None
        return cls(blocks, [b.column for b in blocks], edges)


# --------------------------------------------------------------------------------------
# Separation oracle: max-sum dynamic programming on the forest
# --------------------------------------------------------------------------------------
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

    def __init__(self, pmap: PairwiseFeatureMap, n_classes: int, active: Sequence[int] | None = None):
        self.pmap = pmap
        self.K = int(n_classes)
        self.D = pmap.dim
        self.subsets = label_subsets(self.K)
        self.sizes = np.array([len(c) for c in self.subsets], dtype=np.float64)
        self.member = np.zeros((len(self.subsets), self.K))
        for k, c in enumerate(self.subsets):
            self.member[k, list(c)] = 1.0
        fm = pmap.nodes
        self._nv = np.array([b.n_vertices for b in fm.blocks], dtype=np.int64)
        self._vcols = [fm.vertex_col[fm.vertex_start[i] : fm.vertex_start[i] + self._nv[i]] for i in range(fm.n_blocks)]
        self._vvals = [fm.vertex_val[fm.vertex_start[i] : fm.vertex_start[i] + self._nv[i]] for i in range(fm.n_blocks)]
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
                raise InputError(f"edges do not form a forest: ({pm.blocks[a].name!r}, {pm.blocks[b].name!r}) closes a cycle")
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
        self.parent = parent
        self.parent_edge = pedge
        self.children: list[list[int]] = [[] for _ in range(n)]
        for v in order:
            if parent[v] >= 0:
                self.children[int(parent[v])].append(v)

    # ---------------------------------------------------------------- potentials
    def _node_pot(self, S: np.ndarray, i: int) -> np.ndarray:
        return S[:, self._vcols[i]] * self._vvals[i][None, :]

    def _edge_pot(self, S: np.ndarray, c: int) -> np.ndarray:
        """θ_{p c}(x_p, x_c) for the edge from c to its parent p, shape (nC, m_p, m_c)."""
        e = int(self.parent_edge[c])
        mi, mj = self.pmap.edge_shape[e]
        off = int(self.pmap.edge_offset[e])
        E = S[:, off : off + mi * mj].reshape(S.shape[0], mi, mj)
        if self.pmap.edges[e][0] == c:  # stored (c, p): transpose to (p, c)
            E = E.transpose(0, 2, 1)
        return E

    def _upward(self, S: np.ndarray):
        n = self.pmap.n_nodes
        acc = [self._node_pot(S, i) for i in range(n)]
        msg: list[np.ndarray | None] = [None] * n
        arg: list[np.ndarray | None] = [None] * n
        for c in reversed(self.order):
            p = int(self.parent[c])
            if p < 0:
                continue
            T = self._edge_pot(S, c) + acc[c][:, None, :]  # (nC, m_p, m_c)
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
        S = self.member @ np.asarray(mu, dtype=np.float64).reshape(self.K, self.D)
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

    def max_marginals(self, mu: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray | None]]:
        """Max-marginals of every node and active edge, per label subset.

        Returns
        -------
        node : list of ndarray (nC, n_vertices_i)
            max over x with x_i = v of Σ_{y∈C} Φ(x,y)ᵀμ (node i's own term included).
        edge : list (one per map edge) of ndarray (nC, m_i, m_j) or None
            For an active edge (i, j): max over x with (x_i, x_j) = (a, b) of the score
            WITHOUT the edge's own term θ_ij(a, b); None for inactive edges.
        """
        S = self.member @ np.asarray(mu, dtype=np.float64).reshape(self.K, self.D)
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
        node = [acc[i] + down[i] for i in range(n)]
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
            ecols = pm.edge_offset + x[pm._ei] * pm._emj + x[pm._ej]
            cols = np.concatenate([cols, ecols])
            vals = np.concatenate([vals, np.ones(ecols.size)])
        idx = np.concatenate([y * self.D + cols for y in c])
        val = np.tile(vals / size, size)
        return Cut((idx, val), 1.0 / size - 1.0, (value - 1.0) / size + 1.0, tuple(c))

    def most_violated(self, mu: np.ndarray) -> list[Cut]:
        values, x = self.separate(mu)
        return [self.cut_for(k, x[k], values[k]) for k in range(len(self.subsets))]

    def phi(self, mu: np.ndarray) -> float:
        """φ(μ) = max_{x, C} (Σ_{y∈C} Φ(x,y)ᵀμ − 1)/|C| over the whole domain (active edges)."""
        values, _ = self.separate(mu)
        return float(np.max((values - 1.0) / self.sizes))

    def covering_assignments(self, edges: Sequence[int] | None = None, nodes: bool = True) -> list[np.ndarray]:
        """Assignments x (vertex per node) that together hit every vertex of every node (if
        ``nodes``) and every cell of the given active edges (default: all active edges).

        Greedy: pick the first cell not yet hit, force its two nodes, and fill the rest of
        the forest top-down preferring cells (then vertices) not yet hit. Each assignment
        hits at least one new cell, so this terminates.
        """
        pm = self.pmap
        n = pm.n_nodes
        edges = self.active if edges is None else [int(e) for e in edges]
        if any(e not in self.active for e in edges):
            raise InputError("covering_assignments: every edge to cover must be active")
        node_left = [np.ones(int(k), dtype=bool) if nodes else np.zeros(int(k), dtype=bool) for k in self._nv]
        edge_left = {e: np.ones(pm.edge_shape[e], dtype=bool) for e in edges}
        out: list[np.ndarray] = []

        def pick(left: np.ndarray) -> int:
            w = np.flatnonzero(left)
            return int(w[0]) if w.size else 0

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
                    x[v] = pick(node_left[v])
                else:
                    e = int(self.parent_edge[v])
                    if e in edge_left:
                        row = edge_left[e][x[p], :] if pm.edges[e][0] == p else edge_left[e][:, x[p]]
                        both = row & node_left[v]
                        x[v] = pick(both) if both.any() else pick(row) if row.any() else pick(node_left[v])
                    else:
                        x[v] = pick(node_left[v])
            for v in range(n):
                node_left[v][x[v]] = False
            for e in edges:
                i, j = pm.edges[e]
                edge_left[e][x[i], x[j]] = False
            out.append(x)
        return out

    def covering_cuts(self, edges: Sequence[int] | None = None, nodes: bool = True) -> list[Cut]:
        """Rows (x, C) for every C and every assignment of :meth:`covering_assignments`."""
        return [self.cut_for(k, x, np.nan) for x in self.covering_assignments(edges, nodes) for k in range(len(self.subsets))]


# --------------------------------------------------------------------------------------
# Empty cells
# --------------------------------------------------------------------------------------
def fix_empty_cells_forest(
    oracle: ForestOracle, mu: np.ndarray, tau: np.ndarray, lam: np.ndarray, bound: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Give empty one-hot / edge cells (τ + λ = 0) a definite coefficient without raising R(μ).

    An empty cell costs nothing in the objective and lowering its μ only relaxes rows, so
    the LP leaves it anywhere below some value. Two cases (as in the first-order MRC):

    - empty for some labels only: μ[y, cell] = −B (label y is impossible there);
    - empty for every label (an unseen level or pair of levels): a label-neutral constant
      μ[·, cell] = c, the largest keeping φ(μ): c = min_C (|C|·(φ + 1) − M_C(cell))/|C| with
      M_C the max-marginal of Σ_{y∈C} Φ(x,y)ᵀμ over x through the cell without the cell's
      own term. Factors (nodes, then edges) are raised one after the other, each with
      max-marginals recomputed, so rows crossing several unseen cells stay feasible.

    Neither changes the objective (τ = λ = 0 there) nor raises φ.

    Parameters
    ----------
    oracle : ForestOracle
        Over the model's map, all edges active.
    mu, tau, lam, bound : ndarray (K, D)

    Returns
    -------
    mu : ndarray (K, D)
    impossible : ndarray of bool (K, D)
        All empty cells (τ + λ = 0).
    """
    pm = oracle.pmap
    K, D = mu.shape
    mu = mu.copy()
    empty = (tau + lam) <= 0.0
    factors: list[tuple[str, int, np.ndarray]] = []
    for i, b in enumerate(pm.blocks):
        if b.kind == "onehot":
            factors.append(("node", i, np.arange(b.offset, b.offset + b.size)))
    for e in range(pm.n_edges):
        factors.append(("edge", e, pm.edge_columns(e)))
    # onehot columns only (numeric node columns are never "empty" cells)
    cell_cols = np.concatenate([f[2] for f in factors]) if factors else np.zeros(0, np.int64)
    is_cell = np.zeros(D, dtype=bool)
    is_cell[cell_cols] = True
    empty &= is_cell[None, :]
    unseen = empty.all(axis=0) & is_cell
    part = empty & ~unseen[None, :]
    mu[part] = -bound[part]
    mu[:, unseen] = -bound[:, unseen]
    if not unseen.any():
        return mu, empty
    phi = oracle.phi(mu.ravel())
    sizes = oracle.sizes[:, None]
    for kind, idx, cols in factors:
        u = unseen[cols]
        if not u.any():
            continue
        node_mm, edge_mm = oracle.max_marginals(mu.ravel())
        if kind == "node":
            own = oracle.member @ mu[:, cols]  # (nC, m): the node's own term
            M = node_mm[idx] - own
        else:
            M = edge_mm[idx].reshape(len(oracle.subsets), -1)
        c = np.min((sizes * (phi + 1.0) - M) / sizes, axis=0)  # (cells,)
        mu[:, cols[u]] = c[u][None, :]
    return mu, empty


def _objective(tau: np.ndarray, lam: np.ndarray, mu: np.ndarray, phi: float) -> float:
    """R(μ) = 1 − τᵀμ + φ(μ) + λᵀ|μ|."""
    return float(-np.sum(tau * mu) + np.sum(lam * np.abs(mu)) + phi + 1.0)


# --------------------------------------------------------------------------------------
# The estimator
# --------------------------------------------------------------------------------------
class DCC:
    """DCC-style minimax classifier: 0-1 MRC over node and pairwise (forest) indicators.

    Parameters
    ----------
    s : float or None
        None: λ calibrated to simultaneous ``coverage`` (Bonferroni over the entries of
        EVERY candidate pair, since the structure is chosen from the same tables); a
        number: λ = s·std/√n (+ the noise term); ``s=0`` on exact summaries is the pure DCC.
    coverage : float
        Simultaneous coverage of the box τ ± λ.
    max_edges : int or None
        Cap on the number of edges.
    greedy : bool
        False: maximum spanning forest on I(X_i; X_j | Y). True: greedy R*-driven edges.
    greedy_tol : float
        Greedy search stops when the best edge lowers R* by ``greedy_tol`` or less.
    greedy_candidates : int or None
        Edges solved exactly per greedy step (the best by dual violation); None = all
        candidates that the current worst-case distribution violates.
    features : sequence of str or None
        Features used (None = all).
    tol : float
        Relative row-violation tolerance of row generation.
    bound : float
        Initial box on |μ| (enlarged automatically while it binds).
    time_limit : float or None
        Seconds for each LP solve by row generation (``converged_`` False on expiry).
    callback : callable or None
        Progress: called with a dict per row-generation round and greedy step.

    Attributes
    ----------
    mu_ : ndarray (K, D)
    phi_, nu_ : float
    worst_case_error_ : float
        R* (certificate: worst-case error of rule (6) over the uncertainty set).
    iterations_ : list of float
        Greedy: R* of the first-order model and after each added edge (non-increasing).
        Otherwise: running minimum of the exact R(μ) over the row-generation rounds
        (non-increasing, last = R*).
    row_rounds_ : dict
        ``lower`` (LP values) and ``upper`` (exact R(μ)) of every row-generation round.
    edges_ : list of (str, str)
    edge_weights_ : list of float
        I(X_i; X_j | Y) (nats) of each edge.
    classes_ : tuple of str
    feature_names_ : list of str
    tau_, lambda_ : ndarray (K, D)
    impossible_ : ndarray of bool (K, D)
    n_rows_ : int
    converged_ : bool
    fingerprint_ : str
    n_ : float
    """

    def __init__(
        self,
        s: float | None = None,
        coverage: float = 0.95,
        max_edges: int | None = None,
        greedy: bool = False,
        greedy_tol: float = 1e-4,
        greedy_candidates: int | None = 8,
        features: Sequence[str] | None = None,
        tol: float = 1e-9,
        bound: float = 1e3,
        time_limit: float | None = None,
        callback: Callable[[dict], None] | None = None,
    ):
        self.s = s
        self.coverage = coverage
        self.max_edges = max_edges
        self.greedy = greedy
        self.greedy_tol = greedy_tol
        self.greedy_candidates = greedy_candidates
        self.features = features
        self.tol = tol
        self.bound = bound
        self.time_limit = time_limit
        self.callback = callback

    # ------------------------------------------------------------------ fit
    def _check_params(self) -> None:
        if self.s is not None and not (np.isfinite(self.s) and self.s >= 0):
            raise InputError(f"s must be finite and >= 0, got {self.s!r}")
        if not (0.0 < self.coverage < 1.0):
            raise InputError(f"coverage must be in (0, 1), got {self.coverage!r}")
        if self.max_edges is not None and not (isinstance(self.max_edges, (int, np.integer)) and self.max_edges >= 0):
            raise InputError(f"max_edges must be an integer >= 0, got {self.max_edges!r}")
        if not (np.isfinite(self.greedy_tol) and self.greedy_tol >= 0):
            raise InputError(f"greedy_tol must be finite and >= 0, got {self.greedy_tol!r}")
        gc = self.greedy_candidates
        if gc is not None and not (isinstance(gc, (int, np.integer)) and gc >= 1):
            raise InputError(f"greedy_candidates must be an integer >= 1 or None, got {gc!r}")
        if not (self.tol > 0 and np.isfinite(self.tol)):
            raise InputError(f"tol must be positive, got {self.tol!r}")
        if not (self.bound > 0 and np.isfinite(self.bound)):
            raise InputError(f"bound must be positive, got {self.bound!r}")
        if self.time_limit is not None and not (self.time_limit > 0):
            raise InputError(f"time_limit must be positive, got {self.time_limit!r}")

    def _node_blocks(self, summary: Any) -> list[Any]:
        blocks = list(summary.blocks)
        if self.features is None:
            return blocks
        names = list(self.features)
        if not names:
            raise InputError("features must name at least one feature (got an empty list)")
        known = {b.name for b in blocks}
        for nm in names:
            if nm not in known:
                raise InputError(f"unknown feature {nm!r} in features (not in the summary's codebook)")
        want = set(names)
        return [b for b in blocks if b.name in want]

    @staticmethod
    def _statistics(summary: Any, pmap: PairwiseFeatureMap, node_psi: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """τ, its sample std and the noise std (K, D) for the map: nodes from the summary's
        first-order quantities, edges from the pair-with-label tables."""
        K, D = summary.n_classes, pmap.dim
        Dn = pmap.nodes.dim
        tau = np.zeros((K, D))
        std = np.zeros((K, D))
        noise = np.zeros((K, D))
        tau[:, :Dn] = np.asarray(summary.tau, dtype=np.float64)[:, node_psi]
        std[:, :Dn] = np.asarray(summary.tau_std, dtype=np.float64)[:, node_psi]
        noise[:, :Dn] = np.asarray(summary.noise_std, dtype=np.float64)[:, node_psi]
        lab = summary.codebook.label.name
        n = float(summary.n)
        for e, (a, b) in enumerate(pmap.edges):
            fa, fb = pmap.blocks[a].name, pmap.blocks[b].name
            P = summary.joint((fa, fb, lab))  # (m_a, m_b, K)
            cols = pmap.edge_columns(e)
            t = np.transpose(P, (2, 0, 1)).reshape(K, -1)
            tau[:, cols] = t
            std[:, cols] = np.sqrt(np.clip(t * (1.0 - t), 0.0, None))
            noise[:, cols] = summary._count_noise_std((fa, fb, lab)) / n
        return tau, std, noise

    def fit(self, summary: Any) -> "DCC":
        """Fit the structure and μ from a Summary (first-order and pair-with-label tables).

        Parameters
        ----------
        summary : marginals.summary.Summary

        Returns
        -------
        self
        """
        self._check_params()
        t0 = time.perf_counter()
        cb = summary.codebook
        K = int(summary.n_classes)
        blocks = self._node_blocks(summary)
        names = [b.name for b in blocks]
        node_of = {cb.index(b.name): k for k, b in enumerate(blocks)}
        columns = [cb.index(b.name) for b in blocks]
        node_psi = np.concatenate([np.arange(b.offset, b.offset + b.size) for b in blocks]).astype(np.int64)
        weights_cb = pair_weights(summary, names)
        weights = {(node_of[i], node_of[j]): w for (i, j), w in weights_cb.items()}
        cand = sorted(weights)
        # λ: Bonferroni over the node entries and every candidate pair's entries
        full = PairwiseFeatureMap(blocks, columns, cand)
        tau_f, std_f, noise_f = self._statistics(summary, full, node_psi)
        lam_f = confidence_lambda(std_f, noise_f, float(summary.n), s=self.s, coverage=self.coverage)
        if self.greedy:
            edges, rounds, iters, converged, lp_bound, n_rows = self._fit_greedy(full, tau_f, lam_f, K)
        else:
            forest = max_spanning_forest(len(blocks), weights, self.max_edges)
            edges, rounds, iters, converged, lp_bound, n_rows = self._fit_forest(full, tau_f, lam_f, K, forest)
        # compact model over the chosen edges
        pmap = PairwiseFeatureMap(blocks, columns, edges)
        keep = np.concatenate([np.arange(full.nodes.dim)] + [full.edge_columns(cand.index(e)) for e in edges]).astype(np.int64)
        tau, lam = tau_f[:, keep], lam_f[:, keep]
        mu_raw = self._mu_full.reshape(K, full.dim)[:, keep]
        B = lp_bound.reshape(K, full.dim)[:, keep]
        oracle = ForestOracle(pmap, K)
        mu, empty = fix_empty_cells_forest(oracle, mu_raw, tau, lam, B)
        phi = oracle.phi(mu.ravel())
        value = _objective(tau, lam, mu, phi)
        upper = rounds["upper"][-1] if rounds["upper"] else np.inf
        if value > upper + 1e-8 * max(1.0, abs(upper)):
            raise RuntimeError(f"empty-cell post-processing raised R from {upper!r} to {value!r}")
        if iters:
            iters[-1] = value
        self.pmap_ = pmap
        self.blocks_ = list(pmap.blocks)
        self.feature_names_ = pmap.names
        self.classes_ = tuple(summary.classes)
        self.edges_ = pmap.edge_names
        self.edge_weights_ = [float(weights[e]) for e in edges]
        self.tau_ = tau
        self.lambda_ = lam
        self.mu_ = mu
        self.phi_ = float(phi)
        self.nu_ = float(phi) + 1.0
        self.worst_case_error_ = float(value)
        self.iterations_ = [float(v) for v in iters]
        self.row_rounds_ = {"lower": [float(v) for v in rounds["lower"]], "upper": [float(v) for v in rounds["upper"]]}
        self.n_rows_ = int(n_rows)
        self.impossible_ = empty
        self.converged_ = bool(converged)
        self.bound_ = float(np.max(B)) if B.size else float(self.bound)
        self.fingerprint_ = str(summary.fingerprint)
        self.n_ = float(summary.n)
        self.seconds_ = time.perf_counter() - t0
        del self._mu_full
        return self

    def _deadline(self) -> float | None:
        return None if self.time_limit is None else time.perf_counter() + float(self.time_limit)

    def _new_lp(self, full: PairwiseFeatureMap, tau: np.ndarray, lam: np.ndarray, K: int) -> MinimaxLP:
        per = np.full(full.dim, float(self.bound))
        per[: full.nodes.dim] = column_bounds(full.nodes, 1, self.bound)
        return MinimaxLP((tau - lam).ravel(), (tau + lam).ravel(), np.tile(per, K))

    def _fit_forest(self, full, tau, lam, K, forest):
        cand = sorted(full.edges)
        active = [cand.index(e) for e in forest]
        lp = self._new_lp(full, tau, lam, K)
        cols = np.concatenate([np.arange(full.nodes.dim)] + [full.edge_columns(e) for e in active]).astype(np.int64)
        lp.add_columns(full.flat_columns(cols, K))
        oracle = ForestOracle(full, K, active)
        lp.add_rows(oracle.covering_cuts())
        res = solve_boxed(lp, oracle, tol=self.tol, deadline=self._deadline(), callback=self.callback)
        if not res.upper:
            raise RuntimeError("the DCC LP did not produce a solution within the time limit")
        self._mu_full = lp.mu.copy()
        iters = list(np.minimum.accumulate(np.asarray(res.upper)))
        return list(forest), {"lower": res.lower, "upper": res.upper}, iters, res.converged, lp.bound, lp.n_rows

    def _fit_greedy(self, full, tau, lam, K):
        cand = list(full.edges)
        n_nodes = full.n_nodes
        cap = n_nodes if self.max_edges is None else int(self.max_edges)
        lp = self._new_lp(full, tau, lam, K)
        lp.add_columns(full.flat_columns(np.arange(full.nodes.dim), K))
        oracle = ForestOracle(full, K, [])
        lp.add_rows(oracle.covering_cuts())
        rounds: dict[str, list[float]] = {"lower": [], "upper": []}
        deadline = self._deadline

        def solve() -> tuple[float, bool]:
            res = solve_boxed(lp, oracle, tol=self.tol, deadline=deadline(), callback=self.callback)
            if not res.upper:
                raise RuntimeError("the DCC LP did not produce a solution within the time limit")
            rounds["lower"].extend(res.lower)
            rounds["upper"].extend(res.upper)
            return float(res.upper[-1]), bool(res.converged)

        R, converged = solve()
        iters = [R]
        chosen: list[int] = []
        uf = UnionFind(n_nodes)
        while len(chosen) < cap and converged:
            free = [e for e in range(len(cand)) if e not in chosen and uf.find(cand[e][0]) != uf.find(cand[e][1])]
            if not free:
                break
            # price: how far the current worst-case distribution is from each edge's marginals
            viol = np.array([float(lp.dual_violation(full.flat_columns(full.edge_columns(e), K)).max()) for e in free])
            thr = 1e-9
            order = [free[t] for t in np.argsort(-viol, kind="stable") if viol[t] > thr]
            if self.greedy_candidates is not None:
                order = order[: int(self.greedy_candidates)]
            if not order:
                break  # α is dual feasible with any single extra edge: none can lower R*
            best, best_R = None, R
            for e in order:
                cols = full.flat_columns(full.edge_columns(e), K)
                lp.add_columns(cols)
                oracle.set_active(chosen + [e])
                lp.add_rows(oracle.covering_cuts([e], nodes=False))
                Re, conv = solve()
                lp.remove_columns(cols)
                if conv and Re < best_R:
                    best, best_R = e, Re
            oracle.set_active(chosen)
            if best is None or R - best_R <= self.greedy_tol:
                R, converged = solve()  # restore the model of the chosen edges
                break
            chosen.append(best)
            uf.union(*cand[best])
            lp.add_columns(full.flat_columns(full.edge_columns(best), K))
            oracle.set_active(chosen)
            R, converged = solve()
            iters.append(R)
            if self.callback is not None:
                self.callback({"stage": "greedy", "edges": len(chosen), "R": R, "edge": full.edge_names[best]})
        self._mu_full = lp.mu.copy()
        return [cand[e] for e in chosen], rounds, iters, converged, lp.bound, lp.n_rows

    # -------------------------------------------------------------- predict
    def _check_fitted(self) -> None:
        if not hasattr(self, "mu_"):
            raise InputError("this DCC is not fitted yet: call fit(summary) first")

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        """Scores Φ(x, y)ᵀμ, shape (n, K); X is (n, p) codes in codebook feature order."""
        self._check_fitted()
        return self.pmap_.scores(X, self.mu_)

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Deterministic rule argmax_y Φ(x, y)ᵀμ, as class indices (n,)."""
        return np.argmax(self.decision_function(X), axis=1)

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """Randomized rule (6): h(y|x) = (Φ(x,y)ᵀμ − φ)₊ / Σ_y' (Φ(x,y')ᵀμ − φ)₊, uniform when all are 0; (n, K)."""
        s = self.decision_function(X) - self.phi_
        h = np.maximum(s, 0.0)
        d = h.sum(axis=1, keepdims=True)
        K = s.shape[1]
        return np.where(d > 0, h / np.where(d > 0, d, 1.0), 1.0 / K)

    # ---------------------------------------------------------- persistence
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready model (plain lists and floats)."""
        self._check_fitted()
        return {
            "learner": "dcc",
            "fingerprint": self.fingerprint_,
            "classes": list(self.classes_),
            "n": self.n_,
            "params": {
                "s": None if self.s is None else float(self.s),
                "coverage": float(self.coverage),
                "max_edges": None if self.max_edges is None else int(self.max_edges),
                "greedy": bool(self.greedy),
                "greedy_tol": float(self.greedy_tol),
                "greedy_candidates": None if self.greedy_candidates is None else int(self.greedy_candidates),
                "tol": float(self.tol),
                "bound": float(self.bound),
            },
            "map": self.pmap_.to_dict(),
            "edges": [list(e) for e in self.edges_],
            "edge_weights": list(self.edge_weights_),
            "mu": self.mu_.tolist(),
            "phi": self.phi_,
            "worst_case_error": self.worst_case_error_,
            "iterations": list(self.iterations_),
            "n_rows": self.n_rows_,
            "impossible": [[int(j) for j in np.flatnonzero(row)] for row in self.impossible_],
            "converged": self.converged_,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "DCC":
        """Rebuild a fitted DCC from :meth:`to_dict` output (τ and λ are not stored)."""
        if not isinstance(d, dict) or d.get("learner") != "dcc":
            raise InputError(f"not a DCC model (learner {d.get('learner') if isinstance(d, dict) else d!r})")
        try:
            p = d.get("params", {})
            model = cls(
                s=p.get("s"),
                coverage=float(p.get("coverage", 0.95)),
                max_edges=None if p.get("max_edges") is None else int(p["max_edges"]),
                greedy=bool(p.get("greedy", False)),
                greedy_tol=float(p.get("greedy_tol", 1e-4)),
                greedy_candidates=None if p.get("greedy_candidates") is None else int(p["greedy_candidates"]),
                tol=float(p.get("tol", 1e-9)),
                bound=float(p.get("bound", 1e3)),
            )
            pmap = PairwiseFeatureMap.from_dict(d["map"])
            mu = np.asarray(d["mu"], dtype=np.float64)
            classes = tuple(str(c) for c in d["classes"])
            if mu.shape != (len(classes), pmap.dim):
                raise InputError(f"model mu has shape {mu.shape}, expected {(len(classes), pmap.dim)}")
            if not np.all(np.isfinite(mu)):
                raise InputError("model mu contains NaN or infinity")
            imp = np.zeros(mu.shape, dtype=bool)
            for y, cols in enumerate(d.get("impossible", [[] for _ in classes])):
                imp[y, np.asarray(cols, dtype=np.int64)] = True
            model.pmap_ = pmap
            model.blocks_ = list(pmap.blocks)
            model.feature_names_ = pmap.names
            model.classes_ = classes
            model.edges_ = pmap.edge_names
            model.edge_weights_ = [float(w) for w in d.get("edge_weights", [np.nan] * pmap.n_edges)]
            model.mu_ = mu
            model.phi_ = float(d["phi"])
            model.nu_ = model.phi_ + 1.0
            model.worst_case_error_ = float(d["worst_case_error"])
            model.iterations_ = [float(v) for v in d.get("iterations", [])]
            model.n_rows_ = int(d.get("n_rows", 0))
            model.impossible_ = imp
            model.converged_ = bool(d.get("converged", True))
            model.fingerprint_ = str(d["fingerprint"])
            model.n_ = float(d.get("n", float("nan")))
            model.tau_ = None
            model.lambda_ = None
            model.row_rounds_ = {"lower": [], "upper": []}
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"malformed DCC model: {exc}") from None
        return model
