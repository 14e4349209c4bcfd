"""The first-order formulations of the minimax LP as objects of the one fit, and SELECT, their column pricing.

``compact`` (:class:`.first_order_models.CompactModel`, the exact epigraph LP) and ``rows``
(:class:`.first_order_models.RowModel`, row generation with the exact first-order oracle) are
registered here (:mod:`.registry`). For :func:`.fit.fit` each ``build``s its model on a
first-order problem — every feature for :class:`.fit.One`, the initial working set under
:class:`Select` for :class:`.fit.Columns` (Algorithm 1 of seed 000 with the SELECT of
Algorithm 2, settings :class:`SelectPricing`) —, ``read``s the LP's point (typed
:class:`FirstOrderRead`: the working set, the largest dual violation) and ``finish``es with
the empty-cell policy (:func:`.empty_cells.fix_empty_cells_first_order`) on the working set;
φ(μ) over the whole domain is the exact first-order oracle's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from marg.errors import InputError, SolverError

from .empty_cells import FIRST_ORDER_POLICIES, fix_empty_cells_first_order, policy_name
from .first_order_models import CompactModel, RowModel
from .fit import Columns, FitOptions, Search
from .registry import Formulation, register
from .generation import Generation, Pricing
from .pricing import SplitPricer, screening_scores
from .problem import MinimaxProblem, subsets_for
from .separation import FirstOrderOracle
from .solution import Finished, MinimaxSolution


@dataclass(frozen=True)
class SelectPricing:
    """SELECT's settings (seed 000 §4): at most ``n_max`` features enter per iteration, a feature
    enters when its dual violation exceeds ``eps``; the initial set is ``init`` (block indices)
    or the ``n_init`` (default ``n_max``) best by :func:`.pricing.screening_scores`;
    ``exact_batch`` outside features get the exact split LP at a time (default max(4·n_max, 200))."""

    n_max: int = 100
    eps: float = 1e-4
    init: Sequence[int] | None = None
    n_init: int | None = None
    exact_batch: int | None = None

    def initial(self, fmap: Any, tau: np.ndarray) -> np.ndarray:
        """The initial working set (block indices, sorted)."""
        nb = fmap.n_blocks
        if self.init is None:
            k0 = min(nb, self.n_max if self.n_init is None else int(self.n_init))
            return np.sort(np.argsort(-screening_scores(fmap, tau), kind="stable")[:k0])
        J = np.unique(np.asarray(self.init, dtype=np.int64))
        if J.size and (J.min() < 0 or J.max() >= nb):
            raise InputError(f"initial feature index outside 0..{nb - 1}")
        return J


@dataclass(frozen=True)
class FirstOrderRead:
    """What a first-order fit reads besides μ: ``working_set`` (block indices the finish fixes:
    every feature for one LP, the final working set for column generation) and
    ``max_dual_violation`` (column generation: the largest v = |Fᵀα − τ| − λ over all features
    at the last pricing, ≤ ε when converged; NaN for one LP)."""

    working_set: np.ndarray
    max_dual_violation: float = float("nan")


class _Whole:
    """One LP with every feature: the model's solve as :class:`.fit.One` calls it."""

    bound: float  # the box B of the impossible cells' −B (set by the build)

    def __init__(self, model: CompactModel | RowModel, callback: Callable[[dict[str, Any]], None] | None,
                 time_limit: float | None):
        self.model, self.callback, self.time_limit = model, callback, time_limit
        self.converged = False

    def solve(self, deadline: float | None) -> float:
        status = self.model.solve(deadline=deadline, callback=self.callback)
        if not self.model.upper_hist:
            raise SolverError(f"the minimax LP produced no solution within the time limit ({self.time_limit} s)")
        self.converged = status == "optimal"
        return float(self.model.value)


class FirstOrder(Formulation[MinimaxProblem, "_Whole | Select"]):
    """A first-order formulation (``compact`` or ``rows``) as an object of the one fit."""

    def build(self, problem: MinimaxProblem, search: Search, options: FitOptions) -> _Whole | Select:
        fmap, tau, lam = problem.fmap, problem.tau, problem.lam
        subsets = subsets_for(problem.K).subsets
        columns = isinstance(search, Columns)
        model: CompactModel | RowModel
        if self.name == "compact":
            model = CompactModel(fmap, tau, lam, subsets, lp_solver="simplex" if columns else options.lp_solver)
        else:
            model = RowModel(fmap, tau, lam, subsets, bound=options.bound, tol=options.tol)
        wrapped: _Whole | Select
        if not isinstance(search, Columns):
            model.add_blocks(np.arange(fmap.n_blocks))
            wrapped = _Whole(model, options.callback, options.time_limit)
        else:
            p = search.pricer
            model.add_blocks(p.initial(fmap, tau))
            batch = int(p.exact_batch) if p.exact_batch is not None else max(4 * p.n_max, 200)
            wrapped = Select(model, SplitPricer(fmap, tau, lam, subsets), int(p.n_max), float(p.eps), batch,
                             options.callback)
        wrapped.bound = float(options.bound)  # the box B of the impossible cells' −B
        return wrapped

    def read(self, wrapped: _Whole | Select, gen: Generation) -> MinimaxSolution:
        model = wrapped.model  # the formulation's model; its LP is ``model.model``
        lp = model.model
        K, D = model.tau.shape
        mu = lp.mu.reshape(K, D)
        if isinstance(wrapped, Select):
            selected = working = model.active
            read = FirstOrderRead(working, wrapped.max_dual_violation)
            converged = gen.converged
        else:  # one LP: every feature is finished; "selected" are those with μ ≠ 0
            fmap = model.fmap
            nzb = np.zeros(fmap.n_blocks, dtype=bool)
            nzb[fmap.block_of_column[np.flatnonzero(np.any(np.abs(mu) > 1e-12, axis=0))]] = True
            selected, read, converged = np.flatnonzero(nzb), FirstOrderRead(np.arange(fmap.n_blocks)), wrapped.converged
        return MinimaxSolution(
            mu=mu, tau=model.tau, lam=model.lam, value=float(model.value), phi=float(model.phi),
            iterations=list(gen.iterations),
            lower=list(model.lower_hist), upper=list(model.upper_hist), selected=selected, converged=converged,
            n_rows=lp.n_rows, impossible=np.zeros((K, D), dtype=bool), bound=model.bound_flat(wrapped.bound),
            simplex_iterations=lp.lp.simplex_iterations, lp_columns=int(model.in_model.sum()), read=read)

    def finish(self, problem: MinimaxProblem, raw: MinimaxSolution, options: FitOptions) -> Finished:
        """Empty cells on the working set by ``options.empty`` (``"impossible"``: μ = −B; ``"keep"``:
        the LP's μ, the empty cells still reported); φ(μ) by the exact first-order oracle."""
        fmap, tau, lam = problem.fmap, problem.tau, problem.lam
        K, D = tau.shape
        blocks = raw.read.working_set
        if policy_name(options.empty, FIRST_ORDER_POLICIES, "the first-order minimax LP") == "impossible":
            mu, empty = fix_empty_cells_first_order(fmap, raw.mu, tau, lam, raw.bound, blocks)
        else:
            mu, empty = raw.mu.copy(), np.zeros((K, D), dtype=bool)
            for i in blocks:
                b = fmap.blocks[int(i)]
                if b.kind == "onehot":
                    empty[:, b.slice] = (tau[:, b.slice] + lam[:, b.slice]) <= 0.0
        oracle = FirstOrderOracle(fmap, K)
        nzb = np.zeros(fmap.n_blocks, dtype=bool)
        nzb[fmap.block_of_column[np.flatnonzero(np.any(mu != 0, axis=0))]] = True
        oracle.set_active(np.flatnonzero(nzb))
        return Finished(fmap, mu, tau, lam, empty, oracle.phi(mu.ravel()), float(options.bound))


COMPACT = register(FirstOrder("compact", "the first-order epigraph LP", ("MRC",), searches=("one", "columns")))
ROWS = register(FirstOrder("rows", "first-order row generation", ("MRC",), searches=("one", "columns")))


class Select:
    """MRC's column model for :func:`.generation.generate_columns`: a formulation whose features
    enter and leave in place (:class:`CompactModel`, :class:`RowModel`), priced by SELECT.

    SELECT (Algorithm 2 of seed 000) drops the features of the working set whose dual
    constraints are all over-satisfied (v < 0, hence μ = 0 there) and lets in the at most
    ``n_max`` outside features with the largest violation v_i > ``eps`` (the IPF bound of
    :class:`SplitPricer` filters, its exact split LP decides, ``batch`` features at a time).
    ``max_dual_violation`` is the largest v over all features at the last pricing.
    """

    bound: float  # the box B of the impossible cells' −B (set by the build)

    def __init__(self, model: CompactModel | RowModel, pricer: SplitPricer, n_max: int, eps: float, batch: int,
                 callback: Callable[[dict[str, Any]], None] | None = None):
        self.model, self.pricer = model, pricer
        self.n_max, self.eps, self.batch = n_max, eps, batch
        self.callback = callback
        self.max_dual_violation = np.inf
        self._step: tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, np.ndarray]] | None = None

    def solve(self, deadline: float | None) -> float | None:
        """The restricted LP's R^k, or None when the deadline stopped it."""
        status = self.model.solve(deadline=deadline, callback=self.callback)
        return float(self.model.value) if status == "optimal" else None

    def price(self, deadline: float | None) -> Pricing:
        """SELECT at the current point (the exact split LPs run to the end: the pricing is complete)."""
        model, pricer, eps, n_max = self.model, self.pricer, self.eps, self.n_max
        W = model.W
        Jb, vJ, mJ = model.block_violation()
        drop = Jb[(vJ < -1e-8) & (mJ == 0.0)]
        out = np.flatnonzero(~model.in_model)
        v_heur = pricer.heuristic(out, W, eps) if out.size else np.zeros(0)
        over = v_heur > eps
        order = out[over][np.argsort(-v_heur[over], kind="stable")]
        exact_v: dict[int, float] = {}
        splits: dict[int, np.ndarray] = {}
        for s0 in range(0, order.size, self.batch):
            chunk = order[s0 : s0 + self.batch]
            v, q = pricer.exact(chunk, W)
            exact_v.update({int(i): float(t) for i, t in zip(chunk, v)})
            splits.update(q)
            if sum(t > eps for t in exact_v.values()) >= n_max:
                break
        viol = sorted(((t, i) for i, t in exact_v.items() if t > eps), reverse=True)
        enter = np.array(sorted(i for _, i in viol[:n_max]), dtype=np.int64)
        v_known = v_heur.copy()
        for j, i in enumerate(out):
            if int(i) in exact_v:
                v_known[j] = exact_v[int(i)]
        self.max_dual_violation = float(max(vJ.max() if vJ.size else -np.inf,
                                            v_known.max() if v_known.size else -np.inf))
        self._step = (drop, enter, W, splits)
        return Pricing(int(enter.size), {"features": int(model.in_model.sum()), "dropped": int(drop.size),
                                         "rows": model.model.n_rows, "heuristic_flagged": int(over.sum()),
                                         "exact_priced": len(exact_v)})

    def update(self) -> None:
        """Drop the idle features, let the priced ones in (at μ = 0, rows filled by their splits)."""
        assert self._step is not None, "update() follows a price()"
        drop, enter, W, splits = self._step
        self.model.remove_blocks(drop)
        self.model.add_blocks(enter, W=W, splits=splits)
