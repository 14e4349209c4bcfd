"""The one model of the minimax LP (13): ν, the μ± columns and their bookkeeping, the solve and its read-outs.

Every minimax LP of marg is, on one :class:`marg.lp.HighsLP`::

    min  ν − (τ − λ)ᵀμ⁺ + (τ + λ)ᵀμ⁻ (+ 0 · auxiliary columns)
    s.t. a formulation's rows,   0 ≤ μ± ≤ B,   ν free,

μ = μ⁺ − μ⁻ over a working set of flat μ indices (y·D + j), with costs and bounds from the
one writer :func:`.problem.mu_columns`; at the optimum ν = φ(μ) + 1 and the objective is
R(μ) (:func:`.problem.risk`) for the formulation's φ. :class:`MinimaxModel` owns the model, its
solver options, the ν column, the μ columns entering and leaving (with their coefficients
in rows already there), the flat-index ↔ LP-column maps (``plus``, ``minus``), the box B,
the solve (one status vocabulary: ``"optimal"``/``"time_limit"``; unbounded is
:class:`marg.errors.InconsistentStatistics`, any other failure a
:class:`marg.errors.SolverError`) and the read-outs μ, ν, the duals and the objective.
The model owns its rows too (:class:`.rows.ModelRows`, which it inherits: their tags, and for a
row written in flat μ space its coefficients, label subset, point and dedup key — so a μ column
entering later gets its coefficients in the rows already there, and deleting a row removes it
from HiGHS and from the record at once). A formulation writes only its rows, and the auxiliary
columns it needs:

- row generation (:meth:`MinimaxModel.for_rows`): rows gᵀμ − ν ≤ b a separator reports
  (:meth:`~.rows.ModelRows.add_cuts`), for every separator of the engine;
- :class:`.first_order_models.CompactModel` — the first-order epigraph (t columns, features in and out);
- :func:`.forest_lp.solve_compact`, :func:`.local.solve_local`, :func:`marg.learners.classifiers.dcc_hinge.solve_hinge`,
  :func:`.fixed_rule_lp.rule_lp_solution` — one-shot LPs (message, reparametrisation, score,
  multiplier columns);
- :class:`marg.learners.boost.monomial_lp.MonomialLP` — monomial columns, rows at domain points
  (:meth:`~.rows.ModelRows.add_flat_rows` with ν's coefficient |C|).

Column layout (``layout``): ``"pairs"`` μ⁺_1, μ⁻_1, μ⁺_2, … (row generation, boosting),
``"blocks"`` the μ⁺ of one call then its μ⁻ (the epigraph and one-shot LPs), ``"minus-first"``
the μ⁻ block then the μ⁺ block (the hinge LP, written in θ = −μ). The layout only orders the
columns — the LP is the same — but the simplex path, and so the optimum returned among
several, follows it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray
import scipy.sparse as sp

from marg.errors import InconsistentStatistics, InputError
from marg.lp import INF, HighsLP, LPResult, Status, solver_error

from .problem import mu_columns, risk
from .rows import ModelRows

LAYOUTS = ("pairs", "blocks", "minus-first")


class MinimaxModel(ModelRows):
    """LP (13)'s columns on one HiGHS model; a formulation adds the rows.

    Parameters
    ----------
    tau, lam : ndarray, m = K·D entries (any shape; flattened)
        The box's centre τ and half-widths λ ≥ 0.
    layout : {"pairs", "blocks", "minus-first"}
        Order of the μ± columns of one :meth:`add_mu` call (module docstring).
    solver, presolve, feas_tol, accept_tol
        The :class:`marg.lp.HighsLP` options.
    what : str
        The LP's name in error messages.
    dedup : bool
        :meth:`~.rows.ModelRows.add_cuts` writes a row already in the model once.

    Attributes
    ----------
    lp : HighsLP
    ref : ndarray of int (n_cols,)
        Flat μ index of each LP column (−1: ν or an auxiliary column).
    sign : ndarray of int8 (n_cols,)
        +1 for μ⁺, −1 for μ⁻, 0 for ν and auxiliary columns.
    tag : ndarray of int (n_cols,)
        The formulation's owner of each column (e.g. the feature, −1 shared), for
        :meth:`~.rows.ModelRows.delete_tagged`; the rows' owners, labels, points and flat
        coefficients are :class:`.rows.ModelRows`'.
    plus, minus : ndarray of int (m,)
        LP column of μ⁺_j, μ⁻_j (−1: j not in the model).
    bound : ndarray (m,)
        The box B_j on μ±_j.
    mu : ndarray (m,); nu, objective : float; x, row_dual, col_dual : ndarray
        Read-outs of the last optimal solve (kept as they were after a time limit).
    """

    def __init__(self, tau: Any, lam: Any, bound: float | np.ndarray = np.inf, *, layout: str = "pairs",
                 solver: str = "simplex", presolve: bool | None = None, feas_tol: float | None = 1e-8,
                 accept_tol: float = 1e-6, what: str = "the minimax LP", dedup: bool = True):
        self.tau = np.asarray(tau, dtype=np.float64).ravel()
        self.lam = np.asarray(lam, dtype=np.float64).ravel()
        if self.tau.shape != self.lam.shape:
            raise InputError(f"tau {self.tau.shape} and lam {self.lam.shape} differ in shape")
        if np.any(self.lam < 0):
            raise InputError("the uncertainty box needs lambda >= 0")
        if layout not in LAYOUTS:
            raise InputError(f"layout must be one of {LAYOUTS}, got {layout!r}")
        self.layout = layout
        self.what = what
        self.bound = np.broadcast_to(np.asarray(bound, dtype=np.float64), (self.m,)).copy()
        if not np.all(self.bound > 0):
            raise InputError("the box bound on mu must be positive")
        self.lp = HighsLP(solver=solver, presolve=presolve, feas_tol=feas_tol, accept_tol=accept_tol)
        self.lp.add_cols([1.0], [-INF], [INF])  # ν, column 0
        self.ref = np.array([-1], dtype=np.int64)
        self.sign = np.array([0], dtype=np.int8)
        self.tag = np.array([-1], dtype=np.int64)
        self.plus = np.full(self.m, -1, dtype=np.int64)
        self.minus = np.full(self.m, -1, dtype=np.int64)
        self.status = "unsolved"
        self.result: LPResult | None = None
        self.objective = np.nan
        self.nu = np.nan
        self.mu = np.zeros(self.m)
        self.x = np.zeros(1)
        self.row_dual = np.zeros(0)
        self.col_dual = np.zeros(1)
        self._init_rows(dedup)

    @classmethod
    def for_rows(cls, tau: Any, lam: Any, bound: float | np.ndarray = 1e3, feas_tol: float = 1e-8,
                 accept_tol: float = 1e-6) -> "MinimaxModel":
        """The model of row generation: μ± in pairs, boxed by ``bound`` (so a restricted row set never
        makes it unbounded), warm-started simplex without presolve, rows written once."""
        return cls(tau, lam, bound, layout="pairs", solver="simplex", presolve=False, feas_tol=feas_tol,
                   accept_tol=accept_tol, what="the minimax LP (row generation)")

    # ------------------------------------------------------------------ sizes
    @property
    def m(self) -> int:
        return int(self.tau.size)

    @property
    def n_cols(self) -> int:
        return int(self.ref.size)

    @property
    def active(self) -> np.ndarray:
        """Flat μ indices in the model, in the order their μ⁺ columns sit in the LP."""
        active: NDArray[np.int64] = self.ref[self.sign == 1]
        return active

    def extend(self, tau: Any, lam: Any) -> np.ndarray:
        """New flat μ indices with these τ, λ (a map whose columns are discovered, e.g. boosting's); returns them."""
        tau = np.asarray(tau, dtype=np.float64).ravel()
        lam = np.asarray(lam, dtype=np.float64).ravel()
        if tau.shape != lam.shape or np.any(lam < 0):
            raise InputError("extend: tau and lam must have one shape and lambda >= 0")
        new = self.m + np.arange(tau.size, dtype=np.int64)
        self.tau, self.lam = np.concatenate([self.tau, tau]), np.concatenate([self.lam, lam])
        self.bound = np.concatenate([self.bound, np.full(tau.size, self.bound[0] if self.bound.size else np.inf)])
        self.plus = np.concatenate([self.plus, np.full(tau.size, -1, dtype=np.int64)])
        self.minus = np.concatenate([self.minus, np.full(tau.size, -1, dtype=np.int64)])
        self.mu = np.concatenate([self.mu, np.zeros(tau.size)])
        self._touched = np.concatenate([self._touched, np.zeros(tau.size, dtype=bool)])
        self._F = None
        return new

    # ---------------------------------------------------------------- columns
    def add_mu(self, cols: Any, bound: float | np.ndarray | None = None, fill: Any = None, tag: Any = -1) -> None:
        """Bring flat μ columns into the model at μ = 0 (a feasible point stays feasible).

        Parameters
        ----------
        cols : ndarray of int (n,)
            Flat μ indices not in the model yet.
        bound : float or ndarray (n,), optional
            Their box B (default: the model's ``bound``, which is updated).
        fill : sparse or dense (n_rows, n), optional
            μ_j's coefficient in recorded rows that have no entry in these columns yet (e.g. rows
            generated while the column was out, or a new column's values at the rows' points);
            recorded. μ_j's column is then its coefficients in every recorded row (μ⁺ gets them,
            μ⁻ their negation).
        tag : int or ndarray (n,)
            Owner tag of the new columns.
        """
        cols = np.asarray(cols, dtype=np.int64).ravel()
        n = cols.size
        if n == 0:
            return
        if np.any(self.plus[cols] >= 0) or np.unique(cols).size != n:
            raise InputError("add_mu: a column is already in the model or repeated")
        coef = self._column_entries(cols, fill)
        if bound is not None:
            self.bound[cols] = np.broadcast_to(np.asarray(bound, dtype=np.float64), (n,))
        pairs = self.layout == "pairs"
        costs, lo, hi = mu_columns(self.tau, self.lam, cols, self.bound[cols], pairs=pairs)
        t = np.arange(n)
        if pairs:
            ref, sign, which = np.repeat(cols, 2), np.tile(np.array([1, -1], np.int8), n), np.repeat(t, 2)
        else:
            ref, which = np.concatenate([cols, cols]), np.concatenate([t, t])
            sign = np.repeat(np.array([1, -1], np.int8), n)
            if self.layout == "minus-first":
                swap = np.concatenate([np.arange(n, 2 * n), np.arange(n)])
                costs, lo, hi, sign = costs[swap], lo[swap], hi[swap], sign[swap]
        entries: tuple[list[int] | np.ndarray, ...] = ()
        if coef is not None:
            A = sp.csc_array(coef)
            A.sort_indices()
            starts, idx, val = [], [], []
            nnz = 0
            for j in range(2 * n):
                s, e = A.indptr[which[j]], A.indptr[which[j] + 1]
                starts.append(nnz)
                idx.append(A.indices[s:e].astype(np.int32))
                val.append(float(sign[j]) * A.data[s:e].astype(np.float64))
                nnz += e - s
            entries = (starts, np.concatenate(idx), np.concatenate(val))
        first = self.lp.add_cols(costs, lo, hi, *entries)[0]
        self.ref = np.concatenate([self.ref, ref])
        self.sign = np.concatenate([self.sign, sign])
        self.tag = np.concatenate([self.tag, np.broadcast_to(np.asarray(tag, dtype=np.int64), (n,))[which]])
        at = first + np.arange(2 * n)
        self.plus[ref[sign == 1]] = at[sign == 1]
        self.minus[ref[sign == -1]] = at[sign == -1]

    def add_aux(self, cost: Any, lower: Any, upper: Any, starts: Any = None, index: Any = None, value: Any = None,
                tag: Any = -1) -> np.ndarray:
        """Auxiliary columns of a formulation (epigraph, message, score, multiplier variables); returns their LP
        indices."""
        cols = self.lp.add_cols(cost, lower, upper, starts, index, value)
        self.ref = np.concatenate([self.ref, np.full(cols.size, -1, dtype=np.int64)])
        self.sign = np.concatenate([self.sign, np.zeros(cols.size, dtype=np.int8)])
        self.tag = np.concatenate([self.tag, np.broadcast_to(np.asarray(tag, dtype=np.int64), (cols.size,))])
        return cols

    def delete_cols(self, cols: Any) -> None:
        """Delete LP columns (not ν); μ of a deleted μ± column becomes 0."""
        cols = np.unique(np.asarray(cols, dtype=np.int64))
        if cols.size == 0:
            return
        if cols[0] == 0:
            raise InputError("delete_cols: the nu column stays")
        self.lp.delete_cols(cols)
        gone = self.ref[cols]
        self.mu[gone[gone >= 0]] = 0.0
        keep = np.ones(self.n_cols, dtype=bool)
        keep[cols] = False
        self.ref, self.sign, self.tag = self.ref[keep], self.sign[keep], self.tag[keep]
        self.plus[:] = -1
        self.minus[:] = -1
        at = np.arange(self.n_cols)
        self.plus[self.ref[self.sign == 1]] = at[self.sign == 1]
        self.minus[self.ref[self.sign == -1]] = at[self.sign == -1]

    def remove_mu(self, cols: Any) -> None:
        """Take flat μ columns out of the model (their μ becomes 0)."""
        cols = np.asarray(cols, dtype=np.int64).ravel()
        if cols.size == 0:
            return
        if np.any(self.plus[cols] < 0):
            raise InputError("remove_mu: a column is not in the model")
        self.delete_cols(np.concatenate([self.plus[cols], self.minus[cols]]))

    def set_bound(self, bound: float | np.ndarray) -> None:
        """Change the box B on |μ_j| (all m entries; the columns in the model updated)."""
        self.bound = np.broadcast_to(np.asarray(bound, dtype=np.float64), (self.m,)).copy()
        on = np.flatnonzero(self.sign != 0)
        self.lp.set_col_bounds(on, np.zeros(on.size), self.bound[self.ref[on]])

    # ------------------------------------------------------------------- rows
    def mu_entries(self, flat: Any, vals: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The entries a row writes for Σ_t vals[t]·μ[flat[t]] = Σ_t vals[t]·(μ⁺ − μ⁻): (t, LP column,
        value) triples, the μ⁺ entries then the μ⁻ entries (terms of columns not in the model dropped)."""
        flat = np.asarray(flat, dtype=np.int64)
        vals = np.asarray(vals, dtype=np.float64)
        on = np.flatnonzero(self.plus[flat] >= 0)
        f, v = flat[on], vals[on]
        return np.concatenate([on, on]), np.concatenate([self.plus[f], self.minus[f]]), np.concatenate([v, -v])

    # ------------------------------------------------------------------ solve
    def solve(self, deadline: float | None = None) -> str:
        """Solve from the current basis (``deadline`` a ``time.perf_counter()`` value); "optimal" or "time_limit".

        Raises
        ------
        InconsistentStatistics
            The LP is unbounded: no distribution matches τ within λ.
        SolverError
            HiGHS failed (after :meth:`marg.lp.HighsLP.solve`'s retry).
        """
        res = self.lp.solve(deadline)
        self.result = res
        if res.status is Status.LIMIT:
            self.status = "time_limit"
            return self.status
        if res.status is Status.UNBOUNDED:
            raise InconsistentStatistics(
                f"no distribution matches the statistics within lambda: {self.what} is unbounded; "
                "the released tables are inconsistent (widen lambda)")
        if res.status is not Status.OPTIMAL:
            raise solver_error(self.what, res)
        self.status = "optimal"
        self.x, self.row_dual, self.col_dual = res.x, res.row_dual, res.col_dual
        self.objective = float(res.objective)
        self.nu = float(res.x[0])
        self.mu = self.mu_of(res.x)
        return self.status

    # ------------------------------------------------------------- read-outs
    def mu_of(self, x: np.ndarray) -> np.ndarray:
        """μ = μ⁺ − μ⁻ (m,) at LP column values x (0 outside the model)."""
        mu = np.zeros(self.m)
        pl, mi = self.sign == 1, self.sign == -1
        np.add.at(mu, self.ref[pl], x[pl])
        np.add.at(mu, self.ref[mi], -x[mi])
        return mu

    def risk(self, mu: np.ndarray, phi: float) -> float:
        """R(μ) at a flat μ given φ(μ) (:func:`marg.learners.minimax.problem.risk`)."""
        return risk(self.tau, self.lam, np.asarray(mu, dtype=np.float64).ravel(), phi)

    def bounds(self, cuts: Any) -> tuple[float, float, float]:
        """One row-generation round's (LP value, R(μ), φ(μ)) at the current μ, φ(μ) = max value − 1 of ``cuts``
        (one per label subset, as a separator reports them: the exact maximum over the domain)."""
        phi = max(float(c[2]) for c in cuts) - 1.0
        return self.objective, self.risk(self.mu, phi), phi

    def box_gap(self, dtol: float = 1e-8) -> float:
        """Σ_j B_j·|d_j| over μ± sitting at their upper bound B with reduced cost d_j < −dtol.

        A variable at B with a (significantly) negative reduced cost is held there by the box:
        every optimum of the boxed LP has it at B, so the box binds. Reduced costs within
        ``dtol`` (above the solver's dual tolerance) are numerical noise of degenerate
        optima (e.g. the free directions of λ = 0 problems) and are ignored.
        """
        on = np.flatnonzero(self.sign != 0)
        if on.size == 0 or self.x.size != self.n_cols:
            return 0.0
        x, d = self.x[on], self.col_dual[on]
        B = self.bound[self.ref[on]]
        at = (x >= B * (1.0 - 1e-9)) & (d < -dtol)
        return float(np.sum(B[at] * -d[at]))
