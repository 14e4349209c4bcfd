"""The study's certificate by simulation from a known population (issue 44's acceptance, the certificate bullet).

Run::

    nice -n 10 .venv/bin/python bench/study_certificate.py --set credit-a --studies 200 --json C.json

The population: a class-conditional product distribution (a naive-Bayes population) fitted, with add-one
smoothing, to every row of a real set's codes under its split-0 codebook (bench/study_accept.py's sets):
``P(y) · Π_j P(x_j | y)``. Per simulated study, fresh patients drawn from it in three sites of the real set's
split-0 sizes (50 / 30 / 20 %), ε = 1 and δ = 10⁻⁶ per site; the study's default run in process
(bench/study_accept.py's :func:`marg_study`: ``init_study``, every party's ``run_site`` / ``run_learner``
until done, the final signed model and its holdout certificate). Its **population error** — what the
certificate claims to bound (issue 38: the population the holdout bound names is the sites' patients, here all
drawn from the one population) — is the model's error on ``--reference`` fresh draws (Monte Carlo, standard
error ≤ 0.5/√reference), the same reference rows for every study. Coverage: the share of studies whose
certificate is at least that error (Wilson 95 % interval); beside it the mean certificate, the mean population
error and their gap (the issue's informativeness target: ≤ 0.08), the learners chosen and how often the larger
class was returned. A study that fails is counted and its error line kept (not as covered).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _bench(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


A = _bench("study_accept")
D = A.D


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    c = (p + z * z / (2 * n)) / (1 + z * z / n)
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return c - h, c + h


class Population:
    """``P(y) Π_j P(x_j | y)`` over the codebook's codes (the missing code, one past the last bin, not drawn)."""

    def __init__(self, cb, X: np.ndarray, y: np.ndarray):
        self.cb = cb
        self.sizes = [cb.attribute_size(n) for n in cb.feature_names]
        k = len(cb.label.classes)
        self.py = (np.bincount(y, minlength=k) + 1.0) / (y.size + k)
        self.px = []  # per feature: (classes, levels) conditional probabilities
        for j, v in enumerate(self.sizes):
            c = np.ones((k, v))
            codes = X[:, j].astype(np.int64)
            ok = codes < v
            np.add.at(c, (y[ok], codes[ok]), 1.0)
            self.px.append(c / c.sum(axis=1, keepdims=True))

    def draw(self, n: int, rng) -> tuple[np.ndarray, np.ndarray]:
        y = rng.choice(self.py.size, size=n, p=self.py)
        X = np.empty((n, len(self.sizes)), dtype=np.float64)
        u = rng.random((n, len(self.sizes)))
        for j, p in enumerate(self.px):
            cdf = np.cumsum(p[y], axis=1)
            X[:, j] = np.minimum((u[:, j:j + 1] > cdf).sum(axis=1), p.shape[1] - 1)
        return X, y

    def bayes_error(self, X: np.ndarray, y: np.ndarray) -> float:
        """The population's Bayes rule (its own posterior's argmax) on rows ``X``: the floor of any model's error."""
        logp = np.log(self.py)[None, :] + sum(np.log(p[:, X[:, j].astype(np.int64)]).T for j, p in enumerate(self.px))
        return float(np.mean(np.argmax(logp, axis=1) != y))


def population_error(final: Path, cb, Xref: np.ndarray, yref: np.ndarray) -> float:
    from marg.learners.estimator.model import Model

    m, _ = Model.read(final / "model.json")
    cols = [cb.index(n) for n in m.codebook.feature_names]
    return float(np.mean(np.asarray(m.predict(Xref[:, cols])) != yref))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", default="credit-a", help="the real set the population is fitted to (its sizes too)")
    ap.add_argument("--studies", type=int, default=200)
    ap.add_argument("--seed", type=int, default=44)
    ap.add_argument("--reference", type=int, default=400_000, help="fresh draws for each model's population error")
    ap.add_argument("--scale", type=float, default=1.0, help="site sizes × this (the real set's split-0 sizes)")
    ap.add_argument("--json", type=Path, required=True)
    ap.add_argument("--deadline", type=float, default=0.0, help="stop starting studies after this many seconds")
    a = ap.parse_args()
    import warnings

    warnings.filterwarnings("ignore")
    te, cb, X, y, sites = A.Sets().split(a.set, 0)
    pop = Population(cb, X, y)
    rng = np.random.default_rng(a.seed)
    Xref, yref = pop.draw(a.reference, rng)
    sizes = [max(20, int(round(len(s) * a.scale))) for s in sites]
    meta = {"command": "python bench/study_certificate.py " + " ".join(sys.argv[1:]), "set": a.set, "sizes": sizes,
            "machine": f"{platform.machine()}, Python {platform.python_version()} (loaded by parallel work)",
            "bayes_error": pop.bayes_error(Xref, yref), "reference": a.reference}
    rows, t_run = [], time.perf_counter()
    marg = A.InProcess()
    with tempfile.TemporaryDirectory(prefix="accept-cert-keys-") as kd:
        keys = Path(kd)
        D.make_keys(marg, keys)
        for i in range(a.studies):
            if a.deadline and time.perf_counter() - t_run > a.deadline:
                break
            parts = [pop.draw(n, rng) for n in sizes]
            Xs = np.concatenate([p[0] for p in parts] + [Xref[:200]])
            ys = np.concatenate([p[1] for p in parts] + [yref[:200]])
            bounds = np.cumsum([0, *sizes])
            idx = [np.arange(bounds[k], bounds[k + 1]) for k in range(len(sizes))]
            te_idx = np.arange(bounds[-1], bounds[-1] + 200)
            t0 = time.perf_counter()
            with tempfile.TemporaryDirectory(prefix="accept-cert-") as d:
                work = Path(d)
                st = D.Study(work, keys, cb, Xs, ys, idx, te_idx)
                try:
                    res = A.marg_study(A.StudyCalls(marg, True), st, keys, work, cb, Xs[te_idx], ys[te_idx])
                    res["population_error"] = population_error(work / "drop" / "final", cb, Xref, yref)
                except RuntimeError as exc:
                    res = {"status": f"failed: {exc}"[:300]}
            res["seconds"] = round(time.perf_counter() - t0, 1)
            rows.append(res)
            ok = "population_error" in res
            print(f"study {i}: "
                  + (f"certificate {res['certificate']:.3f}, population error {res['population_error']:.4f}, "
                                    f"{res['chose']}" if ok else res["status"]) + f" ({res['seconds']:.0f} s)",
                  file=sys.stderr, flush=True)
            meta["wall_seconds"] = time.perf_counter() - t_run
            a.json.write_text(json.dumps({"meta": meta, "results": rows}, indent=1))
    print("\n".join(summary(meta, rows)))


def summary(meta: dict, rows: list[dict]) -> list[str]:
    ok = [r for r in rows if "population_error" in r and isinstance(r.get("certificate"), (int, float))]
    cov = sum(r["certificate"] >= r["population_error"] for r in ok)
    lo, hi = wilson(cov, len(ok))
    cert = float(np.mean([r["certificate"] for r in ok])) if ok else float("nan")
    err = float(np.mean([r["population_error"] for r in ok])) if ok else float("nan")
    chose: dict = {}
    for r in ok:
        chose[r["chose"]] = chose.get(r["chose"], 0) + 1
    return [
        f"population fitted to {meta['set']}, sites {'/'.join(map(str, meta['sizes']))}, Bayes error "
        f"{meta['bayes_error']:.4f}; {len(rows)} studies ({len(rows) - len(ok)} failed), "
        f"{meta.get('wall_seconds', 0):.0f} s",
        f"coverage {cov}/{len(ok)} = {cov / max(len(ok), 1):.3f} (Wilson 95 % [{lo:.3f}, {hi:.3f}]); "
        f"mean certificate {cert:.3f}, mean population error {err:.3f}, gap {cert - err:+.3f}",
        "chosen: " + ", ".join(f"{k} × {v}" for k, v in sorted(chose.items(), key=lambda kv: -kv[1])),
    ]


if __name__ == "__main__":
    main()
