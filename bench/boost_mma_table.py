"""The boosting seed's Table 2.1: MMA branch-and-bound nodes and seconds per LP-Boost iteration.

Run: python bench/boost_mma_table.py [--sets clvheart,huheart] [--iters 30] [--seconds 30]

LP-Boost (D = 3/M, i.e. ν = 1/3, the seed's §2.3 setting) runs ``--iters`` iterations on
all rows of a set with the default search (tight bound, k = 1 strong branching) and keeps
the weights w of every iteration; then every configuration below solves the SAME sequence
of MMA problems (no order cap, best-first, queue limit 500,000, ``--seconds`` per search), so
the comparison is side by side on identical inputs:

- ``gs``: the simple bound (2.5), k = |F| in index order (the method of Goldberg & Shan);
- ``simple-k/2`` / ``tight-k/2``: simple or tightened bound (2.7), k = ⌈|F|/2⌉ by reverse greedy;
- ``simple-k1`` / ``tight-k1``: simple or tightened bound, k = 1 lexical strong branching.

Reported: mean seconds and nodes over iterations 1–15 and 16–30 and the iterations that hit
a limit (their nodes/seconds are counted up to the limit). N is the number of binary tests.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE))

import numpy as np  # noqa: E402

from boost_data import load  # noqa: E402
from boost_ref import lpboost  # noqa: E402
from marg.learners.boost.literals import codebook_tests  # noqa: E402
from marg.learners.boost.mma import SearchOptions, maximize_agreement  # noqa: E402
from marg.learners.boost.oracles import RowOracle  # noqa: E402

CONFIGS = {
    "gs": dict(bound="simple", branching="static", k_fraction=1.0),
    "simple-k/2": dict(bound="simple", branching="greedy", k_fraction=0.5),
    "tight-k/2": dict(bound="tight", branching="greedy", k_fraction=0.5),
    "simple-k1": dict(bound="simple", branching="strong"),
    "tight-k1": dict(bound="tight", branching="strong"),
}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="clvheart,huheart")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    a = ap.parse_args(argv)
    print("| set | N | config | iters 1–15 s | nodes | iters 16–30 s | nodes | limit hits |")
    print("|---|---|---|---|---|---|---|---|")
    for name in a.sets.split(","):
        cb, X, y = load(name)
        tests = codebook_tests(cb)
        _, st = lpboost(cb, X, y, nu=1.0 / 3.0, max_order=len(tests), max_iter=a.iters, keep_weights=True,
                        options=SearchOptions(time_limit=a.seconds), tests=tests)
        W = st.weights[: a.iters]
        for cfg in a.configs.split(","):
            opts = SearchOptions(time_limit=a.seconds, **CONFIGS[cfg])
            secs, nodes, hits = [], [], 0
            for w in W:
                r = maximize_agreement(RowOracle(cb, X, y == 1, w, tests=tests), options=opts)
                secs.append(r.seconds)
                nodes.append(r.nodes)
                hits += r.status != "optimal"
            h1, h2 = slice(0, 15), slice(15, 30)
            part = lambda v, s: f"{np.mean(v[s]):.2f}" if len(v[s]) else "–"  # noqa: E731
            print(f"| {name} | {len(tests)} | {cfg} | {part(secs, h1)} | {part(nodes, h1)} | "
                  f"{part(secs, h2)} | {part(nodes, h2)} | {hits}/{len(W)} |", flush=True)


if __name__ == "__main__":
    main()
