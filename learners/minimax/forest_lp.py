"""The minimax LP on a forest in exact epigraph form: the max-sum DP written as linear constraints.

For a label subset C, max_x Σ_{y∈C} Φ(x,y)ᵀμ ≤ T holds iff there are message variables
satisfying the DP's inequalities (:func:`forest_max_rows`), so the exponentially many rows
(x, C) of LP (13) become, per C, Σ_edges m_p·m_c + Σ_roots m_r + 1 rows and one HiGHS solve
gives R* and, from the duals, the worst-case distribution's flows on the forest
(:func:`solve_compact`). The same row writer serves the hinge-loss LP
(:mod:`marg.learners.classifiers.dcc_hinge`) and the fixed-rule LP (:mod:`.fixed_rule_lp`).

The one-shot LPs (these, :func:`.local.solve_local`) stage their rows in a :class:`RowBuffer`
(μ terms by :class:`MuTerms`), put them on the one model (:func:`one_shot_model`, a
:class:`.lp_model.MinimaxModel` holding ν and the μ columns) after their auxiliary columns,
and solve once (:meth:`RowBuffer.solve`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Sequence, TypedDict

import numpy as np
from numpy.typing import ArrayLike, NDArray
import scipy.sparse as sp

from marg.lp import INF, solver_error

from .forest import ForestOracle
from .layout import flat_index
from .lp_model import MinimaxModel
from .solution import MinimaxSolution


class SubsetFlow(TypedDict):
    """One label subset C's worst-case flow on the forest: ``edge[c]`` (m_parent, m_c) the mass on the edge
    from node c to its parent, ``root[r]`` (m_r,) the mass at a root, ``total`` the subset's mass β_C."""

    edge: dict[int, NDArray[np.float64]]
    root: dict[int, NDArray[np.float64]]
    total: float


@dataclass(frozen=True)
class Flows:
    """The forest epigraph LP's read-out: ``flows``, per label subset, the worst-case distribution
    as the duals of its rows (``"edge"``, ``"root"`` and ``"total"``;
    :func:`.worst_case.pair_marginals` reads pair marginals from them)."""

    flows: list[SubsetFlow]


def one_shot_model(tau: np.ndarray, lam: np.ndarray, columns: np.ndarray, what: str,
                   layout: str = "blocks") -> MinimaxModel:
    """The :class:`.lp_model.MinimaxModel` of a one-shot minimax LP: ν, then the μ± columns of the flat
    indices ``columns`` (no box), solved by the dual simplex after presolve with tolerances 1e-10."""
    model = MinimaxModel(tau, lam, layout=layout, solver="simplex", presolve=True, feas_tol=1e-10, what=what)
    model.add_mu(np.asarray(columns, dtype=np.int64))
    return model


class RowBuffer:
    """Sparse ``A_ub`` rows (row index, column, value), right-hand sides and a tag per row."""

    def __init__(self) -> None:
        self.R: list[np.ndarray] = []
        self.C: list[np.ndarray] = []
        self.V: list[np.ndarray] = []
        self.rhs: list[float] = []
        self.meta: list[tuple[Any, ...]] = []
        self.n = 0

    def add(self, cols: ArrayLike, vals: ArrayLike, rhs: float, meta: tuple[Any, ...] = ()) -> None:
        columns = np.asarray(cols, dtype=np.int64)
        self.R.append(np.full(columns.size, self.n, dtype=np.int64))
        self.C.append(columns)
        self.V.append(np.asarray(vals, dtype=np.float64))
        self.rhs.append(float(rhs))
        self.meta.append(meta)
        self.n += 1

    def add_block(self, R: ArrayLike, C: ArrayLike, V: ArrayLike, rhs: ArrayLike,
                  meta: tuple[Any, ...] | list[tuple[Any, ...]] = ()) -> None:
        """Many rows at once: entries (R[t], C[t], V[t]) with LOCAL row indices 0..len(rhs)−1;
        ``meta`` is one tag for every row, or a list with one tag per row."""
        right = np.asarray(rhs, dtype=np.float64).ravel()
        self.R.append(np.asarray(R, dtype=np.int64) + self.n)
        self.C.append(np.asarray(C, dtype=np.int64))
        self.V.append(np.asarray(V, dtype=np.float64))
        self.rhs.extend(right.tolist())
        self.meta.extend(meta if isinstance(meta, list) else [meta] * right.size)
        self.n += int(right.size)

    def matrix(self, nvar: int) -> sp.csr_array:
        if not self.R:
            return sp.csr_array((self.n, nvar))
        return sp.csr_array((np.concatenate(self.V), (np.concatenate(self.R), np.concatenate(self.C))),
                            shape=(self.n, nvar))

    def solve(self, model: MinimaxModel, nvar: int, aux_lower: np.ndarray | None = None) -> None:
        """Put these rows (≤ rhs) on ``model`` after its auxiliary columns ``model.n_cols .. nvar − 1``
        (cost 0, free, or bounded below by ``aux_lower``) and solve it once.

        Raises
        ------
        InconsistentStatistics
            The LP is unbounded (no distribution matches τ within λ).
        SolverError
            HiGHS failed (or stopped at a limit).
        """
        k = nvar - model.n_cols
        lower = np.full(k, -INF) if aux_lower is None else np.asarray(aux_lower, dtype=np.float64)
        model.add_aux(np.zeros(k), lower, np.full(k, INF))
        model.add_rows_matrix(self.matrix(nvar), np.asarray(self.rhs))
        if model.solve() != "optimal":
            assert model.result is not None  # the solve just set it
            raise solver_error(model.what, model.result)


Entries = Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]


def forest_max_rows(
    oracle: ForestOracle,
    dead_col: np.ndarray,
    entries: Entries,
    nvar: int,
    rows: RowBuffer,
    tag: Any = 0,
) -> tuple[np.ndarray | None, int]:
    """Rows making Σ_r t_r ≥ max_x g(x) for g(x) = Σ_i g_i(x_i) + Σ_{(i,j)∈E} g_ij(x_i, x_j)
    on the oracle's active forest, with every factor value linear in the LP variables.

    The max-sum DP written as constraints on new free message variables (the smallest
    feasible messages are the DP's)::

        m_c(x_p) ≥ g_pc(x_p, x_c) + g_c(x_c) + Σ_{k child of c} m_k(x_c)   for every (x_p, x_c),
        t_r ≥ g_r(x_r) + Σ_{k child of r} m_k(x_r)                          for every root value.

    So "max_x g(x) ≤ T" holds iff Σ_r t_r ≤ T is feasible with these rows; the caller adds
    that row (with its own T). A min is the max of the negation. Cells with ``dead_col``
    True are −∞ (x through them is outside the max): their rows are dropped, and a parent
    value with no allowed continuation is dropped upwards. Rows come child by child
    (leaves first), an edge's cells in row-major (x_p, x_c) order, then the roots.

    Parameters
    ----------
    oracle : ForestOracle
        Map and active forest.
    dead_col : ndarray of bool (D,)
        Ψ columns that are −∞ (one-hot node levels and edge cells).
    entries : callable
        ``entries(row, psi_cols, vals)`` -> (rows, LP columns, LP values): the entries of
        vals[t]·g[psi_cols[t]] in row ``row[t]`` (g a linear function of the LP variables per
        Ψ column), vectorised over t.
    nvar : int
        Number of LP variables so far; the message and root variables come next.
    rows : RowBuffer
        Receives the rows, tagged (tag, 0, c, x_p, x_c) for an edge row and
        (tag, 1, r, x_r, 0) for a root row.
    tag : any

    Returns
    -------
    roots : ndarray of int (n_roots,) or None
        The root epigraph variables t_r (free); None, with no rows added, when some root has
        no allowed value (the max is over an empty set: −∞, the bound holds vacuously).
    nvar : int
        The new number of LP variables.
    """
    pm = oracle.pmap
    n = pm.n_nodes
    alive: list[np.ndarray] = []
    for i in range(n):
        alive.append(~dead_col[oracle.vertex_cols[i]] if pm.blocks[i].kind == "onehot"
                     else np.ones(int(oracle.n_vertices[i]), dtype=bool))
    pending: list[tuple[int, NDArray[np.int64], NDArray[np.bool_], NDArray[np.bool_]]] = []
    for c in reversed(oracle.order):
        p = int(oracle.parent[c])
        if p < 0:
            continue
        e = int(oracle.parent_edge[c])
        mi, mj = pm.edge_shape[e]
        cells = pm.edge_columns(e).reshape(mi, mj)
        if pm.edges[e][0] == c:  # stored (c, p)
            cells = cells.T
        ok = ~dead_col[cells] & alive[c][None, :]  # (m_p, m_c)
        has = ok.any(axis=1)
        alive[p] = alive[p] & has
        pending.append((c, cells, ok, has))
    if any(not alive[r].any() for r in oracle.roots):
        return None, nvar
    msg_var: dict[int, NDArray[np.int64]] = {}  # per child: var index per parent value (−1: dead)
    for c, cells, ok, has in pending:
        var = np.full(cells.shape[0], -1, dtype=np.int64)
        var[has] = nvar + np.arange(int(has.sum()))
        nvar += int(has.sum())
        msg_var[c] = var

    vstart = pm.nodes.vertex_start
    vcol, vval = pm.nodes.vertex_col, pm.nodes.vertex_val

    def block(node: np.ndarray, own: np.ndarray | None, at: np.ndarray, epi: np.ndarray,
              metas: list[tuple[Any, ...]]) -> None:
        """Rows (one per t): own cell (if any) + node[t]'s term at vertex at[t] + its children's
        messages at at[t] − epi[t] ≤ 0."""
        r = np.arange(at.size)
        flat = vstart[node] + at
        parts = [entries(r, vcol[flat], vval[flat])]
        if own is not None:
            parts.insert(0, entries(r, own, np.ones(at.size)))
        for v in np.unique(node):
            kids = oracle.children[int(v)]
            if kids:
                sel = np.flatnonzero(node == v)
                for q in kids:
                    parts.append((r[sel], msg_var[q][at[sel]], np.ones(sel.size)))
        parts.append((r, epi, -np.ones(at.size)))
        rows.add_block(np.concatenate([x[0] for x in parts]), np.concatenate([x[1] for x in parts]),
                       np.concatenate([x[2] for x in parts]), np.zeros(at.size), metas)

    for c, cells, ok, has in pending:
        a, b = np.nonzero(ok)
        block(np.full(a.size, c), cells[a, b], b, msg_var[c][a], [(tag, 0, c, int(i), int(j)) for i, j in zip(a, b)])
    roots = nvar + np.arange(len(oracle.roots))
    nvar += len(oracle.roots)
    at = [np.flatnonzero(alive[r]) for r in oracle.roots]
    node = np.repeat(np.asarray(oracle.roots, dtype=np.int64), [x.size for x in at])
    at_all = np.concatenate(at) if at else np.zeros(0, dtype=np.int64)
    epi = np.repeat(roots, [x.size for x in at])
    block(node, None, at_all, epi, [(tag, 1, int(r), int(i), 0) for r, x in zip(oracle.roots, at) for i in x])
    return roots, nvar


class MuTerms:
    """The rows' entries of μ = μ⁺ − μ⁻ on a :class:`.lp_model.MinimaxModel` (its ``plus`` and
    ``minus`` columns), per label subset: the one-shot LPs' (:func:`solve_compact`,
    :func:`.local.solve_local`, the hinge and fixed-rule LPs) writer of Σ_{y∈C} θ_y terms."""

    def __init__(self, model: MinimaxModel, D: int, subsets: Sequence[tuple[int, ...]]):
        self.model, self.D, self.subsets = model, int(D), subsets

    def entries(self, k: int, row: np.ndarray, psi_cols: np.ndarray,
                vals: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(row, LP column, value) triples of Σ_{y∈C} vals[t]·μ[y, psi_cols[t]] in row[t], vectorized."""
        R, C, V = [], [], []
        for y in self.subsets[k]:
            t, c, v = self.model.mu_entries(flat_index(self.D, y, psi_cols), vals)
            R.append(row[t])
            C.append(c)
            V.append(v)
        if not R:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
        return np.concatenate(R), np.concatenate(C), np.concatenate(V)


def solve_compact(
    oracle: ForestOracle,
    tau: np.ndarray,
    lam: np.ndarray,
    columns: np.ndarray,
) -> MinimaxSolution:
    """LP (13) over the active forest in exact epigraph form, one HiGHS solve, no rows generated.

    For a label subset C, max_x Σ_{y∈C} Φ(x,y)ᵀμ ≤ T holds iff there are messages m with

        m_c(x_p) ≥ θ_pc(x_p, x_c) + θ_c(x_c) + Σ_{k child of c} m_k(x_c)   for every (x_p, x_c),
        t_r ≥ θ_r(x_r) + Σ_{k child of r} m_k(x_r)                          for every root value,
        Σ_roots t_r ≤ T,

    (the smallest feasible messages are the DP's; :func:`forest_max_rows`), with θ linear in μ. So the exponentially
    many rows (x, C) of LP (13) become, per C, Σ_edges m_p·m_c + Σ_roots m_r + 1 rows:
    Σ_r t_{C,r} − |C|·ν ≤ 1 − |C|. Cells the oracle excludes (τ = λ = 0) are −∞: their
    constraints are dropped, and a value with no allowed continuation is dropped upwards.

    Parameters
    ----------
    oracle : ForestOracle
        Map, active forest, label subsets and excluded cells.
    tau, lam : ndarray (K, D)
    columns : ndarray of int
        Flat μ indices in the LP (the others are fixed at 0).

    Returns
    -------
    MinimaxSolution
        ``value`` the LP optimum R* (= R(μ), φ = ν − 1 the forest's exact φ(μ)), ``mu`` (K, D),
        ``impossible`` the excluded cells, ``bound`` inf (no box) and ``read`` its :class:`Flows`, the LP
        duals as the worst-case distribution's structure: one dict per label subset C,
        ``["edge"][c]`` (m_parent, m_c) the mass w_C(x_p = a, x_c = b) on the edge from node c to
        its parent, ``["root"][r]`` the mass w_C(x_r = a) at a root, ``["total"]`` the total
        mass β_C, with Σ_C |C|·β_C = 1 and p(x, y) = Σ_{C∋y} w_C(x).

    Raises
    ------
    InconsistentStatistics
        If the LP is unbounded (no distribution matches τ within λ).
    SolverError
        If HiGHS fails.
    """
    K, D = oracle.K, oracle.D
    model = one_shot_model(tau, lam, columns, "the forest minimax LP")
    mt = MuTerms(model, D, oracle.subsets)
    # variables: ν | μ⁺ (nmu) | μ⁻ (nmu) | messages and root epigraphs
    nvar = model.n_cols
    pen = oracle.penalty
    rows = RowBuffer()
    for k, Cset in enumerate(oracle.subsets):
        dead_col = (pen[k] < 0) if pen is not None else np.zeros(D, dtype=bool)
        roots, nvar = forest_max_rows(oracle, dead_col, partial(mt.entries, k), nvar, rows, tag=k)
        if roots is None:
            continue
        size = len(Cset)
        rows.add(np.concatenate([roots, [0]]), np.concatenate([np.ones(len(roots)), [-float(size)]]), 1.0 - size,
                 (k, 2, -1, 0, 0))
    meta = rows.meta
    rows.solve(model, nvar)
    # the worst-case distribution: per subset C, the flow w_C on the forest (LP duals)
    mass = np.clip(-model.row_dual, 0.0, None)
    flows: list[SubsetFlow] = [{"edge": {}, "root": {}, "total": 0.0} for _ in oracle.subsets]
    for r_, (k, kind, v, a, b) in enumerate(meta):
        f = flows[k]
        if kind == 0:
            c = v
            shape = (int(oracle.n_vertices[int(oracle.parent[c])]), int(oracle.n_vertices[c]))
            f["edge"].setdefault(c, np.zeros(shape))[a, b] += mass[r_]
        elif kind == 1:
            f["root"].setdefault(v, np.zeros(int(oracle.n_vertices[v])))[a] += mass[r_]
        else:
            f["total"] = float(mass[r_])
    value = model.objective
    impossible = np.zeros((K, D), dtype=bool) if pen is None else pen[:K] < 0  # subsets[y] = (y,) for y < K
    return MinimaxSolution(mu=model.mu.reshape(K, D), tau=np.asarray(tau, dtype=np.float64).reshape(K, D),
                           lam=np.asarray(lam, dtype=np.float64).reshape(K, D), phi=model.nu - 1.0, value=value,
                           iterations=[value], lower=[value], upper=[value], converged=True, n_rows=rows.n,
                           impossible=impossible, bound=np.inf, simplex_iterations=model.lp.simplex_iterations,
                           lp_columns=model.n_cols, read=Flows(flows))
