"""Where the time of ``--engine spark``'s first-order count goes (issue 48, spark3): the ways of counting the
same Parquet input, one after another in one driver process on one session (its start-up timed once, apart),
beside the local path in the same process. Used to choose the counting path; bench/spark_scale.py measures
the chosen one end to end (whole processes, interleaved).

The context's start is timed first; the session and the frame when a way needs Spark's reader.

Ways (``--ways``, any order, repeats allowed):
  local       the file source (pyarrow reader, local encoder and counter), in this process
  source      SparkSource.count as it stands (the executors read the row groups: spark_files.py)
  partitions  through Spark's reader: SparkSource.partitions (mapInArrow, the local counter per partition)
  arrow       mapInArrow with the local counter, results collected at once (every partition in parallel)
  noop        mapInArrow whose Python does nothing: Spark's reader, rows → Arrow → Python, no counting
  jvmscan     Spark's reader alone: the rows materialised in the JVM (noop writer), no Python
  jvmgroup    one Spark SQL groupBy(value, label).count() per table (numeric bins as SQL), in the JVM

    nice -n 10 python bench/spark_paths.py --rows 10000000 --data /tmp/spark3 --ways local source partitions noop
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import time
from functools import partial
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).parent))
import spark_scale  # noqa: E402


def _noop(batches):
    k = 0
    for b in batches:
        k += b.num_rows
    yield pa.RecordBatch.from_pydict({"n": [k]})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--data", required=True, help="the folder of spark_scale.py's files (n<ROWS>/part-0.parquet)")
    ap.add_argument("--ways", nargs="+", default=["local", "source", "partitions", "arrow", "noop", "jvmscan"])
    ap.add_argument("--master", default="standalone")
    ap.add_argument("--arrow-batch", type=int, default=65536, help="spark.sql.execution.arrow.maxRecordsPerBatch")
    a = ap.parse_args()
    d = Path(a.data) / f"n{a.rows}"
    if not (d / "part-0.parquet").exists():
        d.mkdir(parents=True, exist_ok=True)
        spark_scale.make(d, a.rows)
    if a.master == "standalone":
        with spark_scale.standalone() as url:
            ways(a, d, url)
    else:
        ways(a, d, a.master)


def ways(a, d: Path, master: str) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType, StringType, StructField, StructType

    from marg.marginals.sources import open_source
    from marg.marginals.sources import spark_source as ss
    from marg.marginals.counts.tables import plan_cliques

    cb = spark_scale.codebook()
    cl = plan_cliques(cb, "first")
    cols = cb.feature_names + [cb.label.name]
    t0 = time.perf_counter()
    with open_source(str(d), engine="spark", spark_master=master) as src:
        sc = src._context()  # the context as SparkSource starts it (its JVM options, the workers' warm-up)
        t1 = time.perf_counter()
        print(f"{a.rows:,} rows; context {t1 - t0:.1f} s, cores {sc.defaultParallelism}; load "
              f"{os.getloadavg()[0]:.1f}", flush=True)
        df = None
        for w in a.ways:
            t = time.perf_counter()
            if df is None and w not in ("local", "source"):  # Spark's reader: the session, the frame (a footer job)
                df = src._frame()
                src._session.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(a.arrow_batch))
                print(f"  session and frame {time.perf_counter() - t:.1f} s, Spark's partitions "
                      f"{df.rdd.getNumPartitions()}", flush=True)
                t = time.perf_counter()
            if w == "local":
                with open_source(str(d / "part-0.parquet")) as loc:
                    m = loc.count(cb, cl)[1]
            elif w == "source":
                m = src.count(cb, cl)[1]
            elif w == "partitions":
                m = sum(p["n"] for p in src.partitions(cols,
                                                       partial(ss._partition_tables, codebook=cb, cliques=list(cl))))
            elif w == "arrow":
                out = StructType([StructField("error", StringType()), StructField("part", BinaryType())])
                fn = partial(ss._partition_tables, codebook=cb, cliques=list(cl))
                r = df.select(*cols).mapInArrow(partial(ss._run, fn=fn, keep=False, name="x"), out).collect()
                m = sum(pickle.loads(x.part)["n"] for x in r)
            elif w == "noop":
                m = sum(x.n for x in df.select(*cols).mapInArrow(_noop, "n long").collect())
            elif w == "jvmscan":
                df.select(*cols).write.format("noop").mode("overwrite").save()
                m = -1
            elif w == "jvmgroup":
                m = 0
                for f in cb.features:
                    if f.is_discrete and getattr(f, "edges", None) is not None:
                        x = F.col(f.name)
                        code = sum((x > e).cast("int") for e in f.edges)
                        v = F.when(x.isNull() | F.isnan(x), len(f.edges) + 1).otherwise(code)
                    else:
                        v = F.col(f.name)
                    m = sum(r["count"] for r in df.groupBy(v.alias("v"), "y").count().collect())
            else:
                raise SystemExit(f"unknown way {w!r}")
            print(f"  {w:11s} {time.perf_counter() - t:7.1f} s  rows {m:,}  load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
