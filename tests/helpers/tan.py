"""A known tree-augmented naive-Bayes population (the plug-in error's model), for tests."""

from __future__ import annotations

import numpy as np

from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label


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


def three_sites(rng, sizes, epsilon=None):
    """Three sites of TAN rows (sizes ``sizes``), every pair table, exact or privatized at
    ``epsilon``: (codebook, the aggregated Summary with its site parts, the parts)."""
    from marg.marginals.counts.counting import count_tables
    from marg.marginals.privacy import privatize
    from marg.marginals.summary import Summary, sum_tables
    from marg.marginals.counts.tables import plan_cliques

    cb = tan_codebook()
    plan = plan_cliques(cb, "all")
    parts = []
    for k, n in enumerate(sizes):
        X, y = tan_rows(rng, n)
        tabs = count_tables(cb, X, y, plan)
        if epsilon is not None:
            tabs, _ = privatize(tabs, epsilon=epsilon, codebook=cb)
        parts.append((f"s{k}", tabs))
    return cb, Summary(cb, sum_tables([p[1] for p in parts])[0], site_parts=parts), parts
