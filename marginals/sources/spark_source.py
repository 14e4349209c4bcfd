"""Spark as the counting engine (``marg export --engine spark``): data beyond one machine.

DATA is a Parquet or CSV path (a file or a folder of part files, on any file system Spark
reaches) or a table name in Spark's catalog. The same grouped aggregation as the SQL
sources (:mod:`~marg.marginals.sources.grouped`) runs as one DataFrame ``groupingSets``
over the cluster; only the groups come back, and their values are encoded by the local
path's rules, so the counts equal the local path's bit for bit.

The session is the active one (e.g. under ``spark-submit``), else one built for
``--spark-master``, ``$MARG_SPARK_MASTER`` or ``local[*]``. A CSV is read as marg reads
it: every cell text, header row, the same missing-value markers. A numeric value that
cannot be read as a number is reported, with the value, in one line. Needs the optional
extra ``spark`` (PySpark) and a Java runtime.
"""

from __future__ import annotations

import os
from itertools import islice
import warnings
from pathlib import Path
from typing import Any, Iterator, Sequence

import pyarrow as pa

from ..codebook import Codebook
from ..encoding import MISSING, UNKNOWN, check_codes, distinct, value_codes
from ..io import NULL_VALUES, _delimiter, _is_parquet, as_text
from .base import first_line
from .grouped import GroupPlan, GroupedSource
from marg.errors import InputError

DRAFT_DISTINCT = 10_001
DRAFT_SAMPLE = 200_000
ROW_BATCH = 65_536


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


class SparkSource(GroupedSource):
    """A Parquet/CSV path or a catalog table, counted by Spark."""

    def __init__(self, data: str, master: str | None = None):
        self.data = str(data)
        self.master = master
        p = Path(self.data)
        self.is_path = p.exists() or "://" in self.data
        self.name = f"{p.name if p.exists() else self.data} (read by spark)"
        self._df = None
        self._session = None

    def describe(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": "spark", "engine": "spark"}
        if self.is_path:
            d["file"] = Path(self.data).name
        else:
            d["table"] = self.data
        if self._session is not None:
            d["master"] = self._session.sparkContext.master
        return d

    def _frame(self):
        if self._df is not None:
            return self._df
        SparkSession, F = _spark()
        try:
            spark = SparkSession.getActiveSession()
            if spark is None:
                master = self.master or os.environ.get("MARG_SPARK_MASTER") or "local[*]"
                spark = (SparkSession.builder.master(master).appName("marg export")
                         .config("spark.ui.enabled", "false")
                         .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "8").getOrCreate())
                spark.sparkContext.setLogLevel("ERROR")
        except Exception as exc:  # noqa: BLE001 - Java missing, master unreachable, …
            raise InputError(f"cannot start Spark: {first_line(exc)}") from None
        self._session = spark
        try:
            if not self.is_path:
                df = spark.table(self.data)
            elif _is_parquet(Path(self.data)) or (Path(self.data).is_dir() and any(Path(self.data).glob("*.parquet"))):
                df = spark.read.parquet(self.data)
            else:
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

    def _number(self, F, df, name: str):
        c = _col(F, name)
        if dict(df.dtypes)[name] == "string":
            return F.trim(c).try_cast("double")
        return c.try_cast("double")

    def grouped(self, codebook: Codebook, plan: GroupPlan) -> pa.Table:
        _, F = _spark()
        df = self._frame()
        exprs = []
        for q, key in enumerate(plan.keys):
            if not key.binned:
                exprs.append(_col(F, key.column).alias(f"k{q}"))
                continue
            f = codebook.feature(key.attr)
            raw, v = _col(F, f.name), self._number(F, df, f.name)
            e = F.when(raw.isNull() | F.isnan(v), F.lit(f.n_levels - 1 if f.missing else MISSING))
            e = e.when(v.isNull(), F.lit(UNKNOWN))
            for k, edge in enumerate(f.edges or ()):
                e = e.when(v <= F.lit(float(edge)), F.lit(k))
            exprs.append(e.otherwise(F.lit(len(f.edges or ()))).alias(f"k{q}"))
        for r, name in enumerate(plan.moments):
            f = codebook.feature(name)
            raw, v = _col(F, name), self._number(F, df, name)
            clipped = F.least(F.greatest(v, F.lit(float(f.lo))), F.lit(float(f.hi)))
            exprs.append(F.when(raw.isNull() | v.isNull() | F.isnan(v), None).otherwise(clipped).alias(f"m{r}"))
        enc = df.select(*exprs)
        keys = [F.col(f"k{q}") for q in range(len(plan.keys))]
        aggs = [F.grouping(f"k{q}").alias(f"g{q}") for q in range(len(plan.keys))] + [F.count(F.lit(1)).alias("n")]
        for r in range(len(plan.moments)):
            m = F.col(f"m{r}")
            aggs += [F.sum(m).alias(f"s{r}"), F.sum(m * m).alias(f"ss{r}"),
                     F.sum(F.when(m.isNull(), 1).otherwise(0)).alias(f"z{r}")]
        sets = [[keys[k] for k in s] for s in plan.sets]
        try:
            with warnings.catch_warnings():  # PySpark's pandas-version notice on toArrow
                warnings.simplefilter("ignore", FutureWarning)
                result = enc.groupingSets(sets, *keys).agg(*aggs).toArrow()
        except Exception as exc:  # noqa: BLE001 - Py4J / Spark errors
            raise InputError(f"{self.name}: {first_line(exc)}") from None
        for q, key in enumerate(plan.keys):
            if key.binned and UNKNOWN in result.column(f"k{q}").to_pylist():
                self._diagnose(codebook.feature(key.attr))
        return result

    def _diagnose(self, f) -> None:
        """Raise the one-line error naming a value of ``f`` that is not a number."""
        values = self._distinct(f.name, None)
        v, index, _ = distinct(values)
        codes, text = value_codes(f, v)
        check_codes(f, codes, text, index, 1, lambda _k: f"in {self.name}")
        raise InputError(f"column {f.name!r}: a value in {self.name} is not a number")

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
