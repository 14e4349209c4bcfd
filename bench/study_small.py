"""The study's default on the small sets, in this process: bench/study_accept.py's commands through typer's runner.

Run::

    nice -n 10 .venv/bin/python bench/study_small.py --sets breast-w,cleveland --splits 5 --json R.json
    .venv/bin/python bench/study_accept.py --report R.json --out bench/results/study_small_DATE.md

The same parties, files and commands as bench/study_accept.py's (a) study and (d) exact paths — ``marg
study init``, ``marg study run`` at each site (its own ``$MARG_HOME``) and the learner until done, the final
model scored by ``marg evaluate``; ``marg export`` without ``--epsilon`` then ``marg learn`` for exact — but
every command runs in this process (bench/study_calls.py's :class:`InProcess` and :class:`StudyCalls`: the
library functions ``marg study`` calls, each party under its own ``$MARG_HOME``), so a split takes seconds where the
console script's start-up per command made it minutes on a loaded machine. ``--sites N``: the training rows in N
equal sites. The larger class and logistic regression on the
pooled rows come with each split, as there. Results in study_accept's JSON form (``--report`` renders them).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib.util
import json
import os
import platform
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _accept():
    spec = importlib.util.spec_from_file_location("study_accept", ROOT / "bench" / "study_accept.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


A = _accept()
_outcome = A.C.outcome


def outcome(result: dict) -> dict:
    """study_calls' outcome, the evaluation's released error counts (the model's, the larger class's) and the
    certificate's kind (``holdout``, or the model's own where the study had no evaluation round)."""
    ev = result.get("evaluation") or {}
    return {**_outcome(result), "certificate_kind": result.get("certificate_kind"),
            "evaluation": {k: ev.get(k) for k in ("model_errors", "larger_class_errors", "rows")}}


A.C.outcome = outcome  # what study_calls.marg_study and score_final call


GUARD_PATH = "study (guard round)"
"""A what-if, not the study's behaviour: the smallest studies with the guard round the design had before it dropped
the round there (:func:`marg.marginals.study_first_order.guard_sees` taken as 1), interleaved with the default."""


@contextlib.contextmanager
def guard_round():
    """The design as if the guard round always saw a bad model: ``GUARD``'s round where no comparison is decisive."""
    from marg.marginals import study_design

    saved = study_design.guard_sees
    study_design.guard_sees = lambda *args, **kw: 1.0
    try:
        yield
    finally:
        study_design.guard_sees = saved


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="breast-w,cleveland,hungarian,house-votes-84,credit-a")
    ap.add_argument("--splits", type=int, default=5)
    ap.add_argument("--first-split", type=int, default=0)
    ap.add_argument("--paths", default="study,exact", help="marg paths (study_accept's names)")
    ap.add_argument("--sites", type=int, default=3, help="sites per split (3: 50/30/20 %%; else equal sites)")
    ap.add_argument("--json", type=Path, required=True)
    a = ap.parse_args()
    A.N_SITES["n"] = a.sites
    import warnings

    warnings.filterwarnings("ignore")
    paths = {p.strip() for p in a.paths.split(",") if p.strip()}
    t_run = time.perf_counter()
    meta = {"date": dt.date.today().isoformat(), "command": "python bench/study_small.py " + " ".join(os.sys.argv[1:]),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()} "
                       "(in-process; loaded by parallel work)"}
    sets, marg, results = A.Sets(), A.InProcess(), []
    with tempfile.TemporaryDirectory(prefix="small-keys-") as kd:
        keys = Path(kd)
        A.D.make_keys(marg, keys, a.sites)

        def sink(r: dict) -> None:
            results.append(r)
            meta["wall_seconds"] = time.perf_counter() - t_run
            a.json.write_text(json.dumps({"meta": meta, "results": results}, indent=1))

        def guard_sink(r: dict) -> None:  # the what-if's study row, relabelled; its split's baselines are already in
            if r["path"] == "study":
                sink({**r, "path": GUARD_PATH})

        for name in [s.strip() for s in a.sets.split(",") if s.strip()]:
            for rep in range(a.first_split, a.first_split + a.splits):
                A.one_split(name, rep, sets, marg, keys, paths - {GUARD_PATH}, sink)
                if GUARD_PATH in paths:
                    with guard_round():
                        A.one_split(name, rep, sets, marg, keys, {"study"}, guard_sink)


if __name__ == "__main__":
    main()
