"""The pandas-free conversions give exactly what pyarrow's own conversions give."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from marg.marginals.data.arrays import integer_array, scalar, string_array, to_numpy

RNG = np.random.default_rng(0)
INTS = RNG.integers(-50, 50, 37)
CASES = {
    "int64": pa.array(INTS),
    "int32 sliced": pa.array(INTS, type=pa.int32()).slice(3, 20),
    "uint8": pa.array(np.abs(INTS), type=pa.uint8()),
    "float32": pa.array(RNG.normal(size=11), type=pa.float32()),
    "float64 with nulls": pa.array([1.5, None, -2.0, None]),
    "int16 with nulls": pa.array([3, None, -7], type=pa.int16()),
    "bool": pa.array(RNG.random(29) < 0.5),
    "bool sliced": pa.array(RNG.random(29) < 0.5).slice(5, 17),
    "bool with nulls": pa.array([True, None, False]),
    "strings": pa.array(["a", None, "ç"]),
    "chunked": pa.chunked_array([pa.array([1, 2]), pa.array([3])]),
    "empty": pa.array([], type=pa.int64()),
    "dictionary indices": pc.dictionary_encode(pa.array(["x", "y", "x", None]), null_encoding="mask").indices,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_to_numpy_equals_pyarrows(name):
    arr = CASES[name]
    got, ref = to_numpy(arr), arr.to_numpy(zero_copy_only=False)
    assert got.dtype == ref.dtype and got.shape == ref.shape
    if got.dtype.kind == "f":
        assert np.array_equal(got, ref, equal_nan=True)
    else:
        assert list(got) == list(ref)


def test_built_arrays_equal_pa_array():
    for t in (pa.int64(), pa.int32(), pa.uint16()):
        v = np.arange(0, 40, 3)
        assert integer_array(v, t).equals(pa.array(v.tolist(), type=t))
    for texts in (["a", "bb", "", "naïve", "日本"], [], ["x"]):
        assert string_array(texts).equals(pa.array(texts, type=pa.string()))


def test_scalars_equal_pa_scalar():
    for value, t in ((7, pa.int32()), (-3, pa.int64()), (2.5, pa.float64()), ("", pa.string()), ("ß", pa.string()),
                     (None, pa.string()), (None, pa.int64())):
        assert scalar(value, t).equals(pa.scalar(value, t))
