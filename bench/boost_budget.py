"""boost's work budget on adult's three DP sites: CPU seconds and result, the budget against a search to optimality.

Run: nice -n 10 python bench/boost_budget.py [--pairs 2] [--work DIR]
     nice -n 10 python bench/boost_budget.py --small

adult's training rows (the seeded 70/30 split of ``bench/learn.py --adult-sites``) dealt to three
sites, each exported once through the installed console script (``marg export SITE.tsv --epsilon 1
--rounds 1``: DP, first-order and every pair table; kept in ``--work`` to be reused). Then, in this
process and interleaved in pairs (the machine's load shared), ``BoostVote().fit`` (the default work
budget: :data:`marg.learners.boost.minimax_cg.FIT_NODES` branch-and-bound nodes over the fit's
pricing searches, at most ``SEARCH_NODES`` a search) against ``BoostVote(pricing_nodes=None)``
(every search to optimality, the previous default), each on a freshly loaded summary with the
noise tails' cache emptied; CPU seconds of the fit (``time.process_time``),
iterations, nodes, why it stopped, the certificate and whether the vote is empty (``marg learn``
refuses an empty vote). Last, ``marg learn --learner boost`` as a fresh process: its CPU seconds
(user + system of the child, start-up and bundle loading included) and exit code.

``--small``: the small sets of ``bench/regression_boost.py`` (exact summaries of UCI sets, split 0,
4 bins, its five configurations), each fitted with ``pricing_nodes=None`` and with the default
budget: certificate, stop, nodes, iterations, CPU seconds, and whether the certificate and the test
predictions are the same.
"""

from __future__ import annotations

import argparse
import gzip
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from marg.learners.boost.vote import BoostVote  # noqa: E402
from marg.marginals import noise_tails  # noqa: E402
from marg.protocols.load import load_summary  # noqa: E402

DATASETS = Path(os.environ.get("MARG_DATASETS", ROOT.parent / "shared" / "datasets"))
EXE = Path(sys.executable).parent / "marg"


def bundles(work: Path) -> list[Path]:
    """The three sites' DP bundles in ``work`` (exported once, as bench/learn.py --adult-sites does)."""
    from privacy import adult_codebook

    out = [work / f"site{k}.bundle" for k in range(3)]
    if all(p.exists() for p in out):
        return out
    cb = adult_codebook()
    cb.save(work / "cb.json")
    lines = gzip.open(DATASETS / "adult" / "adult.tsv.gz", "rt").read().splitlines()
    head, rows = lines[0], lines[1:]
    tr = np.random.default_rng(0).permutation(len(rows))[: int(0.7 * len(rows))]
    for k in range(3):
        (work / f"site{k}.tsv").write_text(head + "\n" + "\n".join(rows[i] for i in tr[k::3]) + "\n")
        subprocess.run([str(EXE), "export", str(work / f"site{k}.tsv"), "--schema", str(work / "cb.json"), "--site",
                        f"site{k}",
                        "--epsilon", "1", "--rounds", "1", "--ledger", str(work / f"ledger{k}"), "--out", str(out[k])],
                       check=True, capture_output=True)
    return out


def fit(paths, **params) -> str:
    """One fit on a freshly loaded summary, the noise tails' cache emptied (so no run inherits another's work)."""
    noise_tails._lattice_halfwidth.cache_clear()
    summary = load_summary(paths, allow_unsigned=True)
    t0 = time.process_time()
    est = BoostVote(**params).fit(summary)
    cpu = time.process_time() - t0
    nodes = sum(h.get("nodes", 0) for h in est.history_)
    result = "refusal (empty vote)" if not est.used_features() else f"model ({len(est.used_features())} features)"
    return (f"{cpu:.1f} | {len(est.history_)} | {nodes:,} | {est.stopped_} | {est.certificate_.value:.6f} | {result}")


def small() -> None:
    """The budget against searches to optimality on regression_boost.py's small sets."""
    import uci  # type: ignore[import-not-found]
    from regression_boost import CONFIGS  # type: ignore[import-not-found]

    from marg.marginals.summary import Summary

    print("| set | params | to optimality: certificate, stop, nodes, iterations, CPU (s) "
          "| default budget: the same | same certificate | same predictions |")
    print("|---|---|---|---|---|---|")
    for name, params in CONFIGS:
        df, y, binned = uci.load(name)
        cb, Xtr, ytr, Xte, _ = uci.split_codes(df, y, binned, 0, 4)
        S = Summary.from_rows(cb, Xtr, ytr, stats="all")
        out = []
        for budget in ({"pricing_nodes": None}, {}):
            t0 = time.process_time()
            m = BoostVote(time_limit=None, **params, **budget).fit(S)
            cpu = time.process_time() - t0
            out.append((m.certificate_.value, m.stopped_, sum(h.get("nodes", 0) for h in m.history_), len(m.history_),
                        cpu, m.predict(Xte)))
        cells = [f"{c:.6f}, {st}, {n:,}, {k}, {t:.1f}" for c, st, n, k, t, _ in out]
        print(f"| {name} | {params} | {cells[0]} | {cells[1]} | {out[0][0] == out[1][0]} "
              f"| {bool(np.array_equal(out[0][5], out[1][5]))} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--small", action="store_true")
    args = ap.parse_args()
    if args.small:
        small()
        return
    work = args.work or Path(tempfile.mkdtemp(prefix="marg-boost-budget-"))
    work.mkdir(parents=True, exist_ok=True)
    paths = bundles(work)
    summary = load_summary(paths, allow_unsigned=True)
    print(f"# boost on adult, three DP sites (ε = 1 each, --rounds 1), n = {summary.n:,.0f}")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"load average {os.getloadavg()[0]:.1f}\n")
    print("| run | search | fit CPU (s) | iterations | nodes | stop | certificate | result |")
    print("|---|---|---|---|---|---|---|---|")
    for k in range(args.pairs):
        for name, params in (("pricing_nodes=None (to optimality)", {"pricing_nodes": None}), ("default budget", {})):
            print(f"| {k + 1} | {name} | {fit(paths, **params)} |", flush=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run([str(EXE), "learn", *map(str, paths), "--learner", "boost", "--allow-unsigned", "--no-sign",
                        "--out", str(work / "boost.model")], capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    last = (r.stderr.strip().splitlines() or [""])[-1]
    print(f"\n`marg learn --learner boost` (fresh process): {cpu:.1f} s CPU, exit {r.returncode}: {last[:160]}")


if __name__ == "__main__":
    main()
