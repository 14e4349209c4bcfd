"""The study's automatic choice (issue 34, i34h): choice rules compared on the same DP summaries, by test error.

Run: MARG_DATASETS=/work/shared/datasets nice -n 10 python bench/study_choice.py --sets credit,votes --reps 5 --runs 8
\\
         --json OUT.json          # collect: the DP sequence per split-run, every candidate's estimate and test error
     python bench/study_choice.py --report OUT.json [MORE.json ...]   # the rules side by side, paired

Each split-run is the in-process DP sequence of ``bench/select_measure.py`` (:func:`dp_rounds`: round 1 at
three sites, the learner's plan, round 2; ε = 1 per site in total). On its summary the automatic choice's
candidates are fitted once — the study's fixed candidates (``two_round.STUDY_CHOICE``) and naive Bayes on
the best-ranked measured feature alone (``two_round.study_choice``) — and each row's leave-one-site-out
estimate, folds, certificate and test error recorded. The rules are then applied to the same rows, so every
rule sees the same noise draws (OpenDP's noise is not seeded; the run-to-run spread of a 5-split mean is
≈ 0.01, far above the differences between rules, which a paired comparison resolves):

- ``accuracy`` — the study's choice before i34h: the smallest estimate among the fixed candidates;
- ``balanced`` — choice_rule's default rule on the same candidates;
- ``1se renyi first`` — within max(0.01, one paired standard error) of the best, Rényi first, then naive
  Bayes, then the DCCs (the order i34g's report suggested for kr-vs-kp);
- ``+one, accuracy`` — with the one-feature candidate, the smallest estimate;
- ``+one, default one z`` — with it as the one default (choice_rule "Defaults"), at z = 1 and 1.96;
- ``defaults renyi`` — Rényi as the one default, without the one-feature candidate;
- ``+one, defaults one, renyi z=1.96`` — the study's choice since i34h (``two_round.study_choice``: the
  one-feature rule, then Rényi, each kept unless beaten beyond 1.96 paired standard errors).

Reported per set: the mean test error over split-runs, each run's 5-split mean, which candidate each rule
took, and the paired difference against ``accuracy`` (mean ± its standard error; split-runs better/worse).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(1, str(ROOT))
import select_measure as SM  # noqa: E402


def collect(sets: list[str], reps: int, runs: int, out: Path) -> None:
    from marg.learners.auto import AutoLearner
    from marg.learners.study.two_round import above_chance, pool_records, study_choice

    res = []
    for name in sets:
        data = list(SM.splits(name, reps))
        for run in range(runs):
            for rep, (cb, X, y, sites, Xte, yte) in enumerate(data):
                S, req, _ = SM.dp_rounds(cb, X, y, sites, 1.0)
                cols = [cb.index(f.name) for f in S.codebook.features]
                a = AutoLearner(candidates=study_choice(S)["candidates"], prefer="accuracy").fit(S)
                rows = [{"learner": r.learner, "params": r.params, "error": r.error, "folds": r.folds,
                         "w": r.fold_weights,
                         "cert": r.certificate, "trivial": r.trivial,
                         "test": None if m is None else float(np.mean(np.asarray(m.predict(Xte[:, cols])) != yte))}
                        for r, m in zip(a.candidates_, a.fitted_)]
                res.append({"set": name, "rep": rep, "run": run, "above": len(above_chance(pool_records(S))),
                            "pairs": sum(len(c) == 2 for c in req.tables), "rows": rows})
                print(name, run, rep,
                      " ".join(f"{_name(r)}:{r['error'] if r['error'] is None else round(r['error'], 3)}/"
                                               f"{r['test'] if r['test'] is None else round(r['test'], 3)}"
                               for r in rows), flush=True)
                out.write_text(json.dumps(res))


def _name(r: dict) -> str:
    p = r["params"]
    if "features" in p:
        return "one" if len(p["features"]) == 1 else f"{r['learner']}{len(p['features'])}"
    return r["learner"] + (f"-{p['edge_weight']}" if "edge_weight" in p else "")


def _rows(rec: dict, one: bool) -> list:
    return [SimpleNamespace(learner=r["learner"], error=r["error"], folds=r["folds"], certificate=r["cert"],
                            trivial=r["trivial"], nm=_name(r), test=r["test"]) for r in rec["rows"] if one
            or _name(r) != "one"]


def _rule(prefer: str, one: bool, z: float | None = None, order: list[str] | None = None, defaults: tuple = ("one",)):
    from marg.learners.choice import choice_rule as C

    def pick(rec: dict):
        rows = _rows(rec, one)
        w = next((r["w"] for r in rec["rows"] if r["w"]), None)
        if order is not None:  # within noise of the best, the first by ``order``
            est = [k for k, r in enumerate(rows) if r.error is not None]
            cap = min((rows[k].error for k in est if rows[k].learner == C.PRIOR), default=np.inf)
            est = [k for k in est if rows[k].error <= cap + 1e-12]
            b = min(est, key=lambda k: rows[k].error)
            ks = [k for k in est if rows[k].error <= rows[b].error + C.noise_margin(rows[k], rows[b], C.TOLERANCE, w)
                  + 1e-12]
            return rows[min(ks, key=lambda k: (order.index(rows[k].nm) if rows[k].nm in order else 99, rows[k].error))]
        ds = [next(k for k, r in enumerate(rows) if r.nm == nm) for nm in defaults if any(r.nm == nm for r in rows)]
        old, C.DEFAULT_Z = C.DEFAULT_Z, (z if z is not None else C.DEFAULT_Z)
        try:
            return rows[C.choose_index(rows, prefer, weights=w, defaults=ds if z is not None else ())[0]]
        finally:
            C.DEFAULT_Z = old
    return pick


RULES = {"accuracy": _rule("accuracy", False), "balanced": _rule("balanced", False),
         "1se renyi first": _rule("accuracy", False, order=["renyi", "nb", "dcc-label", "dcc-cmi", "prior"]),
         "+one, accuracy": _rule("accuracy", True), "+one, default one z=1": _rule("accuracy", True, z=1.0),
         "+one, default one z=1.96": _rule("accuracy", True, z=1.96),
         "defaults renyi z=1.96 (no one)": _rule("accuracy", False, z=1.96, defaults=("renyi",)),
         "+one, defaults one, renyi z=1.96 (the study's "
         "choice)": _rule("accuracy", True, z=1.96, defaults=("one", "renyi"))}


def _test(rec: dict, chosen) -> float:
    if rec["above"] > 0 or chosen.nm == "prior":
        return chosen.test
    return next(r["test"] for r in rec["rows"] if r["learner"] == "prior")  # nothing agreed: two_round.finish


def report(files: list[str]) -> None:
    recs = [{**r, "run": (i, r["run"])} for i, f in enumerate(files) for r in json.loads(Path(f).read_text())]
    for s in sorted({r["set"] for r in recs}, key=lambda s: [r["set"] for r in recs].index(s)):
        rs = [r for r in recs if r["set"] == s]
        print(f"\n{s}: {len(rs)} split-runs; the best candidate each time (oracle) "
              f"{np.mean([min(x['test'] for x in r['rows'] if x['test'] is not None) for r in rs]):.4f}")
        print("| rule | mean | run means | taken | vs accuracy (paired) |\n|---|---|---|---|---|")
        base = [_test(r, RULES["accuracy"](r)) for r in rs]
        for nm, f in RULES.items():
            picks: dict[str, int] = {}
            errs = []
            for r in rs:
                c = f(r)
                picks[c.nm] = picks.get(c.nm, 0) + 1
                errs.append(_test(r, c))
            d = np.array(errs) - np.array(base)
            means = [np.mean([e for e, r in zip(errs, rs) if r["run"] == k]) for k in sorted({r["run"] for r in rs})]
            print(f"| {nm} | {np.mean(errs):.4f} | {' '.join(f'{m:.3f}' for m in means)} | "
                  f"{', '.join(f'{k} {v}' for k, v in sorted(picks.items(), key=lambda t: -t[1]))} | "
                  f"{d.mean():+.4f} ± {d.std(ddof=1) / np.sqrt(d.size) if d.size > 1 else 0:.4f} "
                  f"(better {int((d < 0).sum())}, worse {int((d > 0).sum())}) |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="credit,votes,kr-vs-kp,wide")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--report", nargs="+")
    a = ap.parse_args()
    if a.report:
        report(a.report)
    else:
        if a.json is None:
            ap.error("--json OUT is needed to collect")
        collect(a.sets.split(","), a.reps, a.runs, a.json)


if __name__ == "__main__":
    main()
