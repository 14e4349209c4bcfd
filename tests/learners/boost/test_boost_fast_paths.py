"""The boost learner's fast paths equal their definitions: the MMA search's row keys (integers
up to 64 tests, byte records beyond) group and match points as the definitions do — equal rows
together, groups in lexicographic order, the exclude children's tight bounds (4.5) from classes
that differ in one test — and the marginals oracle keeps exactly the maximal cliques."""

from __future__ import annotations

import numpy as np
import pytest

from marg.learners.boost.oracles import CellWeights, _maximal
from marg.learners.boost.points import Classes, PointSet, group_rows


def brute_groups(bits):
    rows = [tuple(bool(v) for v in r) for r in bits]
    uniq = sorted(set(rows))  # False < True: the packed bytes' order
    members = np.array([uniq.index(r) for r in rows])
    first = np.array([rows.index(u) for u in uniq])
    return members, first


@pytest.mark.parametrize("t", [1, 7, 40, 64, 65, 100])
def test_group_rows_is_the_lexicographic_grouping(t):
    rng = np.random.default_rng(t)
    base = rng.random((12, t)) < 0.5
    bits = base[rng.integers(0, 12, size=60)]  # repeated rows
    members, first = group_rows(bits)
    ref_m, ref_f = brute_groups(bits)
    assert np.array_equal(members, ref_m) and np.array_equal(first, ref_f)


def brute_exclude(cls: Classes):
    """Per free test t: Σ_η (g_η)₊ after merging the classes whose patterns differ only in t."""
    q, f = cls.patterns.shape
    out = []
    for g, P in ((cls.g_pos, cls.pair_pos), (cls.g_neg, cls.pair_neg)):
        col = np.zeros(f)
        for t in range(f):
            groups: dict = {}
            for a in range(q):
                key = tuple(np.delete(cls.patterns[a], t))
                groups.setdefault(key, []).append(a)
            total = 0.0
            for members in groups.values():
                val = sum(g[a] for a in members)
                if P is not None and len(members) == 2:
                    a, b = members
                    val -= P[a, b] + P[b, a]
                total += max(val, 0.0)
            col[t] = total
        out.append(col)
    return out


@pytest.mark.parametrize("t,pairs", [(6, False), (30, True), (64, False), (70, True)])
def test_exclude_bounds_match_merging_by_hand(t, pairs):
    rng = np.random.default_rng(100 + t)
    n = 40
    B = rng.random((n, t)) < 0.5
    B[rng.integers(0, n, 15)] = B[rng.integers(0, n, 15)]  # duplicates
    B[:10, 1:] = B[0, 1:]  # classes that differ in test 0 only
    pos, neg = rng.random(n), rng.random(n)
    kw = {}
    if pairs:
        kw = {"pair_pos": rng.random((n, n)) * (rng.random((n, n)) < 0.2),
              "pair_neg": rng.random((n, n)) * (rng.random((n, n)) < 0.2)}
    ps = PointSet(B, pos, neg, **kw)
    cls = ps.classes(np.arange(n), np.arange(t))
    got = ps.child_bounds(cls, tight=True, leaf=False).exclude
    ref_p, ref_n = brute_exclude(cls)
    np.testing.assert_allclose(got, np.maximum(ref_p, ref_n), rtol=1e-12, atol=1e-12)


def test_maximal_cliques_are_those_no_other_clique_contains():
    rng = np.random.default_rng(5)
    feats = [f"f{i}" for i in range(7)]
    for _ in range(30):
        cliques = [tuple(sorted(rng.choice(feats, size=int(rng.integers(1, 5)), replace=False))) for _ in range(12)]
        cells = [CellWeights(c, np.zeros(1), np.zeros(1)) for c in cliques]
        got = [c.clique for c in _maximal(cells)]
        ref = [c for k, c in enumerate(cliques)  # the definition: not strictly inside another, first of equals
               if not any(set(c) < set(o) or (set(c) == set(o) and j < k) for j, o in enumerate(cliques))]
        assert got == ref
