"""MMA branch and bound against brute-force enumeration of monomials (rows and marginals).

Every configuration of the search (tightened / simple bound × strong, reverse-greedy and
static branching) must find the value of the best monomial that enumerating all monomials
of order ≤ K finds, with and without L0-RBoost's pair weights and code-length costs; the
marginals oracle on tables counted from rows must price every monomial exactly as the row
oracle does on those rows.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from marg.learners.boost.cost import code_length_cost
from marg.learners.boost.literals import Literal, codebook_tests, cover, evaluate_tests, features_of
from marg.learners.boost.mma import SearchOptions, maximize_agreement
from marg.learners.boost.oracles import MarginalsOracle, RowOracle, WeightedPoints, cell_weights
from marg.learners.boost.points import PointSet
from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label, NumericFeature
from marg.marginals.counts.counting import count_tables

CONFIGS = [
    SearchOptions(bound=b, branching=br, k_fraction=kf)
    for b in ("tight", "simple")
    for br, kf in (("strong", 0.5), ("greedy", 0.5), ("greedy", 1.0), ("static", 1.0), ("static", 0.4))
]


def all_monomials(n_tests: int, K: int, min_order: int = 0, allowed=None):
    for k in range(min_order, K + 1):
        for S in itertools.combinations(range(n_tests), k):
            for pol in itertools.product((True, False), repeat=k):
                mono = tuple(Literal(t, p) for t, p in zip(S, pol))
                if allowed is None or allowed(mono):
                    yield mono


def row_rewards(B, yp, w, V, mono):
    """(f⁺, f⁻) straight from the seed's definitions (2.2)/(3.21) on rows."""
    c = cover(mono, B)
    fp = w[c & yp].sum() - w[c & ~yp].sum()
    fn = -fp
    if V is not None:
        fp += V[np.ix_(c & yp, ~c & ~yp)].sum()
        fn += V[np.ix_(c & ~yp, ~c & yp)].sum()
    return fp, fn


def n_monomials(N: int, K: int) -> int:
    return sum(math.comb(N, k) * 2**k for k in range(K + 1))


def capped_order(draw, N: int) -> int:
    """An order cap K ≤ N whose monomials brute force can still enumerate quickly."""
    K = draw(st.integers(0, N))
    while n_monomials(N, K) > 6000:
        K -= 1
    return K


def brute_force(B, yp, w, V, K, cost, min_order=0, allowed=None):
    best = -math.inf
    for mono in all_monomials(B.shape[1], K, min_order, allowed):
        fp, fn = row_rewards(B, yp, w, V, mono)
        best = max(best, max(fp, fn) - cost[len(mono)])
    return best


@st.composite
def codebooks(draw, max_features=3):
    feats = []
    for i in range(draw(st.integers(1, max_features))):
        if draw(st.booleans()):
            m = draw(st.integers(2, 4))
            feats.append(CategoricalFeature(f"c{i}", tuple(f"l{a}" for a in range(m))))
        else:
            k = draw(st.integers(1, 3))
            feats.append(NumericFeature(f"n{i}", edges=tuple(float(e) for e in range(k)), missing=draw(st.booleans())))
    return Codebook(tuple(feats), Label("y", ("neg", "pos")))


@st.composite
def row_instances(draw, pairs=True):
    cb = draw(codebooks())
    n = draw(st.integers(1, 24))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.integers(0, f.n_levels, n) for f in cb.features]).astype(np.float64)
    yp = rng.random(n) < draw(st.floats(0.0, 1.0))
    w = rng.random(n) * (rng.random(n) < 0.85)
    V = None
    if pairs and draw(st.booleans()):
        V = rng.random((n, n)) * (rng.random((n, n)) < 0.3)
    N = len(codebook_tests(cb))
    K = capped_order(draw, N)
    kind = draw(st.sampled_from(["zero", "random", "code-length"]))
    if kind == "zero" or K == 0:
        cost = np.zeros(K + 1)
    elif kind == "random":
        cost = np.sort(rng.random(K + 1)) * w.sum() / 3
    else:  # (3.22) scaled to the weights; nondecreasing for K <= (2N-1)/3
        K = min(K, max(1, (2 * N - 1) // 3))
        cost = code_length_cost(N, max(n, 2), K) * w.sum() / (4 * max(n, 2))
    return cb, X, yp, w, V, K, cost, draw(st.integers(0, min(K, 1)))


@settings(max_examples=220, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(row_instances())
def test_row_mma_equals_brute_force(inst):
    cb, X, yp, w, V, K, cost, min_order = inst
    oracle = RowOracle(cb, X, yp, w, pairs=V)
    B = evaluate_tests(oracle.tests, X)
    ref = brute_force(B, yp, w, V, K, cost, min_order)
    for opts in CONFIGS:
        r = maximize_agreement(oracle, max_order=K, cost=cost, min_order=min_order, options=opts)
        assert r.optimal
        assert r.value == pytest.approx(ref, abs=1e-9), opts
        assert r.upper_bound == pytest.approx(ref, abs=1e-9)
        assert min_order <= len(r.monomial) <= K
        fp, fn = row_rewards(B, yp, w, V, r.monomial)
        assert max(fp, fn) - cost[len(r.monomial)] == pytest.approx(ref, abs=1e-9)
        assert r.sign == (1 if fp >= fn else -1) or fp == pytest.approx(fn)


@st.composite
def marginal_instances(draw):
    cb = draw(codebooks())
    p = cb.n_features
    n = draw(st.integers(1, 30))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    X = np.column_stack([rng.integers(0, f.n_levels, n) for f in cb.features]).astype(np.float64)
    y = (rng.random(n) < 0.5).astype(np.int64)
    reps = rng.integers(0, 4, n)  # integer row weights: the tables count each row reps[i] times
    names = cb.feature_names
    cliques = draw(st.lists(st.lists(st.sampled_from(names), min_size=1, max_size=p, unique=True), min_size=1,
                            max_size=3))
    n_points = draw(st.integers(0, n))  # the first rows go to the tables, the rest as extra points
    N = len(codebook_tests(cb))
    K = capped_order(draw, N)
    cost = np.sort(rng.random(K + 1)) * reps.sum() / 4 if draw(st.booleans()) else np.zeros(K + 1)
    return cb, X, y, reps, cliques, n_points, K, cost


@settings(max_examples=220, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(marginal_instances())
def test_marginals_oracle_equals_rows(inst):
    cb, X, y, reps, cliques, n_points, K, cost = inst
    n = X.shape[0]
    lab = cb.label.name
    t_rows = np.arange(n - n_points)
    p_rows = np.arange(n - n_points, n)
    rep = np.repeat(t_rows, reps[t_rows])
    cells = []
    for clique in cliques:
        ordered = tuple(f for f in cb.feature_names if f in clique)
        (table,) = count_tables(cb, X[rep], y[rep], [ordered + (lab,)])
        cells.append(cell_weights(table, lab, np.array([-1.0, 1.0])))
    pts = WeightedPoints(X[p_rows], (reps * (y == 1))[p_rows].astype(float), (reps * (y == 0))[p_rows].astype(float))
    marg = MarginalsOracle(cb, cells, points=pts if n_points else None)
    rows = RowOracle(cb, X, y == 1, reps.astype(float))
    assert marg.tests == rows.tests
    sets = [set(c) for c in cliques]

    def priced(mono):
        return any(set(features_of(mono, rows.tests)) <= s for s in sets)

    # every priced monomial: the marginals agreement is the row agreement
    for mono in all_monomials(len(rows.tests), min(K, 2), 0, priced):
        assert marg.agreement(mono) == pytest.approx(rows.agreement(mono), abs=1e-9)
    B = evaluate_tests(rows.tests, X)
    ref = brute_force(B, y == 1, reps.astype(float), None, K, cost, 0, priced)
    for opts in CONFIGS:
        r = maximize_agreement(marg, max_order=K, cost=cost, options=opts)
        assert r.value == pytest.approx(ref, abs=1e-9), opts
        assert priced(r.monomial)
        assert max(rows.agreement(r.monomial)) - cost[len(r.monomial)] == pytest.approx(ref, abs=1e-9)
    if any(s == set(cb.feature_names) for s in sets):  # the full joint table prices every monomial
        for b in ("tight", "simple"):
            opts = SearchOptions(bound=b)
            assert maximize_agreement(marg, max_order=K, cost=cost, options=opts).value == pytest.approx(
                maximize_agreement(rows, max_order=K, cost=cost, options=opts).value, abs=1e-9)


@settings(max_examples=120, deadline=None)
@given(row_instances(), st.data())
def test_bounds_hold_below_every_node(inst, data):
    """At a random node, (2.7)/(4.5) ≤ (2.5), both ≥ every monomial below, and the children's
    bounds of strong branching are the bounds of the children themselves."""
    cb, X, yp, w, V, K, cost, _ = inst
    oracle = RowOracle(cb, X, yp, w, pairs=V)
    ps: PointSet = oracle.parts()[0].points
    N = ps.n_tests
    status = np.array(data.draw(st.lists(st.integers(0, 3), min_size=N, max_size=N)))  # 0 free, 1 J, 2 C, 3 E
    cov = np.arange(ps.n)
    for t in range(N):
        if status[t] in (1, 2):
            cov = ps.restrict(cov, t, status[t] == 1)
    free = np.flatnonzero(status == 0)
    cls = ps.classes(cov, free)
    tp, tn = cls.tight_bound()
    sp_, sn = ps.simple_bound(cov)
    assert tp <= sp_ + 1e-12 and tn <= sn + 1e-12
    for k in range(len(free) + 1):
        for S in itertools.combinations(free, k):
            for pol in itertools.product((True, False), repeat=k):
                c = cov
                for t, p in zip(S, pol):
                    c = ps.restrict(c, t, p)
                fp, fn = ps.value(c)
                assert fp <= tp + 1e-9 and fn <= tn + 1e-9
    if free.size == 0:
        return
    for tight in (True, False):
        cb_ = ps.child_bounds(cls, tight=tight, leaf=False)
        lb = ps.child_bounds(cls, tight=tight, leaf=True)
        for i, t in enumerate(free):
            rest = np.delete(free, i)
            for positive, got, leaf_got in ((True, cb_.include, lb.include), (False, cb_.complement, lb.complement)):
                c = ps.restrict(cov, t, positive)
                want = max(ps.classes(c, rest).tight_bound()) if tight else max(ps.simple_bound(c))
                assert got[i] == pytest.approx(want, abs=1e-9)
                assert leaf_got[i] == pytest.approx(max(ps.value(c)) if c.size else 0.0, abs=1e-9)
            want = max(ps.classes(cov, rest).tight_bound()) if tight else max(ps.simple_bound(cov))
            assert cb_.exclude[i] == pytest.approx(want, abs=1e-9)


def _small_instance(seed=3, n=60):
    rng = np.random.default_rng(seed)
    cb = Codebook(tuple(CategoricalFeature(f"c{i}", ("a", "b", "c")) for i in range(6)), Label("y", ("neg", "pos")))
    X = rng.integers(0, 3, (n, 6)).astype(float)
    yp = (X[:, 0] == 1) ^ (rng.random(n) < 0.2)
    return cb, X, yp, rng.random(n)


def test_limits_return_a_valid_upper_bound():
    cb, X, yp, w = _small_instance()
    oracle = RowOracle(cb, X, yp, w)
    full = maximize_agreement(oracle, max_order=4)
    for opts in (SearchOptions(node_limit=5), SearchOptions(queue_limit=1, branching="greedy")):
        r = maximize_agreement(oracle, max_order=4, options=opts)
        assert r.status in ("node_limit", "queue_limit")
        assert r.value <= full.value + 1e-12 <= r.upper_bound + 2e-12
    assert full.optimal and full.upper_bound == full.value


def test_threshold_finds_only_better_monomials():
    cb, X, yp, w = _small_instance()
    oracle = RowOracle(cb, X, yp, w)
    best = maximize_agreement(oracle, max_order=3)
    above = maximize_agreement(oracle, max_order=3, threshold=best.value - 1e-9)
    assert above.monomial is not None and above.value == pytest.approx(best.value)
    none = maximize_agreement(oracle, max_order=3, threshold=best.value)
    assert none.monomial is None and none.optimal and none.upper_bound == best.value
    assert none.nodes <= best.nodes
