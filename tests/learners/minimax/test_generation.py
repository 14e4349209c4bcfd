"""The one generation driver (learners/minimax/generation.py): what its loops guarantee and how they stop.

Column generation (on MRC's first-order model with SELECT pricing): R^k never increases; at
convergence no feature outside or inside the model has a dual violation above ε (checked by
the exact split LP on EVERY feature, not only those the heuristic flags) and R^k is the full
LP's R*; each of the four stop reasons is reached and recorded. Row generation: at
convergence the oracle finds no violated row and the LP value is R(μ); its stops are recorded.
DCC's greedy edges on the driver: every edge that enters lowers R* by more than tol.
"""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest

from marg.errors import SolverError
from marg.learners.features.blocks import FeatureMap
from marg.learners.features.pairwise import PairwiseFeatureMap
from marg.learners.features.statistics import map_moments
from tests.helpers.first_order_fit import solve_cg, solve_full
from marg.learners.minimax.empty_cells import empty_cells
from marg.learners.minimax.first_order import SelectPricing
from marg.learners.minimax.fit import Columns, FitOptions, Greedy, fit
from marg.learners.minimax.registry import REGISTRY
from marg.learners.minimax.generation import STOPS, Pricing, generate_columns, generate_rows
from marg.learners.minimax.layout import MuLayout
from marg.learners.minimax.pair_formulations import FOREST, FOREST_ROWS
from marg.learners.minimax.lp_model import MinimaxModel
from marg.learners.minimax.problem import MinimaxProblem
from marg.learners.minimax.separation import FirstOrderOracle
from tests.helpers.dcc_oracle import make_problem
from tests.helpers.quantities import blocks_of, tau_of

LEVELS = [3, 2, 3, 2, 3, 2, 2, 3]


def first_order(seed: int, K: int = 3, half_width: float = 0.001):
    """(map, τ, λ) of a random joint's exact first-order tables, λ constant."""
    _, S, _ = make_problem(np.random.default_rng(seed), LEVELS, K)
    fmap = FeatureMap(blocks_of(S), list(range(len(LEVELS))))
    tau = tau_of(S)
    return fmap, tau, np.full(tau.shape, half_width)


def select(fmap, tau, lam, formulation="compact", init=(7,), n_max=1, eps=0.0):
    """MRC's column model from one feature (as the one fit builds it for Columns), for the driver directly."""
    search = Columns(SelectPricing(n_max=n_max, eps=eps, init=init, exact_batch=200))
    return REGISTRY[formulation].build(MinimaxProblem.first_order(fmap, tau, lam), search, FitOptions())


@pytest.mark.parametrize("formulation", ["compact", "rows"])
@pytest.mark.parametrize("seed", [1, 2])
def test_column_generation_decreases_and_ends_dual_feasible(seed, formulation):
    fmap, tau, lam = first_order(seed)
    sel = select(fmap, tau, lam, formulation)
    gen = generate_columns(sel, k_max=1000)
    R = np.array(gen.iterations)
    assert gen.stop == "converged" and gen.converged and len(R) >= 3
    assert np.all(np.diff(R) <= 1e-9), R  # R^k never increases: the previous point stays feasible
    assert ([h["R"] for h in gen.history] == gen.iterations
            and [h["k"] for h in gen.history] == list(range(1, len(R) + 1)))
    # no feature has a dual violation above ε = 0: every outside one by the exact split LP, every inside one by the LP's
    # duals
    model = sel.model
    out = np.flatnonzero(~model.in_model)
    v_out, _ = sel.pricer.exact(out, model.W)
    _, v_in, _ = model.block_violation()
    assert out.size > 0 and np.max(v_out) <= 1e-8 and np.max(v_in) <= 1e-8
    assert sel.max_dual_violation <= 1e-8
    # hence R^k is R* of the LP with every feature
    full = solve_full(MinimaxProblem.first_order(fmap, tau, lam), formulation=formulation)
    assert R[-1] == pytest.approx(full.value, abs=1e-7)
    assert np.all(R >= full.value - 1e-7)


def test_each_stop_reason_is_reached_and_recorded():
    fmap, tau, lam = first_order(2)
    problem = MinimaxProblem.first_order(fmap, tau, lam)
    # converged: nothing enters
    done = solve_cg(problem, n_max=1, eps=0.0, k_max=1000, init=[7])
    assert done.stop == "converged" and done.converged
    # k_max: k_max + 1 restricted solves, features still wanted in
    short = solve_cg(problem, n_max=1, eps=0.0, k_max=1, init=[7])
    assert short.stop == "k_max" and not short.converged and len(short.iterations) == 2
    assert short.iterations == done.iterations[:2] and short.value >= done.value - 1e-9
    # stalled (off for MRC; the driver's rule): R^k at most stall_tol below the best bound p iterations earlier
    records: list[dict] = []
    gen = generate_columns(select(fmap, tau, lam), k_max=1000, patience=1, stall_tol=1.0, callback=records.append)
    it = gen.iterations
    assert gen.stop == "stalled" and len(it) == 2 and min(it[:1]) - min(it[1:]) <= 1.0
    assert records[-1]["stage"] == "stalled" and records[-1]["R"] == min(it)
    # a tolerance below every step's improvement never stalls: the same path as without the rule
    steady = generate_columns(select(fmap, tau, lam), k_max=1000, patience=1, stall_tol=-1.0)
    assert steady.stop == "converged" and steady.iterations == pytest.approx(done.iterations, abs=1e-9)
    # work_budget: test_boost_budget.py
    assert set(STOPS) == {"converged", "k_max", "stalled", "time_limit", "work_budget"}


class SlowPricing:
    """A column model whose pricing takes ``seconds`` of the driver's clock (``clock``; a real model underneath)."""

    def __init__(self, inner, seconds: float, clock):
        self.inner, self.seconds, self.clock = inner, seconds, clock

    def solve(self, deadline):
        return self.inner.solve(None)  # the LP solve keeps no deadline: only the driver's clock decides the stop

    def price(self, deadline) -> Pricing:
        self.clock.skew += self.seconds
        return self.inner.price(deadline)

    def update(self) -> None:
        self.inner.update()


def test_time_limit_stops_between_iterations_and_keeps_the_bound(monkeypatch):
    """The driver's clock is patched (no sleep, no dependence on the machine's load): the pricing takes
    1.2 s of it, past the 1 s limit, so the loop stops after one iteration with its bound."""
    from marg.learners.minimax import generation
    from tests.helpers.boost import Clock

    clock = Clock()
    monkeypatch.setattr(generation, "time", clock)
    fmap, tau, lam = first_order(2)
    records: list[dict] = []
    t0 = clock.perf_counter()
    gen = generate_columns(SlowPricing(select(fmap, tau, lam), 1.2, clock), k_max=1000, t0=t0, time_limit=1.0,
                           callback=records.append)
    assert gen.stop == "time_limit" and not gen.converged and len(gen.iterations) == 1
    assert records[-1] == {"stage": "time_limit", "k": 1, "R": gen.iterations[0], "seconds": 1.0}


class GoneModel:
    """A column model whose every solve the deadline stops (a deadline gone before the first solve)."""

    def solve(self, deadline):
        return None

    def price(self, deadline):  # pragma: no cover - never reached
        raise AssertionError

    def update(self):  # pragma: no cover
        raise AssertionError


def test_no_restricted_solve_is_an_error_naming_it():
    with pytest.raises(SolverError, match="the toy LP produced nothing"):
        generate_columns(GoneModel(), k_max=3, no_solution="the toy LP produced nothing")


@pytest.mark.parametrize("seed", [3, 4])
def test_row_generation_converges_with_no_violated_row(seed):
    fmap, tau, lam = first_order(seed, K=2, half_width=0.02)
    K = tau.shape[0]
    oracle = FirstOrderOracle(fmap, K)
    lp = MinimaxModel.for_rows(tau, lam, 1e3)
    lp.add_mu(np.arange(tau.size))
    lp.add_cuts(oracle.covering_cuts())
    res = generate_rows(lp, oracle)
    assert res.stop == "converged" and res.added > 0 and len(res.lower) >= 3
    assert np.all(np.diff(res.lower) >= -1e-9)  # rows are only added: the LP value never drops
    top = max(float(c.violation) for c in oracle.most_violated(lp.mu))
    assert top <= lp.nu + 1e-9 * max(1.0, abs(lp.nu))  # no row of the whole domain is violated
    assert res.upper[-1] == pytest.approx(res.lower[-1], abs=1e-8)  # so the LP value is R(μ)
    assert res.phi == pytest.approx(top - 1.0)
    # its stops: k_max after max_rounds rounds, time_limit at a deadline already gone
    lp2 = MinimaxModel.for_rows(tau, lam, 1e3)
    lp2.add_mu(np.arange(tau.size))
    lp2.add_cuts(oracle.covering_cuts())
    one = generate_rows(lp2, oracle, max_rounds=1)
    assert one.stop == "k_max" and len(one.upper) == 1 and one.added > 0
    late = generate_rows(lp2, oracle, deadline=time.perf_counter() - 1.0)  # round 2 adds rows (≥ 3 rounds above)
    assert late.stop == "time_limit" and len(late.upper) <= 1


@pytest.mark.parametrize("solver", ["compact", "rows"])
def test_greedy_edges_run_on_the_driver(solver):
    """DCC's greedy edges are column generation over candidate edges: each edge that enters lowers R*
    by more than tol, the last pricing lets none in (converged), and max_edges is k_max."""
    _, S, _ = make_problem(np.random.default_rng(5), [3, 2, 3, 2, 2], 2)
    blocks = blocks_of(S)
    pairs = list(itertools.combinations(range(len(blocks)), 2))
    full = PairwiseFeatureMap(blocks, [b.column for b in blocks], pairs)
    tau = map_moments(S, full).tau
    lam = np.full(tau.shape, 1e-3)
    excluded = empty_cells(full, tau, lam)
    problem = MinimaxProblem(full, tau, lam, MuLayout(excluded, ~excluded))
    rank = {e: (0, e) for e in pairs}
    records: list[dict] = []
    formulation = FOREST if solver == "compact" else FOREST_ROWS
    sol = fit(problem, formulation, Greedy(rank, tol=1e-6), FitOptions(callback=records.append))
    R = np.array(sol.iterations)
    assert sol.stop == "converged" and len(sol.edges) >= 2 and len(R) == len(sol.edges) + 1
    assert np.all(np.diff(R) < -1e-6), R
    hist = sol.history
    assert ([h["k"] for h in hist] == list(range(1, len(R) + 1))
            and np.allclose([h["R"] for h in hist], sol.iterations, atol=1e-9))
    assert [h["entered"] for h in hist] == [1] * (len(R) - 1) + [0]
    assert [r["edges"] for r in records if r["stage"] == "greedy"] == list(range(1, len(sol.edges) + 1))
    capped = fit(problem, formulation, Greedy(rank, max_edges=1, tol=1e-6))
    assert (capped.stop == "k_max" and capped.edges == sol.edges[:1]
            and np.allclose(capped.iterations, sol.iterations[:2], atol=1e-9))
    assert len(capped.history) == 1  # k_max = 1: the one-edge forest is not priced


def test_boosting_rows_run_on_the_one_row_driver():
    """Boosting's monomial LP is a RowLP of the same ``generate_rows``: after its row generation
    no domain point's row is violated at the final μ (enumeration is exact here), the bound it
    returns is R(μ) of :func:`problem.risk` with that φ, and it is the last round's ``upper``."""
    from marg.learners.boost.minimax_cg import MonomialMinimax
    from marg.learners.boost.vote import BoostVote
    from marg.learners.minimax.problem import risk
    from marg.marginals.summary import Summary
    from tests.helpers.boost import sample, tiny_codebook

    cb = tiny_codebook([3, 3, 2, 3])
    X, y = sample(cb, 400, np.random.default_rng(3))
    src, done, _ = BoostVote(s=0.0, max_order=2, k_max=4,
                             time_limit=None)._solve(Summary.from_rows(cb, X, y, stats="all"))
    mm = MonomialMinimax(src, 2)  # the fitted vote's columns, afresh with one row per label subset
    mm.add_columns([(c, src.fmap.monomials[u]) for c, u in done.lp.cols])
    mm.lp.add_cuts([(np.full(len(src.sizes), -1, dtype=np.int64), C) for C in mm.subsets])
    lower, upper = [], []
    mu, R, phi, _ = mm.solve_rows(None, lower, upper)
    assert len(lower) == len(upper) >= 2 and R == upper[-1]  # rows were added: more than one round
    rows = mm.most_violated(mm.lp.mu)
    assert max(c[2] for c in rows) <= mm.lp.nu + 1e-9 * max(1.0, abs(mm.lp.nu))  # converged: nothing violated
    assert mm.phi_exact and phi == max(c[3] for c in rows)
    tau, lam = mm.lp.tau, mm.lp.lam
    flat = np.array([mu[c, u] for c, u in mm.lp.cols])
    assert R == pytest.approx(risk(tau, lam, flat, phi), abs=1e-12)
    assert R == pytest.approx(lower[-1], abs=1e-7)  # LP value = R(μ) at row convergence
