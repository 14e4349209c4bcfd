"""The same models from two installations: ``marg learn`` by each on the same bundles, compared number by number.

Run (on the folder ``bench/learn.py --adult-sites`` leaves: ``site*.bundle``, ``cb.json``, ``test.tsv``):

    python bench/learn_same.py DIR --baseline BASE/bin/marg [--learners mrc,dcc,nb,renyi,prior,auto] [--tol 1e-9]
    python bench/learn_same.py DIR --baseline .venv/bin/marg --racing-clocks --learners mrc,dcc,nb,renyi,auto,boost

``--racing-clocks``: the baseline's process runs as on a machine so loaded that every step seems to take a
minute — each clock of the ``time`` module (``perf_counter``, ``monotonic``, ``time``, ``process_time``,
``thread_time`` and their ``_ns`` forms) reads 60 s later at every reading (a ``sitecustomize`` on its
``PYTHONPATH``) — against the same installation idle: any budget in seconds would end a fit sooner and
change a number of the model (the keys holding a time or a date are skipped).

For each learner both installations' ``marg learn B0 B1 … --learner L --json`` write a model file
(``--out``); the two files are walked together: every number (μ, R*, the certificate, its box, the
choice's estimates and folds, …) compared, the keys that hold a time or a date skipped. Printed per
learner: the largest |Δ| over the numbers, how many exceed ``--tol``, any other difference (a string,
a length, a key) by path, and how many of the test rows' predictions differ (this installation's
``load_model`` and ``predict`` on both files). Exit status 1 when any learner differs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

SKIP = {"created", "seconds", "elapsed", "time", "wall", "cpu_seconds"}


def walk(a, b, path: str, out: list, diffs: list) -> None:
    """Numbers' |Δ| into ``out`` (path, Δ); other differences into ``diffs``."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k in SKIP:
                continue
            if k not in a or k not in b:
                diffs.append(f"{path}/{k}: only in {'ours' if k in a else 'baseline'}")
                continue
            walk(a[k], b[k], f"{path}/{k}", out, diffs)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            diffs.append(f"{path}: length {len(a)} vs {len(b)}")
            return
        for i, (x, y) in enumerate(zip(a, b)):
            walk(x, y, f"{path}[{i}]", out, diffs)
    elif (isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool)
          and not isinstance(b, bool)):
        out.append((path, abs(float(a) - float(b))))
    elif a != b:
        diffs.append(f"{path}: {str(a)[:60]!r} vs {str(b)[:60]!r}")


RACING = """import time

def _racing(real, step=60.0):
    skew = [0.0]
    def clock():
        skew[0] += step
        return real() + skew[0]
    return clock

for _name in ("perf_counter", "monotonic", "time", "process_time", "thread_time"):
    _clock = _racing(getattr(time, _name))
    setattr(time, _name, _clock)
    setattr(time, _name + "_ns", lambda c=_clock: int(c() * 1e9))
"""
"""The ``sitecustomize`` of ``--racing-clocks``: every clock of the process a minute later at every reading."""


def learn(marg: str, bundles: list[str], learner: str, out: Path, env: dict | None = None) -> None:
    cmd = [marg, "learn", *bundles, "--learner", learner, "--allow-unsigned", "--no-sign", "--out", str(out), "--json",
           *(["--allow-empty"] if learner == "boost" else [])]  # an empty vote (adult's) written, to be compared
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"exit {r.returncode}: {' '.join(cmd)}\n{r.stderr[-2000:]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--baseline", required=True, help="the other installation's marg console script")
    ap.add_argument("--learners", default="mrc,dcc,nb,renyi,prior,auto")
    ap.add_argument("--tol", type=float, default=1e-9)
    ap.add_argument("--racing-clocks", action="store_true", help="the baseline's clocks race a minute ahead")
    args = ap.parse_args()
    env = None
    if args.racing_clocks:
        import os
        import tempfile

        site = Path(tempfile.mkdtemp(prefix="marg-racing-"))
        (site / "sitecustomize.py").write_text(RACING)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])])}
    from marg.api import load_model
    from marg.marginals.data.codebook import Codebook
    from marg.marginals.data.encoding import encode_file

    ours = str(Path(sys.executable).parent / "marg")
    bundles = sorted(str(p) for p in args.dir.glob("site*.bundle"))
    test = encode_file(args.dir / "test.tsv", Codebook.load(args.dir / "cb.json"))
    bad = 0
    print("| learner | numbers | max abs diff | over tol | other differences | test predictions differing "
          "|\n|---|---|---|---|---|---|")
    for learner in args.learners.split(","):
        files = {who: args.dir / f"same-{who}-{learner}.model" for who in ("ours", "base")}
        learn(ours, bundles, learner, files["ours"])
        learn(args.baseline, bundles, learner, files["base"], env)
        docs = {who: json.loads(f.read_text()) for who, f in files.items()}
        nums: list = []
        diffs: list = []
        walk(docs["ours"], docs["base"], "", nums, diffs)
        over = [p for p, d in nums if d > args.tol]
        preds = [load_model(files[w], allow_unsigned=True, schema=args.dir / "cb.json").predict(test.X)
                 for w in ("ours", "base")]
        npred = int(np.sum(np.asarray(preds[0]) != np.asarray(preds[1])))
        bad += bool(over or diffs or npred)
        worst = max((d for _, d in nums), default=0.0)
        print(f"| {learner} | {len(nums)} | {worst:.3g} | "
              f"{len(over)}{' (' + ', '.join(over[:3]) + ')' if over else ''} | {'; '.join(diffs[:3]) or '—'} | "
              f"{npred} of {len(test.y)} |", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
