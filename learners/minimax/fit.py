"""One fit on the minimax engine: build → solve → search → finish → certificate, for every formulation and search.

::

    solution = fit(problem, formulation, search, options)

- ``problem`` — a :class:`.problem.MinimaxProblem` (τ, λ, μ's layout; from a Summary by
  :func:`.from_summary.problem_from`);
- ``formulation`` — a registered :class:`.registry.Formulation` object: ``build`` puts the
  problem on an LP model for the search, ``read`` turns the model and the search's record
  into a :class:`.solution.MinimaxSolution` (the LP's point; its formulation-specific
  read-out typed), ``finish`` gives the empty cells definite values (:mod:`.empty_cells`);
- ``search`` — how the model grows: :class:`One` (one LP on the given statistics; DCC's given
  forest or graph in ``edges``), :class:`Columns` (column generation; ``pricer`` says how the
  formulation prices: SELECT for the first-order MRC, :class:`.first_order.SelectPricing`) or
  :class:`Greedy` (edges added while R drops); the last two run the engine's one loop,
  :func:`.generation.generate_columns`.

The end of a fit has one owner, :func:`certificate`: R(μ) of the finished μ over the whole
domain (the hinge LP's own value for ``kind="hinge"``), which replaces the search's last R^k
(the finish's ``iterate``; boosting, which reports its best iterate, keeps its R^k as recorded);
a finish that raises R is a solver fault (``SolverError``), never silently undone.

MRC is this fit on a first-order problem (a DCC with no edges); DCC on the pair map of its
structure; boosting on a map that grows (:class:`marg.learners.boost.minimax_cg.MonomialProblem`,
``Columns`` with its MMA pricing); the formulations' own modules register them
(:mod:`.first_order`, :mod:`.pair_formulations`, :mod:`marg.learners.classifiers.dcc_hinge`,
:mod:`marg.learners.boost.minimax_cg`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from abc import abstractmethod
from typing import Any, Callable, ClassVar, Protocol, TypeAlias, TypeVar, cast

from marg.errors import InputError, SolverError

from .generation import ColumnModel, Generation, generate_columns
from .problem import MinimaxProblem, risk
from .solution import Finished, MinimaxSolution


class Problem(Protocol):
    """What the one fit knows of a problem: its K classes. The rest is the formulation's own
    (:class:`.problem.MinimaxProblem`, :class:`.fixed_rule_fit.RuleProblem`,
    :class:`marg.learners.boost.minimax_cg.MonomialProblem`): only its ``build`` and ``finish`` read it."""

    @property
    def K(self) -> int: ...


class SearchModel(Protocol):
    """The model a search drives, as a formulation's ``build`` gives it: every one solves to a deadline
    (a ``time.perf_counter()`` value or None) and gives R of its point, or None when the deadline
    stopped it first. A search asks more of it (:class:`OneModel`, :class:`.generation.ColumnModel`,
    :class:`EdgeModel`); which search a formulation's model serves is its ``searches``, checked by :func:`fit`."""

    def solve(self, deadline: float | None) -> float | None: ...


class OneModel(Protocol):
    """What :class:`One` drives: a solve that gives R (it raises if no point was found in time) and
    whether that solve converged."""

    @property
    def converged(self) -> bool: ...

    def solve(self, deadline: float | None) -> float: ...


class EdgeModel(ColumnModel, Protocol):
    """What :class:`Greedy` drives: a column model whose columns are the candidate edges of its problem's map."""

    @property
    def problem(self) -> MinimaxProblem: ...


@dataclass(frozen=True)
class FitOptions:
    """The options every formulation and search read.

    Attributes
    ----------
    bound : float
        Box on |μ| (row generation, enlarged while it binds) and the −B of impossible cells.
    tol : float
        Relative row-violation tolerance (row generation).
    time_limit : float or None
        Seconds (the whole fit for :class:`One` and :class:`Columns`; each row-generation solve
        for :class:`Greedy`); on expiry the last point is kept, ``converged`` False.
    callback : callable or None
        Progress records (the library never prints).
    lp_solver : {"simplex", "ipm", "choose"}
        HiGHS algorithm of a one-LP first-order fit.
    extra_rows : int or None
        Row generation on a forest: extra constrained-maximum rows per subset and round.
    empty : str
        The empty-cell policy of the finish (:data:`.empty_cells.POLICIES`,
        :data:`.empty_cells.FIRST_ORDER_POLICIES`).
    alpha : float
        Family-wise level of ``empty="evidence"``.
    max_rounds : int or None
        A work budget: rounds of row generation (None: until converged). Unlike ``time_limit``
        it stops at the same point on a loaded and an idle machine.
    mip_nodes : int or None
        A work budget: branch-and-bound nodes per separation MILP (HiGHS ``mip_max_nodes``;
        a MILP stopped there keeps its proven bound). None: no limit.
    """

    bound: float = 1e3
    tol: float = 1e-9
    time_limit: float | None = None
    callback: Callable[[dict[str, Any]], None] | None = None
    lp_solver: str = "simplex"
    extra_rows: int | None = 0
    empty: str = "impossible"
    alpha: float = 0.05
    max_rounds: int | None = None
    mip_nodes: int | None = None

    def deadline(self, t0: float) -> float | None:
        """``time.perf_counter()`` value at which the fit started ``t0`` plus the time limit."""
        return None if self.time_limit is None else t0 + float(self.time_limit)


@dataclass(frozen=True)
class One:
    """One LP on the given statistics (``edges``: DCC's given forest or graph, as node-index pairs)."""

    edges: tuple[tuple[int, int], ...] = ()
    name: ClassVar[str] = "one"

    def run(self, model: SearchModel, options: FitOptions, t0: float) -> Generation:
        """Solve once: the model's ``solve(deadline)`` gives R (it raises if no point was found in time)."""
        one = cast(OneModel, model)  # a formulation that runs One builds a OneModel (its ``searches`` say so)
        R = one.solve(options.deadline(t0))
        return Generation(stop="converged" if one.converged else "time_limit", iterations=[float(R)])


@dataclass(frozen=True)
class Columns:
    """Column generation: ``pricer`` (the formulation's pricing settings) prices, the engine's loop runs.

    ``k_max`` iterations past the first; ``patience``/``stall_tol`` the stall rule (None: off). The
    pricer's ``price_last`` (default True) says whether the iteration that meets a stop rule is
    still priced, the model's ``no_solution`` the error when no restricted solve finished.
    """

    pricer: Any
    k_max: int = 10
    patience: int | None = None
    stall_tol: float = 0.0
    name: ClassVar[str] = "columns"

    def run(self, model: SearchModel, options: FitOptions, t0: float) -> Generation:
        columns = cast(ColumnModel, model)  # a formulation that runs Columns builds a ColumnModel
        no_solution = getattr(model, "no_solution",
                              f"the minimax LP produced no solution within the time limit ({options.time_limit} s)")
        return generate_columns(columns, k_max=int(self.k_max), t0=t0, time_limit=options.time_limit,
                                patience=self.patience,
                                stall_tol=self.stall_tol, price_last=getattr(self.pricer, "price_last", True),
                                callback=options.callback, no_solution=no_solution)


@dataclass(frozen=True)
class Greedy:
    """Greedy edges: start first-order and add, while R* drops by more than ``tol``, the best
    forest-keeping edge of the ``candidates`` first in ``rank`` (node pair → sortable key)."""

    rank: dict[tuple[int, int], Any]
    max_edges: int | None = None
    tol: float = 1e-4
    candidates: int | None = 8
    name: ClassVar[str] = "greedy"

    def run(self, model: SearchModel, options: FitOptions, t0: float) -> Generation:
        edges = cast(EdgeModel, model)  # a formulation that runs Greedy builds an EdgeModel
        cap = int(edges.problem.fmap.n_nodes) if self.max_edges is None else int(self.max_edges)
        return generate_columns(edges, k_max=cap, price_last=False)  # progress: the "greedy" record of each edge


Search: TypeAlias = One | Columns | Greedy
"""The searches a fit runs."""

P = TypeVar("P", bound=Problem, contravariant=True)
M = TypeVar("M", bound=SearchModel)


class FitFormulation(Protocol[P, M]):
    """What :func:`fit` asks of a formulation (its plug-in contract; :class:`.registry.Formulation`
    is the base every registered formulation subclasses): its ``name``, ``title`` and ``searches``,
    why it does not run a search, and the three steps, abstract here.

    ``P`` is the problem it reads, ``M`` the model its ``build`` gives the search.
    """

    name: str
    title: str
    searches: tuple[str, ...]

    def accepts_search(self, search: str) -> str: ...

    @abstractmethod
    def build(self, problem: P, search: Search, options: FitOptions) -> M:
        """The LP model ``search`` drives, on ``problem``."""

    @abstractmethod
    def read(self, model: M, gen: Generation) -> MinimaxSolution:
        """The model's point after the search (``gen`` its record) as a solution: μ, τ, λ, the value,
        the typed ``read``."""

    @abstractmethod
    def finish(self, problem: P, raw: MinimaxSolution, options: FitOptions) -> Finished:
        """Definite values for the empty cells of ``raw`` (:mod:`.empty_cells`), φ over the whole domain."""


def certificate(raw: MinimaxSolution, done: Finished) -> float:
    """The certified value of the finished μ: R(μ) = 1 − τᵀμ + φ(μ) + λᵀ|μ| over the whole domain
    (R_L for the local polytope's bound φ_L), the hinge LP's value for ``kind="hinge"``.

    The one place a minimax fit's certificate is decided. A finish never raises R (empty cells
    cost nothing and lowering them only relaxes rows): if it does beyond 1e-6 (relative), the
    solve is at fault and the fit says so.
    """
    if raw.kind == "hinge":
        return float(raw.value)
    value = risk(done.tau, done.lam, done.mu, done.phi)
    if value > raw.value + 1e-6 * max(1.0, abs(raw.value)):
        raise SolverError(f"fixing the empty cells raised the certificate from {raw.value!r} to {value!r} "
                          f"({raw.formulation} formulation)")
    return value


def fit(problem: P, formulation: FitFormulation[P, M], search: Search,
        options: FitOptions = FitOptions()) -> MinimaxSolution:
    """Fit μ on ``problem`` by ``formulation`` and ``search``: the one fit of every minimax learner.

    Returns
    -------
    MinimaxSolution
        On the finished map (``fmap``): μ with its empty cells fixed, φ, ``value`` the
        certificate (:func:`certificate`; also the entry of ``iterations`` the finish names), the search's
        ``stop`` and ``history``, the formulation's typed ``read``, ``seconds``.

    Raises
    ------
    InputError
        When ``formulation`` does not run ``search``.
    InconsistentStatistics, SolverError
        From the LP (no distribution matches τ within λ; HiGHS failed or found nothing in time).
    """
    if search.name not in formulation.searches:
        raise InputError(f"formulation {formulation.name!r} ({formulation.title}) "
                         f"{formulation.accepts_search(search.name)}")
    t0 = time.perf_counter()
    model = formulation.build(problem, search, options)
    gen = search.run(model, options, t0)
    raw = replace(formulation.read(model, gen), formulation=formulation.name)
    done = formulation.finish(problem, raw, options)
    value = certificate(raw, done)
    iterations = list(raw.iterations)
    if iterations and done.iterate is not None:
        iterations[done.iterate] = value
    return replace(raw, fmap=done.fmap, mu=done.mu, tau=done.tau, lam=done.lam, phi=float(done.phi), value=value,
                   iterations=iterations, impossible=done.impossible, bound=done.bound, stop=gen.stop,
                   history=list(gen.history), seconds=time.perf_counter() - t0)
