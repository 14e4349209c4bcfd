"""The pair formulations of the minimax LP (DCC's) as objects of the one fit: ``forest``, ``forest-rows``, ``local``.

Each is registered here (:mod:`.registry`) and takes a problem whose map holds the nodes
and EVERY candidate edge (:func:`.from_summary.problem_from` on a pairwise map):

- ``forest`` (the exact forest epigraph LP, :func:`.forest_lp.solve_compact`) and
  ``forest-rows`` (row generation with the forest's max-sum oracle, :mod:`.rows`) run
  :class:`.fit.One` on the given forest (``One(edges)``) or :class:`.fit.Greedy`
  (:class:`.forest_models.GreedyEdges`); their finish fixes the empty cells of the chosen
  forest's map by max-marginals (:func:`.empty_cells.fix_empty_cells_forest`);
- ``local`` (any pair graph, :func:`.local.solve_local`: R*_L ≥ R*) runs ``One(edges)``; its
  finish fixes them at its reparametrisation (:func:`.empty_cells.fix_empty_cells_local`).

With no edges every one of them is the first-order problem: MRC is DCC with no edges.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import replace
from typing import Any, Callable, ClassVar, Sequence, cast

import numpy as np

from ..features.pairwise import PairwiseFeatureMap
from .empty_cells import fix_empty_cells_forest, fix_empty_cells_local
from .forest import ForestOracle
from .forest_models import GreedyCompact, GreedyRows, forest_once, node_and_edge_columns
from .fit import FitOptions, Greedy, One, Search
from .registry import Formulation, register
from .generation import Generation
from .local import solve_local
from .problem import MinimaxProblem
from .solution import Finished, MinimaxSolution


def submodel(problem: MinimaxProblem, edges: Sequence[tuple[int, int]]) -> tuple[PairwiseFeatureMap, np.ndarray]:
    """The map over ``edges`` (node-index pairs, candidate edges of the problem's map) and its Ψ columns in the full
    map."""
    full = problem.fmap
    cand = list(full.edges)
    pmap = PairwiseFeatureMap(full.blocks, [b.column for b in full.blocks], edges)
    return pmap, node_and_edge_columns(problem, [cand.index(e) for e in edges])


class OneShot:
    """A one-shot LP as :class:`.fit.One` solves it: ``run(deadline)`` gives the solution; a
    ``stage`` record ``{"stage", "R", "edges"}`` goes to the callback after it."""

    def __init__(self, run: Callable[[float | None], MinimaxSolution],
                 callback: Callable[[dict[str, Any]], None] | None = None,
                 stage: str | None = None):
        self.run, self.callback, self.stage = run, callback, stage
        self.solution: MinimaxSolution | None = None
        self.converged = False

    def solve(self, deadline: float | None) -> float:
        sol = self.solution = self.run(deadline)
        self.converged = bool(sol.converged)
        if self.stage is not None and self.callback is not None:
            self.callback({"stage": self.stage, "R": sol.value, "edges": len(sol.edges)})
        return float(sol.iterations[-1])

    def solved(self) -> MinimaxSolution:
        """The solution of the solve (:class:`.fit.One` ran it)."""
        assert self.solution is not None, "read after the search solved it"
        return self.solution


class Forest(Formulation[MinimaxProblem, "GreedyCompact | GreedyRows | OneShot"]):
    """``forest`` and ``forest-rows``: a given forest or greedy edges, finished by max-marginals."""

    def build(self, problem: MinimaxProblem, search: Search,
              options: FitOptions) -> GreedyCompact | GreedyRows | OneShot:
        compact = self.name == "forest"
        if isinstance(search, Greedy):
            args = (problem, search.rank, search.tol, search.candidates, options.callback, options.bound)
            if compact:
                return GreedyCompact(*args)
            return GreedyRows(*args, options.tol, options.extra_rows, options.time_limit)
        edges = cast(One, search).edges  # it runs One or Greedy (its ``searches``, checked by the fit)
        return OneShot(lambda deadline: forest_once(problem, list(edges), compact, options.bound, options.tol,
                                                    options.extra_rows, None if compact else deadline,
                                                    options.callback))

    def read(self, model: GreedyCompact | GreedyRows | OneShot, gen: Generation) -> MinimaxSolution:
        return model.solved() if isinstance(model, OneShot) else model.result(gen.iterations)

    def finish(self, problem: MinimaxProblem, raw: MinimaxSolution, options: FitOptions) -> Finished:
        K = problem.K
        pmap, keep = submodel(problem, raw.edges)
        tau, lam = problem.tau[:, keep], problem.lam[:, keep]
        B = np.broadcast_to(np.asarray(raw.bound, dtype=np.float64), (K * problem.D,)).reshape(K, problem.D)[:, keep]
        oracle = ForestOracle(pmap, K)
        mu, empty = fix_empty_cells_forest(oracle, raw.mu.reshape(K, problem.D)[:, keep], tau, lam, options.empty,
                                           n=problem.n, alpha=options.alpha)
        return Finished(pmap, mu, tau, lam, empty, float(oracle.phi(mu.ravel())),
                        float(np.max(B)) if B.size else float(options.bound))


class OnSubmap(Formulation[MinimaxProblem, OneShot]):
    """A one-shot LP on the map of the given edges (``One(edges)``): a subclass writes it in
    ``solve_on(problem, pmap, keep)`` (``keep`` the sub-map's columns in the problem's map) and
    its ``finish``; the read is the LP's solution, its ``stage`` the progress record's name."""

    stage: ClassVar[str] = ""

    @abstractmethod
    def solve_on(self, problem: MinimaxProblem, pmap: PairwiseFeatureMap, keep: np.ndarray) -> MinimaxSolution:
        """The LP's solution on the sub-map ``pmap`` (``keep`` its columns in the problem's map)."""

    def build(self, problem: MinimaxProblem, search: Search, options: FitOptions) -> OneShot:
        edges = list(cast(One, search).edges)  # it runs One (its ``searches``, checked by the fit)
        pmap, keep = submodel(problem, edges)
        return OneShot(lambda deadline: replace(self.solve_on(problem, pmap, keep), edges=edges), options.callback,
                       self.stage)

    def read(self, model: OneShot, gen: Generation) -> MinimaxSolution:
        return model.solved()


class Local(OnSubmap):
    """``local``: the local-polytope LP on the given graph, finished at its reparametrisation."""

    stage: ClassVar[str] = "local"

    def solve_on(self, problem: MinimaxProblem, pmap: PairwiseFeatureMap, keep: np.ndarray) -> MinimaxSolution:
        layout = problem.layout.restrict(keep)
        return solve_local(pmap, problem.K, problem.tau[:, keep], problem.lam[:, keep],
                           np.flatnonzero(layout.lp_mask.ravel()),
                           exclude=layout.excluded)

    def finish(self, problem: MinimaxProblem, raw: MinimaxSolution, options: FitOptions) -> Finished:
        pmap, keep = submodel(problem, raw.edges)
        tau, lam = problem.tau[:, keep], problem.lam[:, keep]
        mu, empty, phi = fix_empty_cells_local(pmap, raw.mu, tau, lam, raw.read.offsets, raw.read.nu, options.empty,
                                               n=problem.n, alpha=options.alpha)
        return Finished(pmap, mu, tau, lam, empty, float(phi), float(options.bound))


FOREST = register(Forest("forest", "the forest epigraph LP", ("DCC",), max_order=2, graph="forest",
                         searches=("one", "greedy")))
FOREST_ROWS = register(Forest("forest-rows", "row generation with the forest's max-sum oracle", ("DCC",), max_order=2,
                              graph="forest", searches=("one", "greedy")))
LOCAL = register(Local("local", "the local-polytope LP, a bound R*_L >= R*", ("DCC",), max_order=2, graph="cycles"))
