"""Progress of long steps on stderr: a live rich line on a terminal, one summary line otherwise.

Every step that can take more than a few seconds (counting rows at export, verifying and
summing bundles, a learner's iterations with its current bound, certifying) reports through
a :class:`Step`. What the user sees depends on where stderr goes and on ``MARG_PROGRESS``:

- ``auto`` (default): on a terminal, a live line (spinner, what is happening now — e.g.
  ``iteration 7: R = 0.2345`` — and the elapsed time), replaced at the end by one summary
  line; not on a terminal, or under ``--json``: only the summary line;
- ``lines``: every progress record as its own line (for logs of long runs), then the summary;
- ``off``: nothing.

A step shorter than ``MARG_PROGRESS_AFTER`` seconds (default 2) writes no summary line, so a
quick command's stderr holds only what matters (a refusal stays one line).

stdout is never touched, so ``--json`` output stays one JSON object.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from .common import err

MODES = ("auto", "lines", "off")
SUMMARY_AFTER = 2.0  # seconds: a shorter step writes no summary line (MARG_PROGRESS_AFTER)


def _summary_after() -> float:
    try:
        return max(0.0, float(os.environ.get("MARG_PROGRESS_AFTER", SUMMARY_AFTER)))
    except ValueError:
        return SUMMARY_AFTER


def _mode(quiet: bool) -> str:
    want = os.environ.get("MARG_PROGRESS", "auto").strip().lower()
    if want not in MODES:
        want = "auto"
    if want != "auto":
        return want
    return "summary" if quiet or not sys.stderr.isatty() else "live"


class Step:
    """One long step: ``update`` what is happening, ``close`` with a summary line.

    Parameters
    ----------
    label : what the step is (``"export north"``, ``"bundles"``, ``"mrc"``)
    quiet : no live line (``--json``); the summary line is still written
    total : the number of units when known (a bar is drawn on a terminal)
    """

    def __init__(self, label: str, quiet: bool = False, total: int | None = None):
        self.label = label
        self.mode = _mode(quiet)
        self.t0 = time.perf_counter()
        self.text = ""
        self._live: Any = None
        self._task: Any = None
        self._closed = False
        if self.mode == "live":
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn,
                                       TimeElapsedColumn)

            cols = [SpinnerColumn(), TextColumn("{task.description}")]
            if total is not None:
                cols += [BarColumn(), MofNCompleteColumn()]
            cols.append(TimeElapsedColumn())
            self._live = Progress(*cols, console=Console(stderr=True), transient=True)
            self._live.start()
            self._task = self._live.add_task(label, total=total)

    def update(self, text: str, completed: int | None = None, line: str | None = None) -> None:
        """Say what is happening now (``text``); ``line`` is the record as a log line (``lines`` mode)."""
        self.text = text
        if self.mode == "lines":
            sys.stderr.write((line if line is not None else f"  {text}") + "\n")
            sys.stderr.flush()
        elif self._live is not None:
            kw = {} if completed is None else {"completed": completed}
            self._live.update(self._task, description=f"{self.label}: {text}", **kw)

    def close(self, summary: str | None = None) -> None:
        """Stop the live line and write the summary line (``label: summary (seconds)``); once."""
        if self._live is not None:
            self._live.stop()
            self._live = None
        if self.mode == "off" or self._closed:
            return
        self._closed = True
        said = summary if summary is not None else self.text
        if said and time.perf_counter() - self.t0 >= _summary_after():
            sys.stderr.write(f"{self.label}: {said} ({time.perf_counter() - self.t0:.1f} s)\n")
            sys.stderr.flush()

    def __enter__(self) -> "Step":
        return self

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if exc_type is not None:  # a failure says itself in one line; only stop the live line
            self._closed = True
        self.close()


class RowProgress(Step):
    """Rows processed (export): called with the running row count (a database or Spark counts
    inside itself and may not call it: the step then says ``counted``)."""

    def __init__(self, label: str, quiet: bool = False):
        super().__init__(label, quiet)
        self.text = "counted"

    def __call__(self, rows: int) -> None:
        self.rows = rows
        self.update(f"{rows:,} rows counted", completed=rows)

    def done(self) -> None:
        self.close()


class CountProgress(Step):
    """``k of total`` (bundles verified and summed): called with ``(k, total)``."""

    def __init__(self, label: str, quiet: bool = False):
        super().__init__(label, quiet)

    def __call__(self, k: int, total: int) -> None:
        if self._live is not None and self._live.tasks[0].total is None:
            self._live.update(self._task, total=total)
        self.update(f"{k:,} of {total:,}", completed=k)


class LearnProgress(Step):
    """A learner's progress records (``marg.learners.learn.learn``'s callback) as its current state.

    Records carry a ``stage``: ``cg`` (column generation: iteration ``k``, bound ``R``),
    ``greedy`` (an edge added), ``gbd`` (selection: best, bound, gap), ``certify``/``rows``/
    ``lp`` (a bound between ``lower`` and ``upper``), ``local``/``hinge``/``compact`` (R with
    ``edges``), ``path`` (group-lasso path), ``auto`` (a candidate of the automatic choice),
    ``stalled`` (the boost vote's early stop), ``time_limit`` (a learner stopped at its time limit),
    ``note`` (a ``text`` saying what the learner does now).
    """

    def __init__(self, label: str, quiet: bool = False, time_limit: float | None = None):
        super().__init__(label, quiet)
        self.time_limit = time_limit
        self.n = 0
        self.best: float | None = None
        self.stop_note: str | None = None
        self._last_gbd = float("-inf")
        self._auto = False
        self.chosen: str | None = None

    def __call__(self, info: dict) -> None:
        stage = info.get("stage")
        self.n += 1
        if "R" in info and info["R"] is not None:
            self.best = float(info["R"]) if self.best is None else min(self.best, float(info["R"]))
        if stage == "cg" and "R" in info:
            size = info.get("size") or f"{info.get('features', '?')} active features"  # a driver may say what it counts
            self.update(f"iteration {info.get('k', '?')}: R = {info['R']:.6f}, {size}")
        elif stage == "greedy":
            a, b = info["edge"]
            self.update(f"greedy: edge {info['edges']} {a}–{b}, R = {info['R']:.6f}")
        elif stage == "gbd":
            text = (f"gbd iteration {info['iteration']}: best {info['upper']:.6g}, bound {info['lower']:.6g}, gap "
                    f"{info['gap']:.3g}"
                    + (f" ({info['seconds']:.0f} s of --time-limit {self.time_limit:g})" if self.time_limit else ""))
            if self.mode == "lines" and time.perf_counter() - self._last_gbd < 5.0:
                self.text = text  # lines mode: the first, then every 5 s
                return
            self._last_gbd = time.perf_counter()
            self.update(text)
        elif stage in ("certify", "rows", "lp"):
            what = "certifying" if stage == "certify" else "bound"
            self.update(f"{what}: between {info['lower']:.6g} and {info['upper']:.6g} ({info.get('rows', '?')} rows)")
        elif stage in ("local", "hinge", "compact"):
            self.update(f"{stage}: R = {info['R']:.6f} on {info.get('edges', '?')} edges")
        elif stage == "path":
            self.update(f"group-lasso path: λ = {info['lam']:.4g}, {info['n_active']} features")
        elif stage == "auto":
            self._auto = True
            nums = ([] if info.get("error") is None else [f"estimated error {info['error']:.4f}"]) + (
                [] if info.get("certificate") is None else [f"certificate {info['certificate']:.4f}"])
            if info.get("chosen"):  # the choice made: the last line and the summary name it
                self.chosen = str(info["learner"])
                self.update(f"auto: chose {self.chosen}" + (f" ({', '.join(nums)})" if nums else ""))
            else:
                self.update(f"auto: {info['learner']}" + (f": {', '.join(nums)}" if nums else ""))
        elif stage == "note":
            if info.get("warn"):  # said at once, on its own line, whatever the mode: the user can stop here
                err(f"warning: {info['text']}")
                self.text = str(info["text"])
            else:
                self.update(str(info["text"]))
        elif stage == "time_limit":
            self.stop_note = (f"stopped at the time limit ({info['seconds']:g} s) after {info['k']} iterations: the "
                              "certificate is the best bound so far (valid at any stop)")
            self.update(self.stop_note)
        elif stage == "stalled":
            self.stop_note = (f"stopped early: the bound improved by at most {info['tol']:g} over the last "
                              f"{info['patience']} iterations")
            self.update(self.stop_note)

    def finish(self, chosen: str | None = None) -> None:
        """Close with the summary line; ``chosen``: the learner fitted (the automatic choice's pick,
        which the summary names instead of the last candidate tried)."""
        chosen = self.chosen or chosen  # the choice's own record names the candidate (with its options)
        text = f"auto chose {chosen}" if chosen is not None and self._auto else self.text
        parts = [text] if text else []
        if self.best is not None and self.stop_note is None:
            parts.append(f"best bound R = {self.best:.6f}")
        if self.stop_note:
            parts.append(f"best bound R = {self.best:.6f}")
        if self.n:
            parts.append(f"{self.n} progress record{'s' if self.n != 1 else ''}")
        self.close("; ".join(parts) if parts else "fitted")
