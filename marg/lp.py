"""The LP solver layer: the one place marg touches HiGHS (a silent, in-place editable LP/MIP and its status map).

Every linear program of marg — the learners' minimax, hinge, Rényi and certificate LPs, the
GBD master and boosting's MILPs — goes through :class:`HighsLP`, which owns one
``highspy.Highs`` instance:

- columns and rows are added, deleted and re-bounded in place so that each re-solve starts
  from the previous basis (warm starts); a one-shot LP is a fresh instance loaded whole by
  :meth:`HighsLP.from_arrays` (``min cᵀx s.t. A_ub x ≤ b_ub, A_eq x = b_eq, bounds``);
- :meth:`HighsLP.solve` maps HiGHS' model status to a :class:`Status`, applies the one retry
  policy (below) and honours a wall-clock deadline on a reused instance (HiGHS compares its
  ``time_limit`` option with the run time accumulated over all runs, so the limit is always
  set from the instance's current run time);
- duals have one meaning: ``row_dual`` is HiGHS' row dual y of every row in the order the
  rows were added (∂objective/∂bound of the active side; ≤ 0 on a binding ``≤`` row of a
  minimisation), ``col_dual`` the reduced costs d = c − Aᵀy.

The status map is the contract with callers: ``OPTIMAL``; ``LIMIT`` (time or iteration
limit — a status, never an exception: the caller keeps its last point); ``UNBOUNDED`` and
``INFEASIBLE`` (the caller knows which one means "the statistics are inconsistent", a data
error, exit 2 via :class:`marg.errors.InconsistentStatistics`); ``FAILED`` (numerical
trouble — :func:`solver_error` gives the :class:`marg.errors.SolverError`, exit 3).

The retry policy: a solve that ends without a verdict (``FAILED``) is accepted when its point
meets ``accept_tol``, else run once more from scratch; "unbounded" is a verdict on the data, so
it is confirmed before it is returned — on a badly scaled LP (noisy tables, large rule
weights) presolve or the dual simplex can declare it for a bounded problem: the LP is re-solved
from scratch with presolve off, then with the interior-point method, and an optimal re-solve
wins (the instance's options are restored afterwards).

Creating a ``highspy.Highs`` object prints HiGHS' banner on the process's standard output
(from C, so Python's ``sys.stdout`` redirection cannot catch it) in highspy ≥ 1.16, before
any option can be set; :func:`new_highs` creates solvers with file descriptor 1 pointed at
``/dev/null`` for that instant and switches logging off, so ``marg … --json`` prints
nothing but its JSON. HiGHS' global thread scheduler refuses to run an instance whose
``threads`` option differs from the one it was first started with, so every instance runs
single-threaded (:func:`new_highs`).

This module sits at the bottom of the layers (beside :mod:`marg.errors`): ``marginals`` and
``learners`` may both import it; it imports no layer.
"""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from typing import Any, Iterator, Sequence

import highspy
import numpy as np
import scipy.sparse as sp

from marg.errors import SolverError

INF = highspy.kHighsInf
_MS = highspy.HighsModelStatus


class Status(Enum):
    """What a solve ended with (see the module docstring)."""

    OPTIMAL = "optimal"
    LIMIT = "limit"
    UNBOUNDED = "unbounded"
    INFEASIBLE = "infeasible"
    FAILED = "failed"


_STATUS = {
    _MS.kOptimal: Status.OPTIMAL,
    _MS.kTimeLimit: Status.LIMIT,
    _MS.kIterationLimit: Status.LIMIT,
    _MS.kSolutionLimit: Status.LIMIT,
    _MS.kInterrupt: Status.LIMIT,
    _MS.kUnbounded: Status.UNBOUNDED,
    _MS.kUnboundedOrInfeasible: Status.UNBOUNDED,
    _MS.kInfeasible: Status.INFEASIBLE,
}


@dataclass(frozen=True)
class LPResult:
    """The outcome of one solve.

    Attributes
    ----------
    status : Status
    objective : float
        Objective value (NaN unless a solution is available).
    x : ndarray (n_cols,)
        Column values (empty when no solution is available).
    row_dual, col_dual : ndarray
        HiGHS' duals: row duals y and reduced costs d = c − Aᵀy (minimisation).
    iterations : int
        Simplex iterations of this solve.
    dual_bound : float
        MIP: the proven lower bound on the optimum (NaN for an LP).
    message : str
        HiGHS' model status in words.
    accepted : bool
        The solver ended without proving optimality but its point met the acceptance
        tolerance (see :meth:`HighsLP.solve`).
    """

    status: Status
    objective: float
    x: np.ndarray
    row_dual: np.ndarray
    col_dual: np.ndarray
    iterations: int = 0
    dual_bound: float = float("nan")
    message: str = ""
    accepted: bool = False

    @property
    def has_solution(self) -> bool:
        return self.x.size > 0


def solver_error(what: str, result: LPResult) -> SolverError:
    """The one-line error for a solve that failed (exit 3)."""
    return SolverError(f"HiGHS failed on {what}: {result.message or result.status.value}")


@contextmanager
def stdout_silenced() -> Iterator[None]:
    """Point file descriptor 1 at /dev/null for the duration (C-level writes included)."""
    try:
        sys.stdout.flush()
    except (AttributeError, ValueError, OSError):
        pass
    try:
        saved = os.dup(1)
    except OSError:  # no fd 1 at all (closed stdout): nothing to protect
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


_scheduler_reset = False


def new_highs(**options: Any) -> highspy.Highs:
    """A silent, single-threaded HiGHS instance with ``options`` set (logging off before anything else runs).

    Every instance uses one thread: the LPs and MIPs here are small to medium (HiGHS' simplex
    is serial anyway), a thread pool's start-up dominated the GBD master's solve times, and
    HiGHS refuses to run an instance whose ``threads`` differs from its global scheduler's —
    so all instances agree, and the first one resets a scheduler another library may have
    started with more threads.
    """
    global _scheduler_reset
    if not _scheduler_reset:
        highspy.Highs.resetGlobalScheduler(True)
        _scheduler_reset = True
    with stdout_silenced():
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)
    for name, value in options.items():
        h.setOptionValue(name, value)
    return h


def _i32(a: Any) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(a, dtype=np.int32).ravel())


def _f64(a: Any, n: int | None = None) -> np.ndarray:
    out = np.asarray(a, dtype=np.float64)
    if n is not None:
        out = np.broadcast_to(out, (n,))
    return np.ascontiguousarray(out.ravel())


def _bounds(bounds: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Column bounds as two arrays (n,): one pair for all, n pairs or an array (n, 2); None is ±inf."""
    if isinstance(bounds, tuple) and len(bounds) == 2 and all(b is None or np.isscalar(b) for b in bounds):
        pairs = np.array([[np.nan if b is None else b for b in bounds]] * n, dtype=np.float64).reshape(n, 2)
    elif isinstance(bounds, np.ndarray):
        pairs = np.asarray(bounds, dtype=np.float64).reshape(n, 2)
    else:
        pairs = np.array([[np.nan if b is None else b for b in pair] for pair in bounds],
                         dtype=np.float64).reshape(n, 2)
    lower = np.where(np.isnan(pairs[:, 0]), -INF, np.maximum(pairs[:, 0], -INF))
    upper = np.where(np.isnan(pairs[:, 1]), INF, np.minimum(pairs[:, 1], INF))
    return np.ascontiguousarray(lower), np.ascontiguousarray(upper)


def _csr(A: Any, m: int, n: int) -> sp.csr_array:
    """A dense or sparse constraint matrix as CSR of shape (m, n)."""
    return (sp.csr_array(A, shape=(m, n)) if sp.issparse(A)
            else sp.csr_array(np.reshape(np.asarray(A, dtype=np.float64), (m, n))))


class HighsLP:
    """One HiGHS model edited in place (minimisation), with one status and retry policy.

    Parameters
    ----------
    solver : {"simplex", "ipm", "choose"}
        HiGHS algorithm ("ipm" runs crossover to a basic solution).
    presolve : bool or None
        None: off for the simplex method (re-solves start from the basis), HiGHS' default
        otherwise.
    feas_tol : float or None
        Primal and dual feasibility tolerance (HiGHS' default if None).
    accept_tol : float
        A solve that ends without a proof of optimality is accepted as optimal when its
        primal and dual infeasibilities are both at most this (callers re-evaluate their
        objective exactly anyway); otherwise the solver is cleared and run once more from
        scratch, and a second failure is ``FAILED``.
    options : dict
        Further HiGHS options (e.g. ``mip_rel_gap``).
    """

    def __init__(self, solver: str = "simplex", presolve: bool | None = None, feas_tol: float | None = None,
                 accept_tol: float = 1e-6, **options: Any):
        self.h = new_highs()
        self.accept_tol = float(accept_tol)
        self.h.setOptionValue("solver", solver)
        if presolve is None:
            presolve = None if solver != "simplex" else False
        if presolve is not None:
            self.h.setOptionValue("presolve", "on" if presolve else "off")
        if feas_tol is not None:
            self.h.setOptionValue("primal_feasibility_tolerance", float(feas_tol))
            self.h.setOptionValue("dual_feasibility_tolerance", float(feas_tol))
        for name, value in options.items():
            self.h.setOptionValue(name, value)
        self.simplex_iterations = 0
        self._mip = False
        self._run_status = highspy.HighsStatus.kOk

    @classmethod
    def from_arrays(cls, c: Any, A_ub: Any = None, b_ub: Any = None, bounds: Any = (0.0, None), A_eq: Any = None,
                    b_eq: Any = None, **kwargs: Any) -> "HighsLP":
        """A fresh instance holding min cᵀx s.t. A_ub x ≤ b_ub, A_eq x = b_eq, bounds (a one-shot LP).

        Parameters
        ----------
        c : array (n,)
        A_ub, A_eq : array or sparse (m_ub, n), (m_eq, n), optional
        b_ub, b_eq : array (m_ub,), (m_eq,)
        bounds : (lower, upper), a sequence of n such pairs, or an array (n, 2)
            ``None`` (or ±inf) means unbounded on that side.
        **kwargs
            The constructor's options (``solver``, ``presolve``, ``feas_tol``, …).

        Returns
        -------
        HighsLP
            Rows in the order A_ub then A_eq (``row_dual`` follows it); call :meth:`solve`.
        """
        lp = cls(**kwargs)
        c = _f64(c)
        n = c.size
        lower, upper = _bounds(bounds, n)
        blocks, lo, hi = [], [], []
        if A_ub is not None:
            b = _f64(b_ub)
            blocks.append(_csr(A_ub, b.size, n))
            lo.append(np.full(b.size, -INF))
            hi.append(b)
        if A_eq is not None:
            b = _f64(b_eq)
            blocks.append(_csr(A_eq, b.size, n))
            lo.append(b)
            hi.append(b)
        A = sp.csc_array(sp.vstack(blocks) if blocks else sp.csr_array((0, n)))
        A.sort_indices()
        model = highspy.HighsLp()
        model.num_col_, model.num_row_ = n, A.shape[0]
        model.col_cost_, model.col_lower_, model.col_upper_ = c, lower, upper
        model.row_lower_ = np.concatenate(lo) if lo else np.zeros(0)
        model.row_upper_ = np.concatenate(hi) if hi else np.zeros(0)
        model.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        model.a_matrix_.num_col_, model.a_matrix_.num_row_ = n, A.shape[0]
        model.a_matrix_.start_ = _i32(A.indptr)
        model.a_matrix_.index_ = _i32(A.indices)
        model.a_matrix_.value_ = _f64(A.data)
        lp.h.passModel(model)
        return lp

    # ------------------------------------------------------------------ sizes
    @property
    def n_cols(self) -> int:
        return int(self.h.getNumCol())

    @property
    def n_rows(self) -> int:
        return int(self.h.getNumRow())

    def rows(self) -> tuple[sp.csr_array, np.ndarray, np.ndarray]:
        """The rows as HiGHS holds them: (A (n_rows, n_cols) CSR, lower, upper) — to check a model's own record of
        them."""
        lp = self.h.getLp()
        a = lp.a_matrix_
        data = (np.asarray(a.value_, dtype=np.float64), np.asarray(a.index_, dtype=np.int64),
                np.asarray(a.start_, dtype=np.int64))
        shape = (int(lp.num_row_), int(lp.num_col_))
        if a.format_ == highspy.MatrixFormat.kRowwise:
            A = sp.csr_array(data, shape=shape)
        else:
            A = sp.csc_array(data, shape=shape).tocsr()
        return A, np.asarray(lp.row_lower_, dtype=np.float64), np.asarray(lp.row_upper_, dtype=np.float64)

    # ---------------------------------------------------------------- editing
    def add_cols(self, cost: Any, lower: Any, upper: Any, starts: Any = None, index: Any = None,
                 value: Any = None) -> np.ndarray:
        """Add columns (CSC entries in existing rows: ``starts``, ``index``, ``value``); returns their indices."""
        cost = _f64(cost)
        k = cost.size
        if k == 0:
            return np.zeros(0, dtype=np.int64)
        base = self.n_cols
        if starts is None:
            starts, index, value = np.zeros(k, np.int32), np.zeros(0, np.int32), np.zeros(0)
        index, value = _i32(index), _f64(value)
        self.h.addCols(k, cost, _f64(lower, k), _f64(upper, k), int(index.size), _i32(starts), index, value)
        return base + np.arange(k, dtype=np.int64)

    def add_rows(self, lower: Any, upper: Any, starts: Any, index: Any, value: Any) -> np.ndarray:
        """Add rows lower ≤ Ax ≤ upper given as CSR entries; returns their indices."""
        upper = _f64(upper)
        k = upper.size
        if k == 0:
            return np.zeros(0, dtype=np.int64)
        base = self.n_rows
        index, value = _i32(index), _f64(value)
        self.h.addRows(k, _f64(lower, k), upper, int(index.size), _i32(starts), index, value)
        return base + np.arange(k, dtype=np.int64)

    def add_rows_matrix(self, A: Any, lower: Any, upper: Any) -> np.ndarray:
        """Add the rows of a sparse matrix ``A`` (n_new, ≤ n_cols) with bounds lower ≤ Ax ≤ upper."""
        R = sp.csr_array(A)
        R.sort_indices()
        return self.add_rows(lower, upper, R.indptr[:-1], R.indices, R.data)

    def delete_rows(self, rows: Any) -> None:
        rows = np.unique(np.asarray(rows, dtype=np.int64))
        if rows.size:
            self.h.deleteRows(int(rows.size), _i32(rows))

    def delete_cols(self, cols: Any) -> None:
        cols = np.unique(np.asarray(cols, dtype=np.int64))
        if cols.size:
            self.h.deleteCols(int(cols.size), _i32(cols))

    def set_col_bounds(self, cols: Any, lower: Any, upper: Any) -> None:
        cols = _i32(cols)
        if cols.size:
            self.h.changeColsBounds(int(cols.size), cols, _f64(lower, cols.size), _f64(upper, cols.size))

    def set_col_costs(self, cols: Any, cost: Any) -> None:
        cols = _i32(cols)
        if cols.size:
            self.h.changeColsCost(int(cols.size), cols, _f64(cost, cols.size))

    def set_coeff(self, row: int, col: int, value: float) -> None:
        self.h.changeCoeff(int(row), int(col), float(value))

    def set_integer(self, cols: Any) -> None:
        """Make columns integer (a MIP from then on)."""
        cols = _i32(cols)
        if cols.size:
            self.h.changeColsIntegrality(int(cols.size), cols, np.array([highspy.HighsVarType.kInteger] * cols.size))
            self._mip = True

    def set_option(self, name: str, value: Any) -> None:
        self.h.setOptionValue(name, value)

    # ------------------------------------------------------------------ solve
    def _run(self, deadline: float | None) -> None:
        remaining = None if deadline is None else max(1e-3, deadline - time.perf_counter())
        # HiGHS compares time_limit with the run time accumulated over all runs of the instance
        self.h.setOptionValue("time_limit", INF if remaining is None else self.h.getRunTime() + remaining)
        self._run_status = self.h.run()

    def solve(self, deadline: float | None = None) -> LPResult:
        """Solve from the current basis until optimal, infeasible, unbounded or the deadline.

        Parameters
        ----------
        deadline : float or None
            A ``time.perf_counter()`` value; None for no limit.

        Returns
        -------
        LPResult
            ``FAILED`` only after the retry from scratch (see the class docstring).
        """
        self._run(deadline)
        res = self._result()
        if res.status is Status.FAILED:
            self.h.clearSolver()
            self._run(deadline)
            res = self._result()
        if res.status is Status.UNBOUNDED and not self._mip:
            res = self._confirm_unbounded(res, deadline)
        return res

    def _confirm_unbounded(self, res: LPResult, deadline: float | None) -> LPResult:
        """Re-solve an "unbounded" LP from scratch with presolve off, then by IPM; an optimal re-solve wins."""
        saved = {name: self.h.getOptionValue(name)[1] for name in ("presolve", "solver")}
        try:
            for name, value in (("presolve", "off"), ("solver", "ipm")):
                for n, v in saved.items():
                    self.h.setOptionValue(n, v)
                self.h.setOptionValue(name, value)
                self.h.clearSolver()
                self._run(deadline)
                again = self._result()
                if again.status is Status.OPTIMAL:
                    return again
        finally:
            for name, value in saved.items():
                self.h.setOptionValue(name, value)
        return res

    def _result(self) -> LPResult:
        h = self.h
        st = h.getModelStatus()
        info = h.getInfo()
        its = int(max(0, info.simplex_iteration_count))
        self.simplex_iterations += its
        message = h.modelStatusToString(st)
        status = _STATUS.get(st, Status.FAILED)
        if self._run_status == highspy.HighsStatus.kError:
            status = Status.FAILED
        accepted = False
        if status is Status.FAILED and st != _MS.kNotset and info.primal_solution_status == 2:
            worst = max(info.max_primal_infeasibility, info.max_dual_infeasibility)
            if 0 <= worst <= self.accept_tol:
                status, accepted = Status.OPTIMAL, True
        mip = self._mip
        sol = h.getSolution()
        has = info.primal_solution_status == 2 and status in (Status.OPTIMAL, Status.LIMIT)
        x = np.asarray(sol.col_value, dtype=np.float64) if has else np.zeros(0)
        rd = np.asarray(sol.row_dual, dtype=np.float64) if has and not mip else np.zeros(0)
        cd = np.asarray(sol.col_dual, dtype=np.float64) if has and not mip else np.zeros(0)
        obj = float(info.objective_function_value) if has else float("nan")
        dual_bound = float(info.mip_dual_bound) if mip else float("nan")
        return LPResult(status, obj, x, rd, cd, its, dual_bound, message, accepted)

    def saved_mip_solutions(self) -> list[np.ndarray]:
        """Improving solutions met during branch and bound (option ``mip_improving_solution_save``)."""
        try:
            return [np.asarray(s.col_value, dtype=np.float64) for s in self.h.getSavedMipSolutions()]
        except AttributeError:  # pragma: no cover - older highspy
            return []


__all__: Sequence[str] = ["Status", "LPResult", "HighsLP", "new_highs", "stdout_silenced", "solver_error", "INF"]
