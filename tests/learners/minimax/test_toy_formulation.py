"""Where a new formulation plugs into the minimax engine — checked with a toy one.

A formulation is a feature map Φ(x, y) = e_y ⊗ ψ(x) and a separation oracle (the
``SeparationOracle`` protocol of ``marg.learners.minimax.separation``): ``most_violated(mu)``
returns, for every label subset C, the row (x*, C) that maximises Σ_{y∈C} Φ(x, y)ᵀμ over the
whole domain as a ``Cut``. The engine — the one LP model (``lp_model.MinimaxModel``: ν, μ⁺, μ⁻
and the costs −(τ−λ), τ+λ, the solve and its read-outs), row generation on it (``MinimaxModel.for_rows``,
``solve_boxed``), R(μ) (``problem.risk``) and the result type (``MinimaxSolution``) read by
``MinimaxRules`` — does the rest. A formulation that can list its rows outright writes only those
rows on the model (``test_a_formulation_writes_only_its_rows``).

The toy family here exists nowhere in marg: ψ(x) = (1, x₀x₁, x₀ ⊕ x₂, x₁ + x₂) on {0, 1}³,
separated by brute force over the 8 points. The oracle is the dense LP (13) with one row per
(x, C), written independently and solved by ``HighsLP.from_arrays``.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from marg.learners.minimax.lp_model import MinimaxModel
from marg.learners.minimax.problem import label_subsets, risk
from marg.learners.minimax.generation import solve_boxed
from marg.learners.minimax.separation import Cut
from marg.learners.minimax.solution import MinimaxSolution
from marg.lp import HighsLP, Status
from tests.helpers.minimax_rows import dense_rows, write_dense_rows

POINTS = np.array(list(itertools.product([0, 1], repeat=3)), dtype=np.float64)


def psi(X: np.ndarray) -> np.ndarray:
    """The toy map's Ψ(x): (n, 4)."""
    X = np.atleast_2d(X)
    return np.column_stack([np.ones(len(X)), X[:, 0] * X[:, 1], np.abs(X[:, 0] - X[:, 2]), X[:, 1] + X[:, 2]])


class BruteForceOracle:
    """Exact separation by enumerating the toy domain (the formulation's one obligation)."""

    def __init__(self, n_classes: int):
        self.K = n_classes
        self.subsets = label_subsets(n_classes)
        self.P = psi(POINTS)  # (8, D)
        self.D = self.P.shape[1]

    def most_violated(self, mu: np.ndarray) -> list[Cut]:
        M = np.asarray(mu, dtype=np.float64).reshape(self.K, self.D)
        cuts = []
        for C in self.subsets:
            s = self.P @ M[list(C)].sum(axis=0)  # Σ_{y∈C} Φ(x, y)ᵀμ for every x
            x = int(np.argmax(s))
            idx = np.concatenate([y * self.D + np.arange(self.D) for y in C])
            val = np.tile(self.P[x] / len(C), len(C))
            cuts.append(Cut((idx, val), 1.0 / len(C) - 1.0, (float(s[x]) - 1.0) / len(C) + 1.0, tuple(C)))
        return cuts

    def phi(self, mu: np.ndarray) -> float:
        return max((c.violation - 1.0) for c in self.most_violated(mu))


def dense_lp13(tau: np.ndarray, lam: np.ndarray) -> float:
    """R* = min 1 − τᵀμ + λᵀ|μ| + ν s.t. (Σ_{y∈C} Φ(x, y)ᵀμ − 1)/|C| ≤ ν for every x and C (variables ν, μ⁺, μ⁻)."""
    K, D = tau.shape
    P = psi(POINTS)
    rows, rhs = [], []
    for C in label_subsets(K):
        for x in range(len(P)):
            g = np.zeros((K, D))
            g[list(C)] = P[x] / len(C)
            rows.append(np.concatenate([[-1.0], g.ravel(), -g.ravel()]))
            rhs.append(1.0 / len(C))
    c = np.concatenate([[1.0], -(tau - lam).ravel(), (tau + lam).ravel()])
    bounds = [(None, None)] + [(0, None)] * (2 * K * D)
    res = HighsLP.from_arrays(c, np.array(rows), np.array(rhs), bounds).solve()
    assert res.status is Status.OPTIMAL
    return float(res.objective) + 1.0


@pytest.mark.parametrize("K,seed,half_width", [(2, 0, 0.02), (3, 1, 0.01), (3, 2, 0.0)])
def test_a_toy_formulation_plugs_into_the_engine(K, seed, half_width):
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(len(POINTS) * K)).reshape(len(POINTS), K)  # a distribution over (x, y)
    tau = (p.T @ psi(POINTS))  # τ[y] = E_p[Φ(x, y)] = Σ_x p(x, y) ψ(x)
    lam = np.full(tau.shape, half_width)
    oracle = BruteForceOracle(K)
    lp = MinimaxModel.for_rows(tau, lam, 1e3)
    lp.add_mu(np.arange(tau.size))
    lp.add_cuts(oracle.most_violated(np.zeros(tau.size)))
    rounds = solve_boxed(lp, oracle)
    assert rounds.converged
    mu = lp.mu.reshape(K, -1)
    phi = oracle.phi(lp.mu)
    sol = MinimaxSolution(mu=mu, tau=tau, lam=lam, phi=phi, value=risk(tau, lam, mu, phi),
                          iterations=[rounds.upper[-1]],
                          lower=rounds.lower, upper=rounds.upper, converged=True, n_rows=lp.n_rows,
                          impossible=np.zeros(mu.shape, dtype=bool), bound=1e3)
    R_star = dense_lp13(tau, lam)
    # the engine's certificate is the minimax risk of the independent dense LP, and R(μ) is exact at its μ
    assert sol.value == pytest.approx(R_star, abs=1e-8)
    assert rounds.upper[-1] == pytest.approx(sol.value, abs=1e-12)
    assert lp.objective == pytest.approx(R_star, abs=1e-8)  # LP value = R(μ): row generation closed the gap
    # the dual is a distribution over the generated rows whose feature expectations lie in the box
    a = (-lp.row_dual)
    assert np.all(a >= -1e-9) and a.sum() == pytest.approx(1.0, abs=1e-8)
    assert np.all(lp.dual_violation() <= 1e-8)
    # p itself lies in the box, so the certificate is at least the Bayes error of p and at most 1 − 1/K
    assert R_star >= float(1.0 - p.max(axis=1).sum()) - 1e-9
    assert R_star <= 1.0 - 1.0 / K + 1e-9


@pytest.mark.parametrize("K,seed,half_width", [(2, 3, 0.02), (3, 4, 0.0)])
def test_a_formulation_writes_only_its_rows(K, seed, half_width):
    """The toy's every (x, C) row written on the one model — no columns, costs or read-outs of its
    own — solves to the independent dense LP's R*, and the objective is R(μ) at the model's μ."""
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(len(POINTS) * K)).reshape(len(POINTS), K)
    tau = p.T @ psi(POINTS)
    lam = np.full(tau.shape, half_width)
    model = MinimaxModel(tau, lam)
    model.add_mu(np.arange(tau.size))
    write_dense_rows(model, *dense_rows(psi(POINTS), K))
    assert model.solve() == "optimal"
    R_star = dense_lp13(tau, lam)
    assert model.objective == pytest.approx(R_star, abs=1e-8)
    assert model.objective == pytest.approx(model.risk(model.mu, BruteForceOracle(K).phi(model.mu)), abs=1e-8)
