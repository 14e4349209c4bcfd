"""Rényi classifier: brute-force oracles over the full joint of small problems.

θ = max_{p ∈ C_pairwise} Σ_x p_{x0}p_{x1}/(p_{x0}+p_{x1}) is computed by a log-barrier
Newton method in the null space of the marginal constraints, and certified by the
Frank-Wolfe bound (an LP): since the objective is concave and 1-homogeneous,
θ ≤ max_{p'∈C} ∇obj(p̂)ᵀp' for any p̂, while θ ≥ obj(p̂) for any feasible p̂.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import linprog

from marg.learners.classifiers.renyi import RenyiClassifier
from marg.learners.classifiers.renyi_problem import (
    center_problem,
    min_norm_solve,
    psd_eigh,
    quadratic_value,
    separable_solution,
)
from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label, NumericFeature
from marg.errors import InputError
from marg.marginals.summary import Summary
from marg.marginals.counts.tables import MarginalTable
from tests.helpers.quantities import Q_of, d_of


# ----------------------------------------------------------------------------- helpers
def _one_thread():
    """BLAS oversubscription makes the dense Newton steps 30x slower on a busy 2-core box."""
    try:
        from threadpoolctl import threadpool_limits

        return threadpool_limits(1)
    except ImportError:  # pragma: no cover
        import contextlib

        return contextlib.nullcontext()


def make_codebook(sizes, K=2):
    feats = tuple(CategoricalFeature(f"x{i}", tuple(str(a) for a in range(m))) for i, m in enumerate(sizes))
    return Codebook(features=feats, label=Label("y", tuple(f"c{k}" for k in range(K))))


def summary_from_joint(P, n=1000.0):
    """Summary whose tables are the exact marginals n·P (P: (m_1, …, m_d, K))."""
    sizes = P.shape[:-1]
    d = len(sizes)
    cb = make_codebook(sizes, P.shape[-1])
    tabs = [MarginalTable(("y",), n * P.sum(axis=tuple(range(d))))]
    for i in range(d):
        tabs.append(MarginalTable((f"x{i}", "y"), n * P.sum(axis=tuple(k for k in range(d) if k != i))))
    for i, j in itertools.combinations(range(d), 2):
        tabs.append(
            MarginalTable((f"x{i}", f"x{j}", "y"), n * P.sum(axis=tuple(k for k in range(d) if k not in (i, j))))
        )
    return Summary.from_tables(cb, tabs)


def domain(sizes):
    return np.array(list(itertools.product(*[range(m) for m in sizes])), dtype=np.int64).reshape(-1, len(sizes))


def pairwise_constraints(sizes, K=2):
    """A with A·vec(P) = all (X_i, X_j) and (X_i, Y) marginals; vec in C order of P."""
    shape = tuple(sizes) + (K,)
    idx = np.arange(int(np.prod(shape))).reshape(shape)
    d = len(sizes)
    rows = []
    for i, j in itertools.combinations(range(d), 2):
        for a in range(sizes[i]):
            for b in range(sizes[j]):
                sl = [slice(None)] * (d + 1)
                sl[i], sl[j] = a, b
                rows.append(idx[tuple(sl)].ravel())
    for i in range(d):
        for a in range(sizes[i]):
            for y in range(K):
                sl = [slice(None)] * (d + 1)
                sl[i], sl[d] = a, y
                rows.append(idx[tuple(sl)].ravel())
    A = np.zeros((len(rows), idx.size))
    for r, cols in enumerate(rows):
        A[r, cols] = 1.0
    return A


def harmonic(p):
    """Σ_x p0 p1/(p0+p1) for p of shape (X, 2)."""
    s = p.sum(axis=1)
    safe = np.where(s > 0, s, 1.0)
    return float(np.sum(np.where(s > 0, p[:, 0] * p[:, 1] / safe, 0.0)))


def theta_oracle(P):
    """(lower, upper) certified bounds on θ for the binary joint P (strictly positive)."""
    sizes = P.shape[:-1]
    A = pairwise_constraints(sizes)
    p0 = P.reshape(-1, 2).ravel()
    b = A @ p0
    # null space of A
    U, s, Vt = np.linalg.svd(A)
    rank = int(np.sum(s > 1e-10 * s[0]))
    N = Vt[rank:].T
    nvar = p0.size

    def obj_grad_hess(p):
        a, c = p[0::2], p[1::2]
        ssum = a + c
        f = np.sum(a * c / ssum)
        g = np.empty_like(p)
        g[0::2] = (c / ssum) ** 2
        g[1::2] = (a / ssum) ** 2
        w = 2.0 / ssum**3
        return f, g, w, a, c

    u = np.zeros(N.shape[1])
    t = 1.0
    p = p0.copy()
    while nvar / t > 1e-9:  # the LP certificate below measures the true gap
        for _ in range(60):
            p = p0 + N @ u
            f, g, w, a, c = obj_grad_hess(p)
            grad = N.T @ (-t * g - 1.0 / p)
            # Hessian of −t·obj: t Σ_x w_x v_x v_xᵀ, v_x = (c, −a) on (x0, x1)
            NV = N[0::2].T * c - N[1::2].T * a
            H = t * (NV * w) @ NV.T + (N.T * (1.0 / p**2)) @ N
            H[np.diag_indices_from(H)] += 1e-14 * np.trace(H) / H.shape[0]
            step = -np.linalg.solve(H, grad)
            dec = -grad @ step
            if dec / 2 < 1e-12:
                break
            dp = N @ step
            alpha = 1.0
            neg = dp < 0
            if neg.any():
                alpha = min(1.0, 0.99 * float(np.min(-p[neg] / dp[neg])))

            def phi(uu):
                pp = p0 + N @ uu
                return -t * obj_grad_hess(pp)[0] - np.sum(np.log(pp))

            if dec > 1e-6:  # Armijo; below this, phi differences drown in rounding (phi ~ t)
                cur = phi(u)
                while phi(u + alpha * step) > cur - 0.25 * alpha * dec and alpha > 1e-10:
                    alpha *= 0.5
            u = u + alpha * step
        t *= 10.0
    p = p0 + N @ u
    lower = harmonic(p.reshape(-1, 2))
    _, g, _, _, _ = obj_grad_hess(p)
    lp = linprog(-g, A_eq=A, b_eq=b, bounds=[(0, None)] * nvar, method="highs")
    assert lp.status == 0
    upper = -lp.fun
    return lower, upper


def worst_case_error(P, proba):
    """max_{p ∈ C_pairwise} P_p(δ(X) ≠ Y) of a randomized rule (proba: (X, K)), an LP."""
    sizes, K = P.shape[:-1], P.shape[-1]
    A = pairwise_constraints(sizes, K)
    b = A @ P.ravel()
    err = (1.0 - proba).ravel()  # C order: x major, y minor
    lp = linprog(-err, A_eq=A, b_eq=b, bounds=[(0, None)] * err.size, method="highs")
    assert lp.status == 0
    return -lp.fun


def random_joint(rng, sizes, kind):
    """Strictly positive joint (…, 2) of a given flavour."""
    Xs = domain(sizes)
    px = rng.dirichlet(np.ones(len(Xs)) * 2.0)
    if kind == "separable":
        zeta = [rng.uniform(-1, 1, m) for m in sizes]
        f = sum(zeta[i][Xs[:, i]] for i in range(len(sizes)))
        f = f - f.mean()
        f *= 0.45 / max(np.abs(f).max(), 1e-9)
        eta = 0.5 + f
    elif kind == "steep":
        beta = [rng.normal(0, 3.0, m) for m in sizes]
        s = sum(beta[i][Xs[:, i]] for i in range(len(sizes)))
        eta = np.clip(1.0 / (1.0 + np.exp(-s)), 0.02, 0.98)
    else:
        eta = rng.uniform(0.02, 0.98, len(Xs))
    P = np.column_stack([px * (1 - eta), px * eta])
    return P.reshape(tuple(sizes) + (2,))


def onehot(X, sizes):
    off = np.concatenate([[0], np.cumsum(sizes)])
    W = np.zeros((X.shape[0], off[-1]))
    for i in range(len(sizes)):
        W[np.arange(X.shape[0]), off[i] + X[:, i]] = 1.0
    return W


# ------------------------------------------------------------------------------ tests
def _problems():
    rng = np.random.default_rng(20240607)
    out = []
    kinds = ["separable", "steep", "random"]
    for k in range(24):
        dd = int(rng.integers(2, 6)) if k % 4 else 5
        sizes = tuple(int(rng.integers(2, 4)) for _ in range(dd))
        if k % 4 == 0:
            sizes = (3,) * dd if k % 8 == 0 else (2,) * dd
        kind = kinds[k % 3]
        out.append((kind, sizes, random_joint(rng, sizes, kind)))
    return out


PROBLEMS = _problems()


def witness_exists(P, f):
    """Is there p ∈ C_pairwise with P(Y=1|x) = 1/2 + f(x) wherever p(x) > 0 (an LP)?

    Such a p has Σ_x p0p1/(p0+p1) = E_p[(C − f)²] = γ, so it certifies θ = γ. Conversely,
    if θ = γ and the minimising f is unique on the domain, the maximiser of θ is such a p.
    """
    A = pairwise_constraints(P.shape[:-1])
    b = A @ P.reshape(-1)
    nx = f.size
    R = np.zeros((nx, 2 * nx))
    for i, fi in enumerate(f):
        if -0.5 <= fi <= 0.5:
            R[i, 2 * i + 1], R[i, 2 * i] = 0.5 - fi, -(0.5 + fi)
        else:
            R[i, 2 * i] = R[i, 2 * i + 1] = 1.0
    res = linprog(np.zeros(2 * nx), A_eq=np.vstack([A, R]), b_eq=np.concatenate([b, np.zeros(nx)]),
                  bounds=[(0, None)] * (2 * nx), method="highs")
    return res.status == 0


def test_gamma_vs_theta_brute_force():
    """γ ≥ θ always; γ = θ when the learner says separable; constructed-separable ⇒ separable.

    The h-condition of Theorem 3 is sufficient but not necessary: θ = γ also when the
    worst-case distribution puts no mass where 1/2 + f leaves [0, 1]. The exact criterion
    (for strictly positive joints, where f is unique) is the witness LP, checked both ways.
    """
    n_sep = n_nonsep = n_witness_only = 0
    strict_gap = 0.0
    for kind, sizes, P in PROBLEMS:
        S = summary_from_joint(P)
        m = RenyiClassifier().fit(S)
        gamma = float(m.gamma_[0])
        with _one_thread():
            lo, up = theta_oracle(P)
        f = m.decision_function(domain(sizes).astype(float))
        wit = witness_exists(P, f)
        if wit:
            assert abs(gamma - up) <= 1e-6, (sizes, kind, gamma, up)
            n_witness_only += not m.separable_
        if gamma - up > 1e-6:
            assert not wit
        if m.separable_:
            assert wit
        assert up - lo <= 1e-7, (sizes, kind, lo, up)
        assert gamma >= up - 1e-6, (sizes, kind, gamma, up)
        if kind == "separable":
            assert m.separable_, (sizes, gamma, lo)
        if m.separable_:
            n_sep += 1
            assert abs(gamma - lo) <= 1e-5 and abs(gamma - up) <= 1e-5, (sizes, kind, gamma, lo, up)
        else:
            n_nonsep += 1
            strict_gap = max(strict_gap, gamma - up)
    # the battery exercises both regimes, and non-separable problems can have γ > θ
    assert n_sep >= 8 and n_nonsep >= 3
    assert strict_gap > 1e-4
    assert n_witness_only >= 1  # the battery contains the "not h-separable yet θ = γ" case


def test_gamma_is_least_squares_on_full_joint():
    """γ = min_{b,z} E_p[(b + Wᵀz − C)²] by weighted least squares over the whole domain."""
    for kind, sizes, P in PROBLEMS[:12]:
        S = summary_from_joint(P)
        m = RenyiClassifier().fit(S)
        Xs = domain(sizes)
        W = np.column_stack([np.ones(len(Xs)), onehot(Xs, sizes)])
        # rows (x, y) with weight p(x, y), target C = ±1/2
        Wr = np.repeat(W, 2, axis=0)
        c = np.tile([-0.5, 0.5], len(Xs))
        w = P.reshape(-1)
        coef, *_ = np.linalg.lstsq(Wr * np.sqrt(w)[:, None], c * np.sqrt(w), rcond=None)
        mse = float(np.sum(w * (Wr @ coef - c) ** 2))
        assert abs(m.gamma_[0] - mse) <= 1e-10
        # and the fitted score is the least-squares fit on the (full-support) domain
        f = m.decision_function(Xs.astype(float))
        assert np.allclose(f, W @ coef, atol=1e-8)


def test_min_norm_solver_optimality():
    rng = np.random.default_rng(3)
    for kind, sizes, P in PROBLEMS[:10]:
        S = summary_from_joint(P)
        Q, d = Q_of(S), d_of(S)
        z = min_norm_solve(Q, d)
        lam, V = psd_eigh(Q)
        null = V[:, lam <= 1e-10 * lam.max()]
        # rank Q = Σ m_i − d + 1 (the design card's fact), d ∈ range(Q), and 2Qz = d there
        assert null.shape[1] == len(sizes) - 1
        assert np.allclose(2 * Q @ z, d, atol=1e-10)
        assert np.abs(null.T @ z).max() < 1e-9  # minimum norm: orthogonal to null(Q)
        val = quadratic_value(Q, d, z)
        for _ in range(20):
            assert quadratic_value(Q, d, z + rng.normal(0, 0.1, z.size)) >= val - 1e-12
        # ridge: 2(Q + rI)z = d exactly
        zr = min_norm_solve(Q, d, ridge=0.3)
        assert np.allclose(2 * (Q + 0.3 * np.eye(Q.shape[0])) @ zr, d, atol=1e-10)
        # centered problem: same γ as the paper's uncentered one (intercept in span)
        Qc, dc, const, _ = center_problem(Q, d, S.prior[1])
        zc = min_norm_solve(Qc, dc)
        assert abs((val + 0.25) - (const + quadratic_value(Qc, dc, zc))) < 1e-10


def test_certificate_two_gamma_brute_force():
    """The randomized rule's worst case over C_pairwise (an LP) is ≤ 2γ, for every option."""
    for kind, sizes, P in PROBLEMS[:10]:
        S = summary_from_joint(P)
        Xs = domain(sizes).astype(float)
        for kw in ({}, {"ridge": 0.05}, {"coding": "reference"}, {"features": ["x0"]}):
            m = RenyiClassifier(**kw).fit(S)
            wc = worst_case_error(P, m.predict_proba(Xs))
            assert wc <= m.training_bound_.value + 1e-9
            assert abs(m.training_bound_.value - 2 * m.gamma_[0]) < 1e-15
            assert m.certificate_.kind == "W(h)"  # the bound on the rule it predicts with is another number
        # the HGR bound holds for the true joint (a member of C): ρ(p̄) ≥ bound
        m = RenyiClassifier().fit(S)
        q = S.prior[1]
        rho = np.sqrt(max(0.0, 1 - harmonic(P.reshape(-1, 2)) / (q * (1 - q))))
        assert rho >= m.hgr_lower_bound_[0] - 1e-9


def test_rules_sign_and_rule7():
    for kind, sizes, P in PROBLEMS[:8]:
        S = summary_from_joint(P)
        m = RenyiClassifier().fit(S)
        Xs = domain(sizes).astype(float)
        f = m.decision_function(Xs)
        off = np.concatenate([[0], np.cumsum(sizes)])
        f_direct = m.intercept_[0] + sum(m.z_[0][off[i] + Xs[:, i].astype(int)] for i in range(len(sizes)))
        assert np.allclose(f, f_direct)
        assert np.array_equal(m.predict(Xs), (f > 0).astype(int))
        pr = m.predict_proba(Xs)
        assert np.allclose(pr.sum(axis=1), 1.0) and (pr >= 0).all()
        inside = np.abs(f) <= 0.5
        p1 = (0.5 + f) ** 2 / ((0.5 + f) ** 2 + (0.5 - f) ** 2)
        assert np.allclose(pr[inside, 1], p1[inside])
        assert np.allclose(pr[f > 0.5, 1], 1.0) and np.allclose(pr[f < -0.5, 1], 0.0)
        # normal equations of the least-squares fit under any member of C (here p̄):
        # E[W·2f(X)] = 2E[W·C] = d, i.e. "P̃(Y=1|x) = 1/2 + f" reproduces the first-order d
        Xi = domain(sizes)
        px = P.sum(axis=-1).reshape(-1)
        W = onehot(Xi, sizes)
        assert np.allclose(W.T @ (px * 2 * f), d_of(S), atol=1e-10)


def test_reference_coding_and_ridge():
    for kind, sizes, P in PROBLEMS[:8]:
        S = summary_from_joint(P)
        a = RenyiClassifier().fit(S)
        r = RenyiClassifier(coding="reference").fit(S)
        Xs = domain(sizes).astype(float)
        assert abs(a.gamma_[0] - r.gamma_[0]) < 1e-12
        assert np.allclose(a.decision_function(Xs), r.decision_function(Xs), atol=1e-9)
        assert a.separable_ == r.separable_
        # reference coding pins one level per feature at 0
        off = np.concatenate([[0], np.cumsum(sizes)])
        assert all(np.any(r.z_[0][off[i] : off[i + 1]] == 0.0) for i in range(len(sizes)))
        # a ridge can only raise γ, monotonically
        g = [RenyiClassifier(ridge=lam).fit(S).gamma_[0] for lam in (0.0, 0.01, 0.1, 1.0)]
        assert all(g[i] <= g[i + 1] + 1e-13 for i in range(3))
        assert g[0] == pytest.approx(a.gamma_[0])


def test_separable_lp_uses_the_whole_solution_set():
    """Never-seen levels leave z free; the LP finds a separable minimiser when z₀ fails."""
    rng = np.random.default_rng(11)
    sizes = (3, 3)
    P = random_joint(rng, sizes, "separable")
    P[2, :, :] = 0.0  # level 2 of x0 never occurs
    P /= P.sum()
    S = summary_from_joint(P)
    Q, d = Q_of(S), d_of(S)
    q1 = S.prior[1]
    Qc, dc, const, p = center_problem(Q, d, q1)
    lam, V = psd_eigh(Qc)
    z0 = min_norm_solve(Qc, dc, eig=(lam, V))
    b0 = (2 * q1 - 1) / 2 - p @ z0
    # push the unseen level far out: still a minimiser, no longer separable by itself
    zbad = z0.copy()
    zbad[2] = 5.0
    assert quadratic_value(Qc, dc, zbad) == pytest.approx(quadratic_value(Qc, dc, z0), abs=1e-12)
    N = V[:, lam <= 1e-10 * lam.max()]
    zs = separable_solution(zbad, b0, p, sizes, N)  # p[2] = 0: b unchanged
    assert zs is not None
    assert quadratic_value(Qc, dc, zs) == pytest.approx(quadratic_value(Qc, dc, z0), abs=1e-10)
    assert RenyiClassifier().fit(S).separable_


def test_summary_q_d_equal_rows():
    rng = np.random.default_rng(5)
    sizes = (3, 2, 4, 2)
    n = 500
    X = np.column_stack([rng.integers(0, m, n) for m in sizes])
    y = (X[:, 0] + X[:, 2] + rng.integers(0, 2, n) > 3).astype(int)
    cb = make_codebook(sizes)
    S = Summary.from_rows(cb, X.astype(float), y, stats="all")
    W = onehot(X, sizes)
    assert np.allclose(Q_of(S), W.T @ W / n)
    assert np.allclose(d_of(S), W.T @ (2 * y - 1) / n)
    # and the fitted γ is the in-sample least-squares MSE of C on [1, W]
    m = RenyiClassifier().fit(S)
    A = np.column_stack([np.ones(n), W])
    c = y - 0.5
    coef, *_ = np.linalg.lstsq(A, c, rcond=None)
    assert m.gamma_[0] == pytest.approx(np.mean((A @ coef - c) ** 2), abs=1e-12)
    assert np.allclose(m.decision_function(X), A @ coef, atol=1e-9)


def test_multiclass_one_vs_rest_certificate():
    rng = np.random.default_rng(8)
    for _ in range(4):
        sizes = (2, 3, 2)
        Xs = domain(sizes)
        px = rng.dirichlet(np.ones(len(Xs)))
        py = rng.dirichlet(np.ones(3), size=len(Xs))
        P = (px[:, None] * py).reshape(sizes + (3,))
        S = summary_from_joint(P)
        m = RenyiClassifier().fit(S)
        assert m.z_.shape == (3, sum(sizes)) and m.gamma_.shape == (3,)
        for c in range(3):
            # each γ_c is the least-squares value of the c-vs-rest problem
            W = np.column_stack([np.ones(len(Xs)), onehot(Xs, sizes)])
            Wr = np.repeat(W, 3, axis=0)
            t = np.tile(np.where(np.arange(3) == c, 0.5, -0.5), len(Xs))
            w = P.reshape(-1)
            coef, *_ = np.linalg.lstsq(Wr * np.sqrt(w)[:, None], t * np.sqrt(w), rcond=None)
            assert m.gamma_[c] == pytest.approx(float(np.sum(w * (Wr @ coef - t) ** 2)), abs=1e-10)
        pr = m.predict_proba(Xs.astype(float))
        assert np.allclose(pr.sum(axis=1), 1.0) and (pr >= 0).all()
        assert np.array_equal(m.predict(Xs.astype(float)), np.argmax(m.decision_function(Xs.astype(float)), axis=1))
        wc = worst_case_error(P, pr)
        assert wc <= m.training_bound_.value + 1e-9


def test_json_roundtrip_and_errors():
    kind, sizes, P = PROBLEMS[1]
    S = summary_from_joint(P)
    m = RenyiClassifier(ridge=0.01).fit(S)
    m2 = RenyiClassifier.from_dict(json.loads(json.dumps(m.to_dict())))
    Xs = domain(sizes).astype(float)
    assert np.array_equal(m.predict_proba(Xs), m2.predict_proba(Xs))
    assert m2.worst_case_error_ == m.worst_case_error_ and m2.feature_names_in_ == m.feature_names_in_
    assert m2.certificate_ == m.certificate_ and m2.training_bound_ == m.training_bound_
    bad = m.to_dict()
    bad["state"]["z"] = [[0.0]]
    with pytest.raises(InputError, match="malformed"):
        RenyiClassifier.from_dict(bad)
    with pytest.raises(InputError, match="not fitted"):
        RenyiClassifier().predict(Xs)
    Xbad = Xs.copy()
    Xbad[3, 0] = sizes[0]
    with pytest.raises(InputError, match="x0"):
        m.predict(Xbad)
    with pytest.raises(InputError, match="nope"):
        RenyiClassifier(features=["nope"]).fit(S)
    # raw numeric features are refused by name
    cb = Codebook(
        features=(CategoricalFeature("a", ("0", "1")), NumericFeature("age", lo=0.0, hi=100.0)),
        label=Label("y", ("n", "p")),
    )
    Xr = np.array([[0, 30.0], [1, 50.0], [1, 20.0], [0, 70.0]])
    Sr = Summary.from_rows(cb, Xr, np.array([0, 1, 1, 0]), stats="all")
    with pytest.raises(InputError, match="'age'"):
        RenyiClassifier().fit(Sr)
    assert RenyiClassifier(features=["a"]).fit(Sr).feature_names_in_ == ["a"]


def test_feature_subset_equals_subcodebook_fit_and_empty():
    kind, sizes, P = PROBLEMS[4]
    S = summary_from_joint(P)
    keep = [1, len(sizes) - 1]
    m = RenyiClassifier(features=[f"x{i}" for i in keep]).fit(S)
    Psub = P.sum(axis=tuple(i for i in range(len(sizes)) if i not in keep))
    m2 = RenyiClassifier().fit(summary_from_joint(Psub))
    assert m.gamma_[0] == pytest.approx(m2.gamma_[0], abs=1e-12)
    Xs = domain(sizes).astype(float)
    assert np.allclose(m.decision_function(Xs), m2.decision_function(Xs[:, keep]))
    e = RenyiClassifier(features=[]).fit(S)
    q = S.prior[1]
    assert e.gamma_[0] == pytest.approx(q * (1 - q)) and e.hgr_lower_bound_[0] == 0.0
    assert np.allclose(e.decision_function(Xs), q - 0.5)


def test_default_features_are_those_whose_pairs_were_all_released():
    """Round 2 of the two-round protocol released the pairs of some features only: Rényi (and
    the selection problem) fit on exactly those, equal to asking for them by name, and say
    which were left out; pairs that miss one of their own features' pairs, or no pair at all,
    are one-line errors naming what is missing."""
    from itertools import combinations

    from marg.learners.selection.select import selection_problem
    from tests.conftest import random_codebook, random_rows

    rng = np.random.default_rng(5)
    cb = random_codebook(rng, n_features=5)
    X, y = random_rows(rng, cb, 400)
    req = ["f1", "f3", "f4"]
    S = Summary.from_rows(cb, X, y, "pairs", list(combinations(req, 2)))
    m = RenyiClassifier().fit(S)
    named = RenyiClassifier(features=req).fit(S)
    assert m.feature_names_in_ == req and m.unpaired_ == ["f0", "f2"] and named.unpaired_ == []
    np.testing.assert_array_equal(m.z_, named.z_)
    assert m.report()["unpaired_features"] == ["f0", "f2"]
    assert RenyiClassifier.from_dict(json.loads(json.dumps(m.to_dict()))).unpaired_ == ["f0", "f2"]
    assert selection_problem(S).names == req
    full = RenyiClassifier().fit(Summary.from_rows(cb, X, y, "all"))
    assert full.feature_names_in_ == cb.feature_names and full.unpaired_ == []
    gappy = Summary.from_rows(cb, X, y, "pairs", [("f1", "f3"), ("f3", "f4")])
    with pytest.raises(InputError, match=r"^Q needs the pair table of 'f1' and 'f4' \(the 3 features of the released"):
        RenyiClassifier().fit(gappy)
    with pytest.raises(InputError, match=r"first-order tables only; export with --stats all, or run the two-round"):
        RenyiClassifier().fit(Summary.from_rows(cb, X, y, "first"))


def test_real_dataset_house_votes():
    root = Path(__import__("os").environ.get("MARG_DATASETS",
                                             Path(__file__).resolve().parents[4] / "shared" / "datasets"))
    path = root / "house-votes-84" / "house-votes-84.tsv.gz"
    if not path.exists():
        pytest.skip("house-votes-84 not available")
    import gzip

    with gzip.open(path, "rt") as fh:
        rows = [line.rstrip("\n").split("\t") for line in fh]
    data = np.array(rows[1:], dtype=float).astype(int)  # rows[0] is the header
    X, y = data[:, :-1], data[:, -1]
    sizes = [3] * X.shape[1]
    cb = make_codebook(sizes)
    rng = np.random.default_rng(0)
    perm = rng.permutation(len(y))
    tr, te = perm[: int(0.7 * len(y))], perm[int(0.7 * len(y)) :]
    S = Summary.from_rows(cb, X[tr].astype(float), y[tr], stats="all")
    m = RenyiClassifier(ridge=1e-3).fit(S)
    err = float(np.mean(m.predict(X[te].astype(float)) != y[te]))
    # paper's table: 3% (MAP) on votes; in-sample certificate 2γ holds for the training
    # distribution (a member of C): randomized training error ≤ 2γ
    pr = m.predict_proba(X[tr].astype(float))
    train_rand_err = float(np.mean(1.0 - pr[np.arange(len(tr)), y[tr]]))
    assert train_rand_err <= m.training_bound_.value + 1e-12
    assert err < 0.1


def first_order_worst_case(P, pred, box):
    """max P_p(pred(X) ≠ Y) over joints p with every (x_i, y) table within the box records (an LP)."""
    sizes, K = P.shape[:-1], P.shape[-1]
    shape = tuple(sizes) + (K,)
    idx = np.arange(int(np.prod(shape))).reshape(shape)
    A, lo, hi = [], [], []
    for rec in box:
        i = int(rec["features"][0][1:])
        for k, (a, c) in enumerate(itertools.product(range(sizes[i]), range(K))):
            row = np.zeros(idx.size)
            row[np.take(np.take(idx, a, axis=i), c, axis=-1).ravel()] = 1.0
            A.append(row)
            lo.append(rec["lower"][k])
            hi.append(rec["upper"][k])
    A = np.array(A)
    err = (np.arange(K)[None, :] != pred[:, None]).astype(float).ravel()  # C order: x major, y minor
    lp = linprog(-err, A_ub=np.vstack([A, -A]), b_ub=np.concatenate([hi, -np.array(lo)]),
                 A_eq=np.ones((1, idx.size)), b_eq=[1.0], bounds=[(0, None)] * idx.size, method="highs")
    assert lp.status == 0
    return -lp.fun


def test_first_order_certificate_bounds_the_exact_worst_case():
    """certify="first": W_L over the first-order box ≥ W(h) over it (an LP over the whole joint domain)
    ≥ the MAP rule's error under the true joint, which the box of exact tables contains."""
    for kind, sizes, P in PROBLEMS[:6]:
        S = summary_from_joint(P, n=200.0)
        Xs = domain(sizes).astype(float)
        m = RenyiClassifier(certify="first").fit(S)
        pred = m.predict(Xs).astype(int)
        box = m.certificate_.box
        assert len(box) == len(sizes) and all(len(r["features"]) == 2 for r in box)  # first-order tables only
        oracle = first_order_worst_case(P, pred, box)
        true_err = float(np.sum(P.reshape(-1, 2)[np.arange(len(pred)), 1 - pred]))
        assert m.certificate_.value >= oracle - 1e-7 >= true_err - 2e-7
        assert oracle > true_err + 1e-3  # the box is wider than the truth: a bound, not the error itself


def test_sampling_ridge_is_the_noise_rule_with_the_sampling_std():
    """sampling_ridge = RIDGE_PER_NOISE · σ_S · √M, σ_S² the mean over pair cells of different features of
    q(1 − q)/n with q = p_ia · p_jb (two features of 2 and 3 levels, by hand); it shrinks as 1/√n."""
    from marg.learners.classifiers.renyi_summary import RIDGE_PER_NOISE, sampling_ridge

    P = np.zeros((2, 3, 2))
    P[..., 0] = [[0.1, 0.2, 0.1], [0.05, 0.05, 0.1]]
    P[..., 1] = [[0.1, 0.05, 0.05], [0.1, 0.05, 0.05]]
    p0, p1 = P.sum(axis=(1, 2)), P.sum(axis=(0, 2))
    q = np.outer(p0, p1).ravel()
    for n in (100.0, 400.0):
        S = summary_from_joint(P, n=n)
        want = RIDGE_PER_NOISE * np.sqrt(np.mean(q * (1 - q)) / n) * np.sqrt(5)
        assert sampling_ridge(S, ["x0", "x1"]) == pytest.approx(want, rel=1e-12)
    assert sampling_ridge(S, []) == 0.0
