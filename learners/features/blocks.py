"""The node feature map: Ψ(x) block by block, and Φ(x, y) = e_y ⊗ Ψ(x) as a (K, D) layout.

Ψ(x) ∈ R^D is the concatenation, in codebook order, of one block per feature in use:

- a one-hot block of m_i columns for a discrete feature (categorical or binned numeric):
  Ψ_{i,a}(x) = 1{x_i = a};
- a single column for a raw numeric feature on its public range [lo, hi]: Ψ_i(x) = x_i
  (clipped to [lo, hi]).

Φ(x, y) = e_y ⊗ Ψ(x) ∈ R^{K·D} is stored as a (K, D) array whose row y is Ψ(x) and whose
other rows are zero; flattened row-major when a vector is needed, so the coefficient of
column j of Ψ for label y sits at flat index ``y·D + j``. Hence
Φ(x, y)ᵀμ = Ψ(x)ᵀμ[y] for μ of shape (K, D).

Each block's image Ψ_i(X_i) is the convex hull of a few *vertices*: the m_i unit vectors
for a one-hot block, the two points {lo, hi} for a numeric block. The exact separation
oracle of the MRC LP (a maximum of a linear function over the domain) only ever needs
these vertices, so the map exposes them in flat arrays (``vertex_col``, ``vertex_val``,
``vertex_start``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from marg.errors import InputError


@dataclass(frozen=True)
class Block:
    """One feature's columns of Ψ.

    Attributes
    ----------
    name : str
    kind : {"onehot", "numeric"}
    size : int
        m_i for a one-hot block, 1 for a raw numeric block.
    offset : int
        First column of the block in Ψ.
    column : int
        Column of the feature in the data array X (codebook feature order).
    lo, hi : float
        Public range of a numeric block (unused for one-hot blocks).
    """

    name: str
    kind: str
    size: int
    offset: int
    column: int
    lo: float = 0.0
    hi: float = 1.0

    @property
    def slice(self) -> slice:
        return slice(self.offset, self.offset + self.size)

    @property
    def n_vertices(self) -> int:
        return self.size if self.kind == "onehot" else 2

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "size": int(self.size),
            "offset": int(self.offset),
            "column": int(self.column),
            "lo": float(self.lo),
            "hi": float(self.hi),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Block":
        try:
            b = cls(
                name=str(d["name"]),
                kind=str(d["kind"]),
                size=int(d["size"]),
                offset=int(d["offset"]),
                column=int(d["column"]),
                lo=float(d.get("lo", 0.0)),
                hi=float(d.get("hi", 1.0)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"malformed feature block {d!r}: {exc}") from None
        if b.kind not in ("onehot", "numeric"):
            raise InputError(f"feature block {b.name!r} has unknown kind {b.kind!r}")
        return b


def node_blocks(codebook: Any, features: Sequence[str] | None = None) -> list[Block]:
    """Contiguous blocks of the features a learner uses, in codebook order.

    Parameters
    ----------
    codebook : marginals.data.codebook.Codebook
    features : sequence of str or None
        Feature names to use (any order; duplicates ignored); None for every feature.

    Returns
    -------
    list of Block
        One-hot blocks (m_i levels) for discrete features, one column for a raw numeric
        feature on its public range; ``column`` is the feature's codebook index.

    Raises
    ------
    InputError
        An empty list, or a name that is not a feature of the codebook.
    """
    if features is not None:
        names = list(features)
        if not names:
            raise InputError("features must name at least one feature (got an empty list)")
        known = set(codebook.feature_names)
        for nm in names:
            if nm not in known:
                raise InputError(f"unknown feature {nm!r} in features (not in the summary's codebook)")
        want = set(names)
    out: list[Block] = []
    off = 0
    for col, f in enumerate(codebook.features):
        if features is not None and f.name not in want:
            continue
        if f.is_discrete:
            out.append(Block(f.name, "onehot", int(f.n_levels), off, col))
        else:
            out.append(Block(f.name, "numeric", 1, off, col, float(f.lo), float(f.hi)))
        off += out[-1].size
    return out


def onehot_columns(blocks: Sequence[Any], dim: int) -> np.ndarray:
    """(dim,) bool: the Ψ columns of one-hot blocks (indicator entries: their τ is a
    Bernoulli mean), given blocks with ``kind``, ``offset`` and ``size``."""
    out = np.zeros(int(dim), dtype=bool)
    for b in blocks:
        if b.kind == "onehot":
            out[b.offset : b.offset + b.size] = True
    return out


class FeatureMap:
    """Ψ and Φ for a list of feature blocks, re-offset to be contiguous.

    Parameters
    ----------
    blocks : sequence of objects with ``name``, ``kind``, ``size`` (and ``lo``, ``hi`` for
        numeric blocks) — e.g. :func:`node_blocks`, in the order Ψ uses.
    columns : sequence of int
        ``columns[k]`` is the column of block k's feature in the data array X.

    Attributes
    ----------
    blocks : list of Block
        The blocks with offsets into this map's Ψ (0 .. D−1).
    dim : int
        D = Σ sizes.
    vertex_col : ndarray of int, shape (V,)
        Ψ column touched by each vertex (all blocks' vertices, block after block).
    vertex_val : ndarray of float, shape (V,)
        The value Ψ takes in that column at that vertex (1 for one-hot, lo or hi numeric).
    vertex_start : ndarray of int, shape (n_blocks,)
        Index of each block's first vertex in the vertex arrays.
    """

    def __init__(self, blocks: Sequence[Any], columns: Sequence[int]):
        if len(blocks) != len(columns):
            raise InputError(f"feature map: {len(blocks)} blocks but {len(columns)} columns")
        out: list[Block] = []
        off = 0
        for b, col in zip(blocks, columns):
            kind = str(b.kind)
            if kind == "onehot":
                size = int(b.size)
                if size < 1:
                    raise InputError(f"feature {b.name!r}: a one-hot block needs >= 1 level, got {size}")
                out.append(Block(b.name, "onehot", size, off, int(col)))
            elif kind == "numeric":
                lo, hi = float(b.lo), float(b.hi)
                if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
                    raise InputError(f"feature {b.name!r}: numeric range must be finite with lo < hi, got [{lo}, {hi}]")
                out.append(Block(b.name, "numeric", 1, off, int(col), lo, hi))
            else:
                raise InputError(f"feature {b.name!r}: unknown block kind {kind!r}")
            off += out[-1].size
        self.blocks = out
        self.dim = off
        cols, vals, starts = [], [], []
        for b in out:
            starts.append(len(cols))
            if b.kind == "onehot":
                cols.extend(range(b.offset, b.offset + b.size))
                vals.extend([1.0] * b.size)
            else:
                cols.extend([b.offset, b.offset])
                vals.extend([b.lo, b.hi])
        self.vertex_col = np.asarray(cols, dtype=np.int64)
        self.vertex_val = np.asarray(vals, dtype=np.float64)
        self.vertex_start = np.asarray(starts, dtype=np.int64)
        self.vertex_block = np.repeat(np.arange(len(out)), [b.n_vertices for b in out])
        self.block_of_column = np.repeat(np.arange(len(out)), [b.size for b in out])
        onehot = [k for k, b in enumerate(out) if b.kind == "onehot"]
        numeric = [k for k, b in enumerate(out) if b.kind == "numeric"]
        self._oh = np.asarray(onehot, dtype=np.int64)
        self._num = np.asarray(numeric, dtype=np.int64)
        self._oh_cols = np.asarray([out[k].column for k in onehot], dtype=np.int64)
        self._oh_off = np.asarray([out[k].offset for k in onehot], dtype=np.int64)
        self._oh_size = np.asarray([out[k].size for k in onehot], dtype=np.int64)
        self._num_cols = np.asarray([out[k].column for k in numeric], dtype=np.int64)
        self._num_off = np.asarray([out[k].offset for k in numeric], dtype=np.int64)
        self._num_lo = np.asarray([out[k].lo for k in numeric], dtype=np.float64)
        self._num_hi = np.asarray([out[k].hi for k in numeric], dtype=np.float64)

    @property
    def n_blocks(self) -> int:
        return len(self.blocks)

    @property
    def names(self) -> list[str]:
        return [b.name for b in self.blocks]

    @property
    def nodes(self) -> "FeatureMap":
        """The node part of the map: the map itself (it has no edges)."""
        return self

    @property
    def n_nodes(self) -> int:
        return len(self.blocks)

    @property
    def edges(self) -> list[tuple[int, int]]:
        return []

    def indicator_columns(self) -> np.ndarray:
        """(D,) bool: the Ψ columns whose τ is a Bernoulli mean (one-hot levels)."""
        return onehot_columns(self.blocks, self.dim)

    def to_dict(self) -> dict[str, Any]:
        return {"blocks": [b.to_dict() for b in self.blocks]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "FeatureMap":
        """The map from :meth:`to_dict` output; a malformed one is an InputError."""
        try:
            blocks = [Block.from_dict(b) for b in d["blocks"]]
        except (KeyError, TypeError) as exc:
            raise InputError(f"malformed feature map: {exc}") from None
        return cls(blocks, [b.column for b in blocks])

    # ----------------------------------------------------------------- encoding
    def _codes(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Validate X; return (one-hot codes (n, n_onehot) int, numeric values (n, n_num))."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise InputError(f"X must be a 2-d array (n, p), got shape {X.shape}")
        need = 1 + max((b.column for b in self.blocks), default=-1)
        if X.shape[1] < need:
            raise InputError(f"X has {X.shape[1]} columns, the model needs at least {need}")
        codes = X[:, self._oh_cols]
        if codes.size:
            bad = ~np.isfinite(codes) | (codes < 0) | (codes >= self._oh_size[None, :]) | (codes != np.floor(codes))
            if bad.any():
                r, c = np.argwhere(bad)[0]
                b = self.blocks[int(self._oh[c])]
                raise InputError(
                    f"feature {b.name!r}: code {float(codes[r, c]):g} at row {r + 1} is outside 0..{b.size - 1}"
                )
        vals = X[:, self._num_cols]
        if vals.size:
            bad = ~np.isfinite(vals)
            if bad.any():
                r, c = np.argwhere(bad)[0]
                raise InputError(f"feature {self.blocks[int(self._num[c])].name!r}: value {float(vals[r, c])} at row "
                                 f"{r + 1} is not finite")
            vals = np.clip(vals, self._num_lo[None, :], self._num_hi[None, :])
        return codes.astype(np.int64), vals

    def psi(self, X: np.ndarray) -> np.ndarray:
        """Ψ(X), shape (n, D): one-hot columns per discrete block, clipped values per numeric block."""
        codes, vals = self._codes(X)
        n = codes.shape[0]
        out = np.zeros((n, self.dim))
        if codes.size:
            out[np.arange(n)[:, None], self._oh_off[None, :] + codes] = 1.0
        if vals.size:
            out[:, self._num_off] = vals
        return out

    def phi(self, X: np.ndarray, y: np.ndarray, n_classes: int) -> np.ndarray:
        """Φ(x_r, y_r) for each row, shape (n, K, D): row y_r is Ψ(x_r), the others are 0."""
        P = self.psi(X)
        y = np.asarray(y, dtype=np.int64)
        if y.shape != (P.shape[0],) or (y.size and (y.min() < 0 or y.max() >= n_classes)):
            raise InputError(f"labels must be {P.shape[0]} codes in 0..{n_classes - 1}")
        out = np.zeros((P.shape[0], n_classes, self.dim))
        out[np.arange(P.shape[0]), y] = P
        return out

    def scores(self, X: np.ndarray, mu: np.ndarray) -> np.ndarray:
        """Φ(x, y)ᵀμ for every row and label, shape (n, K), with μ of shape (K, D).

        Computed as Σ_i μ[y, offset_i + x_i] over one-hot blocks plus Σ_i μ[y, offset_i]·x_i
        over numeric blocks, without forming Ψ.
        """
        mu = np.asarray(mu, dtype=np.float64)
        if mu.ndim != 2 or mu.shape[1] != self.dim:
            raise InputError(f"mu must have shape (K, {self.dim}), got {mu.shape}")
        codes, vals = self._codes(X)
        n = codes.shape[0]
        s = np.zeros((n, mu.shape[0]))
        if codes.size:
            s += mu[:, self._oh_off[None, :] + codes].sum(axis=2).T
        if vals.size:
            s += vals @ mu[:, self._num_off].T
        return s
