"""Export throughput on UCI adult: marg's counting vs a pandas groupby baseline.

Run: python bench/export.py [--repeat 3]

Both sides compute the same tables from the same file with the same codebook (drafted
with `marg schema init`): first order (N[y], N[x_i, y]) and all pairs with the label
(N[x_i, x_j, y]). Two measurements each:
- end to end: read the gzip TSV, encode under the codebook, count;
- counting only: from the already-encoded integer codes in memory.
The two sides' tables are checked equal before any timing is reported.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from marg.marginals.draft import draft_codebook  # noqa: E402
from marg.marginals.encoding import encode_file  # noqa: E402
from marg.marginals.tables import count_tables, plan_cliques  # noqa: E402
from marg.protocols.export import count_file  # noqa: E402

DATA = Path(os.environ.get("MARG_DATASETS", ROOT.parent / "shared" / "datasets")) / "adult" / "adult.tsv.gz"


def pandas_codes(df: pd.DataFrame, cb) -> pd.DataFrame:
    out = {}
    for f in cb.features:
        col = df[f.name]
        if f.kind == "categorical":
            out[f.name] = pd.Categorical(col.astype(str), categories=list(f.levels)).codes
        else:
            out[f.name] = np.searchsorted(np.asarray(f.edges), col.to_numpy(dtype=float), side="left")
    out[cb.label.name] = pd.Categorical(df[cb.label.name].astype(str), categories=list(cb.label.classes)).codes
    return pd.DataFrame(out)


def pandas_tables(codes: pd.DataFrame, cb, cliques):
    res = []
    for c in cliques:
        g = codes.groupby(list(c), observed=True).size()
        arr = np.zeros(tuple(cb.attribute_size(a) for a in c), dtype=np.int64)
        idx = g.index.to_frame().to_numpy().T if len(c) > 1 else [g.index.to_numpy()]
        arr[tuple(idx)] = g.to_numpy()
        res.append(arr)
    return res


def best_of(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if not DATA.exists():
        sys.exit(f"dataset not found: {DATA}")
    cb = draft_codebook(DATA, "target")
    enc = encode_file(DATA, cb)
    n = enc.n
    print(f"# Export throughput on adult ({n:,} rows, {cb.n_features} features)")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"numpy {np.__version__}, pandas {pd.__version__}\n")
    print("| tables | cells | marg end-to-end rows/s | pandas end-to-end rows/s | speed-up | marg count-only rows/s | pandas groupby count-only rows/s | speed-up |")
    print("|---|---|---|---|---|---|---|---|")
    for stats in ("first", "all"):
        cliques = plan_cliques(cb, stats)
        ours_e2e, (tabs, _) = best_of(lambda: count_file(DATA, cb, cliques), args.repeat)

        def pandas_e2e():
            df = pd.read_csv(DATA, sep="\t")
            return pandas_tables(pandas_codes(df, cb), cb, cliques)

        base_e2e, ptabs = best_of(pandas_e2e, args.repeat)
        for t, p in zip(tabs, ptabs):
            assert np.array_equal(t.counts, p), f"tables differ at {t.name}"
        ours_cnt, _ = best_of(lambda: count_tables(cb, enc.X, enc.y, cliques), args.repeat)
        codes = pandas_codes(pd.read_csv(DATA, sep="\t"), cb)
        base_cnt, _ = best_of(lambda: pandas_tables(codes, cb, cliques), args.repeat)
        cells = sum(t.counts.size for t in tabs)
        label = "first order" if stats == "first" else "first + all pairs with label"
        print(f"| {label} ({len(cliques)} tables) | {cells:,} | {n / ours_e2e:,.0f} | {n / base_e2e:,.0f} | {base_e2e / ours_e2e:.1f}× "
              f"| {n / ours_cnt:,.0f} | {n / base_cnt:,.0f} | {base_cnt / ours_cnt:.1f}× |")


if __name__ == "__main__":
    main()
