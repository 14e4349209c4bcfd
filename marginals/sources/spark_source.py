"""Spark as the counting engine (``marg export --engine spark``): data beyond one machine.

DATA is a Parquet or CSV path (a file or a folder of part files, on any file system Spark
reaches) or a table name in Spark's catalog. The rows are counted where they are: each
partition encodes its own rows by the local path's value rules
(:func:`~marg.marginals.data.encoding.encode_batch`) and counts every requested table with the
local path's vectorised counter (:class:`~marg.marginals.counts.counting.TableCounter`) on the
executors; only each partition's small arrays come back and are summed. So the counts equal
the local path's, and no row is copied once per table. A Parquet input's tables are counted by
tasks that read their row groups themselves (:mod:`.spark_files`: Spark's JVM reader and its
rows → Arrow conversion were most of the time); a CSV, a catalog table, or files that reader
does not take go through Spark's reader, in a ``mapInArrow``.

The paths that need the rows run in the cluster too, through one primitive,
:meth:`SparkSource.partitions`: a function of a partition's rows runs on the executors and
its small result comes back. A privacy unit's row bound and a holdout by content decide on
groups of rows (a unit's rows; the occurrences of one content), so the rows are first
repartitioned by a key that brings each group together (one shuffle), then every partition
runs the local path's steps on its rows (:func:`~marg.marginals.privacy_unit.partition_counts`):
the same rows kept, the same rows held out, the same tallies, summed here. The site's split
key travels to the executors with the task: they are the site's own cluster. ``--evaluate``
(:func:`~marg.marginals.held_confusion.held_confusion`) runs the same way: each partition predicts its
held-out rows and sends back its K × K matrix; the model travels with the task. The repeat check of
id-like columns (:func:`~marg.marginals.privacy_unit.repeat_counts`) tallies each batch's normalised ids on
the executors and Spark reduces them (:meth:`SparkSource.repeat_tallies`). No marg path reads the rows
in this process: :meth:`SparkSource.row_batches` remains only for the Source interface.

The session is the active one (e.g. under ``spark-submit``), else one built for
``--spark-master``, ``$MARG_SPARK_MASTER`` or ``local[*]``, its Python workers running this
interpreter, its shuffle partitions left to Spark's configuration, its JVMs started with a class-data
archive and the client compiler (:mod:`.spark_start`), its executors' Python workers started at once by a
small job. A Parquet path on this machine is listed here, so its count needs neither a SparkSession nor
Spark's job that reads a footer for the frame's schema (only the SparkContext). A CSV is read as marg reads
it: every cell text, header row, the same missing-value markers. Needs the optional extra
``spark`` (PySpark), a Java runtime, and marg installed where the executors' Python runs.
"""

from __future__ import annotations

import os
import pickle
from dataclasses import replace
from functools import partial
from itertools import islice
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa

from ..data.codebook import Codebook
from ..counts.counting import TableCounter
from ..data.io import NULL_VALUES, _delimiter, _is_parquet, as_text
from ..counts.tables import MarginalTable
from .base import Source, first_line
from .spark_files import _Partition
from marg.errors import InputError

DRAFT_DISTINCT = 10_001
DRAFT_SAMPLE = 200_000
ROW_BATCH = 65_536
SHUFFLE_KEY = "__marg_shuffle_key"


def _arrow(values: Sequence[Any], spark_type: Any) -> pa.Array:
    """One column of Spark rows as an Arrow array (text stays text, numbers numbers)."""
    from pyspark.sql.types import StringType

    return pa.array(list(values), type=pa.string() if isinstance(spark_type, StringType) else None)


def _spark():
    try:
        import pyspark  # noqa: F401
        from pyspark.sql import SparkSession, functions as F
    except ImportError:
        raise InputError("--engine spark needs PySpark: pip install 'marg[spark]'") from None
    return SparkSession, F


def _col(F, name: str):
    """A column by its exact name (backticks quote dots and spaces; inner backticks doubled)."""
    if "\x00" in name:
        raise InputError(f"column name {name!r} contains a NUL byte")
    return F.col("`" + name.replace("`", "``") + "`")


def _partition_tables(rows: _Partition, *, codebook: Codebook, cliques: list) -> dict[str, Any]:
    """One partition's tables (executor side): the local path's encoder and counter over its rows."""
    from ..counts.counting import TableCounter
    from ..data.encoding import encode_batch

    counter = TableCounter(codebook, cliques)
    memo: dict = {}
    for batch in rows.row_batches(codebook.feature_names + [codebook.label.name]):
        counter.add_encoded(encode_batch(codebook, batch, 1, memo=memo, where=rows.where_rows()))
    return {"tables": [t.counts for t in counter.tables()], "n": counter.n_rows}


def _run(batches: Iterator[pa.RecordBatch], *, fn: Callable[[_Partition], Any], keep: bool,
         name: str) -> Iterator[pa.RecordBatch]:
    """Executor side of :meth:`SparkSource.partitions`: ``fn`` of this partition's rows, one row back
    (``part`` its pickled result, or ``error`` the one line of a value the codebook refuses)."""
    schema = pa.schema([("error", pa.string()), ("part", pa.binary())])
    try:
        part = fn(_Partition(list(batches) if keep else batches, name))
    except InputError as exc:
        yield pa.RecordBatch.from_pydict({"error": [str(exc)], "part": [None]}, schema=schema)
        return
    yield pa.RecordBatch.from_pydict({"error": [None], "part": [pickle.dumps(part)]}, schema=schema)


def _keyed(batches: Iterator[pa.RecordBatch], *,
           key: Callable[[pa.RecordBatch], np.ndarray]) -> Iterator[pa.RecordBatch]:
    """Executor side: each batch with its rows' shuffle keys (a batch ``key`` refuses gets 0, and
    its partition's ``fn`` raises the one-line error)."""
    for b in batches:
        try:
            k = np.asarray(key(b), dtype=np.uint64)
        except InputError:
            k = np.zeros(b.num_rows, dtype=np.uint64)
        yield b.append_column(SHUFFLE_KEY, pa.array(k.view(np.int64)))


def _tallied(batches: Iterator[pa.RecordBatch], *, n: int, tally: Callable) -> Iterator[pa.RecordBatch]:
    """Executor side of :meth:`SparkSource.repeat_tallies`: per batch and column ``c`` (the i-th column, named
    ``c{i}``), one row per normalised id ``v`` with its rows ``k``, and one row (``v`` null) with the batch's flags."""
    names = [f"c{i}" for i in range(n)]
    for b in batches:
        if not b.num_rows:
            continue
        out: dict[str, list] = {"c": [], "v": [], "k": [], "fl": [], "num": [], "frac": []}
        for i, (fl, num, frac, ids) in enumerate(tally({c: b.column(c) for c in names}, names).values()):
            out["c"] += [i] * (len(ids) + 1)
            out["v"] += [None, *ids]
            out["k"] += [0, *ids.values()]
            out["fl"] += [fl] * (len(ids) + 1)
            out["num"] += [num] * (len(ids) + 1)
            out["frac"] += [frac] * (len(ids) + 1)
        yield pa.RecordBatch.from_pydict(out, schema=pa.schema([("c", pa.int32()), ("v", pa.string()),
                                                                ("k", pa.int64()),
                                                               ("fl", pa.bool_()), ("num", pa.bool_()),
                                                               ("frac", pa.bool_())]))


class SparkSource(Source):
    """A Parquet/CSV path or a catalog table, counted by Spark."""

    def __init__(self, data: str, master: str | None = None):
        self.data = str(data)
        self.master = master
        p = Path(self.data)
        self.is_path = p.exists() or "://" in self.data
        self.name = f"{p.name if p.exists() else self.data} (read by spark)"
        self._df = None
        self._session = None
        self._sc = None
        self._csv = False

    def describe(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": "spark", "engine": "spark"}
        if self.is_path:
            d["file"] = Path(self.data).name
        else:
            d["table"] = self.data
        if self._sc is not None:
            d["master"] = self._sc.master
        return d

    def _context(self):
        """The SparkContext: the active session's, else one started for ``--spark-master``
        (:func:`~marg.marginals.sources.spark_start.start_context`)."""
        if self._sc is not None:
            return self._sc
        SparkSession, _ = _spark()
        from pyspark import SparkContext

        try:
            active = SparkSession.getActiveSession()
            if active is not None:
                self._session, self._sc = active, active.sparkContext
                return self._sc
            if SparkContext._active_spark_context is not None:
                self._sc = SparkContext._active_spark_context
                return self._sc
            from .spark_start import start_context

            sc = start_context(self.master or os.environ.get("MARG_SPARK_MASTER") or "local[*]")
        except InputError:
            raise
        except Exception as exc:  # noqa: BLE001 - Java missing, master unreachable, …
            raise InputError(f"cannot start Spark: {first_line(exc)}") from None
        self._sc = sc
        return sc

    def _frame(self):
        if self._df is not None:
            return self._df
        SparkSession, F = _spark()
        self._context()
        try:
            spark = self._session or SparkSession.builder.getOrCreate()  # on the context above
        except Exception as exc:  # noqa: BLE001 - Py4J errors
            raise InputError(f"cannot start Spark: {first_line(exc)}") from None
        self._session = spark
        try:
            if not self.is_path:
                df = spark.table(self.data)
            elif _is_parquet(Path(self.data)) or (Path(self.data).is_dir() and any(Path(self.data).rglob("*.parquet"))):
                df = spark.read.parquet(self.data)
            else:
                self._csv = True
                raw = spark.read.csv(self.data, header=True, inferSchema=False, sep=_delimiter(Path(self.data)),
                                     quote='"', escape='"')
                df = raw.select(*[F.when(_col(F, c).isin(NULL_VALUES), None).otherwise(_col(F, c)).alias(c)
                                  for c in raw.columns])
        except Exception as exc:  # noqa: BLE001 - AnalysisException and friends
            what = "table" if not self.is_path else "data"
            raise InputError(f"spark cannot read {what} {self.data!r}: {first_line(exc)}") from None
        self._df = df
        return df

    def columns(self) -> list[str]:
        return list(self._frame().columns)

    def where_rows(self) -> Callable[[int], str]:
        return lambda _k: f"in {self.name}"  # the cluster's rows have no order: the data is named instead

    def count(self, codebook: Codebook, cliques: Sequence[tuple[str, ...]],
              progress: Callable[[int], None] | None = None) -> tuple[list[MarginalTable], int]:
        """The tables of ``cliques``, each partition counting its own rows (module docstring)."""
        columns = codebook.feature_names + [codebook.label.name]
        read = self._read_parquet(codebook, cliques)
        if read is not None:
            sums, n = read
        else:
            sums, n = [t.counts for t in TableCounter(codebook, cliques).tables()], 0
            for part in self.partitions(columns, partial(_partition_tables, codebook=codebook, cliques=list(cliques))):
                for acc, arr in zip(sums, part["tables"]):
                    acc += arr
                n += part["n"]
        if n == 0:
            raise InputError(f"{self.name} has no data rows")
        if progress is not None:
            progress(n)
        return [replace(t, counts=c) for t, c in zip(TableCounter(codebook, cliques).tables(), sums)], n

    def _read_parquet(self, codebook: Codebook, cliques: Sequence[tuple[str, ...]]) -> tuple[list, int] | None:
        """The tables counted by the executors reading the Parquet files' row groups themselves
        (:func:`~marg.marginals.sources.spark_files.count_parquet`), or None: not a Parquet path, or a file
        that reader does not take (then Spark's reader is used)."""
        from .spark_files import count_parquet, local_parquet

        files = local_parquet(self.data)
        if files is None:
            df = self._frame()
            if not self.is_path or self._csv:
                return None
            self.check_columns(codebook.feature_names + [codebook.label.name])
        try:
            if files is None:
                files = df.inputFiles()
            return count_parquet(self._context(), files, codebook, cliques, f"in {self.name}")
        except InputError:
            raise
        except Exception as exc:  # noqa: BLE001 - Py4J / Spark errors
            raise InputError(f"{self.name}: {first_line(exc)}") from None

    def repeat_tallies(self, columns: list[str], tally: Callable) -> dict[str, tuple[int, int, int, bool]]:
        """The repeat check's tallies (:func:`~marg.marginals.privacy_unit.repeat_counts`) counted in the
        cluster: each batch runs ``tally`` (:func:`~marg.marginals.privacy_unit.repeat_tally`, the local path's
        normalisation) on the executors, Spark sums each column's ids over all batches and reduces them per column.

        Returns ``{column: (rows of the largest id, non-empty rows, distinct non-empty ids, floating)}``
        — floating: a float type, or every non-empty value a number and one with a fraction or an exponent.
        """
        from pyspark.sql.types import BooleanType, IntegerType, LongType, StringType, StructField, StructType

        _, F = _spark()
        self.check_columns(columns)
        schema = StructType([StructField("c", IntegerType()), StructField("v", StringType()),
                             StructField("k", LongType()),
                             StructField("fl", BooleanType()), StructField("num", BooleanType()),
                             StructField("frac", BooleanType())])
        ids = F.col("v").isNotNull() & (F.col("v") != "")
        try:
            with warnings.catch_warnings():  # PySpark's pandas-version notice on mapInArrow
                warnings.simplefilter("ignore", FutureWarning)
                df = self._frame().select(*[_col(F, c).alias(f"c{i}") for i, c in enumerate(columns)])
                per_id = (df.mapInArrow(partial(_tallied, n=len(columns), tally=tally), schema).groupBy("c", "v")
                          .agg(F.sum("k").alias("k"), F.bool_or("fl").alias("fl"), F.bool_and("num").alias("num"),
                               F.bool_or("frac").alias("frac")))
                rows = (per_id.groupBy("c").agg(F.max(F.when(ids, F.col("k"))).alias("top"),
                                                F.sum(F.when(ids, F.col("k"))).alias("n"),
                                                F.count(F.when(ids, True)).alias("distinct"),
                                                F.bool_or("fl").alias("fl"), F.bool_and("num").alias("num"),
                                                F.bool_or("frac").alias("frac")).collect())  # one row a column
        except InputError:
            raise
        except Exception as exc:  # noqa: BLE001 - Py4J / Spark errors
            raise InputError(f"{self.name}: {first_line(exc)}") from None
        out = {c: (0, 0, 0, False) for c in columns}
        for r in rows:
            floating = bool(r["fl"]) or (r["num"] is not False and bool(r["frac"]))
            out[columns[r["c"]]] = (int(r["top"] or 0), int(r["n"] or 0), int(r["distinct"]), floating)
        return out

    def partitions(self, columns: list[str], fn: Callable[[Any], Any],
                   key: Callable[[pa.RecordBatch], np.ndarray] | None = None, *, reread: bool = False) -> Iterator[Any]:
        """Run ``fn`` on the executors, once per partition of ``columns``' rows; yield the results here.

        Parameters
        ----------
        fn : callable
            Picklable (a module-level function or its ``partial``); called with the partition's rows
            (``row_batches(columns)``, ``where_rows()``, ``name``), returns a small picklable result.
            An InputError it raises is raised here, its one line unchanged.
        key : callable, optional
            ``key(record_batch) -> (n,) uint64``: the rows are first repartitioned by it, so all rows
            with one key are in one partition (one shuffle).
        reread : bool
            ``fn`` reads its rows more than once (the partition's batches are kept in memory).
        """
        from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

        from .spark_files import local_parquet, run_parquet

        files = local_parquet(self.data)
        if files is not None:
            try:
                parts = run_parquet(self._context(), files, columns, fn, key, reread, self.name)
            except InputError:
                raise
            except Exception as exc:  # noqa: BLE001 - Py4J / Spark errors
                raise InputError(f"{self.name}: {first_line(exc)}") from None
            if parts is not None:
                yield from parts
                return
        _, F = _spark()
        self.check_columns(columns)
        out = StructType([StructField("error", StringType()), StructField("part", BinaryType())])
        try:
            with warnings.catch_warnings():  # PySpark's pandas-version notice on mapInArrow
                warnings.simplefilter("ignore", FutureWarning)
                df = self._frame().select(*[_col(F, c) for c in columns])
                if key is not None:
                    schema = StructType(list(df.schema.fields) + [StructField(SHUFFLE_KEY, LongType())])
                    df = df.mapInArrow(partial(_keyed, key=key), schema).repartition(SHUFFLE_KEY).drop(SHUFFLE_KEY)
                rows = df.mapInArrow(partial(_run, fn=fn, keep=reread, name=self.name),
                                     out).toLocalIterator(prefetchPartitions=True)
                for row in rows:
                    if row["error"] is not None:
                        raise InputError(row["error"])
                    yield pickle.loads(row["part"])  # our executors' result (the site's own cluster)
        except InputError:
            raise
        except Exception as exc:  # noqa: BLE001 - Py4J / Spark errors
            raise InputError(f"{self.name}: {first_line(exc)}") from None

    def _distinct(self, name: str, limit: int | None) -> pa.Array:
        _, F = _spark()
        df = self._frame().select(_col(F, name).alias("v")).distinct()
        if limit is not None:
            df = df.limit(limit)
        return df.toArrow().column("v").combine_chunks()

    def row_batches(self, columns: list[str]) -> Iterator[dict[str, pa.Array]]:
        """The rows, partition by partition, to this process (typed as Spark holds them)."""
        _, F = _spark()
        self.check_columns(columns)
        df = self._frame().select(*[_col(F, c).alias(f"c{i}") for i, c in enumerate(columns)])
        types = [f.dataType for f in df.schema.fields]
        try:
            rows = df.toLocalIterator(prefetchPartitions=True)
            while True:
                chunk = list(islice(rows, ROW_BATCH))
                if not chunk:
                    return
                cols = list(zip(*chunk))
                yield {c: _arrow(cols[i], types[i]) for i, c in enumerate(columns)}
        except InputError:
            raise
        except Exception as exc:  # noqa: BLE001 - Py4J / Spark errors
            raise InputError(f"{self.name}: {first_line(exc)}") from None

    def draft_batches(self, columns: list[str]) -> Iterator[tuple[dict[str, pa.Array], bool]]:
        _, F = _spark()
        self.check_columns(columns)
        for c in columns:
            yield {c: as_text(self._distinct(c, DRAFT_DISTINCT), c)}, False
        df = self._frame().select(*[_col(F, c) for c in columns]).orderBy(F.rand(0)).limit(DRAFT_SAMPLE).toArrow()
        yield {c: as_text(df.column(i).combine_chunks(), c) for i, c in enumerate(columns)}, True

    def close(self) -> None:
        self._df = None  # the session stays up for the process (starting one costs seconds)
