"""Count tables from grouped rows: what a database or Spark sends back instead of rows.

An engine that holds the data computes, in one pass, a GROUP BY with one grouping set per
released clique (``GROUPING SETS ((y), (x_1, y), …, (x_i, x_j, y), …)``) over *key*
columns — the raw value of a categorical feature or of the label, or the bin code of a
binned numeric feature computed by the engine — and returns, per group, the key values,
one grouping flag per key (1 where the key is aggregated away in that group's set), the
row count ``n`` and, for raw numeric features, the per-group sums of the clipped values,
of their squares and the number of missing values.

This module turns that result into the same :class:`~marg.marginals.counts.tables.MarginalTable`
list as the local path: the raw key values go through the encoder's value rules
(:func:`~marg.marginals.data.encoding.value_codes`), so a value means the same code whichever
engine counted it, and a value the codebook refuses is the same one-line error (located
"in" the source instead of at a row number, since database rows have no order).
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import pyarrow as pa

from ..data.codebook import Codebook
from ..data.encoding import MISSING, check_codes, check_label, distinct, label_codes, value_codes
from ..counts.noise import NoiseRecord
from ..counts.tables import MarginalTable, canonical_clique
from .base import Source
from marg.errors import InputError


@dataclass(frozen=True)
class Key:
    """One key column of the grouped query.

    Attributes
    ----------
    attr : str
        The feature or label it encodes.
    column : str
        Its column name in the source.
    binned : bool
        True when the engine computes the bin code (a binned numeric feature); False when
        the key is the raw value.
    """

    attr: str
    column: str
    binned: bool = False


@dataclass(frozen=True)
class GroupPlan:
    """The grouped query a clique plan needs.

    Attributes
    ----------
    keys : tuple of Key
        Key ``q`` is output column ``k{q}`` with grouping flag ``g{q}``.
    sets : tuple of tuple of int
        One grouping set per distinct count clique, as key positions in clique order.
    moments : tuple of str
        Raw numeric features; feature ``r`` gives output columns ``s{r}`` (sum of clipped
        values), ``ss{r}`` (sum of squares) and ``z{r}`` (missing or NaN values), all
        aggregated within the label's grouping set.
    label_key : int
        Position of the label's key.
    """

    keys: tuple[Key, ...]
    sets: tuple[tuple[int, ...], ...]
    moments: tuple[str, ...]
    label_key: int


def plan_groups(codebook: Codebook, cliques: Sequence[tuple[str, ...]]) -> GroupPlan:
    """The key columns and grouping sets of ``cliques`` (the label is always a key)."""
    lab = codebook.label.name
    cliques = [canonical_clique(codebook, c) for c in cliques]
    order: list[str] = [lab]
    moments: list[str] = []
    sets: list[tuple[str, ...]] = [(lab,)]
    for c in cliques:
        feats = [a for a in c if a != lab]
        if any(not codebook.feature(a).is_discrete for a in feats):
            if len(c) != 2 or lab not in c:
                raise InputError(f"clique {c!r}: raw numeric features are released only as (feature, label) moments")
            if c[0] not in moments:
                moments.append(c[0])
            continue
        for a in c:
            if a not in order:
                order.append(a)
        if c not in sets:
            sets.append(c)
    keys = tuple(
        Key(attr=a, column=a, binned=(a != lab and codebook.feature(a).kind == "numeric")) for a in order
    )
    pos = {a: q for q, a in enumerate(order)}
    return GroupPlan(keys=keys, sets=tuple(tuple(pos[a] for a in c) for c in sets), moments=tuple(moments), label_key=0)


class GroupedSource(Source):
    """A source whose engine counts: it runs the plan's grouped query (:meth:`grouped`) and sends
    back the groups, which :meth:`count` turns into tables (SQL databases, Spark)."""

    def count(self, codebook: Codebook, cliques: Sequence[tuple[str, ...]],
              progress: Callable[[int], None] | None = None) -> tuple[list[MarginalTable], int]:
        """The tables of ``cliques`` from the engine's groups; InputError for a missing column, a
        value the codebook refuses or a source without rows."""
        self.check_columns(codebook.feature_names + [codebook.label.name])
        plan = plan_groups(codebook, cliques)
        tables, n = tables_from_groups(codebook, cliques, plan, self.grouped(codebook, plan), self.name)
        if n == 0:
            raise InputError(f"{self.name} has no data rows")
        if progress is not None:
            progress(n)
        return tables, n

    def where_rows(self) -> Callable[[int], str]:
        return lambda _k: f"in {self.name}"  # the engine's rows have no order: the table is named instead

    @abstractmethod
    def grouped(self, codebook: Codebook, plan: GroupPlan) -> pa.Table:
        """The engine's result of ``plan``'s grouping sets (columns as :func:`tables_from_groups`
        reads them); InputError (one line) naming a value that is not a number or a failing engine."""


def tables_from_groups(
    codebook: Codebook,
    cliques: Sequence[tuple[str, ...]],
    plan: GroupPlan,
    result: pa.Table,
    where: str,
) -> tuple[list[MarginalTable], int]:
    """Accumulate the grouped result into the tables of ``cliques`` (plan order).

    Parameters
    ----------
    result : pyarrow Table
        Columns ``k{q}``, ``g{q}``, ``n`` (and ``s{r}``, ``ss{r}``, ``z{r}``).
    where : str
        The source, for messages (e.g. ``postgresql table "visits"``).

    Returns
    -------
    tables, n_rows
    """
    lab = codebook.label.name
    K = codebook.n_classes
    q = len(plan.keys)
    counts = np.asarray(result.column("n").to_numpy(zero_copy_only=False), dtype=np.int64)
    flags = np.column_stack([np.asarray(result.column(f"g{k}").to_numpy(zero_copy_only=False)) != 0
                             for k in range(q)]) \
        if len(counts) else np.zeros((0, q), dtype=bool)
    located = lambda _k: f"in {where}"  # noqa: E731 - grouped rows have no row numbers
    codes = []
    for k, key in enumerate(plan.keys):
        present = ~flags[:, k]
        col = result.column(f"k{k}")
        if key.binned:
            f = codebook.feature(key.attr)
            c = np.asarray(col.to_numpy(zero_copy_only=False))
            c = np.where(present, np.nan_to_num(c.astype(np.float64), nan=0), 0).astype(np.int64)
            if np.any(present & (c == MISSING)):
                raise InputError(
                    f"column {f.name!r}: missing or NaN value in {where} (the codebook gives this feature no missing "
                    "level)"
                )
            codes.append(c)
            continue
        values, index, _ = distinct(col)
        if key.attr == lab:
            vc, text = label_codes(codebook.label.classes, values)
            check_label(lab, codebook.label.classes, vc, text, index[present], 1, located)
        else:
            f = codebook.feature(key.attr)
            vc, text = value_codes(f, values)
            check_codes(f, vc, text, index[present], 1, located)
        codes.append(np.where(present, vc[index], 0).astype(np.int64))
    label_only = flags.sum(axis=1) == q - 1
    label_only &= ~flags[:, plan.label_key]
    n_rows = int(counts[label_only].sum())
    acc: dict[tuple[str, ...], np.ndarray] = {}
    for s in plan.sets:
        clique = tuple(plan.keys[k].attr for k in s)
        mask = (flags.sum(axis=1) == q - len(s)) & ~flags[:, list(s)].any(axis=1)
        shape = tuple(codebook.attribute_size(a) for a in clique)
        arr = np.zeros(shape, dtype=np.int64)
        np.add.at(arr, tuple(codes[k][mask] for k in s), counts[mask])
        acc[clique] = arr
    ycode = codes[plan.label_key][label_only]
    for r, name in enumerate(plan.moments):
        z = np.asarray(result.column(f"z{r}").to_numpy(zero_copy_only=False), dtype=np.float64)[label_only]
        if np.nansum(z) > 0:
            raise InputError(f"column {name!r}: missing or NaN value in {where} (raw numeric features need a value)")
        m = np.zeros((2, K))
        for j, col in enumerate((f"s{r}", f"ss{r}")):
            v = np.asarray(result.column(col).to_numpy(zero_copy_only=False), dtype=np.float64)[label_only]
            np.add.at(m[j], ycode, np.nan_to_num(v))
        acc[(name, lab)] = m
    out = []
    for c in cliques:
        c = canonical_clique(codebook, c)
        kind = "moments" if c in acc and acc[c].dtype == np.float64 else "counts"
        out.append(MarginalTable(clique=c, counts=acc[c].copy(), noise=NoiseRecord.exact(), kind=kind))
    return out, n_rows
