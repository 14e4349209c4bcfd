"""The DCC-style pairwise classifier: the 0-1 MRC with node and edge indicators on a forest.

Feature map. With node blocks as in :mod:`learners.featuremap` (one-hot 1{x_i = a}, or the
clipped value of a raw numeric feature) and, for every edge (i, j) of a forest over the
discrete features, the m_i·m_j indicators 1{x_i = a, x_j = b} (column a·m_j + b of the edge
block), Ψ(x) ∈ R^D is their concatenation and Φ(x, y) = e_y ⊗ Ψ(x), stored (K, D).

The learner solves the MRC of seed 000 over the WHOLE codebook domain X::

    R* = min_μ 1 − τᵀμ + φ(μ) + λᵀ|μ|,
    φ(μ) = max_{x ∈ X, ∅≠C⊆Y} (Σ_{y∈C} Φ(x,y)ᵀμ − 1)/|C|,

with τ from the first-order tables N[x_i, y] (nodes) and the pair-with-label tables
N[x_i, x_j, y] (edges). With λ = 0, R* is the largest Bayes error — equivalently the
worst-case error of the randomized rule (6) — over all distributions whose (X_i, Y) and
(X_i, X_j, Y) marginals (on the forest's edges) equal the released ones: the 0-1-loss
version of the Discrete Chebyshev Classifier (Eban, Mezuman, Globerson, ICML 2014, which
minimises the worst-case hinge loss over the marginals of all pairs, with MAP-LP
relaxations of the inner maximum).

Separation oracle. For a label subset C, with s_C = Σ_{y∈C} μ[y], the score
max_x s_Cᵀ Ψ(x) = max_x Σ_i θ_i(x_i) + Σ_{(i,j)∈E} θ_ij(x_i, x_j) is a max-sum problem on
a forest: leaves-to-root messages m_{c→p}(x_p) = max_{x_c} θ_pc(x_p, x_c) + θ_c(x_c) +
Σ_{children k of c} m_{k→c}(x_c), then backtracking — exact, O(|E|·m²) per subset
(:class:`ForestOracle`). It plugs into the MRC's row generation
(:func:`learners.mrc_lp.solve_boxed` on a :class:`learners.mrc_lp.MinimaxLP`) unchanged
(``solver="rows"``). The same DP written as linear constraints on message variables is an
exact compact form of the LP (:func:`solve_compact`, ``solver="compact"``, the default):
one HiGHS solve instead of hundreds of cutting-plane rounds (credit-a: 0.2 s instead of
minutes). Both are tested against the brute-force joint LP.

With λ = 0 the LP's optimal μ is far from unique: one-hot blocks and edge blocks can trade
functions of x_i, and a constant added to every label's score changes nothing. The LP is
therefore solved in a reference coding with the same score functions
(:func:`reference_mask`, :func:`common_constant`); empty cells (τ = λ = 0) are −∞ in the
LP (excluded) and given definite values afterwards (:func:`fix_empty_cells_forest`).

Structure. Either the maximum-weight spanning forest on I(X_i; X_j | Y) (TAN / Chow–Liu,
``edge_weight="cmi"``) or on I(X_i, X_j; Y) (``edge_weight="label"``) (:mod:`learners.structure`),
or greedily (``greedy=True``): starting from the first-order
model, add the edge (keeping a forest) whose R* is lowest while R* drops by more than
``greedy_tol``. A candidate whose marginals the current worst-case distribution α already
matches, v_e = max |P_α(x_i, x_j, y) − τ_e| − λ_e ≤ 0, provably cannot lower R* (α stays
dual feasible) and is skipped; of the others, the ``greedy_candidates`` that tell most
about the label, I(X_i, X_j; Y), are solved exactly (the size of the violation itself
ranks the helpful edges poorly: α is one of many worst-case distributions). With
``solver="compact"`` α comes from the LP duals (flows on the forest, extended as a
tree-Markov distribution); with ``solver="rows"`` it is the dual over the generated rows,
which carry every candidate edge's coefficients (one warm-started LP).

Any edge set (``structure="all"`` or a list of pairs, :func:`solve_local`). On a graph with
a cycle the max over x is intractable in general; it is replaced by the dual of the MAP-LP
over the local polytope (a reparametrisation δ per label subset: u_i ≥ θ_i(a) +
Σ_{j∈N(i)} δ_{ij→i}(a), u_ij ≥ θ_ij(a, b) − δ_{ij→i}(a) − δ_{ij→j}(b), Σu ≤ |C|·ν + 1 − |C|),
jointly linear in (μ, δ, u, ν): one LP whose value R*_L ≥ R* is still a valid certificate
for the distributions matching all the used pair-with-label tables, exact on a forest,
and never above the forest R* of any spanning subgraph (its missing edges at μ = 0, δ = 0).
Empty cells are then fixed at the LP's δ, where the bound splits by factor
(:func:`fix_empty_cells_local`). Rule (6) uses the certified φ_L(μ; δ) ≥ φ(μ).

Hinge loss (``loss="hinge"``, binary labels, :func:`solve_hinge`). The published DCC's
objective: a score f(x) = Σ_i f_i(x_i) + Σ_{(i,j)∈E} f_ij(x_i, x_j) on the same forest and
blocks minimising the worst-case hinge loss max_{p∈U} E_p[max(0, 1 − s_y f(x))]
(s_y = ∓1 for labels 0/1) over the same uncertainty set U. Its LP dual turns the inner
max into two forest minima per label, written with the same message constraints
(:func:`forest_max_rows`, shared with :func:`solve_compact`): one LP in f and the duals.
That value is exactly 2·R* (R* = max_{p∈U} Bayes error, the 0-1 value): ≥ because
E_p[hinge] ≥ 2·Bayes(p) for every f; ≤ because, by LP duality for a fixed p, the best f
leaves a sub-measure q ≤ p whose two labels have equal node/edge moments, and moving q's
label-1 part onto its label-0 part keeps p in U and makes Bayes(p) ≥ Σq/2. So the hinge
loss does not change the worst case, only which optimal score is returned; its clipped
randomized rule h(1|x) = (1 + clip(f, −1, 1))/2 attains R*, and the deterministic rule
sign f has worst-case 0-1 error in [R*, 2R*].
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from marg.errors import InputError

from .calibration import confidence_lambda
from .featuremap import Block, FeatureMap
from .mrc_lp import Cut, MinimaxLP, label_subsets, solve_boxed
from .rules import MinimaxRules, naive_bayes_logp
from .structure import UnionFind, max_spanning_forest, pair_label_information, pair_weights


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
EXCLUDED = 1e12  # potential of an excluded (empty) cell: a row through it is never the maximum
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
        self.subsets = label_subsets(self.K)
        self.sizes = np.array([len(c) for c in self.subsets], dtype=np.float64)
        self.member = np.zeros((len(self.subsets), self.K))
        for k, c in enumerate(self.subsets):
            self.member[k, list(c)] = 1.0
        fm = pmap.nodes
        self._nv = np.array([b.n_vertices for b in fm.blocks], dtype=np.int64)
        self._vcols = [fm.vertex_col[fm.vertex_start[i] : fm.vertex_start[i] + self._nv[i]] for i in range(fm.n_blocks)]
        self._vvals = [fm.vertex_val[fm.vertex_start[i] : fm.vertex_start[i] + self._nv[i]] for i in range(fm.n_blocks)]
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
        self._penalty = None
        self._dead = None
        if exclude is not None:
            ex = np.asarray(exclude, dtype=bool).reshape(self.K, self.D)
            self._dead = ex.all(axis=0)
            hit = (self.member @ ex) > 0  # (nC, D): some label of C is excluded at the column
            if hit.any():
                self._penalty = np.where(hit, -EXCLUDED, 0.0)
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
        if self._penalty is not None:
            S = S + self._penalty
        return S

    def _node_pot(self, S: np.ndarray, i: int) -> np.ndarray:
        return S[:, self._vcols[i]] * self._vvals[i][None, :]

    def _edge_pot(self, S: np.ndarray, c: int, pedge: np.ndarray | None = None) -> np.ndarray:
        """θ_{p c}(x_p, x_c) for the edge from c to its parent p, shape (nC, m_p, m_c)."""
        e = int((self.parent_edge if pedge is None else pedge)[c])
        mi, mj = self.pmap.edge_shape[e]
        off = int(self.pmap.edge_offset[e])
        E = S[:, off : off + mi * mj].reshape(S.shape[0], mi, mj)
        if self.pmap.edges[e][0] == c:  # stored (c, p): transpose to (p, c)
            E = E.transpose(0, 2, 1)
        return E

    def _upward(self, S: np.ndarray, order: Sequence[int] | None = None, parent: np.ndarray | None = None, pedge: np.ndarray | None = None):
        """Leaves-to-root max-sum messages over ``order`` (default: the whole forest, BFS order)."""
        n = self.pmap.n_nodes
        if order is None:
            order, parent, pedge = self.order, self.parent, self.parent_edge
        acc: list[np.ndarray | None] = [None] * n
        for i in order:
            acc[i] = self._node_pot(S, i)
        msg: list[np.ndarray | None] = [None] * n
        arg: list[np.ndarray | None] = [None] * n
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
        V = int(self._nv.sum())
        vals = np.empty((nC, V))
        X = np.empty((nC, V, n), dtype=np.int64)
        start = 0
        for i in range(n):
            order, parent, pedge = self._rooted[i]
            acc, _, arg = self._upward(S, order, parent, pedge)
            m = int(self._nv[i])
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
            ecols = pm.edge_offset + x[pm._ei] * pm._emj + x[pm._ej]
            cols = np.concatenate([cols, ecols])
            vals = np.concatenate([vals, np.ones(ecols.size)])
        idx = np.concatenate([y * self.D + cols for y in c])
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
        if self.tau is None:
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
        R = float(-self.tau @ mu + self.lam @ np.abs(mu)) + float(np.max((values - 1.0) / self.sizes)) + 1.0
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
        node_ok = [~dead[self._vcols[i]] if pm.blocks[i].kind == "onehot" else np.ones(int(self._nv[i]), dtype=bool) for i in range(n)]
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
        if self._penalty is None:
            return True
        pm = self.pmap
        fm = pm.nodes
        cols = fm.vertex_col[fm.vertex_start + np.asarray(x, dtype=np.int64)]
        if self.active:
            a = np.asarray(self.active, dtype=np.int64)
            cols = np.concatenate([cols, pm.edge_offset[a] + x[pm._ei[a]] * pm._emj[a] + x[pm._ej[a]]])
        return not np.any(self._penalty[k, cols] < 0)

    def covering_cuts(self, edges: Sequence[int] | None = None, nodes: bool = True) -> list[Cut]:
        """Rows (x, C) for every C and every assignment of :meth:`covering_assignments`
        (rows crossing an excluded cell left out)."""
        return [
            self.cut_for(k, x, np.nan)
            for x in self.covering_assignments(edges, nodes)
            for k in range(len(self.subsets))
            if self.allowed(k, x)
        ]


class _Rows:
    """Sparse ``A_ub`` rows (row index, column, value), right-hand sides and a tag per row."""

    def __init__(self) -> None:
        self.R: list[np.ndarray] = []
        self.C: list[np.ndarray] = []
        self.V: list[np.ndarray] = []
        self.rhs: list[float] = []
        self.meta: list[tuple] = []
        self.n = 0

    def add(self, cols, vals, rhs: float, meta: tuple = ()) -> None:
        cols = np.asarray(cols, dtype=np.int64)
        self.R.append(np.full(cols.size, self.n, dtype=np.int64))
        self.C.append(cols)
        self.V.append(np.asarray(vals, dtype=np.float64))
        self.rhs.append(float(rhs))
        self.meta.append(meta)
        self.n += 1

    def add_block(self, R, C, V, rhs, meta: tuple = ()) -> None:
        """Many rows at once: entries (R[t], C[t], V[t]) with LOCAL row indices 0..len(rhs)−1."""
        rhs = np.asarray(rhs, dtype=np.float64).ravel()
        self.R.append(np.asarray(R, dtype=np.int64) + self.n)
        self.C.append(np.asarray(C, dtype=np.int64))
        self.V.append(np.asarray(V, dtype=np.float64))
        self.rhs.extend(rhs.tolist())
        self.meta.extend([meta] * rhs.size)
        self.n += int(rhs.size)

    def matrix(self, nvar: int):
        import scipy.sparse as sp

        if not self.R:
            return sp.csr_array((self.n, nvar))
        return sp.csr_array((np.concatenate(self.V), (np.concatenate(self.R), np.concatenate(self.C))), shape=(self.n, nvar))


def forest_max_rows(
    oracle: ForestOracle,
    dead_col: np.ndarray,
    terms: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
    nvar: int,
    rows: _Rows,
    tag: Any = 0,
) -> tuple[np.ndarray | None, int]:
    """Rows making Σ_r t_r ≥ max_x g(x) for g(x) = Σ_i g_i(x_i) + Σ_{(i,j)∈E} g_ij(x_i, x_j)
    on the oracle's active forest, with every factor value linear in the LP variables.

    The max-sum DP written as constraints on new free message variables (the smallest
    feasible messages are the DP's)::

        m_c(x_p) ≥ g_pc(x_p, x_c) + g_c(x_c) + Σ_{k child of c} m_k(x_c)   for every (x_p, x_c),
        t_r ≥ g_r(x_r) + Σ_{k child of r} m_k(x_r)                          for every root value.

    So "max_x g(x) ≤ T" holds iff Σ_r t_r ≤ T is feasible with these rows; the caller adds
    that row (with its own T). A min is the max of the negation. Cells with ``dead_col``
    True are −∞ (x through them is outside the max): their rows are dropped, and a parent
    value with no allowed continuation is dropped upwards.

    Parameters
    ----------
    oracle : ForestOracle
        Map and active forest.
    dead_col : ndarray of bool (D,)
        Ψ columns that are −∞ (one-hot node levels and edge cells).
    terms : callable
        ``terms(psi_cols, vals)`` -> (LP columns, LP values) of the linear expression
        Σ_t vals[t]·g[psi_cols[t]] (g a linear function of the LP variables per Ψ column).
    nvar : int
        Number of LP variables so far; the message and root variables come next.
    rows : _Rows
        Receives the rows, tagged (tag, 0, c, x_p, x_c) for an edge row and
        (tag, 1, r, x_r, 0) for a root row.
    tag : any

    Returns
    -------
    roots : ndarray of int (n_roots,) or None
        The root epigraph variables t_r (free); None, with no rows added, when some root has
        no allowed value (the max is over an empty set: −∞, the bound holds vacuously).
    nvar : int
        The new number of LP variables.
    """
    pm = oracle.pmap
    n = pm.n_nodes
    alive: list[np.ndarray] = []
    for i in range(n):
        alive.append(~dead_col[oracle._vcols[i]] if pm.blocks[i].kind == "onehot" else np.ones(int(oracle._nv[i]), dtype=bool))
    pending: list[tuple] = []
    for c in reversed(oracle.order):
        p = int(oracle.parent[c])
        if p < 0:
            continue
        e = int(oracle.parent_edge[c])
        mi, mj = pm.edge_shape[e]
        cells = pm.edge_columns(e).reshape(mi, mj)
        if pm.edges[e][0] == c:  # stored (c, p)
            cells = cells.T
        ok = ~dead_col[cells] & alive[c][None, :]  # (m_p, m_c)
        has = ok.any(axis=1)
        alive[p] = alive[p] & has
        pending.append((c, cells, ok, has))
    if any(not alive[r].any() for r in oracle.roots):
        return None, nvar
    msg_var: list[np.ndarray | None] = [None] * n  # per child: var index per parent value (−1: dead)
    for c, cells, ok, has in pending:
        var = np.full(cells.shape[0], -1, dtype=np.int64)
        var[has] = nvar + np.arange(int(has.sum()))
        nvar += int(has.sum())
        msg_var[c] = var
    for c, cells, ok, has in pending:
        kids = oracle.children[c]
        var = msg_var[c]
        for a, b in zip(*np.nonzero(ok)):
            cols, vals = terms(np.array([cells[a, b]]), np.ones(1))
            nc, nvv = terms(oracle._vcols[c][b : b + 1], oracle._vvals[c][b : b + 1])
            kc = np.asarray([int(msg_var[q][b]) for q in kids], dtype=np.int64)
            rows.add(np.concatenate([cols, nc, kc, [var[a]]]), np.concatenate([vals, nvv, np.ones(kc.size), [-1.0]]), 0.0,
                     (tag, 0, c, int(a), int(b)))
    roots = nvar + np.arange(len(oracle.roots))
    nvar += len(oracle.roots)
    for t, r in enumerate(oracle.roots):
        kids = oracle.children[r]
        for a in np.flatnonzero(alive[r]):
            nc, nvv = terms(oracle._vcols[r][a : a + 1], oracle._vvals[r][a : a + 1])
            kc = np.asarray([int(msg_var[q][a]) for q in kids], dtype=np.int64)
            rows.add(np.concatenate([nc, kc, [roots[t]]]), np.concatenate([nvv, np.ones(kc.size), [-1.0]]), 0.0, (tag, 1, r, int(a), 0))
    return roots, nvar


class _MuTerms:
    """LP (column, value) pairs of μ = μ⁺ − μ⁻ in the layout ν | μ⁺ (nmu) | μ⁻ (nmu) | … of the
    0-1 minimax LPs (:func:`solve_compact`, :func:`solve_local`)."""

    def __init__(self, K: int, D: int, subsets: Sequence[tuple[int, ...]], columns: np.ndarray):
        self.K, self.D, self.subsets = K, D, subsets
        self.columns = np.asarray(columns, dtype=np.int64)
        self.nmu = self.columns.size
        self.pos = np.full(K * D, -1, dtype=np.int64)
        self.pos[self.columns] = np.arange(self.nmu)

    def terms(self, k: int, psi_cols: np.ndarray, vals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """LP (column, value) pairs of Σ_{y∈C} vals·μ[y, psi_cols] (μ⁺ − μ⁻), C = subsets[k]."""
        cols, vs = [], []
        for y in self.subsets[k]:
            p_ = self.pos[y * self.D + psi_cols]
            on = p_ >= 0
            cols += [1 + p_[on], 1 + self.nmu + p_[on]]
            vs += [vals[on], -vals[on]]
        return (np.concatenate(cols), np.concatenate(vs)) if cols else (np.zeros(0, np.int64), np.zeros(0))

    def entries(self, k: int, row: np.ndarray, psi_cols: np.ndarray, vals: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(row, LP column, value) triples of Σ_{y∈C} vals[t]·μ[y, psi_cols[t]] in row[t], vectorized."""
        R, C, V = [], [], []
        for y in self.subsets[k]:
            p_ = self.pos[y * self.D + psi_cols]
            on = p_ >= 0
            R += [row[on], row[on]]
            C += [1 + p_[on], 1 + self.nmu + p_[on]]
            V += [vals[on], -vals[on]]
        if not R:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
        return np.concatenate(R), np.concatenate(C), np.concatenate(V)

    def cost_and_bounds(self, tau: np.ndarray, lam: np.ndarray, nvar: int) -> tuple[np.ndarray, np.ndarray]:
        """Objective ν − (τ − λ)ᵀμ⁺ + (τ + λ)ᵀμ⁻ and bounds (ν free, μ± ≥ 0, the rest free)."""
        nmu = self.nmu
        c = np.zeros(nvar)
        c[0] = 1.0
        c[1 : 1 + nmu] = -(tau - lam)[self.columns]
        c[1 + nmu : 1 + 2 * nmu] = (tau + lam)[self.columns]
        bounds = np.zeros((nvar, 2))
        bounds[:, 1] = np.inf
        bounds[0] = (-np.inf, np.inf)
        bounds[1 + 2 * nmu :] = (-np.inf, np.inf)
        return c, bounds

    def mu(self, x: np.ndarray) -> np.ndarray:
        out = np.zeros(self.K * self.D)
        out[self.columns] = x[1 : 1 + self.nmu] - x[1 + self.nmu : 1 + 2 * self.nmu]
        return out


# --------------------------------------------------------------------------------------
# Exact compact LP: the max-sum DP written as constraints
# --------------------------------------------------------------------------------------
def solve_compact(
    oracle: ForestOracle,
    tau: np.ndarray,
    lam: np.ndarray,
    columns: np.ndarray,
) -> tuple[float, np.ndarray]:
    """LP (13) over the active forest in exact epigraph form, one HiGHS solve, no rows generated.

    For a label subset C, max_x Σ_{y∈C} Φ(x,y)ᵀμ ≤ T holds iff there are messages m with

        m_c(x_p) ≥ θ_pc(x_p, x_c) + θ_c(x_c) + Σ_{k child of c} m_k(x_c)   for every (x_p, x_c),
        t_r ≥ θ_r(x_r) + Σ_{k child of r} m_k(x_r)                          for every root value,
        Σ_roots t_r ≤ T,

    (the smallest feasible messages are the DP's; :func:`forest_max_rows`), with θ linear in μ. So the exponentially
    many rows (x, C) of LP (13) become, per C, Σ_edges m_p·m_c + Σ_roots m_r + 1 rows:
    Σ_r t_{C,r} − |C|·ν ≤ 1 − |C|. Cells the oracle excludes (τ = λ = 0) are −∞: their
    constraints are dropped, and a value with no allowed continuation is dropped upwards.

    Parameters
    ----------
    oracle : ForestOracle
        Map, active forest, label subsets and excluded cells.
    tau, lam : ndarray (K, D)
    columns : ndarray of int
        Flat μ indices in the LP (the others are fixed at 0).

    Returns
    -------
    CompactSolution
        The LP optimum R*, μ, and the worst-case distribution's flows (from the duals).

    Raises
    ------
    InputError
        If the LP is unbounded (no distribution matches τ within λ) or HiGHS fails.
    """
    from scipy.optimize import linprog

    K, D = oracle.K, oracle.D
    tau = np.asarray(tau, dtype=np.float64).ravel()
    lam = np.asarray(lam, dtype=np.float64).ravel()
    mt = _MuTerms(K, D, oracle.subsets, columns)
    # variables: ν | μ⁺ (nmu) | μ⁻ (nmu) | messages and root epigraphs
    nvar = 1 + 2 * mt.nmu
    pen = oracle._penalty
    rows = _Rows()
    for k, Cset in enumerate(oracle.subsets):
        dead_col = (pen[k] < 0) if pen is not None else np.zeros(D, dtype=bool)
        roots, nvar = forest_max_rows(oracle, dead_col, lambda cols_, vals_, k=k: mt.terms(k, cols_, vals_), nvar, rows, tag=k)
        if roots is None:
            continue
        size = len(Cset)
        rows.add(np.concatenate([roots, [0]]), np.concatenate([np.ones(len(roots)), [-float(size)]]), 1.0 - size, (k, 2, -1, 0, 0))
    meta = rows.meta
    cvec, bounds = mt.cost_and_bounds(tau, lam, nvar)
    A = rows.matrix(nvar)
    res = linprog(cvec, A_ub=A, b_ub=np.asarray(rows.rhs), bounds=bounds, method="highs-ds",
                  options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10})
    if res.status == 3:
        raise InputError("no distribution matches the statistics within lambda: the DCC problem is unbounded; the released tables are inconsistent")
    if res.status != 0:
        raise InputError(f"the DCC compact LP failed: {res.message}")
    mu = mt.mu(res.x)
    # the worst-case distribution: per subset C, the flow w_C on the forest (LP duals)
    mass = np.clip(-np.asarray(res.ineqlin.marginals, dtype=np.float64), 0.0, None)
    flows = [{"edge": {}, "root": {}, "total": 0.0} for _ in oracle.subsets]
    for r_, (k, kind, v, a, b) in enumerate(meta):
        f = flows[k]
        if kind == 0:
            c = v
            shape = (int(oracle._nv[int(oracle.parent[c])]), int(oracle._nv[c]))
            f["edge"].setdefault(c, np.zeros(shape))[a, b] += mass[r_]
        elif kind == 1:
            f["root"].setdefault(v, np.zeros(int(oracle._nv[v])))[a] += mass[r_]
        else:
            f["total"] = float(mass[r_])
    return CompactSolution(float(res.fun), mu, flows)


class CompactSolution(NamedTuple):
    """Output of :func:`solve_compact`.

    Attributes
    ----------
    value : float
        The LP optimum R*.
    mu : ndarray (K·D,)
    flows : list (one per label subset C) of dict
        The LP duals as the worst-case distribution's structure: ``flows[k]["edge"][c]``
        (m_parent, m_c) is the mass w_C(x_p = a, x_c = b) on the edge from node c to its
        parent, ``flows[k]["root"][r]`` the mass w_C(x_r = a) at a root, ``flows[k]["total"]``
        the total mass β_C, with Σ_C |C|·β_C = 1 and p(x, y) = Σ_{C∋y} w_C(x).
    """

    value: float
    mu: np.ndarray
    flows: list


# --------------------------------------------------------------------------------------
# Arbitrary edge sets: the local-polytope (MAP-LP) relaxation of the separation
# --------------------------------------------------------------------------------------
class _GraphLayout:
    """Index arrays of a :class:`PairwiseFeatureMap` on any edge set (cycles allowed).

    Vertices (node values: one-hot levels, or {lo, hi} of a raw numeric node) as in
    :class:`learners.featuremap.FeatureMap`; one δ "slot" per (edge, endpoint, value of the
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
        cat = lambda xs: np.concatenate(xs).astype(np.int64) if xs else np.zeros(0, dtype=np.int64)  # noqa: E731
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
        val = theta + offsets
        for col, lo, hi in self.numeric:
            val[..., col] = np.maximum(lo * theta[..., col], hi * theta[..., col])
        return val

    def factor_max(self, val: np.ndarray) -> np.ndarray:
        """u_f = max of the rows of every factor f, (…, n + E)."""
        return np.maximum.reduceat(val, self.starts, axis=-1)


class LocalSolution(NamedTuple):
    """Output of :func:`solve_local`.

    Attributes
    ----------
    value : float
        The LP optimum R*_L (≥ R*, = R* on a forest).
    mu : ndarray (K·D,)
    nu : float
        ν = φ_L + 1 at the optimum.
    offsets : ndarray (n_subsets, D)
        The optimal reparametrisation δ per label subset, as each Ψ column's δ part
        (:meth:`_GraphLayout.offsets`; 0 on vertices and cells without a row).
    vacuous : ndarray of bool (n_subsets,)
        Subsets with no row (some node or edge has no allowed value: the max is −∞).
    n_rows : int
    n_vars : int
    """

    value: float
    mu: np.ndarray
    nu: float
    offsets: np.ndarray
    vacuous: np.ndarray
    n_rows: int
    n_vars: int


def solve_local(
    pmap: PairwiseFeatureMap,
    n_classes: int,
    tau: np.ndarray,
    lam: np.ndarray,
    columns: np.ndarray,
    exclude: np.ndarray | None = None,
    method: str = "highs-ds",
) -> LocalSolution:
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
    method : str
        scipy ``linprog`` HiGHS method.

    Returns
    -------
    LocalSolution

    Raises
    ------
    InputError
        If the LP is unbounded (no distribution matches τ within λ) or HiGHS fails.
    """
    from scipy.optimize import linprog

    K, D = int(n_classes), pmap.dim
    tau = np.asarray(tau, dtype=np.float64).ravel()
    lam = np.asarray(lam, dtype=np.float64).ravel()
    subsets = label_subsets(K)
    member = np.zeros((len(subsets), K))
    for k, c in enumerate(subsets):
        member[k, list(c)] = 1.0
    ex = np.zeros((K, D), dtype=bool) if exclude is None else np.asarray(exclude, dtype=bool).reshape(K, D)
    dead_all = (member @ ex) > 0
    g = _GraphLayout(pmap)
    n, E = g.n, g.E
    mt = _MuTerms(K, D, subsets, columns)
    nvar = 1 + 2 * mt.nmu
    rows = _Rows()
    vacuous = np.zeros(len(subsets), dtype=bool)
    dslots: list[tuple[int, np.ndarray] | None] = []
    for k, Cset in enumerate(subsets):
        dead = dead_all[k]
        valive = ~(dead[g.vcol] & g.vonehot)
        calive = ~dead[g.ecol] & valive[g.slot_vertex[g.slot_i]] & valive[g.slot_vertex[g.slot_j]]
        if np.any(np.bincount(g.vnode[valive], minlength=n) == 0) or np.any(np.bincount(g.e_of[calive], minlength=E) == 0):
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
        rows.add(np.concatenate([u0 + np.arange(n + E), [0]]), np.concatenate([np.ones(n + E), [-float(size)]]), 1.0 - size, (k,))
    cvec, bounds = mt.cost_and_bounds(tau, lam, nvar)
    res = linprog(cvec, A_ub=rows.matrix(nvar), b_ub=np.asarray(rows.rhs), bounds=bounds, method=method,
                  options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10})
    if res.status == 3:
        raise InputError("no distribution matches the statistics within lambda: the DCC problem is unbounded; the released tables are inconsistent")
    if res.status != 0:
        raise InputError(f"the DCC local-polytope LP failed: {res.message}")
    delta = np.zeros((len(subsets), g.n_slots))
    for k, ds in enumerate(dslots):
        if ds is not None:
            d0, live = ds
            delta[k] = np.where(live, res.x[d0 : d0 + g.n_slots], 0.0)
    return LocalSolution(float(res.fun), mt.mu(res.x), float(res.x[0]), g.offsets(delta), vacuous, rows.n, nvar)


def local_phi(pmap: PairwiseFeatureMap, mu: np.ndarray, offsets: np.ndarray) -> float:
    """φ_L(μ; δ) = max_C (Σ_f u_f^C − 1)/|C|, u_f^C the largest row of factor f at the fixed
    reparametrisation ``offsets`` (n_subsets, D): an upper bound on φ(μ) for every δ."""
    K = mu.shape[0]
    subsets = label_subsets(K)
    member = np.zeros((len(subsets), K))
    for k, c in enumerate(subsets):
        member[k, list(c)] = 1.0
    g = _GraphLayout(pmap)
    u = g.factor_max(g.row_values(member @ mu, offsets))
    return float(np.max((u.sum(axis=1) - 1.0) / member.sum(axis=1)))


def fix_empty_cells_local(
    pmap: PairwiseFeatureMap,
    mu: np.ndarray,
    tau: np.ndarray,
    lam: np.ndarray,
    offsets: np.ndarray,
    nu: float,
    policy: str = "evidence",
    n: float | None = None,
    alpha: float = 0.05,
) -> tuple[np.ndarray, np.ndarray, float]:
    """:func:`fix_empty_cells_forest` for the local-polytope LP: definite values for the empty
    cells (τ + λ = 0) that keep the certified bound φ_L ≤ ν − 1 at the LP's reparametrisation.

    With δ fixed the bound decomposes by factor: per subset C, Σ_f u_f^C ≤ T_C =
    |C|(ν − 1) + 1 with u_f^C the largest row of factor f (:class:`_GraphLayout`). Empty
    cells first go to a value L below every other row (so each u_f^C is the LP's); then,
    factor by factor (nodes, then edges), they are raised as far as the slack
    T_C − Σ_f u_f^C and the factor's own largest row allow — the local stand-in for the
    forest's max-marginals (so more conservative): an unseen cell (empty for every label)
    to the label-neutral min(0, c), a cell empty for some labels per ``policy`` exactly as
    in :func:`fix_empty_cells_forest` (``"free"``: min(c_y, the best seen label);
    ``"impossible"``: stays at L; ``"evidence"``: stays at L only for significant absences).

    Returns
    -------
    mu : ndarray (K, D)
    empty : ndarray of bool (K, D)
    phi : float
        φ_L(μ; δ) of the returned μ (≤ ν − 1 up to LP tolerances).
    """
    if policy not in POLICIES:
        raise InputError(f"unknown empty-cell policy {policy!r} (expected one of {', '.join(POLICIES)})")
    if policy == "evidence" and not (n is not None and n > 0):
        raise InputError(f"the 'evidence' empty-cell policy needs the row count n > 0, got {n!r}")
    K, D = mu.shape
    mu = mu.copy()
    g = _GraphLayout(pmap)
    subsets = label_subsets(K)
    member = np.zeros((len(subsets), K))
    for k, c in enumerate(subsets):
        member[k, list(c)] = 1.0
    sizes = member.sum(axis=1)
    empty = empty_cells(pmap, tau, lam)
    if not empty.any():
        return mu, empty, local_phi(pmap, mu, offsets)
    fin = g.row_values(member @ np.where(empty, 0.0, mu), offsets)
    crossed = (member @ empty) > 0
    u_alive = g.factor_max(np.where(crossed, -np.inf, fin))
    big = float(np.max(np.abs(fin))) + float(np.max(np.abs(u_alive[np.isfinite(u_alive)]), initial=0.0))
    mu[empty] = -(2.0 * big + 10.0)
    unseen, part = _empty_targets(pmap, tau, empty, policy, n, alpha)
    T = sizes * (float(nu) - 1.0) + 1.0
    val = g.row_values(member @ mu, offsets)
    u = g.factor_max(val)
    slack = T - u.sum(axis=1)
    ends = np.append(g.starts[1:], D)
    for f in range(g.n + g.E):
        cols = np.arange(g.starts[f], ends[f])
        if f < g.n and pmap.blocks[f].kind != "onehot":
            continue
        uu = unseen[cols]
        py = part[:, cols]
        if not (uu.any() or py.any()):
            continue

        def update() -> None:
            val[:, cols] = member @ mu[:, cols] + offsets[:, cols]  # one-hot factors only
            new = np.maximum(u[:, f], val[:, cols].max(axis=1))
            slack[:] -= new - u[:, f]
            u[:, f] = new

        if uu.any():  # every label gets c: the row is |C|·c + offset
            cap = (u[:, f, None] + slack[:, None] - offsets[:, cols]) / sizes[:, None]
            c = np.minimum(cap.min(axis=0), 0.0)
            mu[:, cols[uu]] = c[uu][None, :]
            update()
        for y in range(K):
            if not py[y].any():
                continue
            inC = member[:, y] > 0
            own = val[inC][:, cols] - mu[y, cols][None, :]
            c = (u[inC, f][:, None] + slack[inC][:, None] - own).min(axis=0)
            seen = np.where(empty[:, cols], -np.inf, mu[:, cols]).max(axis=0)
            mu[y, cols[py[y]]] = np.minimum(c, seen)[py[y]]
            update()
    return mu, empty, local_phi(pmap, mu, offsets)


# --------------------------------------------------------------------------------------
# Worst-case hinge loss (the Discrete Chebyshev Classifier's objective), binary labels
# --------------------------------------------------------------------------------------
class HingeSolution(NamedTuple):
    """Output of :func:`solve_hinge`.

    Attributes
    ----------
    value : float
        min_f max_{p∈U} E_p[max(0, 1 − s_y f(x))].
    f : ndarray (D,)
        Coefficients of the score f(x) = Ψ(x)ᵀf (zero outside ``f_columns``).
    theta : ndarray (2, D)
        The dual prices θ of the indicator moments (zero outside ``theta_columns``).
    nu : float
        The dual price of Σ p = 1.
    n_rows : int
        Rows of the LP.
    """

    value: float
    f: np.ndarray
    theta: np.ndarray
    nu: float
    n_rows: int


def solve_hinge(
    oracle: ForestOracle,
    tau: np.ndarray,
    lam: np.ndarray,
    f_columns: np.ndarray,
    theta_columns: np.ndarray,
    dead: np.ndarray,
) -> HingeSolution:
    """The minimax hinge loss over the forest's moment box, as ONE exact LP (binary labels).

    With s_y = −1 for label 0 and +1 for label 1, a score f(x) = Σ_i f_i(x_i) +
    Σ_{(i,j)∈E} f_ij(x_i, x_j) on the oracle's forest, and U = {p(x, y) ≥ 0, Σ p = 1:
    |E_p[Φ(x,y)] − τ| ≤ λ} for the node and edge indicators Φ(x, y) = e_y ⊗ Ψ(x), LP duality
    (dual prices θ = θ⁺ − θ⁻ of the two-sided moment rows, ν of Σ p = 1) gives

        max_{p∈U} E_p[max(0, 1 − s_y f(x))]
          = min_{θ⁺,θ⁻ ≥ 0, ν} ν + τᵀθ + λᵀ(θ⁺ + θ⁻)
            s.t. ν + θ(x, y) ≥ max(0, 1 − s_y f(x)) for every (x, y),

    θ(x, y) = Φ(x, y)ᵀθ. Per label y the constraint is two forest minima,
    (A) min_x θ(x, y) + ν ≥ 0 and (B) min_x θ(x, y) + s_y f(x) + ν ≥ 1, each written
    exactly with message variables (:func:`forest_max_rows` on −θ(·, y) and
    −θ(·, y) − s_y f). Minimising over f as well is one LP in (f, θ⁺, θ⁻, ν, messages).

    A cell with τ = λ = 0 for label y (``dead[y]``) carries no mass of label y in any
    p ∈ U, so every (x, y) through it is dropped from (A) and (B) (its θ is +∞; it must
    not be among ``theta_columns``).

    Parameters
    ----------
    oracle : ForestOracle
        Map and active forest (K = 2; its exclusions are ignored: ``dead`` is used).
    tau, lam : ndarray (2, D)
    f_columns : ndarray of int
        Ψ columns of f in the LP (the others are fixed at 0).
    theta_columns : ndarray of int
        Flat (y·D + j) entries of θ in the LP (the others are fixed at 0).
    dead : ndarray of bool (2, D)

    Returns
    -------
    HingeSolution

    Raises
    ------
    InputError
        If the LP is unbounded (no distribution matches τ within λ) or HiGHS fails.
    """
    from scipy.optimize import linprog

    K, D = oracle.K, oracle.D
    if K != 2:
        raise InputError(f"the hinge-loss DCC needs a binary label, got {K} classes")
    tau = np.asarray(tau, dtype=np.float64).ravel()
    lam = np.asarray(lam, dtype=np.float64).ravel()
    dead = np.asarray(dead, dtype=bool).reshape(K, D)
    f_columns = np.asarray(f_columns, dtype=np.int64)
    theta_columns = np.asarray(theta_columns, dtype=np.int64)
    nt, nf = theta_columns.size, f_columns.size
    tpos = np.full(K * D, -1, dtype=np.int64)
    tpos[theta_columns] = np.arange(nt)
    fpos = np.full(D, -1, dtype=np.int64)
    fpos[f_columns] = np.arange(nf)
    # variables: ν | θ⁺ (nt) | θ⁻ (nt) | f (nf) | messages and root epigraphs
    f0 = 1 + 2 * nt
    cost = [np.array([1.0]), (tau + lam)[theta_columns], -(tau - lam)[theta_columns], np.zeros(nf)]
    nvar = f0 + nf

    def terms(y: int, with_f: bool, psi_cols: np.ndarray, vals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """LP (column, value) pairs of Σ vals·(−θ[y, psi_cols] − s_y·f[psi_cols]) (f if ``with_f``)."""
        p_ = tpos[y * D + psi_cols]
        on = p_ >= 0
        cols = [1 + p_[on], 1 + nt + p_[on]]
        vs = [-vals[on], vals[on]]
        if with_f:
            q = fpos[psi_cols]
            onf = q >= 0
            cols.append(f0 + q[onf])
            vs.append(-(2.0 * y - 1.0) * vals[onf])
        return np.concatenate(cols), np.concatenate(vs)

    rows = _Rows()
    for y in range(K):
        for with_f, rhs in ((False, 0.0), (True, -1.0)):
            fn = lambda c_, v_, y=y, w=with_f: terms(y, w, c_, v_)  # noqa: E731
            roots, nvar = forest_max_rows(oracle, dead[y], fn, nvar, rows, tag=(y, with_f))
            if roots is None:  # no x is allowed with label y: no constraint
                continue
            # max_x g(x) ≤ Σ t_r ≤ ν + rhs
            rows.add(np.concatenate([roots, [0]]), np.concatenate([np.ones(len(roots)), [-1.0]]), rhs, (y, with_f, 2))
    cvec = np.concatenate(cost + [np.zeros(nvar - f0 - nf)])
    bounds = np.zeros((nvar, 2))
    bounds[:, 1] = np.inf
    bounds[0] = (-np.inf, np.inf)
    bounds[f0:] = (-np.inf, np.inf)
    res = linprog(cvec, A_ub=rows.matrix(nvar), b_ub=np.asarray(rows.rhs), bounds=bounds, method="highs-ds",
                  options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10})
    if res.status == 3:
        raise InputError("no distribution matches the statistics within lambda: the hinge DCC problem is unbounded; the released tables are inconsistent")
    if res.status != 0:
        raise InputError(f"the hinge DCC LP failed: {res.message}")
    theta = np.zeros(K * D)
    theta[theta_columns] = res.x[1 : 1 + nt] - res.x[1 + nt : 1 + 2 * nt]
    f = np.zeros(D)
    f[f_columns] = res.x[f0 : f0 + nf]
    return HingeSolution(float(res.fun), f, theta.reshape(K, D), float(res.x[0]), rows.n)


def pair_marginals(oracle: ForestOracle, flows: list, pairs: Sequence[tuple[int, int]]) -> dict[tuple[int, int], np.ndarray]:
    """Joint of (X_i, X_j, Y) under the worst-case distribution of a compact solve, extended
    off the forest as a tree-Markov distribution (one of the worst-case distributions: the
    LP only fixes its node and forest-edge marginals).

    Parameters
    ----------
    oracle : ForestOracle
        The oracle of that solve (its active forest).
    flows : list
        ``CompactSolution.flows``.
    pairs : sequence of (i, j)
        Node-index pairs (one-hot nodes).

    Returns
    -------
    dict (i, j) -> ndarray (K, m_i, m_j)
        p(x_i = a, x_j = b, y) = Σ_{C∋y} w_C(a, b).
    """
    n = oracle.pmap.n_nodes
    K = oracle.K
    nv = [int(v) for v in oracle._nv]
    adj: list[list[int]] = [[] for _ in range(n)]
    for v in range(n):
        p = int(oracle.parent[v])
        if p >= 0:
            adj[v].append(p)
            adj[p].append(v)
    by_source: dict[int, list[int]] = {}
    for i, j in pairs:
        by_source.setdefault(int(i), []).append(int(j))
    out = {(int(i), int(j)): np.zeros((K, nv[int(i)], nv[int(j)])) for i, j in pairs}
    for k, Cset in enumerate(oracle.subsets):
        f = flows[k]
        beta = f["total"]
        if beta <= 0:
            continue
        node = [np.zeros(nv[v]) for v in range(n)]
        for v in oracle.order:
            p = int(oracle.parent[v])
            if p < 0:
                node[v] = f["root"].get(v, np.zeros(nv[v]))
            else:
                node[v] = f["edge"].get(v, np.zeros((nv[p], nv[v]))).sum(axis=0)

        def cond(u: int, v: int) -> np.ndarray:
            """P(x_v | x_u) for neighbours u, v, shape (m_u, m_v)."""
            if int(oracle.parent[v]) == u:
                J = f["edge"].get(v, np.zeros((nv[u], nv[v])))
            else:
                J = f["edge"].get(u, np.zeros((nv[v], nv[u]))).T
            den = J.sum(axis=1, keepdims=True)
            return np.where(den > 0, J / np.where(den > 0, den, 1.0), 0.0)

        for i, targets in by_source.items():
            # P(x_v | x_i) over i's component, by BFS
            P = {i: np.eye(nv[i])}
            q = deque([i])
            while q:
                u = q.popleft()
                for v in adj[u]:
                    if v not in P:
                        P[v] = P[u] @ cond(u, v)
                        q.append(v)
            for j in targets:
                if j in P:
                    J = node[i][:, None] * P[j]
                else:  # another component: independent given the subset's mass
                    J = np.outer(node[i], node[j]) / beta
                for y in Cset:
                    out[(i, j)][y] += J
    return out


# --------------------------------------------------------------------------------------
# Gauge
# --------------------------------------------------------------------------------------
def reference_mask(pmap: PairwiseFeatureMap, tau: np.ndarray) -> np.ndarray:
    """Ψ columns of a reference coding that spans the same score functions per label.

    Per label, the scores Σ_i θ_i(x_i) + Σ_(i,j) θ_ij(x_i, x_j) are unchanged when a function
    of x_i moves between a node block and an edge block, or a constant between blocks: the
    one-hot parametrisation has a large null space. Keeping, for each one-hot node, every
    level but a reference level r_i (its most frequent one), all levels of the first one-hot
    node (the constant), every edge cell (a, b) with a ≠ r_i and b ≠ r_j, and every raw
    numeric column spans exactly the same functions (h(a,b) = h(a,r_j) + h(r_i,b) − h(r_i,r_j)
    + a term vanishing on the reference row and column). With λ = 0 the MRC objective
    depends on μ only through these functions (τᵀμ = E_p[score] for any p matching τ), so
    the LP restricted to these columns has the same value R* — without directions along
    which μ drifts freely to the box.

    Parameters
    ----------
    pmap : PairwiseFeatureMap
    tau : ndarray (K, D)

    Returns
    -------
    ndarray of bool (D,)
    """
    keep = np.ones(pmap.dim, dtype=bool)
    ref = {}
    first = True
    for i, b in enumerate(pmap.blocks):
        if b.kind != "onehot":
            continue
        r = int(np.argmax(tau[:, b.slice].sum(axis=0)))
        ref[i] = r
        if not first:
            keep[b.offset + r] = False
        first = False
    for e, (i, j) in enumerate(pmap.edges):
        mi, mj = pmap.edge_shape[e]
        cells = np.zeros((mi, mj), dtype=bool)
        cells[ref[i], :] = True
        cells[:, ref[j]] = True
        keep[pmap.edge_columns(e)[cells.ravel()]] = False
    return keep


def common_constant(pmap: PairwiseFeatureMap, tau: np.ndarray, empty: np.ndarray) -> np.ndarray:
    """The one entry to drop so that no constant can be added to every label's score.

    R(μ) is unchanged when the same constant c is added to every label's score (τᵀμ and
    φ(μ) both grow by c, since Σ_y P(y) = 1), and so are both rules; dropping label 0's
    most frequent non-empty level of the first one-hot node removes that direction.

    Returns
    -------
    ndarray of bool (K, D)
        True at the dropped entry (none if there is no one-hot node or label 0 is empty).
    """
    out = np.zeros(tau.shape, dtype=bool)
    for b in pmap.blocks:
        if b.kind == "onehot":
            t = np.where(empty[0, b.slice], -np.inf, tau[0, b.slice])
            if np.isfinite(t).any():
                out[0, b.offset + int(np.argmax(t))] = True
            break
    return out


# --------------------------------------------------------------------------------------
# Empty cells
# --------------------------------------------------------------------------------------
def cell_columns(pmap: PairwiseFeatureMap) -> np.ndarray:
    """(D,) bool: the indicator columns (one-hot node levels and every edge cell), i.e. all but
    the raw numeric columns; their τ entries are Bernoulli means."""
    is_cell = np.ones(pmap.dim, dtype=bool)
    for b in pmap.blocks:
        if b.kind != "onehot":
            is_cell[b.offset] = False
    return is_cell


def empty_cells(pmap: PairwiseFeatureMap, tau: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """Empty cells: one-hot node and edge entries with τ + λ = 0 (never raw numeric columns), (K, D) bool."""
    return ((tau + lam) <= 0.0) & cell_columns(pmap)[None, :]


POLICIES = ("evidence", "free", "impossible")
LOSSES = ("01", "hinge")


def fix_empty_cells_forest(
    oracle: ForestOracle,
    mu: np.ndarray,
    tau: np.ndarray,
    lam: np.ndarray,
    policy: str = "evidence",
    n: float | None = None,
    alpha: float = 0.05,
) -> tuple[np.ndarray, np.ndarray]:
    """Give empty cells (τ + λ = 0) definite coefficients without changing R(μ).

    An empty cell costs nothing in the objective and lowering its μ only relaxes rows, so
    the minimax problem leaves it anywhere below some value (the LP treats it as −∞). All
    empty cells first go to a value L low enough that no row through one is a maximum
    (L = −(2U + 10), U = Σ_y Σ_blocks max |μ| over the other cells), so φ(μ) is the LP's.
    Then, factor by factor (nodes, then edges), with max-marginals recomputed each time so
    that rows crossing several raised cells stay feasible:

    - a cell empty for every label (an unseen level or pair of levels) gets the label-
      neutral value min(0, c), c = min_C (|C|·φ + 1 − M_C)/|C| the largest keeping φ, M_C
      the max over x through the cell of Σ_{y∈C} Φ(x,y)ᵀμ without the cell's own term;
    - a cell empty for some labels only: ``policy="free"`` raises each such label's entry
      to min(c_y, the largest entry of a label seen there), c_y = min_{C∋y} |C|·φ + 1 −
      M_C^{(−y)} the largest value keeping φ (the rule stays as uncommitted as the worst
      case allows, never favouring the unseen label); ``policy="impossible"`` leaves it at
      L (the label is ruled out there); ``policy="evidence"`` rules label y out only when
      its absence is significant: with n_c = n·Σ_y' τ[y', cell] rows in the cell and the
      class prior π_y, (1 − π_y)^{n_c} ≤ ``alpha``/m (the chance of seeing no y among n_c
      rows if the cell told nothing about the label; Bonferroni over the m such (label,
      cell) entries, so ``alpha`` is a family-wise level), and raises it as ``"free"``
      otherwise.

    Neither step changes the objective (τ = λ = 0 there) nor raises φ.

    Parameters
    ----------
    oracle : ForestOracle
        Over the model's map, all edges active, no excluded cells.
    mu, tau, lam : ndarray (K, D)
    policy : {"evidence", "free", "impossible"}
    n : float
        Rows behind τ (needed by ``"evidence"``).
    alpha : float
        Family-wise significance level of ``"evidence"``.

    Returns
    -------
    mu : ndarray (K, D)
    empty : ndarray of bool (K, D)
    """
    if policy not in POLICIES:
        raise InputError(f"unknown empty-cell policy {policy!r} (expected one of {', '.join(POLICIES)})")
    if policy == "evidence" and not (n is not None and n > 0):
        raise InputError(f"the 'evidence' empty-cell policy needs the row count n > 0, got {n!r}")
    pm = oracle.pmap
    K, D = mu.shape
    mu = mu.copy()
    empty = empty_cells(pm, tau, lam)
    if not empty.any():
        return mu, empty
    factors: list[tuple[str, int, np.ndarray]] = []
    for i, b in enumerate(pm.blocks):
        if b.kind == "onehot":
            factors.append(("node", i, np.arange(b.offset, b.offset + b.size)))
    for e in range(pm.n_edges):
        factors.append(("edge", e, pm.edge_columns(e)))
    held = np.where(empty, 0.0, np.abs(mu))
    U = sum(float(held[:, cols].max(axis=1).sum()) for _, _, cols in factors)
    for b in pm.blocks:
        if b.kind == "numeric":
            U += float(np.abs(mu[:, b.offset]).sum()) * max(abs(b.lo), abs(b.hi))
    mu[empty] = -(2.0 * U + 10.0)
    unseen, part = _empty_targets(pm, tau, empty, policy, n, alpha)
    phi = oracle.phi(mu.ravel())
    sizes = oracle.sizes[:, None]
    member = oracle.member
    for kind, idx, cols in factors:
        u = unseen[cols]
        py = part[:, cols]
        if not (u.any() or py.any()):
            continue
        if u.any():
            M = _factor_max_marginals(oracle, mu, kind, idx, cols)
            c = np.minimum(np.min((sizes * phi + 1.0 - M) / sizes, axis=0), 0.0)
            mu[:, cols[u]] = c[u][None, :]
        for y in range(K):
            if not py[y].any():
                continue
            M = _factor_max_marginals(oracle, mu, kind, idx, cols)
            own = member @ mu[:, cols]
            My = M + own - member[:, [y]] * mu[y, cols][None, :]  # without label y's own entry
            inC = member[:, y] > 0
            c = np.min(sizes[inC] * phi + 1.0 - My[inC], axis=0)
            seen = np.where(empty[:, cols], -np.inf, mu[:, cols]).max(axis=0)  # best observed label
            mu[y, cols[py[y]]] = np.minimum(c, seen)[py[y]]
    return mu, empty


def _empty_targets(pm: PairwiseFeatureMap, tau: np.ndarray, empty: np.ndarray, policy: str, n: float | None,
                   alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """The empty cells to raise: ``unseen`` (D,) cells empty for every label, and ``part``
    (K, D) the (label, cell) entries empty for some labels only that ``policy`` raises."""
    K = tau.shape[0]
    unseen = empty.all(axis=0)
    part = empty & ~unseen[None, :]
    if policy == "impossible":
        part = np.zeros_like(part)
    elif policy == "evidence":
        first = next((b for b in pm.blocks if b.kind == "onehot"), None)
        prior = tau[:, first.slice].sum(axis=1) if first is not None else np.full(K, 1.0 / K)
        n_cell = float(n) * tau.sum(axis=0)  # (D,) rows in each cell
        chance = (1.0 - np.clip(prior, 0.0, 1.0))[:, None] ** n_cell[None, :]
        part &= chance > alpha / max(1, int(part.sum()))  # significant absences (Bonferroni) stay ruled out
    return unseen, part


def _factor_max_marginals(oracle: ForestOracle, mu: np.ndarray, kind: str, idx: int, cols: np.ndarray) -> np.ndarray:
    """(nC, cells): max over x through each cell of the factor of Σ_{y∈C} Φ(x,y)ᵀμ without the factor's own term."""
    node_mm, edge_mm = oracle.max_marginals(mu.ravel())
    if kind == "node":
        return node_mm[idx] - oracle.member @ mu[:, cols]
    return edge_mm[idx].reshape(len(oracle.subsets), -1)


def _objective(tau: np.ndarray, lam: np.ndarray, mu: np.ndarray, phi: float) -> float:
    """R(μ) = 1 − τᵀμ + φ(μ) + λᵀ|μ|."""
    return float(-np.sum(tau * mu) + np.sum(lam * np.abs(mu)) + phi + 1.0)


# --------------------------------------------------------------------------------------
# The estimator
# --------------------------------------------------------------------------------------
class DCC(MinimaxRules):
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
        False: maximum spanning forest on ``edge_weight``. True: greedy R*-driven edges.
    greedy_tol : float
        Greedy search stops when the best edge lowers R* by ``greedy_tol`` or less.
    greedy_candidates : int or None
        Edges solved exactly per greedy step: among those the current worst-case
        distribution violates, the ones of largest I(X_i, X_j; Y) (None: all).
    edge_weight : {"cmi", "label"}
        Forest weights: I(X_i; X_j | Y) (TAN / Chow–Liu) or I(X_i, X_j; Y), what the pair
        tells about the label (on the UCI benchmark it gives lower R* and test error).
    solver : {"compact", "rows"}
        The exact compact LP (message variables), or row generation with the DP oracle.
    empty : {"evidence", "free", "impossible"}
        What the rule does in an empty cell of some labels (τ = λ = 0; R* is the same for
        all three, see :func:`fix_empty_cells_forest`): rule the label out when its absence
        is significant at family-wise level ``alpha`` (``"evidence"``), never (``"free"``)
        or always (``"impossible"``).
    alpha : float
        Family-wise significance level of ``empty="evidence"`` (Bonferroni over the cells).
    extra_rows : int or None
        ``solver="rows"``: extra rows per label subset and round from the constrained
        maxima x_i = v (None: all distinct ones).
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
    structure : {"forest", "all"} or sequence of (str, str)
        ``"forest"``: the spanning forest on ``edge_weight`` (or ``greedy``). ``"all"``:
        every pair with a released pair-with-label table (with ``max_edges``: the
        ``max_edges`` pairs of largest ``edge_weight``). A sequence: those feature pairs.
        On a graph with a cycle the separation max over x is replaced by its
        local-polytope (MAP-LP) bound (:func:`solve_local`), so ``worst_case_error_`` is
        R*_L ≥ R*: still a valid certificate for the distributions matching all the used
        pair-with-label tables and the first-order tables (``relaxed_`` True); on a forest
        the exact forest LP is used. Not with ``greedy``, ``solver="rows"`` or
        ``loss="hinge"``. ``predict`` is argmax_y Φ(x,y)ᵀμ (exact: a sum over the edges);
        ``predict_proba`` is rule (6) with ``phi_`` = the certified bound φ_L(μ) ≥ φ(μ),
        whose worst-case error is ≤ R*_L. Empty cells per ``empty``
        (:func:`fix_empty_cells_local`).
    loss : {"01", "hinge"}
        ``"01"``: the 0-1 MRC above. ``"hinge"`` (binary labels only; spanning forest
        on ``edge_weight``, compact LP; ``greedy``, ``solver="rows"`` and more than two
        classes raise InputError; ``empty`` is not used): the score f minimising the
        worst-case hinge loss (:func:`solve_hinge`). ``predict`` is sign f (f = 0 goes to
        the naive-Bayes choice from the first-order tables), ``predict_proba`` the clipped rule h(1|x) = (1 + clip(f, −1, 1))/2,
        ``worst_case_error_`` the worst-case hinge loss over U, which upper-bounds the
        worst-case 0-1 error of sign f (ties counted as errors) and equals 2·R*. A cell no
        distribution in U reaches for either label (τ = λ = 0 for both) gets f = 0 in the
        reference coding: the score there is the sum of the main effects and the other
        edges (an unseen level scores like its feature's most frequent level). The optimal
        f is far from unique and the LP returns a vertex, often a very sparse one (on the
        UCI kr-vs-kp benchmark 4 nonzero coefficients of ~215, test error 22% against 8%
        for the 0-1 rule): the hinge loss changes the selection, not the worst case.

    Attributes
    ----------
    mu_ : ndarray (K, D)
    phi_, nu_ : float
    worst_case_error_ : float
        R* (certificate: worst-case error of rule (6) over the uncertainty set);
        ``loss="hinge"``: the worst-case hinge loss of f (= 2·R*).
    f_, theta_ : ndarray
        ``loss="hinge"`` only: the score coefficients (D,) (``mu_`` = [−f/2, f/2]) and the
        dual prices θ (2, D) of the moment rows (``nu_``: of Σ p = 1; ``phi_`` is 0).
    iterations_ : list of float
        Greedy: R* of the first-order model and after each added edge (non-increasing).
        Otherwise: [R*] (compact LP), or the running minimum of the exact R(μ) over the
        row-generation rounds (non-increasing, last = R*).
    row_rounds_ : dict
        ``lower`` (LP values) and ``upper`` (exact R(μ)) of every row-generation round.
    edges_ : list of (str, str)
        All edges used.
    relaxed_ : bool
        True when the certificate is the local-polytope bound R*_L (a graph with a cycle).
    edge_weights_ : list of float
        The ``edge_weight`` (nats) of each edge.
    classes_ : tuple of str
    prior_ : ndarray (K,)
        Released class proportions.
    nb_logp_ : ndarray of float (K, D)
        Naive-Bayes log P̂(x_i = a | y) of the node one-hot columns (0 on edges and numeric
        columns), which break argmax ties.
    feature_names_ : list of str
    tau_, lambda_ : ndarray (K, D)
    impossible_, ruled_out_ : ndarray of bool (K, D)
        The empty cells (τ + λ = 0): (x, y) through one has probability 0 under every
        distribution of the uncertainty set.
    n_rows_ : int
    converged_ : bool
    fingerprint_ : str
    n_ : float
    seconds_ : float
        Fit time.
    """

    _score_map = "pmap_"

    def __init__(
        self,
        s: float | None = None,
        coverage: float = 0.95,
        max_edges: int | None = None,
        greedy: bool = False,
        greedy_tol: float = 1e-4,
        greedy_candidates: int | None = 8,
        edge_weight: str = "cmi",
        solver: str = "compact",
        empty: str = "evidence",
        alpha: float = 0.05,
        extra_rows: int | None = 0,
        features: Sequence[str] | None = None,
        tol: float = 1e-9,
        bound: float = 1e3,
        time_limit: float | None = None,
        callback: Callable[[dict], None] | None = None,
        loss: str = "01",
        structure: str | Sequence[tuple[str, str]] = "forest",
    ):
        self.loss = loss
        self.structure = structure
        self.s = s
        self.coverage = coverage
        self.max_edges = max_edges
        self.greedy = greedy
        self.greedy_tol = greedy_tol
        self.greedy_candidates = greedy_candidates
        self.edge_weight = edge_weight
        self.solver = solver
        self.empty = empty
        self.alpha = alpha
        self.extra_rows = extra_rows
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
        if self.edge_weight not in ("cmi", "label"):
            raise InputError(f"unknown edge weight {self.edge_weight!r} (expected 'cmi' or 'label')")
        if self.solver not in ("compact", "rows"):
            raise InputError(f"unknown DCC solver {self.solver!r} (expected 'compact' or 'rows')")
        if self.empty not in POLICIES:
            raise InputError(f"unknown empty-cell policy {self.empty!r} (expected one of {', '.join(POLICIES)})")
        if not (0.0 < self.alpha < 1.0):
            raise InputError(f"alpha must be in (0, 1), got {self.alpha!r}")
        er = self.extra_rows
        if er is not None and not (isinstance(er, (int, np.integer)) and er >= 0):
            raise InputError(f"extra_rows must be an integer >= 0 or None, got {er!r}")
        if not (self.tol > 0 and np.isfinite(self.tol)):
            raise InputError(f"tol must be positive, got {self.tol!r}")
        if not (self.bound > 0 and np.isfinite(self.bound)):
            raise InputError(f"bound must be positive, got {self.bound!r}")
        if self.time_limit is not None and not (self.time_limit > 0):
            raise InputError(f"time_limit must be positive, got {self.time_limit!r}")
        if self.loss not in LOSSES:
            raise InputError(f"unknown DCC loss {self.loss!r} (expected one of {', '.join(LOSSES)})")
        st = self.structure
        if isinstance(st, str):
            if st not in ("forest", "all"):
                raise InputError(f"unknown DCC structure {st!r} (expected 'forest', 'all' or a list of feature pairs)")
        else:
            try:
                pairs = [(str(a), str(b)) for a, b in st]
            except (TypeError, ValueError):
                raise InputError(f"structure must be 'forest', 'all' or a list of feature-name pairs, got {st!r}") from None
            if any(a == b for a, b in pairs):
                raise InputError(f"structure pairs must name two different features, got {st!r}")
        if st != "forest" and (self.greedy or self.solver != "compact" or self.loss != "01"):
            raise InputError("structure other than 'forest' is solved by the compact LP with the 0-1 loss only (no greedy, solver='rows' or loss='hinge')")
        if self.loss == "hinge" and (self.greedy or self.solver != "compact"):
            raise InputError("loss='hinge' is solved by the compact LP on a spanning forest only (no greedy, no solver='rows')")

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
            noise[:, cols] = summary.count_noise_std((fa, fb, lab)) / n
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
        cmi = {(node_of[i], node_of[j]): w for (i, j), w in pair_weights(summary, names).items()}
        info = {(node_of[i], node_of[j]): v for (i, j), v in pair_label_information(summary, names).items()}
        weights = cmi if self.edge_weight == "cmi" else info
        self._rank = {e: (-info[e], e) for e in info}  # greedy: pairs that tell most about Y first
        cand = sorted(weights)
        # λ: Bonferroni over the node entries and every candidate pair's entries
        full = PairwiseFeatureMap(blocks, columns, cand)
        tau_f, std_f, noise_f = self._statistics(summary, full, node_psi)
        lam_f = confidence_lambda(std_f, noise_f, float(summary.n), s=self.s, coverage=self.coverage, tau=tau_f,
                                  binary=cell_columns(full))
        # empty cells (τ = λ = 0) are −∞ in the LP: out of the columns, excluded by the oracle
        self._empty_f = empty_cells(full, tau_f, lam_f)
        mask = ~self._empty_f
        if not np.any(lam_f > 0):  # λ = 0: R* depends on the score functions only: fix the gauge
            mask &= reference_mask(full, tau_f)[None, :]
            mask &= ~common_constant(full, tau_f, self._empty_f)
        self._lp_mask = mask  # (K, D): the LP's columns
        if self.loss == "hinge":
            if K != 2:
                raise InputError(f"loss='hinge' needs a binary label, got {K} classes {tuple(summary.classes)!r}")
            self._fit_hinge(summary, blocks, columns, full, tau_f, lam_f, weights, t0)
            return self
        relaxed = False
        if self.structure != "forest":
            edges = self._graph_edges(full, weights)
            uf = UnionFind(len(blocks))
            if not all(uf.union(a, b) for a, b in edges):  # a cycle: the local-polytope LP
                self._fit_local(summary, blocks, columns, full, tau_f, lam_f, weights, edges, t0)
                return self
        if self.greedy and self.solver == "rows":
            edges, rounds, iters, converged, lp_bound, n_rows = self._fit_greedy(full, tau_f, lam_f, K)
        elif self.greedy:
            edges, rounds, iters, converged, lp_bound, n_rows = self._fit_greedy_compact(full, tau_f, lam_f, K, weights)
        else:
            forest = edges if self.structure != "forest" else max_spanning_forest(len(blocks), weights, self.max_edges)
            fit_one = self._fit_forest if self.solver == "rows" else self._fit_forest_compact
            edges, rounds, iters, converged, lp_bound, n_rows = fit_one(full, tau_f, lam_f, K, forest)
        # compact model over the chosen edges
        pmap = PairwiseFeatureMap(blocks, columns, edges)
        keep = np.concatenate([np.arange(full.nodes.dim)] + [full.edge_columns(cand.index(e)) for e in edges]).astype(np.int64)
        tau, lam = tau_f[:, keep], lam_f[:, keep]
        mu_raw = self._mu_full.reshape(K, full.dim)[:, keep]
        B = lp_bound.reshape(K, full.dim)[:, keep]
        oracle = ForestOracle(pmap, K)
        mu, empty = fix_empty_cells_forest(oracle, mu_raw, tau, lam, self.empty, n=float(summary.n), alpha=self.alpha)
        phi = oracle.phi(mu.ravel())
        value = _objective(tau, lam, mu, phi)
        upper = iters[-1] if iters else np.inf
        if value > upper + 1e-6 * max(1.0, abs(upper)):
            raise RuntimeError(f"empty-cell post-processing raised R from {upper!r} to {value!r}")
        if iters:
            iters[-1] = value
        self._set_fitted(summary, pmap, relaxed, [float(weights[e]) for e in edges], tau, lam, mu, float(phi),
                         float(phi) + 1.0, value, iters, rounds, n_rows, empty, converged,
                         float(np.max(B)) if B.size else float(self.bound), t0)
        return self

    def _set_fitted(self, summary, pmap, relaxed, edge_weights, tau, lam, mu, phi, nu, value, iterations, rounds,
                    n_rows, impossible, converged, bound, t0) -> None:
        """Store the fitted state shared by every fit path and drop the fit's scratch attributes."""
        self.pmap_ = pmap
        self.blocks_ = list(pmap.blocks)
        self.feature_names_ = pmap.names
        self.classes_ = tuple(summary.classes)
        self.prior_ = np.asarray(summary.prior, dtype=np.float64)
        self.nb_logp_ = naive_bayes_logp(tau, self.prior_, float(summary.n), pmap.blocks, pmap.dim)
        self.edges_ = pmap.edge_names
        self.relaxed_ = bool(relaxed)
        self.edge_weights_ = list(edge_weights)
        self.tau_ = tau
        self.lambda_ = lam
        self.mu_ = mu
        self.phi_ = float(phi)
        self.nu_ = float(nu)
        self.worst_case_error_ = float(value)
        self.iterations_ = [float(v) for v in iterations]
        self.row_rounds_ = {"lower": [float(v) for v in rounds["lower"]], "upper": [float(v) for v in rounds["upper"]]}
        self.n_rows_ = int(n_rows)
        self.impossible_ = impossible
        self.ruled_out_ = impossible  # the empty cells τ + λ = 0 of the whole map
        self.converged_ = bool(converged)
        self.bound_ = float(bound)
        self.fingerprint_ = str(summary.fingerprint)
        self.n_ = float(summary.n)
        self.seconds_ = time.perf_counter() - t0
        for scratch in ("_mu_full", "_lp_mask", "_empty_f", "_rank"):
            self.__dict__.pop(scratch, None)

    def _fit_hinge(self, summary, blocks, columns, full, tau_f, lam_f, weights, t0) -> None:
        """loss="hinge": the maximum spanning forest, then :func:`solve_hinge` on it.

        Columns of the LP. f (the score, no cost): the reference coding of
        :func:`reference_mask` (the same score functions, without the free directions of the
        one-hot parametrisation), minus the cells empty for BOTH labels: every (x, y)
        through such a cell is outside U, so its coefficient enters no constraint; fixing it
        at 0 loses nothing and means "no interaction seen": the score there is the sum of
        the main effects (an unseen level scores like the reference level) and the other
        edges. θ: the entries with τ + λ > 0 (an empty cell of label y is +∞, its (x, y)
        dropped), reference-coded like f when λ = 0 everywhere (then τᵀθ depends on θ only
        through θ(x, y), so the value is the same).
        """
        K = 2
        cand = sorted(weights)
        forest = max_spanning_forest(len(blocks), weights, self.max_edges)
        pmap = PairwiseFeatureMap(blocks, columns, forest)
        keep = np.concatenate([np.arange(full.nodes.dim)] + [full.edge_columns(cand.index(e)) for e in forest]).astype(np.int64)
        tau, lam = tau_f[:, keep], lam_f[:, keep]
        empty = empty_cells(pmap, tau, lam)
        ref = reference_mask(pmap, tau)
        f_cols = np.flatnonzero(ref & ~empty.all(axis=0))
        tmask = ~empty
        if not np.any(lam > 0):
            tmask &= ref[None, :]
        oracle = ForestOracle(pmap, K)
        sol = solve_hinge(oracle, tau, lam, f_cols, np.flatnonzero(tmask.ravel()), empty)
        if self.callback is not None:
            self.callback({"stage": "hinge", "R": sol.value, "edges": len(forest)})
        self.f_ = sol.f
        self.theta_ = sol.theta
        self._set_fitted(summary, pmap, False, [float(weights[e]) for e in forest], tau, lam,
                         np.stack([-0.5 * sol.f, 0.5 * sol.f]), 0.0, sol.nu, sol.value, [sol.value],
                         {"lower": [], "upper": []}, sol.n_rows, empty, True, self.bound, t0)

    def _graph_edges(self, full: PairwiseFeatureMap, weights: dict) -> list[tuple[int, int]]:
        """Node-index edges (i < j, sorted) of ``structure="all"`` or an explicit pair list."""
        cand = list(full.edges)
        if self.structure == "all":
            if self.max_edges is None:
                return cand
            top = sorted(cand, key=lambda e: (-weights[e], e))[: int(self.max_edges)]
            return sorted(top)
        idx = {b.name: k for k, b in enumerate(full.blocks)}
        out = set()
        for a, b in self.structure:
            if a not in idx or b not in idx:
                raise InputError(f"structure pair ({a!r}, {b!r}): unknown feature {a if a not in idx else b!r}")
            e = (min(idx[a], idx[b]), max(idx[a], idx[b]))
            if e not in weights:
                raise InputError(f"structure pair ({a!r}, {b!r}): no released pair-with-label table for it (or a raw numeric feature)")
            out.add(e)
        return sorted(out)

    def _fit_local(self, summary, blocks, columns, full, tau_f, lam_f, weights, edges, t0) -> None:
        """A graph with a cycle: :func:`solve_local` (the local-polytope bound R*_L), then
        :func:`fix_empty_cells_local` at the LP's reparametrisation."""
        K = int(summary.n_classes)
        cand = list(full.edges)
        pmap = PairwiseFeatureMap(blocks, columns, edges)
        keep = np.concatenate([np.arange(full.nodes.dim)] + [full.edge_columns(cand.index(e)) for e in edges]).astype(np.int64)
        tau, lam = tau_f[:, keep], lam_f[:, keep]
        mask = self._lp_mask[:, keep]
        sol = solve_local(pmap, K, tau, lam, np.flatnonzero(mask.ravel()), exclude=self._empty_f[:, keep])
        if self.callback is not None:
            self.callback({"stage": "local", "R": sol.value, "edges": len(edges)})
        mu, empty, phi = fix_empty_cells_local(pmap, sol.mu.reshape(K, -1), tau, lam, sol.offsets, sol.nu, self.empty,
                                               n=float(summary.n), alpha=self.alpha)
        value = _objective(tau, lam, mu, phi)
        if value > sol.value + 1e-6 * max(1.0, abs(sol.value)):
            raise RuntimeError(f"empty-cell post-processing raised R_L from {sol.value!r} to {value!r}")
        self._set_fitted(summary, pmap, True, [float(weights[e]) for e in edges], tau, lam, mu, float(phi),
                         float(phi) + 1.0, value, [value], {"lower": [sol.value], "upper": [value]}, sol.n_rows,
                         empty, True, self.bound, t0)

    def _deadline(self) -> float | None:
        return None if self.time_limit is None else time.perf_counter() + float(self.time_limit)

    def _new_lp(self, full: PairwiseFeatureMap, tau: np.ndarray, lam: np.ndarray, K: int) -> MinimaxLP:
        per = np.full(full.dim, float(self.bound))
        for b in full.blocks:  # a raw numeric column moves the score by up to max(|lo|, |hi|)·μ
            if b.kind == "numeric":
                per[b.offset] = float(self.bound) / max(abs(b.lo), abs(b.hi), 1e-12)
        return MinimaxLP((tau - lam).ravel(), (tau + lam).ravel(), np.tile(per, K))

    def _lp_columns(self, full: PairwiseFeatureMap, psi_cols: np.ndarray, K: int) -> np.ndarray:
        """Flat LP columns for the Ψ columns ``psi_cols`` (reference-coded when λ = 0)."""
        psi_cols = np.asarray(psi_cols, dtype=np.int64)
        flat = full.flat_columns(psi_cols, K)
        return flat[self._lp_mask.ravel()[flat]]

    def _drop_vacuous_rows(self, lp: MinimaxLP, full: PairwiseFeatureMap, e: int, K: int) -> None:
        """Delete the rows crossing an empty cell of edge e: vacuous once e is active."""
        flat = full.flat_columns(full.edge_columns(e), K)
        flat = flat[self._empty_f.ravel()[flat]]
        if flat.size == 0 or lp.n_rows == 0:
            return
        hit = np.flatnonzero(np.asarray((lp.row_matrix()[:, flat] != 0).sum(axis=1)).ravel() > 0)
        if hit.size:
            lp.delete_rows(hit)

    @staticmethod
    def _initial_rows(lp: MinimaxLP, oracle: ForestOracle) -> None:
        """Covering rows, plus the best allowed row of every label subset at μ = 0 (so ν is
        bounded even when exclusions leave no covering row for some subset)."""
        lp.add_rows(oracle.covering_cuts())
        lp.add_rows([c for c in oracle.most_violated(np.zeros(lp.m)) if c.violation > -0.5 * EXCLUDED])

    def _fit_forest_compact(self, full, tau, lam, K, forest):
        cand = list(full.edges)
        active = [cand.index(e) for e in forest]
        oracle = ForestOracle(full, K, active, exclude=self._empty_f)
        cols = np.concatenate([np.arange(full.nodes.dim)] + [full.edge_columns(e) for e in active]).astype(np.int64)
        value, mu, _ = solve_compact(oracle, tau, lam, self._lp_columns(full, cols, K))
        self._mu_full = mu
        if self.callback is not None:
            self.callback({"stage": "compact", "R": value, "edges": len(active)})
        return list(forest), {"lower": [value], "upper": [value]}, [value], True, np.full(K * full.dim, float(self.bound)), 0

    def _fit_greedy_compact(self, full, tau, lam, K, weights):
        """Greedy edges with the compact LP. Per step, the forest-keeping pairs are priced by
        the violation v_e = max |P_α(x_i, x_j, y) − τ_e| − λ_e of the current worst-case
        distribution α (tree-Markov extension of the LP's flows, :func:`pair_marginals`); an
        edge with v_e ≤ 0 cannot lower R* (α stays dual feasible). Of the others, the
        ``greedy_candidates`` of largest I(X_i, X_j; Y) are solved exactly and the lowest R*
        enters."""
        cand = list(full.edges)
        n_nodes = full.n_nodes
        cap = n_nodes if self.max_edges is None else int(self.max_edges)
        node_cols = np.arange(full.nodes.dim)

        def solve(active: list[int]) -> tuple[CompactSolution, ForestOracle]:
            oracle = ForestOracle(full, K, active, exclude=self._empty_f)
            cols = np.concatenate([node_cols] + [full.edge_columns(e) for e in active]).astype(np.int64)
            return solve_compact(oracle, tau, lam, self._lp_columns(full, cols, K)), oracle

        sol, orc = solve([])
        R, mu = sol.value, sol.mu
        iters, values = [R], [R]
        chosen: list[int] = []
        uf = UnionFind(n_nodes)
        while len(chosen) < cap:
            free = [e for e in range(len(cand)) if e not in chosen and uf.find(cand[e][0]) != uf.find(cand[e][1])]
            if not free:
                break
            # price: how far the worst-case distribution is from each candidate's marginals
            joint = pair_marginals(orc, sol.flows, [cand[e] for e in free])
            viol = np.empty(len(free))
            for t, e in enumerate(free):
                cols = full.edge_columns(e)
                v = np.abs(joint[cand[e]].reshape(K, -1) - tau[:, cols]) - lam[:, cols]
                viol[t] = float(v.max())
            order = sorted((free[t] for t in range(len(free)) if viol[t] > 1e-9), key=lambda e: self._rank[cand[e]])
            if self.greedy_candidates is not None:
                order = order[: int(self.greedy_candidates)]
            if not order:
                break  # that distribution matches every candidate: no single edge lowers R*
            best, best_sol, best_orc = None, sol, orc
            for e in order:
                se, oe = solve(chosen + [e])
                values.append(se.value)
                if se.value < best_sol.value:
                    best, best_sol, best_orc = e, se, oe
            if best is None or R - best_sol.value <= self.greedy_tol:
                break
            chosen.append(best)
            uf.union(*cand[best])
            sol, orc = best_sol, best_orc
            R, mu = sol.value, sol.mu
            iters.append(R)
            if self.callback is not None:
                self.callback({"stage": "greedy", "edges": len(chosen), "R": R, "edge": full.edge_names[best]})
        self._mu_full = mu
        return [cand[e] for e in chosen], {"lower": values, "upper": values}, iters, True, np.full(K * full.dim, float(self.bound)), 0

    def _fit_forest(self, full, tau, lam, K, forest):
        cand = sorted(full.edges)
        active = [cand.index(e) for e in forest]
        lp = self._new_lp(full, tau, lam, K)
        cols = np.concatenate([np.arange(full.nodes.dim)] + [full.edge_columns(e) for e in active]).astype(np.int64)
        lp.add_columns(self._lp_columns(full, cols, K))
        oracle = ForestOracle(full, K, active, tau=tau, lam=lam, extra_rows=self.extra_rows, exclude=self._empty_f)
        self._initial_rows(lp, oracle)
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
        lp.add_columns(self._lp_columns(full, np.arange(full.nodes.dim), K))
        oracle = ForestOracle(full, K, [], tau=tau, lam=lam, extra_rows=self.extra_rows, exclude=self._empty_f)
        self._initial_rows(lp, oracle)
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
            order = sorted((free[t] for t in range(len(free)) if viol[t] > thr), key=lambda e: self._rank[cand[e]])
            if self.greedy_candidates is not None:
                order = order[: int(self.greedy_candidates)]
            if not order:
                break  # α is dual feasible with any single extra edge: none can lower R*
            best, best_R = None, R
            for e in order:
                cols = self._lp_columns(full, full.edge_columns(e), K)
                lp.add_columns(cols)
                self._drop_vacuous_rows(lp, full, e, K)
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
            lp.add_columns(self._lp_columns(full, full.edge_columns(best), K))
            self._drop_vacuous_rows(lp, full, best, K)
            oracle.set_active(chosen)
            R, converged = solve()
            iters.append(R)
            if self.callback is not None:
                self.callback({"stage": "greedy", "edges": len(chosen), "R": R, "edge": full.edge_names[best]})
        self._mu_full = lp.mu.copy()
        return [cand[e] for e in chosen], rounds, iters, converged, lp.bound, lp.n_rows

    # -------------------------------------------------------------- predict
    def margin(self, X: np.ndarray) -> np.ndarray:
        """Score difference of label 1 over label 0, (n,): f(x) for ``loss="hinge"`` (binary only)."""
        F = self.decision_function(X)
        if F.shape[1] != 2:
            raise InputError(f"margin needs a binary label, the model has {F.shape[1]} classes")
        return F[:, 1] - F[:, 0]

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """Randomized rule (6): h(y|x) = (Φ(x,y)ᵀμ − φ)₊ / Σ_y' (Φ(x,y')ᵀμ − φ)₊, uniform when all are 0; (n, K).

        ``loss="hinge"``: h(1|x) = (1 + clip(f(x), −1, 1))/2, h(0|x) = 1 − h(1|x) (the
        clipped score, not a calibrated probability; its expected 0-1 loss at (x, y) is
        min(1, max(0, 1 − s_y f(x)))/2 ≤ the hinge loss, so the certificate covers it too)."""
        if getattr(self, "loss", "01") == "hinge":
            self._check_fitted()
            p1 = 0.5 * (1.0 + np.clip(self.margin(X), -1.0, 1.0))
            return np.column_stack([1.0 - p1, p1])
        return super().predict_proba(X)

    # ---------------------------------------------------------- persistence
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready model (plain lists and floats)."""
        self._check_fitted()
        return {
            "learner": "dcc",
            **self._state_dict(),
            "params": {
                "loss": self.loss,
                "s": None if self.s is None else float(self.s),
                "coverage": float(self.coverage),
                "max_edges": None if self.max_edges is None else int(self.max_edges),
                "greedy": bool(self.greedy),
                "greedy_tol": float(self.greedy_tol),
                "greedy_candidates": None if self.greedy_candidates is None else int(self.greedy_candidates),
                "edge_weight": self.edge_weight,
                "solver": self.solver,
                "empty": self.empty,
                "alpha": float(self.alpha),
                "tol": float(self.tol),
                "bound": float(self.bound),
                "structure": self.structure if isinstance(self.structure, str) else [list(e) for e in self.structure],
            },
            "relaxed": bool(getattr(self, "relaxed_", False)),
            "map": self.pmap_.to_dict(),
            "edges": [list(e) for e in self.edges_],
            "edge_weights": list(self.edge_weights_),
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
                edge_weight=str(p.get("edge_weight", "cmi")),
                solver=str(p.get("solver", "compact")),
                empty=str(p.get("empty", "evidence")),
                alpha=float(p.get("alpha", 0.05)),
                tol=float(p.get("tol", 1e-9)),
                bound=float(p.get("bound", 1e3)),
                loss=str(p.get("loss", "01")),
                structure=_structure_param(p.get("structure", "forest")),
            )
            pmap = PairwiseFeatureMap.from_dict(d["map"])
            model._load_state(d, pmap.dim)
            model.pmap_ = pmap
            model.blocks_ = list(pmap.blocks)
            model.feature_names_ = pmap.names
            model.edges_ = pmap.edge_names
            model.relaxed_ = bool(d.get("relaxed", False))
            model.edge_weights_ = [float(w) for w in d.get("edge_weights", [np.nan] * pmap.n_edges)]
            if model.loss == "hinge":
                if len(model.classes_) != 2:
                    raise InputError("a hinge-loss DCC model must have two classes")
                model.f_ = model.mu_[1] - model.mu_[0]
                model.nu_ = float("nan")  # not stored
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"malformed DCC model: {exc}") from None
        return model


def _structure_param(v: Any) -> str | list[tuple[str, str]]:
    """``structure`` from a model file: "forest", "all" or a list of name pairs."""
    if isinstance(v, str):
        return v
    return [(str(a), str(b)) for a, b in v]
