"""Separation for first-order features: the exact maximum of Φ(x, y)ᵀμ over the whole domain.

A row (x, C) of the minimax LP is g_{x,C}ᵀμ − ν ≤ b_C with g = Σ_{y∈C} Φ(x, y)/|C| and
b_C = 1/|C| − 1 (:class:`Cut`). A separation oracle returns, at μ, the most violated row of
every label subset (:class:`SeparationOracle`). For first-order features the maximum over x
separates per feature (:class:`FirstOrderOracle`); a forest of pairwise features needs a
max-sum dynamic program (:class:`marg.learners.minimax.forest.ForestOracle`, the same
protocol, equal to this one when the forest has no edges).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, Sequence

import numpy as np
import scipy.sparse as sp

from marg.errors import InputError

from ..features.blocks import FeatureMap
from .layout import flat_index
from .problem import subsets_for


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


class SeparationOracle(Protocol):
    """Separation oracle: the most violated rows at μ (flat, shape (m,)), each a :class:`Cut` or a tuple
    with the row's value at index 2 (boosting's (x, C, value, upper bound))."""

    def most_violated(self, mu: np.ndarray) -> Sequence[tuple[Any, ...]]: ...


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
        ls = subsets_for(self.K)
        self.subsets, self.sizes, self.member = ls.subsets, ls.sizes, ls.member
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
        self._vstart = (np.concatenate([[0], np.cumsum(nv)[:-1]]).astype(np.int64) if blocks.size
                        else np.zeros(0, np.int64))
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
        idx = np.concatenate([flat_index(self.D, y, cols) for y in c])
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
