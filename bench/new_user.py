"""A new user's path, timed: fresh install → demo → check and export from every typed source through an SFTP drop →
learn → model card.

What a hospital's data engineer and a researcher do on their first day, each step a command
of the installed ``marg`` run as a subprocess and timed (wall clock):

1. ``python3.11 -m venv`` + ``pip install .`` (the core), then the source and remote extras
   (``pip install ".[duckdb,postgres,spark,remote]"``);
2. ``marg demo``;
3. adult (48,842 rows, float columns written ``39.0``) split into five sites, one per source,
   each **typed** as the engine reads it: the CSV as written, Parquet with Arrow's inferred
   types (doubles), DuckDB's own CSV types, PostgreSQL ``double precision``/``bigint`` (a
   throw-away cluster, if the server binaries are there) and Spark local mode on a typed
   Parquet file (if ``java`` is there); an OpenSSH server on 127.0.0.1 (the tests' helper,
   if ``sshd`` is there) is the SFTP drop between the sites and the learner;
4. ``marg schema init`` on the CSV site, then the study checklist: ``marg schema check`` at
   every site, the draft flag removed; keys for every site and the learner (the learner's in
   ``$MARG_HOME/keys``, so models are signed by default), then per site ``marg export
   --dry-run`` and ``marg export --epsilon 1`` signed and sealed, ``--out sftp://…/SITE.bundle``;
5. ``marg learn`` (the default automatic choice) from the ``sftp://`` bundles, the model
   written to the drop;
6. ``marg report`` (the model card) of the drop's model, verified against the learner's key.

Run (about 5-10 minutes on 2 cores, most of it pip and Spark's start-up)::

    nice -n 10 python3.11 bench/new_user.py [--workdir /tmp/marg-new-user] [--keep]

Prints one line per step (seconds) and a Markdown table for BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import gzip
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ADULT = Path(os.environ.get("MARG_DATASETS", ROOT.parent.parent / "shared" / "datasets")) / "adult" / "adult.tsv.gz"
SITES = ("csv", "parquet", "duckdb", "postgres", "spark")


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


class Timer:
    def __init__(self, work: Path, env: dict[str, str]):
        self.work, self.env, self.rows = work, env, []

    def run(self, label: str, *cmd: object, check: bool = True) -> subprocess.CompletedProcess:
        t0 = time.perf_counter()
        r = subprocess.run([str(c) for c in cmd], cwd=self.work, env=self.env, capture_output=True, text=True)
        dt = time.perf_counter() - t0
        if check and r.returncode != 0:
            sys.exit(f"{label} failed ({r.returncode}): {r.stderr.strip()[-2000:]}")
        self.rows.append((label, dt, r.returncode))
        print(f"{dt:8.2f} s  {label}", flush=True)
        return r


def split_adult(work: Path, n_sites: int) -> list[Path]:
    """adult's rows dealt round-robin to n sites, each a CSV (with the header)."""
    with gzip.open(ADULT, "rt") as fh:
        header, *rows = fh.read().splitlines()
    out = []
    for k in range(n_sites):
        p = work / f"site{k}.csv"
        p.write_text("\n".join([header.replace("\t", ","), *(r.replace("\t", ",") for r in rows[k::n_sites])]) + "\n")
        out.append(p)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/marg-new-user"))
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    ap.add_argument("--installed", action="store_true",
                    help="skip the install steps: use the marg beside this Python (to check the script)")
    args = ap.parse_args()
    work = args.workdir
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    home = work / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MARG_")}
    env.update(MARG_HOME=str(home), MARG_SPARK_MASTER="local[2]")
    t = Timer(work, env)
    venv = work / "venv"
    if args.installed:
        venv = Path(sys.executable).parent.parent
    else:
        t.run("python3.11 -m venv", sys.executable, "-m", "venv", venv)
        t.run("pip install . (core)", venv / "bin" / "pip", "install", "-q", str(ROOT))
        t.run("pip install .[duckdb,postgres,spark,remote] (sources, SFTP/S3)", venv / "bin" / "pip", "install", "-q",
              f"{ROOT}[duckdb,postgres,spark,remote]")
    marg = venv / "bin" / "marg"
    t.run("marg --version", marg, "--version")
    t.run("marg demo", marg, "demo", "--dir", work / "demo")

    csvs = split_adult(work, len(SITES))
    sources: dict[str, str] = {"csv": str(csvs[0])}
    py = venv / "bin" / "python"
    # typed, as each engine reads a CSV: Arrow infers doubles for adult's "39.0" (read back as 39)
    conv = "import pyarrow.csv as c, pyarrow.parquet as q, sys; q.write_table(c.read_csv(sys.argv[1]), sys.argv[2])"
    t.run("prepare: site 2 as typed Parquet", py, "-c", conv, csvs[1], work / "site1.parquet")
    sources["parquet"] = str(work / "site1.parquet")
    t.run("prepare: site 3 into DuckDB (its own types)", py, "-c",
          "import duckdb, sys; duckdb.connect(sys.argv[2]).execute(f\"CREATE TABLE adult AS SELECT * FROM "
          "read_csv('{sys.argv[1]}')\")",
          csvs[2], work / "site2.duckdb")
    sources["duckdb"] = f"duckdb://{work / 'site2.duckdb'}?table=adult"
    sys.path.insert(0, str(ROOT))
    from tests.helpers import services

    stop_pg = stop_sftp = None
    try:
        pg, stop_pg = services.start_postgres()
        load_pg = work / "load_pg.py"
        load_pg.write_text(
            "import sys, psycopg, pyarrow.csv as c\n"
            "t = c.read_csv(sys.argv[2])\n"
            "kinds = {'double': 'double precision', 'int64': 'bigint'}\n"
            "with psycopg.connect(sys.argv[1]) as con:\n"
            "    con.execute('CREATE TABLE adult (' + ', '.join(f'\"{f.name}\" {kinds.get(str(f.type), \"text\")}' "
            "for f in t.schema) + ')')\n    with con.cursor().copy('COPY adult FROM STDIN WITH (FORMAT csv, HEADER "
            "true)') as cp:\n        cp.write(open(sys.argv[2], 'rb').read())\n")
        t.run("prepare: site 4 into PostgreSQL (double precision, bigint)", py, load_pg, pg.uri(), csvs[3])
        sources["postgres"] = pg.uri(table="adult")
    except BaseException as exc:  # noqa: BLE001 - a missing server is reported, not fatal
        print(f"   PostgreSQL not started: {exc}", flush=True)
    if shutil.which("java"):
        sources["spark"] = str(work / "site4.parquet")
        t.run("prepare: site 5 as typed Parquet for Spark", py, "-c", conv, csvs[4], work / "site4.parquet")
    drop = None
    try:
        sftp, stop_sftp = services.start_sftp()
        env.update(sftp.env())
        drop = sftp.url
        print(f"   SFTP drop: {drop('')}", flush=True)
    except BaseException as exc:  # noqa: BLE001 - a missing server is reported, not fatal
        print(f"   SFTP drop not started (bundles stay local): {exc}", flush=True)

    def where(name: str) -> object:
        return drop(name) if drop is not None else work / name

    schema = work / "codebook.json"
    t.run("marg schema init (CSV site)", marg, "schema", "init", csvs[0], "--label", "target", "--out", schema)
    for name, src in sources.items():
        t.run(f"marg schema check ({name} site)", marg, "schema", "check", src, "--schema", schema,
              *(["--engine", "spark"] if name == "spark" else []))
    import json as _json

    d = _json.loads(schema.read_text())
    d.pop("draft", None)  # reviewed, and every site fits: the checklist's step 3
    schema.write_text(_json.dumps(d, indent=2))
    t.run("marg keys init (learner, in $MARG_HOME/keys)", marg, "keys", "init", "--site", "learner", "--role",
          "learner", "--dir", home / "keys")
    bundles = []
    for name, src in sources.items():
        t.run(f"marg keys init ({name} site)", marg, "keys", "init", "--site", name, "--dir", work / "keys")
        t.run(f"marg keys trust ({name})", marg, "keys", "trust", work / "keys" / f"{name}.sign.pub", "--trust",
              work / "trust")
        out = where(f"{name}.bundle")
        common = ["export", src, "--schema", schema, "--site", name, "--epsilon", "1",
                  "--key", work / "keys" / f"{name}.sign.key", "--to", home / "keys" / "learner.seal.pub",
                  "--ledger", work / f"ledger-{name}"]
        if name == "spark":
            common += ["--engine", "spark"]
        t.run(f"marg export --dry-run ({name})", marg, *common, "--out", work / f"{name}.bundle", "--dry-run")
        t.run(f"marg export --epsilon 1 ({name}) → {'SFTP drop' if drop else 'file'}", marg, *common, "--out", out)
        bundles.append(out)
    if stop_pg is not None:
        stop_pg()
    shutil.copy(home / "keys" / "learner.sign.pub", work / "trust" / "learner.sign.pub")
    model = where("model.json")
    r = t.run(f"marg learn (auto, signed by default) from the {'SFTP drop' if drop else 'files'}", marg, "learn",
              *bundles,
              "--out", model, "--trust", work / "trust", "--key", home / "keys" / "learner.seal.key")
    print("   " + "\n   ".join(r.stdout.strip().splitlines()[:3]), flush=True)
    t.run("marg report (model card of the drop's model, signature verified)", marg, "report", model, "--out",
          work / "card.html", "--trust", work / "trust", "--schema", schema, "--data", csvs[0])
    if stop_sftp is not None:
        stop_sftp()
    total = sum(dt for _, dt, _ in t.rows)
    print(f"\nmachine: {machine()}; sources: {', '.join(sources)}; drop: {'sftp' if drop else 'none'}; total "
          f"{total:.1f} s\n")
    print("| step | wall time (s) |\n|---|---:|")
    for label, dt, _ in t.rows:
        print(f"| {label} | {dt:.2f} |")
    print(f"| **total** | **{total:.1f}** |")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
