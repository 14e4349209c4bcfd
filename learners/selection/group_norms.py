"""The group norms of the group lasso, their dual norms and their exact proximal maps.

Z ∈ R^{M×T} holds one block of rows per feature (m_i rows of T columns). The L1/L∞ group
norm of seed 004 (``norm="linf"``: the max of a block's absolute entries) and the L1/L2 one
(``norm="l2"``: the block's Frobenius norm); their duals (L∞ ↔ L1, L2 ↔ L2), which the KKT
conditions and λ_max read; and the prox of t·‖·‖ per block — L2: block soft-thresholding;
L∞: v − Π_{‖·‖₁ ≤ t}(v) (Moreau decomposition with the projection onto the L1 ball, Duchi
et al. 2008). The solver is :mod:`marg.learners.selection.group_lasso`.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from marg.errors import InputError

__all__ = ["NORMS", "as_matrix", "block_offsets", "dual_group_norms", "group_norms", "project_l1_ball", "prox_group"]

NORMS = ("linf", "l2")


def block_offsets(sizes: Sequence[int]) -> np.ndarray:
    """Start offsets of the feature blocks (length len(sizes) + 1, last = M): block j is rows
    ``off[j]:off[j + 1]``. The one owner for Rényi, the group lasso and GBD."""
    return np.concatenate([[0], np.cumsum(np.asarray(sizes, dtype=np.int64))]).astype(np.int64)


def as_matrix(D: np.ndarray) -> np.ndarray:
    """``D`` as a float (M, T) matrix: a vector (M,) is one column (M, 1)."""
    D = np.asarray(D, dtype=np.float64)
    return D[:, None] if D.ndim == 1 else D


def _check_norm(norm: str) -> None:
    if norm not in NORMS:
        raise InputError(f"unknown group norm {norm!r} (expected 'linf' or 'l2')")


class _Layout:
    """Gather indices putting each group's entries (m_i·T of them) in one padded row."""

    _cache: dict = {}

    def __init__(self, sizes: Sequence[int], T: int):
        sizes = np.asarray(sizes, dtype=np.int64)
        off = block_offsets(sizes)
        M = int(off[-1])
        self.p, self.M, self.T = len(sizes), M, T
        self.L = int(sizes.max()) * T if len(sizes) else 0
        idx = np.full((self.p, max(self.L, 1)), M * T, dtype=np.int64)  # sentinel: an appended 0
        for i in range(self.p):
            flat = (np.arange(off[i], off[i + 1])[:, None] * T + np.arange(T)[None, :]).ravel()
            idx[i, : flat.size] = flat
        self.idx = idx
        self.valid = idx < M * T

    @classmethod
    def get(cls, sizes: Sequence[int], T: int) -> "_Layout":
        key = (np.asarray(sizes, dtype=np.int64).tobytes(), T)
        lay = cls._cache.get(key)
        if lay is None:
            if len(cls._cache) > 32:
                cls._cache.clear()
            lay = cls._cache[key] = cls(sizes, T)
        return lay

    def gather(self, Z: np.ndarray) -> np.ndarray:
        """(p, L) padded blocks (zeros in the padding)."""
        flat = np.concatenate([Z.ravel(), [0.0]])
        return flat[self.idx]

    def scatter(self, B: np.ndarray) -> np.ndarray:
        out = np.zeros(self.M * self.T + 1)
        out[self.idx[self.valid]] = B[self.valid]
        return out[:-1].reshape(self.M, self.T)


def _group_blocks(Z: np.ndarray, sizes: Sequence[int], norm: str) -> np.ndarray:
    """Z's groups as (p, L) zero-padded blocks, after checking ``norm``."""
    _check_norm(norm)
    Z = as_matrix(Z)
    if len(sizes) == 0:
        return np.zeros((0, 1))
    return _Layout.get(sizes, Z.shape[1]).gather(Z)


def group_norms(Z: np.ndarray, sizes: Sequence[int], norm: str = "linf") -> np.ndarray:
    """‖Z_i‖ per group: max |entry| (``linf``) or Frobenius (``l2``). Shape (p,)."""
    B = _group_blocks(Z, sizes, norm)
    return np.abs(B).max(axis=1) if norm == "linf" else np.sqrt(np.sum(B * B, axis=1))


def dual_group_norms(G: np.ndarray, sizes: Sequence[int], norm: str = "linf") -> np.ndarray:
    """Dual norm per group: Σ|entry| for ``linf``, Frobenius for ``l2``. Shape (p,)."""
    B = _group_blocks(G, sizes, norm)
    return np.abs(B).sum(axis=1) if norm == "linf" else np.sqrt(np.sum(B * B, axis=1))


def project_l1_ball(v: np.ndarray, radius: float) -> np.ndarray:
    """Euclidean projection of v onto {x : ‖x‖₁ ≤ radius} (sort-based, O(n log n)).

    Solution x_a = sign(v_a)·max(|v_a| − θ, 0) with θ ≥ 0 the smallest value making
    ‖x‖₁ ≤ radius.
    """
    v = np.asarray(v, dtype=np.float64)
    return _project_l1_rows(v.reshape(1, -1), np.array([float(radius)])).reshape(v.shape)


def _project_l1_rows(B: np.ndarray, radius: np.ndarray) -> np.ndarray:
    """Row-wise projection of B (p, L) onto L1 balls of radii ``radius`` (p,)."""
    A = np.abs(B)
    U = -np.sort(-A, axis=1)
    css = np.cumsum(U, axis=1)
    k = np.arange(1, B.shape[1] + 1)[None, :]
    r = np.maximum(radius, 0.0)[:, None]
    cond = U * k > css - r
    rho = B.shape[1] - 1 - np.argmax(cond[:, ::-1], axis=1)  # last index where cond holds
    theta = (css[np.arange(B.shape[0]), rho] - r[:, 0]) / (rho + 1.0)
    inside = A.sum(axis=1) <= r[:, 0]
    theta = np.where(inside, 0.0, np.maximum(theta, 0.0))
    X = np.sign(B) * np.maximum(A - theta[:, None], 0.0)
    X[inside] = B[inside]
    X[r[:, 0] <= 0] = 0.0
    return X


def prox_group(V: np.ndarray, sizes: Sequence[int], thresholds: np.ndarray, norm: str = "linf") -> np.ndarray:
    """prox of Σ_i t_i‖V_i‖: argmin_Z ½‖Z − V‖² + Σ_i t_i‖Z_i‖.

    L2: Z_i = max(0, 1 − t_i/‖V_i‖)V_i. L∞: Z_i = V_i − Π_{‖·‖₁ ≤ t_i}(V_i) (Moreau).
    Vectorised over groups (padded to the largest group).
    """
    _check_norm(norm)
    V = as_matrix(V)
    if len(sizes) == 0:
        return V.copy()
    lay = _Layout.get(sizes, V.shape[1])
    B = lay.gather(V)
    t = np.asarray(thresholds, dtype=np.float64)
    if norm == "l2":
        nrm = np.sqrt(np.sum(B * B, axis=1))
        scale = np.where(nrm > t, 1.0 - t / np.where(nrm > 0, nrm, 1.0), 0.0)
        return lay.scatter(B * scale[:, None])
    return lay.scatter(B - _project_l1_rows(B, t))
