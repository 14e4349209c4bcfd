"""Select, then measure (issue 34): the DP default's test error on small, narrow and wide studies, beside the larger
class.

Run: MARG_DATASETS=/work/shared/datasets nice -n 10 python bench/select_measure.py
     [--sets kr-vs-kp,votes,credit,wide,leukemia,ALLAML] [--reps 5] [--epsilon 1]

Every split runs the library steps the CLI sequence of the README's "DP quick start" runs
(``marg export --epsilon ε`` → ``marg request`` → ``marg export --request`` → ``marg learn``):
round 1 (:class:`marg.protocols.study.Round1`) at each of three sites with its own ledger,
the learner's plan (:func:`marg.learners.study.two_round.plan_request`), round 2
(:class:`~marg.protocols.study.Round2`), the default learn on both rounds' bundles. The
request is handed over in memory (unsigned: its signature is the CLI's concern, tested in
tests/protocols/test_select_measure.py); ε is each site's total for the study (δ = 1e-6).

- kr-vs-kp, votes (house-votes-84), credit (credit-a), adult (``--sets adult``; not in the default
  list): the splits of bench/privacy.py (a seeded 80/20 split, ``default_rng(1000 + rep)``, training
  rows to three sites of 50/30/20 %; adult with bench/privacy.py's public codebook).
- planted: bench/dp_select.py's planted study (:func:`planted_split`: three sites × 1,000, 3,000 binary
  features of which 10 informative, Bayes error 0.100, 2,000 test patients, ``default_rng(3400 + rep)``) —
  the acceptance run's population.
- wide: the planted study of issue 34 — three sites × 1,000 patients, 3,000 binary features
  of which the first 10 agree with the label with probability 0.72 (Bayes error 0.076, the
  majority vote of the 10), a fresh test set of 4,000 (``default_rng(500 + rep)``).
- leukemia, ALLAML: stratified 80/20 splits (``default_rng(rep)``), the training rows
  discretized as bench/mrc_highdim.py does and split into three stratified sites.

Each site states its rows (``--plan-rows``: the training rows of the three sites), which round 1's
split rule reads (:mod:`marg.marginals.study_split`). Reported per split: test error, the larger
class's error on the same test rows, the learner chosen, the split (label / selection / round 2
shares of the total, and k), how many features the sites agreed on, how many first-order tables round 2 measured
(and pairs among how many, with the number of pair tables).

``--decompose`` (issue 34: where the DP path loses against exact summaries) adds, per split, beside the
DP error e_DP: **best cand.** — the least test error of the study's candidates (``study_choice``, each
fitted alone on the same DP summary: e_DP minus it is what the automatic choice lost); **exact, same
tables** — the study's automatic choice on the *exact* counts of exactly the tables round 2 measured
(the label table, the measured first-order and pair tables, the same features): e_DP minus it is what
the noise cost, and it minus the one-round exact summaries' error (bench/dp_select.py's "marg exact")
is what measuring only those tables cost.
"""

from __future__ import annotations

import argparse
import importlib.util
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))


def _bench(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def decompose(cb, X, y, sites, S, req, Xte, yte) -> dict:
    """``--decompose``: the best single candidate on the DP summary ``S``, and the study's choice on the exact
    counts of the tables ``req`` measured (module docstring)."""
    from marg.learners.auto import AutoLearner
    from marg.learners.learn import learn
    from marg.learners.study.two_round import STUDY_CHOICE, study_choice
    from marg.protocols.export import export_site
    from marg.protocols.load import load_summary

    P = _bench("privacy")

    def test_error(model) -> float:
        cols = [cb.index(f.name) for f in model.codebook.features]
        return float(np.mean(np.asarray(model.predict(Xte[:, cols])) != yte))

    cand = []
    for c in study_choice(S)["candidates"]:
        try:
            cand.append(test_error(learn(S, AutoLearner(candidates=[c], prefer="accuracy")).model))
        except Exception:  # e.g. renyi or a DCC without pair tables: not a candidate on this summary
            pass
    names = [c[0] for c in req.tables if len(c) == 1]
    sub = cb.subset(names)
    cols = [cb.index(f.name) for f in sub.features]
    pairs = [c for c in req.tables if len(c) == 2]
    wd = Path(tempfile.mkdtemp())
    paths = []
    for k, s in enumerate(sites):
        out = wd / f"exact{k}"
        export_site(P.ArraySource(f"s{k}", X[s][:, cols], y[s]), sub, f"s{k}", out, min_cell=1,
                    **({"stats": "pairs", "pairs": pairs} if pairs else {"stats": "first"}))
        paths.append(out)
    E = load_summary(paths, allow_unsigned=True)
    same = test_error(learn(E, AutoLearner(**STUDY_CHOICE)).model)
    return {"best_candidate": min(cand), "exact_same_tables": same}


def dp_rounds(cb, X, y, sites, eps: float):
    """The two rounds at three sites (each with its own ledger): the summary of both rounds, the request, the plan."""
    from marg.learners.study.two_round import plan_request, site_round1
    from marg.marginals.study import study_plan, study_record
    from marg.protocols.export import export_site
    from marg.protocols.load import load_summary, load_verified_bundles
    from marg.protocols.study import Round1, Round2

    P = _bench("privacy")
    wd = Path(tempfile.mkdtemp())
    r1, r2 = [], []
    for k, s in enumerate(sites):
        out = wd / f"s{k}.r1"
        plan = study_plan(cb, eps, 1e-6, rows=[len(t) for t in sites])  # the rows each site states (--plan-rows)
        export_site(P.ArraySource(f"s{k}", X[s], y[s]), cb, f"s{k}", out, study=Round1(plan),
                    ledger_dir=wd / f"ledger{k}")
        r1.append(out)
    recs = []
    for b in load_verified_bundles(r1, allow_unsigned=True):
        lab = next(t.counts for t in b.tables if t.clique == (cb.label.name,))
        recs.append(site_round1(b.site, study_record(b.header), lab))
    req = plan_request(recs, cb)
    for k, s in enumerate(sites):
        out = wd / f"s{k}.r2"
        export_site(P.ArraySource(f"s{k}", X[s], y[s]), cb, f"s{k}", out, study=Round2(req, "0" * 64, None),
                    ledger_dir=wd / f"ledger{k}")
        r2.append(out)
    return load_summary(r1 + r2, allow_unsigned=True), req, plan


def run(cb, X, y, sites, eps: float, Xte, yte, parts: bool = False) -> dict:
    """The two rounds at three sites and the default learn; the test error of the model."""
    from marg.learners.learn import learn

    S, req, plan = dp_rounds(cb, X, y, sites, eps)
    m = learn(S, "auto", {}).model
    cols = [cb.index(f.name) for f in S.codebook.features]
    err = float(np.mean(np.asarray(m.predict(Xte[:, cols])) != yte))
    sp = plan.split
    extra = decompose(cb, X, y, sites, S, req, Xte, yte) if parts else {}
    read = list(getattr(m.estimator, "feature_names_in_", None) or [])
    # e.g. the study's one-feature default
    who = m.learner + (f" ({', '.join(read)})" if read and len(read) < len(cols) else "")
    return {**extra, "error": err, "learner": who, "split": f"{sp['label_share']:.2f}/{sp['select_share']:.2f}/"
            f"{sp['round2_share']:.2f} k={sp['k']}", "agreed": len(req.why["kept"]),
            "measured": sum(len(c) == 1 for c in req.tables),
            "pairs_among": f"{len(req.why['pairs_among'])} ({sum(len(c) == 2 for c in req.tables)} pairs)",
            "certificate": float(m.estimator.certificate_.value)}


def splits(name: str, reps: int):
    """(codebook, X codes, y, site index lists, test codes, test labels) per repetition."""
    if name in ("kr-vs-kp", "votes", "credit", "adult"):
        P = _bench("privacy")
        make, y = P.load_set(name)
        for rep in range(reps):
            te, tr, cb, X, sites = P.adult_style_split(make, y.size, rep)
            yield cb, X, y, sites, X[te], y[te]
    elif name == "planted":  # bench/dp_select.py's planted study (Bayes error 0.100), its splits
        D = _bench("dp_select")
        q = D.planted_flip()
        for rep in range(reps):
            te, cb, X, y, sites = D.planted_split(rep, q)
            yield cb, X, y, sites, X[te], y[te]
    elif name == "wide":
        from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label

        p, inf = 3000, 10
        cb = Codebook(features=tuple(CategoricalFeature(f"g{j}", ("0", "1")) for j in range(p)),
                      label=Label("y", ("a", "b")))
        for rep in range(reps):
            rng = np.random.default_rng(500 + rep)

            def draw(n):
                yy = rng.integers(0, 2, n)
                XX = rng.integers(0, 2, (n, p)).astype(np.float64)
                for j in range(inf):
                    XX[:, j] = np.where(rng.random(n) < 0.72, yy, 1 - yy)
                return XX, yy

            X, y = draw(3000)
            Xte, yte = draw(4000)
            yield cb, X, y, [np.arange(0, 1000), np.arange(1000, 2000), np.arange(2000, 3000)], Xte, yte
    else:
        hd = _bench("mrc_highdim")
        Xr, yr, discrete = hd.load(name)
        classes = np.unique(yr)
        y_all = np.searchsorted(classes, yr)
        for rep in range(reps):
            rng = np.random.default_rng(rep)
            te = np.zeros(y_all.size, dtype=bool)
            site = np.zeros(y_all.size, dtype=int)
            for c in range(classes.size):
                idx = rng.permutation(np.flatnonzero(y_all == c))
                n_te = int(round(0.2 * idx.size))
                te[idx[:n_te]] = True
                site[idx[n_te:]] = np.arange(idx.size - n_te) % 3
            tr = np.flatnonzero(~te)
            enc, _, _ = hd.summary_of(Xr[tr], y_all[tr], classes, discrete)
            X = np.zeros((y_all.size, Xr.shape[1]))
            X[tr] = enc.codes(Xr[tr])
            yield (enc.codebook, X, y_all, [tr[site[tr] == s] for s in range(3)], enc.codes(Xr[te]), y_all[te])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="kr-vs-kp,votes,credit,wide,leukemia,ALLAML")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--decompose", action="store_true",
                    help="add the best candidate's error and the study's choice on exact counts of the same tables")
    a = ap.parse_args()
    print(f"# select, then measure: ε = {a.epsilon:g} per site in total, δ = 1e-6; {platform.machine()}, "
          f"Python {platform.python_version()}, numpy {np.__version__}")
    print("| set | split | test error | larger class | learner | label/selection/round 2, k | features agreed | "
          "measured | pairs among | certificate | s |" + (" best cand. | exact, same tables |" if a.decompose else ""))
    print("|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if a.decompose else ""))
    for name in a.sets.split(","):
        errs, majs, best, same = [], [], [], []
        for rep, (cb, X, y, sites, Xte, yte) in enumerate(splits(name, a.reps)):
            t = time.perf_counter()
            r = run(cb, X, y, sites, a.epsilon, Xte, yte, a.decompose)
            maj = 1.0 - np.bincount(yte).max() / yte.size
            errs.append(r["error"])
            majs.append(maj)
            print(f"| {name} | {rep} | {r['error']:.4f} | {maj:.4f} | {r['learner']} | {r['split']} | {r['agreed']} | "
                  f"{r['measured']} | {r['pairs_among']} | {r['certificate']:.3f} | {time.perf_counter() - t:.0f} |"
                  + (f" {r['best_candidate']:.4f} | {r['exact_same_tables']:.4f} |" if a.decompose else ""), flush=True)
            if a.decompose:
                best.append(r["best_candidate"])
                same.append(r["exact_same_tables"])
        worst = max(e - m for e, m in zip(errs, majs))
        print(f"| {name} | mean | {np.mean(errs):.4f} | {np.mean(majs):.4f} | | | | | | | worst vs larger class "
              f"{worst:+.4f} |"
              + (f" {np.mean(best):.4f} | {np.mean(same):.4f} |" if a.decompose else ""), flush=True)


if __name__ == "__main__":
    main()
