"""0-1 MRC over the whole codebook domain: brute-force oracles and optimality checks.

The oracle (DESIGN.md "Test oracles"): by the minimax theorem the MRC value is
R* = max_{p : |E_pΦ − τ| ≤ λ} Σ_x (Σ_y p(x,y) − max_y p(x,y)), an LP over the full joint
p(x, y) with auxiliary t_x ≥ p(x, y), solved here with scipy's HiGHS on small domains.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.optimize import linprog
from scipy.stats import beta, norm

from marg.learners.features.calibration import bonferroni_z, confidence_box
from marg.learners.features.statistics import Moments
from marg.learners.features.blocks import FeatureMap
from marg.learners.classifiers.dcc import DCC
from marg.learners.classifiers.mrc import MRC
from tests.conftest import check_malformed_models
from tests.helpers.first_order_fit import solve_full
from marg.learners.minimax.lp_model import MinimaxModel
from marg.learners.minimax.problem import MinimaxProblem
from marg.learners.minimax.problem import label_subsets
from marg.learners.minimax.generation import generate_rows
from marg.learners.minimax.separation import FirstOrderOracle
from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label, NumericFeature
from marg.errors import InputError
from marg.marginals.summary import Summary
from marg.marginals.counts.tables import MarginalTable
from tests.helpers.joint_oracle import brute_force_R, domain_phi
from tests.helpers.quantities import blocks_of, psi_dim_of, tau_of, tau_std_of, lam_of

# ----------------------------------------------------------------------------- helpers


def make_problem(rng, levels, K, numeric=(), n=300.0, sparsity=0.0):
    """A random joint p over (discrete levels..., numeric in {lo, hi}..., y) and its Summary.

    Returns (codebook, summary, p, values) where ``values[i]`` lists the Φ-values of
    feature i's domain points (one-hot levels for categorical, the endpoints for numeric).
    """
    feats = [CategoricalFeature(f"f{i}", tuple(f"l{a}" for a in range(m))) for i, m in enumerate(levels)]
    for k, (lo, hi) in enumerate(numeric):
        feats.append(NumericFeature(f"x{k}", lo=lo, hi=hi))
    cb = Codebook(features=tuple(feats), label=Label("y", tuple(f"c{k}" for k in range(K))))
    sizes = list(levels) + [2] * len(numeric)
    shape = tuple(sizes) + (K,)
    p = rng.dirichlet(np.full(int(np.prod(shape)), 0.6)).reshape(shape)
    if sparsity > 0:
        p[rng.random(shape) < sparsity] = 0.0
        if p.sum() == 0:
            p.flat[0] = 1.0
        p /= p.sum()
    d = len(sizes)
    tables = [MarginalTable(("y",), n * p.sum(axis=tuple(range(d))))]
    for i in range(len(levels)):
        ax = tuple(j for j in range(d) if j != i)
        tables.append(MarginalTable((f"f{i}", "y"), n * p.sum(axis=ax)))
    for k, (lo, hi) in enumerate(numeric):
        i = len(levels) + k
        ax = tuple(j for j in range(d) if j != i)
        pv = p.sum(axis=ax)  # (2, K): value lo / hi
        vals = np.array([lo, hi])
        mom = np.stack([n * (vals[:, None] * pv).sum(0), n * (vals[:, None] ** 2 * pv).sum(0)])
        tables.append(MarginalTable((f"x{k}", "y"), mom, kind="moments"))
    return cb, Summary.from_tables(cb, tables), p


def worst_case_error_of_rule(summary, tau, lam, model):
    """max_{p in U} Σ p(x,y)(1 − h(y|x)) for the model's randomized rule h (an LP in p)."""
    dom = domain_phi(summary)
    K, D = tau.shape
    X = np.array([x for x, _ in dom])
    H = model.predict_proba(X)  # (nx, K)
    nx = len(dom)
    c = -(1.0 - H).ravel()
    E = np.zeros((K * D, nx * K))
    for xi, (_, psi) in enumerate(dom):
        for y in range(K):
            E[y * D : (y + 1) * D, xi * K + y] = psi
    A = np.vstack([E, -E])
    b = np.concatenate([(tau + lam).ravel(), -(tau - lam).ravel()])
    r = linprog(c, A_ub=A, b_ub=b, A_eq=np.ones((1, nx * K)), b_eq=[1.0], bounds=[(0, None)] * (nx * K), method="highs")
    assert r.status == 0, r.message
    return -r.fun


def random_cases(n_cases, seed, numeric=False):
    rng = np.random.default_rng(seed)
    cases = []
    for t in range(n_cases):
        d = int(rng.integers(1, 6))
        levels = [int(rng.integers(2, 4)) for _ in range(d)]
        while np.prod(levels) > 81:
            levels.pop()
        K = 2 + (t % 2)
        num = [(0.0, 1.0)] if numeric and t % 3 == 0 else [(-1.0, 2.0)] if numeric else []
        cases.append((rng, levels, K, num))
    return cases


# ------------------------------------------------------------------ the oracle tests


SOLVE_MODES = [("full", "compact"), ("full", "rows"), ("cg", "compact"), ("cg", "rows")]


@pytest.mark.parametrize("solver,formulation", SOLVE_MODES)
@pytest.mark.parametrize("s", [0.0, 0.7, None])
def test_R_matches_brute_force_joint_lp(s, solver, formulation):
    """R* over the whole domain = max Bayes error over distributions matching τ ± λ."""
    checked = 0
    for rng, levels, K, _ in random_cases(12, seed=11 if s is None else int(100 * s) + 1):
        cb, S, p = make_problem(rng, levels, K, sparsity=0.15)
        m = MRC(s=s, solver=solver, formulation=formulation, eps=0.0, n_max=1, k_max=100).fit(S)
        R = brute_force_R(S, tau_of(S), m.lambda_)
        assert abs(m.minimax_risk_.value - R) <= 1e-6, (levels, K, s, m.minimax_risk_.value, R)
        if s == 0.0:
            assert np.all(m.lambda_ == 0.0)
        checked += 1
    assert checked == 12


@pytest.mark.parametrize("solver,formulation", SOLVE_MODES)
def test_R_matches_brute_force_with_numeric_features(solver, formulation):
    """Raw numeric features on [lo, hi]: the oracle's max(lo·c, hi·c) is exact."""
    for rng, levels, K, num in random_cases(8, seed=5, numeric=True):
        cb, S, p = make_problem(rng, levels[:3], K, numeric=num)
        for s in (0.0, 0.5):
            m = MRC(s=s, solver=solver, formulation=formulation, eps=0.0, n_max=1, k_max=100).fit(S)
            R = brute_force_R(S, tau_of(S), m.lambda_)
            assert abs(m.minimax_risk_.value - R) <= 1e-6, (levels, K, s, m.minimax_risk_.value, R)


@pytest.mark.parametrize("formulation", ["compact", "rows"])
def test_solver_on_arrays_with_arbitrary_lambda(formulation):
    """solve_full on (τ, λ, blocks) directly, with a random non-uniform λ."""
    rng = np.random.default_rng(3)
    for t in range(6):
        K = 2 + t % 2
        cb, S, p = make_problem(rng, [3, 2, 3][: 1 + t % 3], K)
        lam = rng.uniform(0.0, 0.03, size=tau_of(S).shape)
        fmap = FeatureMap(blocks_of(S), list(range(len(blocks_of(S)))))
        sol = solve_full(MinimaxProblem.first_order(fmap, tau_of(S), lam), formulation=formulation)
        R = brute_force_R(S, tau_of(S), lam)
        assert abs(sol.value - R) <= 1e-6
        assert sol.converged


def test_randomized_rule_attains_R_and_deterministic_rule_within_twice():
    """The rule (6) built from μ* has worst-case error exactly R* over U (minimax optimality)."""
    rng = np.random.default_rng(21)
    for t in range(6):
        cb, S, p = make_problem(rng, [3, 2, 2][: 1 + t % 3], 2 + t % 2)
        m = MRC(s=0.5 if t % 2 else 0.0, solver="full").fit(S)
        wc = worst_case_error_of_rule(S, tau_of(S), m.lambda_, m)
        assert abs(wc - m.minimax_risk_.value) <= 1e-6, (wc, m.minimax_risk_.value)


def test_final_mu_feasible_for_every_row_by_enumeration():
    """gᵀμ − ν ≤ b for every (x, C) of the whole domain, and some row is tight (ν = φ + 1)."""
    rng = np.random.default_rng(8)
    for t in range(6):
        K = 2 + t % 2
        cb, S, p = make_problem(rng, [3, 3, 2, 2][: 2 + t % 3], K, numeric=[(-1.0, 2.0)] if t % 2 else [], sparsity=0.2)
        m = MRC(s=0.3 * (t % 3), solver="full").fit(S)
        dom = domain_phi(S)
        worst = -np.inf
        for _, psi in dom:
            sc = m.mu_ @ psi  # (K,) Φ(x,y)ᵀμ
            for C in label_subsets(K):
                val = (sc[list(C)].sum() - 1.0) / len(C)  # gᵀμ − b − 1
                worst = max(worst, val)
        assert worst <= m.phi_ + 1e-9
        assert worst >= m.phi_ - 1e-9
        assert abs(m.nu_ - (m.phi_ + 1.0)) < 1e-12


def test_row_generation_bounds_and_optimality_gap():
    """LP values (lower bounds) never decrease; the last round closes the gap to the exact R(μ)."""
    rng = np.random.default_rng(9)
    for t in range(5):
        cb, S, p = make_problem(rng, [3, 3, 3, 2, 2][: 3 + t % 3], 2 + t % 2)
        m = MRC(s=0.0, solver="full", formulation="rows").fit(S)
        lo, up = np.array(m.row_rounds_["lower"]), np.array(m.row_rounds_["upper"])
        assert np.all(np.diff(lo) >= -1e-9)
        assert np.all(up >= lo - 1e-9)  # R(μ) is an upper bound at every round
        assert up[-1] - lo[-1] <= 1e-7
        assert m.converged_
        assert len(lo) > 1 and m.iterations_ == [m.minimax_risk_.value]


def test_dual_is_a_distribution_matching_the_box():
    """At the end of row generation the LP dual α is a distribution with τ−λ ≤ Fᵀα ≤ τ+λ and −bᵀα = R."""
    rng = np.random.default_rng(4)
    for t in range(4):
        K = 2 + t % 2
        cb, S, p = make_problem(rng, [3, 2, 3], K)
        fmap = FeatureMap(blocks_of(S), [0, 1, 2])
        lam = np.full(tau_of(S).shape, 0.01)
        lp = MinimaxModel.for_rows(tau_of(S), lam, 1e3)
        lp.add_mu(np.arange(tau_of(S).size))
        orc = FirstOrderOracle(fmap, K)
        lp.add_cuts(orc.covering_cuts())
        res = generate_rows(lp, orc)
        assert res.converged
        a = (-lp.row_dual)
        assert np.all(a >= -1e-9) and abs(a.sum() - 1.0) < 1e-8
        assert np.all(lp.dual_violation() <= 1e-8)
        assert abs(-np.dot(lp.row_upper, a) - lp.objective) < 1e-8


def test_row_generation_lp_add_remove_in_place():
    """The row-generation model edits in place: deleting non-binding rows keeps the optimum; removing and
    re-adding columns returns to it; row generation then re-converges to the same value."""
    rng = np.random.default_rng(6)
    cb, S, p = make_problem(rng, [3, 2, 3, 2], 3)
    K, D = tau_of(S).shape
    fmap = FeatureMap(blocks_of(S), [0, 1, 2, 3])
    lam = np.full(tau_of(S).shape, 0.02)
    lp = MinimaxModel.for_rows(tau_of(S), lam, 1e3)
    lp.add_mu(np.arange(K * D))
    orc = FirstOrderOracle(fmap, K)
    lp.add_cuts(orc.covering_cuts())
    generate_rows(lp, orc)
    R0 = lp.objective
    F = lp.row_matrix().tocsr()
    slack = lp.row_upper + lp.nu - F @ lp.mu
    idle = np.flatnonzero(((-lp.row_dual) <= 1e-12) & (slack > 1e-7))
    assert idle.size > 0
    n0 = lp.n_rows
    lp.delete_rows(idle)
    assert lp.n_rows == n0 - idle.size
    lp.solve()
    assert abs(lp.objective - R0) <= 1e-8
    cols = np.arange(D, 2 * D)  # label 1's columns out, then back in
    lp.remove_mu(cols)
    lp.solve()
    assert lp.objective >= R0 - 1e-8  # fewer columns: the restricted optimum cannot be lower
    lp.add_mu(cols)
    res = generate_rows(lp, orc)
    assert res.converged and abs(lp.objective - R0) <= 1e-7
    assert abs(res.upper[-1] - R0) <= 1e-7


# ------------------------------------------------------------------------ rules


def test_predict_proba_and_predict_consistency():
    rng = np.random.default_rng(2)
    cb, S, p = make_problem(rng, [3, 3, 2], 3, numeric=[(0.0, 5.0)], sparsity=0.1)
    m = MRC(solver="full").fit(S)
    X = np.column_stack([rng.integers(0, 3, 50), rng.integers(0, 3, 50), rng.integers(0, 2, 50),
                         rng.uniform(-1, 6, 50)])
    P = m.predict_proba(X)
    assert P.shape == (50, 3)
    assert np.all(P >= 0) and np.allclose(P.sum(axis=1), 1.0)
    F = m.decision_function(X)
    top = F.max(axis=1, keepdims=True)
    tied = (F >= top - 1e-9 * np.maximum(1.0, np.abs(top))).sum(axis=1) > 1
    pred = m.predict(X)
    assert np.array_equal(pred[~tied], np.argmax(F, axis=1)[~tied])  # the argmax rule …
    assert np.all(F[tied, pred[tied]] >= top[tied, 0] - 1e-9)  # … ties to a maximal label …
    tb = m.map_.psi(X) @ m.nb_logp_.T + np.log(m.prior_)
    for r in np.flatnonzero(tied):  # … of largest naive-Bayes score
        cands = np.flatnonzero(F[r] >= top[r, 0] - 1e-9 * max(1.0, abs(top[r, 0])))
        assert pred[r] == cands[np.argmax(tb[r, cands])]
    # decision_function = Φ(x, y)ᵀμ with Φ built explicitly (numeric values clipped to [lo, hi])
    Xc = X.copy()
    Xc[:, 3] = np.clip(Xc[:, 3], 0.0, 5.0)
    psi = np.zeros((50, psi_dim_of(S)))
    for r in range(50):
        for i in range(3):
            psi[r, blocks_of(S)[i].offset + int(X[r, i])] = 1.0
        psi[r, blocks_of(S)[3].offset] = Xc[r, 3]
    assert np.allclose(F, psi @ m.mu_.T)
    # rule (6): probabilities proportional to (score − φ)+
    h = np.maximum(F - m.phi_, 0.0)
    pos = h.sum(axis=1) > 0
    assert np.allclose(P[pos], h[pos] / h[pos].sum(axis=1, keepdims=True))
    assert np.allclose(P[~pos], 1.0 / 3)


def test_empty_cells_are_impossible_not_errors():
    """τ = λ = 0 cells: R still matches the brute force; the label gets probability 0 there."""
    rng = np.random.default_rng(13)
    found = 0
    for t in range(8):
        cb, S, p = make_problem(rng, [3, 3], 2 + t % 2, sparsity=0.45)
        m = MRC(s=0.0, solver="full").fit(S)
        R = brute_force_R(S, tau_of(S), m.lambda_)
        assert abs(m.minimax_risk_.value - R) <= 1e-6
        assert np.array_equal(m.impossible_, (tau_of(S) + m.lambda_) <= 0)
        for y, j in zip(*np.nonzero(m.impossible_)):
            blk = next(b for b in blocks_of(S) if b.offset <= j < b.offset + b.size)
            if (tau_of(S)[:, j] > 0).any():  # a level seen with another label
                found += 1
                i = blocks_of(S).index(blk)
                X = np.zeros((3, 2))
                X[:, i] = j - blk.offset
                X[:, 1 - i] = np.arange(3)
                F = m.decision_function(X)
                assert np.all(F[:, y] <= m.phi_ - m.bound_ / 2)  # μ fixed at −B: y is ruled out
                informative = np.maximum(F - m.phi_, 0).sum(axis=1) > 0  # else rule (6) is uniform
                assert np.all(m.predict_proba(X)[informative, y] == 0.0)
    assert found > 0


def test_empty_cells_keep_gives_same_R_and_leaves_mu():
    rng = np.random.default_rng(13)
    for t in range(4):
        cb, S, p = make_problem(rng, [3, 3], 2 + t % 2, sparsity=0.45)
        veto = MRC(s=0.0, solver="full").fit(S)
        keep = MRC(s=0.0, solver="full", empty_cells="keep").fit(S)
        assert abs(veto.minimax_risk_.value - keep.minimax_risk_.value) <= 1e-9
        assert np.array_equal(veto.impossible_, keep.impossible_)
        assert np.all(np.abs(keep.mu_[keep.impossible_]) < veto.bound_ / 2)  # no −B in keep mode
        assert np.all(veto.mu_[veto.impossible_ & (tau_of(S).sum(axis=0, keepdims=True) > 0)] == -veto.bound_)


@pytest.mark.parametrize("formulation", ["compact", "rows"])
def test_inconsistent_statistics_raise_input_error(formulation):
    """τ that no distribution matches (block totals disagree) with λ = 0: an InputError, not a crash."""
    tau = np.array([[0.3, 0.2, 0.1, 0.1], [0.25, 0.25, 0.3, 0.3]])  # block 2 sums to 0.8 ≠ 1
    blocks = [type("B", (), {"name": "a", "kind": "onehot", "size": 2})(),
              type("B", (), {"name": "b", "kind": "onehot", "size": 2})()]
    fmap = FeatureMap(blocks, [0, 1])
    with pytest.raises(InputError, match="no distribution matches"):
        solve_full(MinimaxProblem.first_order(fmap, tau, np.zeros_like(tau)), formulation=formulation)


def test_feature_subset_equals_marginal_problem():
    """features=[...] solves the MRC of the sub-codebook (other features ignored)."""
    rng = np.random.default_rng(17)
    cb, S, p = make_problem(rng, [3, 2, 3], 2)
    m = MRC(s=0.0, features=["f0", "f2"], solver="full").fit(S)
    sub = S.restrict(["f0", "f2"])
    R = brute_force_R(sub, tau_of(sub), np.zeros_like(tau_of(sub)))
    assert abs(m.minimax_risk_.value - R) <= 1e-6
    assert m.feature_names_in_ == ["f0", "f2"]
    X = np.array([[0, 1, 2], [2, 0, 1]], dtype=float)
    Xs = X[:, [0, 2]]
    m2 = MRC(s=0.0, solver="full").fit(sub)
    assert abs(m.minimax_risk_.value - m2.minimax_risk_.value) < 1e-9
    assert np.allclose(m.decision_function(X), m2.decision_function(Xs), atol=1e-7)  # same LP, same data columns
    with pytest.raises(InputError, match="unknown feature 'nope'"):
        MRC(features=["nope"]).fit(S)


def test_more_features_never_raise_R():
    """Adding constraints (features) shrinks U, so R* can only drop."""
    rng = np.random.default_rng(23)
    for t in range(4):
        cb, S, p = make_problem(rng, [3, 3, 2, 2], 2 + t % 2)
        r = [MRC(s=0.0, features=[f"f{i}" for i in range(k)], solver="full").fit(S).minimax_risk_.value
             for k in range(1, 5)]
        assert np.all(np.diff(r) <= 1e-9), r


def test_model_round_trip_json():
    rng = np.random.default_rng(31)
    cb, S, p = make_problem(rng, [3, 2], 3, numeric=[(0.0, 2.0)], sparsity=0.2)
    m = MRC(solver="full").fit(S)
    d = json.loads(json.dumps(m.to_dict()))
    m2 = MRC.from_dict(d)
    X = np.column_stack([rng.integers(0, 3, 20), rng.integers(0, 2, 20), rng.uniform(0, 2, 20)])
    assert np.allclose(m2.predict_proba(X), m.predict_proba(X))
    assert np.array_equal(m2.predict(X), m.predict(X))
    assert m2.minimax_risk_.value == m.minimax_risk_.value
    assert np.array_equal(m2.impossible_, m.impossible_) and np.array_equal(m2.ruled_out_, m.ruled_out_)
    assert m2.fingerprint_ == S.fingerprint
    with pytest.raises(InputError, match="not an MRC model"):
        MRC.from_dict({"learner": "renyi"})
    check_malformed_models(MRC, d)



def test_errors_and_unfitted():
    rng = np.random.default_rng(1)
    cb, S, p = make_problem(rng, [2, 2], 2)
    with pytest.raises(InputError, match="not fitted"):
        MRC().predict(np.zeros((1, 2)))
    with pytest.raises(InputError, match="unknown MRC solver 'simplex'"):
        MRC(solver="simplex").fit(S)
    with pytest.raises(InputError, match="coverage"):
        MRC(coverage=1.5).fit(S)
    m = MRC(solver="full").fit(S)
    with pytest.raises(InputError, match="code 2 at row 1 is outside 0..1"):
        m.predict(np.array([[2.0, 0.0]]))


# ------------------------------------------------------------------ calibration


def test_bonferroni_z_gives_simultaneous_coverage():
    for cov, m in [(0.95, 1), (0.95, 40), (0.9, 1000)]:
        z = bonferroni_z(cov, m)
        assert abs(m * 2 * norm.sf(z) - (1 - cov)) < 1e-12
    assert abs(bonferroni_z(0.95, 1) - 1.959963984540054) < 1e-9


def test_lambda_formula_and_overrides():
    rng = np.random.default_rng(0)
    cb, S, p = make_problem(rng, [3, 2], 2)
    lam = lam_of(S)
    z = bonferroni_z(0.95, tau_of(S).size)
    # one-hot entries: the symmetric cover of the Clopper–Pearson interval at α' = 0.05/m
    a = 0.05 / tau_of(S).size
    k = tau_of(S) * S.n
    lo, hi = beta.ppf(a / 2, k, S.n - k + 1), beta.ppf(1 - a / 2, k + 1, S.n - k)
    assert np.allclose(lam, np.maximum(tau_of(S) - lo, hi - tau_of(S)))
    # ... a little wider than the normal interval at these counts (n = 300, τ ≥ 0.06)
    wald = z * np.sqrt(tau_of(S) * (1 - tau_of(S))) / np.sqrt(S.n)
    assert np.all((wald <= lam) & (lam <= 1.35 * wald))
    assert np.all(lam_of(S, s=0.0) == 0.0)
    ts, ns = tau_std_of(S), np.full(tau_of(S).shape, 0.002)
    mo = Moments(tau_of(S), ts, ns, S.n)  # noise without recorded draws: the normal term, flagged approximate
    box2 = confidence_box(mo, np.ones(ts.shape[1], bool), s=0.3)
    assert np.allclose(box2.lam, 0.3 * ts / np.sqrt(S.n) + z * 0.002) and not box2.approximate  # s: no coverage claimed
    assert confidence_box(mo, np.ones(ts.shape[1], bool)).approximate
    with pytest.raises(InputError, match="s must be"):
        confidence_box(mo, np.ones(ts.shape[1], bool), s=-1.0)


def test_binomial_halfwidth_is_exact_where_the_normal_interval_fails():
    """Clopper–Pearson: P(|τ̂ − p| ≤ h(τ̂)) ≥ 1 − α for EVERY p (summed exactly over the binomial
    pmf), small n and p near 0 included, where the normal interval (0 at τ̂ = 0) under-covers."""
    from scipy.stats import binom

    from marg.learners.features.calibration import binomial_halfwidth

    for n in (5, 20, 74, 300):
        k = np.arange(n + 1)
        h = binomial_halfwidth(k / n, n, 0.05)
        wald = norm.isf(0.025) * np.sqrt(k / n * (1 - k / n) / n)
        worst_wald = 1.0
        for p in np.concatenate([np.linspace(1e-4, 0.2, 60), np.linspace(0.2, 0.9999, 60)]):
            pmf = binom.pmf(k, n, p)
            assert pmf[np.abs(k / n - p) <= h + 1e-12].sum() >= 0.95 - 1e-9, (n, p)
            worst_wald = min(worst_wald, pmf[np.abs(k / n - p) <= wald].sum())
        assert worst_wald < 0.9  # the normal interval is far from its nominal 95% somewhere
    assert binomial_halfwidth(np.array([0.0]), 74, 1e-6)[0] == pytest.approx(1 - (0.5e-6) ** (1 / 74))
    with pytest.raises(InputError, match="alpha must be"):
        binomial_halfwidth(np.array([0.1]), 10, 0.0)


def test_empty_cells_are_not_ruled_out_by_the_calibrated_box():
    """A level never seen with a label (τ = 0) keeps λ > 0 under s=None (the truth may have
    mass there), and λ = 0 only under the explicit s = 0."""
    rng = np.random.default_rng(5)
    cb, S, p = make_problem(rng, [4, 2], 2)
    X = np.array([[0, 0], [1, 1], [2, 0], [0, 1]] * 5, dtype=float)
    y = np.array([0, 1] * 10)
    S = Summary.from_rows(cb, X, y)
    assert np.any(tau_of(S) == 0)
    lam = lam_of(S)
    assert np.all(lam[tau_of(S) == 0] > 0.1)
    assert np.all(lam_of(S, s=0.0)[tau_of(S) == 0] == 0)
    assert not MRC().fit(S).ruled_out_.any()


def test_coverage_of_calibrated_box_by_simulation():
    """The Bonferroni box τ̂ ± λ contains the true τ at least ~coverage of the time."""
    rng = np.random.default_rng(42)
    K, n = 2, 400  # two features with 3 and 2 levels
    p = rng.dirichlet(np.ones(12)).reshape(3, 2, 2)
    tau_true = np.concatenate([p.sum(1).T, p.sum(0).T], axis=1)  # (K, 5)
    flat = p.ravel()
    hits = 0
    trials = 300
    for _ in range(trials):
        cells = rng.choice(flat.size, size=n, p=flat)
        a, b, y = np.unravel_index(cells, p.shape)
        tau = np.zeros((K, 5))
        np.add.at(tau, (y, a), 1.0)
        np.add.at(tau, (y, 3 + b), 1.0)
        tau /= n
        lam = confidence_box(Moments(tau, np.sqrt(tau * (1 - tau)), np.zeros_like(tau), n), np.ones(5, bool)).lam
        hits += np.all(np.abs(tau - tau_true) <= lam)
    assert hits / trials >= 0.9


# -------------------------------------------------------------------- featuremap


def test_featuremap_psi_phi():
    blocks = [
        type("B", (), {"name": "a", "kind": "onehot", "size": 3})(),
        type("B", (), {"name": "x", "kind": "numeric", "size": 1, "lo": -1.0, "hi": 1.0})(),
        type("B", (), {"name": "b", "kind": "onehot", "size": 2})(),
    ]
    fm = FeatureMap(blocks, [2, 0, 1])  # data columns: x, b, a
    X = np.array([[0.5, 1, 2], [3.0, 0, 0]])
    P = fm.psi(X)
    assert np.array_equal(P, [[0, 0, 1, 0.5, 0, 1], [1, 0, 0, 1.0, 1, 0]])
    Phi = fm.phi(X, np.array([1, 0]), 2)
    assert np.array_equal(Phi[0, 1], P[0]) and np.all(Phi[0, 0] == 0)
    mu = np.arange(12.0).reshape(2, 6)
    assert np.allclose(fm.scores(X, mu), P @ mu.T)
    assert fm.vertex_col.tolist() == [0, 1, 2, 3, 3, 4, 5]
    assert fm.vertex_val.tolist() == [1, 1, 1, -1, 1, 1, 1]
    with pytest.raises(InputError, match="feature 'a': code 3 at row 1"):
        fm.psi(np.array([[0.0, 0, 3]]))


def test_rules_shared_by_mrc_and_dcc():
    """Rule (6) sums to one, is uniform where every score is ≤ φ, and is proportional to (score − φ)₊ elsewhere."""
    from marg.learners.classifiers.minimax_rules import argmax_rule, randomized_rule

    rng = np.random.default_rng(3)
    S = rng.normal(size=(50, 4))
    S[:5] = -10.0  # every label below φ: uniform
    P = randomized_rule(S, 0.2)
    assert np.allclose(P.sum(axis=1), 1.0) and (P >= 0).all()
    assert np.allclose(P[:5], 0.25)
    h = np.maximum(S[5:] - 0.2, 0.0)
    live = h.sum(axis=1) > 0
    assert np.allclose(P[5:][live], h[live] / h[live].sum(axis=1, keepdims=True))
    assert np.array_equal(argmax_rule(S), S.argmax(axis=1))
    # ties go to the tied label of largest tie-break score, then the lowest index; strict maxima ignore it
    tb = rng.normal(size=S.shape)
    assert np.array_equal(argmax_rule(S[5:], tb[5:]), S[5:].argmax(axis=1))
    assert np.array_equal(argmax_rule(S[:5], tb[:5]), tb[:5].argmax(axis=1))  # rows 0-4 tie everywhere
    T = np.array([[1.0, 1.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0], [2.0, 1.0, 2.0 - 1e-12, 0.0], [0.0, 3.0, 3.0, 0.0]])
    prior = np.tile([0.1, 0.2, 0.4, 0.3], (4, 1))
    assert argmax_rule(T, prior).tolist() == [3, 2, 2, 2]
    assert argmax_rule(T, np.zeros((4, 4))).tolist() == [0, 0, 0, 1]


def test_ties_are_broken_by_naive_bayes_from_the_released_tables():
    """When the certificate is trivial every score ties; the rule then predicts the naive-Bayes
    class of the first-order tables (Jeffreys ½ pseudo-count), not whichever class is listed
    first, and the tie-break survives the model file."""
    cb = Codebook(features=(CategoricalFeature("a", ("u", "v")), CategoricalFeature("b", ("p", "q", "r"))),
                  label=Label("y", ("c0", "c1", "c2")))
    X = np.array([[0, 0], [1, 1], [0, 2], [1, 0], [0, 1], [1, 2], [0, 0], [1, 1]], dtype=float)
    y = np.array([0, 2, 2, 1, 2, 0, 2, 2])  # 8 rows: the 95% box is trivial
    S = Summary.from_rows(cb, X, y)
    grid = np.array([[a, b] for a in range(2) for b in range(3)], dtype=float)
    counts = np.zeros((3, 2, 3))
    np.add.at(counts, (y, X[:, 0].astype(int), X[:, 1].astype(int)), 1)
    Ny = counts.sum(axis=(1, 2))
    na = counts.sum(axis=2)  # (K, 2)
    nb = counts.sum(axis=1)  # (K, 3)
    want = [int(np.argmax(np.log(Ny / 8) + np.log((na[:, a] + 0.5) / (Ny + 1.0))
                          + np.log((nb[:, b] + 0.5) / (Ny + 1.5))))
            for a, b in grid.astype(int)]
    for est in (MRC(), DCC()):
        m = est.fit(S)
        assert m.minimax_risk_.value == pytest.approx(2 / 3)
        assert m.predict(grid).tolist() == want
        m2 = type(m).from_dict(json.loads(json.dumps(m.to_dict())))
        assert m2.predict(grid).tolist() == want
