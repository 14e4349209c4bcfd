"""Exact best-M feature selection by Generalized Benders Decomposition (seed 002, DESIGN.md).

Restricted value of a support σ ∈ {0,1}^p (T problems sharing Q_c, intercept eliminated):

    c(σ) = min_{Z : Z_i = 0 if σ_i = 0}  tr(ZᵀQ_cZ) − tr(D_cᵀZ) + ‖Z‖²/g.

Subproblem: (Q_{c,SS} + I/g) Z_S = D_{c,S}/2 (a Cholesky solve on the support S).

Benders cut. With Q_c = LLᵀ and the dual variable α = 2LᵀZ̄ of the subproblem solution Z̄,
weak duality of the perspective reformulation gives, for *every* σ ∈ [0,1]^p,

    c(σ) ≥ −‖α‖²/4 − (g/4) Σ_i σ_i‖(D_c − Lα)_i‖²  =  a − bᵀσ,
    a = −tr(Z̄ᵀQ_cZ̄),   b_i = (g/4)‖R_i‖²,   R = D_c − 2Q_cZ̄,

tight at σ̄ (there R_i = 2Z̄_i/g on the support). No factor L is needed: Lα = 2Q_cZ̄.

Master (FSP-M): min η s.t. η ≥ a_k − b_kᵀσ for all cuts k, Σσ ≤ M, σ binary — a MILP solved
by HiGHS (:class:`marg.lp.HighsLP`) with ``mip_rel_gap = 0``. Its dual bound is a lower bound on
min_{|σ|≤M} c(σ); the best evaluated c(σ̄) is an upper bound; the difference is the
certified gap (up to HiGHS's feasibility tolerance, 1e-6 relative after we scale the master
by 1/|c|). FSP-λ (penalty per feature): minimise c(σ) + Σ_i λ_iσ_i instead (optionally with
the cardinality bound too). Cuts accumulate; the loop stops at the gap tolerance, an
iteration limit or a time limit.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import numpy as np
from scipy.linalg import cho_factor, cho_solve

from marg.errors import InputError
from marg.lp import INF, HighsLP, Status, solver_error

from .group_norms import as_matrix, block_offsets


__all__ = ["BendersCut", "GBDResult", "restricted_value", "benders_cut", "gbd"]


def _support_index(support: Iterable[int], off: np.ndarray) -> np.ndarray:
    sup = sorted(int(i) for i in support)
    if not sup:
        return np.zeros(0, dtype=np.int64)
    return np.concatenate([np.arange(off[i], off[i + 1]) for i in sup])


def restricted_value(
    Qc: np.ndarray, Dc: np.ndarray, sizes: Sequence[int], support: Iterable[int], g: float
) -> tuple[float, np.ndarray]:
    """c(σ) and its minimiser Z̄ (zero off the support).

    Parameters
    ----------
    Qc : ndarray, shape (M, M)
    Dc : ndarray, shape (M,) or (M, T)
    sizes : sequence of int
        Group sizes.
    support : iterable of int
        Groups allowed to be nonzero.
    g : float
        Ridge parameter (penalty ‖Z‖²/g); ``math.inf`` gives the unridged value (min-norm
        minimiser on the support).

    Returns
    -------
    value : float
        tr(Z̄ᵀQ_cZ̄) − tr(D_cᵀZ̄) + ‖Z̄‖²/g.
    Z : ndarray, shape (M, T)
    """
    D = as_matrix(Dc)
    off = block_offsets(sizes)
    idx = _support_index(support, off)
    Z = np.zeros_like(D)
    if idx.size == 0:
        return 0.0, Z
    A = Qc[np.ix_(idx, idx)]
    rhs = 0.5 * D[idx]
    if math.isinf(g):
        lam, V = np.linalg.eigh(0.5 * (A + A.T))
        lam = np.clip(lam, 0.0, None)
        keep = lam > 1e-10 * max(lam.max(), 1e-300)
        Zs = V[:, keep] @ ((V[:, keep].T @ rhs) / lam[keep][:, None])
    else:
        if not g > 0:
            raise InputError(f"ridge parameter g must be > 0, got {g!r}")
        A = A + np.eye(idx.size) / g
        try:
            Zs = cho_solve(cho_factor(A), rhs)
        except np.linalg.LinAlgError:
            Zs = np.linalg.lstsq(A, rhs, rcond=None)[0]
    Z[idx] = Zs
    QZ = Qc[:, idx] @ Zs
    ridge = 0.0 if math.isinf(g) else float(np.sum(Zs * Zs)) / g
    val = float(np.sum(Zs * QZ[idx]) - np.sum(D[idx] * Zs)) + ridge
    return val, Z


@dataclass(frozen=True)
class BendersCut:
    """A Benders cut c(σ) ≥ a − bᵀσ, generated at ``support``."""

    a: float
    b: np.ndarray
    support: tuple[int, ...]

    def __call__(self, sigma: np.ndarray) -> float:
        return float(self.a - self.b @ np.asarray(sigma, dtype=np.float64))


def benders_cut(Qc: np.ndarray, Dc: np.ndarray, sizes: Sequence[int], Z: np.ndarray, g: float,
                support: Iterable[int] = ()) -> BendersCut:
    """The cut a − bᵀσ from a subproblem solution Z̄ (any Z̄ gives a valid cut; the
    subproblem's makes it tight at its support).

    a = −tr(Z̄ᵀQ_cZ̄), b_i = (g/4)‖(D_c − 2Q_cZ̄)_i‖²_F.
    """
    D = as_matrix(Dc)
    Z = as_matrix(Z)
    off = block_offsets(sizes)
    rows = np.flatnonzero(np.any(Z != 0, axis=1))
    QZ = Qc[:, rows] @ Z[rows] if rows.size else np.zeros_like(D)
    a = -float(np.sum(Z[rows] * QZ[rows])) if rows.size else 0.0
    R = D - 2.0 * QZ
    sq = np.add.reduceat(np.sum(R * R, axis=1), off[:-1]) if len(sizes) else np.zeros(0)
    sq = np.where(np.diff(off) > 0, sq, 0.0)
    return BendersCut(a=a, b=(g / 4.0) * sq, support=tuple(sorted(int(i) for i in support)))


class _Master:
    """min η + costᵀσ  s.t.  η + b_kᵀσ ≥ a_k (cuts),  Σσ ≤ M,  σ ∈ {0,1}^p,  η ∈ [η_lb, 0].

    One HiGHS MIP (:class:`marg.lp.HighsLP`) kept across iterations: each cut is a
    row added in place, and each solve gets ``time_limit`` seconds of its own (the wrapper
    extends HiGHS' cumulative limit from the instance's run time).
    """

    def __init__(self, p: int, cost: np.ndarray, eta_lb: float, cap: int | None):
        self.p = p
        self.pool: list[np.ndarray] = []
        lp = HighsLP(solver="choose", presolve=None, mip_rel_gap=0.0, mip_abs_gap=0.0, mip_feasibility_tolerance=1e-9,
                     primal_feasibility_tolerance=1e-9, mip_improving_solution_save=True)
        lp.add_cols([1.0], [eta_lb if math.isfinite(eta_lb) else -INF], [1e-9])
        if p:
            cols = lp.add_cols(np.asarray(cost, dtype=np.float64), np.zeros(p), np.ones(p))
            lp.set_integer(cols)
            if cap is not None:
                lp.add_rows([-INF], [float(cap)], [0], cols, np.ones(p))
        self.lp = lp

    def add_cut(self, a: float, b: np.ndarray) -> None:
        row = np.concatenate([[1.0], b])
        nz = np.flatnonzero(row)
        self.lp.add_rows([float(a)], [INF], [0], nz, row[nz])

    def solve(self, time_limit: float) -> tuple[np.ndarray | None, float | None, bool]:
        """Returns (σ or None, dual bound, solved to optimality).

        Raises
        ------
        SolverError
            When HiGHS fails on the master (not for a time limit, which is a status).
        """
        p = self.p
        res = self.lp.solve(deadline=time.perf_counter() + max(time_limit, 0.01))
        if res.status not in (Status.OPTIMAL, Status.LIMIT):
            raise solver_error("the GBD master MILP", res)
        # improving solutions met during the branch-and-bound: extra cuts for free
        self.pool = [np.round(cv[1:]).astype(int) for cv in self.lp.saved_mip_solutions() if cv.size == p + 1]
        has = res.x.size == p + 1
        dual = res.dual_bound if math.isfinite(res.dual_bound) else None
        return (np.round(res.x[1:]).astype(int) if has else None), dual, res.status is Status.OPTIMAL


@dataclass
class GBDResult:
    """Outcome of :func:`gbd`.

    Attributes
    ----------
    support : tuple of int
        Best support found (groups).
    Z : ndarray, shape (M, T)
        Its subproblem minimiser.
    value : float
        c(support) (+ feature costs for FSP-λ): the upper bound.
    lower_bound, upper_bound, gap : float
        Certified bounds on the optimum and gap = upper − lower (≥ 0).
    status : {"optimal", "time_limit", "iteration_limit"}
    iterations : int
        Master problems solved.
    seconds : float
    history : list of dict
        Per iteration: iteration, lower, upper, gap, seconds, support size.
    cuts : list of BendersCut
    """

    support: tuple[int, ...]
    Z: np.ndarray
    value: float
    lower_bound: float
    upper_bound: float
    gap: float
    status: str
    iterations: int
    seconds: float
    history: list[dict] = field(default_factory=list)
    cuts: list[BendersCut] = field(default_factory=list, repr=False)


def gbd(
    Qc: np.ndarray,
    Dc: np.ndarray,
    sizes: Sequence[int],
    max_features: int | None = None,
    g: float = 100.0,
    feature_cost: float | Sequence[float] | None = None,
    warm_supports: Iterable[Iterable[int]] = (),
    time_limit: float = 60.0,
    max_iter: int = 500,
    gap_tol: float = 1e-6,
    full_cut_max_dim: int = 4000,
    local_search_evals: int = 2000,
    callback: Callable[[dict], None] | None = None,
) -> GBDResult:
    """Generalized Benders Decomposition for min_σ c(σ) [+ Σλ_iσ_i] s.t. Σσ ≤ M.

    Parameters
    ----------
    Qc : ndarray, shape (M, M)
    Dc : ndarray, shape (M,) or (M, T)
    sizes : sequence of int
        Group (feature) sizes m_i.
    max_features : int, optional
        Cardinality bound M (FSP-M). Required unless ``feature_cost`` is given.
    g : float
        Ridge parameter of c(σ) (penalty ‖Z‖²/g). Smaller g: stronger cuts, more shrinkage.
    feature_cost : float or sequence of float, optional
        FSP-λ: cost λ_i ≥ 0 per selected feature, added to the objective.
    warm_supports : iterable of iterable of int
        Supports to evaluate first (e.g. the group-lasso path): each adds a cut, and the
        feasible ones an upper bound.
    time_limit : float
        Wall-clock seconds for the whole loop (the master gets the remaining time).
    max_iter : int
        Maximum number of master problems.
    gap_tol : float
        Stop when upper − lower ≤ gap_tol·max(|upper|, scale).
    full_cut_max_dim : int
        Also cut at the full support (its c is a global lower bound) when M ≤ this.
    local_search_evals : int
        Upper-bound heuristic: after each master solution, a best-improvement 1-swap
        (and add; drop under FSP-λ) descent with at most this many evaluations of c; its
        end point is evaluated as a subproblem (a cut and an upper bound). 0 disables it.
        It only affects which cuts are generated, never the validity of the bounds.
    callback : callable, optional
        Called with each history record (progress).

    Returns
    -------
    GBDResult
    """
    t0 = time.perf_counter()
    D = as_matrix(Dc)
    sizes = [int(s) for s in sizes]
    p = len(sizes)
    off = block_offsets(sizes)
    if Qc.shape != (off[-1], off[-1]) or D.shape[0] != off[-1]:
        raise InputError(f"group sizes sum to {off[-1]} but Q is {Qc.shape} and d has {D.shape[0]} rows")
    if not (g > 0) or not math.isfinite(g):
        raise InputError(f"ridge parameter g must be finite and > 0, got {g!r}")
    if max_features is None and feature_cost is None:
        raise InputError("gbd needs max_features (FSP-M) or feature_cost (FSP-λ)")
    if max_features is not None and (int(max_features) != max_features or max_features < 0):
        raise InputError(f"max_features must be a non-negative integer, got {max_features!r}")
    cost = np.zeros(p)
    if feature_cost is not None:
        cost = np.broadcast_to(np.asarray(feature_cost, dtype=np.float64), (p,)).copy()
        if not np.all(np.isfinite(cost)) or np.any(cost < 0):
            raise InputError("feature_cost must be finite and >= 0")
    Mcap = p if max_features is None else min(int(max_features), p)

    cuts: list[BendersCut] = []
    evaluated: dict[tuple[int, ...], float] = {}
    best: dict = {"value": math.inf, "support": (), "Z": np.zeros_like(D)}

    def evaluate(S: Iterable[int]) -> float:
        S = tuple(sorted(set(int(i) for i in S)))
        if S in evaluated:
            return evaluated[S]
        val, Z = restricted_value(Qc, D, sizes, S, g)
        cuts.append(benders_cut(Qc, D, sizes, Z, g, S))
        total = val + float(cost[list(S)].sum()) if S else val
        evaluated[S] = total
        if len(S) <= Mcap and total < best["value"]:
            best.update(value=total, support=S, Z=Z)
        return total

    values: dict[tuple[int, ...], float] = {}

    def value(S: tuple[int, ...]) -> float:
        if S in evaluated:
            return evaluated[S]
        if S not in values:
            v = restricted_value(Qc, D, sizes, S, g)[0]
            values[S] = v + (float(cost[list(S)].sum()) if S else 0.0)
        return values[S]

    def local_search(S0: Iterable[int]) -> tuple[int, ...]:
        """Best-improvement 1-swap / add / drop descent from S0 (within |S| ≤ M)."""
        S = tuple(sorted(set(int(i) for i in S0)))
        cur, evals = value(S), 0
        while evals < local_search_evals and time.perf_counter() - t0 < time_limit:
            inside, outside = list(S), [j for j in range(p) if j not in S]
            moves = [tuple(sorted([k for k in S if k != i] + [j])) for i in inside for j in outside]
            if len(S) < Mcap:
                moves += [tuple(sorted(S + (j,))) for j in outside]
            if np.any(cost > 0):
                moves += [tuple(k for k in S if k != i) for i in inside]
            moves = moves[: max(0, local_search_evals - evals)]
            evals += len(moves)
            if not moves:
                break
            vals = [value(m) for m in moves]
            k = int(np.argmin(vals))
            if vals[k] >= cur - 1e-15 * max(1.0, abs(cur)):
                break
            S, cur = moves[k], vals[k]
        return S

    evaluate(())
    full_val = None
    if off[-1] <= full_cut_max_dim and p > 0:
        full_val, _ = restricted_value(Qc, D, sizes, range(p), g)
        evaluate(range(p))
    for S in warm_supports:
        evaluate(S)
        if time.perf_counter() - t0 > time_limit:
            break
    if local_search_evals > 0 and p > 0:
        evaluate(local_search(best["support"]))
    # scale of the objective (|c| ≤ |c(full)|), so the master's absolute tolerances are relative
    scale_ref = abs(full_val) if full_val is not None else max(abs(best["value"]), 0.0)
    if scale_ref <= 0:
        bsum = np.sort(cuts[0].b)[::-1][:Mcap].sum() if p else 0.0
        scale_ref = max(bsum, 1e-12)
    s = 1.0 / scale_ref
    # c(σ) + costᵀσ ≥ c(full) for every σ (costs are ≥ 0)
    lower = -math.inf if full_val is None else full_val
    history: list[dict] = []
    status = "iteration_limit"
    it = 0
    eta_lb = -math.inf if full_val is None else s * full_val - 1e-9
    master = _Master(p, s * cost, eta_lb, Mcap if max_features is not None else None)
    n_rows = 0
    while it < max_iter:
        remaining = time_limit - (time.perf_counter() - t0)
        if remaining <= 0:
            status = "time_limit"
            break
        it += 1
        for c in cuts[n_rows:]:
            master.add_cut(s * c.a, s * c.b)
        n_rows = len(cuts)
        sigma, dual, optimal = master.solve(remaining)
        if dual is not None and math.isfinite(dual):
            lower = max(lower, dual / s)
        if sigma is None:
            status = "time_limit"
            break
        S = tuple(int(i) for i in np.flatnonzero(sigma))
        seen_before = S in evaluated
        upper = best["value"]
        if seen_before and optimal:
            # the cut at S is tight, so the master's optimum is ≥ c(S) ≥ upper: converged
            lower = max(lower, min(upper, evaluated[S]))
        else:
            evaluate(S)
            if local_search_evals > 0:
                evaluate(local_search(S if len(S) <= Mcap else best["support"]))
        for extra in master.pool:
            if extra.sum() <= Mcap:
                evaluate(np.flatnonzero(extra))
        upper = best["value"]
        gap = max(0.0, upper - lower)
        rec = {"iteration": it, "lower": lower, "upper": upper, "gap": gap,
               "seconds": time.perf_counter() - t0, "support_size": len(S)}
        history.append(rec)
        if callback is not None:
            callback(rec)
        if gap <= gap_tol * max(abs(upper), scale_ref):
            status = "optimal"
            break
        if not optimal:  # the master ran out of time
            status = "time_limit"
            break
    upper = best["value"]
    gap = max(0.0, upper - lower)
    if status != "optimal" and gap <= gap_tol * max(abs(upper), scale_ref):
        status = "optimal"
    return GBDResult(
        support=best["support"], Z=best["Z"], value=upper, lower_bound=lower, upper_bound=upper, gap=gap,
        status=status, iterations=it, seconds=time.perf_counter() - t0, history=history, cuts=cuts,
    )
