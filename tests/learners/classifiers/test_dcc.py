"""DCC-style pairwise classifier: brute-force oracles over the full joint and the whole domain.

Oracles:
- R* = max_{p ∈ U} Σ_x (Σ_y p(x,y) − max_y p(x,y)) (the largest Bayes error, an LP over the
  full joint with t_x ≥ p(x, y)), U = distributions whose first-order marginals (X_i, Y)
  and the REPORTED edges' triple marginals (X_i, X_j, Y) lie within λ of the released
  ones (λ = 0 for s = 0); built here from the joint p directly, not from the learner's τ;
- the worst-case error of the learner's randomized rule (6) over U (an LP in p) equals R*;
- the max-sum DP equals enumeration of the domain; max-marginals and constrained maxima too.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from scipy.optimize import linprog

from marg.learners.classifiers.dcc import DCC
from marg.learners.features.pairwise import PairwiseFeatureMap
from marg.learners.minimax.empty_cells import empty_cells, fix_empty_cells_forest
from marg.learners.minimax.forest import ForestOracle
from marg.learners.minimax.forest_lp import solve_compact
from marg.learners.minimax.gauge import reference_mask
from marg.learners.minimax.layout import every_label
from marg.learners.minimax.worst_case import pair_marginals
from marg.learners.classifiers.mrc import MRC
from marg.learners.features.structure import UnionFind, max_spanning_forest, pair_weights
from marg.errors import InputError
from marg.marginals.summary import Summary
from tests.helpers.quantities import blocks_of, tau_of
from tests.conftest import check_malformed_models
from tests.helpers.dcc_oracle import (
    brute_force_R, domain, edge_indices, make_problem, marginal_constraints, random_cases, rule_worst_case)


# ------------------------------------------------------------------ the oracle tests


@pytest.mark.parametrize("solver", ["compact", "rows"])
@pytest.mark.parametrize("greedy", [False, True])
def test_R_equals_brute_force_lp_over_reported_edges(greedy, solver):
    """s = 0: R* = the largest Bayes error over joints with the first-order and the reported
    edges' triple marginals; pairs never raise R* above the first-order MRC's."""
    for k, (rng, levels, K) in enumerate(random_cases(8, seed=7 if greedy else 3)):
        cb, S, p = make_problem(rng, levels, K, sparsity=0.25 if k % 3 == 0 else 0.0)
        m = DCC(s=0.0, greedy=greedy, greedy_candidates=None, solver=solver).fit(S)
        E = edge_indices(m, cb)
        R = brute_force_R(p, len(levels), E)
        assert abs(m.minimax_risk_.value - R) <= 1e-6, (levels, K, E, m.minimax_risk_.value, R)
        assert np.all(m.lambda_ == 0.0)
        R1 = MRC(s=0.0, solver="full").fit(S).minimax_risk_.value
        assert abs(R1 - brute_force_R(p, len(levels), [])) <= 1e-6
        assert m.minimax_risk_.value <= R1 + 1e-7
        if greedy:
            it = np.array(m.iterations_)
            assert abs(it[0] - R1) <= 1e-6 and abs(it[-1] - m.minimax_risk_.value) <= 1e-9
            assert np.all(np.diff(it) < -m.greedy_tol) and len(it) == len(E) + 1
        else:
            uf = UnionFind(len(levels))
            assert all(uf.union(a, b) for a, b in E)  # a forest
            # the maximum spanning forest on I(X_i; X_j | Y): same total weight as Kruskal's
            w = pair_weights(S)
            assert abs(sum(m.edge_weights_) - sum(w[e] for e in max_spanning_forest(len(levels), w))) < 1e-12
            assert abs(m.iterations_[-1] - m.minimax_risk_.value) <= 1e-12


def test_R_with_lambda_equals_brute_force_box():
    """s > 0: U = joints whose node and edge marginals lie within λ = s·sqrt(τ(1−τ))/√n;
    the compact LP and row generation agree."""
    for k, (rng, levels, K) in enumerate(random_cases(6, seed=11, max_d=4)):
        cb, S, p = make_problem(rng, levels, K, sparsity=0.2 if k % 2 else 0.0)
        for s in (0.5, 2.0):
            m = DCC(s=s).fit(S)
            R = brute_force_R(p, len(levels), edge_indices(m, cb), s=s)
            assert abs(m.minimax_risk_.value - R) <= 1e-6, (levels, K, s, m.minimax_risk_.value, R)
            r = DCC(s=s, solver="rows").fit(S)
            assert r.edges_ == m.edges_ and abs(r.minimax_risk_.value - m.minimax_risk_.value) <= 1e-6


def test_label_weighted_forest():
    """edge_weight="label": the forest is Kruskal's on I(X_i, X_j; Y); R* still matches the oracle."""
    from marg.learners.features.structure import pair_label_information

    for rng, levels, K in random_cases(4, seed=17, max_d=4):
        cb, S, p = make_problem(rng, levels, K)
        m = DCC(s=0.0, edge_weight="label").fit(S)
        info = pair_label_information(S)
        E = edge_indices(m, cb)
        assert E == max_spanning_forest(len(levels), info)
        assert np.allclose(m.edge_weights_, [info[e] for e in E])
        assert abs(m.minimax_risk_.value - brute_force_R(p, len(levels), E)) <= 1e-6


def test_more_edges_never_raise_R():
    """Kruskal prefixes are nested, so R* is non-increasing in max_edges."""
    rng = np.random.default_rng(5)
    for t in range(3):
        cb, S, p = make_problem(rng, [3, 2, 3, 2], 2 + t % 2)
        Rs = [DCC(s=0.0, max_edges=k).fit(S).minimax_risk_.value for k in range(4)]
        assert np.all(np.diff(Rs) <= 1e-9), Rs
        assert len(DCC(s=0.0, max_edges=1).fit(S).edges_) <= 1


@pytest.mark.parametrize("policy", ["evidence", "free", "impossible"])
def test_randomized_rule_attains_R_and_phi_is_exact(policy):
    """Rule (6) with φ(μ) from the tree oracle has worst-case error exactly R* over U (also
    with empty cells fixed by either policy), and no row (x, C) of the whole domain exceeds φ."""
    for k, (rng, levels, K) in enumerate(random_cases(6, seed=21, max_d=4)):
        cb, S, p = make_problem(rng, levels, K, sparsity=0.3 if k % 2 == 0 else 0.0)
        m = DCC(s=0.0, empty=policy).fit(S)
        X, _ = domain(levels)
        H = m.predict_proba(X)
        assert np.all(H >= 0) and np.allclose(H.sum(axis=1), 1.0)
        E = edge_indices(m, cb)
        wc = rule_worst_case(p, len(levels), E, H)
        assert abs(wc - m.minimax_risk_.value) <= 1e-6, (wc, m.minimax_risk_.value)
        F = m.decision_function(X)
        worst = max((F[:, list(C)].sum(axis=1).max() - 1.0) / len(C) for r in range(1, K + 1)
                    for C in itertools.combinations(range(K), r))
        assert abs(worst - m.phi_) <= 1e-9


def test_numeric_features_are_isolated_nodes():
    """Raw numeric features join as isolated nodes with vertices {lo, hi}: R* matches the
    brute force whose domain puts each numeric feature at its two endpoints."""
    for t, (rng, levels, K) in enumerate(random_cases(4, seed=31, max_d=3)):
        num = [(-1.0, 2.0)]
        cb, S, p = make_problem(rng, levels, K, numeric=num)
        m = DCC(s=0.0).fit(S)
        assert all("x0" not in e for e in m.edges_)
        # the numeric feature's per-class mean E[1{Y=y} X] is a constraint on the joint
        d = p.ndim - 1
        pv = p.sum(axis=tuple(range(len(levels))))  # (2, K)
        moment = []
        idx = np.arange(p.size).reshape(p.shape)
        for y in range(K):
            r = np.zeros(p.size)
            for v, val in enumerate(num[0]):
                sl = [slice(None)] * (d + 1)
                sl[len(levels)] = v
                sl[d] = y
                r[idx[tuple(sl)].ravel()] = val
            moment.append((r, float((np.array(num[0]) * pv[:, y]).sum())))
        R = brute_force_R(p, len(levels), edge_indices(m, cb), numeric_moment=moment)
        assert abs(m.minimax_risk_.value - R) <= 1e-6, (m.minimax_risk_.value, R)


# ------------------------------------------------------------------ the DP oracle


class _Blk:
    def __init__(self, name, kind, size, lo=0.0, hi=1.0):
        self.name, self.kind, self.size, self.lo, self.hi = name, kind, size, lo, hi


def random_forest_map(rng, n_onehot=5, numeric=True):
    sizes = [int(rng.integers(2, 4)) for _ in range(n_onehot)]
    blocks = [_Blk(f"f{i}", "onehot", m) for i, m in enumerate(sizes)]
    if numeric:
        blocks.insert(int(rng.integers(0, len(blocks) + 1)), _Blk("x", "numeric", 1, -1.5, 2.0))
    oh = [k for k, b in enumerate(blocks) if b.kind == "onehot"]
    edges = []
    for t in range(1, len(oh)):
        if rng.random() < 0.8:
            a, b = oh[t], oh[int(rng.integers(0, t))]
            edges.append((a, b) if rng.random() < 0.5 else (b, a))
    return PairwiseFeatureMap(blocks, list(range(len(blocks))), edges), blocks


def domain_of_map(blocks):
    choices = [list(range(b.size)) if b.kind == "onehot" else [b.lo, b.hi] for b in blocks]
    return np.array(list(itertools.product(*choices)), dtype=float)


def test_dp_oracle_equals_enumeration():
    rng = np.random.default_rng(0)
    for t in range(12):
        pm, blocks = random_forest_map(rng, n_onehot=int(rng.integers(2, 6)), numeric=t % 2 == 0)
        K = 2 + t % 2
        orc = ForestOracle(pm, K)
        X = domain_of_map(blocks)
        mu = rng.normal(size=(K, pm.dim))
        sc = pm.scores(X, mu)
        assert np.allclose(sc, pm.psi(X) @ mu.T)
        vals, assign = orc.separate(mu.ravel())
        node_mm, edge_mm = orc.max_marginals(mu.ravel())
        cvals, cassign = orc.constrained_maxima(mu.ravel())
        for k, C in enumerate(orc.subsets):
            tot = sc[:, list(C)].sum(axis=1)
            assert abs(vals[k] - tot.max()) < 1e-9
            # the maximizer's row reproduces the value
            cut = orc.cut_for(k, assign[k], vals[k])
            idx, v = cut.g
            assert abs(v @ mu.ravel()[idx] * len(C) - vals[k]) < 1e-9
            assert abs(cut.violation - ((vals[k] - 1) / len(C) + 1)) < 1e-12
            vstart = 0
            for i, b in enumerate(blocks):
                nv = b.size if b.kind == "onehot" else 2
                col = X[:, i]
                levels = range(b.size) if b.kind == "onehot" else [b.lo, b.hi]
                for a, lv in enumerate(levels):
                    bf = tot[col == lv].max()
                    assert abs(node_mm[i][k, a] - bf) < 1e-9
                    assert abs(cvals[k, vstart + a] - bf) < 1e-9
                    xa = cassign[k, vstart + a]
                    assert xa[i] == a
                    r = orc.cut_for(k, xa, np.nan)
                    assert abs(r.g[1] @ mu.ravel()[r.g[0]] * len(C) - bf) < 1e-9
                vstart += nv
            for e, (i, j) in enumerate(pm.edges):
                own = (orc.member[k] @ mu[:, pm.edge_columns(e)]).reshape(pm.edge_shape[e])
                for a, b in itertools.product(range(blocks[i].size), range(blocks[j].size)):
                    sel = (X[:, i] == a) & (X[:, j] == b)
                    assert abs(edge_mm[e][k, a, b] - (tot[sel].max() - own[a, b])) < 1e-9
        assert abs(orc.phi(mu.ravel()) - max((sc[:, list(C)].sum(1).max() - 1) / len(C) for C in orc.subsets)) < 1e-12


def test_oracle_refuses_cycles_and_bad_edges():
    blocks = [_Blk("a", "onehot", 2), _Blk("b", "onehot", 2), _Blk("c", "onehot", 3), _Blk("x", "numeric", 1)]
    pm = PairwiseFeatureMap(blocks, [0, 1, 2, 3], [(0, 1), (1, 2), (0, 2)])
    with pytest.raises(InputError, match="closes a cycle"):
        ForestOracle(pm, 2)
    with pytest.raises(InputError, match="raw numeric"):
        PairwiseFeatureMap(blocks, [0, 1, 2, 3], [(0, 3)])
    with pytest.raises(InputError, match="given twice"):
        PairwiseFeatureMap(blocks, [0, 1, 2, 3], [(0, 1), (1, 0)])


def test_excluded_cells_are_never_maxima_and_covering_rows_avoid_them():
    rng = np.random.default_rng(9)
    for t in range(6):
        pm, blocks = random_forest_map(rng, n_onehot=4, numeric=False)
        K = 2
        ex = rng.random((K, pm.dim)) < 0.2
        orc = ForestOracle(pm, K, exclude=ex)
        X = domain_of_map(blocks)
        P = pm.psi(X)
        mu = rng.normal(size=(K, pm.dim))
        sc = P @ mu.T
        vals, assign = orc.separate(mu.ravel())
        for k, C in enumerate(orc.subsets):
            hit = (P @ ex[list(C)].T).sum(axis=1) > 0  # rows crossing an excluded cell of C
            if (~hit).any():
                assert abs(vals[k] - sc[~hit][:, list(C)].sum(axis=1).max()) < 1e-9
                assert orc.allowed(k, assign[k])
        for cut in orc.covering_cuts():
            k = orc.subsets.index(cut.labels)
            cols = cut.g[0] % pm.dim
            assert not np.any(ex[list(cut.labels)][:, cols])


def test_reference_coding_spans_all_pairwise_functions():
    """Every score function of the full map is reproduced, up to a constant, on the reduced columns."""
    rng = np.random.default_rng(12)
    for t in range(5):
        pm, blocks = random_forest_map(rng, n_onehot=4, numeric=t % 2 == 0)
        tau = rng.random((1, pm.dim))
        keep = reference_mask(pm, tau)
        X = domain_of_map(blocks)
        P = pm.psi(X)
        f = P @ rng.normal(size=pm.dim)
        coef, *_ = np.linalg.lstsq(P[:, keep], f, rcond=None)
        assert np.allclose(P[:, keep] @ coef, f, atol=1e-8)
        assert keep.sum() < pm.dim or not pm.edges


def test_empty_cell_fix_keeps_phi_and_objective():
    rng = np.random.default_rng(14)
    for t in range(6):
        pm, blocks = random_forest_map(rng, n_onehot=4, numeric=t % 2 == 0)
        K = 2 + t % 2
        orc = ForestOracle(pm, K)
        tau = rng.random((K, pm.dim))
        tau[rng.random(tau.shape) < 0.3] = 0.0
        lam = np.zeros_like(tau)
        mu = rng.normal(size=(K, pm.dim))
        empty = empty_cells(pm, tau, lam)
        mu[empty] = -50.0
        phi0 = orc.phi(mu.ravel())
        for policy in ("free", "impossible"):
            mu2, emp = fix_empty_cells_forest(orc, mu, tau, lam, policy)
            assert np.array_equal(emp, empty)
            assert np.array_equal(mu2[~empty], mu[~empty])
            assert abs(orc.phi(mu2.ravel()) - phi0) < 1e-9
            if policy == "free" and empty.any():
                # each raised entry is as high as φ allows (raising it further breaks a row)
                # or at its cap: 0 for an unseen cell (raised for all labels together), the
                # best seen label's entry for a cell empty for some labels only
                for y, j in np.argwhere(empty):
                    bump = mu2.copy()
                    if empty[:, j].all():
                        bump[:, j] += 1e-3
                        assert mu2[y, j] <= 0.0
                        capped = mu2[y, j] == 0.0
                    else:
                        bump[y, j] += 1e-3
                        cap = mu2[~empty[:, j], j].max()
                        assert mu2[y, j] <= cap
                        capped = mu2[y, j] == cap
                    assert capped or orc.phi(bump.ravel()) > phi0 + 1e-6


def test_evidence_policy_rules_out_only_significant_absences():
    """'evidence' leaves label y at the ruled-out value exactly where (1 − π_y)^{n_cell} ≤ α/m
    (m partial-empty entries, Bonferroni) and raises it elsewhere; all policies give the same φ."""
    rng = np.random.default_rng(15)
    found = [0, 0]
    for t in range(12):
        pm, blocks = random_forest_map(rng, n_onehot=4, numeric=False)
        K = 2
        orc = ForestOracle(pm, K)
        tau = rng.random((K, pm.dim)) * 0.05
        tau[rng.random(tau.shape) < 0.3] = 0.0
        first = pm.blocks[0]
        tau[:, first.slice] = rng.dirichlet(np.ones(first.size * K)).reshape(K, first.size)  # sets the prior
        lam = np.zeros_like(tau)
        mu = rng.normal(size=(K, pm.dim))
        n = [100.0, 400.0, 2000.0][t % 3]
        out = {pol: fix_empty_cells_forest(orc, mu, tau, lam, pol, n=n, alpha=0.05)[0]
               for pol in ("evidence", "free", "impossible")}
        phis = {pol: orc.phi(v.ravel()) for pol, v in out.items()}
        assert max(phis.values()) - min(phis.values()) < 1e-9
        empty = empty_cells(pm, tau, lam)
        part = empty & ~empty.all(axis=0)
        prior = tau[:, first.slice].sum(axis=1)
        chance = (1 - prior)[:, None] ** (n * tau.sum(axis=0))[None, :]
        low = out["impossible"][part].min() if part.any() else None
        for y, j in np.argwhere(part):
            if chance[y, j] <= 0.05 / part.sum():  # Bonferroni over the tested entries
                assert out["evidence"][y, j] == low
                found[0] += 1
            else:
                assert out["evidence"][y, j] > low  # raised (the value depends on the other cells)
                found[1] += 1
    assert found[0] > 0 and found[1] > 0


def test_worst_case_distribution_from_compact_duals():
    """The compact LP's duals are a distribution p(x, y) = Σ_{C∋y} w_C(x) matching every node
    and forest-edge marginal (λ = 0); an edge it already matches cannot lower R*."""
    rng = np.random.default_rng(16)
    for t in range(5):
        levels, K = [3, 2, 3, 2][: 3 + t % 2], 2 + t % 2
        cb, S, p = make_problem(rng, levels, K)
        d = len(levels)
        blocks = list(blocks_of(S))
        cand = list(itertools.combinations(range(d), 2))
        full = PairwiseFeatureMap(blocks, list(range(d)), cand)
        tau = np.zeros((K, full.dim))
        tau[:, : full.nodes.dim] = tau_of(S)
        for e, (i, j) in enumerate(cand):
            tau[:, full.edge_columns(e)] = np.transpose(S.joint((f"f{i}", f"f{j}", "y")), (2, 0, 1)).reshape(K, -1)
        lam = np.zeros_like(tau)
        forest = [cand.index(e) for e in [(0, 1), (1, 2)]]
        orc = ForestOracle(full, K, forest)
        cols = np.concatenate([np.arange(full.nodes.dim)] + [full.edge_columns(e) for e in forest])
        sol = solve_compact(orc, tau, lam, every_label(K, full.dim, cols))
        R = brute_force_R(p, d, [cand[e] for e in forest])
        assert abs(sol.value - R) <= 1e-7
        assert abs(sum(len(C) * f["total"] for C, f in zip(orc.subsets, sol.read.flows)) - 1.0) < 1e-7
        J = pair_marginals(orc, sol.read.flows, cand)
        for e, (i, j) in enumerate(cand):
            assert abs(J[(i, j)].sum() - 1.0) < 1e-7
            node_i = J[(i, j)].sum(axis=2)  # (K, m_i)
            assert np.allclose(node_i, tau[:, blocks[i].slice], atol=1e-7)
            gap = np.abs(J[(i, j)].reshape(K, -1) - tau[:, full.edge_columns(e)]).max()
            if e in forest:
                assert gap < 1e-7
            elif gap < 1e-9:  # already matched: adding the edge cannot lower R*
                orc2 = ForestOracle(full, K, forest + [e])
                cols2 = np.concatenate([cols, full.edge_columns(e)])
                assert solve_compact(orc2, tau, lam, every_label(K, full.dim, cols2)).value >= sol.value - 1e-7


# ----------------------------------------------------------------------- rules, I/O


def test_predict_proba_rule6_and_decision_function():
    rng = np.random.default_rng(2)
    cb, S, p = make_problem(rng, [3, 3, 2, 2], 3, sparsity=0.1)
    m = DCC(s=0.3).fit(S)
    X = np.column_stack([rng.integers(0, k, 60) for k in (3, 3, 2, 2)]).astype(float)
    F = m.decision_function(X)
    # explicit Φ(x, y)ᵀμ: node levels then edge cells a·m_j + b, blocks as reported
    psi = np.zeros((60, m.mu_.shape[1]))
    off = 0
    sizes = [3, 3, 2, 2]
    for i, msz in enumerate(sizes):
        psi[np.arange(60), off + X[:, i].astype(int)] = 1.0
        off += msz
    for a, b in m.edges_:
        i, j = cb.index(a), cb.index(b)
        psi[np.arange(60), off + X[:, i].astype(int) * sizes[j] + X[:, j].astype(int)] = 1.0
        off += sizes[i] * sizes[j]
    assert off == m.mu_.shape[1]
    assert np.allclose(F, psi @ m.mu_.T)
    P = m.predict_proba(X)
    assert np.all(P >= 0) and np.allclose(P.sum(axis=1), 1.0)
    h = np.maximum(F - m.phi_, 0.0)
    pos = h.sum(axis=1) > 0
    assert np.allclose(P[pos], h[pos] / h[pos].sum(axis=1, keepdims=True))
    assert np.allclose(P[~pos], 1.0 / 3)
    assert np.array_equal(m.predict(X), np.argmax(F, axis=1))


def test_model_round_trip_json():
    rng = np.random.default_rng(31)
    cb, S, p = make_problem(rng, [3, 2, 3], 2, numeric=[(0.0, 2.0)], sparsity=0.2)
    m = DCC(s=0.0).fit(S)
    d = json.loads(json.dumps(m.to_dict()))
    m2 = DCC.from_dict(d)
    X = np.column_stack([rng.integers(0, 3, 20), rng.integers(0, 2, 20), rng.integers(0, 3, 20),
                         rng.uniform(-1, 3, 20)])
    assert np.allclose(m2.predict_proba(X), m.predict_proba(X))
    assert np.array_equal(m2.predict(X), m.predict(X))
    assert m2.edges_ == m.edges_ and m2.minimax_risk_.value == m.minimax_risk_.value
    assert m2.fingerprint_ == S.fingerprint and m2.iterations_ == m.iterations_
    with pytest.raises(InputError, match="not a DCC model"):
        DCC.from_dict({"learner": "mrc"})
    check_malformed_models(DCC, d)


def test_first_order_summary_gives_the_mrc():
    """Without pair tables there are no edges and R* is the first-order MRC's."""
    rng = np.random.default_rng(41)
    cb, S, p = make_problem(rng, [3, 2, 2], 2)
    first = Summary.from_tables(cb, [t for t in S.tables if len(t.clique) <= 2])
    m = DCC(s=0.0).fit(first)
    assert m.edges_ == [] and m.map_.n_edges == 0
    assert abs(m.minimax_risk_.value - MRC(s=0.0, solver="full").fit(first).minimax_risk_.value) <= 1e-7


def test_feature_subset():
    rng = np.random.default_rng(43)
    cb, S, p = make_problem(rng, [3, 2, 3, 2], 2)
    m = DCC(s=0.0, features=["f0", "f2", "f3"]).fit(S)
    assert m.feature_names_in_ == ["f0", "f2", "f3"]
    assert all(a != "f1" and b != "f1" for a, b in m.edges_)
    q = p.sum(axis=1)  # the joint of (f0, f2, f3, y)
    E = [(["f0", "f2", "f3"].index(a), ["f0", "f2", "f3"].index(b)) for a, b in m.edges_]
    assert abs(m.minimax_risk_.value - brute_force_R(q, 3, E)) <= 1e-6
    X = np.array([[0, 1, 2, 0], [2, 0, 1, 1]], dtype=float)
    assert m.predict(X).shape == (2,)


def test_errors_and_unfitted():
    rng = np.random.default_rng(1)
    cb, S, p = make_problem(rng, [2, 2], 2)
    with pytest.raises(InputError, match="not fitted"):
        DCC().predict(np.zeros((1, 2)))
    for kw, msg in [
        (dict(s=-1.0), "s must be"),
        (dict(coverage=1.5), "coverage"),
        (dict(max_edges=-2), "max_edges"),
        (dict(greedy_candidates=0), "greedy_candidates"),
        (dict(empty="maybe"), "empty-cell policy"),
        (dict(edge_weight="mi"), "unknown edge weight"),
        (dict(solver="simplex"), "unknown DCC solver"),
        (dict(features=["nope"]), "unknown feature 'nope'"),
    ]:
        with pytest.raises(InputError, match=msg):
            DCC(**kw).fit(S)
    m = DCC().fit(S)
    with pytest.raises(InputError, match="code 2 at row 1 is outside 0..1"):
        m.predict(np.array([[2.0, 0.0]]))


def _reach(p, cliques, idx):
    """max over (y, q ∈ U) of q(x, y) for every row index idx[r] (one LP per (x, y)), with U the
    joints matching p's marginals on ``cliques`` (+ label) exactly."""
    K = p.shape[-1]
    A, lo, hi = marginal_constraints(p, cliques, 0.0)
    A_ub, b_ub = np.vstack([A, -A]), np.concatenate([hi, -lo])
    flat = np.arange(p.size).reshape(p.shape)
    out = np.zeros(len(idx))
    for r in range(len(idx)):
        for y in range(K):
            c = np.zeros(p.size)
            c[flat[tuple(idx[r]) + (y,)]] = -1.0
            res = linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=np.ones((1, p.size)), b_eq=[1.0], bounds=(0, None),
                          method="highs")
            assert res.status == 0, res.message
            out[r] = max(out[r], -res.fun)
    return out


def test_outside_rows_are_exactly_those_no_distribution_in_U_reaches():
    """s = 0: x is flagged outside ⇔ max_{q ∈ U} q(x, y) = 0 for every label y (brute-force LP
    over the full joint per (x, y)), for the DCC on its forest and for the first-order MRC
    (every feature's empty cells, also those outside its working set)."""
    seen_outside = seen_inside = mrc_outside = 0
    for k, (rng, levels, K) in enumerate(random_cases(6, seed=41, max_d=4)):
        # a never-seen level of the last feature: first-order cells empty for every label too
        cb, S, p = make_problem(rng, levels, K, sparsity=0.5, unseen=[(len(levels) - 1, 0)] if k % 2 else [])
        X, idx = domain(levels)
        nodes = [(i,) for i in range(len(levels))]
        m = DCC(s=0.0).fit(S)
        out = m.outside(X)
        assert np.array_equal(out, _reach(p, nodes + edge_indices(m, cb), idx) <= 1e-9), k
        mrc = MRC(s=0.0, n_max=1, k_max=1).fit(S)  # a small working set: U still has every feature
        out1 = mrc.outside(X)
        assert np.array_equal(out1, _reach(p, nodes, idx) <= 1e-9), k
        assert not np.any(out1 & ~out)  # first-order U ⊇ the DCC's U
        seen_outside += int(out.sum())
        seen_inside += int((~out).sum())
        mrc_outside += int(out1.sum())
    assert seen_outside > mrc_outside > 0 and seen_inside > 0  # every kind of row occurred
