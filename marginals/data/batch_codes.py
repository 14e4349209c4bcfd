"""A whole chunk's columns encoded at once: the per-column work done once per file, the per-block work vectorised.

:func:`~marg.marginals.data.column_codes.encode_part` encodes one column through its distinct values;
a wide study (20,000 gene calls a row) has 20,000 columns a block, and Python work per column
per block (canonicalising the codebook's levels, a dozen ``pyarrow.compute`` calls) made the
cost grow with columns × blocks. :class:`BatchEncoder` gives the same codes with:

- **once per file**: every categorical feature's (and the label's) canonical levels, in one
  :func:`~marg.marginals.data.value_text.canonical_levels_many` pass; one lookup table of all of
  them, keyed ``"g\\x1ftext"`` where ``g`` numbers the distinct level sets (so 20,000 binary
  features share one set); each feature's missing code;
- **once per block**: the distinct values of all columns (a CSV's or Parquet's dictionaries;
  other columns' ``dictionary_encode``) concatenated, each followed by its null slot; one
  :func:`~marg.marginals.data.io.as_text` of all of them (the text rules act value by value, so
  this is what each column's own pass gives); one ``index_in`` of the keys; numbers parsed in
  one cast; the codes, the lookup tables and the check for refused values computed on the
  concatenation (``np.add.reduceat`` per column);
- **per column**: slicing its codes and its row indices (a few numpy calls, microseconds).

A column whose distinct values equal the previous block's (in the same order) reuses its
codes. Refused values raise the same one-line errors, in the same order (codebook order, an
unknown value before a missing one within a column, the label last), through
:func:`~marg.marginals.data.column_codes.check_codes`. A numeric feature stored as numbers (not text)
goes through ``encode_part`` in its turn (converted directly, no distinct values).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pyarrow as pa
from . import kernels as pc  # pyarrow.compute's kernels, called directly

from .arrays import bool_array, integer_array, scalar, string_array, to_numpy
from .codebook import CategoricalFeature, Codebook, NumericFeature, code_dtype
from .column_codes import (MISSING, UNKNOWN, Dictionary, Encoded, _is_plain_number, _numbers, check_codes, check_label,
                       distinct, encode_label, encode_part)
from .io import as_text
from .value_text import canonical_levels_many

SEP = "\x1f"  # between a level set's number and a text in the lookup keys (a unit separator: in no level)


def _dictionary_parts(dicts: list[tuple[int, pa.DictionaryArray]]) -> dict[int, tuple[pa.Array, np.ndarray, bool]]:
    """:func:`~marg.marginals.data.column_codes.distinct` of many dictionary columns of one chunk (all of
    ``n`` rows): ``{j: (values, index, null rows)}``, a null row's index set to ``d`` (its column's
    values), the indices of columns of one index type copied into one (columns × n) numpy array
    (a few numpy calls per column, no ``pyarrow.compute`` call)."""
    out: dict[int, tuple[pa.Array, np.ndarray, bool]] = {}
    by_type: dict[pa.DataType, list[tuple[int, pa.DictionaryArray]]] = {}
    for j, arr in dicts:
        by_type.setdefault(arr.indices.type, []).append((j, arr))
    for t, group in by_type.items():
        n = len(group[0][1])
        dt = np.dtype(t.to_pandas_dtype())
        values = [arr.dictionary for _, arr in group]
        if n == 0:
            for (j, _), v in zip(group, values):
                out[j] = (v, np.zeros(0, dtype=dt), False)
            continue
        m = len(group)
        raw = np.empty((m, n), dtype=dt)  # one array, filled column by column (no concatenated copy beside it)
        nulls = np.zeros(m, dtype=bool)
        for k, (_, arr) in enumerate(group):
            idx = arr.indices
            bufs = idx.buffers()
            raw[k] = np.frombuffer(bufs[1], dtype=dt, count=idx.offset + n)[idx.offset:]
            if idx.null_count:
                valid = np.unpackbits(np.frombuffer(bufs[0], dtype=np.uint8), count=idx.offset + n,
                                      bitorder="little")[idx.offset:].view(np.bool_)
                raw[k][~valid] = len(values[k])
                nulls[k] = True
        for k, ((j, _), v) in enumerate(zip(group, values)):
            out[j] = (v, raw[k], bool(nulls[k]))
    return out


SHARED_MIN_COLUMNS = 64
"""Columns of one type (not dictionaries) from which a chunk's distinct values are found in one pass
(:func:`_shared_parts`); fewer go through :func:`~marg.marginals.data.column_codes.distinct` one by one."""
SHARED_CELLS = 1 << 20
"""Cells hashed at once by :func:`_shared_parts` (the concatenated copy it makes is this long at most)."""
SHARED_MAX_VALUES = 256
"""Distinct values of a group above which :func:`_shared_parts` gives it back to ``distinct`` column by column
(every column of a group carries the group's values, so its lookup work is columns × values)."""


def _shared_parts(cols: list[tuple[int, pa.Array]]) -> dict[int, tuple[pa.Array, np.ndarray, bool]]:
    """:func:`~marg.marginals.data.column_codes.distinct` of many plain (not dictionary) columns of one chunk:
    ``{j: (values, index, null rows)}`` as ``distinct`` gives, except that the columns of one type share
    one ``values`` array, the distinct values of all of them (found by one ``dictionary_encode`` of their
    concatenation, at most :data:`SHARED_CELLS` cells at a time), which a column's rows need not all use
    (``distinct``'s contract allows unused values: codes and refusals are looked up per row). A group
    with more than :data:`SHARED_MAX_VALUES` distinct values, or of fewer than
    :data:`SHARED_MIN_COLUMNS` columns, goes through ``distinct`` column by column. A wide Parquet file
    (3,000 float-coded gene calls) thus costs a few Arrow calls per block instead of several per column."""
    out: dict[int, tuple[pa.Array, np.ndarray, bool]] = {}
    by_type: dict[tuple[pa.DataType, int], list[tuple[int, pa.Array]]] = {}
    for j, arr in cols:
        by_type.setdefault((arr.type, len(arr)), []).append((j, arr))
    for (_, n), group in by_type.items():
        if len(group) < SHARED_MIN_COLUMNS or n == 0:
            for j, arr in group:
                out[j] = distinct(arr)
            continue
        per = max(1, SHARED_CELLS // n)
        for a in range(0, len(group), per):
            part = group[a:a + per]
            whole = _whole_numbers(part, n)
            if whole is not None:
                out.update(whole)
                continue
            enc = pc.dictionary_encode(pa.concat_arrays([arr for _, arr in part]), null_encoding="mask")
            values = enc.dictionary
            if len(values) > SHARED_MAX_VALUES:
                for j, arr in part:
                    out[j] = distinct(arr)
                continue
            idx = enc.indices
            if idx.null_count:
                idx = pc.fill_null(idx, scalar(len(values), idx.type))
            raw = to_numpy(idx).reshape(len(part), n)
            for k, (j, arr) in enumerate(part):
                out[j] = (values, raw[k], arr.null_count > 0)
    return out


def _whole_numbers(part: list[tuple[int, pa.Array]], n: int) -> dict[int, tuple[pa.Array, np.ndarray, bool]] | None:
    """:func:`_shared_parts`'s result for float64 columns (``n`` rows each) whose values are all whole numbers in
    a range of at most :data:`SHARED_MAX_VALUES` (a gene call coded 0/1/2 with nulls), without hashing: the
    shared values are the range ``lo..hi`` (values no row holds are allowed, as in ``_shared_parts``) and a row's
    index is ``value − lo`` (a null row's the range's length). None — the hashing path — for other types, a NaN
    that is not null, a fraction, or a wider range. (``-0.0`` reads as ``0``'s index: both are the text ``0``.)"""
    if not pa.types.is_float64(part[0][1].type):
        return None
    m = len(part)
    v = np.empty((m, n), dtype=np.float64)
    null = np.zeros((m, n), dtype=bool)
    has_null = np.zeros(m, dtype=bool)
    for k, (_, arr) in enumerate(part):
        bufs = arr.buffers()
        v[k] = np.frombuffer(bufs[1], dtype=np.float64, count=arr.offset + n)[arr.offset:]
        if arr.null_count:
            null[k] = ~np.unpackbits(np.frombuffer(bufs[0], dtype=np.uint8), count=arr.offset + n,
                                     bitorder="little")[arr.offset:].view(np.bool_)
            has_null[k] = True
    if has_null.any():
        v[null] = 0.0  # a null row's stored value is arbitrary (often NaN): set aside, its index is set below
    lo, hi = float(v.min()), float(v.max())  # NaN (not null) makes both NaN: refused by the test below
    if not (-(1 << 30) <= lo <= hi < lo + SHARED_MAX_VALUES):
        return None
    base = int(lo)
    index = v.astype(np.int32)
    if base != lo or not np.array_equal(index, v):
        return None
    d = int(hi) - base + 1
    if base:
        index -= base
    index[null] = d
    values = pa.Array.from_buffers(pa.float64(), d, [None, pa.py_buffer(np.arange(base, base + d, dtype=np.float64))])
    return {j: (values, index[k], bool(has_null[k])) for k, (j, _) in enumerate(part)}


class BatchEncoder:
    """Encodes the chunks of one file (or frame) under ``codebook``: see the module docstring.

    Parameters
    ----------
    codebook : Codebook
    with_label : bool
        Whether the chunks hold the label column (encoded last).
    """

    def __init__(self, codebook: Codebook, with_label: bool = True):
        self.codebook = codebook
        self.with_label = with_label
        feats = codebook.features
        cat = [j for j, f in enumerate(feats) if isinstance(f, CategoricalFeature)]
        sets = [tuple(feats[j].levels) for j in cat]
        wheres = [f"feature {feats[j].name!r}" for j in cat]
        if with_label:
            sets.append(tuple(codebook.label.classes))
            wheres.append("the label")
        keys = canonical_levels_many(sets, wheres)
        # one lookup table of every level set's canonical texts, each set once
        group: dict[tuple[str, ...], int] = {}
        self._start: list[int] = []
        table: list[str] = []
        for k in keys:
            if k not in group:
                group[k] = len(group)
                self._start.append(len(table))
                table.extend(f"{group[k]}{SEP}{t}" for t in k)
        self._table = string_array(table)
        slot = len(feats)  # the label's slot in the per-column arrays below
        n = len(feats) + 1
        self._group = np.full(n, -1, dtype=np.int64)  # level set of each categorical column (−1: numeric)
        self._miss = np.full(n, MISSING, dtype=np.int64)  # code of a missing value
        for j, k in zip(cat + ([slot] if with_label else []), keys):
            self._group[j] = group[k]
            f = feats[j] if j < slot else None
            if f is not None and f.missing is not None:
                self._miss[j] = f.levels.index(f.missing)
        self._start_arr = np.asarray(self._start, dtype=np.int64)
        self._last: dict[int, tuple[pa.Array, np.ndarray]] = {}  # column → (distinct values, codes) of the last block

    # ------------------------------------------------------------------ per block
    def encode(self, batch: dict[str, pa.Array], start_row: int, memo: dict | None = None,
               where: Callable[[int], str] | None = None) -> Encoded:
        """Encode one chunk ``{column: array}`` (as :func:`~marg.marginals.data.encoding.encode_batch`)."""
        feats = self.codebook.features
        p = len(feats)
        slot = p
        own = self._coded(batch)
        parts: list = [None] * p
        for j in range(p):
            f = feats[j]
            if j not in own:
                parts[j] = encode_part(f, batch[f.name], start_row, memo, where)
                continue
            values, index, nulls = own[j]
            codes, lut, bad = self._last[j][1:]
            if bad:
                check_codes(f, codes, None, index, start_row, where, null_rows=nulls)
            parts[j] = Dictionary(lut, index) if f.is_discrete else codes[index]
        y = None
        if self.with_label:
            lab = self.codebook.label
            if slot in own:
                values, index, nulls = own[slot]
                codes, _, bad = self._last[slot][1:]
                if bad:
                    check_label(lab.name, lab.classes, codes, None, index, start_row, where, null_rows=nulls)
                y = codes[index]
            else:  # pragma: no cover - every label column has distinct values
                y = encode_label(lab, batch[lab.name], start_row, memo, where)
        n = len(next(iter(batch.values()))) if batch else 0
        return Encoded(parts, y, start_row, n)

    def misfits(self, batch: dict[str, pa.Array]) -> tuple[dict[int, tuple[list[str], bool]], list[int]]:
        """What :meth:`encode` would refuse in one chunk, found without raising: ``({column: (the texts of
        values some row holds that the codebook does not know, whether some row's value is missing)},
        the columns not looked at here)``, a column numbered as a feature (the label: the number of
        features) and listed when either holds. Missing means a code :data:`MISSING` (NaN for a raw
        number). The columns not looked at are numbers that :meth:`encode` converts directly."""
        feats = self.codebook.features
        slot = len(feats)
        own = self._coded(batch)
        found: dict[int, tuple[list[str], bool]] = {}
        for j, (values, index, _nulls) in own.items():
            codes = self._last[j][1]
            used = np.zeros(len(codes), dtype=bool)
            used[np.unique(index)] = True
            if j < slot and isinstance(feats[j], NumericFeature) and feats[j].edges is None:
                bad, miss = np.isinf(codes) & used, np.isnan(codes) & used
            else:
                bad, miss = (codes == UNKNOWN) & used, (codes == MISSING) & used
            if bad.any() or miss.any():
                text = as_text(values.take(integer_array(np.flatnonzero(bad), pa.int64()))).to_pylist()
                found[j] = (text, bool(miss.any()))
        rest = [j for j in range(slot + (1 if self.with_label else 0)) if j not in own]
        return found, rest

    def _coded(self, batch: dict[str, pa.Array]) -> dict[int, tuple[pa.Array, np.ndarray, bool]]:
        """Each column's (distinct values, row index, null rows) of one chunk, their codes computed into
        ``self._last`` (columns whose values equal the last chunk's keep theirs); numbers that
        :func:`encode_part` converts directly are left out."""
        feats = self.codebook.features
        p = len(feats)
        slot = p
        cols = list(range(p)) + ([slot] if self.with_label else [])
        names = [f.name for f in feats] + [self.codebook.label.name]
        own: dict[int, tuple[pa.Array, np.ndarray, bool]] = {}  # column → (values, row index, null rows)
        dicts: list[tuple[int, pa.Array]] = []  # dictionary columns: their indices are read together
        plain: list[tuple[int, pa.Array]] = []  # other columns: their distinct values found together
        for j in cols:
            arr = batch[names[j]]
            if isinstance(arr, pa.ChunkedArray):
                arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
            f = feats[j] if j < slot else None
            if f is not None and isinstance(f, NumericFeature) and _is_plain_number(arr):
                continue  # encode_part converts it directly
            if isinstance(arr, pa.DictionaryArray):
                dicts.append((j, arr))
            else:
                plain.append((j, arr))
        if dicts:
            own.update(_dictionary_parts(dicts))
        if plain:
            own.update(_shared_parts(plain))
        todo: list[int] = []  # columns whose codes this block computes
        for j in cols:
            hit = own.get(j)
            if hit is None:
                continue
            last = self._last.get(j)
            if last is None or not (last[0].type == hit[0].type and last[0].equals(hit[0])):
                todo.append(j)
        if todo:
            self._compute(todo, own)
        return own

    def _compute(self, todo: list[int], own: dict) -> None:
        """The codes of the distinct values of columns ``todo``, all in one pass (module docstring);
        stored in ``self._last[j] = (values, codes, lut, bad)``: ``codes`` (d + 1,) with the null slot
        last, ``lut`` the codes as the code dtype (discrete columns), ``bad`` whether a slot a row
        may use is refused."""
        feats = self.codebook.features
        slot = len(feats)
        by_type: dict[pa.DataType, list[int]] = {}
        for j in todo:
            by_type.setdefault(own[j][0].type, []).append(j)
        order: list[int] = []
        texts: list[pa.Array] = []
        for t, js in by_type.items():
            null = pa.nulls(1, t)
            pieces = []
            for j in js:
                pieces += [own[j][0], null]
            texts.append(as_text(pa.concat_arrays(pieces)))
            order += js
        text = texts[0] if len(texts) == 1 else pa.concat_arrays(texts)
        text = pc.if_else(pc.equal(text, scalar("", pa.string())), scalar(None, pa.string()), text)
        lens = np.fromiter((len(own[j][0]) + 1 for j in order), dtype=np.int64, count=len(order))
        ends = np.cumsum(lens)
        starts = ends - lens
        order_arr = np.asarray(order, dtype=np.int64)
        is_null = to_numpy(pc.is_null(text))
        codes = np.empty(len(text), dtype=np.float64)
        # categorical columns and the label: one lookup of "set␟text"
        grp = self._group[order_arr]
        cat = grp >= 0
        if cat.any():
            rows = np.repeat(cat, lens)
            g_rep = np.repeat(grp, lens)[rows]
            sub = pc.filter(text, bool_array(rows)) if not rows.all() else text
            gtext = pc.cast(integer_array(g_rep, pa.int64()), pa.string())
            key = pc.binary_join_element_wise(gtext, sub, scalar(SEP, pa.string()))
            pos = pc.index_in(key, value_set=self._table)
            found = to_numpy(pc.is_valid(pos))
            pos_np = to_numpy(pc.fill_null(pos, scalar(0, pos.type))).astype(np.int64)
            c = np.where(found, pos_np - self._start_arr[g_rep], UNKNOWN)
            miss_rep = np.repeat(self._miss[order_arr], lens)[rows]
            c = np.where(is_null[rows], miss_rep, c)
            codes[rows] = c
        # numeric columns (text, not numbers): one cast, then each feature's edges or range
        if not cat.all():
            rows = np.repeat(~cat, lens)
            vals, nonnum = _numbers(pc.filter(text, bool_array(rows)) if not rows.all() else text)
            at = 0
            for k in np.flatnonzero(~cat):
                f = feats[order[k]]
                v, bad = vals[at:at + lens[k]], nonnum[at:at + lens[k]]
                at += lens[k]
                if f.edges is None:
                    out = np.clip(v, f.lo, f.hi)
                    out[bad] = np.inf
                else:
                    out = np.searchsorted(np.asarray(f.edges), v, side="left").astype(np.float64)
                    nan = np.isnan(v) & ~bad
                    out[nan] = f.n_levels - 1 if f.missing else MISSING
                    out[bad] = UNKNOWN
                codes[starts[k]:ends[k]] = out
        # refused slots per column (the null slot counts only when some row is null)
        raw = np.array([j < slot and not feats[j].is_discrete for j in order], dtype=bool)
        refused = np.where(np.repeat(raw, lens), ~np.isfinite(codes), codes < 0)
        nulls = np.fromiter((own[j][2] for j in order), dtype=bool, count=len(order))
        n_bad = np.add.reduceat(refused.view(np.int8), starts, dtype=np.int64) - (refused[ends - 1] & ~nulls)
        lut_all = np.where(codes >= 0, codes, 0)
        for k, j in enumerate(order):
            s, e = starts[k], ends[k]
            if j == slot or not raw[k]:
                cj = codes[s:e].astype(np.int64)
                lut = lut_all[s:e].astype(code_dtype(feats[j].n_levels)) if j < slot else None
            else:
                cj, lut = codes[s:e], None
            self._last[j] = (own[j][0], cj, lut, bool(n_bad[k]))


def encoder_for(encoder_memo: dict | None, codebook: Codebook, with_label: bool) -> BatchEncoder:
    """The :class:`BatchEncoder` kept in a file's ``memo`` dict (made on first use; a new one without a memo)."""
    key = ("batch-encoder", with_label)
    if encoder_memo is None:
        return BatchEncoder(codebook, with_label)
    enc = encoder_memo.get(key)
    if enc is None or enc.codebook is not codebook:
        enc = encoder_memo[key] = BatchEncoder(codebook, with_label)
    return enc
