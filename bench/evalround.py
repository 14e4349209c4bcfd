"""The evaluation round (issue 44): coverage of the holdout certificate by simulation, and the study design's choices.

Run: nice -n 10 python bench/evalround.py [--studies 200] [--seed 44]

Every number from one run (side by side, the same draws for every bound):

1. **Unequal held-out fractions** — sites of 500/300/100 patients whose rule errs 30/35/45 %
   (the patient-weighted population error 0.3333), holding out 30/20/10 % (each patient by a
   Bernoulli draw), evaluation releases exact and at ε = 0.5 (discrete Laplace, scale 2, on each of
   the two cells). Per bound: coverage of the population error (Wilson 95 % interval) and the mean
   bound. ``weighted``: the patient-weighted fraction groups (``holdout_certificates`` with the
   fractions, issue 44); ``worst site``: the largest per-site bound at α/S (the bound it replaced);
   ``pooled``: one bound weighted by held-out counts (another population). All at the first
   model's share of α, 6/π².
2. **The best of K = 10 models on one held-out set** (150 patients, true errors 0.20 … 0.29), the
   fewest errors kept: coverage of the kept model's error with its ordinal's share g(j) (no option),
   with α/10 (stated ``--evaluations 10``) and with no split.
3. **The final model against the larger class** — 300 held-out patients, class-1 share 0.4, a
   confusion release at ε = 1 (scale 1): how often a chance model (errs 0.5) gives the larger
   class, a good one (errs 0.2) is kept, and the returned certificate's coverage.
4. **The design** (``marg.marginals.study_design.design_study``) for the benchmark sets' shapes
   at 3 sites 50/30/20 %, ε = 1 per site, δ = 1e-6, t = 2, shared noise.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    p = k / n
    c = (p + z * z / (2 * n)) / (1 + z * z / n)
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return c - h, c + h


def laplace(rng, b, size):
    p = 1 - math.exp(-1 / b)
    return rng.geometric(p, size) - rng.geometric(p, size)


def fractions_part(studies: int, seed: int) -> None:
    from marg.learners.certification.holdout_certificate import evaluation_share, holdout_certificates, released_counts

    sizes, rates, fr = (500, 300, 100), (0.30, 0.35, 0.45), (0.3, 0.2, 0.1)
    truth = float(np.dot(sizes, rates) / sum(sizes))
    g1 = evaluation_share(1)
    print(f"1. unequal fractions: sites {sizes}, rates {rates}, fractions {fr}; population error {truth:.4f}; "
          f"{studies} studies")
    for b in (None, 2.0):
        rng = np.random.default_rng(seed)
        out = {"weighted": [], "worst site": [], "pooled": []}
        for _ in range(studies):
            rel = []
            for k, (N, f, p) in enumerate(zip(sizes, fr, rates)):
                n = rng.binomial(N, f)
                e = rng.binomial(n, p)
                c = np.array([n - e, e])
                rel.append((f"s{k}", released_counts(c, (), "errors")[0] if b is None else
                            released_counts(c + laplace(rng, b, 2), (("laplace", b, True, 1),), "errors")[0], []))
            out["weighted"].append(holdout_certificates(rel, ["no", "yes"], 0.95, fractions=fr, share=g1).pooled.value)
            out["worst site"].append(holdout_certificates(rel, ["no", "yes"], 0.95, fractions=(*fr[:2], None),
                                                          share=g1).pooled.value)
            out["pooled"].append(holdout_certificates(rel, ["no", "yes"], 0.95, share=g1).pooled.value)
        for name, v in out.items():
            v = np.asarray(v)
            k = int((v >= truth).sum())
            lo, hi = wilson(k, studies)
            print(f"   {'exact' if b is None else 'ε=0.5':6s} {name:10s} coverage {k / studies:.3f} [{lo:.3f}, "
                  f"{hi:.3f}]  mean bound {v.mean():.3f}")


def best_of_k_part(studies: int, seed: int) -> None:
    from marg.learners.certification.holdout_certificate import evaluation_share, holdout_certificates, released_counts

    rng = np.random.default_rng(seed)
    rates = 0.20 + 0.01 * np.arange(10)
    res = {"g(j), no option": [], "alpha/10 stated": [], "no split": []}
    for _ in range(studies):
        e = rng.binomial(150, rates)
        j = int(np.argmin(e))
        rel = [("s", released_counts(np.array([150 - e[j], e[j]]), (), "errors")[0], [])]
        for name, share in (("g(j), no option", evaluation_share(j + 1)),
                            ("alpha/10 stated", evaluation_share(j + 1, 10)),
                            ("no split", 1.0)):
            v = holdout_certificates(rel, ["no", "yes"], 0.95, share=share).pooled.value
            res[name].append((v >= rates[j], v))
    print(f"2. best of 10 models on one held-out set of 150 patients, {studies} studies")
    for name, r in res.items():
        k = sum(h for h, _ in r)
        lo, hi = wilson(k, studies)
        print(f"   {name:16s} coverage {k / studies:.3f} [{lo:.3f}, {hi:.3f}]  mean bound "
              f"{np.mean([v for _, v in r]):.3f}")


def final_part(studies: int, seed: int) -> None:
    from types import SimpleNamespace

    from marg.learners.study.final_choice import final_against_prior

    rng = np.random.default_rng(seed)
    print(f"3. final model against the larger class: 300 held-out patients, P(y = 1) = 0.4, ε = 1, {studies} studies "
          "each")
    for rule, err in (("chance", 0.5), ("good", 0.2)):
        kept_model = covered = 0
        certs = []
        for _ in range(studies):
            y = rng.random(300) < 0.4
            pred = rng.random(300) < 0.5 if rule == "chance" else np.where(rng.random(300) < err, ~y, y)
            conf = np.zeros((2, 2), dtype=np.int64)
            np.add.at(conf, (pred.astype(int), y.astype(int)), 1)
            out = final_against_prior(SimpleNamespace(), SimpleNamespace(class_=0), conf + laplace(rng, 1.0, (2, 2)),
                                      (("laplace", 1.0, True, 1),))
            kept_model += out.chosen == "model"
            covered += out.certificate.value >= (err if out.chosen == "model" else 0.4)
            certs.append(out.certificate.value)
        print(f"   {rule:6s} model (errs {err}): model kept {kept_model / studies:.3f}, larger class "
              f"{1 - kept_model / studies:.3f}; certificate covers {covered / studies:.3f}, mean {np.mean(certs):.3f}")


SHAPES = {  # (rows of the whole set, levels of its discrete features, classes)
    "house-votes-84": (435, (3,) * 16, 2), "breast-w": (699, (10,) * 9, 2), "cleveland": (303, (3,) * 13, 2),
    "credit-a": (690, (3,) * 15, 2), "kr-vs-kp": (3196, (2,) * 35 + (3,), 2), "adult": (48842, (5,) * 14, 2),
    "planted wide": (3000, (2,) * 300, 2),
}


def design_part() -> None:
    from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label
    from marg.marginals.study_design import design_study

    print("4. study design, 3 sites 50/30/20 % of 80 % of each set (training and held out), ε = 1 per site, t = 2, "
          "shared noise")
    for name, (n, levels, C) in SHAPES.items():
        rows = tuple(int(round(0.8 * n * w)) for w in (0.5, 0.3, 0.2))
        cb = Codebook(features=tuple(CategoricalFeature(f"x{i}", tuple(str(v) for v in range(m)))
                                     for i, m in enumerate(levels)), label=Label("y", tuple(f"c{c}" for c in range(C))))
        t0 = time.perf_counter()
        d = design_study(cb, 3, rows, 1.0, 1e-6, 2)
        r = d.rounds
        print(f"   {name:15s} rows {'/'.join(map(str, rows)):17s} selection {d.selection:7s} k {d.k:3d} hold out "
              f"{d.holdout:.2f}  ρ select {r['select']:.4f} measure {r['measure']:.4f} evaluate {r['evaluate']:.4f}  "
              f"E {d.expected_error:.3f} expected certificate {d.expected_certificate:.3f}  "
              f"({time.perf_counter() - t0:.1f} s)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--studies", type=int, default=200)
    ap.add_argument("--seed", type=int, default=44)
    ap.add_argument("--no-design", action="store_true")
    a = ap.parse_args()
    fractions_part(a.studies, a.seed)
    best_of_k_part(10 * a.studies, a.seed)
    final_part(a.studies, a.seed)
    if not a.no_design:
        design_part()


if __name__ == "__main__":
    main()
