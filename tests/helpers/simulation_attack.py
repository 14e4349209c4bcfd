"""The simulation attack on cell suppression (issue 25), as an attacker runs it.

The attacker holds a release (exact tables with some cells set to 0 and, worst case, knows
which), knows the public suppression algorithm, and enumerates every filling of the hidden
cells that is consistent with the release (each class column sums to the released class
total), re-runs the algorithm on the filled release and keeps the fillings that give back
exactly the released tables. What a hidden cell can be is the set of its values over the
kept fillings. Varying one class column of one table at a time (everything else at its true
value) is a subset of the attacker's fillings, so the candidate sets it finds are subsets of the
attacker's: a defence that leaves ``k`` candidates here leaves at least ``k`` against the full
attack.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from typing import Any, Callable, Sequence

import numpy as np


def compositions(total: int, parts: int):
    """Every tuple of ``parts`` non-negative integers summing to ``total``."""
    if parts == 1:
        yield (total,)
        return
    for first in range(total + 1):
        for rest in compositions(total - first, parts - 1):
            yield (first, *rest)


def simulation_attack(
    truth: Sequence[Any],
    released: Sequence[Any],
    hidden: Sequence[tuple[int, tuple[int, ...]]],
    algorithm: Callable[[list[Any]], list[Any] | None],
    label: str,
    limit: int = 50_000,
) -> tuple[dict[tuple[int, tuple[int, ...]], set[int]], set[tuple[int, tuple[int, ...]]]]:
    """Candidate values of every hidden cell, one class column at a time.

    Parameters
    ----------
    truth : the true tables (the tables not being filled keep these values)
    released : the released tables (hidden cells are 0); ``released[0]`` is ``N[label]``
    hidden : ``(table, cell)`` of each hidden cell
    algorithm : the public algorithm: filled tables → released tables, or None if it refuses
    label : the label's name
    limit : a column with more fillings is attacked with a subset of them (fewer candidates than the
        attacker's): the fillings that move patients between two of its hidden cells, and those that put
        any count in one cell and the rest in one other, or one patient in a second and the rest in a third

    Returns
    -------
    candidates : dict (table, cell) -> set of int
    partial : the cells whose columns were attacked with that subset only
    """
    totals = np.asarray(released[0].counts)
    out: dict[tuple[int, tuple[int, ...]], set[int]] = {h: set() for h in hidden}
    partial: set[tuple[int, tuple[int, ...]]] = set()
    groups: dict[tuple[int, int], list[tuple[int, ...]]] = {}
    for t, ix in hidden:
        groups.setdefault((t, ix[released[t].clique.index(label)]), []).append(ix)
    for (t, v), cells in sorted(groups.items()):
        ax = released[t].clique.index(label)
        truth_t = np.asarray(truth[t].counts)
        col = np.moveaxis(np.asarray(released[t].counts), ax, -1)[..., v]
        need = int(totals[v] - col.sum())  # released zeros at the hidden cells: the rest of the class total
        if need < 0:
            continue
        if math.comb(need + len(cells) - 1, len(cells) - 1) <= limit:
            fillings = compositions(need, len(cells))
        else:  # too many: a subset (pair moves from the truth, and sparse fillings)
            partial.update((t, ix) for ix in cells)
            fillings = itertools.chain(_pair_moves([int(truth_t[ix]) for ix in cells]), _sparse(need, len(cells)))
        for vals in fillings:
            filled = np.array(truth_t, copy=True)
            for ix, val in zip(cells, vals):
                filled[ix] = val
            trial = [replace(x, counts=filled) if i == t else x for i, x in enumerate(truth)]
            got = algorithm(trial)
            if got is None or not all(np.array_equal(a.counts, b.counts) for a, b in zip(got, released)):
                continue
            for ix, val in zip(cells, vals):
                out[(t, ix)].add(int(val))
    return out, partial


def _pair_moves(values: list[int]):
    """The fillings that differ from ``values`` by moving patients between two of its cells."""
    yield tuple(values)
    for i, j in itertools.combinations(range(len(values)), 2):
        s = values[i] + values[j]
        for a in range(s + 1):
            v = list(values)
            v[i], v[j] = a, s - a
            yield tuple(v)


def _sparse(total: int, parts: int):
    """Fillings of ``parts`` cells summing to ``total`` with at most three nonzero cells: any count ``a`` in
    one cell and the rest in one other, or ``a`` in one, one patient in a second and the rest in a third."""
    for i in range(parts):
        for a in range(total + 1):
            for j in range(parts):
                if j == i:
                    continue
                v = [0] * parts
                v[i], v[j] = a, total - a
                yield tuple(v)
                if total - a >= 1:
                    for h in range(parts):
                        if h not in (i, j):
                            w = [0] * parts
                            w[i], w[j], w[h] = a, 1, total - a - 1
                            yield tuple(w)
