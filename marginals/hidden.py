"""Hidden tails of a suppressed exact release: cells known only through their sum.

Min-cell suppression (:mod:`marg.marginals.suppression`) releases the last levels of a class
column of a first-order table ``N[x, y]`` as 0 — a **tail**, the whole column when the column is
short or its class small — while the class total ``S = N[y=v]`` stays known (the label table).
Every row has some level of ``x`` (the missing level included), so a real column sums to its
class total: a column summing to ``c < S`` hides ``S − c`` rows in its tail, each of its cells
anywhere in ``[0, S − c]``, their sum ``S − c``.

Sites are marked one by one, before their tables are summed (one site's hidden tail plus
another site's real column is neither): :func:`mark_hidden` sets :attr:`MarginalTable.hidden`
(the hidden rows per class) and one :class:`~marg.marginals.counts.tables.HiddenTail` per hidden column
(its first level, its rows, the site's released column). The tail starts after the column's
last released nonzero cell; a released 0 just before it is read as hidden too (the bundle
reports how many cells each table hid, not where: the interval ``[0, rows]`` still holds the
true 0), unless the table hid one column and the report says its length.
:func:`marg.marginals.summary.sum_tables` concatenates the tails. In the summed table a cell
``(a, v)`` is then bounded by ``c ≤ N ≤ c + Σ rows`` over the tails of class ``v`` that cover
level ``a`` (:func:`count_bounds`; tight: a tail's rows may all sit in any one of its cells). The
learners' uncertainty box covers the whole interval
(:func:`marg.learners.features.calibration.confidence_box`).

**The point estimate** (:func:`filled`, what naive Bayes, Rényi and the simulated rows read) is
the expected count given the other tables, under the model that the sites share p(x | y): a
tail's rows spread over its levels in proportion to the **complete** columns of class v — the
sites that released that column whole — and evenly where none did. A partly released column is
no shape for another site's tail: its own tail's levels read 0 there, and spreading by it would
pile every hidden row onto the levels it happened to release. Every column then sums to its class total again, each cell
inside its interval. Reading hidden cells as 0 would put all of those rows nowhere (issue 49: many of a
small site's cells; BENCHMARKS.md, "Issue 47: numbers moved out of docstrings"). The complete columns are themselves
selected (a site whose column held a small cell hid part of it), so for a rare level they lean low; the box, not the
point, carries the guarantee. :func:`fill_from` fills one site's tails from another summary's shape the same way
(the left-out site of the leave-one-site-out estimate).

**What the box does not hold: a tail's sum.** The minimax box holds each hidden cell in its
interval (``tests/learners/features/test_hidden_intervals.py``: a rule's W(h) over it is the largest worst case
over every filling of the column, against the brute-force joint LP), and the tail's sum is kept
only through the other blocks: any distribution has ``Σ_a p(x=a, y=v) = p(y=v)`` for every
feature, and an exact block pins ``p(y=v)`` within its cells' widths. The node map has no class-share
entry of its own (``Φ`` holds no ``e_y``), so when *every* feature hides a whole class column,
nothing pins ``p(y)``, the MRC's and the DCC's R* is the uniform guess's 1 − 1/K (μ = 0). Tails
leave most columns' heads released (breast-w: BENCHMARKS.md, "Issue 49 (hidden)").
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Mapping, Sequence

import numpy as np

from marg.errors import InputError

from .counts.tables import HiddenTail, MarginalTable


def _label_totals(tables: Sequence[MarginalTable], label: str) -> np.ndarray | None:
    """The class totals of the exact label table ``N[y]``, or None without one."""
    for t in tables:
        if t.kind == "counts" and t.clique == (label,) and t.noise.is_exact:
            return np.asarray(t.counts, dtype=np.float64)
    return None


def _hideable(t: MarginalTable, label: str) -> bool:
    """An exact count table ``N[x, y]`` (label last): the only kind suppression hides columns of."""
    return t.kind == "counts" and len(t.clique) == 2 and t.clique[1] == label and t.noise.is_exact


def _tail_start(col: np.ndarray) -> int:
    """The first level after a column's last released nonzero cell (0 for an all-zero column)."""
    nz = np.flatnonzero(np.asarray(col) != 0)
    return int(nz[-1]) + 1 if nz.size else 0


def mark_hidden(tables: Sequence[MarginalTable], label: str, reported: Mapping[str, int] | None = None,
                where: str = "") -> list[MarginalTable]:
    """One release's tables with their hidden tails marked (:attr:`MarginalTable.hidden`, ``hidden_tails``).

    Parameters
    ----------
    tables : one site's (or one already-summed set of) tables
    label : the label's name
    reported : dict table name → suppressed cells, optional
        What the bundle header says (``suppressed_cells``; ``{}`` when it reports none). Each
        exact table's hidden columns must be able to hold exactly that many cells: at least 3
        per column (every level of a column of fewer), at most its trailing cells released as 0.
        None: no report to check (tables handed over directly).
    where : the bundle, for messages

    Returns
    -------
    list of MarginalTable
        The same tables; an unmarked table with a column short of its class total carries ``hidden[v] =
        N[y=v] − released column sum`` and a :class:`HiddenTail` for it. A table already marked is left
        as it is (a residue there is an inconsistency the summary refuses).

    Raises
    ------
    InputError
        Hidden cells that cannot be what the report says, a reported table that is not in the
        release, or hidden columns without an exact label table to give their sums.
    """
    pre = f"{where}: " if where else ""
    totals = _label_totals(tables, label)
    out: list[MarginalTable] = []
    names = set()
    for t in tables:
        names.add(t.name)
        lo_cells = hi_cells = 0
        if totals is not None and _hideable(t, label) and t.hidden is None:  # marked once: by site, before the sum
            c = np.asarray(t.counts, dtype=np.float64)
            m, K = c.shape
            rest = totals - c.sum(axis=0)
            found = [v for v in range(K) if rest[v] > 1e-9]
            if found:
                starts = {v: _tail_start(c[:, v]) for v in found}
                if any(st >= m for st in starts.values()):
                    raise InputError(f"{pre}table {t.name} has a class column short of its class total whose last cell "
                                     "is released: that is no suppressed tail")
                lo_cells = sum(min(3, m) for _ in found)
                hi_cells = sum(m - st for st in starts.values())
                want = int((reported or {}).get(t.name, -1))
                if len(found) == 1 and lo_cells <= want <= hi_cells:  # one column: the report says its length
                    starts[found[0]] = m - want
                tails = tuple(HiddenTail(v, starts[v], float(rest[v]), tuple(float(x) for x in c[:, v])) for v in found)
                t = replace(t, hidden=np.where(rest > 1e-9, rest, 0.0),
                            hidden_tails=tuple(t.hidden_tails) + tails)
        if reported is not None and not (lo_cells <= int(reported.get(t.name, 0)) <= hi_cells):
            raise InputError(f"{pre}table {t.name} has hidden class columns that can hold {lo_cells} to {hi_cells} "
                             f"cells, but the bundle reports {int(reported.get(t.name, 0))} suppressed cells there: "
                             "the release is inconsistent")
        out.append(t)
    extra = sorted(set(reported or {}) - names)
    if extra:
        raise InputError(f"{pre}the bundle reports suppressed cells in {extra[0]}, which it does not release")
    if totals is None and reported:
        raise InputError(f"{pre}suppressed class columns without an exact label table: their sums are unknown")
    return out


def _spread(tails: Sequence[HiddenTail], m: int, K: int, shape: np.ndarray) -> np.ndarray:
    """Each tail's rows spread over its levels in proportion to ``shape[:, v]`` (evenly where that part of it is
    empty): shape (m, K)."""
    shape = np.clip(np.asarray(shape, dtype=np.float64), 0.0, None)
    out = np.zeros((m, K))
    for p in tails:
        ref = shape[p.start:, p.cls]
        tot = float(ref.sum())
        out[p.start:, p.cls] += p.rows * (ref / tot if tot > 0 else np.full(m - p.start, 1.0 / (m - p.start)))
    return out


def complete_columns(t: MarginalTable) -> np.ndarray:
    """The released counts of ``t`` from the sites whose column of that class hid nothing (shape (m, K)): the
    released counts less every hidden column's released part."""
    c = np.array(t.counts, dtype=np.float64)
    for p in t.hidden_tails:
        c[:, p.cls] -= np.asarray(p.released, dtype=np.float64)
    return np.clip(c, 0.0, None)


def filled(t: MarginalTable) -> np.ndarray:
    """The point estimate of ``t``'s counts (module docstring): each tail's rows spread over its levels in
    proportion to the complete columns of its class, evenly where they are empty (shape of ``t.counts``;
    ``t.counts`` if nothing is hidden)."""
    if t.hidden is None or not np.any(t.hidden > 0):
        return t.counts
    c = np.asarray(t.counts, dtype=np.float64)
    return c + _spread(t.hidden_tails, *c.shape, complete_columns(t))


def fill_from(tables: Sequence[MarginalTable], shape_of: Callable[[tuple[str, ...]], np.ndarray | None]
              ) -> list[MarginalTable]:
    """One release's tables with each hidden tail filled in proportion to ``shape_of(clique)`` (another
    summary's counts of that table, (m, K); None: evenly) and no longer marked hidden: the rows it stands for,
    for a simulation (its cells lie in their intervals; the release itself keeps its bounds)."""
    out = []
    for t in tables:
        if t.hidden is None or not np.any(t.hidden > 0):
            out.append(t)
            continue
        c = np.asarray(t.counts, dtype=np.float64)
        ref = shape_of(t.clique)
        out.append(replace(t, counts=c + _spread(t.hidden_tails, *c.shape, np.zeros_like(c) if ref is None else ref),
                           hidden=None, hidden_tails=()))
    return out


def count_bounds(t: MarginalTable, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray] | None:
    """Bounds ``lo ≤ N ≤ hi`` on the true counts over ``names`` of a table with hidden tails.

    Parameters
    ----------
    t : MarginalTable ``N[x, y]`` with :attr:`~MarginalTable.hidden`
    names : sub-clique of ``t.clique``, axes in the given order

    Returns
    -------
    (lo, hi) or None
        ``(x, y)``: ``lo = N``, ``hi = N + Σ rows`` over the tails of class ``v`` covering the
        cell's level; ``(x,)``: those summed over the classes; ``(y,)``: exact (``lo = hi``).
        None when nothing is hidden.
    """
    if t.hidden is None or not np.any(t.hidden > 0):
        return None
    names = tuple(names)
    lo = np.asarray(t.marginal(names), dtype=np.float64)
    x, y = t.clique
    if x not in names:
        return lo + t.hidden, lo + t.hidden
    m, K = t.shape
    cap = np.zeros((m, K))
    for p in t.hidden_tails:
        cap[p.start:, p.cls] += p.rows
    if y not in names:
        return lo, lo + cap.sum(axis=1)
    return lo, lo + (cap if names == (x, y) else cap.T)
