"""A diagnosis of the study's round 2 (issue 44, studylarge): the model the automatic choice and single learners fit
on given round-2 tables (the first-order tables of ``--features`` and the pairs among their first M), computed
exactly from a split's training rows, and with Gaussian noise at ``--rho`` under the least-squares weights round 2
uses; scored on the split's test rows. It separates what the tables lose (exact) from what the noise loses.

Usage::

    nice -n 10 .venv/bin/python bench/study_round2_tables.py --set kr-vs-kp --split 0 \
        --features c10,c21,c33,c18,c35,c7,c11,c13,c15,c8 --pairs-among 7,3,0 --rho 0.0045 --draws 2
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", default="kr-vs-kp")
    ap.add_argument("--split", type=int, default=0)
    ap.add_argument("--features", required=True, help="comma-separated, best first (a study's 'ranked')")
    ap.add_argument("--pairs-among", default="7", help="comma-separated M values: pairs among the first M")
    ap.add_argument("--rho", type=float, default=None, help="round 2's zCDP ρ for the noisy fits (none: exact only)")
    ap.add_argument("--draws", type=int, default=2)
    ap.add_argument("--learners", default="auto,renyi,nb")
    a = ap.parse_args()
    here = Path(__file__).resolve().parent
    sys.path.insert(0, str(here))
    argv, sys.argv = sys.argv, [sys.argv[0]]
    import study_accept as A
    sys.argv = argv
    from marg.learners.learn import learn
    from marg.learners.study.two_round import STUDY_MECHANISM, least_squares_weights
    from marg.marginals.counts.counting import count_tables
    from marg.marginals.privacy import privatize
    from marg.marginals.summary import Summary

    te, cb, X, y, sites = A.Sets().split(a.set, a.split)
    tr, X, lab = np.concatenate(sites), np.asarray(X, dtype=float), cb.label.name
    feats = a.features.split(",")
    sub = cb.subset([f for f in cb.feature_names if f in feats])
    idx = [cb.feature_names.index(f) for f in sub.feature_names]
    K = int(cb.label.n_classes)
    for M in (int(m) for m in a.pairs_among.split(",")):
        pairs = [tuple(sorted(p, key=cb.index)) for p in itertools.combinations(feats[:M], 2)]
        cliques = [(f, lab) for f in feats] + [p + (lab,) for p in pairs]
        sizes = [K * int(np.prod([int(cb.feature(f).n_levels) for f in c[:-1]])) for c in cliques]
        w = list(least_squares_weights(sizes, STUDY_MECHANISM))
        exact = count_tables(sub, X[tr][:, idx], y[tr], cliques)
        runs = [("exact", exact)]
        for d in range(a.draws if a.rho else 0):
            runs.append((f"noisy {d}", privatize(exact, rho=a.rho, weights=w, codebook=sub)[0]))
        for tag, tables in runs:
            S = Summary(sub, tables)
            out = []
            for name in a.learners.split(","):
                try:
                    m = learn(S, name).model
                    out.append(f"{name}→{m.learner} {np.mean(m.predict(X[te][:, idx]) != y[te]):.4f}")
                except Exception as exc:  # a learner that needs tables not measured (Rényi without pairs)
                    out.append(f"{name}: {type(exc).__name__}")
            print(f"{a.set} split {a.split}, {len(feats)} features, pairs among {M} ({len(pairs)}), {tag}: "
                  + "; ".join(out),
                  flush=True)


if __name__ == "__main__":
    main()
