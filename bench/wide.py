"""The planted wide study: many patients' binary features (a gene panel's calls) in CSV or Parquet,
for timing ``marg export`` on wide data beside Arrow's own CSV reader and DuckDB.

Run (data goes to bench/out/, which git ignores; delete it afterwards):

    python bench/wide.py generate --rows 1000 --features 20000 --format csv       # wide-1000x20000.csv
    python bench/wide.py generate --rows 3000 --features 3000 --format parquet    # wide-3000x3000.parquet
    python bench/wide.py read-csv FILE                     # pyarrow.csv.read_csv of the file (the baseline)
    python bench/wide.py duckdb FILE                       # one UNPIVOT + GROUP BY (exact first order)
    python bench/wide.py check FILE BUNDLE                 # the bundle's first-order tables equal DuckDB's

The generator is the planted one of bench/dp_select.py: the label is fair, ``--informative``
features equal it with probability 1 − q each, every other feature is a fair coin; the features
are written ``0``/``1``, the label ``neg``/``pos``, with a ``--missing`` fraction of empty cells in
the features (each feature has a missing level). The codebook goes beside the data
(``FILE.codebook.json``). Time whole processes side by side (interleaved), e.g. with
``/usr/bin/time -v`` around ``marg export FILE --schema FILE.codebook.json --stats first ...``
and around ``python bench/wide.py read-csv FILE``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"


def codebook_for(features: int, missing: bool):
    sys.path.insert(0, str(ROOT))
    from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label

    lv = ("0", "1", "missing") if missing else ("0", "1")
    feats = tuple(CategoricalFeature(f"g{i:05d}", lv, missing="missing" if missing else None) for i in range(features))
    return Codebook(features=feats, label=Label("y", ("neg", "pos")))


def planted(rows: int, features: int, informative: int, q: float, missing: float, seed: int):
    """(codes rows × features in {0, 1, 2 = missing} as uint8, labels in {0, 1})."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, rows).astype(np.uint8)
    X = rng.integers(0, 2, (rows, features), dtype=np.uint8)
    k = min(informative, features)
    where = rng.choice(features, k, replace=False)
    flip = rng.random((rows, k)) < q
    X[:, where] = np.where(flip, 1 - y[:, None], y[:, None])
    if missing > 0:
        X[rng.random((rows, features)) < missing] = 2
    return X, y


def write_csv(path: Path, cb, X, y) -> None:
    """Rows of :func:`planted` as CSV: features ``0``/``1``/empty (missing), the label ``neg``/``pos``."""
    cells = np.array(["0", "1", ""])
    labels = np.array(["neg", "pos"])
    with open(path, "w") as fh:
        fh.write(",".join(f.name for f in cb.features) + ",y\n")
        for r in range(len(y)):
            fh.write(",".join(cells[X[r]]) + "," + labels[y[r]] + "\n")


def generate(args) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    X, y = planted(args.rows, args.features, args.informative, args.q, args.missing, args.seed)
    cb = codebook_for(args.features, args.missing > 0)
    name = f"wide-{args.rows}x{args.features}.{args.format}"
    path = OUT / name
    cb.save(OUT / f"{name}.codebook.json")
    if args.format == "csv":
        write_csv(path, cb, X, y)
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        cols = {}
        for i, f in enumerate(cb.features):
            c = X[:, i].astype(np.float64)
            cols[f.name] = pa.array(np.where(c == 2, np.nan, c), mask=(c == 2))
        cols["y"] = pa.array(np.array(["neg", "pos"])[y].tolist())
        pq.write_table(pa.table(cols), path)
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB): {args.rows:,} rows × {args.features:,} features")


def read_csv(args) -> None:
    import pyarrow.csv as pcsv

    t = pcsv.read_csv(args.file)
    print(t.num_rows, t.num_columns)


def duckdb_query(path: str) -> dict[str, list[tuple]]:
    """One UNPIVOT of every feature, then one GROUP BY (feature, value, label): the exact first-order counts."""
    import duckdb

    con = duckdb.connect()
    src = f"read_parquet('{path}')" if path.endswith(".parquet") else f"read_csv('{path}', all_varchar=true)"
    rows = con.execute(f"SELECT name, value, y, count(*) FROM (UNPIVOT {src} ON COLUMNS(* EXCLUDE (y)) INTO NAME name "
                       "VALUE value) GROUP BY ALL").fetchall()
    out: dict[str, list[tuple]] = {}
    for name, value, lab, n in rows:
        out.setdefault(name, []).append((value, lab, n))
    return out


def duckdb_cmd(args) -> None:
    out = duckdb_query(args.file)
    print(len(out))


def check(args) -> None:
    """The bundle's first-order tables (non-missing cells) equal DuckDB's counts (UNPIVOT drops nulls)."""
    sys.path.insert(0, str(ROOT))
    from marg.protocols.bundle import load_bundle

    by = {t.clique: t.counts for t in load_bundle(args.bundle).tables}
    dd = duckdb_query(args.file)
    classes = ["neg", "pos"]
    for name, rows in dd.items():
        got = by[(name, "y")]
        want = np.zeros_like(got)
        for v, lab, n in rows:
            want[int(float(v)), classes.index(lab)] = n
        assert np.array_equal(got[:2], want[:2]), name
    print(f"{len(dd)} first-order tables equal")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate")
    g.add_argument("--rows", type=int, default=1000)
    g.add_argument("--features", type=int, default=20000)
    g.add_argument("--informative", type=int, default=10)
    g.add_argument("--q", type=float, default=0.3)
    g.add_argument("--missing", type=float, default=0.01)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--format", choices=("csv", "parquet"), default="csv")
    g.set_defaults(fn=generate)
    r = sub.add_parser("read-csv")
    r.add_argument("file")
    r.set_defaults(fn=read_csv)
    d = sub.add_parser("duckdb")
    d.add_argument("file")
    d.set_defaults(fn=duckdb_cmd)
    c = sub.add_parser("check")
    c.add_argument("file")
    c.add_argument("bundle")
    c.set_defaults(fn=check)
    args = ap.parse_args()
    args.fn(args)


if __name__ == "__main__":
    main()
