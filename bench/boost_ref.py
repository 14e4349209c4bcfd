"""Row references of the boosting seed: LP-Boost and L0-RBoost over monomial columns priced by MMA.

Benchmarks only (they see training rows; never part of an export). Both are column
generation on HiGHS (:mod:`boost_lp`) with the branch and bound of
``marg.learners.boost.mma`` as pricing, as in Goldberg 2010:

- **LP-Boost** (Demiriz et al.; the seed's (1.12)): max ρ − D Σξ s.t. y_i H_i λ + ξ_i ≥ ρ,
  Σλ = 1, λ, ξ ≥ 0, D = 1/(νM). A column is a base classifier h = ±m for a monomial m of
  order ≤ K (the constant monomial gives h = ±1, the starting columns); pricing (1.15) is
  MMA with the duals w of the margin rows: add h if Σ_i y_i h(A_i) w_i > α.
- **L0-RBoost** (the seed's Algorithm 2, LP (3.13)): min Σξ + Σ c_u μ_u s.t.
  y_i H_i λ + (1 + ρ) ξ_i ≥ ρ, Σλ = 1, the sparsity cuts (3.12)
  ξ_i + ξ_i' + Σ_{u ∈ S_ii'} μ_u ≥ 1 for pairs (i, i') ∈ A, μ ≥ λ, with c_u = c(order) of
  (3.22). Pricing (3.16) is the extended MMA with the cut duals v as pair weights and the
  cost c(k); after each new column the cuts of the pairs it distinguishes whose Hamming
  distance is below ``hamming_factor`` × the smallest seen so far are added (the seed's
  heuristic, §3.6), and when no column prices out every violated cut is added (steps
  9–12) until none is left — so the final LP is optimal over all monomials of order ≤ K
  and all cuts (3.12). A column pair (λ_u, μ_u) also prices out when μ_u alone does
  (Σ v − c_u > 0, a second MMA call with w = 0); the seed's (3.16) omits that case.

Prediction: sign of g(x) = Σ λ_u h_u(x); g = 0 goes to the training majority class.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from marg.learners.boost.cost import code_length_cost
from marg.learners.boost.literals import BinaryTest, Monomial, codebook_tests, cover, evaluate_tests
from marg.learners.boost.mma import MMAResult, SearchOptions, maximize_agreement
from marg.learners.boost.oracles import RowOracle
from marg.marginals.data.codebook import Codebook

from boost_lp import INF, GrowingLP


@dataclass
class VotingModel:
    """g(x) = Σ λ_u s_u m_u(x); predicts class 1 where g > 0, 0 where g < 0, ``default`` at 0."""

    tests: tuple[BinaryTest, ...]
    monomials: list[Monomial]
    signs: np.ndarray
    weights: np.ndarray
    default: int

    def decision(self, X: np.ndarray) -> np.ndarray:
        B = evaluate_tests(self.tests, X)
        H = np.column_stack([cover(m, B) for m in self.monomials]).astype(np.float64)
        return H @ (self.signs * self.weights)

    def predict(self, X: np.ndarray) -> np.ndarray:
        g = self.decision(X)
        scale = max(1.0, float(np.abs(self.weights).sum()))
        return np.where(g > 1e-9 * scale, 1, np.where(g < -1e-9 * scale, 0, self.default))

    @property
    def nnz(self) -> int:
        """‖λ‖₀ (constant columns included)."""
        return int((self.weights > 1e-9).sum())


@dataclass
class BoostStats:
    iterations: int = 0
    pricing_nodes: list[int] = field(default_factory=list)
    pricing_seconds: list[float] = field(default_factory=list)
    lp_seconds: float = 0.0
    cuts: int = 0
    certified: bool = True  # every pricing ended optimal (no limit hit)
    stopped: bool = False  # the run's wall-clock budget ended it before the LP was optimal
    weights: list[np.ndarray] = field(default_factory=list)  # the w passed to each pricing (if kept)


def _price(oracle: RowOracle, K: int, cost, threshold: float, options: SearchOptions, stats: BoostStats) -> MMAResult:
    r = maximize_agreement(oracle, max_order=K, cost=cost, threshold=threshold, options=options)
    stats.pricing_nodes.append(r.nodes)
    stats.pricing_seconds.append(r.seconds)
    if not r.optimal and r.monomial is None and r.upper_bound > threshold:
        stats.certified = False
    return r


def lpboost(cb: Codebook, X: np.ndarray, y: np.ndarray, *, nu: float, max_order: int,
            options: SearchOptions | None = None, max_iter: int = 1000, tol: float = 1e-7,
            keep_weights: bool = False, tests: tuple[BinaryTest, ...] | None = None,
            budget: float | None = None) -> tuple[VotingModel, BoostStats]:
    """LP-Boost (1.12) with D = 1/(νM) over monomials of order ≤ max_order (``budget``: wall seconds)."""
    start = time.perf_counter()
    opts = options or SearchOptions()
    tests = tests if tests is not None else codebook_tests(cb)
    n = X.shape[0]
    ys = np.where(y == 1, 1.0, -1.0)
    D = 1.0 / (nu * n)
    B = evaluate_tests(tests, X)
    lp = GrowingLP()
    lp.add_cols([-1.0], [-INF], [INF], [([], [])])  # ρ
    lp.add_cols([D] * n, [0.0] * n, [INF] * n, [([], [])] * n)  # ξ
    rows = [([0, 1 + i], [-1.0, 1.0]) for i in range(n)]
    lp.add_rows([0.0] * n, [INF] * n, rows)
    lp.add_rows([1.0], [1.0], [([], [])])
    monos: list[Monomial] = []
    signs: list[float] = []
    cols: list[int] = []

    def add(mono: Monomial, sign: float) -> None:
        h = sign * cover(mono, B)
        nz = np.flatnonzero(h)
        idx = np.concatenate([nz, [n]])
        val = np.concatenate([ys[nz] * h[nz], [1.0]])
        cols.append(int(lp.add_cols([0.0], [0.0], [INF], [(idx, val)])[0]))
        monos.append(mono)
        signs.append(sign)

    add((), 1.0)
    add((), -1.0)
    stats = BoostStats()
    for _ in range(max_iter):
        t0 = time.perf_counter()
        x, dual, _ = lp.solve()
        stats.lp_seconds += time.perf_counter() - t0
        w = np.maximum(dual[:n], 0.0)
        alpha = -dual[n]  # add h when Σ y h w > α
        if keep_weights:
            stats.weights.append(w.copy())
        oracle = RowOracle(cb, X, y == 1, w, tests=tests)
        r = _price(oracle, max_order, None, alpha + tol, opts, stats)
        stats.iterations += 1
        if r.monomial is None:
            break
        add(r.monomial, float(r.sign))
        if budget is not None and time.perf_counter() - start > budget:
            stats.stopped = True
            break
    x, _, _ = lp.solve()  # the LP over every column added (the loop may end right after an addition)
    lam = np.maximum(x[cols], 0.0)
    default = int(np.mean(y == 1) >= 0.5)
    return VotingModel(tests, monos, np.asarray(signs), lam, default), stats


class _L0Master:
    """The LP (3.13) with its columns, cuts and the covers of its base classifiers."""

    def __init__(self, B: np.ndarray, y: np.ndarray, rho: float):
        self.B = B
        self.n = n = B.shape[0]
        self.ys = np.where(y == 1, 1.0, -1.0)
        self.pos = y == 1
        self.lp = GrowingLP()
        self.lp.add_cols([1.0] * n, [0.0] * n, [1.0] * n, [([], [])] * n)  # ξ (cols 0..n−1)
        self.lp.add_rows([rho] * n, [INF] * n, [([i], [1.0 + rho]) for i in range(n)])  # (3.13b)
        self.lp.add_rows([1.0], [1.0], [([], [])])  # (3.13c), row n
        self.covers: list[np.ndarray] = []
        self.signs: list[float] = []
        self.monos: list[Monomial] = []
        self.lam: list[int] = []
        self.mu: list[int] = []
        self.cut_i = np.zeros(0, dtype=np.int64)
        self.cut_j = np.zeros(0, dtype=np.int64)
        self.cut_rows = np.zeros(0, dtype=np.int64)
        self.in_cuts = np.zeros((n, n), dtype=bool)
        self.dmin = math.inf

    def add_column(self, mono: Monomial, sign: float, cost: float) -> None:
        c = cover(mono, self.B)
        h = sign * c
        nz = np.flatnonzero(h)
        lam = int(self.lp.add_cols([0.0], [0.0], [INF], [(np.concatenate([nz, [self.n]]),
                                                          np.concatenate([self.ys[nz] * h[nz], [1.0]]))])[0])
        dist = c[self.cut_i] & ~c[self.cut_j] & (self.ys[self.cut_i] == sign)  # u ∈ S_ii' for existing cuts
        rows = self.cut_rows[dist]
        mu = int(self.lp.add_cols([cost], [0.0], [1.0], [(rows, np.ones(rows.size))])[0])
        self.lp.add_rows([0.0], [INF], [([mu, lam], [1.0, -1.0])])  # (3.13e)
        self.covers.append(c)
        self.signs.append(sign)
        self.monos.append(mono)
        self.lam.append(lam)
        self.mu.append(mu)

    def distinguishes(self, i: np.ndarray, j: np.ndarray) -> list[np.ndarray]:
        """For each pair, the columns u ∈ S_ij (as μ column indices)."""
        C = np.column_stack(self.covers)
        S = C[i] & ~C[j] & (np.asarray(self.signs)[None, :] == self.ys[i][:, None])
        mu = np.asarray(self.mu)
        return [mu[row] for row in S]

    def add_cuts(self, i: np.ndarray, j: np.ndarray) -> int:
        keep = ~self.in_cuts[i, j]
        i, j = i[keep], j[keep]
        if i.size == 0:
            return 0
        entries = [(np.concatenate([[a, b], s]), np.ones(2 + s.size))
                   for a, b, s in zip(i, j, self.distinguishes(i, j))]
        rows = self.lp.add_rows([1.0] * i.size, [INF] * i.size, entries)
        self.in_cuts[i, j] = True
        self.cut_i = np.concatenate([self.cut_i, i])
        self.cut_j = np.concatenate([self.cut_j, j])
        self.cut_rows = np.concatenate([self.cut_rows, rows])
        return int(i.size)

    def hamming_cuts(self, factor: float) -> int:
        """Step 8: cuts of the pairs the newest column distinguishes, the nearest ones only."""
        c = self.covers[-1]
        s = self.signs[-1]
        own = self.pos if s > 0 else ~self.pos
        i = np.flatnonzero(own & c)
        j = np.flatnonzero(~own & ~c)
        if i.size == 0 or j.size == 0:
            return 0
        Bi = self.B[i].astype(np.float64)
        Bj = self.B[j].astype(np.float64)
        H = Bi @ (1.0 - Bj).T + (1.0 - Bi) @ Bj.T
        self.dmin = min(self.dmin, float(H.min()))
        a, b = np.nonzero(H < factor * max(self.dmin, 1.0))
        return self.add_cuts(i[a], j[b])

    def violated_cuts(self, x: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
        """Steps 9–12: every opposite-class pair whose cut (3.12) the solution x violates."""
        xi = x[: self.n]
        C = np.column_stack(self.covers).astype(np.float64)
        mu = x[np.asarray(self.mu)]
        sg = np.asarray(self.signs)
        out_i, out_j = [], []
        for own in (self.pos, ~self.pos):
            i = np.flatnonzero(own)
            j = np.flatnonzero(~own)
            s = 1.0 if own is self.pos else -1.0
            cols = sg == s
            D = (C[np.ix_(i, cols)] * mu[cols]) @ (1.0 - C[np.ix_(j, cols)]).T
            lhs = xi[i][:, None] + xi[j][None, :] + D
            a, b = np.nonzero((lhs < 1.0 - tol) & ~self.in_cuts[np.ix_(i, j)])
            out_i.append(i[a])
            out_j.append(j[b])
        return np.concatenate(out_i), np.concatenate(out_j)

    def pair_weights(self, dual: np.ndarray) -> sp.csr_matrix:
        v = np.maximum(dual[self.cut_rows], 0.0)
        return sp.csr_matrix((v, (self.cut_i, self.cut_j)), shape=(self.n, self.n))


def l0rboost(cb: Codebook, X: np.ndarray, y: np.ndarray, *, rho: float, max_order: int, kappa: float = 1.5,
             options: SearchOptions | None = None, max_iter: int = 2000, tol: float = 1e-7,
             hamming_factor: float = 2.0, tests: tuple[BinaryTest, ...] | None = None,
             budget: float | None = None) -> tuple[VotingModel, BoostStats]:
    """L0-RBoost (Algorithm 2) over monomials of order ≤ max_order with c(k) of (3.22).

    ``budget`` (wall seconds): past it the run stops after the next LP solve and returns
    that LP's vote (``stats.stopped``); the LP is then not proven optimal over all columns.
    """
    start = time.perf_counter()
    opts = options or SearchOptions()
    tests = tests if tests is not None else codebook_tests(cb)
    n = X.shape[0]
    cost = code_length_cost(len(tests), n, max_order, kappa)
    m = _L0Master(evaluate_tests(tests, X), y, rho)
    m.add_column((), 1.0, cost[0])
    m.add_column((), -1.0, cost[0])
    stats = BoostStats()
    zeros = np.zeros(n)
    for _ in range(max_iter):
        t0 = time.perf_counter()
        x, dual, _ = m.lp.solve()
        stats.lp_seconds += time.perf_counter() - t0
        stats.iterations += 1
        if budget is not None and time.perf_counter() - start > budget:
            stats.stopped = True
            break
        w = np.maximum(dual[:n], 0.0)
        alpha = dual[n]  # reduced cost of λ_u: −Σ y h w − α + q_u
        V = m.pair_weights(dual)
        r = _price(RowOracle(cb, X, y == 1, w, pairs=V, tests=tests), max_order, cost, -alpha + tol, opts, stats)
        if r.monomial is None and V.nnz:
            r = _price(RowOracle(cb, X, y == 1, zeros, pairs=V, tests=tests), max_order, cost, tol, opts, stats)
        if r.monomial is not None:
            m.add_column(r.monomial, float(r.sign), cost[len(r.monomial)])
            stats.cuts += m.hamming_cuts(hamming_factor)
            continue
        vi, vj = m.violated_cuts(x, tol)
        if vi.size == 0:
            break
        stats.cuts += m.add_cuts(vi, vj)
    x, _, _ = m.lp.solve()  # the LP over every column and cut added
    lam = np.maximum(x[np.asarray(m.lam)], 0.0)
    default = int(np.mean(y == 1) >= 0.5)
    return VotingModel(tests, m.monos, np.asarray(m.signs), lam, default), stats
