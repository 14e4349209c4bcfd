"""The automatic choice on the gene-expression sets of bench/mrc_highdim.py, beside MRC (issue 15).

Run: python bench/auto_highdim.py [--datasets colon,leukemia,...] [--folds 10]

Exact summaries of each training fold (terciles of the training rows, as in
bench/mrc_highdim.py), 10-fold stratified CV (seed 0). ``auto`` is what ``marg learn``
does without ``--learner`` on one summary (one site, first-order tables: each candidate's
error estimated in sample, the smallest certificate among those within 0.02 of the best); ``mrc`` is ``--learner mrc``. Reported:
CV error of each, the learners auto chose, their certificates (trivial = 0.5 for the MRC's
randomized rule, 1 for a deterministic rule), and the seed's Table 2/3 error.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))

_spec = importlib.util.spec_from_file_location("mrc_highdim", ROOT / "bench" / "mrc_highdim.py")
hd = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hd)


def main() -> None:
    from sklearn.model_selection import StratifiedKFold

    from marg.learners.auto import AutoLearner
    from marg.learners.mrc import MRC

    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", default=",".join(hd.SETS))
    ap.add_argument("--folds", type=int, default=10)
    args = ap.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{args.folds}-fold stratified CV (seed 0), exact first-order summaries of each training fold\n")
    print("| dataset | n × genes (K) | auto: CV error | auto chose | auto certificate (mean; trivial?) | mrc: CV error | "
          "mrc certificate (mean) | seed Table 2 error | s / fold |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in [s for s in args.datasets.split(",") if s]:
        if not (hd.DATASETS / hd.SETS[name][0]).exists():
            print(f"| {name} | (missing) |")
            continue
        X, yraw, discrete = hd.load(name)
        classes = np.unique(yraw)
        y = np.searchsorted(classes, yraw)
        folds = StratifiedKFold(n_splits=args.folds, shuffle=True, random_state=0).split(X, y)
        ea, em, ca, cm, chose, trivial = [], [], [], [], {}, 0
        t0 = time.perf_counter()
        for tr, te in folds:
            enc, S, _ = hd.summary_of(X[tr], y[tr], classes, discrete)
            Xte = enc.codes(X[te])
            est = AutoLearner().fit(S).chosen_
            m = MRC().fit(S)
            ea.append(np.mean(est.predict(Xte) != y[te]))
            em.append(np.mean(m.predict(Xte) != y[te]))
            ca.append(est.certificate_.value)
            cm.append(m.certificate_.value)
            trivial += bool(est.certificate_.trivial)
            chose[est.learner] = chose.get(est.learner, 0) + 1
        secs = (time.perf_counter() - t0) / args.folds
        print(f"| {name} | {X.shape[0]} × {X.shape[1]} ({classes.size}) | {np.mean(ea):.3f} ± {np.std(ea):.3f} | "
              f"{', '.join(f'{k}×{v}' for k, v in sorted(chose.items()))} | {np.mean(ca):.3f} ({trivial}/{len(ca)} trivial) | "
              f"{np.mean(em):.3f} ± {np.std(em):.3f} | {np.mean(cm):.3f} | {hd.PAPER.get(name, ('', '–'))[1]} | {secs:.1f} |",
              flush=True)


if __name__ == "__main__":
    main()
