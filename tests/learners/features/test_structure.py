"""DCC structure: conditional mutual information from pair tables, maximum spanning forests.

Oracles: I(X_i; X_j | Y) recomputed from the rows with another formula
(Σ_y p(y) KL(p(a,b|y) ‖ p(a|y)p(b|y))); the maximum-weight forest (with or without an edge
cap) found by enumerating every edge subset of a graph on ≤ 5 nodes.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from marg.learners.features.structure import (
    UnionFind,
    chow_liu_forest,
    conditional_mutual_information,
    label_information,
    max_spanning_forest,
    pair_label_information,
    pair_weights,
)
from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label, NumericFeature
from marg.errors import InputError
from marg.marginals.counts.noise import NoiseRecord
from marg.marginals.summary import Summary
from marg.marginals.counts.tables import MarginalTable


def random_rows(rng, levels, K, n):
    """Rows with dependence between features (a latent chain), codes and labels."""
    y = rng.integers(0, K, n)
    cols = []
    prev = y.copy()
    for m in levels:
        noise = rng.integers(0, m, n)
        keep = rng.random(n) < 0.6
        col = np.where(keep, prev % m, noise)
        cols.append(col)
        prev = col + rng.integers(0, 2, n)
    return np.column_stack(cols).astype(float), y


def codebook(levels, K, numeric=()):
    feats = [CategoricalFeature(f"f{i}", tuple(f"l{a}" for a in range(m))) for i, m in enumerate(levels)]
    feats += [NumericFeature(f"x{k}", lo=lo, hi=hi) for k, (lo, hi) in enumerate(numeric)]
    return Codebook(features=tuple(feats), label=Label("y", tuple(f"c{k}" for k in range(K))))


def cmi_from_rows(a, b, y):
    """Σ_y p(y) Σ_{a,b} p(a,b|y) log(p(a,b|y) / (p(a|y) p(b|y))), by explicit loops."""
    n = len(y)
    total = 0.0
    for c in np.unique(y):
        sel = y == c
        ny = sel.sum()
        ay, by = a[sel], b[sel]
        for u in np.unique(ay):
            for v in np.unique(by):
                nab = np.sum((ay == u) & (by == v))
                if nab == 0:
                    continue
                pab = nab / ny
                pa = np.sum(ay == u) / ny
                pb = np.sum(by == v) / ny
                total += (ny / n) * pab * np.log(pab / (pa * pb))
    return total


# ---------------------------------------------------------------- conditional MI


def test_cmi_from_tables_equals_direct_computation_from_rows():
    rng = np.random.default_rng(0)
    for t in range(6):
        levels = [int(rng.integers(2, 4)) for _ in range(4)]
        K = 2 + t % 2
        X, y = random_rows(rng, levels, K, 400)
        S = Summary.from_rows(codebook(levels, K), X, y, stats="all")
        w = pair_weights(S)
        assert sorted(w) == sorted(itertools.combinations(range(4), 2))
        for (i, j), v in w.items():
            assert abs(v - cmi_from_rows(X[:, i], X[:, j], y)) < 1e-12


def test_cmi_is_zero_exactly_under_conditional_independence_and_symmetric():
    rng = np.random.default_rng(1)
    for _ in range(10):
        ma, mb, K = rng.integers(2, 5, 3)
        py = rng.dirichlet(np.ones(K))
        pa = rng.dirichlet(np.ones(ma), size=K)  # (K, ma)
        pb = rng.dirichlet(np.ones(mb), size=K)
        P = np.einsum("k,ka,kb->abk", py, pa, pb)
        assert abs(conditional_mutual_information(P)) < 1e-12
        Q = rng.dirichlet(np.ones(ma * mb * K)).reshape(ma, mb, K)
        v = conditional_mutual_information(Q)
        assert v > 0
        assert abs(v - conditional_mutual_information(Q.transpose(1, 0, 2))) < 1e-12
        # invariant to relabelling levels, and to scaling (counts vs probabilities)
        Qp = Q[rng.permutation(ma)][:, rng.permutation(mb)]
        assert abs(v - conditional_mutual_information(Qp)) < 1e-12
        assert abs(v - conditional_mutual_information(1234.5 * Q)) < 1e-12
        # I(A;B|Y) ≤ min(H(A|Y), H(B|Y))
        pay = Q.sum(axis=1)
        hay = -np.sum(pay * np.log(pay / pay.sum(axis=0, keepdims=True)))
        assert v <= hay + 1e-12


def test_cmi_of_noisy_table_clips_negative_cells():
    rng = np.random.default_rng(2)
    Q = rng.dirichlet(np.ones(18)).reshape(3, 3, 2) * 100
    N = Q.copy()
    N[0, 0, 0] = -3.0  # a noisy release can go negative
    C = N.copy()
    C[0, 0, 0] = 0.0
    assert abs(conditional_mutual_information(N) - conditional_mutual_information(C)) < 1e-15
    assert conditional_mutual_information(np.zeros((2, 2, 2))) == 0.0
    with pytest.raises(InputError, match="3-way"):
        conditional_mutual_information(np.ones((2, 2)))
    bad = Q.copy()
    bad[1, 1, 1] = np.nan
    with pytest.raises(InputError, match="NaN"):
        conditional_mutual_information(bad)


def test_pair_weights_only_for_released_discrete_pairs():
    rng = np.random.default_rng(3)
    levels = [2, 3, 2, 3]
    X, y = random_rows(rng, levels, 2, 300)
    Xn = np.column_stack([X, rng.uniform(0, 1, 300)])
    cb = codebook(levels, 2, numeric=[(0.0, 1.0)])
    S = Summary.from_rows(cb, Xn, y, stats="pairs", pairs=[("f0", "f2"), ("f1", "f3")])
    w = pair_weights(S)
    assert sorted(w) == [(0, 2), (1, 3)]
    assert sorted(pair_weights(S, features=["f0", "f2", "f3"])) == [(0, 2)]
    edges, w2 = chow_liu_forest(S)
    assert set(edges) <= set(w2) and w2 == w
    S1 = Summary.from_rows(cb, Xn, y, stats="first")
    assert pair_weights(S1) == {} and chow_liu_forest(S1)[0] == []


# ------------------------------------------------------------ spanning forests


def is_forest(n, edges):
    uf = UnionFind(n)
    return all(uf.union(a, b) for a, b in edges)


def brute_best_forest(n, weights, cap):
    items = list(weights.items())
    best = 0.0
    for r in range(len(items) + 1):
        if cap is not None and r > cap:
            break
        for sub in itertools.combinations(items, r):
            es = [e for e, _ in sub]
            if is_forest(n, es):
                best = max(best, sum(w for _, w in sub))
    return best


def test_kruskal_forest_is_maximum_by_enumeration():
    rng = np.random.default_rng(4)
    for t in range(25):
        n = int(rng.integers(2, 6))
        pairs = list(itertools.combinations(range(n), 2))
        keep = [p for p in pairs if rng.random() < 0.8]
        # include ties and non-positive weights
        weights = {p: float(rng.choice([rng.normal(), 0.0, 0.5, -0.3])) for p in keep}
        for cap in [None, 0, 1, 2, 3]:
            F = max_spanning_forest(n, weights, cap)
            assert is_forest(n, F)
            assert all(weights[e] > 0 for e in F)
            if cap is not None:
                assert len(F) <= cap
            total = sum(weights[e] for e in F)
            assert abs(total - brute_best_forest(n, weights, cap)) < 1e-12, (n, weights, cap, F)
            # heaviest first
            assert all(weights[a] >= weights[b] for a, b in zip(F, F[1:]))


def test_spanning_tree_when_all_weights_positive():
    rng = np.random.default_rng(5)
    n = 7
    w = {p: float(rng.uniform(0.1, 1.0)) for p in itertools.combinations(range(n), 2)}
    F = max_spanning_forest(n, w)
    assert len(F) == n - 1 and is_forest(n, F)
    # also accepted as (i, j, w) triples, in either orientation
    F2 = max_spanning_forest(n, [(b, a, v) for (a, b), v in w.items()])
    assert F2 == F


def test_forest_input_errors():
    with pytest.raises(InputError, match="distinct"):
        max_spanning_forest(3, {(1, 1): 1.0})
    with pytest.raises(InputError, match="distinct"):
        max_spanning_forest(3, {(0, 3): 1.0})
    with pytest.raises(InputError, match="given twice"):
        max_spanning_forest(3, [(0, 1, 1.0), (1, 0, 2.0)])
    with pytest.raises(InputError, match="max_edges"):
        max_spanning_forest(3, {(0, 1): 1.0}, max_edges=-1)
    with pytest.raises(InputError, match="non-finite"):
        max_spanning_forest(3, {(0, 1): float("nan")})


def test_noisy_summary_weights_are_finite():
    """Pair tables with Gaussian-noise records (negative cells) still give finite, ≥ 0 weights."""
    rng = np.random.default_rng(6)
    levels, K = [3, 3, 2], 2
    cb = codebook(levels, K)
    X, y = random_rows(rng, levels, K, 200)
    S0 = Summary.from_rows(cb, X, y, stats="all")
    rec = NoiseRecord(mechanism="gaussian", scale=2.0, std=2.0, epsilon=1.0, delta=1e-6, rho=0.1)
    tables = []
    for t in S0.tables:
        noisy = t.counts + rng.normal(0, 2.0, t.counts.shape)
        tables.append(MarginalTable(t.clique, noisy, noise=rec, kind=t.kind))
    S = Summary.from_tables(cb, tables)
    w = pair_weights(S)
    assert len(w) == 3 and all(np.isfinite(v) and v >= 0 for v in w.values())


def test_label_information_equals_direct_computation_from_rows():
    """I(X_i, X_j; Y) from the pair table = Σ p(a,b,y) log(p(y|a,b)/p(y)) counted from rows."""
    rng = np.random.default_rng(7)
    levels, K = [3, 2, 3], 3
    X, y = random_rows(rng, levels, K, 500)
    S = Summary.from_rows(codebook(levels, K), X, y, stats="all")
    info = pair_label_information(S)
    assert sorted(info) == [(0, 1), (0, 2), (1, 2)]
    for (i, j), v in info.items():
        direct = 0.0
        for a in np.unique(X[:, i]):
            for b in np.unique(X[:, j]):
                sel = (X[:, i] == a) & (X[:, j] == b)
                for c in range(K):
                    nab_y = np.sum(sel & (y == c))
                    if nab_y:
                        direct += nab_y / len(y) * np.log((nab_y / sel.sum()) / np.mean(y == c))
        assert abs(v - direct) < 1e-12
        # chain rule: I(X_i, X_j; Y) = I(X_i; Y) + I(X_j; Y | X_i) ≥ I(X_i; Y)
        P = S.joint((f"f{i}", f"f{j}", "y"))
        Pi = P.sum(axis=1)
        Ii = float(np.sum(Pi[Pi > 0] * np.log((Pi / (Pi.sum(1, keepdims=True) * Pi.sum(0, keepdims=True)))[Pi > 0])))
        assert v >= Ii - 1e-12
    with pytest.raises(InputError, match="3-way"):
        label_information(np.ones((2, 2)))
