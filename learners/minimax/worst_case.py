"""The worst-case distribution of a forest solve, read from the LP's duals.

The duals of the forest epigraph LP (:func:`marg.learners.minimax.forest_lp.solve_compact`)
are, per label subset C, a flow w_C on the forest: the worst-case distribution's node and
forest-edge marginals, p(x, y) = Σ_{C∋y} w_C(x). :func:`pair_marginals` extends it off the
forest as a tree-Markov distribution (one of the worst-case distributions) to price pairs
that are not in the model yet (greedy structure search).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Sequence

import numpy as np

from .forest import ForestOracle

if TYPE_CHECKING:
    from .forest_lp import SubsetFlow


def pair_marginals(oracle: ForestOracle, flows: Sequence[SubsetFlow],
                   pairs: Sequence[tuple[int, int]]) -> dict[tuple[int, int], np.ndarray]:
    """Joint of (X_i, X_j, Y) under the worst-case distribution of a compact solve, extended
    off the forest as a tree-Markov distribution (one of the worst-case distributions: the
    LP only fixes its node and forest-edge marginals).

    Parameters
    ----------
    oracle : ForestOracle
        The oracle of that solve (its active forest).
    flows : list
        ``read.flows`` (:class:`.forest_lp.Flows`) of the compact solve's :class:`.solution.MinimaxSolution`.
    pairs : sequence of (i, j)
        Node-index pairs (one-hot nodes).

    Returns
    -------
    dict (i, j) -> ndarray (K, m_i, m_j)
        p(x_i = a, x_j = b, y) = Σ_{C∋y} w_C(a, b).
    """
    n = oracle.pmap.n_nodes
    K = oracle.K
    nv = [int(v) for v in oracle.n_vertices]
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
