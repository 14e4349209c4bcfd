"""The one driver of the minimax engine: column generation and row generation, their stop rules and their record.

Column generation (Algorithm 1 of seed 000) over any model that can solve its restricted LP
and price the columns outside it (:class:`ColumnModel`) — MRC's features
(:class:`.fit.Columns` with :class:`.first_order.Select`), boosting's monomials
(:class:`.fit.Columns` with :class:`marg.learners.boost.minimax_cg.MonomialColumns`), DCC's candidate edges
(:class:`.fit.Greedy` with :class:`.forest_models.GreedyEdges`) — is :func:`generate_columns`::

    k = 1, 2, …:  solve the restricted LP → R^k  (recorded; every R^k is a certificate)
                  price the columns outside   → the ones that enter, the ones that leave
                  stop rule (below), else add / drop and repeat.

It stops for one of five reasons (:data:`STOPS`, the record's ``stop``):

- ``"converged"`` — the pricing was complete and no column enters: R^k = R* over all columns;
- ``"k_max"`` — k > ``k_max`` (``k_max + 1`` restricted solves);
- ``"stalled"`` — with ``patience`` p: R^k is not more than ``stall_tol`` below the best bound
  p iterations earlier, min(R^1..R^(k−p)) − min(R^(k−p+1)..R^k) ≤ stall_tol (off by default);
- ``"time_limit"`` — the deadline passed (between solves, or a solve or the pricing was cut
  short by it);
- ``"work_budget"`` — the model's pricing spent its budget of search work (boosting's
  branch-and-bound nodes, :data:`marg.learners.boost.minimax_cg.FIT_NODES`).

``price_last`` says whether the iteration that meets ``k_max``, the deadline or the stall rule
is still priced (MRC: yes, so the final point's dual violation and convergence are known;
boosting: no, its pricing is a branch and bound). One history record per priced iteration:
``{"k", "R", "entered", …what the model's pricing counts…, "seconds"}``; the progress callback
gets it as ``{"stage": "cg", …}``, plus a ``"stalled"`` record when that rule stops the loop
and a ``"time_limit"`` one when the time limit does.

Row generation — solve, ask a separation oracle (:class:`.separation.SeparationOracle`) for the
most violated rows, add them, until none is violated or the deadline — is
:func:`generate_rows` on a :class:`RowLP` (the one model, :class:`.lp_model.MinimaxModel`,
for every separator of the engine; boosting's :class:`marg.learners.boost.monomial_lp.MonomialLP`,
the same model with rows at domain points, :class:`marg.learners.boost.minimax_cg.MonomialMinimax`
its separator), and :func:`solve_boxed` adds the check that
the box |μ| ≤ B is slack at its end. Both loops return the one record :class:`Generation`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence

from marg.errors import InconsistentStatistics, SolverError

from .separation import SeparationOracle

if TYPE_CHECKING:
    import numpy as np

STOPS = ("converged", "k_max", "stalled", "time_limit", "work_budget")
"""Why a generation loop stopped (:attr:`Generation.stop`)."""


@dataclass
class Generation:
    """What one generation loop did — column or row generation.

    Attributes
    ----------
    stop : {"converged", "k_max", "stalled", "time_limit"}
        Why it stopped (:data:`STOPS`).
    iterations : list of float
        Column generation: R^k per restricted solve (a certificate each).
    history : list of dict
        Column generation: one record per priced iteration (module docstring).
    lower, upper : list of float
        Row generation: per round, the LP value (non-decreasing: rows are only added) and the
        exact R(μ) of the round's μ (μ is feasible for all rows once ν = φ(μ) + 1).
    added : int
        Rows (row generation) added in all.
    phi : float
        Row generation: φ(μ) of the last round's μ (the oracle's maximum − 1).
    """

    stop: str = "converged"
    iterations: list[float] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)
    lower: list[float] = field(default_factory=list)
    upper: list[float] = field(default_factory=list)
    added: int = 0
    phi: float = float("nan")

    @property
    def converged(self) -> bool:
        """Nothing left to add: the last point is optimal over all columns (rows)."""
        return self.stop == "converged"


@dataclass
class Pricing:
    """One pricing of a :class:`ColumnModel`.

    Attributes
    ----------
    entering : int
        Columns that would enter (0: nothing is violated beyond the model's ε).
    record : dict
        What the history keeps of this pricing besides k, R, ``entered`` and seconds (counts
        of the model: features or columns in the LP, rows, columns dropped …).
    complete : bool
        False when the deadline cut the search short: then "nothing enters" proves nothing.
    progress : dict
        Extra fields for the progress record only (e.g. ``size``, what the model counts).
    stop : str
        Why an incomplete pricing ended: ``"time_limit"`` (the deadline) or ``"work_budget"``
        (the model's budget of search work, e.g. boosting's branch-and-bound nodes).
    """

    entering: int
    record: dict[str, Any] = field(default_factory=dict)
    complete: bool = True
    progress: dict[str, Any] = field(default_factory=dict)
    stop: str = "time_limit"


class ColumnModel(Protocol):
    """What :func:`generate_columns` asks of a model: a restricted solve, a pricing, an update.

    ``solve(deadline)`` returns R^k of the restricted LP, or None when the deadline (a
    ``time.perf_counter()`` value or None) stopped it before a new point; ``price(deadline)``
    prices the columns outside at that point (and decides which inside ones leave);
    ``update()`` adds the entering columns and drops the leaving ones at value 0 (the current
    point stays feasible, so R^(k+1) ≤ R^k).
    """

    def solve(self, deadline: float | None) -> float | None: ...

    def price(self, deadline: float | None) -> Pricing: ...

    def update(self) -> None: ...


def _stalled(iterations: list[float], patience: int | None, stall_tol: float) -> bool:
    p = patience
    return p is not None and len(iterations) > p and min(iterations[:-p]) - min(iterations[-p:]) <= stall_tol


def generate_columns(
    model: ColumnModel,
    *,
    k_max: int,
    t0: float | None = None,
    time_limit: float | None = None,
    patience: int | None = None,
    stall_tol: float = 0.0,
    price_last: bool = True,
    callback: Callable[[dict[str, Any]], None] | None = None,
    no_solution: str = "the minimax LP produced no solution within the time limit",
) -> Generation:
    """Column generation on ``model`` until one of the four stop rules (module docstring).

    Parameters
    ----------
    model : ColumnModel
    k_max : int
        Stop after ``k_max + 1`` restricted solves.
    t0 : float, optional
        ``time.perf_counter()`` at the start of the fit (default: now); the deadline is
        ``t0 + time_limit`` and the history's ``seconds`` count from it.
    time_limit : float, optional
        Seconds.
    patience, stall_tol : the stall rule (None: off).
    price_last : bool
        Price the iteration that meets ``k_max``, the deadline or the stall rule.
    callback : callable, optional
        Progress records (module docstring).
    no_solution : str
        The SolverError's message when not one restricted solve finished.

    Returns
    -------
    Generation
        ``iterations`` R^1, R^2, …, ``history``, ``stop``.

    Raises
    ------
    SolverError
        When the deadline stopped the first restricted solve.
    """
    t0 = time.perf_counter() if t0 is None else t0
    deadline = None if time_limit is None else t0 + float(time_limit)
    gen = Generation()

    def limit(k: int) -> str | None:
        stalled = _stalled(gen.iterations, patience, stall_tol)
        if stalled and callback is not None:
            callback({"stage": "stalled", "k": k, "R": min(gen.iterations), "patience": patience, "tol": stall_tol})
        if deadline is not None and time.perf_counter() > deadline:
            return "time_limit"
        return "stalled" if stalled else "k_max" if k > k_max else None

    k = 0
    while True:
        k += 1
        R = model.solve(deadline)
        if R is None:
            gen.stop = "time_limit"
            break
        gen.iterations.append(R)
        stop = None if price_last else limit(k)
        if stop is not None:
            gen.stop = stop
            break
        pricing = model.price(deadline)
        gen.history.append({"k": k, "R": R, "entered": int(pricing.entering), **pricing.record,
                            "seconds": time.perf_counter() - t0})
        if callback is not None:
            callback({"stage": "cg", **gen.history[-1], **pricing.progress})
        if not pricing.complete:
            gen.stop = pricing.stop
            break
        if pricing.entering == 0:
            gen.stop = "converged"
            break
        stop = limit(k) if price_last else None
        if stop is not None:
            gen.stop = stop
            break
        model.update()
    if not gen.iterations:
        raise SolverError(no_solution)
    if gen.stop == "time_limit" and callback is not None and time_limit is not None:
        callback({"stage": "time_limit", "k": len(gen.iterations), "R": min(gen.iterations), "seconds": time_limit})
    return gen


class RowLP(Protocol):
    """What row generation needs of an LP: the one model (:class:`.lp_model.MinimaxModel`), or its
    boosting kind (:class:`marg.learners.boost.monomial_lp.MonomialLP`, whose rows are domain points)."""

    @property
    def mu(self) -> np.ndarray: ...

    @property
    def nu(self) -> float: ...

    @property
    def n_rows(self) -> int: ...

    def solve(self, deadline: float | None = None) -> str: ...

    def bounds(self, cuts: Sequence[Any]) -> tuple[float, float, float]: ...

    def add_cuts(self, cuts: Sequence[Any]) -> int: ...


class BoxedLP(RowLP, Protocol):
    """What :func:`solve_boxed` needs besides row generation: the box |μ| ≤ B, how much it binds, and
    the LP's value (the one model, :class:`.lp_model.MinimaxModel`)."""

    @property
    def objective(self) -> float: ...

    @property
    def bound(self) -> np.ndarray: ...

    def box_gap(self) -> float: ...

    def set_bound(self, bound: float | np.ndarray) -> None: ...


def generate_rows(lp: RowLP, oracle: SeparationOracle, tol: float = 1e-9, max_rounds: int = 100_000,
                  deadline: float | None = None,
                  callback: Callable[[dict[str, Any]], None] | None = None) -> Generation:
    """Row generation on a :class:`RowLP`: solve, add the oracle's most violated rows, repeat.

    A row (a cut) proposed by ``oracle.most_violated(mu)`` has its value (gᵀμ − b, the LP's ν
    would have to reach) at index 2. Stops ``converged`` when no proposed row has value
    > ν + tol·max(1, |ν|) (or every such row is already in the model: violated only within the
    LP solver's tolerance), ``"k_max"`` after ``max_rounds`` rounds, ``"time_limit"`` at
    ``deadline`` (a ``time.perf_counter()`` value). Each round records ``lp.bounds(cuts)``: the
    LP value (``lower``), R(μ) with φ(μ) exact or certified from above (``upper``) and that φ
    (``phi``), and calls ``callback({"stage": "rows", "lower", "upper", "rows"})``.
    """
    res = Generation(stop="k_max")
    for _ in range(max_rounds):
        if lp.solve(deadline) != "optimal":
            res.stop = "time_limit"
            return res
        cuts = oracle.most_violated(lp.mu)
        lower, upper, res.phi = lp.bounds(cuts)
        res.lower.append(lower)
        res.upper.append(upper)
        if callback is not None:
            callback({"stage": "rows", "lower": lower, "upper": upper, "rows": lp.n_rows})
        thr = lp.nu + tol * max(1.0, abs(lp.nu))
        new = [c for c in cuts if float(c[2]) > thr]
        added = lp.add_cuts(new) if new else 0
        res.added += added
        if added == 0:
            res.stop = "converged"
            return res
        if deadline is not None and time.perf_counter() > deadline:
            res.stop = "time_limit"
            return res
    return res


def solve_boxed(
    lp: BoxedLP,
    oracle: SeparationOracle,
    tol: float = 1e-9,
    grow: float = 100.0,
    max_grow: int = 2,
    deadline: float | None = None,
    callback: Callable[[dict[str, Any]], None] | None = None,
    max_rounds: int = 100_000,
) -> Generation:
    """Row generation, then check the box |μ| ≤ B is slack; enlarge it (×``grow``) while it binds.

    Returns the rounds of every attempt in one :class:`Generation` (``stop`` the last one's);
    ``max_rounds`` bounds the rounds of all attempts together (``"k_max"`` when it stops them).

    Raises
    ------
    InconsistentStatistics
        When the box still binds after ``max_grow`` enlargements: no distribution matches
        τ within λ (the statistics are inconsistent), so the minimax problem is unbounded.
    """
    total = Generation()
    for attempt in range(max_grow + 1):
        left = int(max_rounds) - len(total.lower)
        if left <= 0:
            total.stop = "k_max"
            return total
        res = generate_rows(lp, oracle, tol=tol, max_rounds=left, deadline=deadline, callback=callback)
        total.lower += res.lower
        total.upper += res.upper
        total.added += res.added
        total.stop, total.phi = res.stop, res.phi
        if not res.converged:
            return total
        gap = lp.box_gap()
        if gap <= tol * max(1.0, abs(lp.objective)):
            return total
        if attempt < max_grow:
            lp.set_bound(lp.bound * grow)
    raise InconsistentStatistics(
        f"no distribution matches the statistics within lambda: the minimax problem is unbounded "
        f"(box |mu| <= {float(lp.bound.max()):g} still binds by {gap:.3g}); the released tables are inconsistent"
    )
