"""LP (13) written out whole on the one minimax model: a row for every point x of the domain and label subset C."""

from __future__ import annotations

import numpy as np

from marg.learners.minimax.lp_model import MinimaxModel
from marg.learners.minimax.problem import label_subsets


def dense_rows(P: np.ndarray, K: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows g_{x,C} = Σ_{y∈C} Φ(x, y)/|C| in flat μ space (y·D + j) and b_C = 1/|C| − 1.

    Parameters
    ----------
    P : ndarray (n_points, D)
        Ψ(x) of every point of the domain.
    K : int

    Returns
    -------
    G : ndarray (n_points · (2^K − 1), K·D); b : ndarray (n_points · (2^K − 1),)
    """
    n, D = P.shape
    G, b = [], []
    for C in label_subsets(K):
        for x in range(n):
            g = np.zeros((K, D))
            g[list(C)] = P[x] / len(C)
            G.append(g.ravel())
            b.append(1.0 / len(C) - 1.0)
    return np.array(G), np.array(b)


def write_dense_rows(model: MinimaxModel, G: np.ndarray, b: np.ndarray) -> None:
    """The rows gᵀμ − ν ≤ b on ``model`` (through its one writer of μ terms, ``mu_entries``)."""
    starts, index, value = [], [], []
    nnz = 0
    for g in G:
        flat = np.flatnonzero(g)
        _, cols, vals = model.mu_entries(flat, g[flat])
        starts.append(nnz)
        index.append(np.concatenate([[0], cols]))
        value.append(np.concatenate([[-1.0], vals]))
        nnz += 1 + cols.size
    model.add_rows(np.full(len(b), -np.inf), b, starts, np.concatenate(index), np.concatenate(value))


def phi_by_enumeration(P: np.ndarray, mu: np.ndarray) -> float:
    """φ(μ) = max_{x, C} (Σ_{y∈C} Φ(x, y)ᵀμ − 1)/|C| over the points ``P`` (n, D), μ (K, D)."""
    S = P @ np.asarray(mu, dtype=np.float64).T  # (n, K)
    return max(float(((S[:, list(C)].sum(axis=1) - 1.0) / len(C)).max()) for C in label_subsets(mu.shape[0]))
