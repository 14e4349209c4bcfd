"""Running ``marg`` as a user does: in this process (``run``, typer's CliRunner) or the installed
console script as a subprocess (``marg``: what a user's shell sees, bytes C code writes included)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Mapping

import pytest

from tests.helpers.study import demo_bundles  # noqa: F401  (its home is tests.helpers.study)


def run(*args: object, home: Path | None = None, env: Mapping[str, str] | None = None):
    """Run ``marg ARGS`` in this process (typer's CliRunner; stdout and stderr both in ``.output``);
    ``home``: the $MARG_HOME of whoever runs it, site or learner; ``env`` added to the environment.

    Returns the CliRunner result (``exit_code``, ``output``, ``stdout``, ``stderr``)."""
    from typer.testing import CliRunner

    from marg.cli.main import app

    full = dict(env or {})
    if home is not None:
        full["MARG_HOME"] = str(home)
    return CliRunner().invoke(app, [str(a) for a in args], env=full or None)


def marg_exe() -> str:
    """The ``marg`` script installed beside this interpreter (the package must be installed)."""
    exe = shutil.which("marg", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.fail(f"the marg console script is not installed beside {sys.executable}: run `pip install .` first")
    return exe


def marg(*args: object, cwd: Path, env: Mapping[str, str] | None = None, home: Path | None = None,
         timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``marg ARGS`` in ``cwd`` (``MARG_DEBUG`` unset; ``env`` added to the environment; ``home``: the
    $MARG_HOME of whoever runs it, site or learner)."""
    full = {k: v for k, v in os.environ.items() if k != "MARG_DEBUG"}
    full.update(env or {})
    if home is not None:
        full["MARG_HOME"] = str(home)
    return subprocess.run([marg_exe(), *map(str, args)], cwd=cwd, env=full, capture_output=True, text=True,
                          timeout=timeout)

