"""Encoding rows into integer codes under a codebook: a chunk, a file's stream of chunks, a whole file.

The rules a value is coded by (and refused by) are :mod:`.column_codes`' (one column through
its distinct values); a chunk is encoded all columns at once by :mod:`.batch_codes` with the
same codes and errors. This module is where rows become :class:`Encoded` chunks: from a batch
of columns (:func:`encode_batch`), a file streamed in chunks (:func:`iter_encoded`) or a whole
file in memory (:func:`encode_file`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa

from marg.errors import InputError

from .batch_codes import encoder_for
from .codebook import Codebook, code_dtype
from .column_codes import (MISSING, UNKNOWN, Dictionary, Encoded, at_row, check_codes, check_label, distinct,
                           encode_label, encode_part, label_codes, value_codes)
from .io import iter_typed_batches, prefetched

def encode_batch(codebook: Codebook, batch: dict[str, pa.Array], start_row: int, *, with_label: bool = True,
                 memo: dict | None = None, where: Callable[[int], str] | None = None) -> Encoded:
    """Encode one chunk ``{column: array}`` under ``codebook`` (features in codebook order);
    ``memo``: a dict kept across the chunks of one file (it keeps the file's
    :class:`~marg.marginals.data.batch_codes.BatchEncoder`: levels and lookup tables made once, codes
    of unchanged distinct values reused); ``where`` says where a refused value is (default: its
    row number; a database's rows have none). The codes and errors are those of
    :func:`encode_part` on each column in codebook order, then :func:`encode_label`."""
    return encoder_for(memo, codebook, with_label).encode(batch, start_row, memo, where)


def iter_encoded(
    path: str | Path,
    codebook: Codebook,
    *,
    with_label: bool = True,
    chunk_bytes: int | None = None,
    progress: Callable[[int], None] | None = None,
    prefetch: bool = False,
) -> Iterator[Encoded]:
    """Stream a table file as encoded chunks. ``progress(rows_so_far)`` after each chunk.

    ``prefetch`` reads (and decodes) the next chunk in a background thread while the
    caller works on this one.
    """
    columns = codebook.feature_names + ([codebook.label.name] if with_label else [])
    row = 1
    batches = iter_typed_batches(path, columns, chunk_bytes=chunk_bytes)
    if prefetch:
        batches = prefetched(batches)
    memo: dict = {}
    for batch in batches:
        try:
            enc = encode_batch(codebook, batch, row, with_label=with_label, memo=memo)
        except pa.ArrowException as exc:  # a corrupted file's text (invalid UTF-8 in a Parquet page): one line that
            # names the block, never Arrow's text (it may quote a value)
            raise InputError(f"cannot read {path}: the block from row {row} is not valid text "
                             f"({type(exc).__name__})") from None
        row += enc.n
        yield enc
        if progress is not None:
            progress(row - 1)


def encode_file(path: str | Path, codebook: Codebook, *, with_label: bool = True) -> Encoded:
    """Encode a whole file in memory (for prediction and evaluation)."""
    parts = list(iter_encoded(path, codebook, with_label=with_label))
    if not parts:
        cols = tuple(np.zeros(0, dtype=code_dtype(f.n_levels) if f.is_discrete else np.float64)
                     for f in codebook.features)
        return Encoded(cols, np.zeros(0, dtype=np.int64) if with_label else None, 1, 0)
    cols = tuple(np.concatenate([e.column(i) for e in parts]) for i in range(codebook.n_features))
    y = np.concatenate([e.y for e in parts]) if with_label else None
    return Encoded(cols, y, 1)


__all__ = ["MISSING", "UNKNOWN", "Dictionary", "Encoded", "at_row", "check_codes", "check_label", "distinct",
           "encode_batch", "encode_file", "encode_label", "encode_part", "iter_encoded", "label_codes", "value_codes"]
