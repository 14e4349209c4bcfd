"""Issue 49: which estimate of a candidate's error is closer to its true error on small studies from a known population.

Run: nice -n 10 python bench/estimate_49.py [--studies 12] [--sets adult,kr-vs-kp] [--rows 50,150,300] [--stats first]

Protocol (every number from one run): a study draws 50 + 150 + 300 patients without replacement
from the set (seed 7000 + study), the three sites count their exact first-order and pair tables
(``--stats first``: first-order only, what a min-cell-suppressed release holds),
:class:`marg.learners.auto.AutoLearner` runs with its defaults, and every fitted candidate's
**true error** is its error on the set's remaining rows (the population). Against it, per
(study, candidate), the absolute error of:

- ``loso``: leave-one-site-out as the choice reports it (floored at the in-sample error);
- ``bootstrap``: :func:`marg.learners.choice.study_bootstrap.bootstrap_errors` (4 resampled studies);
- ``loso+shrink`` / ``bootstrap+shrink``: each shrunk toward the mean of the study's candidates
  (:func:`marg.learners.choice.choice_rule.shrink_estimates`);
- ``mean(loso, bootstrap)``: the two averaged;
- ``loso, size-corrected``: the folds' errors regressed on 1/(training patients) (fold k trains on n − n_k) and
  read at the study's n (:func:`size_corrected`: leave-one-site-out's known bias, its folds train on fewer patients);
- ``mean(loso, in-sample)``: leave-one-site-out (pessimistic by the folds' size) averaged with the fitted model's
  plug-in error on the tables it was fitted on (optimistic);
- ``loso, median fold``: the median of the three folds instead of their n-weighted mean (with the same floor);
- ``optimism``: the fitted model's plug-in error plus the bootstrap's optimism
  (:func:`marg.learners.choice.study_bootstrap.optimism_errors`, 4 resampled studies; Efron 1983);
- ``mean(loso, optimism)``: the two averaged.

``--population tan`` (a known population): the population is the TAN distribution of the whole set's exact
first-order and pair tables (:func:`marg.learners.choice.cross_site.tan_sample`); each study's sites draw their patients
from it, and the true error is measured on 20,000 separate draws a class (weighted by p(y)) — the world every
estimate simulates is then of the population's own family, so what is left is each estimate's own error.
Reported: the mean absolute error with a 95 % interval (percentile bootstrap over the studies),
the mean signed error (bias), and CPU seconds per study (loso: the whole choice — fits, certificates and the
leave-one-site-out refits; bootstrap: its refits alone).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))


def _bench(name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


METHODS = ("loso", "bootstrap", "loso+shrink", "bootstrap+shrink", "mean(loso, bootstrap)", "loso, size-corrected",
           "mean(loso, in-sample)", "loso, median fold", "optimism", "mean(loso, optimism)")


def size_corrected(folds, weights, sizes) -> float:
    """Leave-one-site-out corrected for its folds' smaller training sets: fold k trained on n − n_k patients, so
    fit e_k = a + b/(n − n_k) (least squares weighted by n_k; b ≥ 0: more patients never cost) and read it at the
    study's n, a + b/n."""
    e, w, m = np.asarray(folds, float), np.asarray(weights, float), float(sum(sizes)) - np.asarray(sizes, float)
    A = np.column_stack([np.ones_like(m), 1.0 / m]) * np.sqrt(w)[:, None]
    a, b = np.linalg.lstsq(A, e * np.sqrt(w), rcond=None)[0]
    if b < 0:
        return float(np.average(e, weights=w))
    return float(np.clip(a + b / float(sum(sizes)), 0.0, 1.0))


OPTIMISM: dict = {}
"""``--opt-replicates`` / ``--opt-draws``: the optimism estimate's replicates and rows per class of each world."""


class TanPopulation:
    """The known population of ``--population tan``: the TAN distribution of the whole set's tables."""

    def __init__(self, make, y, seed: int = 99):
        from marg.learners.choice.cross_site import tan_sample
        from marg.marginals.counts.counting import count_tables
        from marg.marginals.summary import Summary
        from marg.marginals.counts.tables import plan_cliques

        idx = np.arange(y.size)
        self.cb, X = make(idx)
        full = Summary(self.cb, count_tables(self.cb, X, y, plan_cliques(self.cb, "all")))
        self.pool = tan_sample(full, draws=20000, seed=seed)
        self.test = tan_sample(full, draws=20000, seed=seed + 1)
        self.p = self.pool.w / self.pool.w.sum()

    def draw(self, rng, n):
        k = rng.choice(self.p.size, size=n, p=self.p)
        return self.pool.X[k], self.pool.y[k].astype(int)

    def error(self, model):
        return float(np.sum(self.test.w * (np.asarray(model.predict(self.test.X)) != self.test.y)))


def one_study(make, y, seed: int, rows: list[int], stats: str = "all", population: "TanPopulation | None" = None):
    from marg.learners.auto import AutoLearner
    from marg.learners.choice.candidates import FOLD_PARAMS
    from marg.learners.choice.choice_rule import estimate_se, shrink_estimates
    from marg.learners.choice.study_bootstrap import bootstrap_errors
    from marg.marginals.counts.counting import count_tables
    from marg.marginals.summary import Summary, sum_tables
    from marg.marginals.counts.tables import plan_cliques

    from marg.learners.choice.study_bootstrap import optimism_errors

    rng = np.random.default_rng(seed)
    n = sum(rows)
    if population is None:
        perm = rng.permutation(y.size)
        tr, te = perm[:n], perm[n:]
        cb, X = make(tr)
        cuts = np.cumsum(rows)[:-1]
        plan = plan_cliques(cb, stats)
        parts = [(f"site{k}", count_tables(cb, X[s], y[s], plan)) for k, s in enumerate(np.split(tr, cuts))]

        def true_error(model):
            return float(np.mean(model.predict(X[te]) != y[te]))
    else:
        cb, plan = population.cb, plan_cliques(population.cb, stats)
        parts = [(f"site{k}", count_tables(cb, *population.draw(rng, m), plan)) for k, m in enumerate(rows)]
        true_error = population.error
    S = Summary(cb, sum_tables([p[1] for p in parts])[0], site_parts=parts)
    t0 = time.process_time()
    auto = AutoLearner().fit(S)
    t_loso = time.process_time() - t0
    live = [(k, r) for k, r in enumerate(auto.candidates_) if auto.fitted_[k] is not None and r.error is not None]
    t0 = time.process_time()
    boot = bootstrap_errors(S, [(str(k), lambda s, r=r: auto._make(r.learner, {**r.params, **FOLD_PARAMS.get(r.learner,
                                                                                                             {})}).fit(s))
                                for k, r in live])
    opt = optimism_errors(S, [(str(k), lambda s, r=r: auto._make(r.learner,
                                                                 {**r.params, **FOLD_PARAMS.get(r.learner, {})}).fit(s))
                              for k, r in live], {str(k): auto.fitted_[k] for k, _ in live}, **OPTIMISM)
    t_boot = time.process_time() - t0
    out = []
    keep = [(k, r) for k, r in live if not isinstance(boot[str(k)], str) and not isinstance(opt[str(k)], str)]
    loso = [r.error for _, r in keep]
    loso_se = [estimate_se(r.folds, r.fold_weights) or 0.0 for _, r in keep]
    bv = [boot[str(k)].value for k, _ in keep]
    bse = [estimate_se(boot[str(k)].folds) or 0.0 for k, _ in keep]
    ls, bs = shrink_estimates(loso, loso_se), shrink_estimates(bv, bse)
    from marg.learners.choice.cross_site import in_sample_error

    inside = [in_sample_error(auto.fitted_[k], S).value for k, _ in keep]
    for j, (k, r) in enumerate(keep):
        true = true_error(auto.fitted_[k])
        ov = opt[str(k)].value
        out.append({"optimism": ov, "mean(loso, optimism)": (loso[j] + ov) / 2, "learner": r.learner, "true": true,
                    "loso": loso[j], "bootstrap": bv[j], "loso+shrink": ls[j],
                    "bootstrap+shrink": bs[j], "mean(loso, bootstrap)": (loso[j] + bv[j]) / 2,
                    "loso, size-corrected": size_corrected(r.folds, r.fold_weights, rows),
                    "mean(loso, in-sample)": (loso[j] + inside[j]) / 2,
                    "loso, median fold": max(float(np.median(r.folds)), r.error if r.error > np.average(
                        r.folds, weights=r.fold_weights) + 1e-9 else 0.0)})
    return out, t_loso, t_boot


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--studies", type=int, default=12)
    ap.add_argument("--sets", default="adult,kr-vs-kp")
    ap.add_argument("--rows", default="50,150,300")
    ap.add_argument("--stats", default="all", help="the sites' tables: all (first-order and pairs) or first")
    ap.add_argument("--population", default="rows", choices=("rows", "tan"),
                    help="rows: the set's remaining rows; tan: the TAN distribution of the whole set's tables")
    ap.add_argument("--opt-replicates", type=int, default=None)
    ap.add_argument("--opt-draws", type=int, default=None)
    a = ap.parse_args()
    OPTIMISM.update({k: v for k, v in (("replicates", a.opt_replicates), ("draws", a.opt_draws)) if v is not None})
    rows = [int(v) for v in a.rows.split(",")]
    priv = _bench("privacy")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()} (loaded)\n")
    print("| set | studies | estimate | mean abs. error [95 %] | mean signed error | CPU s per study |")
    print("|---|---|---|---|---|---|")
    rng = np.random.default_rng(1)
    for name in a.sets.split(","):
        make, y = priv.load_set(name)
        pop = TanPopulation(make, y) if a.population == "tan" else None
        per, tl, tb = [], [], []
        for s in range(a.studies):
            res, t_l, t_b = one_study(make, y, 7000 + s, rows, a.stats, pop)
            per.append(res)
            tl.append(t_l)
            tb.append(t_b)
            print(f"<!-- {name} study {s}: " + "; ".join(f"{r['learner']} true {r['true']:.3f} loso {r['loso']:.3f} "
                                                         f"boot {r['bootstrap']:.3f} opt {r['optimism']:.3f}"
                                                         for r in res) + " -->", flush=True)
        for m in METHODS:
            ae = [np.mean([abs(r[m] - r["true"]) for r in st]) for st in per]
            se = [np.mean([r[m] - r["true"] for r in st]) for st in per]
            boots = [np.mean(rng.choice(ae, len(ae))) for _ in range(2000)]
            lo, hi = np.percentile(boots, [2.5, 97.5])
            cpu = np.mean(tl) if m.startswith("loso") else np.mean(tb)
            print(f"| {name} | {len(per)} | {m} | {np.mean(ae):.4f} [{lo:.4f}, {hi:.4f}] | {np.mean(se):+.4f} | "
                  f"{cpu:.1f} |", flush=True)


if __name__ == "__main__":
    main()
