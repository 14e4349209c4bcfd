"""The one text of a value, whatever the source: what a categorical level or a class is compared as.

A CSV keeps the text its writer chose (``10.0``), a typed source keeps a number (DuckDB
DOUBLE 10, a Parquet double, a pandas float column, an Arrow table) that Arrow writes as
``10``; the same patient must get the same code from both. So every value is compared as
its *canonical text*, the same in drafting (``marg schema init``), counting (``marg
export``, every source) and predicting (files, data frames, Arrow tables):

- **numbers**: a decimal text with a point or an exponent (``10.0``, ``1.50``, ``.5``,
  ``1e3``) and every value of a float or decimal column is written from its float value:
  a whole number below 2⁵³ without a point (``10.0`` → ``10``, ``-0.0`` → ``0``, ``1e3``
  → ``1000``), any other number as the shortest text that reads back to it (``1.50`` →
  ``1.5``). Integer text stays as written, so a code ``01`` stays ``01`` (an integer column
  of a typed source holds ``1``: keep such codes as text there);
- **dates and times**: ``YYYY-MM-DD`` for a date or a midnight time stamp,
  ``YYYY-MM-DD HH:MM:SS[.fff]`` otherwise (``T`` or space, trailing zeros of the fraction
  dropped), from a typed date or time stamp column or from text of that form;
- **booleans**: ``true`` / ``false`` for a boolean column and for the texts pandas reads as
  booleans (``True``, ``TRUE``, ``False``, ``FALSE``);
- any other text as written (after trimming, done by the reader).

A codebook's levels and classes are compared by the same rule (:func:`canonical_levels`),
so a codebook drafted before this rule (levels ``1.0 … 16.0`` from a CSV) reads the same
data as before and the typed sources too, with an unchanged fingerprint; a codebook with
two levels of one canonical text (``10`` and ``10.0``) is refused, naming both.
"""

from __future__ import annotations

import pyarrow as pa
from . import kernels as pc  # pyarrow.compute's kernels, called directly

from marg.errors import InputError

from .arrays import bool_array, scalar, string_array

_NUMBER = r"^[+-]?(\d+\.\d*|\.\d+)([eE][+-]?\d+)?$|^[+-]?\d+[eE][+-]?\d+$"
_DATETIME = r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?$"
_BOOL = {"True": "true", "TRUE": "true", "False": "false", "FALSE": "false"}
_WHOLE = float(2 ** 53)
_FALSE = bool_array([False])[0]  # not a Python False: pyarrow converts one through its pandas hook


def number_text(values: pa.Array) -> pa.Array:
    """Float (or decimal) values as their canonical text (module docstring); nulls stay null."""
    v = pc.cast(values, pa.float64())
    whole = pc.fill_null(pc.and_(pc.equal(pc.floor(v), v), pc.less(pc.abs(v), scalar(_WHOLE, pa.float64()))), _FALSE)
    as_int = pc.cast(pc.cast(pc.if_else(whole, v, scalar(None, pa.float64())), pa.int64()), pa.string())
    return pc.if_else(whole, as_int, pc.cast(v, pa.string()))


def _datetime_text(s: pa.Array) -> pa.Array:
    s = pc.replace_substring_regex(s, r"^(\d{4}-\d{2}-\d{2})T", r"\1 ")
    s = pc.replace_substring_regex(s, r"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})\.0+$", r"\1")
    s = pc.replace_substring_regex(s, r"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d*[1-9])0+$", r"\1")
    return pc.replace_substring_regex(s, r"^(\d{4}-\d{2}-\d{2}) 00:00:00$", r"\1")


def canonical(text: pa.Array) -> pa.Array:
    """A string array's values as their canonical text (shape and nulls unchanged)."""
    if len(text) == 0:
        return text
    num = pc.fill_null(pc.match_substring_regex(text, _NUMBER), _FALSE)
    if pc.any(num).as_py():
        parsed = pc.cast(pc.if_else(num, text, scalar(None, text.type)), pa.float64())
        text = pc.if_else(num, number_text(parsed), text)
    when = pc.fill_null(pc.match_substring_regex(text, _DATETIME), _FALSE)
    if pc.any(when).as_py():
        text = pc.if_else(when, _datetime_text(text), text)
    boolean = pc.fill_null(pc.is_in(text, value_set=string_array(list(_BOOL))), _FALSE)
    if pc.any(boolean).as_py():
        text = pc.if_else(boolean, pc.utf8_lower(text), text)
    return text


def typed_text(arr: pa.Array) -> pa.Array | None:
    """A typed (not text) column's values as canonical text, or None to cast it as Arrow does."""
    t = arr.type
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        if pa.types.is_floating(t):  # NaN in a float column is a missing value, like an empty CSV cell
            arr = pc.if_else(pc.is_nan(arr), scalar(None, t), arr)
        return number_text(arr)
    if pa.types.is_date(t):
        return pc.cast(pc.cast(arr, pa.date32()), pa.string())
    if pa.types.is_timestamp(t):
        return canonical(pc.strftime(arr, format="%Y-%m-%d %H:%M:%S"))
    return None


_KEYS: dict[tuple[str, ...], tuple[tuple[str, ...], tuple[str, str, str] | None]] = {}
"""Each levels tuple's canonical texts and its first clash (two levels of one text), whatever feature holds it:
keyed by the levels alone, so 20,000 features of one level set cost one entry (cleared past :data:`_KEYS_MAX`)."""
_KEYS_MAX = 1 << 16


def _fill_keys(todo: list[tuple[str, ...]]) -> None:
    """Compute the canonical texts of the levels tuples ``todo`` in one :func:`canonical` pass over all their levels."""
    if len(_KEYS) + len(todo) > _KEYS_MAX:
        _KEYS.clear()
    flat = [lv for levels in todo for lv in levels]
    keys = canonical(string_array(flat)).to_pylist() if flat else []
    at = 0
    for levels in todo:
        mine = tuple(keys[at:at + len(levels)])
        at += len(levels)
        first: dict[str, str] = {}
        clash = None
        for lv, key in zip(levels, mine):
            if key in first:
                clash = (first[key], lv, key)
                break
            first[key] = lv
        _KEYS[levels] = (mine, clash)


def canonical_levels_many(levels: "list[tuple[str, ...]]", wheres: "list[str]") -> list[tuple[str, ...]]:
    """:func:`canonical_levels` of many levels tuples (``wheres[k]`` names the k-th's feature), the
    tuples not seen before canonicalised together in one pass (a wide codebook's cost is one call)."""
    todo = list(dict.fromkeys(lv for lv in levels if lv not in _KEYS))
    if todo:
        _fill_keys(todo)
    out = []
    for lv, where in zip(levels, wheres):
        hit = _KEYS.get(lv)
        if hit is None:  # cleared while filling: compute this one alone
            _fill_keys([lv])
            hit = _KEYS[lv]
        keys, clash = hit
        if clash is not None:
            raise InputError(f"{where}: levels {clash[0]!r} and {clash[1]!r} are one value ({clash[2]!r}, as every "
                             "source reads it): keep one")
        out.append(keys)
    return out


def canonical_levels(levels: tuple[str, ...], where: str) -> tuple[str, ...]:
    """A codebook's levels (or classes) as the texts data is compared with; InputError (one line)
    when two of them are one value (``where`` names the feature or label)."""
    return canonical_levels_many([tuple(levels)], [where])[0]


def canonical_value(value: object) -> str | None:
    """One Python value (a label given as a list or a pandas Series) as its canonical text."""
    if value is None or (isinstance(value, float) and value != value):
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return number_text(pa.array([value], pa.float64())).to_pylist()[0]
    return canonical(string_array([str(value).strip()])).to_pylist()[0]


__all__ = ["canonical", "canonical_levels", "canonical_levels_many", "canonical_value", "number_text", "typed_text"]
