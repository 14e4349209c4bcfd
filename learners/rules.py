"""The two classification rules of a 0-1 minimax risk classifier, given its scores Φ(x, y)ᵀμ.

Shared by :class:`learners.mrc.MRC` and :class:`learners.dcc.DCC`: the deterministic rule
argmax_y Φ(x, y)ᵀμ and the randomized rule (6) of seed 000,
h(y|x) = (Φ(x,y)ᵀμ − φ)₊ / Σ_y' (Φ(x,y')ᵀμ − φ)₊ (uniform when every term is 0), whose
worst-case error over the uncertainty set is at most R*.
"""

from __future__ import annotations

import numpy as np


def argmax_rule(scores: np.ndarray) -> np.ndarray:
    """Class indices (n,) of the largest score per row of ``scores`` (n, K); ties → lowest index."""
    return np.argmax(np.asarray(scores), axis=1)


def randomized_rule(scores: np.ndarray, phi: float) -> np.ndarray:
    """Rule (6): probabilities (n, K), rows summing to one.

    Parameters
    ----------
    scores : ndarray (n, K)
        Φ(x, y)ᵀμ for each row x and label y.
    phi : float
        φ(μ) = max_{x, C} (Σ_{y∈C} Φ(x,y)ᵀμ − 1)/|C| (or a certified upper bound of it).
    """
    s = np.asarray(scores, dtype=np.float64) - float(phi)
    h = np.maximum(s, 0.0)
    d = h.sum(axis=1, keepdims=True)
    K = s.shape[1]
    return np.where(d > 0, h / np.where(d > 0, d, 1.0), 1.0 / K)
