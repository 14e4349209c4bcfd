"""Drivers of the minimax LP on a forest of pairwise features: a given forest, or edges added greedily.

All take a :class:`marg.learners.minimax.problem.MinimaxProblem` whose map holds the nodes
and EVERY candidate edge (so λ and the excluded cells are those of the whole candidate
set) and return a :class:`.solution.MinimaxSolution` over the full map (the LP's μ, zero off
the forest; ``edges`` the forest; ``iterations`` R* per greedy step, or the running minimum of
R(μ) over the row-generation rounds; ``bound`` the box on |μ| per flat entry):

- :func:`solve_forest` — the exact forest epigraph LP (:func:`.forest_lp.solve_compact`,
  ``formulation="compact"``) or row generation with the max-sum oracle
  (:mod:`.rows`, ``formulation="rows"``) on a given forest;
- :func:`greedy_forest` — start first-order and add, while R* drops by more than ``tol``,
  the forest-keeping edge whose R* is lowest. A candidate whose marginals the current
  worst-case distribution α already matches (v_e = max |P_α(x_i, x_j, y) − τ_e| − λ_e ≤ 0)
  provably cannot lower R* (α stays dual feasible) and is skipped; of the others the
  ``candidates`` first in ``rank`` are solved exactly. The compact formulation reads α from
  the LP's flows (:func:`.worst_case.pair_marginals`); the row formulation keeps ONE
  warm-started LP whose rows carry every candidate's coefficients.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

import numpy as np

from marg.errors import SolverError

from ..structure import UnionFind
from .forest import EXCLUDED, ForestOracle
from .forest_lp import solve_compact
from .problem import MinimaxProblem
from .rows import MinimaxLP, solve_boxed
from .solution import MinimaxSolution
from .worst_case import pair_marginals

FORMULATIONS = ("compact", "rows")


def _fit(problem: MinimaxProblem, edges: list[tuple[int, int]], mu: np.ndarray, lower: list[float], upper: list[float],
         iterations: list[float], converged: bool, bound: np.ndarray, n_rows: int) -> MinimaxSolution:
    """A forest solve on the full candidate map as the one result type: the LP's μ (zero off the
    forest and on excluded cells, not yet post-processed: φ NaN), ``value`` the last R*."""
    return MinimaxSolution(
        mu=np.asarray(mu, dtype=np.float64).reshape(problem.K, problem.D), tau=problem.tau, lam=problem.lam,
        phi=float("nan"), value=float(iterations[-1]), iterations=list(iterations), lower=list(lower),
        upper=list(upper), converged=bool(converged), n_rows=int(n_rows), impossible=problem.excluded,
        bound=bound, edges=list(edges))


def _node_and_edge_columns(problem: MinimaxProblem, active: Sequence[int]) -> np.ndarray:
    full = problem.fmap
    return np.concatenate([np.arange(full.nodes.dim)] + [full.edge_columns(e) for e in active]).astype(np.int64)


def _compact(problem: MinimaxProblem, active: list[int]) -> tuple[MinimaxSolution, ForestOracle]:
    oracle = ForestOracle(problem.fmap, problem.K, active, exclude=problem.excluded)
    return solve_compact(oracle, problem.tau, problem.lam, problem.lp_columns(_node_and_edge_columns(problem, active))), oracle


def _row_lp(problem: MinimaxProblem, bound: float) -> MinimaxLP:
    full = problem.fmap
    per = np.full(full.dim, float(bound))
    for b in full.blocks:  # a raw numeric column moves the score by up to max(|lo|, |hi|)·μ
        if b.kind == "numeric":
            per[b.offset] = float(bound) / max(abs(b.lo), abs(b.hi), 1e-12)
    return MinimaxLP(problem.tau, problem.lam, np.tile(per, problem.K))


def _initial_rows(lp: MinimaxLP, oracle: ForestOracle) -> None:
    """Covering rows, plus the best allowed row of every label subset at μ = 0 (so ν is
    bounded even when exclusions leave no covering row for some subset)."""
    lp.add_rows(oracle.covering_cuts())
    lp.add_rows([c for c in oracle.most_violated(np.zeros(lp.m)) if c.violation > -0.5 * EXCLUDED])


def _drop_vacuous_rows(lp: MinimaxLP, problem: MinimaxProblem, e: int) -> None:
    """Delete the rows crossing an excluded cell of edge e: vacuous once e is active."""
    full = problem.fmap
    flat = full.flat_columns(full.edge_columns(e), problem.K)
    flat = flat[problem.excluded.ravel()[flat]]
    if flat.size == 0 or lp.n_rows == 0:
        return
    hit = np.flatnonzero(np.asarray((lp.row_matrix()[:, flat] != 0).sum(axis=1)).ravel() > 0)
    if hit.size:
        lp.delete_rows(hit)


def solve_forest(
    problem: MinimaxProblem,
    forest: Sequence[tuple[int, int]],
    formulation: str = "compact",
    bound: float = 1e3,
    tol: float = 1e-9,
    extra_rows: int | None = 0,
    time_limit: float | None = None,
    callback: Callable[[dict], None] | None = None,
) -> MinimaxSolution:
    """The minimax LP on ``forest`` (node pairs, each a candidate edge of the problem's map).

    Parameters
    ----------
    formulation : {"compact", "rows"}
    bound, tol, extra_rows, time_limit : row generation only (box on |μ|, relative row
        tolerance, extra constrained-maximum rows per subset and round, seconds — the options
        of every minimax driver, :func:`.drivers.solve_full` and :func:`.drivers.solve_cg` too).
    """
    deadline = None if time_limit is None else time.perf_counter() + float(time_limit)
    full, K = problem.fmap, problem.K
    cand = list(full.edges)
    active = [cand.index(tuple(e)) for e in forest]
    if formulation == "compact":
        sol, _ = _compact(problem, active)
        if callback is not None:
            callback({"stage": "compact", "R": sol.value, "edges": len(active)})
        v = sol.value
        return _fit(problem, list(forest), sol.mu, [v], [v], [v], True, np.full(K * full.dim, float(bound)), 0)
    lp = _row_lp(problem, bound)
    lp.add_columns(problem.lp_columns(_node_and_edge_columns(problem, active)))
    oracle = ForestOracle(full, K, active, tau=problem.tau, lam=problem.lam, extra_rows=extra_rows, exclude=problem.excluded)
    _initial_rows(lp, oracle)
    res = solve_boxed(lp, oracle, tol=tol, deadline=deadline, callback=callback)
    if not res.upper:
        raise SolverError("the forest minimax LP did not produce a solution within the time limit")
    iters = list(np.minimum.accumulate(np.asarray(res.upper)))
    return _fit(problem, list(forest), lp.mu.copy(), res.lower, res.upper, iters, res.converged, lp.bound, lp.n_rows)


def greedy_forest(
    problem: MinimaxProblem,
    rank: dict[tuple[int, int], Any],
    formulation: str = "compact",
    max_edges: int | None = None,
    tol: float = 1e-4,
    candidates: int | None = 8,
    bound: float = 1e3,
    row_tol: float = 1e-9,
    extra_rows: int | None = 0,
    time_limit: float | None = None,
    callback: Callable[[dict], None] | None = None,
) -> MinimaxSolution:
    """Greedy edges (see the module docstring).

    Parameters
    ----------
    rank : dict node pair -> sortable key
        Order in which violated candidates are tried (smallest first).
    max_edges : int or None
        Cap on the number of edges (default: a spanning forest's worth).
    tol : float
        Stop when the best edge lowers R* by ``tol`` or less.
    candidates : int or None
        Edges solved exactly per step (None: every violated one).
    time_limit : float or None
        Seconds for each row-generation solve (row formulation).
    """
    full = problem.fmap
    cap = full.n_nodes if max_edges is None else int(max_edges)
    if formulation == "compact":
        return _greedy_compact(problem, rank, cap, tol, candidates, bound, callback)
    return _greedy_rows(problem, rank, cap, tol, candidates, bound, row_tol, extra_rows, time_limit, callback)


def _violated_in_rank_order(free: list[int], viol: np.ndarray, cand: list, rank: dict, candidates: int | None) -> list[int]:
    order = sorted((free[t] for t in range(len(free)) if viol[t] > 1e-9), key=lambda e: rank[cand[e]])
    return order if candidates is None else order[: int(candidates)]


def _greedy_compact(problem, rank, cap, tol, candidates, bound, callback) -> MinimaxSolution:
    full, K, tau, lam = problem.fmap, problem.K, problem.tau, problem.lam
    cand = list(full.edges)
    sol, orc = _compact(problem, [])
    R, mu = sol.value, sol.mu
    iters, values = [R], [R]
    chosen: list[int] = []
    uf = UnionFind(full.n_nodes)
    while len(chosen) < cap:
        free = [e for e in range(len(cand)) if e not in chosen and uf.find(cand[e][0]) != uf.find(cand[e][1])]
        if not free:
            break
        # price: how far the worst-case distribution is from each candidate's marginals
        joint = pair_marginals(orc, sol.info["flows"], [cand[e] for e in free])
        viol = np.empty(len(free))
        for t, e in enumerate(free):
            cols = full.edge_columns(e)
            viol[t] = float((np.abs(joint[cand[e]].reshape(K, -1) - tau[:, cols]) - lam[:, cols]).max())
        order = _violated_in_rank_order(free, viol, cand, rank, candidates)
        if not order:
            break  # that distribution matches every candidate: no single edge lowers R*
        best, best_sol, best_orc = None, sol, orc
        for e in order:
            se, oe = _compact(problem, chosen + [e])
            values.append(se.value)
            if se.value < best_sol.value:
                best, best_sol, best_orc = e, se, oe
        if best is None or R - best_sol.value <= tol:
            break
        chosen.append(best)
        uf.union(*cand[best])
        sol, orc = best_sol, best_orc
        R, mu = sol.value, sol.mu
        iters.append(R)
        if callback is not None:
            callback({"stage": "greedy", "edges": len(chosen), "R": R, "edge": full.edge_names[best]})
    return _fit(problem, [cand[e] for e in chosen], mu, values, values, iters, True, np.full(K * full.dim, float(bound)), 0)


def _greedy_rows(problem, rank, cap, tol, candidates, bound, row_tol, extra_rows, time_limit, callback) -> MinimaxSolution:
    full, K = problem.fmap, problem.K
    cand = list(full.edges)
    lp = _row_lp(problem, bound)
    lp.add_columns(problem.lp_columns(np.arange(full.nodes.dim)))
    oracle = ForestOracle(full, K, [], tau=problem.tau, lam=problem.lam, extra_rows=extra_rows, exclude=problem.excluded)
    _initial_rows(lp, oracle)
    lower: list[float] = []
    upper: list[float] = []

    def solve() -> tuple[float, bool]:
        deadline = None if time_limit is None else time.perf_counter() + float(time_limit)
        res = solve_boxed(lp, oracle, tol=row_tol, deadline=deadline, callback=callback)
        if not res.upper:
            raise SolverError("the forest minimax LP did not produce a solution within the time limit")
        lower.extend(res.lower)
        upper.extend(res.upper)
        return float(res.upper[-1]), bool(res.converged)

    R, converged = solve()
    iters = [R]
    chosen: list[int] = []
    uf = UnionFind(full.n_nodes)
    while len(chosen) < cap and converged:
        free = [e for e in range(len(cand)) if e not in chosen and uf.find(cand[e][0]) != uf.find(cand[e][1])]
        if not free:
            break
        # price: how far the current worst-case distribution is from each edge's marginals
        viol = np.array([float(lp.dual_violation(full.flat_columns(full.edge_columns(e), K)).max()) for e in free])
        order = _violated_in_rank_order(free, viol, cand, rank, candidates)
        if not order:
            break  # α is dual feasible with any single extra edge: none can lower R*
        best, best_R = None, R
        for e in order:
            cols = problem.lp_columns(full.edge_columns(e))
            lp.add_columns(cols)
            _drop_vacuous_rows(lp, problem, e)
            oracle.set_active(chosen + [e])
            lp.add_rows(oracle.covering_cuts([e], nodes=False))
            Re, conv = solve()
            lp.remove_columns(cols)
            if conv and Re < best_R:
                best, best_R = e, Re
        oracle.set_active(chosen)
        if best is None or R - best_R <= tol:
            R, converged = solve()  # restore the model of the chosen edges
            break
        chosen.append(best)
        uf.union(*cand[best])
        lp.add_columns(problem.lp_columns(full.edge_columns(best)))
        _drop_vacuous_rows(lp, problem, best)
        oracle.set_active(chosen)
        R, converged = solve()
        iters.append(R)
        if callback is not None:
            callback({"stage": "greedy", "edges": len(chosen), "R": R, "edge": full.edge_names[best]})
    return _fit(problem, [cand[e] for e in chosen], lp.mu.copy(), lower, upper, iters, converged, lp.bound, lp.n_rows)
