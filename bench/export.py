"""Counting speed and memory, side by side in one run: marg's local path, marg's DuckDB
source, and DuckDB GROUP BY queries written directly; plus start-up and many-site aggregation.

Run (data goes to bench/out/, which git ignores; delete it afterwards):

    python bench/export.py generate --rows 10000000 --features 30     # wide.parquet (+ codebook)
    python bench/export.py tables                                      # first order and all pairs
    python bench/export.py cli --stats first --repeat 5                # `marg export` vs DuckDB, fresh processes
                                        [--baseline OTHER/bin/marg]    # ... and another installation's marg beside it
    python bench/export.py csv --gb 5                                  # streamed CSV peak memory
    python bench/export.py startup                                     # marg --help
    python bench/export.py write-child CHILD.py                        # cli's DuckDB side as a script
                                                                       # (bench/cpu_pairs.py)
    python bench/export.py aggregate --sites 1000                      # 1,000 site bundles

The generated table has ``--features`` categorical features with 2–12 levels (seeded),
half stored as text and half as integer codes, and a text label with 2 classes. Every
engine's tables are checked equal (exact integers) before a time is printed. DuckDB runs
with all threads; marg's local path uses a reader thread beside the counting thread.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "bench" / "out"

from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label  # noqa: E402
from marg.marginals.counts.tables import plan_cliques  # noqa: E402


def machine() -> str:
    import duckdb
    import pyarrow

    return (f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
            f"{platform.python_version()}, numpy {np.__version__}, pyarrow {pyarrow.__version__}, duckdb "
            f"{duckdb.__version__}")


def levels_of(features: int, seed: int = 0) -> list[int]:
    return [int(m) for m in np.random.default_rng(seed).integers(2, 13, features)]


def codebook_for(features: int) -> Codebook:
    feats = []
    for i, m in enumerate(levels_of(features)):
        lv = tuple(f"v{k:02d}" for k in range(m)) if i % 2 == 0 else tuple(str(k) for k in range(m))
        feats.append(CategoricalFeature(f"f{i:02d}", lv))
    return Codebook(features=tuple(feats), label=Label("y", ("neg", "pos")))


def generate(args) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    OUT.mkdir(parents=True, exist_ok=True)
    cb = codebook_for(args.features)
    cb.save(OUT / "wide.codebook.json")
    path = OUT / "wide.parquet"
    rng = np.random.default_rng(1)
    writer = None
    block = 1_000_000
    for s in range(0, args.rows, block):
        n = min(block, args.rows - s)
        cols, z = {}, np.zeros(n)
        for i, f in enumerate(cb.features):
            codes = rng.integers(0, f.n_levels, n).astype(np.int32)
            z += codes / f.n_levels
            if i % 2 == 0:
                cols[f.name] = pa.DictionaryArray.from_arrays(pa.array(codes),
                                                              pa.array(list(f.levels))).dictionary_decode()
            else:
                cols[f.name] = pa.array(codes.astype(np.int64))
        y = (z + rng.normal(0, 1, n) > args.features / 2).astype(np.int32)
        cols["y"] = pa.DictionaryArray.from_arrays(pa.array(y), pa.array(["neg", "pos"])).dictionary_decode()
        t = pa.table(cols)
        if writer is None:
            writer = pq.ParquetWriter(path, t.schema)
        writer.write_table(t, row_group_size=block)
    writer.close()
    print(f"wrote {path} ({path.stat().st_size / 1e9:.2f} GB): {args.rows:,} rows × {args.features} features")


def best_of(fn, repeat: int):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def duckdb_direct(path: Path, cb: Codebook, cliques):
    """DuckDB GROUP BY queries as a user writes them: one query per table, all threads."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET disabled_optimizers = 'statistics_propagation'")  # as marg's source (NaN-safe)
    out = []
    for c in cliques:
        cols = ", ".join(f'"{a}"' for a in c)
        rows = con.execute(f"SELECT {cols}, count(*) FROM read_parquet(?) GROUP BY ALL", [str(path)]).fetchall()
        arr = np.zeros(tuple(cb.attribute_size(a) for a in c), dtype=np.int64)
        for r in rows:
            idx = tuple(cb.label.classes.index(v) if a == cb.label.name else cb.feature(a).levels.index(str(v))
                        for a, v in zip(c, r[:-1]))
            arr[idx] = r[-1]
        out.append(arr)
    con.close()
    return out


def tables(args) -> None:
    from marg.protocols.export import count_file

    path = OUT / "wide.parquet"
    cb = Codebook.load(OUT / "wide.codebook.json")
    import pyarrow.parquet as pq

    n = pq.ParquetFile(str(path)).metadata.num_rows
    print(f"# Counting {n:,} rows × {cb.n_features} features (Parquet, {path.stat().st_size / 1e9:.2f} GB), best of "
          f"{args.repeat}")
    print(f"machine: {machine()}\n")
    print("| tables | marg local (s) | marg DuckDB source (s) | DuckDB GROUP BY per table (s) | ratio local / DuckDB "
          "| ratio DuckDB source / DuckDB |")
    print("|---|---|---|---|---|---|")
    first = plan_cliques(cb, "first")
    allc = plan_cliques(cb, "all")
    pairs = [c for c in allc if len(c) == 3]
    for label, cliques, base in (("first order", first, first), ("all pairs", allc, pairs)):
        t_local, (tl, nl) = best_of(lambda: count_file(path, cb, cliques), args.repeat)
        t_src, (ts, ns) = best_of(lambda: count_file(f"duckdb://{path}", cb, cliques), args.repeat)
        t_dd, td = best_of(lambda: duckdb_direct(path, cb, base), 1 if len(base) > 100 else args.repeat)
        assert nl == ns == n
        by = {t.clique: t.counts for t in tl}
        for t in ts:
            assert np.array_equal(by[t.clique], t.counts), t.name
        for c, arr in zip(base, td):
            assert np.array_equal(by[c], arr), c
        what = f"{label} ({len(base)} tables{'; marg also counts the 31 first-order ones' if base is pairs else ''})"
        print(f"| {what} | {t_local:.2f} | {t_src:.2f} | {t_dd:.2f} | {t_local / t_dd:.2f} | {t_src / t_dd:.2f} |",
              flush=True)


DUCKDB_CHILD = """
import json, sys
import duckdb
path, cb = sys.argv[1], json.load(open(sys.argv[2]))
feats, lab = [f["name"] for f in cb["features"]], cb["label"]["name"]
cliques = [[lab]] + [[f, lab] for f in feats]
if sys.argv[3] == "all":
    cliques += [[a, b, lab] for i, a in enumerate(feats) for b in feats[i + 1:]]
con = duckdb.connect()
out = []
for c in cliques:
    cols = ", ".join('"' + a + '"' for a in c)
    rows = con.execute(f"SELECT {cols}, count(*) FROM read_parquet(?) GROUP BY ALL", [path]).fetchall()
    out.append([c, [[str(v) for v in r[:-1]] + [r[-1]] for r in rows]])
json.dump(out, open(sys.argv[4], "w"))
"""


def cli(args) -> None:
    """``marg export FILE`` (the installed console script: start-up, reading, counting, bundle,
    ledger entry) against a fresh Python process that runs DuckDB's GROUP BY queries on the
    same file, one per table (start-up: ``import duckdb``), alternating, ``--repeat`` times.
    The bundle's tables are checked equal to DuckDB's counts before any time is printed.
    ``--baseline``: another installation's ``marg`` (e.g. a virtual environment of an earlier
    commit) runs third in each round, its times and ratio to DuckDB beside."""
    import shutil
    import statistics
    import tempfile

    from marg.protocols.bundle import load_bundle

    path = Path(args.file) if args.file else OUT / "wide.parquet"
    cbp = OUT / "wide.codebook.json"
    cb = Codebook.load(cbp)
    exe = Path(sys.executable).parent / "marg"
    work = Path(tempfile.mkdtemp(prefix="marg-bench-"))
    child = work / "duckdb_child.py"
    child.write_text(DUCKDB_CHILD)
    t_marg, t_dd, t_base = [], [], []
    try:
        for k in range(args.repeat):
            if args.baseline:
                bb, bl = work / f"base{k}.bundle", work / f"base-ledger{k}"
                t0 = time.perf_counter()
                subprocess.run([args.baseline, "export", str(path), "--schema", str(cbp), "--site", "bench", "--stats",
                                args.stats, "--out", str(bb), "--ledger", str(bl)], check=True, capture_output=True)
                t_base.append(time.perf_counter() - t0)
            bundle, ledger, res = work / f"b{k}.bundle", work / f"ledger{k}", work / f"dd{k}.json"
            cmd = [str(exe), "export", str(path), "--schema", str(cbp), "--site", "bench", "--stats", args.stats,
                   "--out", str(bundle), "--ledger", str(ledger)]
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True)
            t_marg.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            subprocess.run([sys.executable, str(child), str(path), str(cbp), args.stats, str(res)], check=True)
            t_dd.append(time.perf_counter() - t0)
            if k == 0:
                by = {t.clique: t.counts for t in load_bundle(bundle).tables}
                dd = json.loads(res.read_text())
                assert len(dd) == len(by)
                for c, rows in dd:
                    arr = np.zeros_like(by[tuple(c)])
                    for r in rows:
                        arr[tuple(cb.label.classes.index(v) if a == cb.label.name else cb.feature(a).levels.index(v)
                                  for a, v in zip(c, r[:-1]))] = r[-1]
                    assert np.array_equal(arr, by[tuple(c)]), c
    finally:
        shutil.rmtree(work, ignore_errors=True)
    import pyarrow.parquet as pq

    n = pq.ParquetFile(str(path)).metadata.num_rows
    ratios = [a / b for a, b in zip(t_marg, t_dd)]
    print(f"# `marg export --stats {args.stats}` vs DuckDB GROUP BY queries, {n:,} rows × {cb.n_features} features, "
          f"fresh processes alternating, {args.repeat} runs (tables checked equal)")
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.1f}")
    print(f"marg export (s): {' '.join(f'{t:.2f}' for t in t_marg)}; median {statistics.median(t_marg):.2f}")
    print(f"DuckDB (s):      {' '.join(f'{t:.2f}' for t in t_dd)}; median {statistics.median(t_dd):.2f}")
    print(f"ratio per run:   {' '.join(f'{r:.2f}' for r in ratios)}; median {statistics.median(ratios):.2f}; "
          f"ratio of medians {statistics.median(t_marg) / statistics.median(t_dd):.2f}")
    if t_base:
        br = [a / b for a, b in zip(t_base, t_dd)]
        print(f"baseline marg (s): {' '.join(f'{t:.2f}' for t in t_base)}; median {statistics.median(t_base):.2f} "
              f"({args.baseline})")
        print(f"baseline / DuckDB per run: {' '.join(f'{r:.2f}' for r in br)}; median {statistics.median(br):.2f}")


def csv_memory(args) -> None:
    """Peak memory (max RSS) of `count_file` on a CSV of about --gb GB, in a child process."""
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    path = OUT / "big.csv"
    target = args.gb * 1e9
    if not path.exists() or path.stat().st_size < 0.95 * target:
        part = pq.ParquetFile(str(OUT / "wide.parquet")).read_row_group(0)
        with open(path, "wb") as fh:
            pcsv.write_csv(part.slice(0, 1), fh)  # header
        head = path.stat().st_size
        buf = pa.BufferOutputStream()
        pcsv.write_csv(part, buf, write_options=pcsv.WriteOptions(include_header=False))
        body = buf.getvalue().to_pybytes()
        with open(path, "ab") as fh:
            written = head
            while written < target:
                fh.write(body)
                written += len(body)
    size = path.stat().st_size
    code = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); from marg.marginals.data.codebook import Codebook; "
            f"from marg.marginals.counts.tables import plan_cliques; from marg.protocols.export import count_file; "
            f"cb = Codebook.load({str(OUT / 'wide.codebook.json')!r}); "
            f"t, n = count_file({str(path)!r}, cb, plan_cliques(cb, {args.stats!r})); import resource; "
            f"print(n, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    dt = time.perf_counter() - t0
    rows, kib = map(int, r.stdout.split())
    rss = kib / 2**20  # ru_maxrss is in KiB on Linux
    print(f"streamed CSV: {size / 1e9:.2f} GB, {rows:,} rows, --stats {args.stats}: {dt:.1f} s, "
          f"peak memory (max RSS) {rss:.2f} GiB")


def startup(args) -> None:
    exe = Path(sys.executable).parent / "marg"
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        subprocess.run([str(exe), "--help"], capture_output=True, check=True)
        times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    bare = time.perf_counter() - t0
    r = subprocess.run([sys.executable, "-X", "importtime", "-c",
                        "import sys; sys.argv=['marg','--help']; from marg.cli.main import main; main()"],
                       capture_output=True, text=True)
    rows = []
    for line in r.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), parts[2].rstrip()))
    top = [r for r in rows if not r[1].startswith("  ")]
    top.sort(reverse=True)
    print(f"marg --help: best {min(times):.3f} s, median {sorted(times)[len(times) // 2]:.3f} s of {args.repeat} "
          f"(bare interpreter {bare:.3f} s)")
    print("largest top-level imports (cumulative µs):", ", ".join(f"{n.strip()} {us:,}" for us, n in top[:6]))


def aggregate(args) -> None:
    """Generate --sites bundles (all pairs of --features features) and aggregate them."""
    from marg.marginals.counts.tables import MarginalTable
    from marg.protocols.bundle import Bundle

    cb = codebook_for(args.features)
    d = OUT / f"sites{args.sites}"
    d.mkdir(parents=True, exist_ok=True)
    cliques = plan_cliques(cb, "all")
    rng = np.random.default_rng(2)
    existing = len(list(d.glob("*.bundle")))
    for k in range(existing, args.sites):
        tabs = [MarginalTable(c, rng.integers(0, 50, tuple(cb.attribute_size(a) for a in c))) for c in cliques]
        (d / f"site{k:04d}.bundle").write_bytes(Bundle.build(cb, tabs, site=f"site{k:04d}", n_rows=None).to_bytes())
    paths = sorted(d.glob("*.bundle"))[: args.sites]
    mb = sum(p.stat().st_size for p in paths) / 1e6
    print(f"# Aggregating {len(paths)} site bundles ({len(cliques)} tables each, {mb:,.0f} MB in all)")
    for mode in ("stream", "load-all"):
        code = (f"import sys, time, json; sys.path.insert(0, {str(ROOT)!r}); from pathlib import Path; "
                f"from marg.protocols.aggregate import summary_from_bundles, summary_from_files; "
                f"from marg.protocols.bundle import load_bundle; "
                f"paths = sorted(Path({str(d)!r}).glob('*.bundle'))[:{args.sites}]; t0 = time.perf_counter(); "
                + ("s = summary_from_files(paths, load_bundle); " if mode == "stream" else
                   "s = summary_from_bundles([load_bundle(p) for p in paths], [str(p) for p in paths]); ")
                + "import resource; print(json.dumps([time.perf_counter() - t0, float(s.tables[-1].counts.sum()), "
                "resource.getrusage(resource.RUSAGE_SELF).ru_maxrss]))")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        dt, check, kib = json.loads(r.stdout)
        print(f"{mode}: {dt:.1f} s, peak memory (max RSS of the process) {kib / 2**10:,.0f} MiB, checksum {check:.0f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate")
    g.add_argument("--rows", type=int, default=10_000_000)
    g.add_argument("--features", type=int, default=30)
    t = sub.add_parser("tables")
    t.add_argument("--repeat", type=int, default=2)
    k = sub.add_parser("cli")
    k.add_argument("--stats", default="first", choices=["first", "all"])
    k.add_argument("--repeat", type=int, default=5)
    k.add_argument("--file", default=None, help="a Parquet file of the generated codebook (default "
                                                "bench/out/wide.parquet)")
    k.add_argument("--baseline", default=None, help="another installation's marg console script, run beside")
    c = sub.add_parser("csv")
    c.add_argument("--gb", type=float, default=5.0)
    c.add_argument("--stats", default="all")
    s = sub.add_parser("startup")
    s.add_argument("--repeat", type=int, default=10)
    a = sub.add_parser("aggregate")
    a.add_argument("--sites", type=int, default=1000)
    a.add_argument("--features", type=int, default=30)
    w = sub.add_parser("write-child", help="write the DuckDB side of `cli` as a script of its own (for whole-process "
                       "pairs: python CHILD FILE CODEBOOK first|all OUT.json, importing duckdb alone)")
    w.add_argument("path")
    args = ap.parse_args()
    if args.cmd == "write-child":
        Path(args.path).write_text(DUCKDB_CHILD)
        return
    {"generate": generate, "tables": tables, "cli": cli, "csv": csv_memory, "startup": startup,
     "aggregate": aggregate}[args.cmd](args)


if __name__ == "__main__":
    main()
