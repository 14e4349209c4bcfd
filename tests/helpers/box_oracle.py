"""The brute-force oracle of a fixed rule's worst-case error: an LP over every joint distribution on a finite grid whose
feature expectations lie in the box |E_pΦ − τ| ≤ λ, and its maximum over every filling of hidden cells."""

from __future__ import annotations

import itertools

import numpy as np
from scipy.optimize import linprog


def worst_error(umap, grid: np.ndarray, h: np.ndarray, tau: np.ndarray, lam: np.ndarray | None = None) -> float:
    """max Σ p(x, y)·1{h(x) ≠ y} over every joint p on ``grid`` × {0, 1} with |E_pΦ − τ| ≤ λ (λ = 0: E_pΦ = τ)."""
    lam = np.zeros_like(tau) if lam is None else lam
    psi = umap.psi(grid)
    n, D = psi.shape
    F = np.zeros((2 * D, 2 * n))
    for y in range(2):
        F[y * D:(y + 1) * D, np.arange(n) * 2 + y] = psi.T
    c = -np.array([float(h[i] != y) for i in range(n) for y in range(2)])
    r = linprog(c, A_ub=np.vstack([F, -F]), b_ub=np.concatenate([(tau + lam).ravel(), -(tau - lam).ravel()]),
                A_eq=np.ones((1, 2 * n)), b_eq=[1.0], bounds=(0, None), method="highs")
    assert r.status == 0, r.message
    return -r.fun


def worst_over_fillings(umap, grid: np.ndarray, h: np.ndarray, tau: np.ndarray, n: int, cls: int, cols: slice,
                        total: int, lam: np.ndarray | None = None) -> float:
    """The largest :func:`worst_error` over every filling of three hidden cells ``tau[cls, cols]`` (counts ≥ 0 summing
    to ``total``, each over ``n`` rows)."""
    best = -1.0
    for t in itertools.product(range(total + 1), repeat=2):
        if sum(t) > total:
            continue
        filled = tau.copy()
        filled[cls, cols] = np.array([t[0], t[1], total - sum(t)], dtype=np.float64) / n
        best = max(best, worst_error(umap, grid, h, filled, lam))
    return best
