"""Feature selection: group-lasso optimality, GBD vs brute-force enumeration, cut validity."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.optimize import minimize

from marg.learners.selection.gbd import benders_cut, gbd, restricted_value
from marg.learners.selection.group_lasso import group_lasso, group_lasso_path, lambda_max
from marg.learners.selection.group_norms import project_l1_ball, prox_group
from marg.learners.classifiers.renyi import RenyiClassifier
from marg.learners.selection.select import gcv, select_features, selection_problem
from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label, NumericFeature
from marg.errors import InputError
from marg.marginals.summary import Summary


NO_LIMIT = 1e9  # seconds: the exactness checks must not depend on how loaded the machine is


def make_rows(seed, p=10, n=300, K=2, informative=3):
    rng = np.random.default_rng(seed)
    sizes = [int(rng.integers(2, 4)) for _ in range(p)]
    X = np.column_stack([rng.integers(0, m, n) for m in sizes])
    # correlated copies make selection non-trivial
    if p >= 4:
        X[:, 3] = np.where(rng.random(n) < 0.7, X[:, 0] % sizes[3], X[:, 3])
    beta = [rng.normal(0, 1.5, m) if i < informative else rng.normal(0, 0.2, m) for i, m in enumerate(sizes)]
    s = sum(beta[i][X[:, i]] for i in range(p)) + rng.normal(0, 1.0, n)
    if K == 2:
        y = (s > np.median(s)).astype(int)
    else:
        y = np.digitize(s, np.quantile(s, np.linspace(0, 1, K + 1)[1:-1]))
    return X, y, sizes


def summary_of(X, y, sizes, K=2):
    cb = Codebook(
        features=tuple(CategoricalFeature(f"f{i}", tuple(str(a) for a in range(m))) for i, m in enumerate(sizes)),
        label=Label("y", tuple(f"c{k}" for k in range(K))),
    )
    return Summary.from_rows(cb, X.astype(float), y, stats="all")


def problem(seed, **kw):
    X, y, sizes = make_rows(seed, **kw)
    K = kw.get("K", 2)
    return selection_problem(summary_of(X, y, sizes, K))


def kkt_ok(Qc, D, Z, sizes, lam, norm, tol=1e-6):
    """Independent subgradient check of min tr(ZᵀQZ) − tr(DᵀZ) + λΣ‖Z_i‖."""
    D = D.reshape(D.shape[0], -1)
    Z = Z.reshape(D.shape)
    G = D - 2 * Qc @ Z  # −∇f; optimality: G_i ∈ λ ∂‖Z_i‖
    off = np.concatenate([[0], np.cumsum(sizes)])
    for i in range(len(sizes)):
        z, gi = Z[off[i] : off[i + 1]].ravel(), G[off[i] : off[i + 1]].ravel()
        if not np.any(z):
            dual = np.abs(gi).sum() if norm == "linf" else np.linalg.norm(gi)
            if dual > lam + tol:
                return False
        elif norm == "l2":
            if np.linalg.norm(gi - lam * z / np.linalg.norm(z)) > tol:
                return False
        else:
            top = np.abs(z).max()
            on = np.abs(z) >= top - 1e-9 * max(1.0, top)
            if abs(np.abs(gi).sum() - lam) > tol:  # ‖G_i‖₁ = λ
                return False
            if np.abs(gi[~on]).sum() > tol:  # supported on the maximal entries
                return False
            if np.any(gi[on] * z[on] < -tol * tol):  # with matching signs
                return False
    return True


# ----------------------------------------------------------------------- group lasso
@pytest.mark.parametrize("norm", ["linf", "l2"])
def test_prox_is_the_exact_minimiser(norm):
    rng = np.random.default_rng(1)
    sizes = [3, 2, 4]
    for _ in range(10):
        v = rng.normal(0, 1, sum(sizes))
        t = rng.uniform(0.1, 2.0, len(sizes))
        z = prox_group(v, sizes, t, norm)[:, 0]
        off = np.concatenate([[0], np.cumsum(sizes)])

        def h(x):
            pen = sum(t[i] * (np.abs(x[off[i] : off[i + 1]]).max() if norm == "linf"
                              else np.linalg.norm(x[off[i] : off[i + 1]])) for i in range(3))
            return 0.5 * np.sum((x - v) ** 2) + pen

        # the prox value is below any point a derivative-free search finds, and below perturbations
        ref = minimize(h, v, method="Powell", options={"xtol": 1e-10, "ftol": 1e-14, "maxiter": 20000})
        assert h(z) <= ref.fun + 1e-9
        for _ in range(30):
            assert h(z) <= h(z + rng.normal(0, 1e-3, z.size)) + 1e-14


def test_l1_ball_projection_kkt():
    rng = np.random.default_rng(2)
    for _ in range(50):
        v = rng.normal(0, 1, int(rng.integers(1, 8)))
        r = float(rng.uniform(0.05, 3))
        x = project_l1_ball(v, r)
        if np.abs(v).sum() <= r:
            assert np.array_equal(x, v)
            continue
        assert abs(np.abs(x).sum() - r) < 1e-12
        # KKT: v − x = θ·sign(x) on the support, |v_a| ≤ θ off it, θ ≥ 0
        th = (v - x)[x != 0] * np.sign(x[x != 0])
        assert np.allclose(th, th[0]) and th[0] >= 0
        assert np.all(np.abs(v[x == 0]) <= th[0] + 1e-12)


@pytest.mark.parametrize("norm", ["linf", "l2"])
@pytest.mark.parametrize("K", [2, 3])
def test_group_lasso_subgradient_optimality(norm, K):
    for seed in range(3):
        P = problem(seed, p=8, K=K)
        lmax = lambda_max(P.Dc, P.sizes, norm)
        for frac in (0.9, 0.5, 0.2, 0.05):
            lam = frac * lmax
            Z, info = group_lasso(P.Qc, P.Dc, P.sizes, lam, norm, tol=1e-10)
            assert kkt_ok(P.Qc, P.Dc, Z, P.sizes, lam, norm), (seed, frac)
            # and no other point is better (convexity: compare with perturbations)
            rng = np.random.default_rng(seed)

            def F(Zx):
                off = np.concatenate([[0], np.cumsum(P.sizes)])
                pen = sum(
                    (np.abs(Zx[off[i] : off[i + 1]]).max() if norm == "linf"
                     else np.linalg.norm(Zx[off[i] : off[i + 1]]))
                    for i in range(len(P.sizes))
                )
                return np.sum(Zx * (P.Qc @ Zx)) - np.sum(P.Dc * Zx) + lam * pen

            for _ in range(10):
                assert F(Z) <= F(Z + rng.normal(0, 1e-3, Z.shape)) + 1e-12


def test_lambda_max_gives_the_empty_set():
    for norm in ("linf", "l2"):
        for seed in range(4):
            P = problem(seed)
            lmax = lambda_max(P.Dc, P.sizes, norm)
            for lam in (lmax, 1.5 * lmax):
                Z, info = group_lasso(P.Qc, P.Dc, P.sizes, lam, norm)
                assert info["active"] == [] and not np.any(Z)
            Z, info = group_lasso(P.Qc, P.Dc, P.sizes, 0.98 * lmax, norm, tol=1e-11)
            assert len(info["active"]) >= 1
            path = group_lasso_path(P.Qc, P.Dc, P.sizes, norm=norm, n_lambdas=20)
            assert path[0].lam == pytest.approx(lmax) and path[0].active == ()
            assert all(pt.kkt <= 1e-6 for pt in path)


def test_path_matches_cold_solves():
    P = problem(7, p=9)
    path = group_lasso_path(P.Qc, P.Dc, P.sizes, n_lambdas=12, keep_coef=True, tol=1e-11)
    for pt in path[::3]:
        Z, info = group_lasso(P.Qc, P.Dc, P.sizes, pt.lam, tol=1e-11)
        assert tuple(info["active"]) == pt.active
        assert np.allclose(Z, pt.Z, atol=1e-6)


# ------------------------------------------------------------------------------- GBD
def brute_force(P, M, g, cost=None):
    best = (math.inf, None)
    p = len(P.sizes)
    for k in range(M + 1):
        for S in itertools.combinations(range(p), k):
            v = restricted_value(P.Qc, P.Dc, P.sizes, S, g)[0] + (0.0 if cost is None else cost * k)
            if v < best[0] - 1e-13:
                best = (v, S)
    return best


@pytest.mark.parametrize("K", [2, 3])
def test_gbd_equals_brute_force(K):
    for seed, p in ((11, 12), (12, 10)):
        P = problem(seed, p=p, K=K, informative=4)
        for M in (1, 2, 4):
            for g in (5.0, 50.0):
                val, S = brute_force(P, M, g)
                # exactness must not depend on the upper-bound heuristic: run it with and without
                ls = 0 if (M + int(g)) % 2 else 2000
                r = gbd(P.Qc, P.Dc, P.sizes, max_features=M, g=g, time_limit=NO_LIMIT, gap_tol=1e-9,
                        local_search_evals=ls)
                assert r.status == "optimal" and r.gap <= 1e-7 * max(1.0, abs(val))
                assert r.support == S, (seed, M, g)
                assert r.value == pytest.approx(val, abs=1e-12)
                assert r.lower_bound <= val + 1e-9


def test_fsp_lambda_equals_brute_force():
    P = problem(14, p=10, informative=3)
    for cost in (1e-3, 5e-3, 2e-2):
        val, S = brute_force(P, 10, 20.0, cost)
        r = gbd(P.Qc, P.Dc, P.sizes, g=20.0, feature_cost=cost, gap_tol=1e-9, time_limit=NO_LIMIT)
        assert r.support == S and r.value == pytest.approx(val, abs=1e-12) and r.status == "optimal"


def test_every_cut_is_a_valid_lower_bound():
    rng = np.random.default_rng(21)
    for seed in (15, 16):
        P = problem(seed, p=9)
        g = 30.0
        r = gbd(P.Qc, P.Dc, P.sizes, max_features=3, g=g)
        cuts = list(r.cuts)
        # cuts from arbitrary Z (not subproblem solutions) are valid too
        for _ in range(5):
            cuts.append(benders_cut(P.Qc, P.Dc, P.sizes, rng.normal(0, 0.3, P.Dc.shape), g))
        assert len(cuts) >= 5
        for _ in range(200):
            sigma = (rng.random(len(P.sizes)) < rng.uniform(0.1, 0.9)).astype(float)
            c = restricted_value(P.Qc, P.Dc, P.sizes, np.flatnonzero(sigma), g)[0]
            for cut in cuts:
                assert cut(sigma) <= c + 1e-12
        # tight where generated
        for cut in r.cuts:
            c = restricted_value(P.Qc, P.Dc, P.sizes, cut.support, g)[0]
            sig = np.zeros(len(P.sizes))
            sig[list(cut.support)] = 1
            assert cut(sig) == pytest.approx(c, abs=1e-12)


# ------------------------------------------------------------------- from a Summary
def test_select_features_from_summary():
    X, y, sizes = make_rows(31, p=10, n=400, informative=3)
    S = summary_of(X, y, sizes)
    P = selection_problem(S)
    for M in (2, 3, 5):
        gl = select_features(S, "group-lasso", M, problem=P)
        assert 1 <= len(gl.selected) <= M
        assert gl.objective == pytest.approx(P.objective([P.names.index(nm) for nm in gl.selected]))
        gb = select_features(S, "gbd", M, problem=P, g=20.0, time_limit=NO_LIMIT)
        assert gb.status == "optimal" and len(gb.selected) <= M
        # GBD is optimal for c_g: no worse than the group-lasso support under c_g
        idx = [P.names.index(nm) for nm in gl.selected]
        assert gb.ridge_objective <= P.objective(idx, 20.0) + 1e-12
        assert gb.lower_bound <= gb.ridge_objective + 1e-9
        # the refit on the selection carries the Rényi certificate of γ(selected)
        m = RenyiClassifier(features=gb.selected).fit(S)
        assert m.gamma_[0] == pytest.approx(gb.gamma, abs=1e-10)
        assert m.training_bound_.value == pytest.approx(2 * gb.gamma, abs=1e-10)
    # path records: features enter once each, λ decreases
    lams = [r["lam"] for r in gl.path]
    assert all(a > b for a, b in zip(lams, lams[1:]))
    entered = [nm for r in gl.path for nm in r["entered"]]
    assert len(entered) == len(set(entered))


def test_gcv_choice_is_the_path_minimiser():
    X, y, sizes = make_rows(32, p=8, n=150, informative=2)
    S = summary_of(X, y, sizes)
    P = selection_problem(S)
    r = select_features(S, "group-lasso", None, problem=P, n_lambdas=25)
    assert r.status == "gcv"
    supports = {tuple(P.names.index(nm) for nm in rec["active"]) for rec in r.path}
    chosen = gcv(P, [P.names.index(nm) for nm in r.selected])
    assert all(chosen <= gcv(P, s) + 1e-15 for s in supports)
    # GCV is the least-squares GCV: γ(S)/(1 − df/n)² with γ the in-sample MSE of C on [1, W_S]
    idx = [P.names.index(nm) for nm in r.selected]
    W = np.column_stack([np.ones(len(y))] + [(X[:, i][:, None] == np.arange(sizes[i])).astype(float) for i in idx])
    coef, *_ = np.linalg.lstsq(W, y - 0.5, rcond=None)
    mse = np.mean((W @ coef - (y - 0.5)) ** 2)
    df = np.linalg.matrix_rank(W)
    assert chosen == pytest.approx(mse / (1 - df / len(y)) ** 2, rel=1e-9)


def test_multiclass_selection_and_errors():
    X, y, sizes = make_rows(33, p=7, n=300, K=3, informative=2)
    S = summary_of(X, y, sizes, K=3)
    r = select_features(S, "gbd", 2, g=20.0)
    P = selection_problem(S)
    val, sup = brute_force(P, 2, 20.0)
    assert [P.names[i] for i in sup] == r.selected and r.gap <= 1e-6 * abs(val)
    with pytest.raises(InputError, match="method"):
        select_features(S, "magic", 2)
    with pytest.raises(InputError, match="max_features"):
        select_features(S, "gbd")
    with pytest.raises(InputError, match="max_features"):
        select_features(S, "group-lasso", 0)
    with pytest.raises(InputError, match="norm"):
        select_features(S, "group-lasso", 2, norm="l3")
    cb = Codebook(
        features=(CategoricalFeature("a", ("0", "1")), NumericFeature("age", lo=0.0, hi=100.0)),
        label=Label("y", ("n", "p")),
    )
    Sr = Summary.from_rows(cb, np.array([[0, 30.0], [1, 50.0], [1, 20.0], [0, 70.0]]), np.array([0, 1, 1, 0]),
                           stats="all")
    with pytest.raises(InputError, match="'age'"):
        select_features(Sr, "group-lasso", 1)
    assert select_features(Sr, "group-lasso", 1, candidates=["a"]).selected in ([], ["a"])
