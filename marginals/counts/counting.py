"""Counting marginal tables fast: every table of a release plan in one pass over encoded chunks.

Counting is vectorised (:class:`TableCounter`): a clique's codes are combined into one flat
cell index in a small integer type and counted with ``np.bincount``, a block of rows at a
time; first-order tables of features in no other table are counted from their distinct
values' indices, several features in one joint ``bincount``. :func:`count_tables` counts
in-memory codes (tests, simulations, the notebook path).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from marg.errors import InputError

from ..data.codebook import Codebook, code_dtype
from .noise import NoiseRecord
from .tables import MarginalTable, canonical_clique

if TYPE_CHECKING:
    from ..data.encoding import Encoded


ROW_BLOCK = 1 << 16  # rows counted at a time: every table's counts stay in cache


def _flat_dtype(size: int) -> np.dtype:
    """Smallest unsigned type for flat cell indices 0..size−1 (bincount input)."""
    if size <= 1 << 16:
        return np.dtype(np.uint16)
    if size <= 1 << 32:
        return np.dtype(np.uint32)
    return np.dtype(np.int64)


STACKED_MIN = 64  # first-order tables of a chunk from which they are counted stacked (TableCounter._count_stacked)
STACKED_CELLS = 1 << 22  # rows × features of one stacked bincount (32 MiB of int64 slots at most)
JOINT_CELLS = 1 << 16  # first-order tables counted together while their joint index fits in uint16


def _joint_groups(tails: list, K: int) -> list[list]:
    """Consecutive ``(accumulator, Dictionary)`` pairs grouped so that each group's joint
    index (value slots of every member × K) stays within :data:`JOINT_CELLS` (a feature
    with more slots forms its own group)."""
    groups: list[list] = []
    cells = JOINT_CELLS + 1
    for item in tails:
        slots = len(item[1].lut)
        if cells * slots > JOINT_CELLS:
            groups.append([])
            cells = K
        groups[-1].append(item)
        cells *= slots
    return groups


def _joint_index(group: list, y: np.ndarray, K: int) -> tuple[np.ndarray, list[int]]:
    """The joint index ``((i_1·s_2 + i_2)·s_3 + …)·K + y`` of a group of ``(acc, Dictionary)``
    over the members' distinct-value indices ``i_k`` (``s_k`` value slots each), in the
    smallest unsigned type that holds it, and the slots ``[s_1, …, s_g]``."""
    sizes = [len(d.lut) for _, d in group]
    cells = K * int(np.prod(sizes, dtype=np.int64))
    dt = _flat_dtype(cells)
    flat = y.astype(dt)
    mult = K
    for (_, d), s in zip(reversed(group), reversed(sizes)):
        # one pass: cast each index to dt (it holds every index < s) and multiply there
        flat += np.multiply(d.index, dt.type(mult), dtype=dt, casting="unsafe")
        mult *= s
    return flat, sizes


class _Joint:
    """The joint counts, shape (s_1, …, s_g, K), of a group of first-order tables over the
    chunks that share the members' value-to-code tables (``luts``); :meth:`fold` adds each
    member's marginal to its table, each distinct value's counts to the row of its code."""

    def __init__(self, group: list, sizes: list[int], K: int):
        self.accs = [acc for acc, _ in group]
        self.luts = [d.lut for _, d in group]
        self.counts = np.zeros(K * int(np.prod(sizes, dtype=np.int64)), dtype=np.int64)
        self.shape = (*sizes, K)

    def same_codes(self, group: list) -> bool:
        return all(a is acc and (lut is d.lut or np.array_equal(lut, d.lut))
                   for a, lut, (acc, d) in zip(self.accs, self.luts, group)) and len(group) == len(self.accs)

    def fold(self) -> None:
        joint = self.counts.reshape(self.shape)
        for k, (acc, lut) in enumerate(zip(self.accs, self.luts)):
            other = tuple(a for a in range(len(self.accs)) if a != k)
            np.add.at(acc, lut.astype(np.intp), joint.sum(axis=other) if other else joint)


class _Lazy:
    """``columns[i]`` for a column function (a dictionary column is gathered on first use)."""

    def __init__(self, fn: Callable[[int], np.ndarray]):
        self.fn = fn

    def __getitem__(self, i: int) -> np.ndarray:
        return self.fn(i)


class TableCounter:
    """Accumulates the tables of a clique plan over encoded chunks.

    Every count table is one ``np.bincount`` of the clique's flat cell index over a block
    of rows; the flat index of ``N[x_i, x_j, y]`` is ``c_i·(m_j·K) + (c_j·K + y)``, with
    ``c_j·K + y`` computed once per feature and block and shared by every table that ends
    in ``(x_j, y)`` (all first-order tables and every pair table). Indices are built in the
    smallest unsigned type that holds them and rows go ``ROW_BLOCK`` at a time, so the
    counts of all tables stay in cache while the codes stream past. Counts are int64.

    Parameters
    ----------
    codebook : Codebook
    cliques : list of tuple of str
        Canonical cliques (from :func:`plan_cliques`); a clique ``(f, label)`` with ``f``
        raw numeric accumulates a moment table.
    """

    def __init__(self, codebook: Codebook, cliques: Sequence[tuple[str, ...]]):
        self.codebook = codebook
        self.cliques = [canonical_clique(codebook, c) for c in cliques]
        lab = codebook.label.name
        K = codebook.n_classes
        self.n_rows = 0
        self._acc: dict[tuple[str, ...], np.ndarray] = {}
        self._kind: dict[tuple[str, ...], str] = {}
        # (accumulator, plan) per table; plan kinds: label, moments, tail (x_j, y), pair, general.
        self._plan: list[tuple[np.ndarray, str, tuple[int, ...]]] = []
        tails = {c for c in self.cliques if len(c) == 2 and c[1] == lab and codebook.feature(c[0]).is_discrete}
        # first-order tables as views of one (Σ m_i, K) buffer: many are folded in one np.add.at (_count_stacked)
        self._rows = np.zeros((sum(codebook.feature(c[0]).n_levels for c in tails), K), dtype=np.int64)
        self._base: dict[int, int] = {}  # id(accumulator) → its first row in self._rows
        row0 = 0
        for c in self.cliques:
            if c in self._acc:
                continue
            feats = [a for a in c if a != lab]
            if any(not codebook.feature(a).is_discrete for a in feats):
                if len(c) != 2 or lab not in c:
                    raise InputError(f"clique {c!r}: raw numeric features are released only as (feature, label) "
                                     "moments")
                self._kind[c] = "moments"
                acc = self._acc[c] = np.zeros((2, K), dtype=np.float64)
                self._plan.append((acc, "moments", (codebook.index(c[0]),)))
                continue
            self._kind[c] = "counts"
            shape = tuple(codebook.attribute_size(a) for a in c)
            if c in tails:
                acc = self._acc[c] = self._rows[row0:row0 + shape[0]]
                self._base[id(acc)] = row0
                row0 += shape[0]
            else:
                acc = self._acc[c] = np.zeros(shape, dtype=np.int64)
            idx = tuple(codebook.index(a) for a in feats)
            if c == (lab,):
                self._plan.append((acc, "label", ()))
            elif len(c) == 2 and c[1] == lab:
                self._plan.append((acc, "tail", idx))
            elif len(c) == 3 and c[2] == lab:
                self._plan.append((acc, "pair", idx))
            else:
                self._plan.append((acc, "general", tuple(-1 if a == lab else codebook.index(a) for a in c)))
        self._joint: dict[tuple[int, ...], _Joint] = {}  # first-order joint counts not yet folded
        # Features some pair (or larger) table needs as gathered codes.
        self._paired = {i for _, kind, idx in self._plan if kind in ("pair", "general") for i in idx if i >= 0}

    def add(self, X: np.ndarray, y: np.ndarray) -> None:
        """Count one chunk given as a matrix (X: (n, p) codes/values, y: (n,) class codes)."""
        X = np.asarray(X)
        cols = [X[:, i] if not f.is_discrete else X[:, i].astype(code_dtype(f.n_levels))
                for i, f in enumerate(self.codebook.features)]
        self.add_columns(cols, y)

    def add_encoded(self, enc: "Encoded") -> None:
        """Count one encoded chunk. The first-order tables of features in no other table are
        counted from their distinct-value indices (:class:`~marg.marginals.data.encoding.Dictionary`),
        several features in one ``bincount`` of their joint index (:func:`_joint_index`),
        accumulated over the chunks whose distinct values get the same codes (:class:`_Joint`),
        so their codes are never gathered; the other tables as in :meth:`add_columns`."""
        from ..data.column_codes import Dictionary  # pyarrow: loaded by whoever encoded ``enc``

        n = len(enc.y)
        if n == 0:
            return
        K = self.codebook.n_classes
        solo = [(acc, enc.parts[idx[0]]) for acc, kind, idx in self._plan
                if kind == "tail" and idx[0] not in self._paired and isinstance(enc.parts[idx[0]], Dictionary)]
        if len(solo) >= STACKED_MIN:
            for j in self._joint.values():  # chunks counted the other way before
                j.fold()
            self._joint = {}
            self._count_stacked(solo, np.asarray(enc.y))
        elif solo:
            y = np.asarray(enc.y).astype(np.uint16 if K <= 1 << 16 else np.int64)  # cast once, not per group
            pending, self._joint = self._joint, {}
            for group in _joint_groups(solo, K):
                flat, sizes = _joint_index(group, y, K)
                key = tuple(id(acc) for acc, _ in group)
                j = pending.pop(key, None)
                if j is None or not j.same_codes(group):
                    if j is not None:
                        j.fold()
                    j = _Joint(group, sizes, K)
                j.counts += np.bincount(flat, minlength=j.counts.size)
                self._joint[key] = j
            for j in pending.values():  # groups this chunk formed differently
                j.fold()
        self._add(enc.column, enc.y, skip={id(acc) for acc, _ in solo})

    def _count_stacked(self, solo: list, y: np.ndarray) -> None:
        """Count many first-order tables of one chunk (a wide study's thousands) from their
        distinct-value indices: every (feature, value slot) of the chunk is a row of one slot
        table, ``slot = offset_f + index_f``; one ``bincount`` of ``slot·K + y`` over
        :data:`STACKED_CELLS` cells at a time counts a group of features, and one ``np.add.at``
        adds each slot's counts to the row ``base_f + lut_f[index]`` of its table's buffer. The
        work is O(rows × features) in a few numpy calls per feature."""
        K = self.codebook.n_classes
        n = len(y)
        luts = [d.lut for _, d in solo]
        slots = np.fromiter((len(lut) for lut in luts), dtype=np.int64, count=len(luts))
        target = np.concatenate(luts).astype(np.int64) + np.repeat(
            np.fromiter((self._base[id(acc)] for acc, _ in solo), dtype=np.int64, count=len(solo)), slots)
        offset = np.cumsum(slots) - slots
        y = y.astype(np.int64)
        per = max(1, STACKED_CELLS // max(n, 1))  # features a group
        for a in range(0, len(solo), per):
            b = min(len(solo), a + per)
            cells = int(offset[b - 1] + slots[b - 1] - offset[a]) * K
            dt = _flat_dtype(cells)
            flat = np.empty((b - a, n), dtype=dt)
            for r, k in enumerate(range(a, b)):
                np.add(solo[k][1].index, offset[k] - offset[a], out=flat[r], casting="unsafe")
            flat *= dt.type(K)
            flat += y.astype(dt)
            counts = np.bincount(flat.ravel(), minlength=cells).reshape(-1, K)
            np.add.at(self._rows, target[offset[a]:offset[b - 1] + slots[b - 1]], counts)

    def add_columns(self, columns: Sequence[np.ndarray], y: np.ndarray) -> None:
        """Count one encoded chunk: ``columns[i]`` (n,) codes or values of feature i, ``y`` (n,)."""
        self._add(lambda i: columns[i], y)

    def _add(self, column: Callable[[int], np.ndarray], y: np.ndarray, skip: set[int] = frozenset()) -> None:  # type: ignore[assignment]
        n = len(y)
        if n == 0:
            return
        self.n_rows += n
        K = self.codebook.n_classes
        y = np.asarray(y).astype(code_dtype(K), copy=False)
        sizes = [f.n_levels for f in self.codebook.features]
        columns = _Lazy(column)
        for s in range(0, n, ROW_BLOCK):
            e = min(n, s + ROW_BLOCK)
            ys = y[s:e]
            tails: dict[int, np.ndarray] = {}

            def tail(j: int) -> np.ndarray:  # c_j·K + y, shared by the tables ending in (x_j, y)
                t = tails.get(j)
                if t is None:
                    dt = _flat_dtype(sizes[j] * K)
                    t = tails[j] = columns[j][s:e].astype(dt) * dt.type(K) + ys
                return t

            for acc, kind, idx in self._plan:
                if id(acc) in skip:
                    continue
                if kind == "tail":
                    acc += np.bincount(tail(idx[0]), minlength=acc.size).reshape(acc.shape)
                elif kind == "pair":
                    i, j = idx
                    dt = _flat_dtype(acc.size)
                    flat = columns[i][s:e].astype(dt) * dt.type(sizes[j] * K) + tail(j)
                    acc += np.bincount(flat, minlength=acc.size).reshape(acc.shape)
                elif kind == "label":
                    acc += np.bincount(ys, minlength=K)
                elif kind == "moments":
                    v = np.asarray(columns[idx[0]][s:e], dtype=np.float64)
                    acc[0] += np.bincount(ys, weights=v, minlength=K)
                    acc[1] += np.bincount(ys, weights=v * v, minlength=K)
                else:
                    cols = [ys if j < 0 else columns[j][s:e] for j in idx]
                    flat = np.ravel_multi_index([np.asarray(c, dtype=np.intp) for c in cols], acc.shape)
                    acc += np.bincount(flat, minlength=acc.size).reshape(acc.shape)

    def tables(self) -> list[MarginalTable]:
        """The exact (noise-free) tables counted so far, in plan order."""
        for j in self._joint.values():
            j.fold()
        self._joint = {}
        return [
            MarginalTable(clique=c, counts=self._acc[c].copy(), noise=NoiseRecord.exact(), kind=self._kind[c])
            for c in self.cliques
        ]


def count_tables(codebook: Codebook, X: np.ndarray, y: np.ndarray,
                 cliques: Sequence[tuple[str, ...]]) -> list[MarginalTable]:
    """Count the tables of ``cliques`` over in-memory codes (X: (n, p), y: (n,))."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    if X.ndim != 2 or X.shape[1] != codebook.n_features:
        raise InputError(f"X must have shape (n, {codebook.n_features}), got {X.shape}")
    if y.shape != (X.shape[0],):
        raise InputError(f"y must have shape ({X.shape[0]},), got {y.shape}")
    for i, f in enumerate(codebook.features):
        if f.is_discrete:
            col = X[:, i]
            bad = (col < 0) | (col >= f.n_levels) | (col != np.floor(col))
            if bad.any():
                k = int(np.flatnonzero(bad)[0])
                raise InputError(f"feature {f.name!r}: code {col[k]:g} at row {k + 1} is outside 0..{f.n_levels - 1}")
    if y.size and (y.min() < 0 or y.max() >= codebook.n_classes):
        k = int(np.flatnonzero((y < 0) | (y >= codebook.n_classes))[0])
        raise InputError(f"label code {y[k]} at row {k + 1} is outside 0..{codebook.n_classes - 1}")
    tc = TableCounter(codebook, cliques)
    tc.add(X, y)
    return tc.tables()
