"""The study's design beside what-ifs of it, interleaved split by split in one process (issue 44, the design rule).

Run::

    nice -n 10 .venv/bin/python bench/study_design_whatif.py --sets adult --splits 5 \\
        --paths "study,study (previous evaluation rule)" --json R.json
    nice -n 10 .venv/bin/python bench/study_design_whatif.py --sets breast-w,credit-a --splits 5 \\
        --paths "study,study (evaluation 0.5/0.5)" --json R.json
    .venv/bin/python bench/study_accept.py --report R.json --out bench/results/NAME.md

Each split runs the study's default (bench/study_accept.py's ``study`` path, in process: bench/study_calls.py)
and then, on the same split, the same sites and the same test rows, each what-if named in ``--paths``; every
path is a fresh study (its own keys' homes, ledgers and drop box), so the noise differs between paths, as between
two runs. The what-ifs change the design only (what ``marg study init`` writes in the study file), never the
sites or the learner:

- ``study (previous evaluation rule)``: :func:`marg.marginals.study_evaluation.choose_evaluation` as it was
  before ``WIDTH_NEED`` (J = p_m + W, ties to the smallest f, then the smallest a_E);
- ``study (width need W)``: the evaluation rule with ``WIDTH_NEED`` = W;
- ``study (evaluation F/A)``: the first-order mode's evaluation round at held-out fraction F and share A
  (:func:`marg.marginals.study_evaluation.choose_comparison` returns that round; e.g. ``0.5/0.5``, the grid's
  tightest bound);
- ``study (pooled top-K without evaluation)``: round 1 pools every first-order table, round 2 measures the top K of
  the pooled scores (their first-order tables and the pairs among them, as the pooled mode does), no evaluation
  round (every patient trains; the model's own certificate) — the design's pooled mode with k = K forced, where
  the first-order mode would measure every first-order table (house-votes-84: one strong feature among 16).

The larger class and logistic regression on the pooled rows come with each split (study_accept's rows).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import study_calls  # noqa: E402  (bench/study_calls.py: the one loader of the benches)

A = study_calls._bench("study_accept")
PREVIOUS = "study (previous evaluation rule)"
FIXED = re.compile(r"study \(evaluation ([0-9.]+)/([0-9.]+)\)$")
NEED = re.compile(r"study \(width need ([0-9.]+)\)$")
TOP_K = re.compile(r"study \(pooled top-([0-9]+) without evaluation\)$")


@contextlib.contextmanager
def patched(module, **values):
    """``module``'s attributes set to ``values`` inside the block, restored after."""
    saved = {k: getattr(module, k) for k in values}
    for k, v in values.items():
        setattr(module, k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(module, k, v)


def what_if(path: str):
    """The context in which ``path``'s study is designed (module docstring)."""
    from marg.marginals import study_design, study_evaluation as se

    if path == PREVIOUS:  # no needed width; ties to the smallest f, then the smallest a_E
        return patched(se, WIDTH_NEED=0.0, training_signal=lambda f, a: -(10.0 * f + a))
    m = NEED.match(path)
    if m:
        return patched(se, WIDTH_NEED=float(m.group(1)))
    m = FIXED.match(path)
    if m:
        f, a_e = float(m.group(1)), float(m.group(2))
        real = se.choose_comparison

        def fixed(x, coverage=se.COVERAGE):
            ev = real(x, coverage) or {"detect": se.DETECT}
            v = se._cell_var(x, a_e)
            p_m = min(0.5, se.first_order_split(se._training(x, f, a_e)).expected_error)
            cert = se.expected_bound(p_m, f * sum(x.rows), v, x.classes, coverage)
            return {**ev, "holdout": f, "evaluate_share": a_e,
                    "power": se.comparison_power(f * sum(x.rows), v, x.classes),
                    "model_error": p_m, "expected_certificate": cert, "expected_width": cert - p_m}

        return patched(study_design, choose_comparison=fixed)
    m = TOP_K.match(path)
    if m:
        from marg.marginals import study_split

        k, design = int(m.group(1)), study_design.design_study

        def pooled(*args, **kw):
            kw.pop("evaluate", None)
            args = args[:7] + (False,) + args[8:] if len(args) > 7 else args
            return design(*args, **({} if len(args) > 7 else {"evaluate": False}), **kw)

        stack = contextlib.ExitStack()
        stack.enter_context(patched(study_design, first_order_fits=lambda x: False, choose_mode=lambda s: "pooled",
                                    design_study=pooled))
        stack.enter_context(patched(study_split, k_candidates=lambda p: [min(k, p)]))
        return stack
    raise SystemExit(f"unknown what-if path {path!r}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", required=True)
    ap.add_argument("--splits", type=int, default=5)
    ap.add_argument("--first-split", type=int, default=0)
    ap.add_argument("--paths", default=f"study,{PREVIOUS}", help="study, exact, and what-if names (module docstring)")
    ap.add_argument("--json", type=Path, required=True)
    a = ap.parse_args()
    import warnings

    warnings.filterwarnings("ignore")
    paths = [p.strip() for p in a.paths.split(",") if p.strip()]
    plain = {p for p in paths if not p.startswith("study (")}
    t_run = time.perf_counter()
    meta = {"date": dt.date.today().isoformat(),
            "command": "python bench/study_design_whatif.py " + " ".join(os.sys.argv[1:]),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()} "
                       f"(in-process; load {os.getloadavg()[0]:.1f} at the start)"}
    sets, marg, results = A.Sets(), A.InProcess(), []
    with tempfile.TemporaryDirectory(prefix="whatif-keys-") as kd:
        keys = Path(kd)
        A.D.make_keys(marg, keys, 3)

        def sink(r: dict) -> None:
            results.append(r)
            meta["wall_seconds"] = time.perf_counter() - t_run
            a.json.write_text(json.dumps({"meta": meta, "results": results}, indent=1))

        for name in [s.strip() for s in a.sets.split(",") if s.strip()]:
            for rep in range(a.first_split, a.first_split + a.splits):
                A.one_split(name, rep, sets, marg, keys, plain, sink)
                for path in paths:
                    if path in plain:
                        continue
                    relabel = (lambda r, path=path: sink({**r, "path": path}) if r["path"] == "study" else None)
                    with what_if(path):
                        A.one_split(name, rep, sets, marg, keys, {"study"}, relabel)


if __name__ == "__main__":
    main()
