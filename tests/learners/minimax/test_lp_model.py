"""The one minimax LP model (``minimax.lp_model.MinimaxModel``) and the formulations' rows on it.

Every formulation writes only its rows (and auxiliary columns) on the model, whose objective is
ν − (τ − λ)ᵀμ⁺ + (τ + λ)ᵀμ⁻. What must hold:

- at the optimum of every formulation the objective is R(μ) = 1 − τᵀμ + φ(μ) + λᵀ|μ|
  (``problem.risk``) with φ(μ) computed independently by enumerating the whole domain — row
  generation, the first-order epigraph, the forest epigraph — and with the local polytope's
  φ_L(μ; δ) ≥ φ(μ) for the relaxation; the exact ones agree with LP (13) written out whole;
- the hinge LP on the same model is exactly 2·R*;
- the layout orders the columns, not the LP: pairs, blocks and minus-first give one optimum;
- μ columns leave and enter in place: removing them gives the optimum of a model that never
  had them, re-adding them restores the optimum (the rows' coefficients come back with them).
"""

from __future__ import annotations

import numpy as np
import pytest

from marg.learners.features.calibration import confidence_box
from marg.learners.classifiers.dcc_hinge import solve_hinge
from marg.learners.features.blocks import node_blocks
from marg.learners.features.pairwise import PairwiseFeatureMap
from marg.learners.features.statistics import map_moments
from marg.learners.minimax.forest import ForestOracle
from marg.learners.minimax.forest_lp import solve_compact
from marg.learners.minimax.first_order_models import CompactModel
from marg.learners.minimax.layout import every_label
from marg.learners.minimax.local import local_phi, solve_local
from marg.learners.minimax.lp_model import LAYOUTS, MinimaxModel
from marg.learners.minimax.problem import label_subsets, risk
from marg.learners.minimax.generation import solve_boxed
from tests.helpers.dcc_oracle import domain, make_problem
from tests.helpers.minimax_rows import dense_rows, phi_by_enumeration, write_dense_rows

LEVELS = [2, 3, 2]


def pairwise_problem(seed: int, K: int, edges: list, s: float):
    """A pairwise map on LEVELS with ``edges``, its exact τ, λ at scale s, and Ψ of every point."""
    cb, S, _ = make_problem(np.random.default_rng(seed), LEVELS, K)
    blocks = node_blocks(cb)
    pm = PairwiseFeatureMap(blocks, [b.column for b in blocks], edges)
    m = map_moments(S, pm)
    lam = confidence_box(m, pm.indicator_columns(), s=s, coverage=0.95).lam
    X, _ = domain(LEVELS)
    return pm, m.tau, lam, pm.psi(X)


def dense_model(tau, lam, P, layout="pairs", cols=None) -> MinimaxModel:
    """LP (13) with every (x, C) row, μ columns ``cols`` (default all), on the one model."""
    K = tau.shape[0]
    model = MinimaxModel(tau, lam, layout=layout)
    model.add_mu(np.arange(tau.size) if cols is None else cols)
    write_dense_rows(model, *dense_rows(P, K))
    assert model.solve() == "optimal"
    return model


@pytest.mark.parametrize("K,s,seed", [(2, 0.5, 0), (3, 1.0, 1), (2, 1.0, 2)])
def test_the_objective_is_R_of_mu_in_every_formulation(K, s, seed):
    pm, tau, lam, P = pairwise_problem(seed, K, [(0, 1), (1, 2)], s)
    mu_of = lambda flat: np.asarray(flat).reshape(K, -1)  # noqa: E731
    R_dense = dense_model(tau, lam, P).objective
    # the forest epigraph (one shot): R* = R(μ), φ = ν − 1 the exact φ
    fc = solve_compact(ForestOracle(pm, K), tau, lam, np.arange(tau.size))
    phi = phi_by_enumeration(P, fc.mu)
    assert fc.value == pytest.approx(risk(tau, lam, fc.mu, phi), abs=1e-8)
    assert fc.phi == pytest.approx(phi, abs=1e-8)
    assert fc.value == pytest.approx(R_dense, abs=1e-8)
    # row generation with the forest's exact separator
    lp = MinimaxModel.for_rows(tau, lam, 1e3)
    lp.add_mu(np.arange(tau.size))
    oracle = ForestOracle(pm, K)
    lp.add_cuts(oracle.covering_cuts())
    assert solve_boxed(lp, oracle).converged
    assert lp.objective == pytest.approx(risk(tau, lam, mu_of(lp.mu), phi_by_enumeration(P, mu_of(lp.mu))), abs=1e-7)
    assert lp.objective == pytest.approx(R_dense, abs=1e-7)
    # the first-order epigraph on the nodes alone (features in place)
    D1 = pm.nodes.dim
    cm = CompactModel(pm.nodes, tau[:, :D1], lam[:, :D1], label_subsets(K))
    cm.add_blocks(np.arange(pm.nodes.n_blocks))
    assert cm.solve() == "optimal"
    P1 = P[:, :D1]
    assert cm.lp_value == pytest.approx(risk(tau[:, :D1], lam[:, :D1], mu_of(cm.model.mu),
                                             phi_by_enumeration(P1, mu_of(cm.model.mu))), abs=1e-8)
    assert cm.lp_value == pytest.approx(dense_model(tau[:, :D1], lam[:, :D1], P1).objective, abs=1e-8)
    assert cm.lp_value >= fc.value - 1e-9  # fewer features: the minimax risk cannot drop
    # the local polytope on a cycle: R*_L = R(μ) at φ_L(μ; δ*) = ν − 1 ≥ φ(μ), so R*_L ≥ R*
    pc, tc, lc, Pc = pairwise_problem(seed, K, [(0, 1), (1, 2), (0, 2)], s)
    loc = solve_local(pc, K, tc, lc, np.arange(tc.size))
    phi_l = local_phi(pc, loc.mu, loc.read.offsets)
    assert loc.kind == "R*_L" and loc.phi == pytest.approx(phi_l, abs=1e-8)
    assert loc.value == pytest.approx(risk(tc, lc, loc.mu, phi_l), abs=1e-8)
    assert phi_l >= phi_by_enumeration(Pc, loc.mu) - 1e-9
    assert loc.value >= dense_model(tc, lc, Pc).objective - 1e-8
    if K == 2:  # the hinge LP on the same model: the worst-case hinge loss is exactly 2·R*
        h = solve_hinge(ForestOracle(pm, 2), tau, lam, np.arange(pm.dim), np.arange(tau.size),
                        np.zeros(tau.shape, bool))
        assert h.kind == "hinge" and h.value == pytest.approx(2.0 * fc.value, abs=1e-7)
        assert np.allclose(h.mu[1] - h.mu[0], h.read.f)


@pytest.mark.parametrize("K,s", [(2, 0.5), (3, 1.0)])
def test_the_layouts_are_one_lp(K, s):
    pm, tau, lam, P = pairwise_problem(7 + K, K, [(0, 1)], s)
    values = []
    for layout in LAYOUTS:
        model = dense_model(tau, lam, P, layout)
        mu = model.mu.reshape(K, -1)
        assert model.objective == pytest.approx(model.risk(mu, phi_by_enumeration(P, mu)), abs=1e-8)
        assert model.nu == pytest.approx(phi_by_enumeration(P, mu) + 1.0, abs=1e-8)
        values.append(model.objective)
    assert max(values) - min(values) <= 1e-9


def test_columns_leave_and_enter_in_place():
    K = 3
    pm, tau, lam, P = pairwise_problem(11, K, [(0, 1), (1, 2)], 0.5)
    G, b = dense_rows(P, K)
    model = dense_model(tau, lam, P)
    R0 = model.objective
    out = every_label(K, pm.dim, pm.edge_columns(1))  # the second edge's cells, every label
    model.remove_mu(out)
    assert model.solve() == "optimal"
    assert np.all(model.mu[out] == 0.0)
    without = dense_model(tau, lam, P, cols=np.setdiff1d(np.arange(tau.size), out))
    assert model.objective == pytest.approx(without.objective, abs=1e-9)
    assert model.objective >= R0 - 1e-9
    model.add_mu(out, fill=G[:, out])
    assert model.solve() == "optimal"
    assert model.objective == pytest.approx(R0, abs=1e-9)
    # the first-order epigraph: a feature's columns and rows leave and come back the same way
    D1 = pm.nodes.dim
    t1, l1 = tau[:, :D1], lam[:, :D1]
    cm = CompactModel(pm.nodes, t1, l1, label_subsets(K))
    cm.add_blocks(np.arange(3))
    cm.solve()
    full = cm.lp_value
    cm.remove_blocks(np.array([1]))
    cm.solve()
    fresh = CompactModel(pm.nodes, t1, l1, label_subsets(K))
    fresh.add_blocks(np.array([0, 2]))
    fresh.solve()
    assert cm.lp_value == pytest.approx(fresh.lp_value, abs=1e-9) and cm.lp_value >= full - 1e-9
    cm.add_blocks(np.array([1]))
    cm.solve()
    assert cm.lp_value == pytest.approx(full, abs=1e-9)
