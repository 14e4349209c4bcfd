"""The installed ``marg`` console script run as a subprocess (what a user's shell sees)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def marg_exe() -> str:
    """The ``marg`` script installed beside this interpreter (the package must be installed)."""
    exe = shutil.which("marg", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.fail(f"the marg console script is not installed beside {sys.executable}: run `pip install .` first")
    return exe


def marg(*args: object, cwd: Path, home: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``marg ARGS`` in ``cwd``; ``home``: the $MARG_HOME of whoever runs it (site or learner)."""
    env = {k: v for k, v in os.environ.items() if k != "MARG_DEBUG"}
    if home is not None:
        env["MARG_HOME"] = str(home)
    return subprocess.run([marg_exe(), *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
