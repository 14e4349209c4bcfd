import numpy as np
import pytest

from marg.errors import InputError
from marg.marginals.summary import Summary, sum_tables
from marg.marginals.counts.counting import count_tables
from marg.marginals.counts.tables import plan_cliques
from tests.helpers.quantities import tau_of, tau_std_of, Q_of, d_of
from tests.conftest import random_codebook, random_rows


def onehot(cb, X):
    cols = []
    for i, f in enumerate(cb.features):
        if f.is_discrete:
            cols.append(np.eye(f.n_levels)[X[:, i].astype(int)])
        else:
            cols.append(X[:, [i]])
    return np.hstack(cols)


@pytest.mark.parametrize("seed", range(4))
def test_tau_Q_d_equal_direct_computation(seed):
    rng = np.random.default_rng(seed)
    cb = random_codebook(rng, n_features=4, max_levels=3, n_classes=2, numeric=1)
    X, y = random_rows(rng, cb, 500)
    s = Summary.from_rows(cb, X, y, stats="all")
    Psi = onehot(cb, X)  # (n, D)
    K = cb.n_classes
    Y = np.eye(K)[y]
    tau = (Y.T @ Psi) / len(y)  # E[1{Y=y} Ψ]
    np.testing.assert_allclose(tau_of(s), tau, atol=1e-12)
    second = (Y.T @ Psi**2) / len(y)
    np.testing.assert_allclose(tau_std_of(s), np.sqrt(second - tau**2), atol=1e-12)
    disc = [i for i, f in enumerate(cb.features) if f.is_discrete]
    Z = onehot(cb.subset([cb.features[i].name for i in disc]), X[:, disc])
    np.testing.assert_allclose(Q_of(s), Z.T @ Z / len(y), atol=1e-12)
    sign = np.where(y == 1, 1.0, -1.0)
    np.testing.assert_allclose(d_of(s), Z.T @ sign / len(y), atol=1e-12)
    # Q is singular with rank Σ m_i − d + 1 (generic data).
    m = [cb.features[i].n_levels for i in disc]
    assert np.linalg.matrix_rank(Q_of(s)) == sum(m) - len(m) + 1
    np.testing.assert_allclose(s.prior, np.bincount(y, minlength=K) / len(y))


def test_one_vs_rest_d(rng):
    cb = random_codebook(rng, n_features=3, n_classes=3)
    X, y = random_rows(rng, cb, 400)
    s = Summary.from_rows(cb, X, y, stats="all")
    Z = onehot(cb, X)
    for c in range(3):
        np.testing.assert_allclose(d_of(s, c), Z.T @ np.where(y == c, 1.0, -1.0) / len(y), atol=1e-12)
    with pytest.raises(InputError, match="positive class"):
        d_of(s)


def test_two_halves_aggregate_to_the_whole(rng):
    cb = random_codebook(rng, n_features=5, max_levels=4, n_classes=3, numeric=1)
    X, y = random_rows(rng, cb, 1001)
    plan = plan_cliques(cb, "all")
    whole = count_tables(cb, X, y, plan)
    a = count_tables(cb, X[:400], y[:400], plan)
    b = count_tables(cb, X[400:], y[400:], plan)
    summed, dropped = sum_tables([a, b])
    assert dropped == []
    for t, u in zip(summed, whole):
        assert t.clique == u.clique
        if t.kind == "counts":
            np.testing.assert_array_equal(t.counts, u.counts)
        else:  # float sums: equal up to summation order
            np.testing.assert_allclose(t.counts, u.counts, rtol=1e-12)
    sw = Summary(cb, whole)
    ss = Summary(cb, summed)
    np.testing.assert_allclose(tau_of(ss), tau_of(sw), rtol=1e-12)
    np.testing.assert_array_equal(Q_of(ss), Q_of(sw))


def test_missing_pairs_and_restrict(rng):
    cb = random_codebook(rng, n_features=3)
    X, y = random_rows(rng, cb, 100)
    s = Summary.from_rows(cb, X, y, stats="first")
    with pytest.raises(InputError, match="Q needs the pair table of 'f0' and 'f1'"):
        Q_of(s)
    s2 = Summary.from_rows(cb, X, y, stats="pairs", pairs=[("f0", "f2")])
    assert s2.pairs == [(0, 2)]
    r = s2.restrict(["f2", "f0"])
    assert r.feature_names == ["f0", "f2"]
    assert r.fingerprint == cb.fingerprint
    np.testing.assert_allclose(Q_of(r), Q_of(Summary.from_rows(cb.subset(["f0", "f2"]), X[:, [0, 2]], y, "all")))


def test_summary_requires_first_order_tables(rng):
    cb = random_codebook(rng, n_features=2)
    X, y = random_rows(rng, cb, 50)
    tables = count_tables(cb, X, y, [("y",), ("f0", "y")])
    with pytest.raises(InputError, match="feature 'f1' has no first-order table"):
        Summary(cb, tables)
