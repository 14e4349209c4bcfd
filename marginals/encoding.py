"""Encoding rows into integer codes under a codebook.

A chunk of text columns becomes ``X`` (float64, shape (n, p), codebook feature order:
discrete features as codes 0..m_i−1, raw numeric features as values clipped to their
public range) and ``y`` (int64 class codes, shape (n,)). Any value the codebook does not
allow — an unknown level, a missing value in a feature without a missing level, a NaN or
non-number in a numeric column, a missing or unknown label — is a one-line
:class:`~marginals.errors.InputError` naming the column, the value and the row number
(1-based, counting data rows after the header).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .codebook import CategoricalFeature, Codebook, NumericFeature
from marg.errors import InputError
from .io import DEFAULT_CHUNK_BYTES, iter_batches


@dataclass(frozen=True)
class Encoded:
    """One encoded chunk.

    Attributes
    ----------
    X : ndarray, shape (n, p), float64
        Codes (discrete features) or clipped values (raw numeric), codebook order.
    y : ndarray, shape (n,), int64, or None when the label was not read.
    start_row : int
        1-based data-row number of the chunk's first row.
    """

    X: np.ndarray
    y: np.ndarray | None
    start_row: int

    @property
    def n(self) -> int:
        return int(self.X.shape[0])


def _first_bad(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _strip(arr: pa.Array) -> pa.Array:
    return pc.utf8_trim_whitespace(arr)


def _encode_levels(arr: pa.Array, levels: tuple[str, ...], column: str, start_row: int,
                   missing_code: int | None, what: str) -> np.ndarray:
    arr = _strip(arr)
    idx = pc.index_in(arr, value_set=pa.array(levels, type=pa.string()))
    is_null_in = arr.is_null().to_numpy(zero_copy_only=False)
    idx_np = idx.to_numpy(zero_copy_only=False)  # float with NaN where null
    unknown = np.isnan(idx_np) & ~is_null_in
    if unknown.any():
        k = _first_bad(unknown)
        raise InputError(
            f"column {column!r}: unknown {what} {arr[k].as_py()!r} at row {start_row + k} "
            f"(allowed: {', '.join(levels[:10])}{'…' if len(levels) > 10 else ''})"
        )
    if is_null_in.any():
        if missing_code is None:
            k = _first_bad(is_null_in)
            noun = "label" if what == "class" else "value"
            raise InputError(
                f"column {column!r}: missing {noun} at row {start_row + k}"
                + ("" if what == "class" else " (the codebook gives this feature no missing level)")
            )
        idx_np = np.where(is_null_in, missing_code, idx_np)
    return idx_np.astype(np.int64)


def _parse_float(arr: pa.Array, column: str, start_row: int) -> np.ndarray:
    arr = _strip(arr)
    try:
        vals = pc.cast(arr, pa.float64())
    except pa.ArrowInvalid:
        # Find the first value that is not a number, for the message.
        for k, v in enumerate(arr.to_pylist()):
            if v is None:
                continue
            try:
                float(v)
            except ValueError:
                raise InputError(f"column {column!r}: value {v!r} at row {start_row + k} is not a number") from None
        raise InputError(f"column {column!r}: cannot parse numbers") from None
    return vals.to_numpy(zero_copy_only=False).astype(np.float64)


def encode_feature(f, arr: pa.Array, start_row: int) -> np.ndarray:
    """Encode one feature column (a pyarrow string array) into float64 codes/values."""
    if isinstance(f, CategoricalFeature):
        miss = f.levels.index(f.missing) if f.missing is not None else None
        return _encode_levels(arr, f.levels, f.name, start_row, miss, "level").astype(np.float64)
    assert isinstance(f, NumericFeature)
    v = _parse_float(arr, f.name, start_row)
    nan = np.isnan(v)
    if f.edges is None:
        if nan.any():
            k = _first_bad(nan)
            raise InputError(f"column {f.name!r}: missing or NaN value at row {start_row + k} (raw numeric features need a value)")
        return np.clip(v, f.lo, f.hi)
    codes = np.searchsorted(np.asarray(f.edges), v, side="left").astype(np.float64)
    if nan.any():
        if not f.missing:
            k = _first_bad(nan)
            raise InputError(
                f"column {f.name!r}: missing or NaN value at row {start_row + k} (the codebook gives this feature no missing level)"
            )
        codes[nan] = f.n_levels - 1
    return codes


def encode_batch(codebook: Codebook, batch: dict[str, pa.Array], start_row: int, *, with_label: bool = True) -> Encoded:
    """Encode one chunk ``{column: text array}`` under ``codebook``."""
    cols = [encode_feature(f, batch[f.name], start_row) for f in codebook.features]
    n = len(batch[codebook.features[0].name])
    X = np.column_stack(cols) if cols else np.zeros((n, 0))
    y = None
    if with_label:
        lab = codebook.label
        y = _encode_levels(batch[lab.name], lab.classes, lab.name, start_row, None, "class")
    return Encoded(X=X, y=y, start_row=start_row)


def iter_encoded(
    path: str | Path,
    codebook: Codebook,
    *,
    with_label: bool = True,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    progress: Callable[[int], None] | None = None,
) -> Iterator[Encoded]:
    """Stream a table file as encoded chunks. ``progress(rows_so_far)`` after each chunk."""
    columns = codebook.feature_names + ([codebook.label.name] if with_label else [])
    row = 1
    for batch in iter_batches(path, columns, chunk_bytes=chunk_bytes):
        enc = encode_batch(codebook, batch, row, with_label=with_label)
        row += enc.n
        yield enc
        if progress is not None:
            progress(row - 1)


def encode_file(path: str | Path, codebook: Codebook, *, with_label: bool = True) -> Encoded:
    """Encode a whole file in memory (for prediction and evaluation)."""
    parts = list(iter_encoded(path, codebook, with_label=with_label))
    if not parts:
        p = codebook.n_features
        return Encoded(X=np.zeros((0, p)), y=np.zeros(0, dtype=np.int64) if with_label else None, start_row=1)
    X = np.concatenate([e.X for e in parts], axis=0)
    y = np.concatenate([e.y for e in parts]) if with_label else None
    return Encoded(X=X, y=y, start_row=1)
