"""The study's round-2 features (:func:`marg.study_measure.measured_features`): the design's top k by round 1's
pooled scores, whether or not the noise leaves a lower bound positive (ranking noisy sums is post-processing)."""

from __future__ import annotations

import numpy as np

from marg.learners.selection.screening import screen_scores
from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label
from marg.marginals.counts.counting import count_tables
from marg.marginals.privacy import privatize
from marg.marginals.summary import Summary
from marg.marginals.counts.tables import plan_cliques
from marg.study_measure import measured_features


def _noisy_scores(rng, n, p, informative, epsilon):
    """Round 1 as the learner sees it: first-order tables of binary features, with DP noise; the first
    ``informative`` features copy the label except a third of the rows, the rest are independent of it."""
    y = rng.integers(0, 2, n)
    X = rng.integers(0, 2, (n, p)).astype(np.float64)
    for j in range(informative):
        X[:, j] = np.where(rng.random(n) < 1 / 3, rng.integers(0, 2, n), y)
    cb = Codebook(features=tuple(CategoricalFeature(f"g{j}", ("a", "b")) for j in range(p)),
                  label=Label("y", ("n", "p")))
    noisy, _ = privatize(count_tables(cb, X, y, plan_cliques(cb, "first")), epsilon=epsilon, codebook=cb)
    return screen_scores(Summary(cb, noisy), coverage=0.95)


def test_the_design_s_k_is_measured_where_the_noise_leaves_no_bound_positive():
    rng = np.random.default_rng(44)
    found = 0
    for _ in range(5):
        sc = _noisy_scores(rng, 3000, 30, 4, epsilon=0.2)
        assert sc.rank() == []  # the noise leaves no lower bound positive: the old rule measured one feature
        kept = measured_features(sc, 8)
        assert len(kept) == len(set(kept)) == 8 and set(kept) <= set(sc.names)
        # post-processing of the noisy sums: the top 8 by the plug-in score of the tables as released
        assert sorted(sc.score[[sc.names.index(a) for a in kept]], reverse=True) == sorted(sc.score, reverse=True)[:8]
        found += sum(a in kept for a in ("g0", "g1", "g2", "g3"))
    assert found >= 17  # of 20: the informative features still lead the noisy scores (a bound at 95 % kept none)


def test_positive_bounds_lead_and_k_beyond_p_takes_every_feature():
    sc = _noisy_scores(np.random.default_rng(45), 3000, 12, 3, epsilon=4.0)
    pos = sc.rank()
    assert pos and set(pos) <= {"g0", "g1", "g2"}
    assert measured_features(sc, len(pos))[:len(pos)] == pos
    everything = measured_features(sc, 50)
    assert everything[:len(pos)] == pos and sorted(everything) == sorted(sc.names)
    assert len(measured_features(sc, 0)) == 1  # at least one table measured (its column sums serve the label)
