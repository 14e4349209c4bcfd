"""The two classification rules of a 0-1 minimax risk classifier, given its scores Φ(x, y)ᵀμ.

Shared by :class:`learners.mrc.MRC` and :class:`learners.dcc.DCC`: the deterministic rule
argmax_y Φ(x, y)ᵀμ and the randomized rule (6) of seed 000,
h(y|x) = (Φ(x,y)ᵀμ − φ)₊ / Σ_y' (Φ(x,y')ᵀμ − φ)₊ (uniform when every term is 0), whose
worst-case error over the uncertainty set is at most R*.
"""

from __future__ import annotations

import numpy as np

from marginals.errors import InputError


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


class MinimaxRules:
    """Prediction methods of a fitted 0-1 minimax classifier (mixin of MRC and DCC).

    The estimator sets ``mu_`` (K, D) and ``phi_`` when fitted and names its feature map
    (an object with ``scores(X, mu)``) in the class attribute ``_score_map``.
    """

    _score_map = ""

    def _check_fitted(self) -> None:
        if not hasattr(self, "mu_"):
            raise InputError(f"this {type(self).__name__} is not fitted yet: call fit(summary) first")

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        """Scores Φ(x, y)ᵀμ, shape (n, K); X is (n, p) codes in codebook feature order."""
        self._check_fitted()
        return getattr(self, self._score_map).scores(X, self.mu_)

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Deterministic rule argmax_y Φ(x, y)ᵀμ, as class indices (n,)."""
        return argmax_rule(self.decision_function(X))

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """Randomized rule (6): h(y|x) = (Φ(x,y)ᵀμ − φ)₊ / Σ_y' (Φ(x,y')ᵀμ − φ)₊, uniform when all are 0; (n, K)."""
        return randomized_rule(self.decision_function(X), self.phi_)
