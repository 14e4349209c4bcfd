"""Nothing changes in what is released (issue 48): the same exact exports through this marg and
another installation's (an earlier release), from CSV, Parquet, DuckDB, PostgreSQL, Spark and
frames, compared table for table.

Run (data and bundles go to a temporary folder, removed afterwards):

    python bench/release_regress.py --baseline OTHER/bin/marg [--no-postgres] [--no-spark] [--no-frames]

For every source and release option the two console scripts export the same rows
(``marg export DATA --schema CB --site s1 ...``); the bundles must be equal in every header field
but ``created``, ``software``, ``signature`` and ``ledger`` (which name the moment and the
installation), with byte-equal arrays, and the ledger entries' exact-release digests (the
differencing guard's record) equal. Data: a narrow visit table (categorical text with stray
whitespace and missing values, integer codes, binned and raw numbers with NaN and nulls; first
order, every pair, small cells suppressed) and a wide one (200 float-coded binary calls with nulls,
first order: the wide encoder's path). PostgreSQL runs when the tests' helper can start a server
(``tests/helpers/services.py``) and psycopg is installed. Spark: the Parquet file (read by the
executors) and the CSV (Spark's reader) counted by ``--engine spark --spark-master local[2]`` (when
pyspark is installed; a JVM per export, so its cases take minutes). Frames: each installation's own
Python (the console script's folder) calls the notebook API, ``marg.protocols.export.export_site``,
on the Parquet file read as an Arrow table (and as a pandas frame when pandas is installed); a
refusal's message is compared as the CLI's is. Exit status 1 on any difference.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
VOLATILE = {"created", "software", "signature", "ledger"}


def narrow(rng, n: int) -> tuple[pa.Table, dict]:
    age = rng.integers(0, 90, n).astype(float)
    age[rng.random(n) < 0.05] = np.nan
    t = pa.table({
        "color": pa.array(rng.choice(["red", "green", "blue", " red", "blue "], n)),
        "smoke": pa.array([None if r < 0.1 else v for r, v in zip(rng.random(n), rng.choice(["no", "yes"], n))]),
        "code": pa.array(rng.integers(0, 4, n)),
        "age": pa.array([None if r < 0.03 else v for r, v in zip(rng.random(n), age)], type=pa.float64()),
        "bp": pa.array(np.round(rng.uniform(50, 250, n), 3)),
        "y": pa.array(rng.choice(["neg", "pos"], n)),
    })
    cb = {"features": [
        {"name": "color", "type": "categorical", "levels": ["red", "green", "blue"]},
        {"name": "smoke", "type": "categorical", "levels": ["no", "yes", "unknown"], "missing": "unknown"},
        {"name": "code", "type": "categorical", "levels": ["0", "1", "2", "3"]},
        {"name": "age", "type": "numeric", "edges": [30, 60], "missing": True},
        {"name": "bp", "type": "numeric", "lo": 80, "hi": 200},
    ], "label": {"name": "y", "classes": ["neg", "pos"]}}
    return t, cb


def wide(rng, n: int, p: int) -> tuple[pa.Table, dict]:
    cols = {}
    for k in range(p):
        v = rng.integers(0, 2, n).astype(float)
        cols[f"g{k:03d}"] = pa.array(v, mask=rng.random(n) < 0.02)
    cols["y"] = pa.array(rng.choice(["neg", "pos"], n))
    cb = {"features": [{"name": f"g{k:03d}", "type": "categorical", "levels": ["0", "1", "NA"], "missing": "NA"}
                       for k in range(p)], "label": {"name": "y", "classes": ["neg", "pos"]}}
    return pa.table(cols), cb


def codebook_file(spec: dict, path: Path) -> Path:
    sys.path.insert(0, str(ROOT))
    from marg.marginals.data.codebook import Codebook

    Codebook.from_dict({"format": "marg-codebook", "version": 1, **spec}).save(path)
    return path


def pg_load(pg, db: str, table: pa.Table, name: str) -> None:
    import psycopg
    from psycopg import sql

    types = {pa.string(): "text", pa.float64(): "double precision", pa.int64(): "bigint"}
    cols = sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(f.name), sql.SQL(types[f.type]))
                              for f in table.schema)
    with psycopg.connect(pg.uri(db), autocommit=True) as con:
        con.execute(sql.SQL("CREATE TABLE {} ({})").format(sql.Identifier(name), cols))
        ph = sql.SQL(", ").join(sql.Placeholder() * table.num_columns)
        with con.cursor() as cur:
            cur.executemany(sql.SQL("INSERT INTO {} VALUES ({})").format(sql.Identifier(name), ph),
                            list(zip(*[table.column(i).to_pylist() for i in range(table.num_columns)])))


def sources(tmp: Path, name: str, table: pa.Table, pg, spark: bool, frames: bool) -> list[tuple[str, str]]:
    pcsv.write_csv(table, tmp / f"{name}.csv")
    pq.write_table(table, tmp / f"{name}.parquet")
    out = [("csv", str(tmp / f"{name}.csv")), ("parquet", str(tmp / f"{name}.parquet"))]
    try:
        import duckdb
    except ImportError:
        duckdb = None
    if duckdb is not None:
        con = duckdb.connect(str(tmp / f"{name}.db"))
        con.register("frame", table)
        con.execute(f'CREATE TABLE "{name}" AS SELECT * FROM frame')
        con.close()
        out.append(("duckdb", f"duckdb://{tmp}/{name}.db?table={name}"))
    if pg is not None:
        pg_load(pg[0], pg[1], table, name)
        out.append(("postgresql", pg[0].uri(pg[1], table=name)))
    if spark:
        out.append(("spark", f"spark:{tmp / f'{name}.parquet'}"))  # the executors read the row groups
        out.append(("spark csv", f"spark:{tmp / f'{name}.csv'}"))  # Spark's reader, mapInArrow
    if frames:
        out.append(("arrow frame", f"frame:{tmp / f'{name}.parquet'}"))
        try:
            import pandas  # noqa: F401

            out.append(("pandas frame", f"pandas:{tmp / f'{name}.parquet'}"))
        except ImportError:
            print("pandas frames not run: pandas is not installed")
    return out


FRAME_CHILD = r"""
import sys, json
from pathlib import Path
import pyarrow.parquet as pq
from marg.errors import MargError
from marg.marginals.data.codebook import Codebook
from marg.protocols.export import export_site

data, cb, out, ledger, kind, options = sys.argv[1:7]
frame = pq.read_table(data)
if kind == "pandas":
    frame = frame.to_pandas()
try:
    export_site(frame, Codebook.load(cb), "s1", out, ledger_dir=ledger, **json.loads(options))
except MargError as exc:
    print(str(exc), file=sys.stderr)
    raise SystemExit(2)
"""

#: CLI export options as the notebook API's keywords (the options ``main`` uses).
API_OPTIONS = {"--stats": ("stats", str), "--min-cell": ("min_cell", int),
               "--min-cell-policy": ("min_cell_policy", str),
               "--pairs": ("pairs", lambda v: [tuple(p.split(":")) for p in v.split(",")])}


def export(script: str, data: str, cb: Path, out: Path, ledger: Path,
           options: list[str]) -> subprocess.CompletedProcess:
    """One export by ``script`` (a console script), or by its Python's notebook API for a ``frame:`` source."""
    if data.startswith(("frame:", "pandas:")):
        kind, path = data.split(":", 1)
        kw = {API_OPTIONS[k][0]: API_OPTIONS[k][1](v) for k, v in zip(options[::2], options[1::2])}
        return subprocess.run([str(Path(script).parent / "python"), "-c", FRAME_CHILD, path, str(cb), str(out),
                               str(ledger), kind, json.dumps(kw)], capture_output=True, text=True, cwd=out.parent)
    engine = []
    if data.startswith("spark:"):
        data, engine = data.split(":", 1)[1], ["--engine", "spark", "--spark-master", "local[2]"]
    return subprocess.run([script, "export", data, "--schema", str(cb), "--site", "s1", "--out", str(out),
                           "--ledger", str(ledger), *engine, *options], capture_output=True, text=True, cwd=out.parent)


def last_line(stderr: str) -> str:
    """marg's one-line error: the last line of standard error (Spark's JVM logs its own lines before it)."""
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def exact_digests(ledger: Path) -> list:
    return [json.loads(line).get("exact") for line in (ledger / "ledger.jsonl").read_text().splitlines()
            if line.strip()]


def compare(a: Path, b: Path, la: Path, lb: Path) -> str | None:
    sys.path.insert(0, str(ROOT))
    from marg.protocols.bundle import load_bundle

    x, y = load_bundle(a), load_bundle(b)
    hx = {k: v for k, v in x.header.items() if k not in VOLATILE}
    hy = {k: v for k, v in y.header.items() if k not in VOLATILE}
    diff = sorted(k for k in set(hx) | set(hy) if hx.get(k) != hy.get(k))
    if diff:
        return f"header fields differ: {diff}"
    if len(x.arrays) != len(y.arrays) or any(p.dtype != q.dtype or p.tobytes() != q.tobytes()
                                             for p, q in zip(x.arrays, y.arrays)):
        return "arrays differ"
    if exact_digests(la) != exact_digests(lb):
        return "ledger exact digests differ"
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", required=True,
                    help="another installation's marg console script (the earlier release)")
    ap.add_argument("--marg", default=str(Path(sys.executable).parent / "marg"), help="this marg's console script")
    ap.add_argument("--rows", type=int, default=3000)
    ap.add_argument("--no-postgres", action="store_true")
    ap.add_argument("--no-spark", action="store_true", help="skip the Spark cases (a JVM per export)")
    ap.add_argument("--no-frames", action="store_true", help="skip the notebook API's frame cases")
    ap.add_argument("--only", nargs="+", metavar="SOURCE",
                    help="run only these sources (csv, parquet, duckdb, postgresql, spark, 'spark csv', "
                         "'arrow frame', 'pandas frame')")
    args = ap.parse_args(argv)
    spark = not args.no_spark
    if spark:
        try:
            import pyspark  # noqa: F401
        except ImportError:
            print("Spark not run: pyspark is not installed")
            spark = False
    rng = np.random.default_rng(48)
    tmp = Path(tempfile.mkdtemp(prefix="marg-regress-"))
    pg, stop = None, None
    try:
        if not args.no_postgres:
            try:
                import psycopg

                sys.path.insert(0, str(ROOT))
                from tests.helpers.services import start_postgres

                server, stop = start_postgres()
                with psycopg.connect(server.uri(), autocommit=True) as con:
                    con.execute('CREATE DATABASE "regress"')
                pg = (server, "regress")
            except BaseException as exc:  # pytest's skip (no server binaries) is a BaseException
                print(f"PostgreSQL not run: {type(exc).__name__}: {str(exc)[:120]}")
        cases = []
        t, cb = narrow(rng, args.rows)
        cbp = codebook_file(cb, tmp / "narrow.codebook.json")
        for kind, data in sources(tmp, "narrow", t, pg, spark, not args.no_frames):
            cases += [(f"narrow {kind}", data, cbp, opts) for opts in (
                ["--stats", "first", "--min-cell", "1"], ["--stats", "all", "--min-cell", "1"],
                ["--stats", "first", "--min-cell", "120", "--min-cell-policy", "suppress"],  # cells suppressed
                ["--stats", "all", "--min-cell", "40"])]  # refused (a small cell): the same message
        t, cb = wide(rng, 300, 200)
        cbp = codebook_file(cb, tmp / "wide.codebook.json")
        for kind, data in sources(tmp, "wide", t, pg, spark, not args.no_frames):
            cases.append((f"wide {kind}", data, cbp, ["--stats", "first", "--min-cell", "1"]))
            cases.append((f"wide {kind}", data, cbp,
                          ["--pairs", "g000:g001,g010:g150,g199:g005", "--stats", "pairs", "--min-cell", "1"]))
        if args.only:
            cases = [c for c in cases if c[0].split(" ", 1)[1] in args.only]
        bad = 0
        print("| data, source | options | tables | result |\n|---|---|---|---|")
        for k, (what, data, cbp, opts) in enumerate(cases):
            d = tmp / f"case{k}"
            d.mkdir()
            ra = export(args.marg, data, cbp, d / "ours.bundle", d / "ledger-ours", opts)
            rb = export(args.baseline, data, cbp, d / "base.bundle", d / "ledger-base", opts)
            if ra.returncode != 0 or rb.returncode != 0:
                same = ra.returncode == rb.returncode and last_line(ra.stderr) == last_line(rb.stderr)
                res = ("both refused, same message" if same else
                       f"exit {ra.returncode} vs {rb.returncode}: {(ra.stderr or rb.stderr).strip()[-160:]}")
                n_tables = "-"
            else:
                res = compare(d / "ours.bundle", d / "base.bundle", d / "ledger-ours", d / "ledger-base") or "equal"
                from marg.protocols.bundle import load_bundle

                n_tables = str(len(load_bundle(d / "ours.bundle").arrays))
            bad += res not in ("equal", "both refused, same message")
            print(f"| {what} | `{' '.join(opts)}` | {n_tables} | {res} |")
        print(f"\n{len(cases) - bad} of {len(cases)} cases equal")
        return 1 if bad else 0
    finally:
        if stop is not None:
            stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
