"""Small-cell disclosure control for exact (non-DP) releases: the min-cell rule.

Without differential privacy, a count table with a cell of 1 or 2 patients can identify
them. Like DataSHIELD's ``nfilter.tab`` (default 3), :func:`apply_min_cell` checks every
exact table for a **nonzero cell below k** (a cell ``c`` with ``0 < c < k``; empty cells
are fine). Moment tables (per-class sums of a raw numeric feature) are checked through the
class counts of the same release: a class with ``0 < N[y] < k`` discloses its few
patients' values.

Policies
--------
``"refuse"`` (the default): the first offending table stops the export with a
:class:`~marginals.errors.RefusedError` naming the table, how many cells and k (never which cell, class or count) —
nothing is released. This is the default because suppression is leaky (below).

``"suppress"``: for a first-order release (``N[y]``, ``N[x_i, y]``), every class column of a
table that holds an offending cell has its tail — its last levels, the shortest of a nested chain
that leaves no small cell visible — set to 0 (:mod:`marg.marginals.suppression`: an attacker who
re-runs the algorithm learns the tail's sum, and each hidden cell keeps at least k possible
values); a class with fewer than k
patients, a column too small to hide a cell among k values, or pair tables are refused.
Every suppressed cell is returned, so the export records how many per table, never where.

Tables that carry DP noise are not checked: the DP guarantee covers small cells.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np

from marg.errors import InputError, RefusedError

POLICIES = ("refuse", "suppress")
DEFAULT_MIN_CELL = 3
DEFAULT_POLICY = "refuse"


@dataclass(frozen=True)
class SuppressedCell:
    """One cell set to 0 by the ``"suppress"`` policy (its count is not recorded).

    Attributes
    ----------
    table : str
        Table name, e.g. ``"N[a,b,y]"`` or ``"moments:age,y"``.
    cell : tuple of int
        Index into the table's counts (for a moment table: ``(row, class)``).
    """

    table: str
    cell: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, "cell": list(self.cell)}


def _label_counts(tables: Sequence[Any], label: str | None) -> np.ndarray | None:
    """Exact class counts from the smallest exact count table holding the label."""
    best = None
    for t in tables:
        if t.kind != "counts" or not t.noise.is_exact:
            continue
        lab = label if label is not None else t.clique[-1]
        if lab in t.clique and (label is not None or len(t.clique) == 1):
            if best is None or t.counts.size < best.counts.size:
                best = t
    if best is None:
        return None
    lab = label if label is not None else best.clique[-1]
    return np.asarray(best.marginal((lab,)), dtype=np.float64)


def apply_min_cell(
    tables: Sequence[Any],
    k: int = DEFAULT_MIN_CELL,
    policy: str = DEFAULT_POLICY,
    label: str | None = None,
    codebook: Any = None,
) -> tuple[list[Any], list[SuppressedCell]]:
    """Apply the min-cell rule to a release.

    Parameters
    ----------
    tables : sequence of MarginalTable
    k : int
        Threshold ≥ 1; a cell ``c`` with ``0 < c < k`` offends (``k = 1`` disables the rule).
    policy : {"refuse", "suppress"}
        See the module docstring; ``"refuse"`` is the default.
    label : str, optional
        The label's name (to find class counts for moment tables); defaults to the clique
        of a one-attribute exact count table (the label table ``N[y]``).
    codebook : Codebook, optional
        Accepted for the callers' convenience; messages name no level, class or count (issue 35).

    Returns
    -------
    tables : list of MarginalTable
        The input tables (``"refuse"``) or the tables with offending cells set to 0.
    suppressed : list of SuppressedCell
        Empty under ``"refuse"``.

    Raises
    ------
    RefusedError
        ``"refuse"`` and some exact table has a cell in ``(0, k)``: one line naming the table,
        how many such cells and ``k`` — never which cell, class or count; also when a moment table cannot be checked (no
        exact class counts).
    InputError
        Bad ``k`` or ``policy``.
    """
    if policy not in POLICIES:
        raise InputError(f"unknown min-cell policy {policy!r} (expected one of {', '.join(POLICIES)})")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise InputError(f"min-cell threshold must be an integer >= 1, got {k!r}")
    k = int(k)
    tables = list(tables)
    out: list[Any] = []
    suppressed: list[SuppressedCell] = []
    class_counts = None
    primary: list[tuple[int, tuple[int, ...]]] = []
    for pos, t in enumerate(tables):
        if not t.noise.is_exact or k == 1:
            out.append(t)
            continue
        if t.kind == "moments":
            if class_counts is None:
                class_counts = _label_counts(tables, label)
                if class_counts is None:
                    raise RefusedError(f"min-cell rule: cannot check {t.name} without exact class counts in the "
                                       "release")
            bad_classes = np.flatnonzero((class_counts > 0) & (class_counts < k))
            if bad_classes.size == 0:
                out.append(t)
                continue
            raise RefusedError(  # under either policy: the class total (or the row count) gives these patients away
                f"min-cell rule: table {t.name} sums over a class with fewer than {k} patients (which class is not "
                "said: it would point at them); use DP (--epsilon)"
            )
        counts = np.asarray(t.counts)
        bad = (counts > 0) & (counts < k)
        cells = [tuple(int(i) for i in ix) for ix in np.argwhere(bad)]
        if cells and policy == "refuse":
            raise RefusedError(  # which cells is not said: a cell of one or two patients points at them
                f"min-cell rule: table {t.name} has {len(cells)} nonzero cell{'s' if len(cells) > 1 else ''} below {k} "
                "(which is not said: it would point at one or two patients); coarser levels, --min-cell-policy "
                "suppress or DP (--epsilon)"
            )
        primary.extend((pos, c) for c in cells)
        out.append(t)
    if primary:
        out, more = _suppress_counts(tables, out, k, label)
        suppressed.extend(more)
    return out, suppressed


def _suppress_counts(tables: Sequence[Any], out: list[Any], k: int,
                     label: str | None) -> tuple[list[Any], list[SuppressedCell]]:
    """Zero the tail of every class column holding a small cell
    (:func:`marg.marginals.suppression.suppress_columns`)."""
    from .suppression import suppress_columns

    exact = [i for i, t in enumerate(tables) if t.kind == "counts" and t.noise.is_exact]
    if label is None:
        ones = [tables[g].clique[0] for g in exact if len(tables[g].clique) == 1]
        if not ones:
            raise RefusedError("min-cell suppression needs the label's name (or the label table N[y] in the release)")
        label = ones[0]
    cells = suppress_columns([tables[g].clique for g in exact], [tables[g].counts for g in exact], label, k,
                             [tables[g].name for g in exact])
    new = {g: np.array(tables[g].counts, copy=True) for g in exact}
    result: list[SuppressedCell] = []
    for t, ix in cells:
        g = exact[t]
        new[g][ix] = 0
        result.append(SuppressedCell(tables[g].name, ix))
    touched = {exact[t] for t, _ in cells}
    return [replace(t, counts=new[g]) if g in touched else t for g, t in enumerate(out)], result
