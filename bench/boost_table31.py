"""The boosting seed's Table 3.1 from rows: LP-Boost and L0-RBoost over monomials, k-fold on five sets.

Run: python bench/boost_table31.py [--sets bcw,vote,clvheart,huheart,sonar] [--reps 10]
     [--K 1,5] [--methods l0,lp] [--budget 120] [--pricing-seconds 20] [--jobs 1] [--out FILE]

Row references (benchmarks only: they see training rows). Each repetition r is a stratified
10-fold split seeded by r (``boost_data.folds``, the folds ``bench/boost_marginals.py``
uses too); on each fold L0-RBoost (ρ = 20/M, κ = 1.5, the seed's setting) and LP-Boost
(ν = 0.56 at K = 1, 0.50 at K = 5, the seed's) are trained on the training rows and scored
on the test rows. Reported per set, method and K: mean accuracy, mean ‖λ‖₀, and how many
fold runs hit the wall-clock ``--budget`` (the LP then is the last one solved, not proven
optimal) or a pricing limit (``--pricing-seconds`` per MMA search: the column added is the
best found), beside the seed's Table 3.1 (20 × 10-fold).

Each fold's result is one JSON line appended to ``--out`` (default
``bench/results/boost_table31.jsonl``); fold runs already there are skipped, so an
interrupted run resumes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE))

import numpy as np  # noqa: E402

from boost_data import SETS, folds, load  # noqa: E402
from boost_ref import l0rboost, lpboost  # noqa: E402
from marg.learners.boost.mma import SearchOptions  # noqa: E402

# Goldberg 2010, Table 3.1 (20 × 10-fold): (accuracy, ‖λ‖₀) per set.
SEED = {
    ("l0", 1): {"bcw": (0.963, 9.1), "vote": (0.950, 6.0), "clvheart": (0.846, 10.3), "huheart": (0.812, 10.4),
                "sonar": (0.712, 7.2)},
    ("l0", 5): {"bcw": (0.950, 9.4), "vote": (0.960, 3.0), "clvheart": (0.833, 38.9), "huheart": (0.807, 27.4),
                "sonar": (0.725, 21.3)},
    ("lp", 1): {"bcw": (0.925, 3.8), "vote": (0.957, 2.0), "clvheart": (0.774, 7.6), "huheart": (0.803, 3.8),
                "sonar": (0.735, 8.6)},
    ("lp", 5): {"bcw": (0.937, 5.5), "vote": (0.957, 2.1), "clvheart": (0.810, 25.3), "huheart": (0.797, 11.2),
                "sonar": (0.734, 30.8)},
}
NAMES = {"l0": "L0-RBoost", "lp": "LP-Boost"}


def run_fold(job: tuple) -> dict:
    name, rep, fold, method, K, budget, pricing_seconds = job
    cb, X, y = load(name)
    tr, te = folds(y, rep)[fold]
    opts = SearchOptions(time_limit=pricing_seconds)
    t0 = time.perf_counter()
    if method == "l0":
        model, st = l0rboost(cb, X[tr], y[tr], rho=20.0 / tr.size, max_order=K, options=opts, budget=budget)
    else:
        model, st = lpboost(cb, X[tr], y[tr], nu=0.56 if K == 1 else 0.50, max_order=K, options=opts, budget=budget)
    acc = float((model.predict(X[te]) == y[te]).mean())
    return {"set": name, "rep": rep, "fold": fold, "method": method, "K": K, "acc": acc, "nnz": model.nnz,
            "iterations": st.iterations, "cuts": st.cuts, "stopped": st.stopped, "certified": st.certified,
            "seconds": round(time.perf_counter() - t0, 2)}


def summarize(rows: list[dict]) -> str:
    out = ["| set | method | K | folds | accuracy | ‖λ‖₀ | seed acc | seed ‖λ‖₀ | budget hit | pricing limit | s/fold "
           "|",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    keys = sorted({(r["set"], r["method"], r["K"]) for r in rows}, key=lambda k: (SETS.index(k[0]), k[1], k[2]))
    for s, m, K in keys:
        rs = [r for r in rows if (r["set"], r["method"], r["K"]) == (s, m, K)]
        sa, sl = SEED[(m, K)][s]
        out.append(f"| {s} | {NAMES[m]} | {K} | {len(rs)} | {np.mean([r['acc'] for r in rs]):.3f} | "
                   f"{np.mean([r['nnz'] for r in rs]):.1f} | {sa:.3f} | {sl} | {sum(r['stopped'] for r in rs)} | "
                   f"{sum(not r['certified'] for r in rs)} | {np.mean([r['seconds'] for r in rs]):.1f} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--first-rep", type=int, default=0)
    ap.add_argument("--K", default="1,5")
    ap.add_argument("--methods", default="l0,lp")
    ap.add_argument("--budget", type=float, default=120.0, help="wall seconds per fold run")
    ap.add_argument("--pricing-seconds", type=float, default=20.0, help="time limit of one MMA search")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", default=str(HERE / "results" / "boost_table31.jsonl"))
    ap.add_argument("--summary-only", action="store_true")
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = []
    if out.exists():
        done = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    seen = {(r["set"], r["rep"], r["fold"], r["method"], r["K"]) for r in done}
    jobs = [(s, rep, f, m, K, a.budget, a.pricing_seconds)
            for rep in range(a.first_rep, a.first_rep + a.reps) for s in a.sets.split(",")
            for K in map(int, a.K.split(",")) for m in a.methods.split(",") for f in range(10)
            if (s, rep, f, m, K) not in seen]
    if not a.summary_only and jobs:
        with ProcessPoolExecutor(a.jobs) as ex, out.open("a") as fh:
            for r in ex.map(run_fold, jobs):
                fh.write(json.dumps(r) + "\n")
                fh.flush()
                done.append(r)
                print(json.dumps(r), file=sys.stderr, flush=True)
    print(summarize(done))


if __name__ == "__main__":
    main()
