"""Regression of the boosting vote against the previous release, each release in its own process.

Run: python bench/regression_boost.py [--prev e049136]

``bench/regression.py --groups boost`` compares the boosting vote's R*, certificate, μ,
predictions and fit times, each release in its own process; this script compares its
iterations too. Here this release fits ``BoostVote(time_limit=None)`` on exact summaries of small UCI sets
(bench/uci.py, split 0, 4 bins) and writes the tables and its results to a pickle; a second
process with the previous release (``git archive`` into bench/out/prev-REV) fits the same
tables and compares, to the bit: μ, the
certificate, the bound history R^k, the row-generation rounds, the per-iteration history
(k, R, columns, rows) and the predictions on the test rows. Prints one line per configuration
and ``differing: N``.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.abc
import importlib.util
import pickle
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = [("votes", {"s": 0.0}), ("votes", {}), ("kr-vs-kp", {"s": 0.0, "k_max": 6}), ("credit", {"k_max": 8}),
           ("promoters", {"s": 0.0, "k_max": 6})]


def fit(BoostVote, summary, params: dict, X_test: np.ndarray) -> dict:
    t0 = time.perf_counter()
    m = BoostVote(time_limit=None, **params).fit(summary)
    return {"mu": np.asarray(m.mu_), "cert": m.certificate_.value, "iters": list(m.iterations_),
            "rounds": m.row_rounds_,
            "hist": [(h["k"], h["R"], h["columns"], h["rows"]) for h in m.history_], "pred": m.predict(X_test),
            "seconds": time.perf_counter() - t0}


def new_side(out: Path) -> None:
    """This release: summaries, fits, and everything the old side needs, pickled."""
    sys.path.insert(0, str(ROOT / "bench"))
    import uci  # type: ignore[import-not-found]

    from marg.learners.boost.vote import BoostVote
    from marg.marginals.summary import Summary

    data = []
    for name, params in CONFIGS:
        df, y, binned = uci.load(name)
        cb, Xtr, ytr, Xte, _ = uci.split_codes(df, y, binned, 0, 4)
        S = Summary.from_rows(cb, Xtr, ytr, stats="all")
        tables = [(tuple(t.clique), np.asarray(t.counts), {"mechanism": t.noise.mechanism, "scale": t.noise.scale,
                   "std": t.noise.std, "epsilon": t.noise.epsilon, "delta": t.noise.delta, "rho": t.noise.rho}, t.kind)
                  for t in S.tables]
        r = fit(BoostVote, S, params, Xte)
        r.update({"name": name, "params": params, "cb": cb.to_dict(), "tables": tables, "Xte": Xte})
        data.append(r)
    out.write_bytes(pickle.dumps(data))


class _PreviousLayers(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``marg.marginals.X`` (and learners, protocols) -> the previous release's top-level module, one copy of each."""

    def find_spec(self, name, path, target=None):
        for pre in ("marg.marginals", "marg.learners", "marg.protocols"):
            if name == pre or name.startswith(pre + "."):
                return importlib.util.spec_from_loader(name, self)
        return None

    def create_module(self, spec):
        return importlib.import_module(spec.name[len("marg."):])

    def exec_module(self, module):
        pass


def old_side(prev: Path, path: Path) -> int:
    """The previous release on the same tables; returns how many configurations differ."""
    sys.path.insert(0, str(prev))
    sys.meta_path.insert(0, _PreviousLayers())
    from learners.boost.vote import BoostVote  # type: ignore[import-not-found]
    from marginals.codebook import Codebook  # type: ignore[import-not-found]
    from marginals.noise import NoiseRecord  # type: ignore[import-not-found]
    from marginals.summary import Summary  # type: ignore[import-not-found]
    from marginals.tables import MarginalTable  # type: ignore[import-not-found]

    bad = 0
    for d in pickle.loads(path.read_bytes()):
        cb = Codebook.from_dict(d["cb"])
        S = Summary.from_tables(cb, [MarginalTable(clique=c, counts=n, noise=NoiseRecord(**r), kind=k)
                                     for c, n, r, k in d["tables"]])
        o = fit(BoostVote, S, d["params"], d["Xte"])
        same = (o["cert"] == d["cert"] and o["mu"].shape == d["mu"].shape and np.array_equal(o["mu"], d["mu"])
                and o["iters"] == d["iters"] and o["rounds"] == d["rounds"] and o["hist"] == d["hist"]
                and np.array_equal(o["pred"], d["pred"]))
        bad += not same
        dmu = float(np.abs(o["mu"] - d["mu"]).max()) if o["mu"].shape == d["mu"].shape else float("nan")
        print(f"{d['name']:10s} {str(d['params']):28s} {'identical' if same else 'DIFFERS'}  certificate old "
              f"{o['cert']:.17g} new {d['cert']:.17g}  max|dmu| {dmu:.1e}  iterations "
              f"{len(o['iters'])}/{len(d['iters'])}  seconds old {o['seconds']:.2f} new {d['seconds']:.2f}", flush=True)
    print(f"differing: {bad}")
    return bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prev", default="e049136")
    ap.add_argument("--side", choices=["both", "new", "old"], default="both", help=argparse.SUPPRESS)
    ap.add_argument("--pickle", default=str(ROOT / "bench" / "out" / "regression-boost.pkl"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    path = Path(a.pickle)
    if a.side == "new":
        new_side(path)
        return 0
    sys.path.insert(0, str(ROOT / "bench"))
    from regression import extract_previous  # type: ignore[import-not-found]

    prev = extract_previous(a.prev)
    if a.side == "old":
        return 1 if old_side(prev, path) else 0
    path.parent.mkdir(parents=True, exist_ok=True)
    me = [sys.executable, __file__, "--prev", a.prev, "--pickle", str(path)]
    subprocess.run(me + ["--side", "new"], check=True)
    return subprocess.run(me + ["--side", "old"]).returncode


if __name__ == "__main__":
    sys.exit(main())
