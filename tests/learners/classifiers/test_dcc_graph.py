"""DCC on an arbitrary edge set (structure="all" / a pair list): the local-polytope relaxation.

Mathematical truths checked on small random problems (full-joint brute force):
- R* (the largest Bayes error over joints matching the first-order tables and EVERY used
  pair-with-label table) ≤ R*_L (the MAP-LP bound is ≥ the true max for every μ);
- R*_L ≤ the exact forest R* of any spanning tree of the graph (the extra edges at μ = 0,
  δ = 0 give back the tree's bound, exact on a tree);
- on a tree, the local-polytope LP equals the exact compact LP;
- the randomized rule (6) with the certified φ_L has worst-case error ≤ R*_L over those
  joints, and φ_L is ≥ every row (x, C) of the whole domain (also after the empty-cell fix).
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from marg.learners.classifiers.dcc import DCC
from marg.learners.features.pairwise import PairwiseFeatureMap
from marg.learners.minimax.empty_cells import empty_cells
from marg.learners.minimax.forest import ForestOracle
from marg.learners.minimax.forest_lp import solve_compact
from marg.learners.minimax.gauge import common_constant, reference_mask
from marg.learners.minimax.local import solve_local
from marg.learners.features.structure import UnionFind
from marg.errors import InputError
from tests.helpers.dcc_oracle import brute_force_R, domain, edge_indices, make_problem, rule_worst_case


def spanning_trees(n, edges):
    """Every spanning tree (n − 1 edges, no cycle) of a connected graph on 0..n−1."""
    out = []
    for sub in itertools.combinations(edges, n - 1):
        uf = UnionFind(n)
        if all(uf.union(a, b) for a, b in sub):
            out.append(list(sub))
    return out


def cases(n, seed, K=2):
    rng = np.random.default_rng(seed)
    out = []
    for t in range(n):
        d = 3 + t % 2
        levels = [int(rng.integers(2, 4)) for _ in range(d)]
        while np.prod(levels) > 54:
            levels[int(np.argmax(levels))] -= 1
        out.append((rng, levels, K, 0.3 if t % 2 == 0 else 0.0))
    return out


def names(cb, E):
    return [(cb.features[a].name, cb.features[b].name) for a, b in E]


@pytest.mark.parametrize("K", [2, 3])
@pytest.mark.parametrize("s", [0.0, 0.5])
def test_local_bound_between_true_minimax_and_spanning_trees(K, s):
    for rng, levels, K_, sparsity in cases(6, seed=40 + K + int(10 * s), K=K):
        cb, S, p = make_problem(rng, levels, K_, sparsity=sparsity)
        d = len(levels)
        graphs = [[(0, 1), (1, 2), (0, 2)]] + ([list(itertools.combinations(range(d), 2))] if d > 3 else [])
        for E in graphs:
            m = DCC(s=s, structure=names(cb, E)).fit(S)
            assert m.relaxed_ and sorted(edge_indices(m, cb)) == sorted(E)
            R = brute_force_R(p, d, E, s=s)
            assert m.minimax_risk_.value >= R - 1e-7, (levels, E, R, m.minimax_risk_.value)
            nodes = sorted({v for e in E for v in e})
            for T in spanning_trees(d, E) if len(nodes) == d else []:
                t = DCC(s=s, structure=names(cb, T)).fit(S)
                assert not t.relaxed_
                assert abs(t.minimax_risk_.value - brute_force_R(p, d, T, s=s)) <= 1e-6
                assert (m.minimax_risk_.value <= t.minimax_risk_.value
                        + 1e-7), (levels, E, T, m.minimax_risk_.value, t.minimax_risk_.value)
        if d == 4:
            a = DCC(s=s, structure="all").fit(S)
            assert len(a.edges_) == 6 and a.relaxed_
            assert abs(a.minimax_risk_.value - m.minimax_risk_.value) <= 1e-7  # same graph as the last explicit one


def _lp_inputs(S, edges, s=0.0):
    """The map, τ, λ, LP columns and empty cells the DCC builds for these node-index edges."""
    from marg.learners.features.calibration import confidence_box
    from marg.learners.features.blocks import node_blocks
    from marg.learners.features.statistics import map_moments

    blocks = node_blocks(S.codebook)
    pm = PairwiseFeatureMap(blocks, [b.column for b in blocks], edges)
    m = map_moments(S, pm)
    tau = m.tau
    lam = confidence_box(m, pm.indicator_columns(), s=s, coverage=0.95).lam
    empty = empty_cells(pm, tau, lam)
    mask = ~empty
    if not np.any(lam > 0):
        mask &= reference_mask(pm, tau)[None, :]
        mask &= ~common_constant(pm, tau, empty)
    return pm, tau, lam, np.flatnonzero(mask.ravel()), empty


@pytest.mark.parametrize("s", [0.0, 1.0])
def test_local_lp_is_exact_on_a_tree(s):
    for t, (rng, levels, _, sparsity) in enumerate(cases(8, seed=60 + int(s))):
        K = 2 + t % 2
        cb, S, p = make_problem(rng, levels, K, sparsity=sparsity)
        d = len(levels)
        E = [(int(rng.integers(0, v)), v) for v in range(1, d)]  # a random spanning tree
        E = [(min(a, b), max(a, b)) for a, b in E]
        pm, tau, lam, cols, empty = _lp_inputs(S, E, s)
        loc = solve_local(pm, K, tau, lam, cols, exclude=empty)
        ex = solve_compact(ForestOracle(pm, K, exclude=empty), tau, lam, cols)
        assert abs(loc.value - ex.value) <= 1e-6, (levels, E, loc.value, ex.value)
        assert abs(loc.value - brute_force_R(p, d, E, s=s)) <= 1e-6
        # a forest given as structure takes the exact path and agrees too
        m = DCC(s=s, structure=names(cb, E)).fit(S)
        assert not m.relaxed_ and abs(m.minimax_risk_.value - ex.value) <= 1e-6


@pytest.mark.parametrize("policy", ["evidence", "free", "impossible"])
def test_rule6_with_certified_phi_is_covered(policy):
    for rng, levels, K, sparsity in cases(6, seed=80, K=2) + cases(2, seed=81, K=3):
        cb, S, p = make_problem(rng, levels, K, sparsity=sparsity)
        m = DCC(s=0.0, structure="all", empty=policy).fit(S)
        E = edge_indices(m, cb)
        X, _ = domain(levels)
        F = m.decision_function(X)
        worst = max((F[:, list(C)].sum(axis=1).max() - 1.0) / len(C) for r in range(1, K + 1)
                    for C in itertools.combinations(range(K), r))
        assert worst <= m.phi_ + 1e-9  # φ_L bounds the exact φ of the returned μ
        assert np.all(np.isfinite(m.mu_))
        H = m.predict_proba(X)
        assert np.all(H >= 0) and np.allclose(H.sum(axis=1), 1.0)
        wc = rule_worst_case(p, len(levels), E, H)
        assert wc <= m.minimax_risk_.value + 1e-6, (wc, m.minimax_risk_.value)
        assert wc >= brute_force_R(p, len(levels), E) - 1e-6  # no rule beats the worst-case Bayes error
        assert np.array_equal(m.predict(X), np.argmax(F, axis=1))


def test_policies_same_certificate_and_impossible_rules_out():
    rng = np.random.default_rng(9)
    cb, S, p = make_problem(rng, [3, 3, 2, 2], 2, sparsity=0.4)
    ms = {pol: DCC(s=0.0, structure="all", empty=pol).fit(S) for pol in ("evidence", "free", "impossible")}
    vals = [m.minimax_risk_.value for m in ms.values()]
    assert max(vals) - min(vals) <= 1e-7
    imp = ms["impossible"]
    assert imp.impossible_.any()
    # "impossible" keeps every partially empty cell of a label far below the seen labels
    part = imp.impossible_ & ~imp.impossible_.all(axis=0)[None, :]
    seen_max = np.where(imp.impossible_, -np.inf, imp.mu_).max(axis=0)
    assert np.all(imp.mu_[part] < np.broadcast_to(seen_max, imp.mu_.shape)[part])


def test_max_edges_round_trip_and_errors():
    rng = np.random.default_rng(4)
    cb, S, p = make_problem(rng, [3, 2, 3, 2], 2, sparsity=0.2)
    m = DCC(s=0.0, structure="all").fit(S)
    m2 = DCC.from_dict(json.loads(json.dumps(m.to_dict())))
    X, _ = domain([3, 2, 3, 2])
    assert m2.structure == "all" and m2.relaxed_ and m2.edges_ == m.edges_
    assert np.allclose(m2.predict_proba(X), m.predict_proba(X)) and np.array_equal(m2.predict(X), m.predict(X))
    e = DCC(s=0.0, structure=[("f0", "f1"), ("f1", "f2"), ("f2", "f0")]).fit(S)
    e2 = DCC.from_dict(json.loads(json.dumps(e.to_dict())))
    assert e2.structure == [("f0", "f1"), ("f1", "f2"), ("f2", "f0")] and len(e.edges_) == 3
    # max_edges: the pairs of largest weight (a subgraph: more edges never raise R*_L — the
    # missing ones at μ = 0, δ = 0 give back the subgraph's bound)
    k = DCC(s=0.0, structure="all", max_edges=3, edge_weight="label").fit(S)
    assert len(k.edges_) == 3
    assert k.minimax_risk_.value >= m.minimax_risk_.value - 1e-9
    for kw, msg in [
        (dict(structure="dense"), "unknown DCC structure"),
        (dict(structure="all", greedy=True), "DCC formulation 'local' .* does not run greedy edge search"),
        (dict(structure="all", loss="hinge"), "DCC formulation 'hinge' .* accepts pair tables forming a forest; "
                                              ".*structure='all'"),
        (dict(structure="all", solver="rows"), "DCC formulation 'forest-rows' .* form a graph with cycles"),
        (dict(structure=[("f0", "f1")], greedy=True), "greedy=True chooses its own edges"),
        (dict(structure=[("f0", "zz")]), "unknown feature"),
        (dict(structure=[("f0", "f0")]), "two different features"),
    ]:
        with pytest.raises(InputError, match=msg):
            DCC(s=0.0, **kw).fit(S)


def test_cli_learn_structure_option(demo_bundles, learn_dcc):
    """marg learn --learner dcc --structure all: every released pair is an edge; R*_L ≤ the forest's R*."""
    bundles = demo_bundles(rows=400, seed=300)
    rep = {}
    for st in ("forest", "all"):
        rep[st], est = learn_dcc(bundles, "--structure", st)
        assert est.structure == st
    assert len(rep["all"]["edges"]) > len(rep["forest"]["edges"])
    assert rep["all"]["worst_case_error"] <= rep["forest"]["worst_case_error"] + 1e-7
