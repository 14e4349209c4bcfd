"""Regression against the previous release: the same certificates, the same predictions, fit times side by side.

Run: python bench/regression.py [--prev 3c9b7f2] [--quick] [--out bench/out/regression.md]

The previous release (git revision ``--prev``) is extracted with ``git archive`` into
``bench/out/prev-REV``; its layers are top-level packages (``learners``, ``marginals``), this
release's are under ``marg.``, so both are imported in one process and fitted on the same
summaries (each side builds its Summary from the same tables; under DP the same noisy
tables, drawn once). For every learner and configuration of BENCHMARKS.md (s = 0 and
calibrated λ) it reports max |Δ worst_case_error_| (target ≤ 1e-9), the number of test
rows whose deterministic prediction differs (target 0), the largest |Δμ| or |Δz|, and
each side's fit time:

- UCI sets of bench/uci.py (adult, credit-a, kr-vs-kp, promoters, house-votes-84; 70/30
  splits, seeds 0..): dcc (CMI forest), dcc-label, gdcc (greedy), dcc-cal, dcc-hinge,
  dcc-all (local polytope), gdcc-cal, mrc (full LP, s = 0), mrc-cal, mrc-cg, mrc-cg-cal,
  renyi; group-lasso and gbd selection (selected features and objective);
- DP (bench/privacy.py's adult setup: 3 sites, ε = 1 per site, Laplace): mrc, renyi (with its
  noise margin), dcc;
- high dimensions (bench/mrc_highdim.py's colon, leukemia, arcene; terciles): MRC by column
  generation at s = 0.3 (the seed's λ) and calibrated — the fit-time comparison of issue 14;
- engine (``--groups engine``, not in the default): the minimax engine's other paths on the
  small UCI sets — MRC and DCC on the row-generation formulation (full, column generation,
  a given forest, greedy edges). (The boosting vote cannot be compared in one process: the
  previous release's boost checks feature types against this release's codebook classes.)

Only the adapters ``OldSide`` and ``NewSide`` touch either release's API.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import os
import platform
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))


def extract_previous(rev: str) -> Path:
    """``git archive REV`` into bench/out/prev-REV (once); returns the folder."""
    dest = ROOT / "bench" / "out" / f"prev-{rev}"
    if not (dest / "learners").is_dir():
        dest.mkdir(parents=True, exist_ok=True)
        data = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            tar.extractall(dest, filter="data")
    return dest


def bench_module(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Side:
    """One release's API: build a Summary from tables and fit a configuration."""

    def __init__(self, mods: dict):
        self.m = mods

    def summary(self, cb_dict: dict, tables: list):
        Codebook, MarginalTable, NoiseRecord, Summary = (self.m[k] for k in ("Codebook", "MarginalTable", "NoiseRecord",
                                                                             "Summary"))
        cb = Codebook.from_dict(cb_dict)
        ts = [MarginalTable(clique=tuple(c), counts=np.array(n), noise=NoiseRecord(**r), kind=k)
              for c, n, r, k in tables]
        return Summary.from_tables(cb, ts)

    def estimator(self, kind: str, params: dict):
        return self.m[kind](**params)

    def select(self, summary, method: str, **kw):
        r = self.m["select_features"](summary, method=method, **kw)
        return list(r.selected), float(r.objective)


def old_side(prev: Path) -> Side:
    sys.path.insert(0, str(prev))
    import learners.dcc as dcc  # type: ignore[import-not-found]
    import learners.mrc as mrc  # type: ignore[import-not-found]
    import learners.renyi as renyi  # type: ignore[import-not-found]
    import learners.selection as sel  # type: ignore[import-not-found]
    import marginals.codebook as cbm  # type: ignore[import-not-found]
    import marginals.noise as noise  # type: ignore[import-not-found]
    import marginals.summary as summ  # type: ignore[import-not-found]
    import marginals.tables as tab  # type: ignore[import-not-found]

    sys.path.remove(str(prev))
    return Side({"Codebook": cbm.Codebook, "MarginalTable": tab.MarginalTable, "NoiseRecord": noise.NoiseRecord,
                 "Summary": summ.Summary, "mrc": mrc.MRC, "dcc": dcc.DCC, "renyi": renyi.RenyiClassifier,
                 "select_features": sel.select_features})


def new_side() -> Side:
    from marg.learners.classifiers.dcc import DCC
    from marg.learners.classifiers.mrc import MRC
    from marg.learners.classifiers.renyi import RenyiClassifier
    from marg.learners.selection.select import select_features
    from marg.marginals.data.codebook import Codebook
    from marg.marginals.counts.noise import NoiseRecord
    from marg.marginals.summary import Summary
    from marg.marginals.counts.tables import MarginalTable

    return Side({"Codebook": Codebook, "MarginalTable": MarginalTable, "NoiseRecord": NoiseRecord, "Summary": Summary,
                 "mrc": MRC, "dcc": DCC, "renyi": RenyiClassifier, "select_features": select_features})


# (name, estimator kind, parameters): the configurations of BENCHMARKS.md
UCI_CONFIGS = [
    ("dcc", "dcc", {"s": 0.0}), ("dcc-label", "dcc", {"s": 0.0, "edge_weight": "label"}),
    ("gdcc", "dcc", {"s": 0.0, "greedy": True}), ("dcc-cal", "dcc", {}),
    ("dcc-hinge", "dcc", {"s": 0.0, "loss": "hinge"}),
    ("dcc-all", "dcc", {"s": 0.0, "structure": "all"}), ("gdcc-cal", "dcc", {"greedy": True}),
    ("mrc", "mrc", {"s": 0.0, "solver": "full"}), ("mrc-cal", "mrc", {"solver": "full"}),
    ("mrc-cg", "mrc", {"s": 0.0}), ("mrc-cg-cal", "mrc", {}), ("renyi", "renyi", {}),
]
ENGINE_CONFIGS = [
    ("mrc-rows", "mrc", {"s": 0.0, "solver": "full", "formulation": "rows"}),
    ("mrc-cg-rows", "mrc", {"formulation": "rows"}),
    ("dcc-rows", "dcc", {"s": 0.0, "solver": "rows"}), ("gdcc-rows", "dcc", {"greedy": True, "solver": "rows"}),
]
DP_CONFIGS = [("mrc", "mrc", {}), ("renyi", "renyi", {}), ("dcc", "dcc", {})]


def table_records(tables) -> list:
    """Tables as plain (clique, counts, noise record, kind) for either side's constructors."""
    out = []
    for t in tables:
        r = t.noise
        out.append((t.clique, np.asarray(t.counts), {"mechanism": r.mechanism, "scale": r.scale, "std": r.std,
                                                     "epsilon": r.epsilon, "delta": r.delta, "rho": r.rho}, t.kind))
    return out


def compare(old, new, X) -> dict:
    """|ΔR|, differing predictions and the largest coefficient difference of two fitted models."""
    dR = abs(float(old.worst_case_error_) - float(new.worst_case_error_))
    dpred = int(np.sum(np.asarray(old.predict(X)) != np.asarray(new.predict(X))))
    a = getattr(old, "mu_", None)
    b = getattr(new, "mu_", None)
    if a is None:
        a, b = old.z_, new.z_
    dcoef = float(np.max(np.abs(a - b))) if np.shape(a) == np.shape(b) else float("inf")
    return {"dR": dR, "dpred": dpred, "dcoef": dcoef}


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


REPEAT = 3


def run_pair(OLD: Side, NEW: Side, kind: str, params: dict, so, sn, X) -> dict:
    """Fit both sides ``REPEAT`` times, alternating (the machine is noisy); median fit times."""
    t_old, t_new = [], []
    for _ in range(REPEAT):
        old, t = timed(lambda: OLD.estimator(kind, params).fit(so))
        t_old.append(t)
        new, t = timed(lambda: NEW.estimator(kind, params).fit(sn))
        t_new.append(t)
    return {**compare(old, new, X), "t_old": float(np.median(t_old)), "t_new": float(np.median(t_new))}


def row(group: str, data: str, config: str, r: dict) -> str:
    ok = r["dR"] <= 1e-9 and r["dpred"] == 0
    return (f"| {group} | {data} | {config} | {r['dR']:.1e} | {r['dpred']} | {r['dcoef']:.1e} | {r['t_old']:.3f} | "
            f"{r['t_new']:.3f} | {r['t_new'] / max(r['t_old'], 1e-9):.2f} | {'ok' if ok else 'DIFF'} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prev", default="3c9b7f2")
    ap.add_argument("--quick", action="store_true", help="one split of the small UCI sets, DP once, no gene sets")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3, help="fits per side and configuration (median time reported)")
    ap.add_argument("--groups", default="uci,dp,cg", help="comma-separated: uci (with selection), dp, cg, engine")
    ap.add_argument("--out", default=str(ROOT / "bench" / "out" / "regression.md"))
    args = ap.parse_args()
    global REPEAT
    REPEAT = max(1, args.repeat)
    OLD, NEW = old_side(extract_previous(args.prev)), new_side()
    uci = bench_module("uci")
    lines = [f"# Regression against {args.prev}", "",
             f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, numpy "
             f"{np.__version__}; `python bench/regression.py {' '.join(sys.argv[1:])}`", "",
             f"fit times: the median of {max(1, args.repeat)} fits per side, alternating old and new.", "",
             "| group | data | config | max \\|ΔR*\\| | predictions differing | max \\|Δμ\\| | old s | new s | "
             "new/old | |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)

    def emit(s: str) -> None:
        lines.append(s)
        print(s, flush=True)

    groups = {g.strip() for g in args.groups.split(",") if g.strip()}
    sets = (["votes", "credit", "kr-vs-kp", "promoters"] + ([] if args.quick else ["adult"])) if "uci" in groups else []
    for name in ["votes", "credit", "kr-vs-kp"] if "engine" in groups else []:
        df, y, binned = uci.load(name)
        cb, Xtr, ytr, Xte, yte = uci.split_codes(df, y, binned, 0, 4)
        from marg.marginals.summary import Summary

        recs = table_records(Summary.from_rows(cb, Xtr, ytr, stats="all").tables)
        so, sn = OLD.summary(cb.to_dict(), recs), NEW.summary(cb.to_dict(), recs)
        for config, kind, params in ENGINE_CONFIGS:
            emit(row("engine", f"{name}/0", config, run_pair(OLD, NEW, kind, params, so, sn, Xte)))
    for name in sets:
        df, y, binned = uci.load(name)
        for seed in range(1 if args.quick or name == "adult" else args.seeds):
            cb, Xtr, ytr, Xte, yte = uci.split_codes(df, y, binned, seed, 4)
            from marg.marginals.summary import Summary

            recs = table_records(Summary.from_rows(cb, Xtr, ytr, stats="all").tables)
            so, sn = OLD.summary(cb.to_dict(), recs), NEW.summary(cb.to_dict(), recs)
            for config, kind, params in UCI_CONFIGS:
                if config == "dcc-all" and name in ("promoters", "adult"):
                    continue  # minutes per fit: kept to the smaller sets
                if config == "dcc-hinge" and len(cb.label.classes) != 2:
                    continue
                emit(row("UCI", f"{name}/{seed}", config, run_pair(OLD, NEW, kind, params, so, sn, Xte)))
            if name in ("votes", "credit"):
                for method, kw in (("group-lasso", {"max_features": 4}),
                                   ("gbd", {"max_features": 4, "time_limit": 30.0})):
                    (a, oa), t_old = timed(lambda: OLD.select(so, method, **kw))
                    (b, ob), t_new = timed(lambda: NEW.select(sn, method, **kw))
                    r = {"dR": abs(oa - ob), "dpred": int(a != b), "dcoef": 0.0, "t_old": t_old, "t_new": t_new}
                    emit(row("selection", f"{name}/{seed}", f"{method} (Δobjective, selected differ)", r))

    # DP: bench/privacy.py's adult at ε = 1 per site, the same noisy tables for both sides
    priv = bench_module("privacy")
    from marg.marginals.data.encoding import encode_file
    from marg.marginals.privacy import privatize
    from marg.marginals.summary import sum_tables
    from marg.marginals.counts.counting import count_tables
    from marg.marginals.counts.tables import plan_cliques

    cb = priv.adult_codebook()
    enc = encode_file(priv.DATA, cb)
    X, y = enc.X, enc.y
    rng = np.random.default_rng(0)
    perm = rng.permutation(len(y))
    test, train = perm[: len(y) // 5], perm[len(y) // 5:]
    sites = np.array_split(train, 3)
    dp_plans = (("first", [c for c in DP_CONFIGS if c[0] == "mrc"]), ("all", [c for c in DP_CONFIGS if c[0] != "mrc"]))
    for plan, configs in dp_plans if "dp" in groups else ():
        exact = [count_tables(cb, X[s], y[s], plan_cliques(cb, plan)) for s in sites]
        noisy = [privatize(ts, epsilon=1.0, codebook=cb)[0] for ts in exact]
        recs = table_records(sum_tables(noisy)[0])
        so, sn = OLD.summary(cb.to_dict(), recs), NEW.summary(cb.to_dict(), recs)
        for config, kind, params in configs:
            emit(row("DP ε=1", "adult", config, run_pair(OLD, NEW, kind, params, so, sn, X[test])))

    if not args.quick and "cg" in groups:
        hd = bench_module("mrc_highdim")
        for name in ("colon", "leukemia", "arcene"):
            Xg, yraw, discrete = hd.load(name)
            classes = np.unique(yraw)
            yg = np.searchsorted(classes, yraw)
            encg = hd.Encoder(Xg, classes, discrete)
            codes = encg.codes(Xg)
            from marg.marginals.summary import Summary

            recs = table_records(Summary.from_rows(encg.codebook, codes, yg).tables)
            so, sn = OLD.summary(encg.codebook.to_dict(), recs), NEW.summary(encg.codebook.to_dict(), recs)
            for config, params in (("mrc-cg s=0.3", {"s": 0.3}), ("mrc-cg-cal", {})):
                emit(row("CG", name, config, run_pair(OLD, NEW, "mrc", params, so, sn, codes)))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    bad = [ln for ln in lines if ln.endswith("DIFF |")]
    print(f"\n{len(bad)} configuration(s) differ; table written to {args.out}")


if __name__ == "__main__":
    main()
