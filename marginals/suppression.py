"""Cell suppression that survives an attacker who knows the algorithm: whole class columns.

Zeroing a small count (``0 < c < k``) in ``N[x_i, y]`` protects nothing if ``N[y]`` is
released exactly: ``c = N[y=v] − Σ_{a'≠a} N[x_i=a', y=v]``. Hiding a second cell of that
column (classic complementary suppression) is not enough either, against the **simulation
attack**: the attacker enumerates every filling of the hidden cells consistent with the
release, re-runs the public suppression algorithm on each, and keeps those that give the
released pattern; a deterministic choice of the complementary cell (the smallest large cell
on a line, say) then pins the small cell down (issue 25: one candidate left of 300 rows).

So the pattern is made a function of what the release shows anyway: in every table
``N[x, y]`` a **class column** with a small cell is hidden whole (its ``m`` cells set to 0,
``m`` the levels of ``x``). An attacker knows the column's sum ``S = N[y=v]`` (the label
table gives it, and the row count would give a single hidden column's sum) and that at least
one of its cells is small — a filling is kept iff it has a cell in ``[1, k−1]``, nothing
else differs. The values a hidden cell can take over the kept fillings
(:func:`candidate_values`) are

* ``m ≥ 3``: every ``t ∈ [0, S−1]``, ``S`` values (the rest of ``S − t ≥ 1`` can always put
  one patient in another cell);
* ``m = 2``: ``t`` or ``S − t`` in ``[1, k−1]``: ``min(S − 1, 2k − 2)`` values.

The release is allowed only when every hidden column leaves at least ``k`` candidate values
(so ``S ≥ k`` for ``m ≥ 3``, ``S ≥ k + 1`` for ``m = 2``), and refused when a class itself has
fewer than ``k`` patients (its total is released or given by the row count). Tables
``N[x, y]`` of one release share only ``y``, so their fillings are independent given the
class totals (any combination is the margins of some dataset) and the argument holds per
table. Releases with other tables (pairs ``N[x_i, x_j, y]``) are refused: their columns are
tied to each other by more margins than the class totals. ``tests/marginals/test_suppression.py`` runs
the simulation attack itself on random tables.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from marg.errors import RefusedError

Cell = tuple[int, tuple[int, ...]]  # (table index, cell index)


def candidate_values(m: int, total: int, k: int) -> int:
    """How many values a cell of a hidden class column can take, over the fillings an attacker
    who knows the algorithm keeps (see the module docstring).

    Parameters
    ----------
    m : levels of the feature (cells in the column)
    total : the column's sum ``S`` (≥ k; a smaller class is refused before)
    k : the min-cell threshold (≥ 2)

    Returns
    -------
    int
        ``S`` for ``m ≥ 3``; ``min(S − 1, 2k − 2)`` for ``m = 2``; ``0`` for ``m = 1`` (a
        one-cell column is its class total: never small, never hidden).
    """
    if m >= 3:
        return int(total)
    if m == 2:
        return int(min(total - 1, 2 * k - 2))
    return 0


def suppress_columns(
    cliques: Sequence[tuple[str, ...]],
    counts: Sequence[np.ndarray],
    label: str,
    k: int,
    names: Sequence[str] | None = None,
) -> list[Cell]:
    """The cells to hide: every cell of each class column that holds a small cell.

    Parameters
    ----------
    cliques : the exact count tables' cliques, in order (``(label,)`` or ``(x, label)``)
    counts : their true counts (integers)
    label : the label's name
    k : the min-cell threshold (≥ 2)
    names : table names for messages (which name no class, cell or count: issue 35)

    Returns
    -------
    list of (table, index)
        Every hidden cell, table by table, column by column.

    Raises
    ------
    RefusedError
        A table other than ``N[y]`` or ``N[x, y]``; a class with ``0 < N[y=v] < k``; or a
        hidden column that would leave a small cell fewer than ``k`` candidate values.
    """
    names = list(names) if names is not None else [",".join(c) for c in cliques]
    for c, nm in zip(cliques, names):
        if label not in c or len(c) > 2:
            raise RefusedError(f"min-cell suppression is audited for first-order releases only (N[y], N[x, y]); this "
                               f"release has {nm}: use --min-cell-policy refuse or DP (--epsilon)")
    if not cliques:
        return []
    first = np.asarray(counts[0])
    totals = first.sum(axis=tuple(a for a, n in enumerate(cliques[0]) if n != label)) if first.ndim > 1 else first
    totals = np.asarray(totals, dtype=np.int64)

    small_class = np.flatnonzero((totals > 0) & (totals < k))
    if small_class.size:
        raise RefusedError(f"min-cell rule: a class has fewer than {k} patients (which one is not said): no suppression "
                           "can hide a class total the row count gives back; use DP (--epsilon)")
    hidden: list[Cell] = []
    for t, (c, arr) in enumerate(zip(cliques, counts)):
        arr = np.asarray(arr)
        if len(c) == 1:
            continue
        ax = c.index(label)
        cols = np.moveaxis(arr, ax, 1)  # (levels, classes)
        m = cols.shape[0]
        for v in range(cols.shape[1]):
            col = cols[:, v]
            if not np.any((col > 0) & (col < k)):
                continue
            S = int(col.sum())
            if candidate_values(m, S, k) < k:
                raise RefusedError(f"min-cell rule: table {names[t]} has a cell below {k} in one class, and hiding "
                                   f"that class's column of {m} cells would leave it fewer than {k} possible values "
                                   "for an attacker who knows the algorithm (which class, and how many patients, is not "
                                   "said); use DP (--epsilon)")
            for a in range(m):
                hidden.append((t, (a, v) if ax == 1 else (v, a)))
    return hidden
