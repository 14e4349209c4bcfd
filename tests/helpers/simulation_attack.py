"""The simulation attack on cell suppression (issue 25), as an attacker runs it.

The attacker holds a release (exact tables with some cells set to 0 and, worst case, knows
which), knows the public suppression algorithm, and enumerates every filling of the hidden
cells of one table that is consistent with the release (each class column sums to the
released class total), re-runs the algorithm on the filled release and keeps the fillings
that give back exactly the released tables. What a hidden cell can be is the set of its
values over the kept fillings. Varying one table at a time (the others at their true values)
is a subset of the attacker's fillings, so the candidate sets it finds are subsets of the
attacker's: a defence that leaves ``k`` candidates here leaves at least ``k`` against the full
attack.
"""

from __future__ import annotations

import itertools
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
) -> dict[tuple[int, tuple[int, ...]], set[int]] | None:
    """Candidate values of every hidden cell, one table at a time.

    Parameters
    ----------
    truth : the true tables (the tables not being filled keep these values)
    released : the released tables (hidden cells are 0); ``released[0]`` is ``N[label]``
    hidden : ``(table, cell)`` of each hidden cell
    algorithm : the public algorithm: filled tables → released tables, or None if it refuses
    label : the label's name
    limit : give up (None) when a table has more fillings than this

    Returns
    -------
    dict (table, cell) -> set of int, or None when too many fillings
    """
    totals = np.asarray(released[0].counts)
    out: dict[tuple[int, tuple[int, ...]], set[int]] = {h: set() for h in hidden}
    for t in sorted({t for t, _ in hidden}):
        tab = released[t]
        ax = tab.clique.index(label)
        cells = [ix for tt, ix in hidden if tt == t]
        by_class: dict[int, list[tuple[int, ...]]] = {}
        for ix in cells:
            by_class.setdefault(ix[ax], []).append(ix)
        visible = np.array(tab.counts, copy=True)
        for ix in cells:
            visible[ix] = 0
        cols = np.moveaxis(visible, ax, -1)
        need = {v: int(totals[v] - cols[..., v].sum()) for v in by_class}
        if any(r < 0 for r in need.values()):
            return {h: set() for h in hidden}
        choices = [list(compositions(need[v], len(by_class[v]))) for v in sorted(by_class)]
        if int(np.prod([len(c) for c in choices])) > limit:
            return None
        for combo in itertools.product(*choices):
            filled = np.array(visible, copy=True)
            for v, vals in zip(sorted(by_class), combo):
                for ix, val in zip(by_class[v], vals):
                    filled[ix] = val
            trial = [replace(x, counts=filled) if i == t else x for i, x in enumerate(truth)]
            got = algorithm(trial)
            if got is None or not all(np.array_equal(a.counts, b.counts) for a, b in zip(got, released)):
                continue
            for v, vals in zip(sorted(by_class), combo):
                for ix, val in zip(by_class[v], vals):
                    out[(t, ix)].add(int(val))
    return out
