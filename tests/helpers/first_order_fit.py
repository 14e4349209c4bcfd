"""The first-order minimax fit by name: one LP with every feature, or column generation over features.

Shorthands of :func:`.fit.fit` on a first-order problem (:meth:`.problem.MinimaxProblem.first_order`)
with a first-order formulation (:mod:`.first_order`): :func:`solve_full` is ``fit(problem,
formulation, One())``, :func:`solve_cg` ``fit(problem, formulation, Columns(SelectPricing(…), k_max))``.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from marg.learners.minimax.first_order import SelectPricing
from marg.learners.minimax.fit import Columns, FitOptions, One, fit
from marg.learners.minimax.registry import formulation as named
from marg.learners.minimax.problem import MinimaxProblem
from marg.learners.minimax.solution import MinimaxSolution


def solve_full(problem: MinimaxProblem, tol: float = 1e-9, bound: float = 1e3, time_limit: float | None = None,
               callback: Callable[[dict[str, Any]], None] | None = None, formulation: str = "compact",
               lp_solver: str = "simplex",
               empty_cells: str = "impossible") -> MinimaxSolution:
    """LP (13) with every feature in the model: ``fit(problem, formulation, One())`` (:class:`.fit.FitOptions` for the
    rest)."""
    options = FitOptions(bound=bound, tol=tol, time_limit=time_limit, callback=callback, lp_solver=lp_solver,
                         empty=empty_cells)
    return fit(problem, named(formulation, "MRC"), One(), options)


def solve_cg(problem: MinimaxProblem, n_max: int = 100, eps: float = 1e-4, k_max: int = 10, tol: float = 1e-9,
             bound: float = 1e3, init: Sequence[int] | None = None, n_init: int | None = None,
             time_limit: float | None = None, callback: Callable[[dict[str, Any]], None] | None = None,
             formulation: str = "compact", exact_batch: int | None = None,
             empty_cells: str = "impossible") -> MinimaxSolution:
    """Algorithm 1 of seed 000 with the SELECT of Algorithm 2 (:class:`.first_order.Select`): R^1 ≥ R^2 ≥ …,
    each a certificate; at ε = 0 optimal for the whole problem, in general R* ≤ R^k ≤ R* + ε‖μ*‖₁ (Theorem 3).
    ``selected`` is the final working set, ``stop`` why it stopped, ``read.max_dual_violation`` the largest v."""
    pricer = SelectPricing(n_max=int(n_max), eps=float(eps), init=init, n_init=n_init, exact_batch=exact_batch)
    options = FitOptions(bound=bound, tol=tol, time_limit=time_limit, callback=callback, empty=empty_cells)
    return fit(problem, named(formulation, "MRC"), Columns(pricer, k_max=int(k_max)), options)
