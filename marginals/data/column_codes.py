"""The rules that code one column under a codebook, through its distinct values (and refuse what it does not allow).

Every column is encoded through its *distinct values*: a column arrives as (or is turned
into) a dictionary array — the dictionary holds each distinct value once, the indices say
which value every row holds — so the text work (cast to text, trim, look up the level,
parse the number) is done once per distinct value, and the rows only gather from a small
code table. Parquet dictionary pages, CSV dictionary columns and the grouped results of a
database all arrive this way, and they all go through the same value rules:

- a categorical value (and the label) is compared as its canonical text after trimming
  whitespace (:mod:`.value_text`: ``"01"`` stays ``"01"``; a CSV's ``10.0`` and a float
  column's 10 both read ``"10"``), with the levels read by the same rule; a missing value
  (null, or NaN in a float column) takes the feature's missing level;
- a binned numeric value gets the code ``#{edges < v}``; missing or NaN takes the missing bin;
- a raw numeric value is clipped to its public range ``[lo, hi]``.

Anything the codebook does not allow — an unknown level, a missing value in a feature
without a missing level, a non-number or NaN in a numeric column, a missing or unknown
label — is a one-line :class:`~marg.errors.InputError` naming the column, the value and
the row (1-based, counting data rows after the header); within a column an unknown value
(or a non-number) is reported before a missing one.

A chunk becomes :class:`Encoded`: one array per feature (codes in the smallest unsigned
integer type, raw numeric values as float64) and the label codes; ``Encoded.X`` stacks
them as the (n, p) float64 matrix the learners use.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Callable, Sequence

import numpy as np
import pyarrow as pa
from . import kernels as pc  # pyarrow.compute's kernels, called directly

from .arrays import integer_array, scalar, string_array, to_numpy
from .codebook import CategoricalFeature, NumericFeature, code_dtype
from marg.errors import InputError
from .io import as_text
from .value_text import canonical_levels

# Sentinel codes of a distinct value that is not allowed (negative, so never a level).
UNKNOWN = -1  # a value that is not a level (categorical) / not a number (numeric)
MISSING = -2  # null or NaN where the codebook has no missing level


@dataclass(frozen=True)
class Dictionary:
    """A discrete column kept as its distinct values' codes and each row's value index.

    ``codes = lut[index]``; counting a table of this column alone needs only ``index``
    (count the distinct values, then add their counts by code), never the gathered codes.

    Attributes
    ----------
    lut : ndarray, shape (d + 1,)
        Code of each distinct value (the last slot: null), in the code dtype; checked, so
        every slot a row uses holds a valid code.
    index : ndarray, shape (n,), int32 or int64
    """

    lut: np.ndarray
    index: np.ndarray

    def codes(self) -> np.ndarray:
        return self.lut[self.index]


class Encoded:
    """One encoded chunk.

    Parameters
    ----------
    parts : tuple, one per feature (codebook order)
        An ndarray (n,) — codes of a discrete feature (unsigned, see :func:`code_dtype`)
        or clipped float64 values of a raw numeric feature — or a :class:`Dictionary`.
    y : ndarray, shape (n,), int64, or None when the label was not read.
    start_row : int
        1-based data-row number of the chunk's first row.
    n_rows : int, optional
        Rows in the chunk (needed only when there are neither features nor labels).

    ``column(i)`` gives feature i's codes or values (a dictionary is gathered once, on
    first use); ``X`` stacks all of them as the (n, p) float64 matrix the learners use.
    """

    def __init__(self, parts, y: np.ndarray | None, start_row: int, n_rows: int = -1):
        self.parts = tuple(parts)
        self.y = y
        self.start_row = start_row
        self._n = n_rows
        self._cols: dict[int, np.ndarray] = {}

    @property
    def n(self) -> int:
        if self.parts:
            p = self.parts[0]
            return int((p.index if isinstance(p, Dictionary) else p).shape[0])
        return int(self.y.shape[0]) if self.y is not None else max(self._n, 0)

    def column(self, i: int) -> np.ndarray:
        c = self._cols.get(i)
        if c is None:
            p = self.parts[i]
            c = self._cols[i] = p.codes() if isinstance(p, Dictionary) else p
        return c

    @property
    def columns(self) -> tuple[np.ndarray, ...]:
        return tuple(self.column(i) for i in range(len(self.parts)))

    @cached_property
    def X(self) -> np.ndarray:
        """shape (n, p), float64: codes and clipped values side by side (each column written into the one
        matrix: no float64 copy of every column beside it, 32 MB at 200 rows × 20,000 features)."""
        if not self.parts:
            return np.zeros((self.n, 0))
        X = np.empty((self.n, len(self.parts)), dtype=np.float64)
        for j in range(len(self.parts)):
            X[:, j] = self.column(j)
        return X


# ------------------------------------------------------------------ distinct values
def distinct(arr: pa.Array | pa.ChunkedArray) -> tuple[pa.Array, np.ndarray, bool]:
    """Split a column into its distinct values and, per row, the index of its value.

    Returns
    -------
    values : pyarrow Array, shape (d,)
        The dictionary (may hold values no row uses).
    index : ndarray, shape (n,), int32/int64
        Row r holds ``values[index[r]]``; a null row has index ``d`` (one past the end).
    null_rows : bool
        Whether any row is null (if not, no row needs to be searched for index ``d``).
    """
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
        if isinstance(arr, pa.ChunkedArray):  # pragma: no cover - combine_chunks of dictionaries
            arr = pa.concat_arrays(arr.chunks)
    if not pa.types.is_dictionary(arr.type):
        small = _integer_range(arr)
        if small is not None:
            return small
        arr = pc.dictionary_encode(arr, null_encoding="mask")
    values = arr.dictionary
    idx = arr.indices
    nulls = idx.null_count > 0
    if nulls:
        idx = pc.fill_null(idx, scalar(len(values), idx.type))
    return values, to_numpy(idx), nulls


def _integer_range(arr: pa.Array) -> tuple[pa.Array, np.ndarray, bool] | None:
    """An integer column with a small range: values ``lo..hi``, index ``v − lo`` (no hashing)."""
    if not pa.types.is_integer(arr.type) or len(arr) < 4096 or arr.null_count == len(arr):
        return None
    mm = pc.min_max(arr)
    lo, hi = mm["min"].as_py(), mm["max"].as_py()
    if hi - lo >= min(1 << 16, len(arr)):
        return None
    if 0 <= lo and hi < min(1 << 16, len(arr)) and arr.type == pa.int64():
        lo = 0  # codes 0..hi index themselves: the column is its own index, no copy
    values = pc.cast(integer_array(np.arange(lo, hi + 1, dtype=np.int64), pa.int64()), arr.type)
    if arr.null_count:
        index = pc.fill_null(pc.subtract(pc.cast(arr, pa.int64()), scalar(lo, pa.int64())),
                             scalar(len(values), pa.int64()))
        return values, to_numpy(index), True
    v = to_numpy(arr)
    return values, (v if lo == 0 and v.dtype == np.int64 else np.subtract(v, lo, dtype=np.int64)), False


def _first_row(index: np.ndarray, bad_values: np.ndarray) -> int | None:
    """First row whose distinct-value index is in ``bad_values`` (None if no row is)."""
    if bad_values.size == 0:
        return None
    mask = np.zeros(int(max(index.max(initial=0), bad_values.max())) + 1, dtype=bool)
    mask[bad_values] = True
    hit = np.flatnonzero(mask[index])
    return int(hit[0]) if hit.size else None


def _text(values: pa.Array) -> pa.Array:
    """Distinct values as trimmed text, with the null slot appended; an empty text is missing
    (as an empty CSV cell is, whatever the file format or database)."""
    s = as_text(values)
    s = pc.if_else(pc.equal(s, scalar("", pa.string())), scalar(None, pa.string()), s)
    return pa.concat_arrays([s, pa.nulls(1, pa.string())])


def _level_codes(text: pa.Array, levels: Sequence[str], missing_code: int | None, where: str) -> np.ndarray:
    """Per distinct value: its level index, UNKNOWN, or the missing code / MISSING (the levels
    compared as their canonical text; ``where`` names the feature for a codebook's clash)."""
    idx = pc.index_in(text, value_set=string_array(list(canonical_levels(tuple(levels), where))))
    out = to_numpy(pc.fill_null(idx, scalar(UNKNOWN, idx.type))).astype(np.int64)
    null = to_numpy(pc.is_null(text))
    out[null] = MISSING if missing_code is None else missing_code
    return out


def _numbers(text: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Per distinct value: its float value (NaN if missing) and whether it is not a number."""
    ok = to_numpy(pc.is_valid(text))
    vals = np.full(len(text), np.nan)
    bad = np.zeros(len(text), dtype=bool)
    try:
        vals = to_numpy(pc.cast(text, pa.float64())).astype(np.float64)
    except pa.ArrowInvalid:
        for k, v in enumerate(text.to_pylist()):
            if v is None:
                continue
            try:
                vals[k] = float(v)
            except ValueError:
                bad[k] = True
    bad &= ok
    return vals, bad


def value_codes(f, values: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """Encode distinct values of feature ``f`` (plus the null slot at the end).

    Returns
    -------
    codes : ndarray, shape (d + 1,)
        int64 codes (discrete) with UNKNOWN / MISSING sentinels, or float64 clipped values
        (raw numeric) with NaN for a missing value and ``inf`` for a non-number.
    text : pyarrow Array
        The distinct values as trimmed text (for messages).
    """
    text = _text(values)
    if isinstance(f, CategoricalFeature):
        miss = f.levels.index(f.missing) if f.missing is not None else None
        return _level_codes(text, f.levels, miss, f"feature {f.name!r}"), text
    assert isinstance(f, NumericFeature)
    v, bad = _numbers(text)
    if f.edges is None:
        out = np.clip(v, f.lo, f.hi)
        out[bad] = np.inf
        return out, text
    codes = np.searchsorted(np.asarray(f.edges), v, side="left").astype(np.int64)
    nan = np.isnan(v) & ~bad
    codes[nan] = f.n_levels - 1 if f.missing else MISSING
    codes[bad] = UNKNOWN
    return codes, text


def at_row(start_row: int) -> Callable[[int], str]:
    """Where row ``k`` of a chunk starting at data row ``start_row`` is, for messages."""
    return lambda k: f"at row {start_row + k}"


def check_codes(f, codes: np.ndarray, text: pa.Array, index: np.ndarray, start_row: int,
                where: Callable[[int], str] | None = None, null_rows: bool = True) -> None:
    """Raise the column's one-line error if a row holds a value the codebook refuses.

    ``where(k)`` says where row ``k`` is (default: its data-row number); a database
    source, whose rows have no order, says in which table instead. ``null_rows=False``
    (no row is null) skips the search for the null slot ``codes[-1]``.
    """
    where = where or at_row(start_row)
    keep = len(codes) if null_rows else len(codes) - 1
    name = f.name
    if isinstance(f, NumericFeature) and f.edges is None:
        bad_values, nan_values = np.flatnonzero(np.isinf(codes[:keep])), np.flatnonzero(np.isnan(codes[:keep]))
    else:
        bad_values, nan_values = np.flatnonzero(codes[:keep] == UNKNOWN), np.flatnonzero(codes[:keep] == MISSING)
    k = _first_row(index, bad_values)
    if k is not None:
        # the value itself is a patient's: the row says where to look, the message never echoes it
        if isinstance(f, NumericFeature):
            raise InputError(f"column {name!r}: the value {where(k)} is not a number (not shown: a patient's value)")
        levels = f.levels
        raise InputError(
            f"column {name!r}: unknown level {where(k)} (not shown: a patient's value; "
            f"allowed: {', '.join(levels[:10])}{'…' if len(levels) > 10 else ''})"
        )
    k = _first_row(index, nan_values)
    if k is not None:
        if isinstance(f, NumericFeature):
            why = ("raw numeric features need a value" if f.edges is None
                   else "the codebook gives this feature no missing level")
            raise InputError(f"column {name!r}: missing or NaN value {where(k)} ({why})")
        raise InputError(f"column {name!r}: missing value {where(k)} (the codebook gives this feature no missing "
                         "level)")


def label_codes(classes: Sequence[str], values: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """Encode distinct label values: class index, UNKNOWN, or MISSING (shape (d + 1,))."""
    text = _text(values)
    return _level_codes(text, classes, None, "the label"), text


def check_label(name: str, classes: Sequence[str], codes: np.ndarray, text: pa.Array, index: np.ndarray,
                start_row: int, where: Callable[[int], str] | None = None, null_rows: bool = True) -> None:
    """Raise the label's one-line error for an unknown or missing class (see :func:`check_codes`)."""
    where = where or at_row(start_row)
    keep = len(codes) if null_rows else len(codes) - 1
    k = _first_row(index, np.flatnonzero(codes[:keep] == UNKNOWN))
    if k is not None:
        raise InputError(
            f"column {name!r}: unknown class {where(k)} (not shown: a patient's value; "
            f"allowed: {', '.join(classes[:10])}{'…' if len(classes) > 10 else ''})"
        )
    k = _first_row(index, np.flatnonzero(codes[:keep] == MISSING))
    if k is not None:
        raise InputError(f"column {name!r}: missing label {where(k)}")


def _memo_codes(memo: dict | None, key: object, values: pa.Array, encode: Callable[[], tuple]) -> tuple:
    """``encode()`` of a column's distinct values, reused while the next chunk's distinct
    values are the same (a Parquet row group's dictionary, an integer column's range)."""
    if memo is None:
        return encode()
    hit = memo.get(key)
    if hit is not None and hit[0].equals(values):
        return hit[1]
    out = encode()
    memo[key] = (values, out)
    return out


def encode_part(f, arr: pa.Array, start_row: int, memo: dict | None = None,
                where: Callable[[int], str] | None = None) -> "np.ndarray | Dictionary":
    """Encode one feature column, checked: a :class:`Dictionary` for a discrete feature,
    float64 values for a raw numeric one. A numeric feature stored as numbers (not text,
    not a dictionary) is converted directly, without looking up distinct values.
    ``memo`` (a dict kept across the chunks of one file) reuses the previous chunk's
    codes of the same distinct values."""
    if isinstance(f, NumericFeature) and _is_plain_number(arr):
        return _direct_number(f, arr, start_row)
    values, index, nulls = distinct(arr)

    def encode() -> tuple:
        codes, text = value_codes(f, values)
        lut = np.where(codes >= 0, codes, 0).astype(code_dtype(f.n_levels)) if f.is_discrete else None
        return codes, text, lut

    codes, text, lut = _memo_codes(memo, f.name, values, encode)
    check_codes(f, codes, text, index, start_row, where, null_rows=nulls)
    if f.is_discrete:
        return Dictionary(lut, index)
    return codes[index]


def _is_plain_number(arr) -> bool:
    t = arr.type
    return pa.types.is_integer(t) or pa.types.is_floating(t)


def _direct_number(f: NumericFeature, arr, start_row: int, where: Callable[[int], str] | None = None) -> np.ndarray:
    """A numeric column stored as numbers: the text rules give the same values (an Arrow
    number prints as the shortest text that reads back to itself), so skip the text."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    v = to_numpy(pc.cast(arr, pa.float64())).astype(np.float64, copy=False)
    nan = np.isnan(v)
    where = where or at_row(start_row)
    if f.edges is None:
        if nan.any():
            k = int(np.flatnonzero(nan)[0])
            raise InputError(f"column {f.name!r}: missing or NaN value {where(k)} (raw numeric features need a value)")
        return np.clip(v, f.lo, f.hi)
    codes = np.searchsorted(np.asarray(f.edges), v, side="left")
    if nan.any():
        if not f.missing:
            k = int(np.flatnonzero(nan)[0])
            raise InputError(f"column {f.name!r}: missing or NaN value {where(k)} "
                             "(the codebook gives this feature no missing level)")
        codes[nan] = f.n_levels - 1
    return codes.astype(code_dtype(f.n_levels))


def encode_label(lab, arr: pa.Array, start_row: int, memo: dict | None = None,
                 where: Callable[[int], str] | None = None) -> np.ndarray:
    """Encode the label column into int64 class codes (``memo``, ``where`` as in :func:`encode_part`)."""
    values, index, nulls = distinct(arr)
    codes, text = _memo_codes(memo, ("label", lab.name), values, lambda: label_codes(lab.classes, values))
    check_label(lab.name, lab.classes, codes, text, index, start_row, where, null_rows=nulls)
    return codes[index]
