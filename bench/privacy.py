"""Accuracy and certificate validity under differential privacy, on UCI adult (3 sites).

Run: python bench/privacy.py [--reps 10] [--epsilons 0.1,0.5,1,2,5,inf] [--learners mrc,renyi,renyi-2r,dcc]

Setup (one run, side by side with the non-private model):
- adult (48,842 rows) with a public codebook (categorical codes as levels; the six
  continuous columns binned at fixed, public edges, written below); a fixed random 20 %
  held out as the test set; the other 80 % split at random over 3 sites.
- Each site releases its tables with ε-DP (Laplace through OpenDP, the default budget
  split of ``marginals.privacy``), ε **per site** (sites hold disjoint patients, so every
  patient's guarantee is ε). Learners and their releases (alternatives, each with the
  full ε):
  ``mrc``: first-order tables (``--stats first``);
  ``renyi`` (and ``dcc``, when it exists): all pairs in one release (``--stats all``, half
  the budget on the first-order tables, half on the 91 pair tables);
  ``renyi-2r``: the two-round protocol — round 1 first-order tables with ε/2, the learner
  keeps the top ``--top-k`` features by mutual information with the label, round 2 their
  pair tables with ε/2; the Rényi classifier on those features.
- The learner sums the sites' tables and builds the Summary, which post-processes noisy
  tables (consistency, non-negativity, PSD Q), and fits with default settings (MRC: coverage 0.95, λ widened by the
  released noise). ε = ∞ is the exact release (one run).
- Reported per (learner, ε), over ``--reps`` independent noise draws: test error of the
  deterministic rule (mean ± std), expected test error of the randomized rule (the one the
  certificate bounds: mean over test rows of 1 − P̂(true class)), the certificate, and the
  fraction of runs with certificate ≥ randomized test error (target ≥ 95 %), plus the gap
  to the non-private error (target at ε = 1: within 2 points).
- Plot: ``bench/plots/privacy_error_vs_epsilon.png``.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# bench/ holds a select.py that would shadow the standard library's select module.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))

from marg.marginals.codebook import CategoricalFeature, Codebook, Label, NumericFeature  # noqa: E402
from marg.marginals.encoding import encode_file  # noqa: E402
from marg.marginals.postprocess import postprocess_tables  # noqa: E402
from marg.marginals.privacy import privatize  # noqa: E402
from marg.marginals.summary import Summary, sum_tables  # noqa: E402
from marg.marginals.tables import count_tables, plan_cliques  # noqa: E402

DATA = Path(os.environ.get("MARG_DATASETS", ROOT.parent / "shared" / "datasets")) / "adult" / "adult.tsv.gz"
PLOT = ROOT / "bench" / "plots" / "privacy_error_vs_epsilon.png"

# Public bin edges for the continuous columns (round numbers, not data quantiles).
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


def adult_codebook() -> Codebook:
    feats = []
    for name in ORDER:
        if name in EDGES:
            feats.append(NumericFeature(name, edges=EDGES[name]))
        else:
            lv = tuple(str(k) for k in range(LEVELS[name]))
            feats.append(CategoricalFeature(name, lv))
    return Codebook(features=tuple(feats), label=Label("target", ("0", "1")))


class Release:
    """What the sites release for one learner, at one ε, and the Summary the learner builds.

    ``plan="first"``: one release of first-order tables; ``plan="all"``: one release with
    all pairs; ``plan="two-round"``: round 1 = first-order tables with ε/2, the learner
    screens the top ``k`` features by mutual information with the label
    (``marginals.request.screen_features``), round 2 = their pair tables with ε/2.
    """

    def __init__(self, cb, X, y, sites, plan, k=6):
        self.cb, self.X, self.y, self.sites, self.plan, self.k = cb, X, y, sites, plan, k
        stats = "first" if plan == "two-round" else plan
        self.exact = [count_tables(cb, X[s], y[s], plan_cliques(cb, stats)) for s in sites]
        self.features = None

    def _noisy(self, parts, eps):
        if math.isinf(eps):
            return parts
        return [privatize(ts, epsilon=eps, codebook=self.cb)[0] for ts in parts]

    def summary(self, eps):
        cb, lab = self.cb, self.cb.label.name
        if self.plan != "two-round":
            agg, _ = sum_tables(self._noisy(self.exact, eps))
        else:
            from itertools import combinations

            from marg.marginals.request import screen_features

            r1, _ = sum_tables(self._noisy(self.exact, eps / 2))
            if not math.isinf(eps):
                r1 = postprocess_tables(r1)
            top = screen_features(r1, self.k, label=lab)
            self.features = sorted(top, key=cb.index)
            cl = [(a, b, lab) for a, b in combinations(self.features, 2)]
            r2 = [count_tables(cb, self.X[s], self.y[s], cl) for s in self.sites]
            r2, _ = sum_tables(self._noisy(r2, eps / 2))
            agg = r1 + r2
        # Summary post-processes noisy tables itself (consistency, non-negativity, PSD Q).
        return Summary.from_tables(cb, agg)


def load_learners(names):
    """name → (release plan, fit(summary, release) → fitted model)."""
    out = {}
    for nm in names:
        if nm == "mrc":
            from marg.learners.mrc import MRC

            out[nm] = ("first", lambda s, r: MRC().fit(s))
        elif nm in ("renyi", "renyi-2r"):
            try:
                from marg.learners.renyi import RenyiClassifier
            except ImportError as exc:
                print(f"({nm} skipped: {exc})")
                continue
            if nm == "renyi":
                out[nm] = ("all", lambda s, r: RenyiClassifier().fit(s))
            else:
                out[nm] = ("two-round", lambda s, r: RenyiClassifier(features=r.features).fit(s))
        elif nm == "dcc":
            try:
                from marg.learners.dcc import DCC  # type: ignore[import-not-found]
            except ImportError as exc:
                print(f"({nm} skipped: {exc})")
                continue
            # time_limit per LP solve: on the exact all-pairs summary DCC's row generation can
            # run for many minutes; its certificate is the exact R(μ) of the μ it has.
            out[nm] = ("all", lambda s, r: DCC(time_limit=120.0).fit(s))
        else:
            sys.exit(f"unknown learner {nm!r}")
    return out


def evaluate(model, X, y):
    err = float(np.mean(model.predict(X) != y))
    P = np.asarray(model.predict_proba(X))
    rand_err = float(np.mean(1.0 - P[np.arange(len(y)), y]))
    return err, rand_err, float(model.worst_case_error_)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--epsilons", default="0.1,0.5,1,2,5,inf")
    ap.add_argument("--learners", default="mrc,renyi,renyi-2r,dcc")
    ap.add_argument("--top-k", type=int, default=6, help="features kept by the two-round screening")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args()
    if not DATA.exists():
        sys.exit(f"dataset not found: {DATA}")
    eps_list = [math.inf if e.strip() in ("inf", "∞") else float(e) for e in args.epsilons.split(",")]
    learners = load_learners([s.strip() for s in args.learners.split(",") if s.strip()])

    cb = adult_codebook()
    enc = encode_file(DATA, cb)
    X, y = enc.X, enc.y
    rng = np.random.default_rng(args.seed)
    perm = rng.permutation(len(y))
    n_test = len(y) // 5
    test, train = perm[:n_test], perm[n_test:]
    sites = np.array_split(train, 3)
    print(f"# DP on adult: {len(train):,} training rows over 3 sites ({', '.join(str(len(s)) for s in sites)}), "
          f"{n_test:,} test rows; {args.reps} noise draws per ε")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, numpy {np.__version__}\n")

    releases = {name: Release(cb, X, y, sites, plan, args.top_k) for name, (plan, _) in learners.items()}
    results = {}  # (learner, eps) -> array of (err, rand_err, cert)
    timing = {}
    for eps in eps_list:
        reps = 1 if math.isinf(eps) else args.reps
        for name, (_, fit) in learners.items():
            rel = releases[name]
            rows = []
            t0 = time.perf_counter()
            for _ in range(reps):
                model = fit(rel.summary(eps), rel)
                rows.append(evaluate(model, X[test], y[test]))
            timing[(name, eps)] = (time.perf_counter() - t0) / reps
            results[(name, eps)] = np.array(rows)
            log(f"{name} ε={eps:g}: error {results[(name, eps)][:, 0].mean():.4f}, {timing[(name, eps)]:.1f} s/run")

    print("| learner | ε per site | test error (mean ± sd) | randomized-rule error | certificate (mean) | "
          "cert ≥ rand. error | Δ error vs ε=∞ | s / run |")
    print("|---|---|---|---|---|---|---|---|")
    for name in learners:
        base = results.get((name, math.inf))
        for eps in eps_list:
            r = results[(name, eps)]
            cover = float(np.mean(r[:, 2] >= r[:, 1]))
            d = "" if base is None else f"{100 * (r[:, 0].mean() - base[:, 0].mean()):+.2f} pt"
            print(f"| {name} | {'∞' if math.isinf(eps) else f'{eps:g}'} | {r[:, 0].mean():.4f} ± {r[:, 0].std():.4f} | "
                  f"{r[:, 1].mean():.4f} | {r[:, 2].mean():.4f} | {100 * cover:.0f} % ({len(r)}) | {d} | "
                  f"{timing[(name, eps)]:.2f} |")

    if args.no_plot:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    finite = [e for e in eps_list if not math.isinf(e)]
    for k, name in enumerate(learners):
        col = f"C{k}"
        m = [results[(name, e)][:, 0].mean() for e in finite]
        s = [results[(name, e)][:, 0].std() for e in finite]
        c = [results[(name, e)][:, 2].mean() for e in finite]
        ax.errorbar(finite, m, yerr=s, marker="o", color=col, capsize=3, label=f"{name}: test error")
        ax.plot(finite, c, ls="--", marker="^", color=col, alpha=0.7, label=f"{name}: certificate")
        if (name, math.inf) in results:
            ax.axhline(results[(name, math.inf)][0, 0], color=col, ls=":", lw=1, label=f"{name}: non-private error")
    ax.set_xscale("log")
    ax.set_ylim(0.0, 0.6)  # a noisy Rényi γ < 0 gives a negative "certificate": off the plot
    ax.set_xlabel("ε per site (Laplace, pure DP)")
    ax.set_ylabel("error")
    ax.set_title(f"adult, 3 sites: error vs ε ({args.reps} draws per point)")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(True, which="both", alpha=0.3)
    PLOT.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(PLOT, dpi=120)
    print(f"\nplot: {PLOT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
