"""Arrow arrays to numpy and back without pyarrow's pandas hook.

pyarrow imports pandas, when it is installed, the first time a process converts with
``Array.to_numpy`` or builds an array from Python or numpy values (``pa.array``): it checks
whether the values are pandas objects. That import is a large part of a first-order ``marg export``'s CPU
(BENCHMARKS.md, "Counting at database speed") and counting never needs pandas. These
conversions read and write Arrow buffers directly, with the same values and types:

- :func:`to_numpy`: a numeric array without nulls through DLPack (zero-copy, read-only, as
  ``to_numpy`` gives it), with nulls as NaN (an integer one as float64, as ``to_numpy``
  gives it), a boolean one without nulls unpacked from its bits; anything else (strings,
  booleans with nulls) falls back to ``to_numpy``;
- :func:`integer_array`: an Arrow integer array over a numpy array's buffer;
- :func:`bool_array`: an Arrow boolean array from numpy booleans (its bits packed);
- :func:`string_array`: an Arrow string array from Python strings (offsets and UTF-8 bytes);
- :func:`scalar`: an Arrow scalar (``pa.scalar`` and Python values passed to ``pyarrow.compute``
  functions convert through the same hook), read from a one-element array.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa
from . import kernels as pc  # pyarrow.compute's kernels, called directly


def to_numpy(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """``arr`` as a numpy array (shape (len(arr),)), as ``arr.to_numpy(zero_copy_only=False)`` gives it."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    t = arr.type
    if arr.null_count and len(arr) and (pa.types.is_integer(t) or pa.types.is_floating(t)):  # nulls read as NaN
        filled = arr if pa.types.is_floating(t) else pc.cast(arr, pa.float64())
        return to_numpy(pc.fill_null(filled, scalar(float("nan"), filled.type)))
    if arr.null_count == 0 and len(arr):
        if pa.types.is_boolean(t):
            bits = np.frombuffer(arr.buffers()[1], dtype=np.uint8)
            return np.unpackbits(bits, count=arr.offset + len(arr), bitorder="little")[arr.offset:].view(np.bool_)
        if pa.types.is_integer(t) or pa.types.is_floating(t):
            return np.from_dlpack(arr)
    return arr.to_numpy(zero_copy_only=False)


def integer_array(values: np.ndarray, type: pa.DataType) -> pa.Array:
    """The Arrow array of ``type`` (an integer type) holding ``values`` (1-d, no nulls)."""
    v = np.ascontiguousarray(values, dtype=type.to_pandas_dtype())
    return pa.Array.from_buffers(type, v.shape[0], [None, pa.py_buffer(v)])


def bool_array(values: np.ndarray) -> pa.Array:
    """The Arrow boolean array holding ``values`` (1-d numpy booleans, no nulls)."""
    v = np.asarray(values, dtype=bool)
    return pa.Array.from_buffers(pa.bool_(), v.shape[0], [None, pa.py_buffer(np.packbits(v, bitorder="little"))])


def string_array(texts: Sequence[str]) -> pa.Array:
    """The Arrow string array of ``texts`` (no nulls)."""
    raw = [str(t).encode("utf-8") for t in texts]
    offsets = np.zeros(len(raw) + 1, dtype=np.int32)
    np.cumsum([len(b) for b in raw], out=offsets[1:])
    return pa.Array.from_buffers(pa.string(), len(raw), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(raw))])


def scalar(value: int | float | str | None, type: pa.DataType) -> pa.Scalar:
    """The Arrow scalar of ``type`` (numeric or string) holding ``value`` (None: the null of ``type``)."""
    if value is None:
        return pa.nulls(1, type)[0]
    if pa.types.is_string(type):
        return string_array([value])[0]
    v = np.array([value], dtype=type.to_pandas_dtype())
    return pa.Array.from_buffers(type, 1, [None, pa.py_buffer(v)])[0]
