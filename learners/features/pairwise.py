"""The pairwise feature map: node blocks plus pair indicators 1{x_i = a, x_j = b} on chosen edges.

With node blocks as in :mod:`marg.learners.features.blocks` (one-hot 1{x_i = a}, or the
clipped value of a raw numeric feature) and, for every edge (i, j) over discrete features,
the m_i·m_j indicators 1{x_i = a, x_j = b} (column a·m_j + b of the edge block), Ψ(x) ∈ R^D
is their concatenation and Φ(x, y) = e_y ⊗ Ψ(x), stored (K, D). With no edges it is the
node map itself (the MRC's first-order map).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from marg.errors import InputError

from .blocks import Block, FeatureMap


class PairwiseFeatureMap:
    """Ψ(x) = [node blocks | edge blocks]: node one-hots (or raw values) and pair indicators.

    Parameters
    ----------
    blocks : sequence of node blocks (``name``, ``kind``, ``size``, ``lo``, ``hi``), as for
        :class:`marg.learners.features.blocks.FeatureMap`.
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
                raise InputError(f"edge ({ba.name!r}, {bb.name!r}): feature {name!r} is raw numeric; edges need "
                                 "discrete features")
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
        self.edge_i = np.asarray([e[0] for e in self.edges], dtype=np.int64)
        self.edge_j = np.asarray([e[1] for e in self.edges], dtype=np.int64)
        self.edge_mj = np.asarray([s[1] for s in shapes], dtype=np.int64)

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

    def indicator_columns(self) -> np.ndarray:
        """(D,) bool: the indicator columns (one-hot node levels and every edge cell), i.e. all
        but the raw numeric columns; their τ entries are Bernoulli means."""
        is_cell = np.ones(self.dim, dtype=bool)
        for b in self.blocks:
            if b.kind != "onehot":
                is_cell[b.offset] = False
        return is_cell

    def edge_columns(self, e: int) -> np.ndarray:
        """Ψ columns of edge block e."""
        mi, mj = self.edge_shape[e]
        return np.arange(self.edge_offset[e], self.edge_offset[e] + mi * mj)

    def _edge_cells(self, X: np.ndarray) -> np.ndarray:
        """(n, n_edges) Ψ column hit by each edge (X already validated)."""
        if not self.edges:
            return np.zeros((X.shape[0], 0), dtype=np.int64)
        ci = np.asarray([self.blocks[a].column for a in self.edge_i], dtype=np.int64)
        cj = np.asarray([self.blocks[b].column for b in self.edge_j], dtype=np.int64)
        xi = X[:, ci].astype(np.int64)
        xj = X[:, cj].astype(np.int64)
        return self.edge_offset[None, :] + xi * self.edge_mj[None, :] + xj

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
