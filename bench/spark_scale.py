"""Spark as a distributed engine (issue 48): first-order tables, a ``--holdout`` count and a privacy-unit
count of N rows × 30 features by ``--engine spark`` against the local path (the file source), side by
side in one run; each measurement a whole process (Spark start-up included), its wall time and the
driver's (this Python process's) peak RSS. The JVM is a child process and is not in the driver's RSS.

    python bench/spark_scale.py --rows 200000 1000000 --master local[2]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def codebook():
    from marg.marginals.codebook import CategoricalFeature, Codebook, Label, NumericFeature

    feats = [CategoricalFeature(f"c{i}", tuple(str(k) for k in range(5))) for i in range(20)]
    feats += [NumericFeature(f"x{i}", edges=(-1.0, 0.0, 1.0), missing=True) for i in range(10)]
    return Codebook(features=tuple(feats), label=Label("y", ("0", "1")))


def make(path: Path, n: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(n)
    writer = None
    for s in range(0, n, 500_000):
        m = min(500_000, n - s)
        cols = {f"c{i}": pa.array(rng.integers(0, 5, m).astype(str)) for i in range(20)}
        for i in range(10):
            x = rng.normal(size=m)
            x[rng.random(m) < 0.02] = np.nan
            cols[f"x{i}"] = pa.array(x)
        cols["y"] = pa.array(rng.integers(0, 2, m).astype(str))
        cols["pid"] = pa.array(rng.integers(0, n // 3, m))
        t = pa.table(cols)
        writer = writer or pq.ParquetWriter(path / "part-0.parquet", t.schema)
        writer.write_table(t, row_group_size=100_000)
    writer.close()


def run(engine: str, task: str, data: str, master: str) -> dict:
    from marg.marginals.holdout import Holdout
    from marg.marginals.privacy_unit import PrivacyUnit, count_rows
    from marg.marginals.sources import open_source
    from marg.marginals.tables import plan_cliques

    cb = codebook()
    t0 = time.perf_counter()
    kw = {"engine": "spark", "spark_master": master} if engine == "spark" else {}
    spec = data if engine == "spark" else str(Path(data) / "part-0.parquet")
    with open_source(spec, **kw) as src:
        cl = plan_cliques(cb, "first")
        if task == "first":
            tables, n = src.count(cb, cl)
        elif task == "holdout":
            tables, n, _, _ = count_rows(src, cb, cl, None, Holdout(0.2), bytes(32))
        else:
            tables, n, _, _ = count_rows(src, cb, cl, PrivacyUnit("pid", 2), None, None)
    import hashlib

    digest = hashlib.blake2b(b"".join(t.counts.astype("<i8").tobytes() for t in tables), digest_size=8).hexdigest()
    return {"wall": time.perf_counter() - t0, "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "n": n, "digest": digest}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, nargs="+", default=[200_000, 1_000_000])
    ap.add_argument("--tasks", nargs="+", default=["first", "holdout", "unit"])
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--one", nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(run(*a.one)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        for n in a.rows:
            d = Path(tmp) / f"n{n}"
            d.mkdir()
            make(d, n)
            for task in a.tasks:
                res = {}
                for engine in ("local", "spark"):  # interleaved, one process each
                    out = subprocess.run([sys.executable, __file__, "--one", engine, task, str(d), a.master],
                                         capture_output=True, text=True, check=True).stdout
                    res[engine] = json.loads(out.strip().splitlines()[-1])
                same = res["local"]["n"] == res["spark"]["n"] and res["local"]["digest"] == res["spark"]["digest"]
                print(f"{n:>10,} rows × 30  {task:8s} local {res['local']['wall']:7.1f} s  spark {res['spark']['wall']:7.1f} s"
                      f"  ratio {res['spark']['wall'] / res['local']['wall']:5.2f}  driver peak RSS local "
                      f"{res['local']['rss_mib']:.0f} MiB spark {res['spark']['rss_mib']:.0f} MiB  same tables: {same}",
                      flush=True)


if __name__ == "__main__":
    main()
