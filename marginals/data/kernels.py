"""Arrow's compute kernels called by name, without importing ``pyarrow.compute``.

``import pyarrow.compute`` writes a Python wrapper with a docstring for each of Arrow's ≈ 290 compute
functions, at every start of every command that encodes a column (BENCHMARKS.md, "Issue 48 (startup,
fifth session)"). The encoder calls about twenty of them; each wrapper builds the function's options
object and calls ``pyarrow._compute.call_function`` — which is what these functions do, with the same
options and defaults, so values, types and errors are Arrow's own. Arrow's array methods that call into
``pyarrow.compute`` (``cast``, ``fill_null``, ``is_null``, ``is_valid``, ``filter``,
``dictionary_decode``) have their counterparts here too.

The modules that encode import this one as ``pc``: a call reads as the ``pyarrow.compute`` call it stands
for. Arguments are Arrow arrays and scalars (:func:`marg.marginals.data.arrays.scalar`), never Python
values (pyarrow converts those through its pandas hook).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyarrow import _compute as _c


def _call(name: str, args: list, options: Any = None) -> Any:
    return _c.call_function(name, args, options)


# ------------------------------------------------------------------ with options
def cast(arr: Any, target_type: pa.DataType, safe: bool = True) -> Any:
    """``pyarrow.compute.cast`` (and ``Array.cast``): a safe cast unless ``safe`` is False."""
    return _call("cast", [arr], _c.CastOptions.safe(target_type) if safe else _c.CastOptions.unsafe(target_type))


def fill_null(values: Any, fill_value: pa.Scalar) -> Any:
    """``pyarrow.compute.fill_null`` (and ``Array.fill_null``) with an Arrow scalar (cast to ``values``' type)."""
    if fill_value.type != values.type:
        fill_value = cast(fill_value, values.type)
    return _call("coalesce", [values, fill_value])


def dictionary_encode(arr: Any, null_encoding: str = "mask") -> Any:
    return _call("dictionary_encode", [arr], _c.DictionaryEncodeOptions(null_encoding))


def dictionary_decode(arr: pa.DictionaryArray) -> Any:
    """``DictionaryArray.dictionary_decode``: the dictionary taken at the indices."""
    return _call("take", [arr.dictionary, arr.indices], _c.TakeOptions(boundscheck=True))


def filter(arr: Any, mask: Any) -> Any:  # noqa: A001 - the kernel's name
    """``Array.filter`` (null mask slots dropped, Arrow's default)."""
    return _call("filter", [arr, mask], _c.FilterOptions("drop"))


def index_in(arr: Any, value_set: pa.Array) -> Any:
    return _call("index_in", [arr], _c.SetLookupOptions(value_set))


def is_in(arr: Any, value_set: pa.Array) -> Any:
    return _call("is_in", [arr], _c.SetLookupOptions(value_set))


def is_null(arr: Any) -> Any:
    """``Array.is_null`` (NaN is not null)."""
    return _call("is_null", [arr], _c.NullOptions(nan_is_null=False))


def match_substring_regex(arr: Any, pattern: str) -> Any:
    return _call("match_substring_regex", [arr], _c.MatchSubstringOptions(pattern))


def replace_substring_regex(arr: Any, pattern: str, replacement: str) -> Any:
    return _call("replace_substring_regex", [arr], _c.ReplaceSubstringOptions(pattern, replacement))


def strftime(arr: Any, format: str) -> Any:  # noqa: A002 - the option's name
    return _call("strftime", [arr], _c.StrftimeOptions(format))


# ------------------------------------------------------------------ the kernels' default options
def abs(arr: Any) -> Any:  # noqa: A001 - the kernel's name
    return _call("abs", [arr])


def and_(a: Any, b: Any) -> Any:
    return _call("and", [a, b])


def any(arr: Any) -> Any:  # noqa: A001 - the kernel's name
    return _call("any", [arr])


def binary_join_element_wise(*args: Any) -> Any:
    return _call("binary_join_element_wise", list(args))


def equal(a: Any, b: Any) -> Any:
    return _call("equal", [a, b])


def floor(arr: Any) -> Any:
    return _call("floor", [arr])


def if_else(cond: Any, a: Any, b: Any) -> Any:
    return _call("if_else", [cond, a, b])


def is_nan(arr: Any) -> Any:
    return _call("is_nan", [arr])


def is_valid(arr: Any) -> Any:
    return _call("is_valid", [arr])


def less(a: Any, b: Any) -> Any:
    return _call("less", [a, b])


def min_max(arr: Any) -> Any:
    return _call("min_max", [arr])


def subtract(a: Any, b: Any) -> Any:
    return _call("subtract", [a, b])


def utf8_lower(arr: Any) -> Any:
    return _call("utf8_lower", [arr])


def utf8_trim_whitespace(arr: Any) -> Any:
    return _call("utf8_trim_whitespace", [arr])
