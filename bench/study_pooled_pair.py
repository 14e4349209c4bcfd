"""Issue 44 (pooled): the study's final choice on round 2's pooled sum, in sample against the split with the
release's own noise, side by side on the SAME noisy tables. Runs bench/study_accept.py with
:func:`marg.study_learner.final_learner` wrapped to save each round-2 sum it is given (``--save DIR``), then
(``--score DIR``) fits ``AutoLearner()`` (in sample) and ``AutoLearner(one_site="split")`` on each saved sum and
scores both on that split's test rows.

Usage::

    nice -n 10 .venv/bin/python bench/study_pooled_pair.py --save /tmp/s2 --sets kr-vs-kp --splits 2 \
        --mode inprocess --paths study
    nice -n 10 .venv/bin/python bench/study_pooled_pair.py --score /tmp/s2
"""

from __future__ import annotations

import pickle
import runpy
import sys
from pathlib import Path

import numpy as np


def save(out: Path, argv: list[str]) -> None:
    import marg.study_learner as L

    inner = L.final_learner
    here = Path(__file__).resolve().parent
    out.mkdir(parents=True, exist_ok=True)
    sets = argv[argv.index("--sets") + 1].split(",")
    splits = int(argv[argv.index("--splits") + 1])
    first = int(argv[argv.index("--first-split") + 1]) if "--first-split" in argv else 0
    order = iter([(s, first + r) for s in sets for r in range(splits)])  # study_accept's loop: sets, then splits

    def wrapped(s2, first_order):
        name, rep = next(order)
        (out / f"{name}.{rep}.pkl").write_bytes(pickle.dumps(s2))
        return inner(s2, first_order)

    L.final_learner = wrapped  # _plan looks the name up in the module when it runs
    sys.path.insert(0, str(here))
    sys.argv = [str(here / "study_accept.py")] + argv
    runpy.run_path(str(here / "study_accept.py"), run_name="__main__")


def score(folder: Path) -> None:
    here = Path(__file__).resolve().parent
    sys.path.insert(0, str(here))
    argv, sys.argv = sys.argv, [sys.argv[0]]
    import study_accept as A
    sys.argv = argv
    from marg.learners.auto import AutoLearner

    for f in sorted(folder.glob("*.pkl")):
        name, rep = f.stem.rsplit(".", 1)
        s2 = pickle.loads(f.read_bytes())
        te, cb, X, y, _ = A.Sets().split(name, int(rep))
        idx = [cb.feature_names.index(a) for a in s2.codebook.feature_names]
        Xt = np.asarray(X, dtype=float)[te][:, idx]
        out = []
        for tag, est in (("in-sample", AutoLearner()), ("split", AutoLearner(one_site="split"))):
            est.fit(s2)
            est_rows = ", ".join(f"{r.learner} {r.error:.3f}" for r in est.candidates_ if r.error is not None)
            out.append(f"{tag}: {est.chosen_.learner} {np.mean(est.predict(Xt) != y[te]):.4f} (estimates {est_rows})")
        print(f"{name} split {rep}: " + " | ".join(out), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "--save":
        save(Path(sys.argv[2]), sys.argv[3:])
    elif sys.argv[1] == "--score":
        score(Path(sys.argv[2]))
    else:
        raise SystemExit(__doc__)
