"""The planted study's automatic choice, split-run by split-run (issue 34: why it sometimes takes a DCC that errs
badly).

Run: MARG_DATASETS=/work/shared/datasets nice -n 10 python bench/planted_choice.py
     [--splits 0,1,2,3,4] [--runs 3] [--jsonl FILE]

Each run is one pass of the DP default (select, then measure; ε = 1 per site, δ = 1e-6) on a split of
bench/dp_select.py's planted study (three sites × 1,000, 3,000 binary features, 10 informative, Bayes
error 0.100, 2,000 test patients), in process through bench/select_measure.py's :func:`rounds` — the
steps of the console path. OpenDP's noise is not seeded, so each run of a split is a fresh draw.

Per run it logs (one JSON line each with ``--jsonl``; a table row on stdout):

- what round 2 measured: the first-order tables (how many of them informative), the pairs and among
  how many features, the pooled noise std per cell of a first-order and of a pair table;
- for every candidate of the study's choice (``STUDY_CHOICE``, plus the prior): its leave-one-site-out
  estimate and folds (``AutoLearner.candidates_``) and its test error (the candidate fitted on the
  whole summary, ``AutoLearner.fitted_``);
- the learner chosen and the model's test error (after :func:`marg.learners.study.two_round.finish`);
- for a DCC: its forest's edges, max |μ|, its R* (the randomized rule's worst case) and the share of
  test rows on which its scores tie (decided by the naive-Bayes tie-break).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT / "bench"))
import select_measure as SM  # noqa: E402  (it puts ROOT first on sys.path: this checkout's marg)


def one_run(D, rep: int, q: float, eps: float) -> dict:
    from marg.learners.auto import AutoLearner
    from marg.learners.choice.candidates import candidate_name
    from marg.learners.learn import learn
    from marg.learners.classifiers.minimax_rules import maximal
    from marg.learners.study.two_round import STUDY_CHOICE

    te, cb, X, y, sites = D.planted_split(rep, q)
    informative = {f"f{j}" for j in np.flatnonzero([np.mean(X[:, j] == y) > 0.6 for j in range(X.shape[1])])}
    S, req, plan = SM.dp_rounds(cb, X, y, sites, eps)
    res = learn(S, AutoLearner(**STUDY_CHOICE))
    est = res.estimator  # the fitted choice (learn fits a clone of the estimator given)
    cols = [cb.index(f.name) for f in S.codebook.features]
    Xte, yte = X[te][:, cols], y[te]

    def test_error(m) -> float:
        return float(np.mean(np.asarray(m.predict(Xte)) != yte))

    cands = []
    for row, m in zip(est.candidates_, est.fitted_):
        c = {"name": candidate_name(row.learner, row.params), "estimate": row.error, "folds": list(row.folds),
             "certificate": row.certificate, "chosen": bool(row.chosen), "test": None if m is None else test_error(m)}
        if m is not None and row.learner == "dcc":
            F = m.decision_function(Xte)
            c.update(edges=[list(e) for e in m.edges_], mu_max=float(np.max(np.abs(m.mu_))),
                     minimax_risk=float(m.minimax_risk_.value), tied=float(np.mean(maximal(F).sum(axis=1) > 1)))
        cands.append(c)
    first = [c[0] for c in req.tables if len(c) == 1]
    pairs = [c for c in req.tables if len(c) == 2]
    return {"split": rep, "measured": first, "informative_measured": sum(a in informative for a in first),
            "informative": sorted(informative), "pairs": len(pairs), "pairs_among": len(req.why["pairs_among"]),
            "first_std": req.why["noise_std"]["first_order"], "pair_std": req.why["noise_std"]["pair"],
            "k": plan.split["k"], "chosen": res.model.learner, "error": test_error(res.model.estimator),
            "candidates": cands}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--splits", default="0,1,2,3,4")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--jsonl", type=Path)
    a = ap.parse_args()
    D = SM._bench("dp_select")
    q = D.planted_flip()
    out = a.jsonl.open("a") if a.jsonl else None
    print("| split | run | measured (informative) | pairs among | std first/pair | chosen | error | "
          "candidates: estimate → test |")
    print("|---|---|---|---|---|---|---|---|")
    for rep in [int(s) for s in a.splits.split(",")]:
        for run in range(a.runs):
            t = time.perf_counter()
            r = one_run(D, rep, q, a.epsilon)
            r["run"], r["seconds"] = run, time.perf_counter() - t
            cs = "; ".join(f"{c['name']}{'*' if c['chosen'] else ''} "
                           f"{'–' if c['estimate'] is None else format(c['estimate'], '.3f')} → "
                           f"{'–' if c['test'] is None else format(c['test'], '.3f')}" for c in r["candidates"])
            print(f"| {rep} | {run} | {len(r['measured'])} ({r['informative_measured']}) | {r['pairs_among']} "
                  f"({r['pairs']}) | {r['first_std']:.1f}/{r['pair_std'] or 0:.1f} | {r['chosen']} | {r['error']:.3f} "
                  f"| {cs} |", flush=True)
            if out:
                out.write(json.dumps(r) + "\n")
                out.flush()


if __name__ == "__main__":
    main()
