"""Arrow's kernels called by name (:mod:`marg.marginals.data.kernels`) give what ``pyarrow.compute``'s wrappers
and Arrow's array methods give, values and types, on arrays with nulls (and raise Arrow's errors)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from marg.marginals.data import kernels as k

F = pa.array([1.0, -2.5, None, 3.0, float("nan"), -0.0])
I = pa.array([3, None, 7, 0, 5], type=pa.int32())
S = pa.array([" a", "10.0", None, "True", "2020-01-02T00:00:00", "x"])
B = pa.array([True, False, None, True, False, True])


def same(a, b):
    """Equal types and values (NaN equal to NaN: compared as Arrow prints them)."""
    assert a.type == b.type
    assert (a.to_string() if not isinstance(a, pa.Scalar) else repr(a)) == \
        (b.to_string() if not isinstance(b, pa.Scalar) else repr(b))


@pytest.mark.parametrize("case", [
    lambda m: m.cast(F, pa.string()), lambda m: m.cast(I, pa.float64()),
    lambda m: m.fill_null(I, pa.scalar(9, pa.int32())),
    lambda m: m.fill_null(B, pa.scalar(False)), lambda m: m.dictionary_encode(S, null_encoding="mask"),
    lambda m: m.index_in(S, value_set=pa.array(["x", " a"])), lambda m: m.is_in(S, value_set=pa.array(["x"])),
    lambda m: m.match_substring_regex(S, r"^\d+\.\d*$"), lambda m: m.replace_substring_regex(S, r"T", " "),
    lambda m: m.abs(F), lambda m: m.and_(B, B), lambda m: m.any(B), lambda m: m.equal(F, F), lambda m: m.floor(F),
    lambda m: m.if_else(B, S, pa.scalar("z")), lambda m: m.is_nan(F), lambda m: m.is_valid(S), lambda m: m.less(F, F),
    lambda m: m.min_max(I), lambda m: m.subtract(I, pa.scalar(1, pa.int32())), lambda m: m.utf8_lower(S),
    lambda m: m.utf8_trim_whitespace(S), lambda m: m.binary_join_element_wise(S, S, pa.scalar("|")),
    lambda m: m.strftime(pa.array([0, None], type=pa.timestamp("s")), format="%Y-%m-%d"),
])
def test_a_kernel_gives_what_pyarrow_compute_gives(case):
    same(case(k), case(pc))


def test_the_array_methods_counterparts():
    d = pa.DictionaryArray.from_arrays(pa.array([1, 0, None, 1], type=pa.int8()), pa.array(["u", "v"]))
    same(k.dictionary_decode(d), d.dictionary_decode())
    same(k.is_null(F), F.is_null())
    same(k.is_valid(F), F.is_valid())
    mask = pa.array([True, None, False, True, True, False])
    same(k.filter(S, mask), S.filter(mask))
    same(k.cast(F, pa.string()), F.cast(pa.string()))
    same(k.fill_null(I, pa.scalar(9, pa.int64())), I.fill_null(pa.scalar(9, pa.int64())))  # the fill cast to int32


def test_a_refused_cast_raises_arrows_error():
    with pytest.raises(pa.ArrowInvalid):
        k.cast(pa.array(["1.5", "x"]), pa.float64())
    with pytest.raises(pa.ArrowInvalid):
        k.cast(pa.array([1.5]), pa.int64())
    assert k.cast(pa.array([1.5]), pa.int64(), safe=False).to_pylist() == [1]
