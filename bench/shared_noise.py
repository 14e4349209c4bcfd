"""Issue 44 (noise): the noise std of the pooled tables, shared noise under secure aggregation against today's per-site
path.

For S sites and a round's zCDP budget ρ (one curator's), each path's noise on the pooled tables:

- per-site (today): every site releases its tables at ρ (``ReleasePlan``), the learner sums S of
  them: std √S × one curator's;
- shared (``marginals.shared_noise``): each site adds a distributed discrete Gaussian share so that
  the sum of any t survivors meets ρ; with all S surviving the pooled std is about √(S/t) × one
  curator's (a little more where the theorem's τ term raises the shares' σ).

Both are computed from the plans' records and measured by drawing the noise through OpenDP (the
paths interleaved, the empirical std over every cell of the round's tables and ``--reps`` rounds).
Prints a Markdown table (BENCHMARKS.md).

    python bench/shared_noise.py [--epsilon 1] [--delta 1e-6] [--reps 20]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from marg.marginals.counts.dp_conversions import rho_for_epsilon
from marg.marginals.release_plan import ReleasePlan
from marg.marginals.shared_noise import shared_plan
from marg.marginals.synthetic import demo_codebook
from marg.marginals.counts.tables import MarginalTable, plan_cliques


def _zeros(cb, cliques):
    return [MarginalTable(clique=tuple(c), counts=np.zeros([cb.attribute_size(a) for a in c], dtype=np.int64))
            for c in cliques]


def run(epsilon: float, delta: float, reps: int) -> None:
    cb = demo_codebook()
    cliques = plan_cliques(cb, "first")  # the label table and N[x, y] of the 9 demo features
    rho = rho_for_epsilon(epsilon, delta)
    curator = ReleasePlan.for_cliques(cliques, cb, rho=rho, delta=delta)
    zero = _zeros(cb, cliques)
    cells = np.array([t.counts.size for t in zero], dtype=np.float64)
    one = float(np.sqrt(np.sum(cells * np.square(curator.stds)) / cells.sum()))  # one curator's rms std per cell
    print(f"round budget ε = {epsilon:g} at δ = {delta:g} (ρ = {rho:.4g}); {len(cliques)} tables, {int(cells.sum())} "
          f"cells; one curator's noise std {one:.3f} per cell (rms)\n")
    print("| S | t | per-site pooled std | shared pooled std | ratio per-site/shared | √t | per-site / curator | "
          "shared / curator | √(S/t) | share σ / τ-free σ | study ρ | site's own ρ | time per round (shared, "
          "per-site) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for S in (3, 10):
        for t in sorted({S // 2 + 1, S}):
            plan = shared_plan(cb, cliques, rho, t, S, delta=delta)
            per_site_model = math.sqrt(S) * one
            recs = plan.sum_records(S)
            shared_model = float(np.sqrt(np.sum(cells * np.square([r.std for r in recs])) / cells.sum()))
            sq_ps = sq_sh = 0.0
            t_ps = t_sh = 0.0
            for _ in range(reps):  # interleaved: one round of each path per repetition
                t0 = time.perf_counter()
                pooled = [sum(x) for x in zip(*([t.counts for t in curator.release(zero, cb)] for _ in range(S)))]
                t_ps += time.perf_counter() - t0
                sq_ps += sum(float(np.sum(np.square(p.astype(np.float64)))) for p in pooled)
                t0 = time.perf_counter()
                pooled = [sum(x) for x in zip(*([t.counts for t in plan.share(zero)] for _ in range(S)))]
                t_sh += time.perf_counter() - t0
                sq_sh += sum(float(np.sum(np.square(p.astype(np.float64)))) for p in pooled)
            emp_ps = math.sqrt(sq_ps / (reps * cells.sum()))
            emp_sh = math.sqrt(sq_sh / (reps * cells.sum()))
            tau_free = [p.l2 / math.sqrt(2 * t * p.share) for p in plan.tables]
            infl = max(p.scale / f for p, f in zip(plan.tables, tau_free))
            print(f"| {S} | {t} | {per_site_model:.3f} (drawn {emp_ps:.3f}) | {shared_model:.3f} (drawn {emp_sh:.3f}) "
                  f"| {per_site_model / shared_model:.3f} (drawn {emp_ps / emp_sh:.3f}) | {math.sqrt(t):.3f} | "
                  f"{per_site_model / one:.3f} | {shared_model / one:.3f} | {math.sqrt(S / t):.3f} | {infl:.4f} | "
                  f"{plan.study_cost().rho:.4g} | {plan.site_cost().rho:.4g} | "
                  f"{1e3 * t_sh / reps:.0f} ms, {1e3 * t_ps / reps:.0f} ms |")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-6)
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    run(a.epsilon, a.delta, a.reps)
