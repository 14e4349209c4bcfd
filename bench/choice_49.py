"""Issue 49: the automatic choice at hospital size, exact summaries with min-cell suppression, side by side.

Run: nice -n 10 python bench/choice_49.py [--reps 3] [--sets bcw,clvheart,huheart,credit,vote] (adult: --sets adult)
[--epsilon 1: the DP setting, each site exporting with ``epsilon`` and the export's DP defaults, nothing suppressed]
[--estimate optimism: exact releases estimated by the optimism-corrected plug-in error instead of leave-one-site-out]
[--heldout 0.2: each site holds out 20 % of its training patients; the study's evaluation round — the choice's top K
 evaluated there, the best of K against the larger class (``final_among``) — is scored beside ``auto``]

Protocol (every number from one run): each repetition (seed 1000 + rep) draws a random 70/30
train/test split; the training rows go to three sites of 50 / 30 / 20 %; each site exports
exact tables with the export's defaults and ``min_cell_policy="suppress"`` (what ``marg export
--min-cell-policy suppress`` releases), the learner loads the three bundles (``marg learn``'s
loader) and runs :class:`marg.learners.auto.AutoLearner` with its defaults. Printed side by side
per split, every test error on the 30 % test rows:

- ``auto``: the default choice (``prefer="accuracy"``: choose for accuracy, certify what was
  chosen) and ``cert``: the former default (``--prefer certificate``), chosen from the same
  fitted candidates and estimates (:func:`marg.learners.auto.choose`);
- every candidate's own test error (estimated error ± its se in the JSON dump);
- naive Bayes (scikit-learn ``CategoricalNB``, α = 1) and logistic regression (one-hot,
  ``LogisticRegression(C=1, max_iter=2000)``) on the pooled training rows with the same bins;
- the larger class of the training rows;
- (exact setting) marg's naive Bayes on the same training rows' exact first-order tables without suppression:
  what the release loses to suppression, whatever the learner does with it.
Then per set: the means, and how often the default is within 0.02 of the best candidate's test
error and at most the larger class + 0.01.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))

SHARES = (0.5, 0.3, 0.2)
NAMES = {"adult": "adult", "bcw": "breast-w", "clvheart": "cleveland", "huheart": "hungarian", "credit": "credit-a",
         "vote": "house-votes-84"}


def _bench(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load(name: str):
    if name in ("credit", "adult"):
        return _bench("privacy").load_set(name)
    cb, X, y = _bench("boost_data").load(name)
    return (lambda tr: (cb, X)), y


def pooled_baselines(X, y, tr, te, cb):
    """Naive Bayes and logistic regression on the pooled training rows (the same codes), and the larger class."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.naive_bayes import CategoricalNB
    from sklearn.preprocessing import OneHotEncoder

    levels = [int(f.n_levels) for f in cb.features]
    Xi = X.astype(np.int64)
    nb = CategoricalNB(alpha=1.0, min_categories=levels).fit(Xi[tr], y[tr])
    enc = OneHotEncoder(categories=[list(range(m)) for m in levels], handle_unknown="ignore").fit(Xi[tr])
    lr = LogisticRegression(C=1.0, max_iter=2000).fit(enc.transform(Xi[tr]), y[tr])
    larger = np.bincount(y[tr]).argmax()
    return {"nb_rows": float(np.mean(nb.predict(Xi[te]) != y[te])),
            "lr_rows": float(np.mean(lr.predict(enc.transform(Xi[te])) != y[te])),
            "larger": float(np.mean(y[te] != larger))}


def heldout_choice(auto, S, X, y, held, te, epsilon, seed=0):
    """The study's evaluation round on this split (``--heldout``): the automatic choice's top K candidates
    (:func:`marg.study_evaluated.runners_up`) evaluated on the held-out patients (their pooled confusion tables, exact
    or with discrete-Gaussian-like noise of the round's std under DP), the best of K against the larger class by
    :func:`marg.learners.study.final_choice.final_among`; its test error and what was kept."""
    from marg.learners.study.final_choice import final_among
    from marg.learners.classifiers.label_only import LabelOnly
    from marg.study_evaluated import EVALUATED, runners_up

    models = [auto.chosen_] + [m.estimator for m in runners_up(auto, S, EVALUATED - 1)]
    K = S.n_classes
    tables, draws = [], []
    rng = np.random.default_rng([4242, int(seed)])  # fresh per split: no model order gets the same draws
    std = 0.0 if epsilon is None else EVAL_STD
    for m in models:
        conf = np.zeros((K, K))
        np.add.at(conf, (np.asarray(m.predict(X[held])).astype(int), y[held]), 1)
        if std:
            conf = conf + np.rint(rng.normal(0.0, std, conf.shape))
        tables.append(conf)
        draws.append((("gaussian", std, True, 1),) if std else ())
    prior = LabelOnly().fit(S)
    fc = final_among(models, prior, tables, draws, "confusion", 0.95)
    est = models[fc.index] if fc.chosen == "model" else prior
    return float(np.mean(np.asarray(est.predict(X[te])) != y[te])), (
        f"{fc.chosen}:{models[fc.index].learner}" if fc.chosen == "model" else "prior"), len(models)


EVAL_STD = 4.0
"""``--heldout`` under DP: the noise std of each evaluation cell (a pooled evaluation round's, at the study's ρ share
for the evaluation split over its K tables: the same order as the study of issue 44 measured, 3.9 on 450 held-out)."""


def one_split(name: str, rep: int, epsilon: float | None = None, heldout: float = 0.0):
    from marg.learners.auto import AutoLearner, choose
    from marg.protocols.export import export_site
    from marg.protocols.load import load_summary

    priv = _bench("privacy")
    make, y = load(name)
    rng = np.random.default_rng(1000 + rep)
    perm = rng.permutation(y.size)
    n_te = int(round(0.3 * y.size))
    te, tr = perm[:n_te], perm[n_te:]
    cb, X = make(tr)
    sites = np.split(tr, np.cumsum([int(SHARES[0] * tr.size), int(SHARES[1] * tr.size)]))
    held = np.array([], dtype=int)
    if heldout > 0:  # each site holds out the same share of its patients, as a study's evaluation round does
        cut = [rng.random(s.size) < heldout for s in sites]
        held = np.concatenate([s[c] for s, c in zip(sites, cut)])
        sites = [s[~c] for s, c in zip(sites, cut)]
        tr = np.concatenate(sites)
    suppressed = 0
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for k, s in enumerate(sites):
            out = Path(d) / f"site{k}.bundle"
            kw = {"min_cell_policy": "suppress"} if epsilon is None else {"epsilon": epsilon}
            res = export_site(priv.ArraySource(f"site{k}", X[s], y[s]), cb, f"site{k}", out, **kw)
            suppressed += len(res.suppressed)
            paths.append(out)
        S = load_summary(paths, allow_unsigned=True)
    t0 = time.perf_counter()
    auto = AutoLearner().fit(S)
    secs = time.perf_counter() - t0
    test = [float(np.mean(e.predict(X[te]) != y[te])) if e is not None else float("nan") for e in auto.fitted_]
    k_auto = [r.chosen for r in auto.candidates_].index(True)
    k_cert, _ = choose(auto.candidates_, "certificate")
    unsup = float("nan")
    if epsilon is None:  # what the same rows give without suppression: the release's loss, not the learner's
        from marg.learners.classifiers.naive_bayes import NaiveBayes
        from marg.marginals.summary import Summary

        unsup = float(np.mean(NaiveBayes().fit(Summary.from_rows(cb, X[tr], y[tr])).predict(X[te]) != y[te]))
    ho = heldout_choice(auto, S, X, y, held, te, epsilon, 1000 + rep) if heldout > 0 else (float("nan"), "", 0)
    return {"heldout": ho[0], "heldout_kept": ho[1], "heldout_k": ho[2], "set": name, "rep": rep,
            "n_train": int(tr.size), "sites": [int(s.size) for s in sites],
            "suppressed": suppressed, "rows": [{**r.to_dict(), "test": t} for r, t in zip(auto.candidates_, test)],
            "auto": test[k_auto], "auto_learner": auto.candidates_[k_auto].learner, "cert": test[k_cert],
            "cert_learner": auto.candidates_[k_cert].learner, "seconds": secs, "nb_unsuppressed": unsup,
            **pooled_baselines(X, y, tr, te, cb)}


def aligned_world(share: float = 0.5):
    """An experiment (``--world aligned``): the simulated rows of a summary without pair tables, ``share`` of them with
    the features coupled instead of independent given the class.

    The first-order tables fix each feature's class-conditional distribution, not how features go together; the
    default simulation takes them independent (naive Bayes's own world). The coupled rows take the other extreme
    that reproduces the same tables: per row one u ~ U(0, 1) drives every feature through its conditional quantile,
    each feature's levels ordered by how strongly they indicate the row's class (log p(x | y) − log p(x | not y)), so
    a row's features all point the same way — evidence counted once by a rule that reads one feature, many times by
    one that adds them up. Both worlds reproduce every first-order table."""
    import marg.learners.choice.cross_site as cs
    from marg.learners.features.structure import chow_liu_forest

    plain = cs.tan_sample

    def sample(summary, draws=cs.DRAWS, seed=cs.SEED):
        base = plain(summary, draws, seed)
        if chow_liu_forest(summary)[0] or summary.codebook.numeric_names:
            return base
        cb, lab, K = summary.codebook, summary.codebook.label.name, summary.n_classes
        rng = np.random.default_rng(seed + 77)
        X = base.X.copy()
        per = base.y.size // K
        k = int(round(share * per))
        for y in range(K):
            rows = np.arange(y * per, y * per + k)
            u = rng.random(k)
            for j, f in enumerate(cb.features):
                N = np.clip(np.asarray(summary.counts((f.name, lab)), dtype=np.float64), 0.0, None) + 1e-9
                p = N[:, y] / N[:, y].sum()
                rest = np.delete(N, y, axis=1).sum(axis=1)
                order = np.argsort(np.log(p) - np.log(rest / rest.sum()))  # least to most indicative of y
                cdf = np.cumsum(p[order])
                X[rows, j] = order[np.minimum(np.searchsorted(cdf, u * cdf[-1]), p.size - 1)]
        return cs.TanSample(X, base.y, base.w)

    cs.tan_sample = sample


def label(r: dict) -> str:
    return r["learner"] + ("" if not r["params"] else "(" + ",".join(f"{v}" for v in r["params"].values()) + ")")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--sets", default="bcw,clvheart,huheart,credit,vote")
    ap.add_argument("--dump", default="")
    ap.add_argument("--epsilon", type=float, default=None,
                    help="DP at this ε per site (the export's DP defaults) instead of exact with suppression")
    ap.add_argument("--world", default="tan", choices=("tan", "aligned"),
                    help="an experiment: 'aligned' simulates half the rows of a pair-free summary with coupled "
                         "features")
    ap.add_argument("--estimate", default=None, choices=("loso", "optimism"),
                    help="the estimate of exact releases (marg.learners.choice.cross_site.EXACT_ESTIMATE; default: "
                         "leave-one-site-out)")
    ap.add_argument("--heldout", type=float, default=0.0,
                    help="each site holds out this share of its training patients for an evaluation round of the top K")
    a = ap.parse_args()
    if a.estimate == "optimism":
        import marg.learners.choice.cross_site as cs
        from marg.learners.choice.study_bootstrap import optimism_errors

        cs.EXACT_ESTIMATE = optimism_errors
    if a.world == "aligned":
        aligned_world()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()} (loaded); "
          + ("exact, min-cell suppression" if a.epsilon is None else f"DP, ε = {a.epsilon:g} per site") + "\n")
    print("| set | split | n (sites) | suppressed cells | auto (chose) | --prefer certificate (chose) | candidates' "
          "test errors | nb rows | lr rows | nb, unsuppressed tables | larger class | s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    out = []
    for name in a.sets.split(","):
        for rep in range(a.reps):
            r = one_split(name, rep, a.epsilon, a.heldout)
            out.append(r)
            cands = ", ".join(f"{label(c)} {c['test']:.3f}" for c in r["rows"])
            print(f"| {NAMES.get(name, name)} | {rep} | {r['n_train']} ({'/'.join(map(str, r['sites']))}) | "
                  f"{r['suppressed']} | {r['auto']:.3f} ({r['auto_learner']}) | {r['cert']:.3f} ({r['cert_learner']}) "
                  f"| {cands} | {r['nb_rows']:.3f} | {r['lr_rows']:.3f} | {r['nb_unsuppressed']:.3f} | "
                  f"{r['larger']:.3f} | {r['seconds']:.0f} |"
                  + (f" held out {r['heldout']:.3f} ({r['heldout_kept']}, K = "
                                              f"{r['heldout_k']}) |" if a.heldout > 0 else ""),
                  flush=True)
    print("\n| set | auto | --prefer certificate | best candidate | nb rows | lr rows | nb, unsuppressed tables | "
          "larger class | auto ≤ larger + 0.01 | auto within 0.02 of the best candidate | auto − nb rows (target ≤ "
          "0.02 where nb rows beats the larger class by ≥ 0.05) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in a.sets.split(","):
        rs = [r for r in out if r["set"] == name]
        best = [min(c["test"] for c in r["rows"] if c["certificate"] is not None) for r in rs]
        m = lambda key: np.mean([r[key] for r in rs])  # noqa: E731
        ok_l = sum(r["auto"] <= r["larger"] + 0.01 + 1e-12 for r in rs)
        ok_b = sum(r["auto"] <= b + 0.02 + 1e-12 for r, b in zip(rs, best))
        if a.heldout > 0:
            ok_h = sum(r["heldout"] <= b + 0.02 + 1e-12 for r, b in zip(rs, best))
            ok_hl = sum(r["heldout"] <= r["larger"] + 0.01 + 1e-12 for r in rs)
            print(f"<!-- {NAMES.get(name, name)}: with the evaluation round (held out {a.heldout:g}) mean "
                  f"{m('heldout'):.3f}, ≤ larger + 0.01 {ok_hl}/{len(rs)}, within 0.02 of the best candidate "
                  f"{ok_h}/{len(rs)} -->")
        print(f"| {NAMES.get(name, name)} | {m('auto'):.3f} | {m('cert'):.3f} | {np.mean(best):.3f} | "
              f"{m('nb_rows'):.3f} | {m('lr_rows'):.3f} | {m('nb_unsuppressed'):.3f} | {m('larger'):.3f} | "
              f"{ok_l}/{len(rs)} | {ok_b}/{len(rs)} | {m('auto') - m('nb_rows'):+.3f}"
              + ("" if m('larger') - m('nb_rows') >= 0.05 else " (no target)") + " |")
    if a.dump:
        Path(a.dump).write_text(json.dumps(out))


if __name__ == "__main__":
    main()
