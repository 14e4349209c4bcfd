"""Hidden class columns of a suppressed exact release: cells known only through their column's sum.

Min-cell suppression (:mod:`marg.marginals.suppression`) releases a whole class column of a
first-order table ``N[x, y]`` as 0 while the class total ``S = N[y=v]`` stays known (the
label table). Every row has some level of ``x`` (the missing level included), so a real
column sums to its class total: a column summing to 0 while ``N[y=v] > 0`` is hidden, and
its ``m`` cells are known only to lie in ``[0, S]`` with sum ``S``.

Sites are marked one by one, before their tables are summed (one site's hidden column plus
another site's real column is neither): :func:`mark_hidden` sets
:attr:`MarginalTable.hidden` to ``S`` per hidden class (checked against the per-table counts
the bundle reports), and :func:`marg.marginals.summary.sum_tables` adds them up. In the
summed table a cell of class ``v`` is then bounded by ``c ≤ N ≤ c + H_v``, with ``c`` its
released count (the sum of the sites' real columns) and ``H_v`` the sum of the hidden ``S``'s
(:func:`count_bounds`; tight: all of ``H_v`` may sit in any one cell). The learners' uncertainty
box covers the whole interval (:func:`marg.learners.calibration.confidence_box`).

**The point estimate** (:func:`filled`, what naive Bayes, Rényi and the simulated rows read) is
the expected count given the other tables, under the model that the sites share p(x | y): the
hidden rows of class v spread over the levels in proportion to the column's released part,
``c + H_v·c/Σc`` (the other sites' real columns of class v), so every column sums to its class
total again; a hidden column with no released part (one site, or every site hid it) spreads
evenly, ``c + H_v/m`` (nothing in the release tells the levels apart). Both lie in the interval.
Reading a hidden cell as 0 would put all of class v's rows nowhere in that table (issue 49: 66 of
134 cells at a small site). The released part is itself selected (a site whose column held a small
cell hid it), so for a rare level it leans low; the box, not the point, carries the guarantee.
:func:`fill_from` fills one site's hidden columns from another summary's shape the same way (the
left-out site of the leave-one-site-out estimate, whose own release has no released part).

**What the box does not hold: the column's sum.** The minimax box holds each hidden cell in its
interval (``tests/learners/test_hidden_intervals.py``: a rule's W(h) over it is the largest worst case
over every filling of the column, against the brute-force joint LP), and the column's sum ``S`` is
kept only through the other blocks: any distribution has ``Σ_a p(x=a, y=v) = p(y=v)`` for every
feature, and an exact block pins ``p(y=v)`` within its cells' widths. The node map has no class-share
entry of its own (``Φ`` holds no ``e_y``), so when *every* feature has a hidden class column (breast-w
at 99–244 patients a site: 486–506 of its 546 cells hidden), nothing pins ``p(y)``, the MRC's and the
DCC's R* is the uniform guess's 1 − 1/K (μ = 0) and their rules are naive Bayes's tie-break — every candidate
erring the same on test rows (BENCHMARKS.md, "Issue 49 (chooser)"). The fix is a class-share column
in the minimax map (its τ the label table's ``N[y]/n``, its λ that table's), which the node map,
the separation oracle, the fixed-rule certificate and the model file would all have to carry.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Mapping, Sequence

import numpy as np

from marg.errors import InputError

from .tables import MarginalTable


def _label_totals(tables: Sequence[MarginalTable], label: str) -> np.ndarray | None:
    """The class totals of the exact label table ``N[y]``, or None without one."""
    for t in tables:
        if t.kind == "counts" and t.clique == (label,) and t.noise.is_exact:
            return np.asarray(t.counts, dtype=np.float64)
    return None


def _hideable(t: MarginalTable, label: str) -> bool:
    """An exact count table ``N[x, y]`` (label last): the only kind suppression hides columns of."""
    return t.kind == "counts" and len(t.clique) == 2 and t.clique[1] == label and t.noise.is_exact


def mark_hidden(tables: Sequence[MarginalTable], label: str, reported: Mapping[str, int] | None = None,
                where: str = "") -> list[MarginalTable]:
    """One release's tables with their hidden class columns marked (:attr:`MarginalTable.hidden`).

    Parameters
    ----------
    tables : one site's (or one already-summed set of) tables
    label : the label's name
    reported : dict table name → suppressed cells, optional
        What the bundle header says (``suppressed_cells``; ``{}`` when it reports none). Each
        exact table must hide exactly that many cells (``m`` per hidden column). None: no
        report to check (tables handed over directly).
    where : the bundle, for messages

    Returns
    -------
    list of MarginalTable
        The same tables; those with a newly found hidden column carry ``hidden[v] =
        N[y=v] − (released column sum + hidden so far)`` for it (the class total, for one site).

    Raises
    ------
    InputError
        Hidden cells counted differently from the report, a reported table that is not in the
        release, or hidden columns without an exact label table to give their sums.
    """
    pre = f"{where}: " if where else ""
    totals = _label_totals(tables, label)
    out: list[MarginalTable] = []
    names = set()
    for t in tables:
        names.add(t.name)
        found = np.zeros(0, dtype=bool)
        if totals is not None and _hideable(t, label):
            before = np.zeros(t.shape[1]) if t.hidden is None else t.hidden
            colsum = np.asarray(t.counts, dtype=np.float64).sum(axis=0)
            found = (colsum == 0) & (before == 0) & (totals > 0)
            if found.any():
                t = replace(t, hidden=before + np.where(found, totals - before, 0.0))
        cells = int(found.sum()) * (t.shape[0] if found.size else 0)
        if reported is not None and cells != int(reported.get(t.name, 0)):
            raise InputError(f"{pre}table {t.name} has {cells} cells in class columns released as 0, but the bundle "
                             f"reports {int(reported.get(t.name, 0))} suppressed cells there: the release is inconsistent")
        out.append(t)
    extra = sorted(set(reported or {}) - names)
    if extra:
        raise InputError(f"{pre}the bundle reports suppressed cells in {extra[0]}, which it does not release")
    if totals is None and reported:
        raise InputError(f"{pre}suppressed class columns without an exact label table: their sums are unknown")
    return out


def _spread(hidden: np.ndarray, shape: np.ndarray) -> np.ndarray:
    """``hidden[v]`` rows of each class spread over the levels in proportion to ``shape[:, v]`` (evenly where that
    column is empty): shape (m, K)."""
    shape = np.clip(np.asarray(shape, dtype=np.float64), 0.0, None)
    tot = shape.sum(axis=0)
    m = shape.shape[0]
    share = np.where(tot[None, :] > 0, shape / np.where(tot > 0, tot, 1.0)[None, :], 1.0 / m)
    return share * hidden[None, :]


def filled(t: MarginalTable) -> np.ndarray:
    """The point estimate of ``t``'s counts (module docstring): each class's hidden rows spread over the levels in
    proportion to the column's released part, evenly when it has none (shape of ``t.counts``; ``t.counts`` if
    nothing is hidden)."""
    if t.hidden is None or not np.any(t.hidden > 0):
        return t.counts
    c = np.asarray(t.counts, dtype=np.float64)
    return c + _spread(t.hidden, c)


def fill_from(tables: Sequence[MarginalTable], shape_of: Callable[[tuple[str, ...]], np.ndarray | None]
              ) -> list[MarginalTable]:
    """One release's tables with each hidden column filled in proportion to ``shape_of(clique)`` (another
    summary's counts of that table, (m, K); None: evenly) and no longer marked hidden: the rows it stands for,
    for a simulation (its cells lie in their intervals; the release itself keeps its bounds)."""
    out = []
    for t in tables:
        if t.hidden is None or not np.any(t.hidden > 0):
            out.append(t)
            continue
        c = np.asarray(t.counts, dtype=np.float64)
        ref = shape_of(t.clique)
        out.append(replace(t, counts=c + _spread(t.hidden, c if ref is None else ref), hidden=None))
    return out


def count_bounds(t: MarginalTable, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray] | None:
    """Bounds ``lo ≤ N ≤ hi`` on the true counts over ``names`` of a table with hidden columns.

    Parameters
    ----------
    t : MarginalTable ``N[x, y]`` with :attr:`~MarginalTable.hidden`
    names : sub-clique of ``t.clique``, axes in the given order

    Returns
    -------
    (lo, hi) or None
        ``(x, y)``: ``lo = N``, ``hi = N + hidden[v]`` per cell of class ``v``; ``(x,)``:
        ``lo = Σ_v N``, ``hi = lo + Σ_v hidden[v]``; ``(y,)``: exact (``lo = hi``). None when
        nothing is hidden.
    """
    if t.hidden is None or not np.any(t.hidden > 0):
        return None
    names = tuple(names)
    lo = np.asarray(t.marginal(names), dtype=np.float64)
    x, y = t.clique
    if x not in names:
        return lo + t.hidden, lo + t.hidden
    if y not in names:
        return lo, lo + float(t.hidden.sum())
    add = t.hidden[None, :] if names == (x, y) else t.hidden[:, None]
    return lo, lo + add
