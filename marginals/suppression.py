"""Cell suppression that survives an attacker who knows the algorithm: class columns' tails.

Zeroing a small count (``0 < c < k``) in ``N[x_i, y]`` protects nothing if ``N[y]`` is
released exactly: ``c = N[y=v] − Σ_{a'≠a} N[x_i=a', y=v]``. Hiding a second cell of that
column (classic complementary suppression) is not enough either, against the **simulation
attack**: the attacker enumerates every filling of the hidden cells consistent with the
release, re-runs the public suppression algorithm on each, and keeps those that give the
released pattern; a deterministic choice of the complementary cell (the smallest large cell
on a line, say) then pins the small cell down (issue 25: one candidate left of 300 rows).

So the pattern is made a function of what the release shows anyway. In every table
``N[x, y]`` a **class column** with a small cell hides a **tail**: its last ``j`` levels
(codebook order), released as 0, their sum known to an attacker as the class total ``S =
N[y=v]`` minus the column's released cells. The tail is the first of the nested chain
``j = 3, 4, …, m`` (:func:`hidden_tail`) that leaves no small cell visible: the released head
cells are 0 or ≥ k, the tail's sum ``C`` is ≥ k, and — where the tail is the previous tail
plus one level, ``j ≥ 4`` — ``C ≥ k + 1``; a column with ``m ≤ 3`` levels, or whose class total
is ``S ≤ k``, is hidden whole (``j = m``: the chain ends there, ``C = S``).

An attacker who knows the algorithm keeps the fillings of the tail that sum to ``C`` and make
the algorithm stop at the same ``j``: those include every filling in which the tail one step
shorter (or its new level) holds a small count — the previous step then had a small cell. Over
those, a tail cell takes

* ``j = 3`` (three levels, each its own step-2 part): every ``t ∈ [0, C−1]`` (one patient in a
  second level, the rest in the third): ``C ≥ k`` values;
* ``j ≥ 4``, a cell of the shorter tail (≥ 3 levels): every ``t ∈ [0, C−1]`` (one patient in
  the new level, the rest in another level of the shorter tail): ``C`` values;
* ``j ≥ 4``, the new level: ``t`` small or ``C − t`` small: ``min(C − 1, 2k − 2)`` values, ≥ k
  for ``C ≥ k + 1`` (why the chain asks for it; the check reads released numbers only, so it
  only adds fillings an attacker keeps);
* the whole column (``m ≤ 3`` or ``S ≤ k``: today's rule, :func:`candidate_values`):
  ``m ≥ 3``: every ``t ∈ [0, S−1]``; ``m = 2``: ``t`` or ``S − t`` in ``[1, k−1]``:
  ``min(S − 1, 2k − 2)`` values.

``tests/marginals/test_suppression.py`` checks these counts against every filling of a column
(brute force: each hidden cell keeps ≥ k values for every released pattern) and runs the
simulation attack itself on random releases. The release is allowed only when every hidden
cell keeps at least ``k`` candidate values (a whole ``m = 2`` column needs ``S ≥ k + 1``), and
refused when a class itself has fewer than ``k`` patients (its total is released or given by
the row count). Tables ``N[x, y]`` of one release share only ``y``, so their fillings are
independent given the class totals (any combination is the margins of some dataset) and the
argument holds per column. Releases with other tables (pairs ``N[x_i, x_j, y]``) are refused:
their columns are tied to each other by more margins than the class totals. The argument
takes each feature for its own column of the data (the codebook names each column once): a
data file holding a copy of a column under another name, its levels listed in another order,
would release two different tails of the same counts — like a copy under another binning,
that is other data to marg (:mod:`marg.protocols.exact_releases` says the same of differencing).

Why a tail and not the whole column (issue 49): a feature of 10 levels at a site of 100–280
patients has a small cell in nearly every class column, and a whole hidden column leaves the
learner nothing of that feature at that site; the tail keeps the levels before the rare ones
(measured: BENCHMARKS.md, "Issue 49 (hidden)"). The chain runs from the last level, so a
codebook that lists a feature's rare levels last loses least.
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


def hidden_tail(col: np.ndarray, k: int) -> int:
    """Where a class column's hidden tail starts (the module docstring's chain).

    Parameters
    ----------
    col : ndarray of shape (m,)
        One class column's true counts (integers).
    k : the min-cell threshold (≥ 2)

    Returns
    -------
    int
        ``m`` when the column holds no cell in ``[1, k−1]`` (nothing hidden); else the first
        hidden level ``m − j``: ``0`` (whole column) for ``m ≤ 3`` or a class total ``S ≤ k``,
        otherwise the first ``j = 3, 4, …, m`` whose head ``col[:m−j]`` has no small cell and
        whose tail sum ``C`` is ≥ k (``j = 3``) or ≥ k + 1 (``j ≥ 4``).
    """
    col = np.asarray(col, dtype=np.int64)
    m = col.size
    small = (col > 0) & (col < k)
    if not small.any():
        return m
    S = int(col.sum())
    if m <= 3 or S <= k:
        return 0
    for j in range(3, m + 1):
        st = m - j
        if small[:st].any():
            continue
        C = int(col[st:].sum())
        if C >= (k if j == 3 else k + 1):
            return st
    return 0  # not reached: j = m has no head and C = S ≥ k + 1


def suppress_columns(
    cliques: Sequence[tuple[str, ...]],
    counts: Sequence[np.ndarray],
    label: str,
    k: int,
    names: Sequence[str] | None = None,
) -> list[Cell]:
    """The cells to hide: the tail (:func:`hidden_tail`) of each class column that holds a small cell.

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
        Every hidden cell, table by table, column by column (each column's tail, levels in order).

    Raises
    ------
    RefusedError
        A table other than ``N[y]`` or ``N[x, y]``; a class with ``0 < N[y=v] < k``; or a
        whole hidden column that would leave a small cell fewer than ``k`` candidate values.
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
        raise RefusedError(f"min-cell rule: a class has fewer than {k} patients (which one is not said): no "
                           "suppression can hide a class total the row count gives back; use DP (--epsilon)")
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
            start = hidden_tail(col, k)
            if start == 0 and candidate_values(m, S, k) < k:
                raise RefusedError(f"min-cell rule: table {names[t]} has a cell below {k} in one class, and hiding "
                                   f"that class's column of {m} cells would leave it fewer than {k} possible values "
                                   "for an attacker who knows the algorithm (which class, and how many patients, is "
                                   "not said); use DP (--epsilon)")
            for a in range(start, m):
                hidden.append((t, (a, v) if ax == 1 else (v, a)))
    return hidden
