"""Brute-force oracles for the pairwise (DCC) learners: random joints with their exact summaries,
the whole domain, and the LPs over the full joint (largest Bayes error R*, a rule's worst case).

Shared by tests/learners/classifiers/test_dcc*.py; an independent route (SciPy's linprog over the full
joint), never the learners' own LP code.
"""

from __future__ import annotations

import itertools

import numpy as np
from scipy.optimize import linprog

from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label, NumericFeature
from marg.marginals.summary import Summary
from marg.marginals.counts.tables import MarginalTable

N = 300.0


def make_problem(rng, levels, K, sparsity=0.0, numeric=(), concentration=0.5, unseen=()):
    """Random joint p over (levels..., numeric endpoints..., y) and its exact Summary
    (label, first-order, all pair-with-label tables; moment tables for numeric features).
    ``unseen``: (feature, level) pairs given probability 0 (a level never observed)."""
    feats = [CategoricalFeature(f"f{i}", tuple(f"l{a}" for a in range(m))) for i, m in enumerate(levels)]
    feats += [NumericFeature(f"x{k}", lo=lo, hi=hi) for k, (lo, hi) in enumerate(numeric)]
    cb = Codebook(features=tuple(feats), label=Label("y", tuple(f"c{k}" for k in range(K))))
    sizes = list(levels) + [2] * len(numeric)
    shape = tuple(sizes) + (K,)
    p = rng.dirichlet(np.full(int(np.prod(shape)), concentration)).reshape(shape)
    if sparsity > 0:
        p[rng.random(shape) < sparsity] = 0.0
        p /= p.sum()
    for i, a in unseen:
        p[(slice(None),) * i + (a,)] = 0.0
        p /= p.sum()
    d = len(sizes)
    nd = len(levels)
    tables = [MarginalTable(("y",), N * p.sum(axis=tuple(range(d))))]
    for i in range(nd):
        tables.append(MarginalTable((f"f{i}", "y"), N * p.sum(axis=tuple(k for k in range(d) if k != i))))
    for i, j in itertools.combinations(range(nd), 2):
        tables.append(MarginalTable((f"f{i}", f"f{j}", "y"),
                                    N * p.sum(axis=tuple(k for k in range(d) if k not in (i, j)))))
    for k, (lo, hi) in enumerate(numeric):
        i = nd + k
        pv = p.sum(axis=tuple(j for j in range(d) if j != i))  # (2, K)
        vals = np.array([lo, hi])
        mom = np.stack([N * (vals[:, None] * pv).sum(0), N * (vals[:, None] ** 2 * pv).sum(0)])
        tables.append(MarginalTable((f"x{k}", "y"), mom, kind="moments"))
    return cb, Summary.from_tables(cb, tables), p


def domain(levels, numeric=()):
    """Rows X of the whole domain (codes; numeric features at their two endpoints) and the
    per-feature index (0/1 for numeric) of every row."""
    choices = [list(range(m)) for m in levels] + [[0, 1]] * len(numeric)
    idx = np.array(list(itertools.product(*choices)), dtype=np.int64)
    X = idx.astype(float)
    for k, (lo, hi) in enumerate(numeric):
        X[:, len(levels) + k] = np.where(idx[:, len(levels) + k] == 0, lo, hi)
    return X, idx


def marginal_constraints(p, cliques, s):
    """(A, lo, hi) with lo ≤ A·vec(q) ≤ hi: q's marginal on each clique (+ label) within
    λ = s·sqrt(m(1−m))/sqrt(N) of p's marginal m (λ = 0 for s = 0)."""
    d = p.ndim - 1
    idx = np.arange(p.size).reshape(p.shape)
    rows, lo, hi = [], [], []
    for cl in cliques:
        axes = tuple(k for k in range(d) if k not in cl)
        marg = p.sum(axis=axes)
        for cell in np.ndindex(marg.shape):
            sl = [slice(None)] * (d + 1)
            for k, a in zip(list(cl) + [d], cell):
                sl[k] = a
            r = np.zeros(p.size)
            r[idx[tuple(sl)].ravel()] = 1.0
            m = marg[cell]
            lam = s * np.sqrt(m * (1 - m)) / np.sqrt(N)
            rows.append(r)
            lo.append(m - lam)
            hi.append(m + lam)
    return np.array(rows), np.array(lo), np.array(hi)


def brute_force_R(p, n_discrete, edges, s=0.0, numeric_moment=None):
    """max_{q ∈ U} Σ_x (Σ_y q(x,y) − max_y q(x,y)) over the full joint (variables q, t_x)."""
    K = p.shape[-1]
    nq = p.size
    nx = nq // K
    cliques = [(i,) for i in range(n_discrete)] + [tuple(e) for e in edges]
    A, lo, hi = marginal_constraints(p, cliques, s)
    extra = [] if numeric_moment is None else numeric_moment
    nv = nq + nx
    c = np.zeros(nv)
    c[:nq] = -1.0
    c[nq:] = 1.0
    T = np.zeros((nq, nv))
    T[np.arange(nq), np.arange(nq)] = 1.0
    T[np.arange(nq), nq + np.arange(nq) // K] = -1.0
    Ab = np.hstack([A, np.zeros((A.shape[0], nx))])
    rows = [T, Ab, -Ab]
    rhs = [np.zeros(nq), hi, -lo]
    for r, v in extra:
        rows.append(np.concatenate([r, np.zeros(nx)])[None, :])
        rhs.append([v])
        rows.append(-np.concatenate([r, np.zeros(nx)])[None, :])
        rhs.append([-v])
    Aeq = np.concatenate([np.ones(nq), np.zeros(nx)])[None, :]
    res = linprog(c, A_ub=np.vstack(rows), b_ub=np.concatenate(rhs), A_eq=Aeq, b_eq=[1.0], bounds=(0, None),
                  method="highs")
    assert res.status == 0, res.message
    return -res.fun


def rule_worst_case(p, n_discrete, edges, H, s=0.0):
    """max_{q ∈ U} Σ q(x,y)(1 − H[x, y]) for a randomized rule H (nx, K): an LP in q."""
    cliques = [(i,) for i in range(n_discrete)] + [tuple(e) for e in edges]
    A, lo, hi = marginal_constraints(p, cliques, s)
    c = -(1.0 - H).ravel()
    res = linprog(c, A_ub=np.vstack([A, -A]), b_ub=np.concatenate([hi, -lo]), A_eq=np.ones((1, p.size)), b_eq=[1.0],
                  bounds=(0, None), method="highs")
    assert res.status == 0, res.message
    return -res.fun


def edge_indices(model, cb):
    return [(cb.index(a), cb.index(b)) for a, b in model.edges_]


def random_cases(n, seed, max_d=5):
    rng = np.random.default_rng(seed)
    out = []
    for t in range(n):
        d = int(rng.integers(2, max_d + 1))
        levels = [int(rng.integers(2, 4)) for _ in range(d)]
        while np.prod(levels) > 81:
            levels.pop()
        out.append((rng, levels, 2 + t % 2))
    return out
