"""ARCHITECTURE.md's examples run: every ```python block of the page, each in a fresh interpreter.

A block fenced ```python runs as a script of its own (``python -c``, the repository on
``PYTHONPATH``, an empty working folder) and fails the test if it raises; a block that only
illustrates a composition, with names it does not define, is fenced ```python no-run and is
counted, not run. At least :data:`MIN_RUN` blocks must run, so that fencing every block
no-run, or a fence the pattern no longer reads, cannot pass for a page whose examples run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "ARCHITECTURE.md"
FENCE = re.compile(r"^```(python|py)([^\n]*)\n(.*?)^```[ \t]*$", re.S | re.M)
NO_RUN = "no-run"
MIN_RUN = 1
"""The page's formulation module (``class Mine(Formulation)``) runs; the fit's composition is an illustration."""


def python_blocks(text: str) -> list[tuple[int, bool, str]]:
    """(line of the opening fence, runs, code) of every ```python block of ``text``."""
    out = []
    for m in FENCE.finditer(text):
        info = m.group(2).split()
        out.append((text.count("\n", 0, m.start()) + 1, NO_RUN not in info, m.group(3)))
    return out


def run_block(code: str, folder: Path) -> subprocess.CompletedProcess:
    """``code`` as a script of its own: a fresh interpreter, this checkout's ``marg``, ``folder`` to work in."""
    path = [str(ROOT)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    return subprocess.run([sys.executable, "-c", code], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=600)


BLOCKS = python_blocks(PAGE.read_text(encoding="utf-8"))


def test_the_page_has_runnable_examples():
    ran = [b for b in BLOCKS if b[1]]
    assert len(ran) >= MIN_RUN, (f"ARCHITECTURE.md has {len(ran)} runnable ```python blocks of {len(BLOCKS)}, "
                                 f"fewer than {MIN_RUN}: a block fenced {NO_RUN!r} is not checked")
    assert any("class Mine(Formulation)" in code for _, runs, code in BLOCKS if runs)


def test_the_fences_are_read_as_written():
    text = "a\n```python\nx = 1\n```\nb\n```python no-run\ny = z\n```\n```text\nnot python\n```\n"
    assert python_blocks(text) == [(2, True, "x = 1\n"), (6, False, "y = z\n")]


def test_a_block_that_raises_fails(tmp_path):
    done = run_block("import marg\nraise ValueError('the example is wrong')", tmp_path)
    assert done.returncode != 0 and "the example is wrong" in done.stderr


@pytest.mark.parametrize("line,code", [(line, code) for line, runs, code in BLOCKS if runs],
                         ids=[f"ARCHITECTURE.md:{line}" for line, runs, _ in BLOCKS if runs])
def test_every_runnable_block_runs(line, code, tmp_path):
    done = run_block(code, tmp_path)
    assert done.returncode == 0, (f"ARCHITECTURE.md's python block at line {line} ({code.splitlines()[0]!r}) "
                                  f"raised:\n{done.stderr[-3000:]}")
