"""Round 2's tables in a study (issue 44, large, :func:`marg.study_measure.round2_tables`): every first-order and pair
table when the design measures every candidate, else :func:`marg.learners.study.two_round.choose_tables`' plan; the
weights split round 2's ρ and nothing more."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest

from marg.learners.study.two_round import _pooled_std, choose_tables
from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label
from marg.marginals.mechanisms import get_mechanism
from marg.marginals.study import STUDY_MECHANISM
from marg.study_measure import round2_tables

LEVELS = (6, 9, 4, 16, 2, 42)  # adult-like: one feature with many levels makes every pair with it the largest


def _cb() -> Codebook:
    return Codebook(features=tuple(CategoricalFeature(f"f{i}", tuple(str(v) for v in range(m)))
                                   for i, m in enumerate(LEVELS)),
                    label=Label("y", ("n", "p")))


def test_every_candidate_kept_requests_every_pair_in_the_codebooks_order_within_round_twos_rho():
    cb = _cb()
    kept = ["f5", "f1", "f3", "f0", "f4", "f2"]  # a noisy ranking, not the codebook's order
    rests = [0.0086]
    tp = round2_tables(kept, cb, rests, 27000.0)
    pairs = [c for c in tp.tables if len(c) == 2]
    assert [c for c in tp.tables if len(c) == 1] == [(a,) for a in kept]
    assert sorted(pairs) == sorted(combinations(cb.feature_names, 2)) and all(cb.index(a) < cb.index(b)
                                                                              for a, b in pairs)
    assert sum(tp.weights) == pytest.approx(1.0, abs=1e-12) and min(tp.weights) > 0  # round 2's ρ, nothing beyond
    # each cell's noise is the discrete Gaussian's at its share of the rest; the largest pair table's recorded
    g = get_mechanism(STUDY_MECHANISM)
    sizes = [2 * int(np.prod([LEVELS[cb.index(a)] for a in c])) for c in tp.tables]
    big = max((i for i, c in enumerate(tp.tables) if len(c) == 2), key=lambda i: sizes[i])
    assert tp.pair_std == pytest.approx(g.scale_for(tp.weights[big] * rests[0], 1.0))
    assert tp.pairs_among == len(kept)
    # the old plan kept only the pairs among the first M by the largest pair table's noise: fewer pairs here
    old = choose_tables(kept, cb, rests, 27000.0)
    assert sum(len(c) == 2 for c in old.tables) < len(pairs)


def test_fewer_than_every_candidate_keeps_choose_tables_plan():
    cb = _cb()
    for kept in (["f1", "f3", "f0"], ["f5"]):
        for rests in ([0.0086], [0.004, 0.004, 0.004]):
            tp, ref = round2_tables(kept, cb, rests, 27000.0), choose_tables(kept, cb, rests, 27000.0)
            assert tp == ref
            assert sum(tp.weights) == pytest.approx(1.0, abs=1e-12)
            # a share of round 2's ρ: never less noise than all of it
            assert tp.first_std >= _pooled_std(rests, 1.0) - 1e-12
