"""Post-processing: consistent shared marginals (inverse-variance pooled, L2-nearest
adjustment), non-negative tables with the pooled total kept, and a PSD Q (KKT of the
Frobenius projection)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label
from marg.marginals.postprocess import (
    consistency_gap,
    make_consistent,
    nearest_psd,
    ipf,
    postprocess_tables,
)
from marg.marginals.privacy import privatize
from marg.marginals.summary import Summary
from marg.marginals.counts.counting import count_tables
from marg.marginals.counts.tables import plan_cliques
from tests.helpers.quantities import Q_of


def _cb(levels=(3, 2, 4, 2)):
    return Codebook(
        features=tuple(CategoricalFeature(f"f{i}", tuple(str(j) for j in range(m))) for i, m in enumerate(levels)),
        label=Label("y", ("0", "1")),
    )


def _data(cb, n, seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    cols = []
    for f in cb.features:  # features depend on y so tables are not uniform
        p = rng.dirichlet(np.ones(f.n_levels), size=2)
        cols.append(np.array([rng.choice(f.n_levels, p=p[c]) for c in y], dtype=float))
    return np.column_stack(cols), y


def _noisy(seed, epsilon=1.0, n=400, stats="all", cb=None):
    cb = cb or _cb()
    X, y = _data(cb, n, seed)
    exact = count_tables(cb, X, y, plan_cliques(cb, stats))
    noisy, _ = privatize(exact, epsilon=epsilon, codebook=cb)
    return cb, exact, noisy


@pytest.mark.parametrize("seed,epsilon", [(0, 0.3), (1, 1.0), (2, 5.0)])
def test_postprocessed_tables_are_consistent_nonnegative_and_share_the_total(seed, epsilon):
    cb, exact, noisy = _noisy(seed, epsilon)
    assert consistency_gap(noisy) > 1.0  # raw noisy tables disagree
    out = postprocess_tables(noisy)
    totals = np.array([t.counts.sum() for t in out])
    n_hat = totals[0]
    assert np.all(np.abs(totals - n_hat) <= 1e-6 * n_hat)
    assert consistency_gap(out) <= 1e-6 * n_hat
    assert all(t.counts.min() >= 0.0 for t in out)
    assert [t.clique for t in out] == [t.clique for t in noisy]
    assert [t.noise for t in out] == [t.noise for t in noisy]
    # the learner can build its Summary and Q from the result
    s = Summary.from_tables(cb, out)
    assert s.n == pytest.approx(n_hat)
    assert np.all(np.linalg.eigvalsh(nearest_psd(Q_of(s))) >= -1e-10)


def test_exact_tables_pass_unchanged_and_anchor_noisy_ones():
    cb, exact, noisy = _noisy(3, 0.5)
    out = postprocess_tables(exact)
    assert all(a is b for a, b in zip(out, exact))
    # exact first-order tables + noisy pair tables: pairs are moved onto the exact margins
    mixed = [e if len(e.clique) <= 2 else z for e, z in zip(exact, noisy)]
    out = postprocess_tables(mixed)
    for e, o in zip(mixed, out):
        if len(e.clique) <= 2:
            np.testing.assert_allclose(o.counts, e.counts, atol=1e-9)
        else:
            a, b, lab = o.clique
            ea = [t for t in exact if t.clique == (a, lab)][0]
            np.testing.assert_allclose(o.marginal((a, lab)), ea.counts, atol=1e-6)


def test_pooled_margin_is_the_inverse_variance_weighted_mean():
    # two tables share the label; no negatives, so one consistency pass is the whole story
    rng = np.random.default_rng(4)
    A = rng.uniform(50, 100, size=(3, 2))
    B = rng.uniform(50, 100, size=(4, 5, 2))
    sa, sb = 2.0, 0.5
    out = make_consistent([A.copy(), B.copy()], [("a", "y"), ("b", "c", "y")], np.array([sa**2, sb**2]))
    # Var of a margin cell: σ² · (cells summed) ∝ σ²|T|; weights ∝ 1/(σ²|T|)
    wa, wb = 1 / (sa**2 * A.size), 1 / (sb**2 * B.size)
    # level 0 (total) then level 1 (label): the label margin equals the weighted mean
    ma, mb = A.sum(0), B.sum((0, 1))
    ta, tb = A.sum(), B.sum()
    t_hat = (wa * ta + wb * tb) / (wa + wb)
    ma2 = ma + (t_hat - ta) / 2  # after the total step each table's label margin moves evenly
    mb2 = mb + (t_hat - tb) / 2
    target = (wa * ma2 + wb * mb2) / (wa + wb)
    np.testing.assert_allclose(out[0].sum(0), target, rtol=1e-12)
    np.testing.assert_allclose(out[1].sum((0, 1)), target, rtol=1e-12)
    assert out[0].sum() == pytest.approx(t_hat)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000))
def test_adjustment_is_the_least_squares_change_with_the_target_margin(seed):
    # table T (a, b, y) moved to an exact margin N[a, y]: compare with the KKT solution of
    # min ||T' − T||² s.t. margin_{a,y}(T') = M
    rng = np.random.default_rng(seed)
    ma, mb = int(rng.integers(2, 4)), int(rng.integers(2, 4))
    M = rng.uniform(20, 60, size=(ma, 2))
    T = rng.uniform(0, 30, size=(ma, mb, 2))
    out = make_consistent([M.copy(), T.copy()], [("a", "y"), ("a", "b", "y")], np.array([0.0, 1.0]))
    np.testing.assert_allclose(out[0], M)
    # KKT: A T' = M, T' = T + Aᵀ ν
    A = np.zeros((ma * 2, T.size))
    for i in range(ma):
        for c in range(2):
            sel = np.zeros(T.shape)
            sel[i, :, c] = 1
            A[i * 2 + c] = sel.ravel()
    nu = np.linalg.solve(A @ A.T, M.ravel() - A @ T.ravel())
    ref = T.ravel() + A.T @ nu
    np.testing.assert_allclose(out[1].ravel(), ref, rtol=1e-10, atol=1e-9)


def test_postprocessing_reduces_error_on_average():
    cb = _cb((3, 3, 2))
    X, y = _data(cb, 600, 5)
    exact = count_tables(cb, X, y, plan_cliques(cb, "all"))
    raw_err = pp_err = 0.0
    n_err = []
    for _ in range(100):
        noisy, _ = privatize(exact, epsilon=1.0, codebook=cb)
        out = postprocess_tables(noisy)
        raw_err += sum(float(np.sum((z.counts - e.counts) ** 2)) for z, e in zip(noisy, exact))
        pp_err += sum(float(np.sum((o.counts - e.counts) ** 2)) for o, e in zip(out, exact))
        n_err.append(out[0].counts.sum() - 600)
    assert pp_err < 0.8 * raw_err
    # the pooled n stays close to the truth (the non-negativity step keeps the total). The noise is
    # OpenDP's (unseeded): with 100 releases |mean| / SE is t-distributed with 99 degrees of freedom,
    # so an unbiased total fails 7 SE with probability < 1e-9 (15 releases at 4 SE failed 1 run in ~4,000).
    assert abs(np.mean(n_err)) < 7 * np.std(n_err, ddof=1) / np.sqrt(len(n_err)) + 2.0


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000))
def test_ipf_meets_margins_with_multiplicative_form(seed):
    # The KL projection of a positive start onto {row sums = r, column sums = c} has the
    # form T_ij = start_ij · a_i · b_j: log(T/start) is additive in (i, j).
    rng = np.random.default_rng(seed)
    m1, m2 = int(rng.integers(2, 6)), int(rng.integers(2, 6))
    start = rng.uniform(0.1, 5, size=(m1, m2))
    truth = rng.uniform(0.5, 10, size=(m1, m2))
    r, c = truth.sum(1), truth.sum(0)
    T = ipf(start, ("a", "b"), {frozenset({"a"}): r, frozenset({"b"}): c}, tol=1e-13)
    np.testing.assert_allclose(T.sum(1), r, rtol=1e-10)
    np.testing.assert_allclose(T.sum(0), c, rtol=1e-10)
    L = np.log(T / start)
    np.testing.assert_allclose(L - L[:, :1] - L[:1, :] + L[0, 0], 0.0, atol=1e-8)
    # a 3-way table fitted to its (a, y) and (b, y) margins (targets in sorted-name order)
    start3 = rng.uniform(0.1, 5, size=(m1, m2, 2))
    tr3 = rng.uniform(0.5, 10, size=(m1, m2, 2))
    T3 = ipf(start3, ("b", "a", "y"), {frozenset({"a", "y"}): tr3.sum(0), frozenset({"b", "y"}): tr3.sum(1)}, tol=1e-13)
    np.testing.assert_allclose(T3.sum(1), tr3.sum(1), rtol=1e-9)
    np.testing.assert_allclose(T3.sum(0), tr3.sum(0), rtol=1e-9)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000))
def test_nearest_psd_satisfies_projection_optimality(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(2, 8))
    Q = rng.normal(size=(m, m))
    X = nearest_psd(Q)
    S = (Q + Q.T) / 2
    assert np.allclose(X, X.T)
    assert np.linalg.eigvalsh(X).min() >= -1e-10
    R = S - X
    assert np.linalg.eigvalsh(R).max() <= 1e-10  # S − X ⪯ 0
    assert np.abs(R @ X).max() <= 1e-9  # complementarity
    # no random PSD matrix is closer
    for _ in range(20):
        G = rng.normal(size=(m, m))
        P = X + 0.1 * G @ G.T
        assert np.linalg.norm(S - P) >= np.linalg.norm(S - X) - 1e-12
    Ppsd = rng.normal(size=(m, m))
    Ppsd = Ppsd @ Ppsd.T
    np.testing.assert_allclose(nearest_psd(Ppsd), Ppsd, atol=1e-12)


def test_noisy_q_is_indefinite_and_projection_fixes_it():
    cb = _cb((4, 4, 3, 3, 2))
    found_indefinite = False
    for seed in range(6):
        _, _, noisy = _noisy(seed, epsilon=0.5, n=300, cb=cb)
        Q = Q_of(Summary.from_tables(cb, noisy, postprocess=False))
        found_indefinite |= np.linalg.eigvalsh((Q + Q.T) / 2).min() < -1e-6
        Qp = nearest_psd(Q_of(Summary.from_tables(cb, postprocess_tables(noisy))))
        assert np.linalg.eigvalsh(Qp).min() >= -1e-10
    assert found_indefinite


def test_moment_tables_pass_through():
    from marg.marginals.data.codebook import NumericFeature

    cb = Codebook(features=(NumericFeature("v", lo=0, hi=10), CategoricalFeature("a", ("0", "1"))),
                  label=Label("y", ("0", "1")))
    rng = np.random.default_rng(7)
    X = np.column_stack([rng.uniform(0, 10, 100), rng.integers(0, 2, 100)])
    y = rng.integers(0, 2, 100)
    noisy, _ = privatize(count_tables(cb, X, y, plan_cliques(cb, "first")), epsilon=1.0, codebook=cb)
    out = postprocess_tables(noisy)
    for a, b in zip(noisy, out):
        if a.kind == "moments":
            assert b is a
    assert consistency_gap(out) <= 1e-6 * out[0].counts.sum()
