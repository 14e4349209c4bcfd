"""A CSV or Parquet file counted on this machine: streamed, encoded once, counted in blocks.

The file streams through in chunks (peak memory set by the chunk size, not the file size);
a background thread reads and decodes the next chunk (Arrow's readers use every core and
release the GIL) while this one encodes and counts the current one
(:class:`~marg.marginals.counts.counting.TableCounter`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import pyarrow as pa

from ..data.codebook import Codebook
from ..data.encoding import iter_encoded
from ..data.io import column_names, iter_batches, iter_typed_batches, prefetched
from ..counts.counting import TableCounter
from ..counts.tables import MarginalTable
from .base import Source
from marg.errors import InputError


class FileSource(Source):
    """A local CSV/TSV (optionally gzip) or Parquet file."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.name = self.path.name

    def describe(self) -> dict[str, Any]:
        return {"kind": "file", "engine": "local", "file": self.path.name}

    def columns(self) -> list[str]:
        return column_names(self.path)

    def count(self, codebook: Codebook, cliques: Sequence[tuple[str, ...]],
              progress: Callable[[int], None] | None = None) -> tuple[list[MarginalTable], int]:
        counter = TableCounter(codebook, cliques)
        for enc in iter_encoded(self.path, codebook, progress=progress, prefetch=True):
            counter.add_encoded(enc)
        if counter.n_rows == 0:
            raise InputError(f"{self.name} has no data rows")
        return counter.tables(), counter.n_rows

    def row_batches(self, columns: list[str]) -> Iterator[dict[str, pa.Array]]:
        return prefetched(iter_typed_batches(self.path, columns))

    def draft_batches(self, columns: list[str]) -> Iterator[tuple[dict[str, pa.Array], bool]]:
        for batch in iter_batches(self.path, columns):
            yield batch, True
