"""What bench/regression.py fits on both sides: the configurations, and their tables drawn once.

The tables are counted (or privatized and summed over sites) here, with this checkout's
marginals layer, and written for both workers as files: ``cases.json`` (codebooks, table and
noise records, configurations) and ``arrays.npz`` (counts, test rows). The groups and their
configurations are listed in bench/regression.py's docstring.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def bench_module(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# (name, estimator kind, parameters): the configurations of BENCHMARKS.md
UCI_CONFIGS = [
    ("dcc", "dcc", {"s": 0.0}), ("dcc-label", "dcc", {"s": 0.0, "edge_weight": "label"}),
    ("gdcc", "dcc", {"s": 0.0, "greedy": True}), ("dcc-cal", "dcc", {}),
    ("dcc-hinge", "dcc", {"s": 0.0, "loss": "hinge"}),
    ("dcc-all", "dcc", {"s": 0.0, "structure": "all"}), ("gdcc-cal", "dcc", {"greedy": True}),
    ("mrc", "mrc", {"s": 0.0, "solver": "full"}), ("mrc-cal", "mrc", {"solver": "full"}),
    ("mrc-cg", "mrc", {"s": 0.0}), ("mrc-cg-cal", "mrc", {}), ("renyi", "renyi", {}),
]
SELECTION = [("group-lasso", "group-lasso", {"max_features": 4}),
             ("gbd", "gbd", {"max_features": 4, "time_limit": 30.0})]
ENGINE_CONFIGS = [
    ("mrc-rows", "mrc", {"s": 0.0, "solver": "full", "formulation": "rows"}),
    ("mrc-cg-rows", "mrc", {"formulation": "rows"}),
    ("dcc-rows", "dcc", {"s": 0.0, "solver": "rows"}), ("gdcc-rows", "dcc", {"greedy": True, "solver": "rows"}),
]
DP_CONFIGS = {"first": [("mrc", "mrc", {})], "all": [("renyi", "renyi", {}), ("dcc", "dcc", {})]}
CG_CONFIGS = [("mrc-cg s=0.3", "mrc", {"s": 0.3}), ("mrc-cg-cal", "mrc", {})]
BOOST_CONFIGS = {"votes": [("boost", "boost", {"s": 0.0, "time_limit": None}),
                           ("boost-cal", "boost", {"time_limit": None})],
                 "kr-vs-kp": [("boost", "boost", {"s": 0.0, "k_max": 6, "time_limit": None})],
                 "credit": [("boost-cal", "boost", {"k_max": 8, "time_limit": None})],
                 "promoters": [("boost", "boost", {"s": 0.0, "k_max": 6, "time_limit": None})]}


class Inputs:
    """The cases both sides fit: codebooks and table records in cases.json, arrays in arrays.npz."""

    def __init__(self) -> None:
        self.cases: list[dict] = []
        self.arrays: dict[str, np.ndarray] = {}

    def array(self, a) -> str:
        key = f"a{len(self.arrays)}"
        self.arrays[key] = np.asarray(a)
        return key

    def add(self, group: str, data: str, codebook, tables, X_test, configs, selection=()) -> None:
        recs = []
        for t in tables:
            if t.hidden_tails:
                raise SystemExit(f"{data}: table {t.name} has hidden tails, which the inputs do not carry")
            noise = dataclasses.asdict(t.noise)
            recs.append({"clique": list(t.clique), "kind": t.kind, "counts": self.array(t.counts), "noise": noise,
                         "hidden": None if t.hidden is None else self.array(t.hidden)})
        self.cases.append({"id": f"{group}|{data}", "group": group, "data": data, "codebook": codebook.to_dict(),
                           "tables": recs, "X_test": self.array(X_test), "configs": [list(c) for c in configs],
                           "selection": [list(s) for s in selection]})

    def write(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "cases.json").write_text(json.dumps(self.cases))
        np.savez(folder / "arrays.npz", **self.arrays)


def draw_inputs(groups: set[str], quick: bool, seeds: int) -> Inputs:
    from marg.marginals.summary import Summary

    out = Inputs()
    uci = bench_module("uci") if groups & {"uci", "engine", "boost"} else None
    if "engine" in groups:
        for name in ("votes", "credit", "kr-vs-kp"):
            df, y, binned = uci.load(name)
            cb, Xtr, ytr, Xte, _ = uci.split_codes(df, y, binned, 0, 4)
            out.add("engine", f"{name}/0", cb, Summary.from_rows(cb, Xtr, ytr, stats="all").tables, Xte, ENGINE_CONFIGS)
    if "uci" in groups:
        for name in ["votes", "credit", "kr-vs-kp", "promoters"] + ([] if quick else ["adult"]):
            df, y, binned = uci.load(name)
            for seed in range(1 if quick or name == "adult" else seeds):
                cb, Xtr, ytr, Xte, _ = uci.split_codes(df, y, binned, seed, 4)
                configs = [c for c in UCI_CONFIGS if not (c[0] == "dcc-all" and name in ("promoters", "adult"))
                           and not (c[0] == "dcc-hinge" and len(cb.label.classes) != 2)]
                out.add("UCI", f"{name}/{seed}", cb, Summary.from_rows(cb, Xtr, ytr, stats="all").tables, Xte, configs,
                        SELECTION if name in ("votes", "credit") else ())
    if "boost" in groups:
        for name, configs in BOOST_CONFIGS.items():
            df, y, binned = uci.load(name)
            cb, Xtr, ytr, Xte, _ = uci.split_codes(df, y, binned, 0, 4)
            out.add("boost", f"{name}/0", cb, Summary.from_rows(cb, Xtr, ytr, stats="all").tables, Xte, configs)
    if "dp" in groups:  # bench/privacy.py's adult at ε = 1 per site: the noisy tables drawn here, once
        from marg.marginals.counts.counting import count_tables
        from marg.marginals.data.encoding import encode_file
        from marg.marginals.privacy import privatize
        from marg.marginals.summary import sum_tables
        from marg.marginals.counts.tables import plan_cliques

        priv = bench_module("privacy")
        cb = priv.adult_codebook()
        enc = encode_file(priv.DATA, cb)
        X, y = enc.X, enc.y
        perm = np.random.default_rng(0).permutation(len(y))
        test, train = perm[: len(y) // 5], perm[len(y) // 5:]
        sites = np.array_split(train, 3)
        for plan, configs in DP_CONFIGS.items():
            exact = [count_tables(cb, X[s], y[s], plan_cliques(cb, plan)) for s in sites]
            noisy = [privatize(ts, epsilon=1.0, codebook=cb)[0] for ts in exact]
            out.add("DP ε=1", f"adult/{plan}", cb, sum_tables(noisy)[0], X[test], configs)
    if "cg" in groups and not quick:
        hd = bench_module("mrc_highdim")
        for name in ("colon", "leukemia", "arcene"):
            Xg, yraw, discrete = hd.load(name)
            classes = np.unique(yraw)
            encg = hd.Encoder(Xg, classes, discrete)
            codes = encg.codes(Xg)
            tables = Summary.from_rows(encg.codebook, codes, np.searchsorted(classes, yraw)).tables
            out.add("CG", name, encg.codebook, tables, codes, CG_CONFIGS)
    return out
