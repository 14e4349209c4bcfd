"""The one HiGHS wrapper: silent creation, the status map, and a deadline that means the same on a reused instance."""

from __future__ import annotations

import time

import numpy as np
import pytest
import scipy.sparse as sp

from marg.errors import SolverError
from marg.learners.selection.gbd import _Master
from marg.lp import INF, HighsLP, Status, new_highs, solver_error


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
    budget = 1.0  # a solve takes milliseconds: only a stall of the whole process for 1 s could fail it
    for k in range(10_000):
        lp.set_col_costs(np.arange(n), -rng.random(n))  # a new objective: the simplex has work to do
        res = lp.solve(deadline=time.perf_counter() + budget)
        assert res.status is Status.OPTIMAL, (f"solve {k + 1} ended {res.status} after {lp.h.getRunTime():.2f} s of "
                                              "run time")
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


def test_one_shot_model_matches_inplace_model_and_its_duals_certify_optimality():
    """A one-shot LP (``from_arrays``: A_ub rows then A_eq rows) and the same LP built in place agree;
    the duals have one meaning in both: row duals y ≤ 0 on ≤ rows, reduced costs d = c − Aᵀy ≥ 0
    at a lower bound, and strong duality cᵀx = bᵀy + boundsᵀd."""
    rng = np.random.default_rng(3)
    A = rng.random((20, 10))
    c = -rng.random(10)
    Aeq, beq = np.ones((1, 10)), np.array([0.5])
    one = HighsLP.from_arrays(c, A, np.ones(20), (0, None), Aeq, beq).solve()
    lp = HighsLP()
    lp.add_cols(c, np.zeros(10), np.full(10, INF))
    lp.add_rows_matrix(sp.csr_array(A), np.full(20, -INF), np.ones(20))
    lp.add_rows_matrix(sp.csr_array(Aeq), beq, beq)
    two = lp.solve()
    assert one.status is two.status is Status.OPTIMAL
    assert one.objective == pytest.approx(two.objective, abs=1e-9)
    for res in (one, two):
        y, d = res.row_dual, res.col_dual
        assert y.shape == (21,) and d.shape == (10,)
        assert np.all(y[:20] <= 1e-9)
        assert np.allclose(d, c - np.vstack([A, Aeq]).T @ y, atol=1e-9)
        assert np.all(d >= -1e-9) and np.allclose(d * res.x, 0.0, atol=1e-9)  # x ≥ 0: complementary slackness
        assert res.objective == pytest.approx(float(np.concatenate([np.ones(20), beq]) @ y), abs=1e-9)
    # bounds as n pairs or an (n, 2) array, None meaning unbounded; the same LP either way
    three = HighsLP.from_arrays(c, A, np.ones(20), [(0, None)] * 10, Aeq, beq).solve()
    four = HighsLP.from_arrays(c, sp.csr_array(A), np.ones(20), np.tile([0.0, np.inf], (10, 1)), sp.csr_array(Aeq),
                               beq).solve()
    assert (three.objective == pytest.approx(one.objective, abs=1e-12)
            and four.objective == pytest.approx(one.objective, abs=1e-12))


def test_unbounded_is_confirmed_and_stays_a_verdict():
    """An unbounded one-shot LP is re-solved (presolve off, then IPM) and still reported UNBOUNDED;
    the instance's options are restored afterwards."""
    lp = HighsLP.from_arrays(np.array([-1.0]), np.zeros((1, 1)), np.ones(1), (0, None), solver="simplex", presolve=True)
    assert lp.solve().status is Status.UNBOUNDED
    assert lp.h.getOptionValue("presolve")[1] == "on" and lp.h.getOptionValue("solver")[1] == "simplex"
    # min −x − y s.t. x + y ≤ 1, x ≥ 0, y free: bounded (the row caps the objective), optimum −1
    ok = HighsLP.from_arrays(np.array([-1.0, -1.0]), np.ones((1, 2)), np.ones(1), [(0, None), (None, None)]).solve()
    assert ok.status is Status.OPTIMAL and ok.objective == pytest.approx(-1.0)


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
