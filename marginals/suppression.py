"""Complementary cell suppression: small cells that the released margins cannot recompute.

Zeroing a small count (``0 < c < k``) in ``N[x_i, y]`` protects nothing if ``N[y]`` is
released exactly: ``c = N[y=v] − Σ_{a'≠a} N[x_i=a', y=v]``. Complementary suppression also
hides other cells until no small cell can be narrowed down. What an attacker can infer is a
linear program: the suppressed cells are unknowns ``z ≥ 0``, every other released count is
known, and every two released tables must agree on the margins of their common attributes.
For the cell ``s``, ``[min z_s, max z_s]`` over that polytope is exactly what the release
says about it **when the tables' cliques form an acyclic hypergraph** (e.g. ``N[y]`` with every
``N[x_i, y]``, or pair tables along a forest): for acyclic schemes, pairwise-consistent
margins are always the margins of some joint distribution (Beeri, Fagin, Maier, Yannakakis
1983), so no other constraint exists. Releases whose cliques are cyclic (every pair of three
features) are refused: their feasible set is not described by pairwise agreement alone.

A primary cell is **protected** when its interval reaches both 0 and ``k`` (``min ≤ 0`` and
``max ≥ k``): the release cannot tell whether it is empty, small, or not small. Cells are
added greedily (:func:`complementary_suppression`): for each unprotected primary cell, the
smallest nonzero cell of its table on a line through it (one coordinate changed) of value
at least ``k`` — else the largest — is suppressed too, and the LP bounds are recomputed,
until every primary cell is protected (suppressing more cells only widens intervals) or no
candidate is left (refused).

The LP is solved with SciPy's ``linprog`` (HiGHS inside SciPy, no console output); this
module is site-side and does not import the learners' HiGHS wrapper. The bounds are over
real numbers; integer solutions lie inside them.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any, Sequence

import numpy as np

from marg.errors import RefusedError

Cell = tuple[int, tuple[int, ...]]  # (table index, cell index)
_TOL = 1e-7


def is_acyclic(cliques: Sequence[Sequence[str]]) -> bool:
    """Whether the hypergraph of ``cliques`` is α-acyclic (GYO reduction empties it).

    Repeatedly delete an attribute that occurs in one clique only, and a clique contained in
    another; the hypergraph is acyclic iff at most one clique remains.
    """
    edges = [set(c) for c in cliques if c]
    changed = True
    while changed and len(edges) > 1:
        changed = False
        counts: dict[str, int] = {}
        for e in edges:
            for a in e:
                counts[a] = counts.get(a, 0) + 1
        for e in edges:
            lone = {a for a in e if counts[a] == 1}
            if lone:
                e -= lone
                changed = True
        keep: list[set[str]] = []
        for i, e in enumerate(edges):
            if not e or any((e < f) or (e == f and j < i) for j, f in enumerate(edges) if j != i):
                changed = True
                continue
            keep.append(e)
        edges = keep
    return len(edges) <= 1


class _Audit:
    """The attacker's LP for a set of exact count tables with some cells unknown."""

    def __init__(self, cliques: Sequence[tuple[str, ...]], counts: Sequence[np.ndarray]):
        self.cliques = [tuple(c) for c in cliques]
        self.counts = [np.asarray(c, dtype=np.float64) for c in counts]
        self.pairs = []
        for i, j in combinations(range(len(self.cliques)), 2):
            common = tuple(a for a in self.cliques[i] if a in self.cliques[j])
            if common:
                self.pairs.append((i, j, common))

    def _margin_map(self, t: int, common: tuple[str, ...]) -> np.ndarray:
        """For every cell of table ``t`` (C order), the flat index of its cell in the margin on ``common``."""
        clique, shape = self.cliques[t], self.counts[t].shape
        axes = [clique.index(a) for a in common]
        idx = np.indices(shape).reshape(len(shape), -1)
        sub = [shape[a] for a in axes]
        return np.ravel_multi_index(tuple(idx[a] for a in axes), sub) if axes else np.zeros(idx.shape[1], dtype=np.int64)

    def bounds(self, unknown: Sequence[Cell], targets: Sequence[Cell]) -> dict[Cell, tuple[float, float]]:
        """``{cell: (min, max)}`` of each target over the polytope (max may be ``inf``)."""
        from scipy.optimize import linprog

        var = {c: v for v, c in enumerate(unknown)}
        flat_unknown = [{} for _ in self.counts]
        for (t, ix), v in var.items():
            flat_unknown[t][int(np.ravel_multi_index(ix, self.counts[t].shape))] = v
        rows, rhs = [], []
        for i, j, common in self.pairs:
            if not flat_unknown[i] and not flat_unknown[j]:
                continue
            size = int(np.prod([self.counts[i].shape[self.cliques[i].index(a)] for a in common]))
            A = np.zeros((size, len(var)))
            b = np.zeros(size)
            for t, sign in ((i, 1.0), (j, -1.0)):
                m = self._margin_map(t, common)
                vals = self.counts[t].ravel().copy()
                for f, v in flat_unknown[t].items():
                    A[m[f], v] += sign
                    vals[f] = 0.0
                np.add.at(b, m, -sign * vals)
            used = np.any(A != 0, axis=1)
            rows.append(A[used])
            rhs.append(b[used])
        A_eq = np.vstack(rows) if rows else np.zeros((0, len(var)))
        b_eq = np.concatenate(rhs) if rhs else np.zeros(0)
        out: dict[Cell, tuple[float, float]] = {}
        for cell in targets:
            c = np.zeros(len(var))
            c[var[cell]] = 1.0
            lo = linprog(c, A_eq=A_eq if len(b_eq) else None, b_eq=b_eq if len(b_eq) else None, bounds=(0, None), method="highs")
            hi = linprog(-c, A_eq=A_eq if len(b_eq) else None, b_eq=b_eq if len(b_eq) else None, bounds=(0, None), method="highs")
            if lo.status == 2 or hi.status == 2:
                raise RefusedError("min-cell rule: the released tables are inconsistent with each other; cannot audit suppression")
            out[cell] = (float(lo.fun) if lo.status == 0 else 0.0, float(-hi.fun) if hi.status == 0 else float("inf"))
        return out


def _candidates(counts: np.ndarray, ix: tuple[int, ...], hidden: set[tuple[int, ...]]) -> list[tuple[int, ...]]:
    out = []
    for axis in range(counts.ndim):
        for v in range(counts.shape[axis]):
            if v == ix[axis]:
                continue
            other = ix[:axis] + (v,) + ix[axis + 1:]
            if other not in hidden and counts[other] > 0:
                out.append(other)
    return out


def protection(cliques: Sequence[tuple[str, ...]], counts: Sequence[np.ndarray], suppressed: Sequence[Cell],
               primary: Sequence[Cell]) -> dict[Cell, tuple[float, float]]:
    """What the release (``counts`` with the ``suppressed`` cells unknown) says about each
    ``primary`` cell: its ``(min, max)`` over every consistent completion (acyclic cliques)."""
    return _Audit(cliques, counts).bounds(list(suppressed), list(primary))


def complementary_suppression(
    cliques: Sequence[tuple[str, ...]],
    counts: Sequence[np.ndarray],
    primary: Sequence[Cell],
    k: int,
    names: Sequence[str] | None = None,
) -> list[Cell]:
    """Cells to suppress so that every primary cell's interval reaches 0 and ``k``.

    Parameters
    ----------
    cliques : the exact count tables' cliques, in order
    counts : their true counts (integer-valued arrays)
    primary : the small cells ``(table, index)`` that must be hidden
    k : the min-cell threshold
    names : table names for messages

    Returns
    -------
    list of (table, index)
        ``primary`` plus the complementary cells, in the order added.

    Raises
    ------
    RefusedError
        The cliques are cyclic, or some primary cell cannot be protected.
    """
    names = list(names) if names is not None else [",".join(c) for c in cliques]
    if not primary:
        return []
    if not is_acyclic(cliques):
        raise RefusedError("min-cell rule: suppression needs tables whose attributes form no cycle (first-order "
                           "tables, or pair tables along a tree); this release's pair tables do: use --min-cell-policy "
                           "refuse or DP (--epsilon)")
    audit = _Audit(cliques, counts)
    hidden: list[Cell] = list(dict.fromkeys(primary))
    todo = list(hidden)
    while todo:
        bounds = audit.bounds(hidden, todo)
        weak = [c for c in todo if not (bounds[c][0] <= _TOL and bounds[c][1] >= k - _TOL)]
        if not weak:
            return hidden
        in_table = {}
        for t, ix in hidden:
            in_table.setdefault(t, set()).add(ix)
        for t, ix in weak:
            arr = audit.counts[t]
            cand = _candidates(arr, ix, in_table.get(t, set()))
            if not cand:
                cell = "[" + ", ".join(map(str, ix)) + "]"
                raise RefusedError(f"min-cell rule: table {names[t]} cell {cell} below {k} cannot be protected by "
                                   "complementary suppression (no cell left to hide it with); use DP (--epsilon)")
            big = [c for c in cand if arr[c] >= k]
            pick = min(big, key=lambda c: (arr[c], c)) if big else max(cand, key=lambda c: (arr[c], c))
            hidden.append((t, pick))
            in_table.setdefault(t, set()).add(pick)
        todo = weak
    return hidden


def suppressed_tables(tables: Sequence[Any], cells: Sequence[Cell]) -> list[np.ndarray]:
    """The tables' counts with ``cells`` set to 0 (copies)."""
    out = [np.array(t.counts, copy=True) for t in tables]
    for t, ix in cells:
        out[t][ix] = 0
    return out
