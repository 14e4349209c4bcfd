"""Can a private selection find a gene at leukemia's and ALLAML's sites (issue 34)? Exact probabilities, no sampling.

Run::

    MARG_DATASETS=/work/shared/datasets nice -n 10 python bench/tiny_site_selection.py [--splits 5] [--out F.md]

On bench/dp_select.py's splits (three sites of 29/17/12 training patients, 14 test patients;
genes coded in terciles of the training rows) it asks how often round 1's private selection —
OpenDP's noisy top-1 on each gene's best single-gene rule's correct count (sensitivity 1,
monotone; :mod:`marg.marginals.selection`), its Gumbel scale calibrated by
:func:`marg.marginals.selection.calibrate_top_k` — picks a **good** gene: one whose
single-gene rule, fitted on all 58 training patients, errs at most ``GOOD`` on the test rows
(below the larger class's error on every split but split 2, whose larger class errs 0.143).
The noisy top-1 is the exponential mechanism: gene i is chosen with probability
exp(s_i/b) / Σ_j exp(s_j/b), computed exactly here for

- each site alone, at a selection share a_S of the site's study total ρ_T (ε = 1, δ = 10⁻⁶);
- the pooled score of all 58 patients at one curator (what marg's sites cannot do: each adds
  its own noise), at the same ρ, as the best case of any pooling;
- the chance that site 1 (29 patients) and another site pick the *same* good gene: the
  learner's agreement rule needs sites holding more than half the patients;
- the ρ site 1 alone would need to pick a good gene with probability 0.9 (a multiple of ρ_T).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import numpy as np
from scipy.special import logsumexp

ROOT = Path(__file__).resolve().parent.parent
GOOD = 0.15
SHARES = (0.5, 0.98)


def _dp_select():
    spec = importlib.util.spec_from_file_location("dp_select", ROOT / "bench" / "dp_select.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def tables(X: np.ndarray, y: np.ndarray, levels: int = 3) -> np.ndarray:
    """N[x_i, y] of every gene, shape (p, levels, 2)."""
    return np.stack([np.stack([((X == v) & (y[:, None] == c)).sum(0) for c in (0, 1)], -1) for v in range(levels)], 1)


def p_chosen(scores: np.ndarray, scale: float) -> np.ndarray:
    """The exponential mechanism's (noisy top-1's) probability of choosing each gene."""
    z = scores / scale
    return np.exp(z - logsumexp(z))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="leukemia,ALLAML")
    ap.add_argument("--splits", type=int, default=5)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    from marg.marginals.counts.dp_conversions import rho_for_epsilon
    from marg.marginals.selection import calibrate_top_k

    rho_t = rho_for_epsilon(1.0, 1e-6)
    sets = _dp_select().Sets()
    lines = [f"# Private selection at tiny sites: exact probabilities (ε = 1, δ = 1e-6 per site, ρ_T = {rho_t:.5f})",
             "",
             f"`python bench/tiny_site_selection.py --sets {a.sets} --splits {a.splits}`; good gene: single-gene rule "
             f"on all training rows errs ≤ {GOOD} on the test rows", "",
             "| set | split | good genes | larger class | " + " | ".join(
                 f"a_S={s}: P(good) sites 1/2/3; pooled; P(agree on a good one)" for s in SHARES)
             + " | ρ site 1 needs for P(good) ≥ 0.9 |", "|---|---|---|---|" + "---|" * len(SHARES) + "---|"]
    for name in a.sets.split(","):
        for rep in range(a.splits):
            te, cb, X, y, sites = sets.split(name, rep)
            X = X.astype(np.int64)
            T = [tables(X[s], y[s]) for s in sites]
            pooled = sum(T)
            rule = pooled.argmax(-1)
            err = (rule[np.arange(X.shape[1])[None, :], X[te]] != y[te][:, None]).mean(0)
            good = err <= GOOD
            maj = float(np.mean(y[te] != np.argmax(np.bincount(y[np.concatenate(sites)], minlength=2))))
            cells = []
            for share in SHARES:
                b = calibrate_top_k(1, share * rho_t)[0]
                P = [p_chosen(t.max(-1).sum(-1).astype(float), b) for t in T + [pooled]]
                agree = sum(float((P[0] * P[j])[good].sum()) for j in (1, 2))
                cells.append(f"{P[0][good].sum():.2f}/{P[1][good].sum():.2f}/{P[2][good].sum():.2f}; "
                             f"{P[3][good].sum():.2f}; {agree:.1e}")
            s1 = T[0].max(-1).sum(-1).astype(float)
            need = next((r for r in np.geomspace(rho_t / 10, rho_t * 500, 400)
                         if p_chosen(s1, calibrate_top_k(1, r)[0])[good].sum() >= 0.9), None)
            cells.append(f"{need / rho_t:.0f} × ρ_T" if need else "> 500 × ρ_T")
            lines.append(f"| {name} | {rep} | {int(good.sum())} of {X.shape[1]} | {maj:.3f} | " + " | ".join(cells)
                         + " |")
            print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    if a.out:
        a.out.write_text(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
