"""Seed 004's UCI table, re-run from marginals only: test error % of DCC, greedy DCC, MRC and Rényi.

Run: python bench/uci.py [--reps 20] [--adult-reps R] [--datasets adult,credit,...] [--learners ...] [--jobs 2]

Five UCI sets of the Discrete Rényi Classifiers paper (seed 004) from
``../shared/datasets`` (PMLB copies, see MANIFEST.md): adult, credit-a, kr-vs-kp,
promoters, house-votes-84. Each repetition draws a random 70/30 split (seed = repetition
number), builds the codebook (categorical columns: every PMLB code of the column, a public
fact of the encoding; continuous columns: 5 quantile bins whose edges come from the
training split only), counts the first-order and all pair-with-label tables of the
TRAINING rows (``Summary.from_rows(..., stats="all")``) and fits every learner on that
Summary alone — no row reaches a learner. Test error = share of test rows whose
deterministic prediction (argmax for DCC/MRC, MAP for Rényi) is wrong.

Learners (all pure minimax / least squares on the empirical marginals, λ = 0, as in the
papers): ``dcc`` = :class:`learners.classifiers.dcc.DCC` (s=0, maximum spanning forest on
I(X_i; X_j | Y), empty cells by the default "evidence" policy); ``dcc-label`` = the same on
the forest of largest I(X_i, X_j; Y); ``gdcc`` = greedy DCC (s=0); ``mrc`` = first-order
MRC (s=0); ``renyi`` = :class:`learners.classifiers.renyi.RenyiClassifier` (MAP rule, δ̃^map of seed
004). Optional: ``dcc-free`` (empty="free"), ``dcc-cal`` (λ calibrated to 95% coverage),
``dcc-hinge`` / ``dcc-label-hinge`` (loss="hinge", the published DCC's worst-case hinge
loss, on either forest; its certificate column is the worst-case hinge loss, = 2·R*),
``dcc-all`` (structure="all": every pair, the local-polytope bound R*_L as certificate),
``dcc-all-cal`` (the same with λ calibrated to 95% coverage), ``mrc-cal`` (first-order MRC,
λ calibrated to 95% coverage). A learner that raises on a split is reported as failed
there (counted in the table) instead of stopping the run.

Row-based references (not marginals-only; they see the training rows, so they bound what
the protocol allows rather than compete): ``nb-rows`` = scikit-learn CategoricalNB
(Laplace α = 1) and ``logreg-rows`` = scikit-learn LogisticRegression (C = 1) on the one-hot
codes of the same training rows, scored on the same test rows.

The second table adds, per certified learner, "outside U %": the share of test rows that no
distribution in the uncertainty set reaches with any label (every (x, y) crosses a cell
the fit ruled out), rows about which the certificate says nothing. They show whether a
published figure is reachable at all on these splits (on promoters neither reaches the
published DCC's 5 %).

credit-a: A3, A8, A11, A15 are numeric; A2 and A14 are continuous UCI columns that PMLB
label-encoded (alphabetical order of the UCI strings, which for these zero-padded /
two-digit values is the numeric order, with '?' last), so their codes are binned like the
numeric columns rather than used as 350- and 171-level categoricals.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from marg.learners.classifiers.dcc import DCC  # noqa: E402
from marg.learners.classifiers.mrc import MRC  # noqa: E402
from marg.learners.classifiers.renyi import RenyiClassifier  # noqa: E402
from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label, NumericFeature  # noqa: E402
from marg.marginals.summary import Summary  # noqa: E402

DATA = Path(os.environ.get("MARG_DATASETS", ROOT.parent / "shared" / "datasets"))

# name -> (file, columns to bin)
DATASETS = {
    "adult": ("adult/adult.tsv.gz", ["age", "fnlwgt", "education-num", "capital-gain", "capital-loss",
                                     "hours-per-week"]),
    "credit": ("credit-a/credit-a.tsv.gz", ["A2", "A3", "A8", "A11", "A14", "A15"]),
    "kr-vs-kp": ("kr-vs-kp/kr-vs-kp.tsv.gz", []),
    "promoters": ("molecular_biology_promoters/molecular_biology_promoters.tsv.gz", []),
    "votes": ("house-votes-84/house-votes-84.tsv.gz", []),
}

# Seed 004's table (test error %, 100 random 70/30 splits).
PUBLISHED_COLUMNS = ["δ̃map", "δ̃", "δ̃2map", "δ̃2", "δ̃FS,2map", "δ̃FS,2", "DCC", "gDCC", "MPM", "TAN", "SVM"]
PUBLISHED = {
    "adult": [17, 21, 16, 20, 16, 20, 18, 18, 22, 18, 22],
    "credit": [13, 16, 16, 17, 16, 17, 14, 13, 13, 17, 16],
    "kr-vs-kp": [5, 10, 5, 14, 5, 14, 10, 10, 5, 7, 3],
    "promoters": [6, 16, 3, 4, 3, 4, 5, 3, 6, 44, 9],
    "votes": [3, 4, 3, 4, 2, 4, 3, 3, 4, 8, 5],
}
LEARNERS = ["dcc", "dcc-label", "gdcc", "mrc", "renyi"]


def load(name: str) -> tuple[pd.DataFrame, np.ndarray, list[str]]:
    path = DATA / DATASETS[name][0]
    if not path.exists():
        raise SystemExit(f"dataset not found: {path} (set MARG_DATASETS)")
    df = pd.read_csv(path, sep="\t")
    y = df["target"].to_numpy()
    return df.drop(columns="target"), y, DATASETS[name][1]


def split_codes(df: pd.DataFrame, y: np.ndarray, binned: list[str], seed: int, bins: int):
    """Codebook and integer codes for one random 70/30 split (bin edges from the training rows)."""
    rng = np.random.default_rng(seed)
    n = len(y)
    perm = rng.permutation(n)
    ntr = int(round(0.7 * n))
    tr, te = perm[:ntr], perm[ntr:]
    feats, cols = [], []
    for c in df.columns:
        v = df[c].to_numpy(dtype=np.float64)
        if c in binned:
            q = np.quantile(v[tr], np.linspace(0, 1, bins + 1)[1:-1])
            edges = np.unique(q)
            if edges.size == 0:  # constant on the training rows
                edges = np.array([float(v[tr][0])])
            feats.append(NumericFeature(c, edges=tuple(float(e) for e in edges)))
            cols.append(np.searchsorted(edges, v, side="left").astype(np.float64))
        else:
            levels = np.unique(v)
            feats.append(CategoricalFeature(c, tuple(f"{x:g}" for x in levels)))
            cols.append(np.searchsorted(levels, v).astype(np.float64))
    classes = np.unique(y)
    cb = Codebook(features=tuple(feats), label=Label("target", tuple(f"{c}" for c in classes)))
    X = np.column_stack(cols)
    yc = np.searchsorted(classes, y).astype(np.int64)
    return cb, X[tr], yc[tr], X[te], yc[te]


def make_learner(name: str):
    if name == "dcc":
        return DCC(s=0.0)
    if name == "dcc-label":
        return DCC(s=0.0, edge_weight="label")
    if name == "dcc-free":
        return DCC(s=0.0, empty="free")
    if name == "dcc-cal":
        return DCC()
    if name == "dcc-hinge":
        return DCC(s=0.0, loss="hinge")
    if name == "dcc-label-hinge":
        return DCC(s=0.0, loss="hinge", edge_weight="label")
    if name == "dcc-all":
        return DCC(s=0.0, structure="all")
    if name == "dcc-all-cal":
        return DCC(structure="all")
    if name == "gdcc":
        return DCC(s=0.0, greedy=True)
    if name == "mrc":
        return MRC(s=0.0, solver="full")
    if name == "mrc-cal":
        return MRC(solver="full")
    if name == "renyi":
        return RenyiClassifier()
    raise SystemExit(f"unknown learner {name!r}")


ROW_BASELINES = ("nb-rows", "logreg-rows")


def row_baseline_predict(name: str, cb: Codebook, Xtr: np.ndarray, ytr: np.ndarray, Xte: np.ndarray) -> np.ndarray:
    """Test predictions of a scikit-learn classifier fitted on the training ROWS (reference only)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.naive_bayes import CategoricalNB
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    sizes = [int(f.n_levels) for f in cb.features]
    if name == "nb-rows":
        est = CategoricalNB(alpha=1.0, min_categories=np.asarray(sizes))
    else:
        est = make_pipeline(OneHotEncoder(categories=[list(range(m)) for m in sizes]),
                            LogisticRegression(C=1.0, max_iter=5000))
    return est.fit(Xtr.astype(np.int64), ytr).predict(np.asarray(Xte).astype(np.int64))


def outside_share(est, X: np.ndarray) -> float:
    """Share of rows outside the uncertainty set (``est.outside``: every label of x crosses a
    cell the fit ruled out); the certificate says nothing about them. NaN for Rényi."""
    if not hasattr(est, "outside"):
        return float("nan")
    return float(np.mean(est.outside(X)))


def one_split(args: tuple[str, int, int, list[str]]) -> dict:
    name, seed, bins, learners = args
    df, y, binned = load(name)
    cb, Xtr, ytr, Xte, yte = split_codes(df, y, binned, seed, bins)
    t0 = time.perf_counter()
    S = Summary.from_rows(cb, Xtr, ytr, stats="all")
    out = {"dataset": name, "seed": seed, "count_seconds": time.perf_counter() - t0}
    for ln in learners:
        t0 = time.perf_counter()
        if ln in ROW_BASELINES:
            pred = row_baseline_predict(ln, cb, Xtr, ytr, Xte)
            out[ln] = {"error": float(np.mean(pred != yte)), "seconds": time.perf_counter() - t0}
            continue
        est = make_learner(ln)
        try:
            est.fit(S)
        except Exception as exc:  # reported, not fatal: one failing split must not hide the others
            out[ln] = {"failed": f"{type(exc).__name__}: {exc}"}
            continue
        sec = time.perf_counter() - t0
        pred = np.asarray(est.predict(Xte))
        out[ln] = {
            "error": float(np.mean(pred != yte)),
            "outside": outside_share(est, Xte),
            "seconds": sec,
            "certificate": float(est.worst_case_error_),
            "edges": len(getattr(est, "edges_", [])),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=20, help="random 70/30 splits per dataset")
    ap.add_argument("--adult-reps", type=int, default=None, help="splits for adult (default --reps)")
    ap.add_argument("--datasets", default=",".join(DATASETS), help="comma-separated subset of " + ",".join(DATASETS))
    ap.add_argument("--learners", default=",".join(LEARNERS))
    ap.add_argument("--bins", type=int, default=5, help="quantile bins for continuous columns")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (splits in parallel)")
    ap.add_argument("--json", type=Path, default=None, help="also write every split's result here")
    a = ap.parse_args()
    names = [s for s in a.datasets.split(",") if s]
    learners = [s for s in a.learners.split(",") if s]
    for nm in names:
        if nm not in DATASETS:
            raise SystemExit(f"unknown dataset {nm!r}")
    t_all = time.perf_counter()
    results: dict[str, list[dict]] = {}
    for nm in names:
        reps = a.adult_reps if (nm == "adult" and a.adult_reps is not None) else a.reps
        jobs = [(nm, seed, a.bins, learners) for seed in range(reps)]
        t0 = time.perf_counter()
        if a.jobs > 1:
            with ProcessPoolExecutor(a.jobs) as ex:
                res = list(ex.map(one_split, jobs))
        else:
            res = [one_split(j) for j in jobs]
        results[nm] = res
        line = ", ".join(f"{ln} {100 * np.mean(values(res, ln, 'error')):.2f}%" for ln in learners)
        print(f"# {nm}: {reps} splits in {time.perf_counter() - t0:.1f} s: {line}", file=sys.stderr, flush=True)
        for r in res:
            for ln in learners:
                if "failed" in r[ln]:
                    print(f"#   {nm} split {r['seed']}: {ln} failed: {r[ln]['failed']}", file=sys.stderr, flush=True)
    total = time.perf_counter() - t_all

    head = (["dataset", "splits"] + [f"{ln} ({'rows, reference' if ln in ROW_BASELINES else 'ours'})"
                                     for ln in learners] + [f"{c} (paper)" for c in PUBLISHED_COLUMNS])
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for nm in names:
        res = results[nm]
        cells = [nm, str(len(res))]
        for ln in learners:
            e = 100 * values(res, ln, "error")
            failed = len(res) - e.size
            cell = f"{e.mean():.2f} ± {e.std(ddof=1) if e.size > 1 else 0.0:.2f}" if e.size else "—"
            cells.append(cell + (f" ({failed} failed)" if failed else ""))
        cells += [str(v) for v in PUBLISHED[nm]]
        print("| " + " | ".join(cells) + " |")
    print()
    certified = [ln for ln in learners if ln != "renyi" and ln not in ROW_BASELINES]
    head2 = (["dataset"] + [f"{ln} fit s" for ln in learners] + [f"{ln} R*" for ln in certified]
             + [f"{ln} edges" for ln in learners if "dcc" in ln] + [f"{ln} outside U %" for ln in certified])
    print("| " + " | ".join(head2) + " |")
    print("|" + "---|" * len(head2))
    for nm in names:
        res = results[nm]
        cells = [nm]
        cells += [f"{values(res, ln, 'seconds').mean():.2f}" for ln in learners]
        cells += [f"{values(res, ln, 'certificate').mean():.4f}" for ln in certified]
        cells += [f"{values(res, ln, 'edges').mean():.1f}" for ln in learners if "dcc" in ln]
        cells += [f"{100 * values(res, ln, 'outside').mean():.0f}" for ln in certified]
        print("| " + " | ".join(cells) + " |")
    print(f"\ntotal {total:.1f} s; bins {a.bins}; jobs {a.jobs}")
    if a.json is not None:
        a.json.write_text(json.dumps(results, indent=1))


def values(res: list[dict], learner: str, key: str) -> np.ndarray:
    """One number per split where ``learner`` succeeded."""
    return np.array([r[learner][key] for r in res if key in r[learner]], dtype=np.float64)


if __name__ == "__main__":
    main()
