"""The forest models of the minimax LP that the pair formulations (:mod:`.pair_formulations`) build.

All take a :class:`marg.learners.minimax.problem.MinimaxProblem` whose map holds the nodes
and EVERY candidate edge (so λ and the excluded cells are those of the whole candidate
set) and read a :class:`.solution.MinimaxSolution` over the full map (the LP's μ, zero off
the forest; ``edges`` the forest; ``iterations`` R* per greedy step, or the running minimum of
R(μ) over the row-generation rounds; ``bound`` the box on |μ| per flat entry):

- :func:`forest_once` — the exact forest epigraph LP (:func:`.forest_lp.solve_compact`,
  ``"forest"``) or row generation with the max-sum oracle (:meth:`.lp_model.MinimaxModel.for_rows`, ``"forest-rows"``)
  on a given forest;
- greedy edges (:class:`GreedyEdges`) — start first-order and add, while R* drops by more
  than ``tol``, the forest-keeping edge whose R* is lowest: a column model of the engine's
  column-generation loop (:class:`.fit.Greedy`; ``k_max`` the cap on edges; ``stop``
  converged, k_max, or time_limit when a row-generation solve did not finish). A candidate
  whose marginals the current
  worst-case distribution α already matches (v_e = max |P_α(x_i, x_j, y) − τ_e| − λ_e ≤ 0)
  provably cannot lower R* (α stays dual feasible) and is skipped; of the others the
  ``candidates`` first in ``rank`` are solved exactly. The compact formulation reads α from
  the LP's flows (:func:`.worst_case.pair_marginals`); the row formulation keeps ONE
  warm-started LP whose rows carry every candidate's coefficients.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from typing import Any, Callable, Sequence

import numpy as np

from marg.errors import SolverError

from ..features.structure import UnionFind
from .forest import EXCLUDED, ForestOracle
from .forest_lp import solve_compact
from .problem import MinimaxProblem
from .generation import Pricing, solve_boxed
from .layout import column_bounds
from .lp_model import MinimaxModel
from .solution import MinimaxSolution
from .worst_case import pair_marginals

FORMULATIONS = ("compact", "rows")
"""DCC's ``solver`` values: the forest epigraph LP or row generation."""


def _fit(problem: MinimaxProblem, edges: list[tuple[int, int]], mu: np.ndarray, lower: list[float], upper: list[float],
         iterations: list[float], converged: bool, bound: np.ndarray, n_rows: int) -> MinimaxSolution:
    """A forest solve on the full candidate map as the one result type: the LP's μ (zero off the
    forest and on excluded cells, not yet post-processed: φ NaN), ``value`` the last R*."""
    return MinimaxSolution(
        mu=np.asarray(mu, dtype=np.float64).reshape(problem.K, problem.D), tau=problem.tau, lam=problem.lam,
        phi=float("nan"), value=float(iterations[-1]), iterations=list(iterations), lower=list(lower),
        upper=list(upper), converged=bool(converged), n_rows=int(n_rows), impossible=problem.layout.excluded,
        bound=bound, edges=list(edges))


def node_and_edge_columns(problem: MinimaxProblem, active: Sequence[int]) -> np.ndarray:
    """Ψ columns of the nodes and of the candidate edges ``active`` (edge indices of the problem's map)."""
    full = problem.fmap
    return np.concatenate([np.arange(full.nodes.dim)] + [full.edge_columns(e) for e in active]).astype(np.int64)


def _compact(problem: MinimaxProblem, active: list[int]) -> tuple[MinimaxSolution, ForestOracle]:
    oracle = ForestOracle(problem.fmap, problem.K, active, exclude=problem.layout.excluded)
    return solve_compact(oracle, problem.tau, problem.lam,
                         problem.layout.lp_columns(node_and_edge_columns(problem, active))), oracle


def _row_lp(problem: MinimaxProblem, bound: float) -> MinimaxModel:
    return MinimaxModel.for_rows(problem.tau, problem.lam, column_bounds(problem.fmap, problem.K, bound))


def _initial_rows(lp: MinimaxModel, oracle: ForestOracle) -> None:
    """Covering rows, plus the best allowed row of every label subset at μ = 0 (so ν is
    bounded even when exclusions leave no covering row for some subset)."""
    lp.add_cuts(oracle.covering_cuts())
    lp.add_cuts([c for c in oracle.most_violated(np.zeros(lp.m)) if c.violation > -0.5 * EXCLUDED])


def _drop_vacuous_rows(lp: MinimaxModel, problem: MinimaxProblem, e: int) -> None:
    """Delete the rows crossing an excluded cell of edge e: vacuous once e is active."""
    full = problem.fmap
    flat = problem.layout.every_label(full.edge_columns(e))
    flat = flat[problem.layout.excluded.ravel()[flat]]
    if flat.size == 0 or lp.n_rows == 0:
        return
    hit = np.flatnonzero(np.asarray((lp.row_matrix()[:, flat] != 0).sum(axis=1)).ravel() > 0)
    if hit.size:
        lp.delete_rows(hit)


def forest_once(problem: MinimaxProblem, forest: Sequence[tuple[int, int]], compact: bool, bound: float = 1e3,
                tol: float = 1e-9, extra_rows: int | None = 0, deadline: float | None = None,
                callback: Callable[[dict[str, Any]], None] | None = None) -> MinimaxSolution:
    """The minimax LP on ``forest`` (node pairs, each a candidate edge of the problem's map): the
    compact epigraph LP, or row generation (``bound``, ``tol``, ``extra_rows``, ``deadline``)."""
    full, K = problem.fmap, problem.K
    cand = list(full.edges)
    active = [cand.index(tuple(e)) for e in forest]
    if compact:
        sol, _ = _compact(problem, active)
        if callback is not None:
            callback({"stage": "compact", "R": sol.value, "edges": len(active)})
        v = sol.value
        return _fit(problem, list(forest), sol.mu, [v], [v], [v], True, np.full(K * full.dim, float(bound)), 0)
    lp = _row_lp(problem, bound)
    lp.add_mu(problem.layout.lp_columns(node_and_edge_columns(problem, active)))
    oracle = ForestOracle(full, K, active, tau=problem.tau, lam=problem.lam, extra_rows=extra_rows,
                          exclude=problem.layout.excluded)
    _initial_rows(lp, oracle)
    res = solve_boxed(lp, oracle, tol=tol, deadline=deadline, callback=callback)
    if not res.upper:
        raise SolverError("the forest minimax LP did not produce a solution within the time limit")
    iters = list(np.minimum.accumulate(np.asarray(res.upper)))
    return _fit(problem, list(forest), lp.mu.copy(), res.lower, res.upper, iters, res.converged, lp.bound, lp.n_rows)


def _violated_in_rank_order(free: list[int], viol: np.ndarray, cand: list[tuple[int, int]],
                            rank: dict[tuple[int, int], Any],
                            candidates: int | None) -> list[int]:
    order = sorted((free[t] for t in range(len(free)) if viol[t] > 1e-9), key=lambda e: rank[cand[e]])
    return order if candidates is None else order[: int(candidates)]


class GreedyEdges(ABC):
    """Greedy edges as a column model of :func:`.generation.generate_columns`: the columns are candidate edges.

    ``solve`` gives R* of the forest so far; ``price`` skips the candidates whose marginals the
    worst-case distribution already matches, solves the ``candidates`` first in ``rank`` of the
    others with each added, and lets in the best if it lowers R* by more than ``tol`` (else
    nothing enters: converged); ``update`` adds it. ``k_max`` is the cap on edges. A subclass
    holds the model: :meth:`_solve_model`, :meth:`_violations`, :meth:`_trials`, :meth:`_add`,
    :meth:`_restore` and :meth:`result`.
    """

    def __init__(self, problem: MinimaxProblem, rank: dict[tuple[int, int], Any], tol: float, candidates: int | None,
                 callback: Callable[[dict[str, Any]], None] | None):
        self.problem, self.rank, self.tol, self.candidates, self.callback = problem, rank, tol, candidates, callback
        self.cand = list(problem.fmap.edges)
        self.chosen: list[int] = []
        self.uf = UnionFind(problem.fmap.n_nodes)
        self.R = float("nan")
        self.converged = True  # the last solve converged (row generation within its time limit)
        self.lower: list[float] = []
        self.upper: list[float] = []
        self._best: int | None = None
        self._added = False

    def solve(self, deadline: float | None) -> float:
        self.R, self.converged = self._solve_model()
        if self._added and self.callback is not None:
            self.callback({"stage": "greedy", "edges": len(self.chosen), "R": self.R,
                           "edge": self.problem.fmap.edge_names[self.chosen[-1]]})
        self._added = False
        return self.R

    def price(self, deadline: float | None) -> Pricing:
        record, size = {"edges": len(self.chosen)}, {"size": f"{len(self.chosen)} edges"}
        if not self.converged:  # the last row generation stopped at its time limit: nothing is proven
            return Pricing(0, record, complete=False, progress=size)
        cand = self.cand
        free = [e for e in range(len(cand)) if e not in self.chosen
                and self.uf.find(cand[e][0]) != self.uf.find(cand[e][1])]
        order = _violated_in_rank_order(free, self._violations(free), cand, self.rank, self.candidates) if free else []
        if not order:  # no edge left, or α matches every candidate's marginals: no single edge lowers R*
            return Pricing(0, record, progress=size)
        best, best_R = self._trials(order)
        if best is None or self.R - best_R <= self.tol:
            self._restore()
            return Pricing(0, {**record, "tried": len(order)}, progress=size)
        self._best = best
        return Pricing(1, {**record, "tried": len(order)}, progress=size)

    def update(self) -> None:
        best = self._best
        assert best is not None, "update() follows a price() that let an edge in"
        self.chosen.append(best)
        self.uf.union(*self.cand[best])
        self._add(best)
        self._added = True

    def edges(self) -> list[tuple[int, int]]:
        return [self.cand[e] for e in self.chosen]

    @abstractmethod
    def _solve_model(self) -> tuple[float, bool]:
        """R* of the chosen forest and whether its solve converged."""

    @abstractmethod
    def _violations(self, free: list[int]) -> np.ndarray:
        """v_e of the ``free`` candidate edges at the current worst-case distribution."""

    @abstractmethod
    def _trials(self, order: list[int]) -> tuple[int | None, float]:
        """The best of the edges ``order`` (None: none lowers R*) and its R*."""

    @abstractmethod
    def _add(self, e: int) -> None:
        """Put edge ``e`` in the model."""

    @abstractmethod
    def result(self, iterations: list[float]) -> MinimaxSolution:
        """The search's solution on the full candidate map (``iterations`` its R* per step)."""

    def _restore(self) -> None:
        """Bring the model back to the chosen forest after trials that did not pay."""


class GreedyCompact(GreedyEdges):
    """Each trial is the exact forest epigraph LP; α is read from the current LP's flows."""

    def __init__(self, problem: MinimaxProblem, rank: dict[tuple[int, int], Any], tol: float, candidates: int | None,
                 callback: Callable[[dict[str, Any]], None] | None, bound: float):
        super().__init__(problem, rank, tol, candidates, callback)
        self.bound = bound
        self.sol: MinimaxSolution  # the chosen forest's LP and oracle, from the first solve on
        self.orc: ForestOracle
        self._pending: tuple[MinimaxSolution, ForestOracle] | None = None

    def _solve_model(self) -> tuple[float, bool]:
        if self._pending is not None:  # the best trial's LP is the forest's
            self.sol, self.orc = self._pending
            self._pending = None
        else:
            self.sol, self.orc = _compact(self.problem, self.chosen)
            self.lower.append(self.sol.value)
        return self.sol.value, True

    def _violations(self, free: list[int]) -> np.ndarray:
        full, K, tau, lam = self.problem.fmap, self.problem.K, self.problem.tau, self.problem.lam
        joint = pair_marginals(self.orc, self.sol.read.flows, [self.cand[e] for e in free])
        viol = np.empty(len(free))
        for t, e in enumerate(free):
            cols = full.edge_columns(e)
            viol[t] = float((np.abs(joint[self.cand[e]].reshape(K, -1) - tau[:, cols]) - lam[:, cols]).max())
        return viol

    def _trials(self, order: list[int]) -> tuple[int | None, float]:
        best: int | None = None
        best_sol, best_orc = self.sol, self.orc
        for e in order:
            se, oe = _compact(self.problem, self.chosen + [e])
            self.lower.append(se.value)
            if se.value < best_sol.value:
                best, best_sol, best_orc = e, se, oe
        self._pending = (best_sol, best_orc)
        return best, best_sol.value

    def _add(self, e: int) -> None:
        """The forest's LP is the best trial's (kept in ``_pending``)."""

    def _restore(self) -> None:
        self._pending = None

    def result(self, iterations: list[float]) -> MinimaxSolution:
        full, K = self.problem.fmap, self.problem.K
        return _fit(self.problem, self.edges(), self.sol.mu, self.lower, self.lower, iterations, True,
                    np.full(K * full.dim, float(self.bound)), 0)


class GreedyRows(GreedyEdges):
    """ONE warm-started row-generation LP whose rows carry every candidate's coefficients;
    each trial adds an edge's columns, re-solves and takes them out again."""

    def __init__(self, problem: MinimaxProblem, rank: dict[tuple[int, int], Any], tol: float, candidates: int | None,
                 callback: Callable[[dict[str, Any]], None] | None, bound: float, row_tol: float,
                 extra_rows: int | None, time_limit: float | None):
        super().__init__(problem, rank, tol, candidates, callback)
        full = problem.fmap
        self.row_tol, self.time_limit = row_tol, time_limit
        self.lp = _row_lp(problem, bound)
        self.lp.add_mu(problem.layout.lp_columns(np.arange(full.nodes.dim)))
        self.oracle = ForestOracle(full, problem.K, [], tau=problem.tau, lam=problem.lam, extra_rows=extra_rows,
                                   exclude=problem.layout.excluded)
        _initial_rows(self.lp, self.oracle)

    def _solve_model(self) -> tuple[float, bool]:
        """Row generation to the forest's R* within ``time_limit`` seconds (each solve its own)."""
        deadline = None if self.time_limit is None else time.perf_counter() + float(self.time_limit)
        res = solve_boxed(self.lp, self.oracle, tol=self.row_tol, deadline=deadline, callback=self.callback)
        if not res.upper:
            raise SolverError("the forest minimax LP did not produce a solution within the time limit")
        self.lower.extend(res.lower)
        self.upper.extend(res.upper)
        return float(res.upper[-1]), bool(res.converged)

    def _violations(self, free: list[int]) -> np.ndarray:
        full = self.problem.fmap
        return np.array([float(self.lp.dual_violation(self.problem.layout.every_label(full.edge_columns(e))).max())
                         for e in free])

    def _trials(self, order: list[int]) -> tuple[int | None, float]:
        problem, lp, oracle = self.problem, self.lp, self.oracle
        best, best_R = None, self.R
        for e in order:
            cols = problem.layout.lp_columns(problem.fmap.edge_columns(e))
            lp.add_mu(cols)
            _drop_vacuous_rows(lp, problem, e)
            oracle.set_active(self.chosen + [e])
            lp.add_cuts(oracle.covering_cuts([e], nodes=False))
            Re, conv = self._solve_model()
            lp.remove_mu(cols)
            if conv and Re < best_R:
                best, best_R = e, Re
        oracle.set_active(self.chosen)
        return best, best_R

    def _add(self, e: int) -> None:
        self.lp.add_mu(self.problem.layout.lp_columns(self.problem.fmap.edge_columns(e)))
        _drop_vacuous_rows(self.lp, self.problem, e)
        self.oracle.set_active(self.chosen)

    def _restore(self) -> None:
        self.R, self.converged = self._solve_model()  # the model of the chosen edges

    def result(self, iterations: list[float]) -> MinimaxSolution:
        return _fit(self.problem, self.edges(), self.lp.mu.copy(), self.lower, self.upper, iterations, self.converged,
                    self.lp.bound, self.lp.n_rows)
