"""Spark as a distributed engine (issue 48): first-order tables, a ``--holdout 0.2`` count and a privacy-unit
count of N rows × 30 features by ``--engine spark`` against the local path (the file source), side by
side in one run; each measurement a whole process (Spark start-up included), local and Spark interleaved.

Memory: the driver's peak RSS is read from ``/proc/self/status`` (VmHWM) — not ``ru_maxrss``, which on
Linux carries the parent's peak across fork and exec (last round's "growth" with the row count was this
script's own data generation, inherited by its children). The Spark driver JVM (a child process) is read
the same way, at the end of the run, and reported beside it.

``--master standalone`` starts the tests' cluster: a master and two workers on 127.0.0.1 from pyspark's
``spark-class`` (one core, 1 GiB each; executors of 512 MiB), stopped by their handles at the end.
Spark runs use marg's JVM class-data archive (marginals/sources/spark_start.py): the first Spark run after an empty
``~/.cache/marg/spark`` writes it at its exit and is slower; repeat a task (``--tasks first first``) to see both.
``--data DIR`` keeps the generated Parquet files (``DIR/n<N>/part-0.parquet``) between runs.

    nice -n 10 python bench/spark_scale.py --rows 1000000 10000000 --master standalone --data /tmp/spark48
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def peak_mib(pid: int | str = "self") -> float:
    """VmHWM (the process's own peak resident memory) in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def codebook():
    from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label, NumericFeature

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
    from marg.marginals.counts.tables import plan_cliques

    cb = codebook()
    t0 = time.perf_counter()
    kw = {"engine": "spark", "spark_master": master} if engine == "spark" else {}
    spec = data if engine == "spark" else str(Path(data) / "part-0.parquet")
    tally: tuple = ()
    with open_source(spec, **kw) as src:
        cl = plan_cliques(cb, "first")
        if task == "first":
            tables, n = src.count(cb, cl)
        elif task == "holdout":
            tables, n, split, _ = count_rows(src, cb, cl, None, Holdout(0.2), bytes(32))
            tally = (split.rows, split.held, split.fingerprint)
        else:
            tables, n, _, bound = count_rows(src, cb, cl, PrivacyUnit("pid", 2), None, None)
            tally = (bound.units, bound.over, bound.dropped, bound.largest)
        wall = time.perf_counter() - t0
        jvm = float("nan")
        if engine == "spark":
            jpid = src._context()._jvm.java.lang.ProcessHandle.current().pid()
            jvm = peak_mib(int(jpid))
    digest = hashlib.blake2b(b"".join(t.counts.astype("<i8").tobytes() for t in tables) + repr(tally).encode(),
                             digest_size=8).hexdigest()
    return {"wall": wall, "rss_mib": peak_mib(), "jvm_mib": jvm, "n": n, "digest": digest}


@contextlib.contextmanager
def standalone(workers: int = 2):
    """The tests' standalone cluster (tests/helpers/services.py: standalone_spark) without a session: its URL."""
    import pyspark

    home = Path(pyspark.__file__).parent
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    cls = [str(home / "bin" / "spark-class")]

    def free() -> int:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    port = free()
    url = f"spark://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="marg-bench-spark-") as work:
        # the runs' sessions as the tests' (tests/helpers/services.py): driver on 127.0.0.1, 1-core 512 MiB executors;
        # given as spark-submit arguments, not a configuration folder: that folder heads the JVMs' class path, and
        # the driver's and the executors' must be one for them to share the class-data archive (spark_jvm.py)
        os.environ.update(SPARK_LOCAL_IP="127.0.0.1", PYSPARK_SUBMIT_ARGS=" ".join(
            f"--conf {k}" for k in ("spark.driver.host=127.0.0.1", "spark.driver.bindAddress=127.0.0.1",
                                    "spark.executor.memory=512m", "spark.executor.cores=1")) + " pyspark-shell")
        procs = [subprocess.Popen(cls + ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port",
                                         str(port), "--webui-port", str(free())], env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)]
        try:
            deadline = time.time() + 120
            while True:
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) == 0:
                        break
                if time.time() > deadline:
                    raise SystemExit("the Spark master did not listen within 120 s")
                time.sleep(0.5)
            for i in range(workers):
                procs.append(subprocess.Popen(
                    cls + ["org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--cores", "1",
                           "--memory", "1g", "--webui-port", str(free()), "--work-dir", f"{work}/w{i}"],
                    env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            time.sleep(15)  # the workers register (a session waits for executors anyway)
            yield url
        finally:
            for p in reversed(procs):
                p.terminate()
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, nargs="+", default=[200_000, 1_000_000])
    ap.add_argument("--tasks", nargs="+", default=["first", "holdout", "unit"])
    ap.add_argument("--master", default="local[2]",
                    help="a Spark master URL, or standalone: the tests' 2-worker cluster")
    ap.add_argument("--data", help="keep the generated files here (reused when present)")
    ap.add_argument("--one", nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print(json.dumps(run(*a.one)))
        return
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a stopped run stops its cluster (the finally below)
    with contextlib.ExitStack() as stack:
        root = Path(a.data) if a.data else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        for n in a.rows:  # every file first: the runs' processes do not inherit the generator's memory
            d = root / f"n{n}"
            if not (d / "part-0.parquet").exists():
                d.mkdir(parents=True, exist_ok=True)
                subprocess.run([sys.executable, "-c",
                                f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
                                f"import spark_scale as s; from pathlib import Path; s.make(Path({str(d)!r}), {n})"],
                               check=True)
        master = stack.enter_context(standalone()) if a.master == "standalone" else a.master
        print(f"master {a.master} ({master}); load average {os.getloadavg()[0]:.1f}", flush=True)
        for n in a.rows:
            d = root / f"n{n}"
            for task in a.tasks:
                res = {}
                for engine in ("local", "spark"):  # interleaved, one process each
                    out = subprocess.run([sys.executable, __file__, "--one", engine, task, str(d), master],
                                         capture_output=True, text=True, check=True).stdout
                    res[engine] = json.loads(out.strip().splitlines()[-1])
                same = res["local"]["n"] == res["spark"]["n"] and res["local"]["digest"] == res["spark"]["digest"]
                print(f"{n:>10,} rows × 30  {task:8s} local {res['local']['wall']:7.1f} s  spark "
                      f"{res['spark']['wall']:7.1f} s  ratio {res['spark']['wall'] / res['local']['wall']:5.2f}  peak "
                      f"RSS local {res['local']['rss_mib']:.0f} MiB, spark driver {res['spark']['rss_mib']:.0f} MiB "
                      f"(its JVM {res['spark']['jvm_mib']:.0f} MiB)  same tables: {same}  load "
                      f"{os.getloadavg()[0]:.1f}",
                      flush=True)


if __name__ == "__main__":
    main()
