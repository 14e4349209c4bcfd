"""Holdout certificates for small hospitals under DP (issue 29), side by side in one run.

Run: nice -n 10 python bench/holdout_small.py [--reps 5] [--sets credit,bcw,vote,clvheart,huheart,adult]
                                              [--adult-reps 5] [--epsilon 1]

Protocol (every number from one run): per set and repetition a seeded 70/30 split; the 70 %
go to three sites (50 / 30 / 20 %), each written as a data file (the holdout is defined on a
file's rows); each site spends ε = 1 **in total** (training tables + evaluation). Routes,
on the same split:

- ``previous``: ``--holdout 0.2``, tables at 0.75·ε, ``--evaluate --evaluate-content
  confusion`` at 0.25·ε, and the previous release's bound (half-widths per cell sum, union
  bound over three parts, Clopper–Pearson at α/2; recomputed here from the same bundles);
- ``confusion``: the same release, the exact bound of :mod:`marg.learners.certification.holdout_certificate`;
- ``errors 0.75/0.25``: the same model, the default error-count release at 0.25·ε;
- ``planned``: ``--holdout auto``: fraction and ε split of :func:`plan_holdout` for the
  sites' row counts (declared), 0.2 as the expected error, the codebook's feature count;
  the error-count release at the planned ε; its own model (fewer training rows).

Every model is learned by ``marg learn``'s default (``auto``) from the sites' DP bundles
(Gaussian tables, the default export). Reported per route: the test error on the 30 %, the
certificate, and whether error ≤ certificate ≤ error + 0.20 (every run). For the sets of
300–435 patients also the patients (all three sites, before the 70/30 split) that the
planned route would need for an expected certificate ≤ error + 0.20
(:func:`marg.learners.certification.holdout_plan.needed_for` at the measured error).

Datasets: credit-a (codebook of bench/privacy.py: public levels, tercile edges of the
training rows), breast-w, house-votes-84, cleveland, hungarian (public codebooks of
bench/codebooks, decoded by bench/boost_data.py), adult (bench/privacy.py's public codebook).
"""

from __future__ import annotations

import argparse
import math
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
sys.path.append(str(ROOT / "bench"))  # for privacy.py (credit-a, adult)

EPS_SPLIT = 0.25  # the previous fixed share of ε for the evaluation
HOLDOUT = 0.2
SHARES = (0.5, 0.3, 0.2)
NAMES = {"credit": "credit-a", "bcw": "breast-w", "vote": "house-votes-84", "clvheart": "cleveland",
         "huheart": "hungarian", "adult": "adult"}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def load(name: str):
    """(make(train_idx) → codebook, text columns writer rows(idx) → dict of columns, y)."""
    import pandas as pd

    if name in ("credit", "adult"):
        import privacy as pv

        make, y = pv.load_set(name)
        if name == "adult":
            raw = pv.RAW["adult"]
            return (lambda tr: make(tr)[0]), (lambda cb, idx: raw.iloc[idx]), y
        df = pd.read_csv(pv.DATASETS / pv.UCI["credit"][0], sep="\t")
        binned = set(pv.UCI["credit"][1])
        text = {c: ([repr(float(v)) for v in df[c]] if c in binned else [f"{v:g}" for v in df[c]])
                for c in df.columns if c != "target"}
        classes = np.unique(df["target"].to_numpy())
        text["target"] = [f"{classes[k]}" for k in y]
        tdf = pd.DataFrame(text)
        return (lambda tr: make(tr)[0]), (lambda cb, idx: tdf.iloc[idx]), y
    import importlib.util

    spec = importlib.util.spec_from_file_location("boost_data", ROOT / "bench" / "boost_data.py")
    bd = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bd)  # bench/privacy.py takes bench/ off sys.path when imported

    cb, X, y = bd.load(name)
    cols, labels = bd._decode(name, pd.read_csv(bd.DATA / bd.FILES[name], sep="\t"))
    tdf = pd.DataFrame({f: cols[f] for f in cb.feature_names})
    tdf[cb.label.name] = labels
    return (lambda tr: cb), (lambda cb_, idx: tdf.iloc[idx]), y


def previous_bound(evals, coverage=0.95) -> float:
    """The previous release's bound on confusion releases: e⁺ = ⌈e + q_e⌉, n⁻ = ⌊n − q_n⌋ with
    half-widths at α/4 over the K(K−1) / K² cells, Clopper–Pearson at α/2."""
    from scipy.stats import beta

    from marg.marginals.noise_tails import halfwidth
    from marg.protocols.bundle import Bundle

    N, draws = None, []
    for p in evals:
        t = Bundle.from_bytes(Path(p).read_bytes()).tables[0]
        N = t.counts.astype(float) if N is None else N + t.counts
        draws += list(t.noise.draws(True))
    K = N.shape[0]
    off = ~np.eye(K, dtype=bool)
    e, n = float(N[off].sum()), float(N.sum())
    a = 1 - coverage
    q_e = halfwidth([(m, b, d, c * K * (K - 1)) for m, b, d, c in draws], a / 4)
    q_n = halfwidth([(m, b, d, c * K * K) for m, b, d, c in draws], a / 4)
    e_up, n_low = max(0.0, math.ceil(e + q_e - 1e-9)), math.floor(n - q_n + 1e-9)
    if n_low <= 0 or e_up >= n_low:
        return 1.0
    return float(beta.ppf(1 - a / 2, e_up + 1, n_low - e_up))


def train(files, cb, fraction, eps_tables, work: Path, tag: str):
    from marg.learners.learn import learn
    from marg.protocols.export import export_site
    from marg.protocols.load import load_summary

    paths = []
    for k, f in enumerate(files):
        out = work / f"{tag}{k}.bundle"
        export_site(f, cb, f"site{k}", out, epsilon=eps_tables, holdout=fraction, ledger_dir=work / f"{tag}led{k}")
        paths.append(out)
    model = learn(load_summary(paths, allow_unsigned=True), "auto", {}).model
    mpath = work / f"{tag}model.json"
    model.save(mpath)
    return model, mpath


def evaluate(files, model, mpath, eps_eval, content, work: Path, tag: str):
    from marg.api import certify_with_holdout
    from marg.protocols.evaluation import evaluate_site, model_digest

    evals = []
    for k, f in enumerate(files):
        ev = work / f"{tag}{k}.{content}.eval"
        evaluate_site(f, model, model_digest(mpath), f"site{k}", ev, epsilon=eps_eval, ledger_dir=work / f"{tag}led{k}",
                      content=content)
        evals.append(ev)
    return certify_with_holdout(mpath, evals, allow_unsigned=True), evals


def one_run(name, make, rows_of, y, rep, eps, work: Path) -> dict:
    from marg.learners.certification.holdout_plan import plan_holdout
    from marg.marginals.data.encoding import encode_file

    rng = np.random.default_rng(2900 + rep)
    perm = rng.permutation(y.size)
    n_te = int(round(0.3 * y.size))
    te, tr = perm[:n_te], perm[n_te:]
    cb = make(tr)
    cuts = np.cumsum([int(SHARES[0] * tr.size), int(SHARES[1] * tr.size)])
    sites = np.split(tr, cuts)
    files = []
    for k, s in enumerate(sites):
        f = work / f"site{k}.csv"
        rows_of(cb, s).to_csv(f, index=False, na_rep="")
        files.append(f)
    test = work / "test.csv"
    rows_of(cb, te).to_csv(test, index=False, na_rep="")
    enc_te = encode_file(test, cb)
    out: dict = {}
    # previous / confusion / errors at the fixed split: one model
    model, mpath = train(files, cb, HOLDOUT, (1 - EPS_SPLIT) * eps, work, "fixed")
    err = float(np.mean(model.predict(enc_te.X) != enc_te.y))
    res, evals = evaluate(files, model, mpath, EPS_SPLIT * eps, "confusion", work, "fixed")
    out["previous"] = (err, previous_bound(evals), model.learner)
    out["confusion"] = (err, res.bound.value, model.learner)
    res, _ = evaluate(files, model, mpath, EPS_SPLIT * eps, "errors", work, "fixed")
    out["errors 0.75/0.25"] = (err, res.bound.value, model.learner)
    # planned
    declared = [int(s.size) for s in sites]
    plan = plan_holdout(declared, eps, 0.2, n_features=cb.n_features)
    model, mpath = train(files, cb, plan.fraction, plan.epsilon_tables, work, "plan")
    err = float(np.mean(model.predict(enc_te.X) != enc_te.y))
    res, _ = evaluate(files, model, mpath, plan.epsilon_evaluate, "errors", work, "plan")
    out["planned"] = (err, res.bound.value, model.learner)
    out["plan"] = plan
    out["declared"] = declared
    return out


def main() -> None:
    import warnings

    warnings.filterwarnings("ignore")
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--adult-reps", type=int, default=5)
    ap.add_argument("--sets", default="credit,bcw,vote,clvheart,huheart,adult")
    ap.add_argument("--epsilon", type=float, default=1.0)
    args = ap.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"ε = {args.epsilon:g} per site in total; sites 50/30/20 % of the 70 % training part\n")
    from marg.learners.certification.holdout_plan import needed_for

    routes = ("previous", "confusion", "errors 0.75/0.25", "planned")
    for name in [s.strip() for s in args.sets.split(",") if s.strip()]:
        make, rows_of, y = load(name)
        reps = args.adult_reps if name == "adult" else args.reps
        runs = []
        for rep in range(reps):
            t0 = time.perf_counter()
            with tempfile.TemporaryDirectory() as d:
                runs.append(one_run(name, make, rows_of, y, rep, args.epsilon, Path(d)))
            log(f"{name} rep {rep}: " + ", ".join(f"{r} {runs[-1][r][0]:.3f}/{runs[-1][r][1]:.3f}" for r in routes)
                + f" ({time.perf_counter() - t0:.0f} s)")
        p = runs[0]["plan"]
        print(f"### {NAMES[name]} ({y.size} patients; sites {'/'.join(map(str, runs[0]['declared']))} training rows; "
              f"plan: hold out {p.fraction:.0%}, tables ε = {p.epsilon_tables:.2g}, evaluation ε = "
              f"{p.epsilon_evaluate:.2g}, expected certificate {p.expected_certificate:.3f})\n")
        print("| route | test error (mean) | certificate (mean) | per run (error / certificate) | error ≤ cert | cert "
              "≤ error + 0.20 |")
        print("|---|---|---|---|---|---|")
        for r in routes:
            e = np.array([x[r][0] for x in runs])
            c = np.array([x[r][1] for x in runs])
            per = ", ".join(f"{a:.3f}/{b:.3f}" for a, b in zip(e, c))
            print(f"| {r} | {e.mean():.4f} | {c.mean():.4f} | {per} | {int(np.sum(c >= e))}/{len(runs)} | "
                  f"{int(np.sum(c <= e + 0.20))}/{len(runs)} |")
        if name in ("vote", "clvheart", "huheart"):
            e = float(np.mean([x["planned"][0] for x in runs]))
            need = needed_for(runs[0]["declared"], p.epsilon_evaluate, e, None, p.fraction)
            tot = None if need["rows"] is None else int(math.ceil(sum(need["rows"]) / 0.7))
            print(f"\nplanned route at the measured error {e:.3f}: an expected certificate ≤ error + 0.20 needs "
                  f"{'/'.join(map(str, need['rows'])) if need['rows'] else '-'} training rows per site "
                  f"(≈ {tot} patients with the 70/30 split; this set has {y.size}), or evaluation ε "
                  f"{need['epsilon'] if need['epsilon'] is None else round(need['epsilon'], 3)} per site at these rows")
        print()


if __name__ == "__main__":
    main()
