"""Rows as a notebook holds them — a data frame, an Arrow table, a file — coded under a codebook.

A model predicts from integer codes (one column per codebook feature, in codebook order);
a site holds its rows as values. :func:`feature_codes` and :func:`label_codes_of` take
either and return codes, through the same encoder as ``marg export``
(:func:`marg.marginals.data.encoding.encode_batch`): an unknown level is one InputError line
naming the column, the value and the row (rows counted from 1).

Accepted rows (:func:`as_arrow`):

- a ``pyarrow.Table`` or ``pyarrow.RecordBatch``;
- a pandas DataFrame (pandas is not a dependency: it is recognised by duck typing and
  converted with ``pyarrow.Table.from_pandas``, the index dropped), or any other data frame
  implementing the interchange protocol (``__dataframe__``: polars, modin, …);
- a path (``str`` or ``os.PathLike``) to a CSV/TSV (optionally gzipped) or Parquet file,
  read as ``marg export`` reads it;
- for :func:`feature_codes` only, integer codes: a numeric array of shape (n, d) with d
  the codebook's feature count, passed through unchanged.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pyarrow as pa

from marg.errors import InputError

from .codebook import Codebook
from .encoding import Encoded, encode_batch, encode_file
from .value_text import canonical_levels, canonical_value


def is_rows(obj: Any) -> bool:
    """``obj`` is rows of values (a table, a data frame or a file), not an array of codes."""
    return (isinstance(obj, (pa.Table, pa.RecordBatch, str, os.PathLike)) or _is_pandas(obj)
            or hasattr(obj, "__dataframe__"))


def _is_pandas(obj: Any) -> bool:
    return type(obj).__module__.split(".")[0] == "pandas" and hasattr(obj, "columns") and hasattr(obj, "iloc")


def as_arrow(rows: Any) -> pa.Table:
    """An in-memory table of values as an Arrow table (files are read by :func:`encode_rows`).

    Raises
    ------
    InputError
        ``rows`` is none of the accepted kinds (named by its type).
    """
    if isinstance(rows, pa.Table):
        return rows
    if isinstance(rows, pa.RecordBatch):
        return pa.Table.from_batches([rows])
    if _is_pandas(rows):
        try:
            return pa.Table.from_pandas(rows, preserve_index=False)
        except (pa.ArrowException, TypeError, ValueError) as exc:
            raise InputError("cannot read the data frame as a table: "
                             f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    if hasattr(rows, "__dataframe__"):
        from pyarrow.interchange import from_dataframe

        return from_dataframe(rows)
    raise InputError("rows must be a data frame, a pyarrow Table, a file path or an array of codes; got "
                     f"{type(rows).__name__}")


def encode_rows(rows: Any, codebook: Codebook, *, with_label: bool) -> Encoded:
    """Code ``rows`` (see the module docstring) under ``codebook``; the label too when ``with_label``.

    Columns other than the codebook's are ignored; a missing one is an InputError naming it.
    """
    if isinstance(rows, (str, os.PathLike)):
        return encode_file(rows, codebook, with_label=with_label)
    table = as_arrow(rows)
    names = codebook.feature_names + ([codebook.label.name] if with_label else [])
    have = set(table.column_names)
    missing = [c for c in names if c not in have]
    if missing:
        cols = ", ".join(table.column_names[:12]) + ("…" if len(table.column_names) > 12 else "")
        raise InputError(f"column {missing[0]!r} is absent from the rows (columns: {cols})")
    batch = {c: table.column(c).combine_chunks() for c in names}
    if table.num_rows == 0:
        raise InputError("the rows are empty (0 rows)")
    return encode_batch(codebook, batch, 1, with_label=with_label)


def feature_codes(X: Any, codebook: Codebook) -> np.ndarray:
    """Codes (n, d) of ``X``: rows of values encoded under ``codebook``, or an array of codes as given.

    Parameters
    ----------
    X : data frame, pyarrow Table, file path, or array-like of numbers (n, d)
        d = ``codebook.n_features`` for codes.
    """
    if is_rows(X):
        return encode_rows(X, codebook, with_label=False).X
    arr = np.asarray(X)
    if arr.dtype.kind not in "biuf":
        raise InputError(f"codes must be numbers (got an array of {arr.dtype}); give rows of values as a data frame, "
                         "a pyarrow Table or a file")
    if arr.ndim != 2 or arr.shape[1] != codebook.n_features:
        raise InputError(f"codes must have shape (n, {codebook.n_features}) (one column per codebook feature), got "
                         f"{arr.shape}")
    return arr


def label_codes_of(y: Any, codebook: Codebook) -> np.ndarray:
    """Class codes (n,) of labels given as class names or as codes 0..K−1 (an unknown one is
    an InputError naming it and its row, counted from 1). Names are compared as their canonical
    text (:mod:`.value_text`): a float label 1.0 is class ``"1"``. An integer array is codes."""
    classes = list(codebook.label.classes)
    if isinstance(y, (pa.Array, pa.ChunkedArray)):
        y = y.to_pylist()
    elif hasattr(y, "to_numpy"):  # a pandas Series
        y = y.to_numpy()
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise InputError(f"labels must be one-dimensional, got shape {arr.shape}")
    if arr.dtype.kind in "biu":
        bad = np.flatnonzero((arr < 0) | (arr >= len(classes)))
        if bad.size:
            raise InputError(f"label code {int(arr[bad[0]])} at row {int(bad[0]) + 1} is not a class code "
                             f"0..{len(classes) - 1}")
        return arr.astype(np.int64)
    index = {c: k for k, c in enumerate(canonical_levels(tuple(classes), "the label"))}
    out = np.empty(len(arr), dtype=np.int64)
    for r, v in enumerate(arr.tolist()):
        k = index.get(canonical_value(v))
        if k is None:
            raise InputError(f"the label at row {r + 1} is not a class of {codebook.label.name!r} (not shown: a "
                             f"patient's value; classes: {', '.join(classes)})")
        out[r] = k
    return out


__all__ = ["as_arrow", "encode_rows", "feature_codes", "is_rows", "label_codes_of"]
