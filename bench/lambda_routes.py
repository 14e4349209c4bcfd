"""MRC's confidence box under DP: the one entry point (exact noise tails, noise on n) beside the
route MRC used before (the noise as z·noise_std, no term for the noise on n), in one run.

Run: python bench/lambda_routes.py [--releases 200] [--n 2000] [--epsilon 1] [--features 5]

The case reported in issue 24: five ternary features, a binary label, n = 2,000 patients,
ε = 1 (first-order tables released by ``privatize`` through OpenDP, the default budget split).
A known population (cell probabilities drawn once from a flat Dirichlet, seed 0) gives the
truth; each release samples n rows from it. Per route: mean λ over the entries and releases,
and the share of releases whose box holds every true cell probability (target ≥ 95 %). The
old route is written out here (it no longer exists in marg).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from marg.learners.features.calibration import binomial_halfwidth, bonferroni_z  # noqa: E402
from marg.learners.features.statistics import map_moments  # noqa: E402
from marg.learners.classifiers.mrc import MRC  # noqa: E402
from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label  # noqa: E402
from marg.marginals.privacy import privatize  # noqa: E402
from marg.marginals.summary import Summary  # noqa: E402
from marg.marginals.counts.counting import count_tables  # noqa: E402
from marg.marginals.counts.tables import plan_cliques  # noqa: E402


def old_lambda(m, coverage: float = 0.95) -> np.ndarray:
    """The λ MRC computed before: Clopper–Pearson at the full Bonferroni level plus z·noise_std."""
    z, alpha = bonferroni_z(coverage, m.tau.size), (1 - coverage) / m.tau.size
    noise = z * m.noise
    return binomial_halfwidth(np.clip(0.5, m.tau - noise, m.tau + noise), m.n, alpha) + noise


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--releases", type=int, default=200)
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--features", type=int, default=5)
    args = ap.parse_args()
    p = args.features
    names = [f"f{i}" for i in range(p)]
    cb = Codebook(features=tuple(CategoricalFeature(f, ("a", "b", "c")) for f in names), label=Label("y", ("0", "1")))
    rng = np.random.default_rng(0)
    P = rng.dirichlet(np.ones(3**p * 2)).reshape((3,) * p + (2,))
    truth = np.concatenate([P.sum(axis=tuple(j for j in range(p) if j != i)).T for i in range(p)], axis=1)  # (K, 3p)
    lam = {"one entry point": [], "old (normal approx.)": []}
    hits = {k: 0 for k in lam}
    t0 = time.perf_counter()
    for _ in range(args.releases):
        cells = np.unravel_index(rng.choice(P.size, size=args.n, p=P.ravel()), P.shape)
        tables = count_tables(cb, np.column_stack(cells[:-1]).astype(float), cells[-1], plan_cliques(cb, "first"))
        S = Summary(cb, privatize(tables, epsilon=args.epsilon, codebook=cb)[0])
        est = MRC().fit(S)
        m = map_moments(S, est.map_)
        for k, L in (("one entry point", est.lambda_), ("old (normal approx.)", old_lambda(m))):
            lam[k].append(float(L.mean()))
            hits[k] += bool(np.all(np.abs(m.tau - truth) <= L))
    print(f"{p} ternary features, binary label, n = {args.n}, ε = {args.epsilon:g}, {args.releases} releases "
          f"({time.perf_counter() - t0:.0f} s)\n")
    print("| MRC λ route | mean λ | releases whose box holds every true cell |")
    print("|---|---|---|")
    for k in lam:
        print(f"| {k} | {np.mean(lam[k]):.4f} | {hits[k]}/{args.releases} ({hits[k] / args.releases:.1%}) |")


if __name__ == "__main__":
    main()
