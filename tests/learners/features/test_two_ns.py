"""The two n's of a noisy Summary (issue 36) have one owner and two names: ``n`` (reported, post-processed)
and ``n_released`` (the tables as released) — the learners' moments divide by the second, reports state the first."""

from __future__ import annotations

import numpy as np
import pytest

from marg.learners.features.blocks import FeatureMap, node_blocks
from marg.learners.features.statistics import label_moments, map_moments, released
from tests.helpers.tan import three_sites


def _node_map(cb):
    blocks = node_blocks(cb)
    return FeatureMap(blocks, list(range(len(blocks))))


def test_a_noisy_summary_has_two_ns_and_the_moments_use_the_released_one():
    cb, S, _ = three_sites(np.random.default_rng(7), (300, 250, 200), epsilon=0.3)
    rel = released(S)
    # n_released is the label table's total as released; n the post-processed estimate: they differ under noise
    assert S.n_released == float(np.asarray(rel.counts((cb.label.name,))).sum()) == rel.n
    assert S.n == float(S.class_counts.sum()) and S.n != S.n_released
    assert rel.n_released == rel.n  # on the tables as released the two are one
    m = map_moments(S, _node_map(cb))
    assert m.n == S.n_released
    lm = label_moments(S)
    assert lm.n == S.n_released
    assert lm.tau[:, 0] == pytest.approx(np.asarray(rel.counts((cb.label.name,))) / S.n_released, rel=1e-15)


def test_an_exact_summary_has_one_n():
    cb, S, _ = three_sites(np.random.default_rng(8), (120, 90, 60))
    assert S.n == S.n_released == 270.0 and released(S) is S
    assert map_moments(S, _node_map(cb)).n == 270.0
