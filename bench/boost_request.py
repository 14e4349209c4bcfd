"""Order-3 rules through the request protocol: boost on pairs vs boost after ``marg request --learner boost``.

Run: python bench/boost_request.py [--sets conj,vote,clvheart] [--folds 10] [--tables 10] [--time-limit 60] [--out FILE]

On each fold of ``boost_data.folds`` (rep 0; ``conj`` is a synthetic set: six binary features,
y = x0 AND x1 AND x2 with 3% of labels flipped, 3,000 rows, folds by the same function) the
training rows are counted into first-order and all pair tables; boost (s = 0) is fitted at
order 2; :func:`marg.learners.boost.request.rank_cliques` ranks the triples by their bound
(what ``marg request --learner boost --max-order 3`` computes) and the top ``--tables`` are
"released" (counted from the same training rows); boost is fitted again at order 3 on all
the tables. Reported: accuracy at order 2 and 3 on the test rows, the rules (and how many of
order 3), the tables that qualified and were requested, seconds for the request and the fit.
One JSON line per fold appended to ``--out`` (finished folds are skipped).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE))

import numpy as np  # noqa: E402

from boost_data import folds, load  # noqa: E402
from marg.learners.boost.request import rank_cliques  # noqa: E402
from marg.learners.boost.vote import BoostVote  # noqa: E402
from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label  # noqa: E402
from marg.marginals.summary import Summary  # noqa: E402


def conjunction(n: int = 3000, seed: int = 0):
    rng = np.random.default_rng(seed)
    cb = Codebook(tuple(CategoricalFeature(f"x{i}", ("no", "yes")) for i in range(6)), Label("y", ("neg", "pos")))
    X = rng.integers(0, 2, size=(n, 6))
    y = (X[:, 0] & X[:, 1] & X[:, 2]).astype(np.int64)
    return cb, X, np.where(rng.random(n) < 0.03, 1 - y, y)


def run_fold(name: str, fold: int, tables: int, time_limit: float) -> dict:
    cb, X, y = conjunction() if name == "conj" else load(name)
    tr, te = folds(y, 0)[fold]
    S2 = Summary.from_rows(cb, X[tr], y[tr], stats="all")
    t0 = time.perf_counter()
    m2 = BoostVote(s=0.0, time_limit=time_limit).fit(S2)
    t1 = time.perf_counter()
    ranked = rank_cliques(BoostVote(s=0.0, max_order=3, time_limit=time_limit), S2)
    t2 = time.perf_counter()
    chosen = [b.clique for b in ranked[:tables]]
    pairs = list(itertools.combinations(cb.discrete_names, 2)) + chosen
    S3 = Summary.from_rows(cb, X[tr], y[tr], stats="pairs", pairs=pairs)
    m3 = BoostVote(s=0.0, max_order=3, time_limit=time_limit).fit(S3)
    t3 = time.perf_counter()
    Xt = X[te].astype(float)
    return {"set": name, "fold": fold, "acc2": float(np.mean(m2.predict(Xt) == y[te])),
            "acc3": float(np.mean(m3.predict(Xt) == y[te])), "rules2": int(m2.map_.dim), "rules3": int(m3.map_.dim),
            "order3_rules": sum(1 for m in m3.map_.monomials if len(m) == 3), "qualified": len(ranked),
            "requested": [list(c) for c in chosen], "fit2_s": round(t1 - t0, 2), "request_s": round(t2 - t1, 2),
            "fit3_s": round(t3 - t2, 2), "rules": [f"{r['weight']:+.3f} {r['class']}: {r['rule']}" for r in m3.rules()]}


def summarize(rows: list[dict]) -> str:
    lines = ["| set | folds | acc order 2 | acc order 3 | rules (2 → 3) | order-3 rules | triples qualified | "
             "requested | request s | fit s (3) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for s in dict.fromkeys(r["set"] for r in rows):
        rs = [r for r in rows if r["set"] == s]
        m = lambda k: float(np.mean([r[k] for r in rs]))  # noqa: E731
        lines.append(f"| {s} | {len(rs)} | {m('acc2'):.3f} | {m('acc3'):.3f} | {m('rules2'):.1f} → {m('rules3'):.1f} | "
                     f"{m('order3_rules'):.1f} | {m('qualified'):.0f} | "
                     f"{np.mean([len(r['requested']) for r in rs]):.0f} | {m('request_s'):.1f} | {m('fit3_s'):.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="conj,vote,clvheart")
    ap.add_argument("--folds", type=int, default=10)
    ap.add_argument("--tables", type=int, default=10, help="triples requested per fold (marg request --max-tables)")
    ap.add_argument("--time-limit", type=float, default=60.0, help="seconds per boost fit")
    ap.add_argument("--out", default=str(HERE / "results" / "boost_request.jsonl"))
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = [json.loads(x) for x in out.read_text().splitlines() if x.strip()] if out.exists() else []
    seen = {(r["set"], r["fold"]) for r in done}
    with out.open("a") as fh:
        for s in a.sets.split(","):
            for f in range(a.folds):
                if (s, f) in seen:
                    continue
                r = run_fold(s, f, a.tables, a.time_limit)
                fh.write(json.dumps(r) + "\n")
                fh.flush()
                print(json.dumps({k: v for k, v in r.items() if k not in ("rules", "requested")}), file=sys.stderr,
                      flush=True)
                done.append(r)
    print(summarize([r for r in done if r["set"] in a.sets.split(",")]))


if __name__ == "__main__":
    main()
