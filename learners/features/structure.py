"""The DCC's graph structure: a maximum-weight spanning forest on I(X_i; X_j | Y) from pair tables.

Given the released pair-with-label tables N[x_i, x_j, y], the conditional mutual information

    I(X_i; X_j | Y) = Σ_{a,b,y} p(a,b,y) · log( p(a,b,y) p(y) / (p(a,y) p(b,y)) )    (nats)

is computed from each table alone (its own margins, so the value is exact for an exact
table and well defined for a noisy one after clipping negative cells). A maximum-weight
spanning forest over the available pairs (Kruskal; edges of non-positive weight are never
taken; an optional cap on the number of edges) gives the tree-augmented (TAN / Chow–Liu)
structure. Kruskal is the greedy algorithm on the graphic matroid, so the first k edges it
accepts form a maximum-weight forest among all forests with at most k edges. A DCC's
``structure`` parameter ("forest", "all" or feature pairs) is checked here
(:func:`check_structure`) and turned into node-index edges (:func:`graph_edges`).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from marg.errors import InputError


class UnionFind:
    """Disjoint sets over 0..n−1 (path halving, union by size): forest membership tests.

    Parameters
    ----------
    n : int
        Number of elements.
    """

    def __init__(self, n: int):
        self.parent = list(range(int(n)))
        self.size = [1] * int(n)

    def find(self, a: int) -> int:
        p = self.parent
        while p[a] != a:
            p[a] = p[p[a]]
            a = p[a]
        return a

    def union(self, a: int, b: int) -> bool:
        """Merge the sets of a and b; False when they already were one set (the edge would close a cycle)."""
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        if self.size[ra] < self.size[rb]:
            ra, rb = rb, ra
        self.parent[rb] = ra
        self.size[ra] += self.size[rb]
        return True


def _joint3(P: np.ndarray, what: str) -> np.ndarray | None:
    """A validated (a, b, y) table as probabilities: negative (noisy) cells clipped to 0, then
    normalised; None for an all-zero table. ``what`` names the quantity in the error."""
    P = np.asarray(P, dtype=np.float64)
    if P.ndim != 3:
        raise InputError(f"{what} needs a 3-way table (a, b, y), got shape {P.shape}")
    if not np.all(np.isfinite(P)):
        raise InputError("the pair-with-label table has NaN or infinite cells")
    P = np.clip(P, 0.0, None)
    tot = P.sum()
    return None if tot <= 0 else P / tot


def conditional_mutual_information(P: np.ndarray) -> float:
    """I(A; B | Y) in nats from a joint array over (A, B, Y).

    Parameters
    ----------
    P : ndarray, shape (m_a, m_b, K)
        Probabilities or counts (normalised here). Negative cells (noisy releases) are
        clipped to 0 first.

    Returns
    -------
    float
        Σ p(a,b,y) log(p(a,b,y) p(y) / (p(a,y) p(b,y))) ≥ 0 (0 for an all-zero table).
    """
    P = _joint3(P, "conditional mutual information")
    if P is None:
        return 0.0
    pay = P.sum(axis=1, keepdims=True)  # (m_a, 1, K)
    pby = P.sum(axis=0, keepdims=True)  # (1, m_b, K)
    py = P.sum(axis=(0, 1), keepdims=True)  # (1, 1, K)
    nz = P > 0
    num = (P * py)[nz]
    den = (pay * pby)[nz]
    val = float(np.sum(P[nz] * np.log(num / den)))
    return max(val, 0.0)


def label_information(P: np.ndarray) -> float:
    """I(A, B; Y) in nats from a joint array over (A, B, Y): what the pair tells about the label.

    Parameters
    ----------
    P : ndarray, shape (m_a, m_b, K)
        Probabilities or counts (normalised here; negative cells clipped to 0).

    Returns
    -------
    float
        Σ p(a,b,y) log(p(a,b,y) / (p(a,b) p(y))) ≥ 0.
    """
    P = _joint3(P, "label information")
    if P is None:
        return 0.0
    pab = P.sum(axis=2, keepdims=True)
    py = P.sum(axis=(0, 1), keepdims=True)
    nz = P > 0
    return max(float(np.sum(P[nz] * np.log(P[nz] / (pab * py)[nz]))), 0.0)


def pair_label_information(summary: Any, features: Sequence[str] | None = None) -> dict[tuple[int, int], float]:
    """I(X_i, X_j; Y) for every available pair-with-label table (keys as :func:`pair_weights`)."""
    cb = summary.codebook
    lab = cb.label.name
    return {
        (i, j): label_information(summary.joint((cb.features[i].name, cb.features[j].name, lab)))
        for (i, j) in pair_weights(summary, features)
    }


def pair_weights(summary: Any, features: Sequence[str] | None = None) -> dict[tuple[int, int], float]:
    """I(X_i; X_j | Y) for every available pair-with-label table.

    Parameters
    ----------
    summary : marginals.summary.Summary
    features : sequence of str, optional
        Restrict to pairs of these features (codebook names); default all.

    Returns
    -------
    dict (i, j) -> float
        Codebook feature indices i < j with a released N[x_i, x_j, y] (``summary.pairs``),
        both discrete, to the conditional mutual information in nats.
    """
    cb = summary.codebook
    lab = cb.label.name
    keep = None if features is None else {cb.index(f) for f in features}
    out: dict[tuple[int, int], float] = {}
    for i, j in summary.pairs:
        if keep is not None and (i not in keep or j not in keep):
            continue
        fi, fj = cb.features[i], cb.features[j]
        if not (fi.is_discrete and fj.is_discrete):
            continue
        out[(int(i), int(j))] = conditional_mutual_information(summary.joint((fi.name, fj.name, lab)))
    return out


def max_spanning_forest(
    n_nodes: int,
    weights: dict[tuple[int, int], float] | Sequence[tuple[int, int, float]],
    max_edges: int | None = None,
) -> list[tuple[int, int]]:
    """Maximum-weight spanning forest (Kruskal), skipping edges of weight ≤ 0.

    Parameters
    ----------
    n_nodes : int
        Nodes are 0..n_nodes−1.
    weights : dict (i, j) -> w or sequence of (i, j, w)
        Candidate edges (i ≠ j); an edge given twice is an error.
    max_edges : int, optional
        Cap on the number of edges (the first ``max_edges`` Kruskal accepts: a
        maximum-weight forest among those with at most that many edges).

    Returns
    -------
    list of (i, j)
        Edges with i < j, in the order accepted (non-increasing weight; ties broken by
        (i, j) ascending).
    """
    items = list(weights.items()) if isinstance(weights, dict) else [((a, b), w) for a, b, w in weights]
    if max_edges is not None and not (isinstance(max_edges, (int, np.integer)) and max_edges >= 0):
        raise InputError(f"max_edges must be an integer >= 0, got {max_edges!r}")
    seen = set()
    cand = []
    for (a, b), w in items:
        a, b = int(a), int(b)
        if a == b or not (0 <= a < n_nodes and 0 <= b < n_nodes):
            raise InputError(f"edge {(a, b)} is not a pair of distinct nodes in 0..{n_nodes - 1}")
        e = (min(a, b), max(a, b))
        if e in seen:
            raise InputError(f"edge {e} given twice")
        seen.add(e)
        w = float(w)
        if not np.isfinite(w):
            raise InputError(f"edge {e} has a non-finite weight {w!r}")
        if w > 0:
            cand.append((-w, e))
    cand.sort()
    cap = n_nodes if max_edges is None else int(max_edges)
    uf = UnionFind(n_nodes)
    out: list[tuple[int, int]] = []
    for _, (a, b) in cand:
        if len(out) >= cap:
            break
        if uf.union(a, b):
            out.append((a, b))
    return out


def chow_liu_forest(summary: Any, features: Sequence[str] | None = None,
                    max_edges: int | None = None) -> tuple[list[tuple[int, int]], dict[tuple[int, int], float]]:
    """TAN / Chow–Liu structure: max-weight forest on I(X_i; X_j | Y) over the released pairs.

    Parameters
    ----------
    summary : marginals.summary.Summary
    features : sequence of str, optional
        Features allowed as nodes (default all).
    max_edges : int, optional
        Cap on the number of edges.

    Returns
    -------
    edges : list of (i, j)
        Codebook feature indices, i < j, heaviest first.
    weights : dict (i, j) -> float
        The conditional mutual information of every candidate pair (nats).
    """
    w = pair_weights(summary, features)
    return max_spanning_forest(summary.codebook.n_features, w, max_edges), w


def node_pair_weights(summary: Any, blocks: Sequence[Any]) -> tuple[dict[tuple[int, int], float],
                                                                    dict[tuple[int, int], float]]:
    """I(X_i; X_j | Y) and I(X_i, X_j; Y) of every released pair of ``blocks``, keyed by node index (i < j)."""
    names = [b.name for b in blocks]
    node_of = {b.column: k for k, b in enumerate(blocks)}
    cmi = {(node_of[i], node_of[j]): w for (i, j), w in pair_weights(summary, names).items()}
    info = {(node_of[i], node_of[j]): v for (i, j), v in pair_label_information(summary, names).items()}
    return cmi, info


def check_structure(st: Any) -> None:
    """``structure``: "forest", "all", or a list of pairs of two different feature names."""
    if isinstance(st, str):
        if st not in ("forest", "all"):
            raise InputError(f"unknown DCC structure {st!r} (expected 'forest', 'all' or a list of feature pairs)")
        return
    try:
        pairs = [(str(a), str(b)) for a, b in st]
    except (TypeError, ValueError):
        raise InputError(f"structure must be 'forest', 'all' or a list of feature-name pairs, got {st!r}") from None
    if any(a == b for a, b in pairs):
        raise InputError(f"structure pairs must name two different features, got {st!r}")


def graph_edges(structure: Any, blocks: Sequence[Any], weights: dict,
                max_edges: int | None = None) -> list[tuple[int, int]]:
    """Node-index edges (i < j, sorted) of ``structure="all"`` (every pair in ``weights``; with
    ``max_edges`` the pairs of largest weight) or of an explicit list of feature-name pairs."""
    cand = sorted(weights)
    if structure == "all":
        if max_edges is None:
            return cand
        return sorted(sorted(cand, key=lambda e: (-weights[e], e))[: int(max_edges)])
    idx = {b.name: k for k, b in enumerate(blocks)}
    out = set()
    for a, b in structure:
        if a not in idx or b not in idx:
            raise InputError(f"structure pair ({a!r}, {b!r}): unknown feature {a if a not in idx else b!r}")
        e = (min(idx[a], idx[b]), max(idx[a], idx[b]))
        if e not in weights:
            raise InputError(f"structure pair ({a!r}, {b!r}): no released pair-with-label table for it (or a raw "
                             "numeric feature)")
        out.add(e)
    return sorted(out)
