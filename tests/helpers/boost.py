"""Tiny boosting problems shared by the boost tests: a codebook of alternating categorical and
binned numeric features, rows whose label depends on them, and a clock the column-generation
driver can be made to run out of."""

from __future__ import annotations

import time

import numpy as np

from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label, NumericFeature


def tiny_codebook(sizes, classes=("neg", "pos")):
    feats = []
    for i, m in enumerate(sizes):
        if i % 2 == 0:
            feats.append(CategoricalFeature(f"c{i}", tuple(f"l{a}" for a in range(m))))
        else:
            feats.append(NumericFeature(f"n{i}", edges=tuple(float(e) for e in range(m - 1))))
    return Codebook(tuple(feats), Label("y", tuple(classes)))


def sample(cb, n, rng):
    """Rows with a label that depends on the features (so the vote has something to find)."""
    sizes = [cb.attribute_size(f.name) for f in cb.features]
    X = np.column_stack([rng.integers(0, m, size=n) for m in sizes])
    score = (X[:, 0] == 0).astype(float) + 0.8 * ((X[:, 1] > 0) & (X[:, -1] == 1)) + rng.normal(0, 0.4, size=n)
    y = (score > 0.6).astype(np.int64)
    return X, y


class Clock:
    """The driver's ``time``: the real clock plus one second per pricing search (HiGHS keeps
    the real clock, so the LP deadlines stay far away)."""

    def __init__(self):
        self.skew = 0.0

    def perf_counter(self):
        return time.perf_counter() + self.skew
