"""Drivers of the first-order minimax LP: one solve with every feature, or column generation over features.

:func:`solve_full` puts every feature in one LP; :func:`solve_cg` runs the engine's one
column-generation driver (:func:`.generation.generate_columns`, Algorithm 1 of seed 000) on a
formulation whose features enter and leave in place (:mod:`.formulation`), priced by SELECT
(:class:`Select`, Algorithm 2, with :class:`marg.learners.minimax.pricing.SplitPricer`); MRC has
no stall rule. Both
finish with the empty-cell policy and the exact R(μ) over the whole domain. Like the forest
drivers (:mod:`.forest_drivers`) they take a :class:`.problem.MinimaxProblem` and the options
``formulation``, ``bound``, ``tol``, ``time_limit``, ``callback``, and return a
:class:`.solution.MinimaxSolution`.
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

import numpy as np

from marg.errors import InputError, SolverError

from ..features.blocks import FeatureMap
from .empty_cells import FIRST_ORDER_POLICIES, fix_empty_cells_first_order, policy_name
from .formulations import COMPACT, FIRST_ORDER, formulation
from .generation import Pricing, generate_columns
from .pricing import SplitPricer, screening_scores
from .problem import MinimaxProblem, risk, subsets_for
from .separation import FirstOrderOracle
from .solution import MinimaxSolution


def first_order_model(name: str, fmap: FeatureMap, tau: np.ndarray, lam: np.ndarray, bound: float, tol: float,
                      lp_solver: str = "simplex", search: str = "one"):
    """The first-order formulation ``name`` of the registry (:mod:`.formulations`) on (τ, λ): its entry point's model."""
    f = formulation(name, "MRC").check(FIRST_ORDER, search, "MRC")
    subsets = subsets_for(tau.shape[0]).subsets
    if f is COMPACT:
        return f.load()(fmap, tau, lam, subsets, lp_solver=lp_solver)
    return f.load()(fmap, tau, lam, subsets, bound=bound, tol=tol)


def _finish(fmap: FeatureMap, model, tau: np.ndarray, lam: np.ndarray, bound: float, blocks: np.ndarray, empty_cells: str = "impossible") -> tuple[np.ndarray, np.ndarray, float, float]:
    """Empty-cell post-processing on ``blocks`` and the exact R(μ), φ(μ) over the whole domain.

    ``empty_cells="impossible"`` (alias ``"veto"``): :func:`fix_empty_cells_first_order`;
    ``"keep"``: μ as the LP left it (the empty cells are still reported).
    """
    K, D = tau.shape
    mu = model.mu.reshape(K, D)
    empty_cells = policy_name(empty_cells, FIRST_ORDER_POLICIES, "the first-order minimax LP")
    if empty_cells == "impossible":
        mu_fixed, empty = fix_empty_cells_first_order(fmap, mu, tau, lam, model.bound_flat(bound), blocks)
    else:
        mu_fixed = mu.copy()
        empty = np.zeros((K, D), dtype=bool)
        for i in blocks:
            b = fmap.blocks[int(i)]
            if b.kind == "onehot":
                empty[:, b.slice] = (tau[:, b.slice] + lam[:, b.slice]) <= 0.0
    oracle = FirstOrderOracle(fmap, K)
    nzb = np.zeros(fmap.n_blocks, dtype=bool)
    nzb[fmap.block_of_column[np.flatnonzero(np.any(mu_fixed != 0, axis=0))]] = True
    oracle.set_active(np.flatnonzero(nzb))
    phi = oracle.phi(mu_fixed.ravel())
    value = risk(tau, lam, mu_fixed, phi)
    if value > model.value + 1e-8 * max(1.0, abs(model.value)):
        # cannot happen at an optimum (see fix_empty_cells); keep the LP's μ if it does
        mu_fixed, empty = mu.copy(), np.zeros_like(empty)
        value, phi = float(model.value), float(model.phi)
    return mu_fixed, empty, phi, value


def solve_full(
    problem: MinimaxProblem,
    tol: float = 1e-9,
    bound: float = 1e3,
    time_limit: float | None = None,
    callback: Callable[[dict], None] | None = None,
    formulation: str = "compact",
    lp_solver: str = "simplex",
    empty_cells: str = "impossible",
) -> MinimaxSolution:
    """LP (13) with every feature in the model (no column generation).

    Parameters
    ----------
    problem : MinimaxProblem
        A first-order map with its box (:meth:`MinimaxProblem.first_order`).
    tol : float
        Relative row-violation tolerance (row formulation).
    bound : float
        Box on |μ| (row formulation, enlarged while it binds) and the −B of impossible cells.
    time_limit : float, optional
        Seconds; on expiry the last LP point is returned with ``converged=False``.
    formulation : {"compact", "rows"}
        Exact epigraph LP (:class:`CompactModel`) or row generation (:class:`RowModel`).
    lp_solver : {"simplex", "ipm", "choose"}
        HiGHS algorithm for the compact formulation.
    empty_cells : {"impossible", "keep"}
        Fix μ = −B on the empty cells of every feature
        (:func:`fix_empty_cells_first_order`; ``"veto"`` is an alias) or leave the LP's
        value; R is the same.
    """
    t0 = time.perf_counter()
    deadline = None if time_limit is None else t0 + float(time_limit)
    fmap, tau, lam = problem.fmap, problem.tau, problem.lam
    K, D = tau.shape
    model = first_order_model(formulation, fmap, tau, lam, bound, tol, lp_solver)
    model.add_blocks(np.arange(fmap.n_blocks))
    status = model.solve(deadline=deadline, callback=callback)
    if not model.upper_hist:
        raise SolverError(f"the minimax LP produced no solution within the time limit ({time_limit} s)")
    allb = np.arange(fmap.n_blocks)
    mu, empty, phi, value = _finish(fmap, model, tau, lam, bound, allb, empty_cells)
    nzb = np.zeros(fmap.n_blocks, dtype=bool)
    nzb[fmap.block_of_column[np.flatnonzero(np.any(np.abs(model.mu.reshape(K, D)) > 1e-12, axis=0))]] = True
    sel = np.flatnonzero(nzb)
    return MinimaxSolution(
        mu=mu, tau=tau, lam=lam, value=value, phi=phi, iterations=[value], lower=list(model.lower_hist),
        upper=list(model.upper_hist), selected=sel, converged=status == "optimal", n_rows=model.n_rows,
        impossible=empty, bound=float(bound),
        simplex_iterations=model.simplex_iterations, lp_columns=int(model.in_model.sum()),
        info={"seconds": time.perf_counter() - t0, "formulation": formulation},
    )


def solve_cg(
    problem: MinimaxProblem,
    n_max: int = 100,
    eps: float = 1e-4,
    k_max: int = 10,
    tol: float = 1e-9,
    bound: float = 1e3,
    init: Sequence[int] | None = None,
    n_init: int | None = None,
    time_limit: float | None = None,
    callback: Callable[[dict], None] | None = None,
    formulation: str = "compact",
    exact_batch: int | None = None,
    empty_cells: str = "impossible",
) -> MinimaxSolution:
    """Algorithm 1 of seed 000 with the SELECT of Algorithm 2; features = blocks of Φ.

    Iteration k solves the LP restricted to the working set J (warm-started from the
    previous basis), giving R^k; SELECT then drops the features of J whose dual constraints
    are all over-satisfied (v < 0, hence μ = 0 there) and adds the at most ``n_max`` outside
    features with the largest violation v_i > ``eps`` (:class:`SplitPricer`: the IPF bound
    filters, the exact split LP decides). It stops when nothing enters (``converged``) or
    after ``k_max`` iterations past the first (Algorithm 1's loop). R^k never increases (the
    previous point stays feasible: dropped features had μ = 0, entering ones start at 0);
    at ε = 0 the result is optimal for the whole problem, and in general
    R* ≤ R^k ≤ R* + ε‖μ*‖₁ (Theorem 3).

    Parameters
    ----------
    problem : MinimaxProblem
        A first-order map with its box (:meth:`MinimaxProblem.first_order`).
    n_max, eps, k_max : see above (seed 000 §4: 100, 1e-4, 10).
    init : block indices of the initial set; default: the ``n_init`` (default ``n_max``)
        best by :func:`screening_scores`.
    formulation : {"compact", "rows"}
    exact_batch : int
        How many outside features (in decreasing order of the heuristic bound) get the
        exact split LP at a time; default max(4·n_max, 200).
    empty_cells : {"impossible", "keep"}
        Fix μ = −B on the empty cells of the features in the final working set (features
        outside it keep μ = 0; ``"veto"`` is an alias), or leave the LP's value; R is the same.

    Returns
    -------
    MinimaxSolution
        ``iterations`` = R^1, R^2, ...; ``selected`` = the final working set; ``info["stop"]``
        why column generation stopped (``converged``, ``k_max``, ``time_limit``).
    """
    t0 = time.perf_counter()
    fmap, tau, lam = problem.fmap, problem.tau, problem.lam
    nb = fmap.n_blocks
    model = first_order_model(formulation, fmap, tau, lam, bound, tol, search="columns")
    if init is None:
        k0 = min(nb, n_max if n_init is None else int(n_init))
        J = np.sort(np.argsort(-screening_scores(fmap, tau), kind="stable")[:k0])
    else:
        J = np.unique(np.asarray(init, dtype=np.int64))
        if J.size and (J.min() < 0 or J.max() >= nb):
            raise InputError(f"initial feature index outside 0..{nb - 1}")
    model.add_blocks(J)
    select = Select(model, SplitPricer(fmap, tau, lam, subsets_for(tau.shape[0]).subsets), n_max, eps,
                    int(exact_batch) if exact_batch is not None else max(4 * n_max, 200), callback)
    gen = generate_columns(select, k_max=k_max, t0=t0, time_limit=time_limit, callback=callback,
                           no_solution=f"the minimax LP produced no solution within the time limit ({time_limit} s)")
    Jb = model.active
    mu, empty, phi, value = _finish(fmap, model, tau, lam, bound, Jb, empty_cells)
    return MinimaxSolution(
        mu=mu, tau=tau, lam=lam, value=value, phi=phi, iterations=gen.iterations, lower=list(model.lower_hist),
        upper=list(model.upper_hist), selected=Jb, converged=gen.converged, n_rows=model.n_rows, impossible=empty,
        bound=float(bound),
        simplex_iterations=model.simplex_iterations, lp_columns=int(model.in_model.sum()),
        info={"seconds": time.perf_counter() - t0, "history": gen.history, "max_dual_violation": select.max_dual_violation,
              "formulation": formulation, "stop": gen.stop},
    )


class Select:
    """MRC's column model for :func:`.generation.generate_columns`: a formulation whose features
    enter and leave in place (:class:`CompactModel`, :class:`RowModel`), priced by SELECT.

    SELECT (Algorithm 2 of seed 000) drops the features of the working set whose dual
    constraints are all over-satisfied (v < 0, hence μ = 0 there) and lets in the at most
    ``n_max`` outside features with the largest violation v_i > ``eps`` (the IPF bound of
    :class:`SplitPricer` filters, its exact split LP decides, ``batch`` features at a time).
    ``max_dual_violation`` is the largest v over all features at the last pricing.
    """

    def __init__(self, model, pricer: SplitPricer, n_max: int, eps: float, batch: int,
                 callback: Callable[[dict], None] | None = None):
        self.model, self.pricer = model, pricer
        self.n_max, self.eps, self.batch = n_max, eps, batch
        self.callback = callback
        self.max_dual_violation = np.inf
        self._step: tuple[np.ndarray, np.ndarray, np.ndarray, dict] | None = None

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
        self.max_dual_violation = float(max(vJ.max() if vJ.size else -np.inf, v_known.max() if v_known.size else -np.inf))
        self._step = (drop, enter, W, splits)
        return Pricing(int(enter.size), {"features": int(model.in_model.sum()), "dropped": int(drop.size),
                                         "rows": model.n_rows, "heuristic_flagged": int(over.sum()),
                                         "exact_priced": len(exact_v)})

    def update(self) -> None:
        """Drop the idle features, let the priced ones in (at μ = 0, rows filled by their splits)."""
        drop, enter, W, splits = self._step
        self.model.remove_blocks(drop)
        self.model.add_blocks(enter, W=W, splits=splits)
