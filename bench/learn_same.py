"""The same models from two installations: ``marg learn`` by each on the same bundles, compared number by number.

Run (on the folder ``bench/learn.py --adult-sites`` leaves: ``site*.bundle``, ``cb.json``, ``test.tsv``):

    python bench/learn_same.py DIR --baseline BASE/bin/marg [--learners mrc,dcc,nb,renyi,prior,auto] [--tol 1e-9]

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


def learn(marg: str, bundles: list[str], learner: str, out: Path) -> None:
    cmd = [marg, "learn", *bundles, "--learner", learner, "--allow-unsigned", "--no-sign", "--out", str(out), "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"exit {r.returncode}: {' '.join(cmd)}\n{r.stderr[-2000:]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--baseline", required=True, help="the other installation's marg console script")
    ap.add_argument("--learners", default="mrc,dcc,nb,renyi,prior,auto")
    ap.add_argument("--tol", type=float, default=1e-9)
    args = ap.parse_args()
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
        learn(args.baseline, bundles, learner, files["base"])
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
