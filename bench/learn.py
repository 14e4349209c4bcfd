"""Fit time and test error of marg's learners vs scikit-learn's LogisticRegression.

Run: python bench/learn.py [--splits 5]

On kr-vs-kp and adult (codebook drafted by `marg schema init`'s drafting code: categorical
levels as seen, 4 quantile bins for numeric columns), random 70/30 splits. marg's learners
are fitted from a Summary of the training rows (first order + all pairs with the label);
the baseline is a non-private LogisticRegression trained on the one-hot encoded training
rows themselves. Time = summary already built → fitted model (the learner's work); the
time to count the tables is reported separately.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from marg.learners.mrc import MRC  # noqa: E402
from marg.learners.renyi import RenyiClassifier  # noqa: E402
from marg.marginals.draft import draft_codebook  # noqa: E402
from marg.marginals.encoding import encode_file  # noqa: E402
from marg.marginals.summary import Summary  # noqa: E402

DATASETS = Path(os.environ.get("MARG_DATASETS", ROOT.parent / "shared" / "datasets"))
SETS = {"kr-vs-kp": "kr-vs-kp/kr-vs-kp.tsv.gz", "adult": "adult/adult.tsv.gz"}


def onehot(cb, X):
    return np.hstack([np.eye(f.n_levels)[X[:, i].astype(int)] for i, f in enumerate(cb.features)])


def main() -> None:
    from sklearn.linear_model import LogisticRegression

    ap = argparse.ArgumentParser()
    ap.add_argument("--splits", type=int, default=5)
    args = ap.parse_args()
    print(f"# Learners vs LogisticRegression ({args.splits} random 70/30 splits; mean ± std)")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}\n")
    print("| dataset | n | features | count tables (s) | learner | fit time (s) | test error % | certificate |")
    print("|---|---|---|---|---|---|---|---|")
    for name, rel in SETS.items():
        path = DATASETS / rel
        cb = draft_codebook(path, "target")
        enc = encode_file(path, cb)
        X, y = enc.X, enc.y
        n = len(y)
        res: dict[str, dict[str, list]] = {k: {"t": [], "e": [], "c": []} for k in ("mrc", "renyi", "logreg")}
        t_count = []
        for seed in range(args.splits):
            idx = np.random.default_rng(seed).permutation(n)
            tr, te = idx[: int(0.7 * n)], idx[int(0.7 * n):]
            t0 = time.perf_counter()
            s = Summary.from_rows(cb, X[tr], y[tr], stats="all")
            t_count.append(time.perf_counter() - t0)
            for key, est in (("mrc", MRC()), ("renyi", RenyiClassifier())):
                t0 = time.perf_counter()
                est.fit(s)
                res[key]["t"].append(time.perf_counter() - t0)
                res[key]["e"].append(np.mean(est.predict(X[te]) != y[te]))
                res[key]["c"].append(est.worst_case_error_)
            Z = onehot(cb, X)
            t0 = time.perf_counter()
            lr = LogisticRegression(max_iter=2000).fit(Z[tr], y[tr])
            res["logreg"]["t"].append(time.perf_counter() - t0)
            res["logreg"]["e"].append(np.mean(lr.predict(Z[te]) != y[te]))
        for key, label in (("mrc", "marg MRC (from summaries)"), ("renyi", "marg Rényi (from summaries)"),
                           ("logreg", "sklearn LogisticRegression (raw rows)")):
            r = res[key]
            cert = f"{np.mean(r['c']):.3f}" if r["c"] else "—"
            print(f"| {name} | {n:,} | {cb.n_features} | {np.mean(t_count):.3f} | {label} | {np.mean(r['t']):.3f} ± {np.std(r['t']):.3f} "
                  f"| {100 * np.mean(r['e']):.2f} ± {100 * np.std(r['e']):.2f} | {cert} |")


if __name__ == "__main__":
    main()
