"""The one HiGHS wrapper: silent creation, the status map, and a deadline that means the same on a reused instance."""

from __future__ import annotations

import time

import numpy as np
import pytest
import scipy.sparse as sp

from marg.errors import SolverError
from marg.learners.gbd import _Master
from marg.learners.lp import INF, HighsLP, Status, linprog, new_highs, solver_error


def test_new_highs_prints_nothing(capfd):
    h = new_highs()
    lp = HighsLP()
    lp.add_cols([1.0], [0.0], [1.0])
    lp.solve()
    del h
    out, _ = capfd.readouterr()
    assert out == ""


def _random_lp(n: int = 150, seed: int = 0) -> HighsLP:
    rng = np.random.default_rng(seed)
    lp = HighsLP(solver="simplex")
    lp.add_cols(-rng.random(n), np.zeros(n), np.full(n, INF))
    lp.add_rows_matrix(sp.csr_array(rng.random((n, n))), np.full(n, -INF), np.ones(n))
    return lp


def test_deadline_is_per_solve_on_a_reused_instance():
    """HiGHS compares ``time_limit`` with the run time accumulated over ALL runs of an instance;
    a limit set to the remaining time (as earlier releases did in the GBD master) stops a reused
    instance at once after enough solves. Each solve here must get its own budget."""
    rng = np.random.default_rng(1)
    lp = _random_lp()
    n = lp.n_cols
    budget = 0.5
    for k in range(10_000):
        lp.set_col_costs(np.arange(n), -rng.random(n))  # a new objective: the simplex has work to do
        res = lp.solve(deadline=time.perf_counter() + budget)
        assert res.status is Status.OPTIMAL, f"solve {k + 1} ended {res.status} after {lp.h.getRunTime():.2f} s of run time"
        if lp.h.getRunTime() > 3 * budget:
            break
    assert lp.h.getRunTime() > 3 * budget


def test_status_map_and_errors():
    lp = HighsLP()
    lp.add_cols([-1.0], [0.0], [INF])  # min −x, x ≥ 0: unbounded
    assert lp.solve().status is Status.UNBOUNDED
    lp = HighsLP()
    lp.add_cols([1.0], [0.0], [1.0])
    lp.add_rows([2.0], [INF], [0], [0], [1.0])  # x ≥ 2 with x ≤ 1
    res = lp.solve()
    assert res.status is Status.INFEASIBLE and not res.has_solution
    err = solver_error("a test LP", res)
    assert isinstance(err, SolverError) and err.exit_code == 3 and "a test LP" in str(err)
    lp = HighsLP()
    lp.add_cols([1.0, 2.0], [0.0, 0.0], [INF, INF])
    lp.add_rows([1.0], [INF], [0], [0, 1], [1.0, 1.0])  # x + y ≥ 1
    res = lp.solve()
    assert res.status is Status.OPTIMAL and res.objective == pytest.approx(1.0) and np.allclose(res.x, [1.0, 0.0])
    assert res.row_dual.shape == (1,) and res.row_dual[0] == pytest.approx(1.0)


def test_linprog_wrapper_matches_inplace_model():
    rng = np.random.default_rng(3)
    A = rng.random((20, 10))
    c = -rng.random(10)
    one = linprog(c, A, np.ones(20), (0, None))
    lp = HighsLP()
    lp.add_cols(c, np.zeros(10), np.full(10, INF))
    lp.add_rows_matrix(sp.csr_array(A), np.full(20, -INF), np.ones(20))
    two = lp.solve()
    assert one.status is two.status is Status.OPTIMAL
    assert one.objective == pytest.approx(two.objective, abs=1e-9)
    assert linprog(np.array([-1.0]), np.zeros((1, 1)), np.ones(1), (0, None)).status is Status.UNBOUNDED


def test_gbd_master_is_a_reusable_mip():
    """Cuts are rows added in place; each solve returns the MIP optimum and a valid dual bound."""
    m = _Master(6, np.zeros(6), -10.0, 2)
    rng = np.random.default_rng(5)
    best = None
    for _ in range(15):
        a, b = float(-rng.random()), rng.random(6)
        m.add_cut(a, b)
        sigma, dual, optimal = m.solve(5.0)
        assert optimal and sigma is not None and sigma.sum() <= 2
        assert dual is not None and dual <= 1e-9
        best = sigma
    assert set(np.unique(best)) <= {0, 1}
