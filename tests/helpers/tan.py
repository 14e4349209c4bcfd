"""A known tree-augmented naive-Bayes population (the plug-in error's model), for tests."""

from __future__ import annotations

import numpy as np

from marg.marginals.codebook import CategoricalFeature, Codebook, Label


def tan_rows(rng, n):
    """Rows from a known TAN distribution: y, then X0 | y, X1 | X0, y, X2 | X1, y, X3 | y."""
    y = (rng.random(n) < 0.4).astype(np.int64)
    x0 = np.where(rng.random(n) < np.where(y == 1, 0.7, 0.3), 1, 0) + (rng.random(n) < 0.2)
    x1 = np.where(rng.random(n) < 0.8, np.minimum(x0, 1), 1 - np.minimum(x0, 1))
    x2 = np.where(rng.random(n) < np.where(y == 1, 0.75, 0.35), x1, 1 - x1)
    x3 = (rng.random(n) < np.where(y == 1, 0.6, 0.45)).astype(np.int64)
    return np.column_stack([x0, x1, x2, x3]).astype(np.float64), y


def tan_codebook():
    return Codebook(features=(CategoricalFeature("x0", ("a", "b", "c")), CategoricalFeature("x1", ("a", "b")),
                              CategoricalFeature("x2", ("a", "b")), CategoricalFeature("x3", ("a", "b"))),
                    label=Label("y", ("no", "yes")))
