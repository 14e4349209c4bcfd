"""Spark's executors reading a Parquet input's row groups themselves (the count of ``--engine spark``).

Measured on the tests' 2-worker cluster (BENCHMARKS.md, issue 48 spark3), the cost of counting
through Spark's own reader is the JVM's data path, not marg's work: Parquet pages → rows in the
executor JVM, rows → Arrow for ``mapInArrow``, Arrow → the Python worker, each row's text copied
on the way (dictionary pages lost). So a Parquet input is counted by tasks that each open their
share of the files' row groups with pyarrow — the local path's reader, text columns as
dictionary arrays — and encode and count them with the local path's encoder and
:class:`~marg.marginals.counts.counting.TableCounter`; the partial tables are summed on the executors
(``treeReduce``) and one sum comes to the driver.

The work list is the input's files: a path on this machine listed here as Spark lists it
(:func:`local_parquet`, no Spark job), else Spark's own listing (``DataFrame.inputFiles``); a slice is a list of
``(file URI, row groups)``; with few files (≤ :data:`FOOTERS`) the driver reads their footers and
splits them by row group, so even one large file keeps every core busy, otherwise by file. A
file that pyarrow cannot open by its URI (a scheme it lacks, e.g. ``s3a://``), or that lacks a
requested column (Spark reads it as nulls; hive-style partition columns are in no file), makes
:func:`count_parquet` return None, and the caller counts through Spark's reader instead.
"""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import pyarrow as pa

from marg.errors import InputError

FOOTERS = 64  # at most this many files: their footers are read here and they are split by row group
SLICES_PER_CORE = 4  # tasks per executor core (a slow worker delays the end by at most one small task)
BATCH_CELLS = 1 << 22  # rows per batch = this / columns read (the local path's Parquet batch)
SHUFFLE_PER_CORE = 16  # partitions after a shuffle by key, per executor core (each held in a worker's memory)


class _NotHere(Exception):
    """A file this reader does not take (unreachable by pyarrow, a requested column absent)."""


class _Partition:
    """A partition's Arrow record batches as the rows of a source (what
    :func:`~marg.marginals.privacy_unit.bounded_batches` reads)."""

    def __init__(self, batches: Iterable[pa.RecordBatch], name: str):
        self.batches, self.name = batches, name

    def check_columns(self, wanted: Sequence[str]) -> None:  # the driver checked them on the frame
        pass

    def where_rows(self) -> Callable[[int], str]:
        return lambda _k: f"in {self.name}"  # a partition's rows have no order in the source

    def row_batches(self, columns: list[str]) -> Iterator[dict[str, pa.Array]]:
        for b in self.batches:
            if b.num_rows:
                yield {c: b.column(c) for c in columns}


def _open(uri: str):
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    try:
        fs, path = pafs.FileSystem.from_uri(uri)
        return pq.ParquetFile(fs.open_input_file(path)), fs, path
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise _NotHere(str(exc)) from None


def local_parquet(data: str) -> list[str] | None:
    """``data`` as Spark lists a Parquet path on this machine (file URIs, hidden and ``_`` names skipped), read
    here without a Spark job; None when Spark's own listing decides: a URI, a catalog table, CSV, a folder
    with sub-folders that are not hive-style partitions (``key=value``)."""
    if "://" in data:
        return None
    p = Path(data)
    if p.is_file():
        from ..data.io import _is_parquet

        return [p.resolve().as_uri()] if _is_parquet(p) else None
    if not p.is_dir():
        return None
    files: list[Path] = []
    for root, dirs, names in os.walk(p):
        dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")))
        if any("=" not in d for d in dirs):
            return None
        files += [Path(root, n) for n in sorted(names) if not n.startswith(("_", "."))]
    if not any(f.suffix == ".parquet" for f in files):
        return None
    return [f.resolve().as_uri() for f in files]


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


def _slices(sc: Any, files: Sequence[str]) -> list | None:
    """The tasks' shares (:func:`work_slices`) for the context's cores, or None: no file, or one not for this reader."""
    try:
        return work_slices(list(files), sc.defaultParallelism) or None
    except _NotHere:
        return None


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
    slices = _slices(sc, files)
    if slices is None:
        return None
    task = partial(_count_share, codebook=codebook, cliques=list(cliques), where=where)
    out = (sc.parallelize(slices, len(slices)).mapPartitions(task)
           .treeReduce(_add, depth=2))
    if "error" in out:
        raise InputError(out["error"])
    if "elsewhere" in out:
        return None
    return out["tables"], out["n"]


def _ipc(batch: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as w:
        w.write_batch(batch)
    return sink.getvalue().to_pybytes()


def _keyed_blobs(shares: Iterator[list], *, columns: list[str], key: Callable, parts: int) -> Iterator[tuple]:
    """Executor side of :func:`run_parquet`'s shuffle: this task's rows split by ``key(batch) % parts``, each
    piece as ``(part, ("rows", Arrow IPC bytes))``; a file not taken or an unreadable one, ``(0, (tag, line))``."""
    import numpy as np

    try:
        for share in shares:
            for batch in _batches(share, columns):
                rb = pa.RecordBatch.from_pydict(batch)
                try:
                    k = np.asarray(key(rb), dtype=np.uint64)
                except InputError:  # the partition's own function raises the one line
                    k = np.zeros(rb.num_rows, dtype=np.uint64)
                p = (k % np.uint64(parts)).astype(np.int64)
                order = np.argsort(p, kind="stable")
                bounds = np.searchsorted(p[order], np.arange(parts + 1))
                rb = rb.take(pa.array(order))
                for i in range(parts):
                    if bounds[i + 1] > bounds[i]:
                        yield i, ("rows", _ipc(rb.slice(bounds[i], bounds[i + 1] - bounds[i])))
    except InputError as exc:
        yield 0, ("error", str(exc))
    except _NotHere as exc:
        yield 0, ("elsewhere", str(exc))


def _rows_of(blobs: list[bytes]) -> list[pa.RecordBatch]:
    """A partition's pieces as batches of about :data:`BATCH_CELLS` cells (text dictionaries unified)."""
    if not blobs:
        return []
    table = pa.Table.from_batches([pa.ipc.open_stream(b).read_next_batch() for b in blobs])
    table = table.unify_dictionaries().combine_chunks()
    return table.to_batches(max_chunksize=max(4096, BATCH_CELLS // max(1, table.num_columns)))


def _run_part(items: Iterator, *, fn: Callable, keep: bool, name: str, columns: list[str] | None) -> Iterator[dict]:
    """Executor side of :func:`run_parquet`: ``fn`` of this partition's rows, ``{"part": result}``, or
    ``{"error": line}`` / ``{"elsewhere": reason}``. The items are the shuffle's pieces, or (``columns``
    given) this task's share of the files, read here."""
    try:
        if columns is None:
            blobs = []
            for _, (tag, value) in items:
                if tag != "rows":
                    yield {tag: value}
                    return
                blobs.append(value)
            batches: Iterable = _rows_of(blobs)
        else:
            read = (pa.RecordBatch.from_pydict(b) for share in items for b in _batches(share, columns))
            batches = list(read) if keep else read
        yield {"part": fn(_Partition(batches, name))}
    except InputError as exc:
        yield {"error": str(exc)}
    except _NotHere as exc:
        yield {"elsewhere": str(exc)}


def run_parquet(sc: Any, files: Sequence[str], columns: list[str], fn: Callable, key: Callable | None, keep: bool,
                name: str) -> list | None:
    """``fn`` of each partition of ``files``' rows (Parquet URIs), run on the executors, the rows read there
    with pyarrow (no Spark reader, no JVM rows): with ``key``, the tasks first send each piece of rows to the
    partition ``key % partitions`` (Spark's shuffle moves Arrow bytes), so the rows of one key are in one
    partition; without, each task's share is a partition. The results (``fn``'s, a list), or None when a
    file is not for this reader. An InputError ``fn`` (or a file) raises is raised here, its line unchanged."""
    slices = _slices(sc, files)
    if slices is None:
        return None
    rdd = sc.parallelize(slices, len(slices))
    if key is None:
        out = rdd.mapPartitions(partial(_run_part, fn=fn, keep=keep, name=name, columns=columns)).collect()
    else:
        parts = SHUFFLE_PER_CORE * max(1, sc.defaultParallelism)
        out = (rdd.mapPartitions(partial(_keyed_blobs, columns=columns, key=key, parts=parts))
               .partitionBy(parts).mapPartitions(partial(_run_part, fn=fn, keep=keep, name=name, columns=None))
               .collect())
    for r in out:
        if "error" in r:
            raise InputError(r["error"])
    if any("elsewhere" in r for r in out):
        return None
    return [r["part"] for r in out]
