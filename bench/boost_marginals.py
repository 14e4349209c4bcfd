"""``marg learn --learner boost`` from summaries on the folds of the row references, beside mrc and dcc.

Run: python bench/boost_marginals.py [--sets bcw,vote,clvheart,huheart,sonar] [--reps 1]
     [--learners boost,boost:cal,mrc,mrc:cal,dcc] [--dp-sets vote,clvheart] [--dp-reps 1] [--time-limit 120] [--jobs 1]
     [--folds 10] [--out FILE]

Exact part: on each fold of ``boost_data.folds`` (the folds ``bench/boost_table31.py``
uses) the training rows are counted into first-order and all pair-with-label tables
(``Summary.from_rows(..., stats="all")``) and each learner is fitted on that Summary alone
with s = 0 (``NAME``; λ = 0: the pure minimax problem on the released marginals; boost keeps its price
c(k)/n); scored on the test rows. Reported per set and learner: accuracy, the number of
weights in the vote (boost: ‖μ‖₀ over (class, monomial) pairs; the binary vote's
‖λ‖₀ is the number of distinct monomials, also shown), the mean certificate, and in how many
folds the certificate is at or above the test error. The row L0-RBoost K = 1 of the same
folds is read from ``--ref`` (``boost_table31.py``'s output) when present.

DP part (``--dp-sets``): each fold's training rows are dealt to three sites, each exports
through ``marg.protocols.export.export_site`` at ε = 1 (stats = all, the defaults
otherwise), the learner verifies and aggregates the bundles (``load_summary``) and fits boost
with the default calibrated λ (95% coverage); accuracy and certificate on the test rows.

One JSON line per fold and learner is appended to ``--out``; finished ones are skipped.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE))

import numpy as np  # noqa: E402

from boost_data import SETS, folds, load  # noqa: E402
from marg.learners.estimator.base import REGISTRY  # noqa: E402
from marg.marginals.summary import Summary  # noqa: E402


TIME_LIMIT = {"boost": 120.0}  # seconds per boost fit (--time-limit); its certificate stays valid


def _fit(learner: str, summary, dp: bool):
    """``learner``: a registry name (s = 0 on exact summaries) or ``NAME:cal`` (the default calibrated λ)."""
    name, _, variant = learner.partition(":")
    params = {} if dp or variant == "cal" else {"s": 0.0}
    if name in TIME_LIMIT:
        params["time_limit"] = TIME_LIMIT[name]
    return REGISTRY[name](**params).fit(summary)


def _dp_summary(cb, X, y, eps: float, seed: int):
    from marg.protocols.export import export_site
    from marg.protocols.load import load_summary
    from privacy import ArraySource

    rng = np.random.default_rng(seed)
    site = rng.integers(0, 3, size=y.size)
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for k in range(3):
            out = Path(tmp) / f"site{k}.bundle"
            rows = site == k
            export_site(ArraySource(f"site{k}", X[rows], y[rows]), cb, f"site{k}", out, epsilon=eps, stats="all")
            paths.append(out)
        return load_summary(paths, allow_unsigned=True)


def run_fold(job: tuple) -> list[dict]:
    name, rep, fold, learners, eps = job
    cb, X, y = load(name)
    tr, te = folds(y, rep)[fold]
    if eps is None:
        S = Summary.from_rows(cb, X[tr], y[tr], stats="all")
    else:
        S = _dp_summary(cb, X[tr], y[tr], eps, seed=1000 * rep + fold)
    out = []
    for learner in learners:
        t0 = time.perf_counter()
        try:
            est = _fit(learner, S, eps is not None)
        except Exception as exc:  # reported as a failed fold, the run goes on
            out.append({"set": name, "rep": rep, "fold": fold, "learner": learner, "eps": eps, "error": str(exc)})
            continue
        err = float((est.predict(X[te].astype(float)) != y[te]).mean())
        # the certificate bounds the randomized rule's error: its expected test error
        P = est.predict_proba(X[te].astype(float))
        rand_err = float(1.0 - np.mean(P[np.arange(te.size), y[te]]))
        rec = {"set": name, "rep": rep, "fold": fold, "learner": learner, "eps": eps, "acc": 1.0 - err,
               "rand_err": rand_err,
               "certificate": float(est.certificate_.value), "seconds": round(time.perf_counter() - t0, 2)}
        if learner.partition(":")[0] == "boost":
            from marg.learners.classifiers.minimax_rules import maximal

            F = est.decision_function(X[te].astype(float))
            rec["decided"] = float(np.mean(maximal(F).sum(axis=1) == 1))  # rows the rules decide (no tie-break)
            rec.update(terms=est.n_terms_, monomials=int(est.map_.dim), converged=bool(est.converged_),
                       rules=[f"{r['weight']:+.3f} {r['class']}: {r['rule']}" for r in est.rules()],
                       stopped=est.stopped_, empty_reason=est.empty_reason_)
        out.append(rec)
    return out


def summarize(rows: list[dict], ref: list[dict]) -> str:
    lines = ["| set | ε | learner | folds | accuracy | terms ‖μ‖₀ | monomials | rows the rules decide | certificate | "
             "randomized rule's test error | cert ≥ it | cert ≥ argmax's error | row L0-RBoost K=1 acc / ‖λ‖₀ | "
             "s/fold |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    keys = sorted({(r["set"], r["eps"] or 0.0, r["learner"]) for r in rows if "acc" in r},
                  key=lambda k: (SETS.index(k[0]), k[1], k[2]))
    for s, e, lr in keys:
        rs = [r for r in rows if (r["set"], r["eps"] or 0.0, r["learner"]) == (s, e, lr) and "acc" in r]
        fails = sum(1 for r in rows if (r["set"], r["eps"] or 0.0, r["learner"]) == (s, e, lr) and "error" in r)
        held = sum(r["certificate"] >= r.get("rand_err", 1.0 - r["acc"]) - 1e-12 for r in rs)
        held_det = sum(r["certificate"] >= 1.0 - r["acc"] - 1e-12 for r in rs)
        rand = [r["rand_err"] for r in rs if "rand_err" in r]
        t = f"{np.mean([r['terms'] for r in rs]):.1f}" if lr.startswith("boost") else ""
        m = f"{np.mean([r['monomials'] for r in rs]):.1f}" if lr.startswith("boost") else ""
        dec = [r["decided"] for r in rs if "decided" in r]
        d = f"{np.mean(dec):.2f}" if dec and len(dec) == len(rs) else ""
        folds_ = {(r["rep"], r["fold"]) for r in rs}
        rr = [r for r in ref if r["set"] == s and r["method"] == "l0" and r["K"] == 1
              and (r["rep"], r["fold"]) in folds_]
        refs = (f"{np.mean([r['acc'] for r in rr]):.3f} / {np.mean([r['nnz'] for r in rr]):.1f} ({len(rr)} folds)" if rr
                and not e else "")
        lines.append(f"| {s} | {e or 'exact'} | {lr} | {len(rs)}{f' ({fails} failed)' if fails else ''} | "
                     f"{np.mean([r['acc'] for r in rs]):.3f} | {t} | {m} | {d} | "
                     f"{np.mean([r['certificate'] for r in rs]):.3f} | "
                     f"{f'{np.mean(rand):.3f}' if len(rand) == len(rs) else '–'} | "
                     f"{f'{held}/{len(rs)}' if len(rand) == len(rs) else '–'} | {held_det}/{len(rs)} | {refs} | "
                     f"{np.mean([r['seconds'] for r in rs]):.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--learners", default="boost,boost:cal,mrc,mrc:cal,dcc",
                    help="NAME (s = 0) or NAME:cal (the default calibrated lambda)")
    ap.add_argument("--dp-sets", default="vote,clvheart")
    ap.add_argument("--dp-reps", type=int, default=1)
    ap.add_argument("--eps", type=float, default=1.0)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--time-limit", type=float, default=120.0, help="seconds per boost fit")
    ap.add_argument("--folds", type=int, default=10, help="the first FOLDS folds of each repetition")
    ap.add_argument("--out", default=str(HERE / "results" / "boost_marginals.jsonl"))
    ap.add_argument("--ref", default=str(HERE / "results" / "boost_table31.jsonl"))
    a = ap.parse_args(argv)
    TIME_LIMIT["boost"] = a.time_limit
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = [json.loads(x) for x in out.read_text().splitlines() if x.strip()] if out.exists() else []
    seen = {(r["set"], r["rep"], r["fold"], r["learner"], r["eps"]) for r in done}
    learners = a.learners.split(",")
    jobs = []
    for rep in range(a.reps):
        for s in [x for x in a.sets.split(",") if x]:
            for f in range(a.folds):
                todo = [lr for lr in learners if (s, rep, f, lr, None) not in seen]
                if todo:
                    jobs.append((s, rep, f, todo, None))
    for rep in range(a.dp_reps):
        for s in [x for x in a.dp_sets.split(",") if x]:
            for f in range(a.folds):
                if (s, rep, f, "boost", a.eps) not in seen:
                    jobs.append((s, rep, f, ["boost"], a.eps))
    if jobs:
        with ProcessPoolExecutor(a.jobs) as ex, out.open("a") as fh:
            for recs in ex.map(run_fold, jobs):
                for r in recs:
                    fh.write(json.dumps(r) + "\n")
                    print(json.dumps({k: v for k, v in r.items() if k != "rules"}), file=sys.stderr, flush=True)
                    done.append(r)
                fh.flush()
    ref_path = Path(a.ref)
    ref = [json.loads(x) for x in ref_path.read_text().splitlines() if x.strip()] if ref_path.exists() else []
    print(summarize(done, ref))


if __name__ == "__main__":
    main()
