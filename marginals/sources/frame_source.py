"""Rows a notebook holds — a pandas DataFrame, a pyarrow Table or RecordBatch — counted as a file is.

``export_site(df, …)`` (:mod:`protocols.export`) takes a frame as ``marg export`` takes a file:
the frame becomes an Arrow table once (:func:`marginals.data.frames.as_arrow`: pandas by
``pyarrow.Table.from_pandas``, the index dropped), its text columns are dictionary-encoded as a CSV
file's are, and its batches go through the one encoder (:func:`marginals.data.encoding.encode_batch`) and
counter every file goes through, rows numbered from 1. Errors are one line naming the column and the
row, never a value (a frame's ``repr`` holds its rows: it is never put in a message).
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Sequence

import pyarrow as pa

from marg.errors import InputError

from ..data.codebook import Codebook
from ..counts.counting import TableCounter
from ..data.encoding import encode_batch
from ..data.io import as_text
from ..counts.tables import MarginalTable
from .base import Source

BATCH_ROWS = 65_536


def is_frame(data: Any) -> bool:
    """``data`` is rows in memory (a data frame or an Arrow table), not a path or a source."""
    from ..data.frames import is_rows

    return not isinstance(data, (str, bytes)) and not hasattr(data, "__fspath__") and is_rows(data)


class FrameSource(Source):
    """An in-memory table of one site's rows (see the module docstring).

    Parameters
    ----------
    frame : pandas.DataFrame, pyarrow.Table or pyarrow.RecordBatch (or any ``__dataframe__`` frame)
    """

    def __init__(self, frame: Any) -> None:
        from ..data.frames import as_arrow

        self.table: pa.Table = as_arrow(frame)
        self.kind = type(frame).__name__
        self.name = f"the {self.kind}"

    def describe(self) -> dict[str, Any]:
        return {"kind": "frame", "engine": "local", "frame": self.kind}

    def columns(self) -> list[str]:
        return list(self.table.column_names)

    def _batches(self, columns: list[str], dictionary: bool) -> Iterator[dict[str, pa.Array]]:
        have = set(self.table.column_names)
        missing = [c for c in columns if c not in have]
        if missing:
            raise InputError(f"{self.name} has no column {missing[0]!r}"
                             + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
        for rb in self.table.select(columns).to_batches(max_chunksize=BATCH_ROWS):
            out = {}
            for c, a in zip(columns, rb.columns):
                if dictionary and (pa.types.is_string(a.type) or pa.types.is_large_string(a.type)):
                    a = a.dictionary_encode()  # each distinct value encoded once, as a CSV file's columns are
                out[c] = a
            yield out

    def count(self, codebook: Codebook, cliques: Sequence[tuple[str, ...]],
              progress: Callable[[int], None] | None = None) -> tuple[list[MarginalTable], int]:
        counter = TableCounter(codebook, cliques)
        columns = codebook.feature_names + [codebook.label.name]
        row, memo = 1, {}
        for batch in self._batches(columns, dictionary=True):
            try:
                enc = encode_batch(codebook, batch, row, memo=memo)
            except pa.ArrowException as exc:  # never Arrow's text: it may quote a value
                raise InputError(f"{self.name}: the rows from row {row} cannot be read "
                                 f"({type(exc).__name__})") from None
            row += enc.n
            counter.add_encoded(enc)
            if progress is not None:
                progress(row - 1)
        if counter.n_rows == 0:
            raise InputError(f"{self.name} has no data rows")
        return counter.tables(), counter.n_rows

    def row_batches(self, columns: list[str]) -> Iterator[dict[str, pa.Array]]:
        return self._batches(columns, dictionary=True)

    def draft_batches(self, columns: list[str]) -> Iterator[tuple[dict[str, pa.Array], bool]]:
        for batch in self._batches(columns, dictionary=False):
            yield {c: as_text(a, c) for c, a in batch.items()}, True
