"""A paired diagnosis of the study's round 2 (issue 44, large): round 1 and round 2 of the study's default simulated
from a split's training rows at the design's ρ, then several round-2 table plans fitted on the SAME round-1 noise
(the same ranking) and scored on the split's test rows, so the steps' losses separate: round 1's selection (the
noisy top k against the exact top k), round 2's tables (the plan: ``choose_tables``' rule, every pair, pairs among
the first M), round 2's noise (exact tables of the same plan), and the final learner (the automatic choice against
single learners on the same noisy tables).

The simulation: the design (:func:`marg.marginals.study_design.design_study`, the sites' rows, ε = 1, δ = 1e-6,
t = 2 of 3, shared noise); a seeded ``holdout`` fraction of each site's rows left out of training (the study's
held-out patients); round 1 the label table at ρ_label and the p first-order tables at ρ_select/p each, round 2
the plan's tables at ρ_measure under its weights — each pooled table carrying one curator's noise at ρ·t/S (what
the shared-noise sum of all S sites carries: S/t curators' variance at ρ, :mod:`marg.marginals.shared_noise`),
drawn by :func:`marg.marginals.privacy.privatize`. Noise is OpenDP's (not seeded); every plan of one draw reads
the same round-1 sums, and each plan's round-2 noise is its own draw.

Usage::

    nice -n 10 .venv/bin/python bench/study_round2_plans.py --set adult --splits 0,1 --plans rule,all \
        --learners final,renyi,nb
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

import numpy as np


def plan_tables(plan: str, kept: list[str], cb, rests: list[float], n_hat: float):
    """(cliques without the label, weights) of a named plan: ``rule`` (choose_tables), ``all`` (every first-order and
    pair table of ``kept``, least-squares weights), ``mM`` (pairs among the first M), ``first`` (first-order only)."""
    from marg.learners.study.two_round import STUDY_MECHANISM, choose_tables, least_squares_weights

    if plan == "rule":
        tp = choose_tables(kept, cb, rests, n_hat)
        return list(tp.tables), list(tp.weights)
    if plan == "rulenf":  # choose_tables' pairs; first-order tables only for the features in no pair
        tp = choose_tables(kept, cb, rests, n_hat)
        inpair = {a for c in tp.tables if len(c) == 2 for a in c}
        tabs = [c for c in tp.tables if len(c) == 2 or c[0] not in inpair]
        K = int(cb.label.n_classes)
        sizes = [K * int(np.prod([int(cb.feature(a).n_levels) for a in c])) for c in tabs]
        return tabs, list(least_squares_weights(sizes, STUDY_MECHANISM))
    if plan == "study":
        from marg.study_measure import round2_tables

        tp = round2_tables(kept, cb, rests, n_hat)
        return list(tp.tables), list(tp.weights)
    if plan.startswith("g"):  # greedy: every pair, then drop the noisiest pair table while its ratio > R
        from marg.learners.study.two_round import _pooled_std

        R, K = float(plan[1:]), int(cb.label.n_classes)
        pairs = [tuple(sorted(p, key=cb.index)) for p in itertools.combinations(kept, 2)]
        while True:
            tabs = [(a,) for a in kept] + pairs
            sizes = [K * int(np.prod([int(cb.feature(a).n_levels) for a in c])) for c in tabs]
            w = list(least_squares_weights(sizes, STUDY_MECHANISM))
            ratio = [_pooled_std(rests, w[i]) * sizes[i] / n_hat for i in range(len(tabs))]
            if not pairs or max(ratio[len(kept):]) <= R:
                return tabs, w
            del pairs[int(np.argmax(ratio[len(kept):]))]
    if plan == "alleq":
        tabs = [(a,) for a in kept] + [tuple(sorted(p, key=cb.index)) for p in itertools.combinations(kept, 2)]
        return tabs, [1.0] * len(tabs)
    if plan == "first":
        M = 0
    elif plan == "all":
        M = len(kept)
    else:
        M = int(plan[1:])
    tabs = [(a,) for a in kept] + [tuple(sorted(p, key=cb.index)) for p in itertools.combinations(kept[:M], 2)]
    K = int(cb.label.n_classes)
    sizes = [K * int(np.prod([int(cb.feature(a).n_levels) for a in c])) for c in tabs]
    return tabs, list(least_squares_weights(sizes, STUDY_MECHANISM))


def fit_score(S, learner: str, Xte: np.ndarray, yte: np.ndarray) -> tuple[str, float]:
    from marg.learners.learn import learn
    from marg.study_learner import final_learner

    t0 = time.time()
    try:
        est, kw = final_learner(S, False) if learner == "final" else (learner, {})
        m = learn(S, est, **kw).model
        cols = [S.codebook.feature_names.index(a) for a in m.codebook.feature_names]
        err = float(np.mean(m.predict(Xte[:, cols]) != yte))
        return f"{learner}→{m.learner} {err:.4f} ({time.time() - t0:.0f}s)", err
    except Exception as exc:  # a learner that needs tables not measured
        return f"{learner}: {type(exc).__name__}: {str(exc)[:60]}", float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", default="adult")
    ap.add_argument("--splits", default="0")
    ap.add_argument("--plans", default="rule,all")
    ap.add_argument("--learners", default="final,renyi,nb")
    ap.add_argument("--exact", action="store_true", help="also fit each plan's exact tables")
    ap.add_argument("--exact-top", action="store_true", help="also the plans on the exact top k (no round-1 noise)")
    ap.add_argument("--k", type=int, default=None, help="round 2's k (default: the design's)")
    ap.add_argument("--measure-share", type=float, default=None,
                    help="what-if: round 2's ρ as this share of (select + measure), the rest to select")
    ap.add_argument("--rho-measure", type=float, default=None,
                    help="what-if: round 2's ρ per site (default: the design's)")
    ap.add_argument("--holdout", type=float, default=None,
                    help="what-if: the held-out fraction (default: the design's)")
    ap.add_argument("--draws", type=int, default=1, help="independent draws of both rounds' noise per split")
    a = ap.parse_args()
    here = Path(__file__).resolve().parent
    sys.path.insert(0, str(here))
    argv, sys.argv = sys.argv, [sys.argv[0]]
    import study_accept as A
    sys.argv = argv
    from marg.learners.selection.screening import screen_scores
    from marg.marginals.counts.counting import count_tables
    from marg.marginals.privacy import privatize
    from marg.marginals.study_design import design_study
    from marg.marginals.summary import Summary
    from marg.study_measure import measured_features

    means: dict = {}
    for rep, draw in itertools.product((int(s) for s in a.splits.split(",")), range(a.draws)):
        te, cb, X, y, sites = A.Sets().split(a.set, rep)
        X = np.asarray(X, dtype=float)
        rows = [len(s) for s in sites]
        d = design_study(cb, 3, rows, 1.0, 1e-6, 2, 1, True, "shared")
        rng = np.random.default_rng(1000 + rep)  # the same held-out rows in every draw of a split
        f = d.holdout if a.holdout is None else a.holdout
        tr = np.concatenate([s[rng.random(len(s)) >= f] for s in sites])
        shrink = 2.0 / 3.0  # one curator at ρ·t/S: the shared sum of S = 3 sites at t = 2
        lab = cb.label.name
        rho_sel, rho_mea = d.rho_select, d.rho_measure
        if a.measure_share is not None:
            tot = d.rho_select + d.rho_measure
            rho_mea, rho_sel = a.measure_share * tot, (1.0 - a.measure_share) * tot
        if a.rho_measure is not None:
            rho_mea = a.rho_measure
        k = a.k or d.k
        print(f"{a.set} split {rep} draw {draw}: design k {d.k} (used {k}), holdout {f}, rho label {d.rho_label:.5f} "
              f"select {rho_sel:.5f} measure {rho_mea:.5f} evaluate {d.rho_evaluate:.5f}; {len(tr)} training rows",
              flush=True)
        names = list(cb.discrete_names)
        first = [(lab,)] + [(f, lab) for f in names]
        exact1 = count_tables(cb, X[tr], y[tr], first)
        lab_t = privatize(exact1[:1], rho=d.rho_label * shrink, codebook=cb)[0]
        sel_t = privatize(exact1[1:], rho=rho_sel * shrink, weights=[1.0] * len(names), codebook=cb)[0]
        s1 = Summary(cb, lab_t + sel_t)
        kept = measured_features(screen_scores(s1, coverage=0.95), k)
        top = measured_features(screen_scores(Summary(cb, exact1), coverage=0.95), k)
        n_hat = float(max(np.asarray(s1.counts((lab,))).clip(min=0).sum(), 1.0))
        print(f"  ranked (noisy): {kept}\n  ranked (exact): {top}", flush=True)
        rests = [rho_mea * shrink]
        for tag, feats in [("noisy top", kept)] + ([("exact top", top)] if a.exact_top else []):
            sub = cb.subset([f for f in cb.feature_names if f in feats])
            idx = [cb.feature_names.index(f) for f in sub.feature_names]
            Xtr, Xte = X[tr][:, idx], X[te][:, idx]
            for plan in a.plans.split(","):
                tabs, w = plan_tables(plan, feats, cb, rests, n_hat)
                cliques = [tuple(c) + (lab,) for c in tabs]
                exact = count_tables(sub, Xtr, y[tr], cliques)
                noisy = privatize(exact, rho=rho_mea * shrink, weights=w, codebook=sub)[0]
                pairs = sum(len(c) == 2 for c in tabs)
                stds = [float(t.noise.std) for t in noisy]
                runs = [("noisy", noisy)] + ([("exact", exact)] if a.exact else [])
                for kind, tables in runs:
                    S = Summary(sub, tables)
                    res = [fit_score(S, ln, Xte, y[te]) for ln in a.learners.split(",")]
                    out = [r[0] for r in res]
                    for ln, (_, e) in zip(a.learners.split(","), res):
                        means.setdefault((tag, plan, kind, ln), []).append(e)
                    print(f"  {tag}, plan {plan} ({len(tabs) - pairs} first-order, {pairs} pairs; std/cell "
                          f"{min(stds):.1f}-{max(stds):.1f}), {kind}: " + "; ".join(out), flush=True)

    print("mean test error over splits x draws:")
    for (tag, plan, kind, ln), es in means.items():
        print(f"  {tag:9s} {plan:6s} {kind:5s} {ln:6s} {np.nanmean(es):.4f}  (n = {len(es)}; sd {np.nanstd(es):.4f})")


if __name__ == "__main__":
    main()

