"""Spark's executors reading a Parquet input's row groups themselves (the count of ``--engine spark``).

Measured on the tests' 2-worker cluster (BENCHMARKS.md, issue 48 spark3), the cost of counting
through Spark's own reader is the JVM's data path, not marg's work: Parquet pages → rows in the
executor JVM, rows → Arrow for ``mapInArrow``, Arrow → the Python worker, each row's text copied
on the way (dictionary pages lost). So a Parquet input is counted by tasks that each open their
share of the files' row groups with pyarrow — the local path's reader, text columns as
dictionary arrays — and encode and count them with the local path's encoder and
:class:`~marg.marginals.counts.counting.TableCounter`; the partial tables are summed on the executors
(``treeReduce``) and one sum comes to the driver.

The work list is Spark's own listing of the input (``DataFrame.inputFiles``): a slice is a list of
``(file URI, row groups)``; with few files (≤ :data:`FOOTERS`) the driver reads their footers and
splits them by row group, so even one large file keeps every core busy, otherwise by file. A
file that pyarrow cannot open by its URI (a scheme it lacks, e.g. ``s3a://``), or that lacks a
requested column (Spark reads it as nulls; hive-style partition columns are in no file), makes
:func:`count_parquet` return None, and the caller counts through Spark's reader instead.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Iterable, Iterator, Sequence

import pyarrow as pa

from marg.errors import InputError

FOOTERS = 64  # at most this many files: their footers are read here and they are split by row group
SLICES_PER_CORE = 4  # tasks per executor core (a slow worker delays the end by at most one small task)
BATCH_CELLS = 1 << 22  # rows per batch = this / columns read (the local path's Parquet batch)


class _NotHere(Exception):
    """A file this reader does not take (unreachable by pyarrow, a requested column absent)."""


def _open(uri: str):
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    try:
        fs, path = pafs.FileSystem.from_uri(uri)
        return pq.ParquetFile(fs.open_input_file(path)), fs, path
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise _NotHere(str(exc)) from None


def work_slices(files: Sequence[str], cores: int) -> list[list[tuple[str, list[int] | None]]]:
    """The tasks' shares of ``files``: ``[(uri, row groups or None: all)]`` per slice, about
    :data:`SLICES_PER_CORE` × ``cores`` slices of equal row groups (few files) or files (many)."""
    n = max(1, min(SLICES_PER_CORE * cores, 10_000))
    if len(files) > FOOTERS:
        return [[(f, None) for f in files[i::n]] for i in range(min(n, len(files)))]
    units = [(f, g) for f in files for g in range(_open(f)[0].metadata.num_row_groups)]
    n = min(n, len(units)) or 1
    slices = []
    for i in range(n):
        share = units[len(units) * i // n:len(units) * (i + 1) // n]
        by_file: dict[str, list[int]] = {}
        for f, g in share:
            by_file.setdefault(f, []).append(g)
        slices.append(list(by_file.items()))
    return [s for s in slices if s]


def _batches(share: Iterable[tuple[str, list[int] | None]], columns: list[str]) -> Iterator[dict[str, pa.Array]]:
    import pyarrow.parquet as pq

    for uri, groups in share:
        pf, fs, path = _open(uri)
        schema = pf.schema_arrow
        absent = [c for c in columns if schema.get_field_index(c) < 0]
        if absent:
            raise _NotHere(f"column {absent[0]!r} is not in {uri}")
        text = [c for c in columns if pa.types.is_string(schema.field(c).type)
                or pa.types.is_large_string(schema.field(c).type)]
        pf = pq.ParquetFile(fs.open_input_file(path), read_dictionary=text)
        rows = max(4096, BATCH_CELLS // max(1, len(columns)))
        try:
            for b in pf.iter_batches(batch_size=rows, row_groups=groups, columns=columns, use_threads=False):
                yield {c: b.column(c) for c in columns}
        except (OSError, pa.ArrowException) as exc:
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InputError(f"cannot read Parquet file {uri}: {msg}") from None


def _count_share(shares: Iterator[list], *, codebook: Any, cliques: list, where: str) -> Iterator[dict]:
    """Executor side: one task's tables (``{"tables", "n"}``), or ``{"error": line}`` /
    ``{"elsewhere": reason}`` (a file this reader does not take)."""
    from ..counts.counting import TableCounter
    from ..data.encoding import encode_batch

    counter = TableCounter(codebook, cliques)
    memo: dict = {}
    columns = codebook.feature_names + [codebook.label.name]
    try:
        for share in shares:
            for batch in _batches(share, columns):
                try:
                    enc = encode_batch(codebook, batch, 1, memo=memo, where=lambda _k: where)
                except pa.ArrowException as exc:  # invalid UTF-8 in a page: the input, never Arrow's text
                    raise InputError(f"cannot read {where.removeprefix('in ')}: a block is not valid text "
                                     f"({type(exc).__name__})") from None
                counter.add_encoded(enc)
    except InputError as exc:
        yield {"error": str(exc)}
        return
    except _NotHere as exc:
        yield {"elsewhere": str(exc)}
        return
    yield {"tables": [t.counts for t in counter.tables()], "n": counter.n_rows}


def _add(a: dict, b: dict) -> dict:
    """Two tasks' results summed (an error, then a file not taken, wins over tables)."""
    for k in ("error", "elsewhere"):
        if k in a or k in b:
            return a if k in a else b
    return {"tables": [x + y for x, y in zip(a["tables"], b["tables"])], "n": a["n"] + b["n"]}


def count_parquet(sc: Any, files: Sequence[str], codebook: Any, cliques: Sequence[tuple[str, ...]],
                  where: str) -> tuple[list, int] | None:
    """The tables of ``cliques`` over ``files`` (Parquet URIs), counted by the executors' own reads:
    ``([counts arrays in TableCounter's order], rows)``, or None when a file is not for this reader.
    A value the codebook refuses raises its one-line InputError, ``where`` (``"in NAME"``) in place of a row."""
    try:
        slices = work_slices(list(files), sc.defaultParallelism)
    except _NotHere:
        return None
    if not slices:
        return None
    task = partial(_count_share, codebook=codebook, cliques=list(cliques), where=where)
    out = (sc.parallelize(slices, len(slices)).mapPartitions(task)
           .treeReduce(_add, depth=2))
    if "error" in out:
        raise InputError(out["error"])
    if "elsewhere" in out:
        return None
    return out["tables"], out["n"]
