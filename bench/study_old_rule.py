"""bench/study_accept.py with the study learner's round-2 rule before issue 44's studylarge change, for a
before/after on the same code: the features whose pooled score's lower bound is positive at 95 %, at most k
(one when none is), in place of :func:`marg.study_measure.measured_features`' top k.

Usage: the arguments of bench/study_accept.py, e.g.
``nice -n 10 .venv/bin/python bench/study_old_rule.py --sets kr-vs-kp --splits 2 --mode inprocess --paths study``
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import marg.study_learner as L


def old_rule(scores, k: int) -> list[str]:
    """The rule before: positive lower bounds only, at most ``k``; the best-ordered feature when none is."""
    return (scores.rank() or scores.order()[:1])[:k]


if __name__ == "__main__":
    L.measured_features = old_rule  # _plan looks the name up in the module when it runs
    here = Path(__file__).resolve().parent
    sys.path.insert(0, str(here))
    sys.argv = [str(here / "study_accept.py")] + sys.argv[1:]
    runpy.run_path(str(here / "study_accept.py"), run_name="__main__")
