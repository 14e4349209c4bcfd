"""The one place marg touches the HiGHS solver (highspy).

Creating a ``highspy.Highs`` object prints HiGHS' banner on the process's standard output
(from C, so Python's ``sys.stdout`` redirection cannot catch it) in highspy ≥ 1.16, before
any option can be set; :func:`new_highs` creates solvers with file descriptor 1 pointed at
``/dev/null`` for that instant and switches logging off, so ``marg … --json`` prints
nothing but its JSON.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Iterator

import highspy

INF = highspy.kHighsInf


@contextmanager
def stdout_silenced() -> Iterator[None]:
    """Point file descriptor 1 at /dev/null for the duration (C-level writes included)."""
    try:
        sys.stdout.flush()
    except (AttributeError, ValueError, OSError):
        pass
    try:
        saved = os.dup(1)
    except OSError:  # no fd 1 at all (closed stdout): nothing to protect
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


def new_highs(**options: object) -> highspy.Highs:
    """A silent HiGHS instance with ``options`` set (logging off before anything else runs)."""
    with stdout_silenced():
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
    for name, value in options.items():
        h.setOptionValue(name, value)
    return h
