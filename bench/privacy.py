"""The default path under differential privacy, side by side with row-level DP peers (issue 15).

Run: python bench/privacy.py [--reps 5] [--epsilons 0.25,0.5,1,2,4] [--sets adult,credit,votes,kr-vs-kp]

Protocol (every number from one run):
- A seeded 80/20 split per repetition; the training rows go to three sites of unequal size
  (50 / 30 / 20 %), each spending ε **on its own patients** (ε per site).
- **The default path** is what a user gets without options: each site runs the export
  pipeline of ``marg export DATA --epsilon ε`` with every default (``protocols.export.
  export_site``: ``--stats auto`` = first-order and every pair table, the Gaussian
  mechanism at (ε, δ = 1e-6) via zCDP, the least-squares budget split) and writes a bundle;
  the learner runs ``marg learn BUNDLES`` with every default (``protocols.load.load_summary``
  then ``marg.learners.learn.learn(summary, "auto")``: leave-one-site-out choice, the chosen model's
  certificate). Reported: mean test error, the learners chosen, the certificate, how often
  certificate ≥ test error, and how often the certificate is < 0.30.
- ``renyi``: the same bundles, ``marg learn --learner renyi`` (automatic ridge; never
  worse than the majority vote is the target). ``exact``: the same path without noise
  (``--stats all --min-cell 1``), the reference for "within 3 points".
- adult, ε ≥ 1: the **holdout path** (:func:`certified_path`): the same default export with
  ``--holdout 0.2`` at 0.75·ε, the default learn, each site's ``--evaluate`` release of the
  model's confusion matrix on its held-out rows at 0.25·ε, ``marg certify``: a certificate of
  the rule's error rate from rows it never saw.
- adult only, on the pooled training rows: diffprivlib's LogisticRegression at ε (one-hot
  codes, ``data_norm`` = √p: every row has norm √p) and scikit-learn's non-private
  LogisticRegression; MST → LogisticRegression is quoted from the issue (its install pulls
  several GB), not run.
- adult uses the public codebook below (bin edges are round numbers); the other sets use
  codebooks whose categorical levels are the public value lists and whose continuous
  columns are cut at the training rows' terciles (not a DP step: the same codebook serves
  the exact and the private runs).
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
sys.path.insert(0, str(ROOT))

from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label, NumericFeature  # noqa: E402
from marg.marginals.sources.base import Source  # noqa: E402
from marg.marginals.counts.counting import count_tables  # noqa: E402

DATASETS = Path(os.environ.get("MARG_DATASETS", ROOT.parent / "shared" / "datasets"))
DATA = DATASETS / "adult" / "adult.tsv.gz"
SHARES = (0.5, 0.3, 0.2)
PEERS_ISSUE = {  # measured by the issue's author on pooled adult rows
    "diffprivlib LR (issue)": {0.25: 0.241, 0.5: 0.228, 1.0: 0.188, 2.0: 0.184, 4.0: 0.157},
    "MST → LR (issue)": {0.25: 0.202, 0.5: 0.200, 1.0: 0.192, 2.0: 0.190, 4.0: 0.189},
}
TARGET = {0.25: 0.185, 0.5: 0.170, 1.0: 0.155, 2.0: 0.150, 4.0: 0.148}

# Public bin edges for adult's continuous columns (round numbers, not data quantiles).
EDGES = {
    "age": (25.0, 35.0, 45.0, 55.0, 65.0),
    "fnlwgt": (100000.0, 200000.0, 300000.0),
    "capital-gain": (0.0, 5000.0),
    "capital-loss": (0.0, 1500.0),
    "hours-per-week": (34.0, 40.0, 49.0),
    "education-num": tuple(k + 0.5 for k in range(1, 16)),  # one bin per value 1..16
}
# PMLB label-encoded the categorical columns to 0..m−1 (m from the UCI domain).
LEVELS = {"workclass": 9, "education": 16, "marital-status": 7, "occupation": 15,
          "relationship": 6, "race": 5, "sex": 2, "native-country": 42}
ORDER = ["age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
         "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country"]
RAW: dict = {}  # dataset → its raw rows (for the certified path's site files)
UCI = {
    "credit": ("credit-a/credit-a.tsv.gz", ["A2", "A3", "A8", "A11", "A14", "A15"]),
    "votes": ("house-votes-84/house-votes-84.tsv.gz", []),
    "kr-vs-kp": ("kr-vs-kp/kr-vs-kp.tsv.gz", []),
}


class ArraySource(Source):
    """A site's rows already coded by the codebook (the bench skips CSV parsing; the export
    pipeline after counting is the one ``marg export`` runs)."""

    def __init__(self, name: str, X: np.ndarray, y: np.ndarray):
        self.name, self.X, self.y = name, X, y

    def describe(self) -> dict:
        return {"kind": "bench-array", "location": self.name}

    def columns(self) -> list[str]:
        return []

    def count(self, codebook, cliques, progress=None):
        return count_tables(codebook, self.X, self.y, cliques), int(self.y.size)

    def draft_batches(self, columns):
        raise NotImplementedError("bench source")


def adult_codebook() -> Codebook:
    feats = []
    for name in ORDER:
        if name in EDGES:
            feats.append(NumericFeature(name, edges=EDGES[name]))
        else:
            feats.append(CategoricalFeature(name, tuple(str(k) for k in range(LEVELS[name]))))
    return Codebook(features=tuple(feats), label=Label("target", ("0", "1")))


def load_set(name: str):
    """(codebook-maker(train_idx) → (cb, X codes), y) for a dataset."""
    import pandas as pd

    if name == "adult":
        from marg.marginals.data.encoding import encode_file

        cb = adult_codebook()
        enc = encode_file(DATA, cb)
        RAW["adult"] = pd.read_csv(DATA, sep="\t")
        return (lambda tr: (cb, enc.X)), enc.y
    df = pd.read_csv(DATASETS / UCI[name][0], sep="\t")
    y_raw = df.pop("target").to_numpy()
    classes = np.unique(y_raw)
    y = np.searchsorted(classes, y_raw).astype(np.int64)
    V = df.to_numpy(dtype=np.float64)
    binned = UCI[name][1]

    def make(tr):
        feats, cols = [], []
        for j, c in enumerate(df.columns):
            v = V[:, j]
            if c in binned:
                edges = np.unique(np.quantile(v[tr], [1 / 3, 2 / 3]))
                feats.append(NumericFeature(c, edges=tuple(float(e) for e in edges)))
                cols.append(np.searchsorted(edges, v, side="left"))
            else:
                levels = np.unique(v)
                feats.append(CategoricalFeature(c, tuple(f"{x:g}" for x in levels)))
                cols.append(np.searchsorted(levels, v))
        cb = Codebook(features=tuple(feats), label=Label("target", tuple(f"{c}" for c in classes)))
        return cb, np.column_stack(cols).astype(np.float64)

    return make, y


EXPORT_OPTIONS: dict = {}  # --first-order-share / --stats experiments (empty: the defaults)


def adult_style_split(make, n: int, rep: int):
    """Split ``rep`` of a set of ``n`` rows: a seeded 20 % test share, the rest encoded by ``make``
    and cut into three sites of :data:`SHARES`; returns (test rows, train rows, codebook, X, sites)."""
    rng = np.random.default_rng(1000 + rep)
    perm = rng.permutation(n)
    n_te = n // 5
    te, tr = perm[:n_te], perm[n_te:]
    cb, X = make(tr)
    cuts = np.cumsum([int(SHARES[0] * tr.size), int(SHARES[1] * tr.size)])
    return te, tr, cb, X, np.split(tr, cuts)


def default_path(cb, X, y, sites, eps, workdir: Path, learner: str = "auto"):
    """Export every site with the defaults (ε per site) and learn with the defaults."""
    from marg.learners.learn import learn
    from marg.protocols.export import export_site
    from marg.protocols.load import load_summary

    paths = []
    for k, s in enumerate(sites):
        out = workdir / f"site{k}.bundle"
        kw = {"stats": "all", "min_cell": 1} if eps is None else {"epsilon": eps, **EXPORT_OPTIONS}
        export_site(ArraySource(f"site{k}", X[s], y[s]), cb, f"site{k}", out, **kw)
        paths.append(out)
    summary = load_summary(paths, allow_unsigned=True)
    models = {}
    from marg.errors import InputError

    for name in ([learner] if isinstance(learner, str) else learner):
        try:
            models[name] = learn(summary, name, {}).model
        except InputError as exc:  # e.g. renyi without pair tables in an experiment
            log(f"{name}: {exc}")
    return models
    return models


PEER_SCRIPT = """
import json, sys
import numpy as np
from diffprivlib.models import LogisticRegression
d = np.load(sys.argv[1])
out = {}
for eps in json.loads(sys.argv[2]):
    m = LogisticRegression(epsilon=eps, data_norm=float(d["norm"]), max_iter=2000, random_state=int(d["seed"]))
    out[str(eps)] = float(np.mean(m.fit(d["A"], d["ytr"]).predict(d["B"]) != d["yte"]))
print(json.dumps(out))
"""


HOLDOUT = 0.2  # the certified path: fraction of each site's rows held out
EVAL_SHARE = 0.25  # ... and the share of ε spent on the evaluation release (the rest on the tables)


def certified_path(raw, cb, X, y, sites, eps, workdir: Path):
    """The holdout path: export at (1 − EVAL_SHARE)·ε with ``--holdout``, learn (defaults),
    each site releases the model's confusion matrix on its held-out rows at EVAL_SHARE·ε
    (``--evaluate``, Laplace), ``marg certify``. ε per site in total (sequential composition).

    Sites' rows are written as files (the holdout is defined on a data file's row numbers).
    """
    from marg.api import certify_with_holdout
    from marg.learners.learn import learn
    from marg.protocols.evaluation import evaluate_site, model_digest
    from marg.protocols.export import export_site
    from marg.protocols.load import load_summary

    paths, files = [], []
    for k, s in enumerate(sites):
        f = workdir / f"site{k}.tsv"
        raw.iloc[s].to_csv(f, sep="\t", index=False)
        files.append(f)
        out = workdir / f"site{k}.bundle"
        export_site(f, cb, f"site{k}", out, epsilon=(1 - EVAL_SHARE) * eps, holdout=HOLDOUT,
                    ledger_dir=workdir / f"led{k}")
        paths.append(out)
    model = learn(load_summary(paths, allow_unsigned=True), "auto", {}).model
    mpath = workdir / "model.json"
    model.save(mpath)
    evals = []
    for k, f in enumerate(files):
        ev = workdir / f"site{k}.eval"
        evaluate_site(f, model, model_digest(mpath), f"site{k}", ev, epsilon=EVAL_SHARE * eps,
                      ledger_dir=workdir / f"led{k}")
        evals.append(ev)
    res = certify_with_holdout(mpath, evals, allow_unsigned=True)
    return res.model


def peers(X, y, tr, te, eps_list, reps_seed):
    """diffprivlib and scikit-learn LogisticRegression on one-hot codes of the pooled rows.

    diffprivlib 0.6 does not run on scikit-learn ≥ 1.6 (removed ``multi_class``); then the
    peer runs in the Python of ``$MARG_PEER_PYTHON`` (a venv with ``scikit-learn<1.6
    diffprivlib``), on the same arrays.
    """
    import json
    import subprocess

    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import OneHotEncoder

    enc = OneHotEncoder(handle_unknown="ignore").fit(X)
    A, B = enc.transform(X[tr]).toarray(), enc.transform(X[te]).toarray()
    out = {"LR (non-private)": float(np.mean(LogisticRegression(max_iter=2000).fit(A, y[tr]).predict(B) != y[te]))}
    norm = math.sqrt(X.shape[1])  # a one-hot row of p features has norm √p
    try:
        from diffprivlib.models import LogisticRegression as DPLR

        for eps in eps_list:
            m = DPLR(epsilon=eps, data_norm=norm, max_iter=2000, random_state=reps_seed).fit(A, y[tr])
            out[("diffprivlib LR", eps)] = float(np.mean(m.predict(B) != y[te]))
        return out
    except (ImportError, TypeError) as exc:
        py = os.environ.get("MARG_PEER_PYTHON")
        if not py:
            log(f"diffprivlib peer skipped ({type(exc).__name__}: {exc}); set MARG_PEER_PYTHON")
            return out
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "peer.npz"
        np.savez(f, A=A, B=B, ytr=y[tr], yte=y[te], norm=norm, seed=reps_seed)
        res = subprocess.run([py, "-c", PEER_SCRIPT, str(f), json.dumps(eps_list)], capture_output=True, text=True,
                             check=True)
    for k, v in json.loads(res.stdout).items():
        out[("diffprivlib LR", float(k))] = v
    return out


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main() -> None:
    import warnings

    warnings.filterwarnings("ignore")
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--epsilons", default="0.25,0.5,1,2,4")
    ap.add_argument("--sets", default="adult,credit,votes,kr-vs-kp")
    ap.add_argument("--uci-epsilons", default="1", help="ε for the smaller sets")
    ap.add_argument("--first-order-share", type=float, default=None, help="experiment: not the default split")
    ap.add_argument("--stats", default=None, help="experiment: not the default --stats auto")
    ap.add_argument("--no-certified", action="store_true", help="skip the holdout path (adult, ε ≥ 1)")
    args = ap.parse_args()
    if args.first_order_share is not None:
        EXPORT_OPTIONS["first_share"] = args.first_order_share
    if args.stats is not None:
        EXPORT_OPTIONS["stats"] = args.stats
    eps_adult = [float(e) for e in args.epsilons.split(",")]
    eps_uci = [float(e) for e in args.uci_epsilons.split(",")]
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"numpy {np.__version__}; {args.reps} seeded splits per set; sites 50/30/20 % of the training rows\n")
    rows = {}  # (set, ε, what) -> list of (err, cert, chosen)
    extra = {}
    for name in [s.strip() for s in args.sets.split(",") if s.strip()]:
        make, y = load_set(name)
        eps_list = eps_adult if name == "adult" else eps_uci
        for rep in range(args.reps):
            te, tr, cb, X, sites = adult_style_split(make, y.size, rep)
            maj = int(np.argmax(np.bincount(y[tr])))
            rows.setdefault((name, None, "majority"), []).append((float(np.mean(y[te] != maj)), math.nan, ""))
            for eps in [None] + eps_list:
                t0 = time.perf_counter()
                with tempfile.TemporaryDirectory() as d:
                    models = default_path(cb, X, y, sites, eps, Path(d), learner=("auto", "renyi"))
                for what in ("auto", "renyi"):
                    m = models.get(what)
                    if m is None:
                        rows.setdefault((name, eps, what), []).append((math.nan, math.nan, "-"))
                        continue
                    err = float(np.mean(m.predict(X[te]) != y[te]))
                    rows.setdefault((name, eps, what), []).append((err, float(m.worst_case_error), m.learner))
                log(f"{name} rep {rep} ε={eps}: auto {rows[(name, eps, 'auto')][-1]}, renyi "
                    f"{rows[(name, eps, 'renyi')][-1][0]:.4f} ({time.perf_counter() - t0:.1f} s)")
            if name == "adult" and not args.no_certified:
                for eps in eps_list:
                    if eps < 1:
                        continue
                    t0 = time.perf_counter()
                    with tempfile.TemporaryDirectory() as d:
                        m = certified_path(RAW["adult"], cb, X, y, sites, eps, Path(d))
                    err = float(np.mean(m.predict(X[te]) != y[te]))
                    rows.setdefault((name, eps, "certified"), []).append((err, float(m.worst_case_error), m.learner))
                    log(f"{name} rep {rep} ε={eps}: certified path {rows[(name, eps, 'certified')][-1]} "
                        f"({time.perf_counter() - t0:.1f} s)")
            if name == "adult":
                for k, v in peers(X, y, tr, te, eps_list, rep).items():
                    extra.setdefault(k, []).append(v)
        report(name, eps_list, rows, extra)


def report(name, eps_list, rows, extra) -> None:
    maj = np.mean([r[0] for r in rows[(name, None, "majority")]])
    ex = rows[(name, None, "auto")]
    ex_err = np.mean([r[0] for r in ex])
    ex_r = np.mean([r[0] for r in rows[(name, None, "renyi")]])
    print(f"\n### {name}: majority vote {maj:.4f}; exact summaries (all pairs): default {ex_err:.4f} "
          f"(chose {', '.join(sorted(set(r[2] for r in ex)))}), renyi {ex_r:.4f}\n")
    head = ("| ε per site (Gaussian, δ = 1e-6) | default path: test error | chose | certificate (mean) | cert ≥ error "
            "| cert < 0.30 | renyi error | Δ vs exact |")
    peers_cols = []
    if name == "adult":
        peers_cols = ["diffprivlib LR", *PEERS_ISSUE, "target"]
        head += " " + " | ".join(peers_cols) + " |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for eps in eps_list:
        r = rows[(name, eps, "auto")]
        err = np.array([x[0] for x in r])
        cert = np.array([x[1] for x in r])
        chose = {c: sum(1 for x in r if x[2] == c) for c in sorted(set(x[2] for x in r))}
        rr = np.mean([x[0] for x in rows[(name, eps, "renyi")]])
        line = (f"| {eps:g} | {err.mean():.4f} ± {err.std():.4f} | {', '.join(f'{c}×{k}' for c, k in chose.items())} | "
                f"{cert.mean():.3f} | {np.mean(cert >= err):.0%} | {np.mean(cert < 0.30):.0%} | {rr:.4f} | "
                f"{100 * (err.mean() - ex_err):+.1f} pt |")
        if name == "adult":
            dp = extra.get(("diffprivlib LR", eps))
            line += f" {np.mean(dp):.4f} |" if dp else " (not installed) |"
            for k in PEERS_ISSUE:
                line += f" {PEERS_ISSUE[k][eps]:.3f} |" if eps in PEERS_ISSUE[k] else " – |"
            line += f" {TARGET.get(eps, math.nan):.3f} |"
        print(line)
    cert_eps = [e for e in eps_list if (name, e, "certified") in rows]
    if cert_eps:
        print(f"\n**Holdout path** (adult; `--holdout {HOLDOUT}`, tables at {1 - EVAL_SHARE:g}·ε, "
              f"`--evaluate` at {EVAL_SHARE:g}·ε with Laplace noise, `marg certify`; ε per site in total):\n")
        print("| ε per site | test error | chose | holdout certificate (mean) | cert ≥ error | cert < 0.30 |")
        print("|---|---|---|---|---|---|")
        for eps in cert_eps:
            r = rows[(name, eps, "certified")]
            err = np.array([x[0] for x in r])
            cert = np.array([x[1] for x in r])
            chose = {c: sum(1 for x in r if x[2] == c) for c in sorted(set(x[2] for x in r))}
            print(f"| {eps:g} | {err.mean():.4f} ± {err.std():.4f} | "
                  f"{', '.join(f'{c}×{k}' for c, k in chose.items())} | {cert.mean():.4f} | "
                  f"{np.mean(cert >= err):.0%} | {np.mean(cert < 0.30):.0%} |")
    if name == "adult" and "LR (non-private)" in extra:
        print(f"\nnon-private LogisticRegression on the same pooled rows: {np.mean(extra['LR (non-private)']):.4f}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
