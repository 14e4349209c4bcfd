"""The installed ``marg`` console script as a subprocess: what a user's shell sees."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Mapping

import pytest


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


def demo_bundles(tmp: Path, seed: int, n: int = 300) -> list[Path]:
    """The three demo sites' CSVs (``n`` rows each) exported exactly, every pair table, by the installed
    script into ``tmp`` (``codebook.json`` there too); the bundles in the sites' order."""
    from marg.marginals.synthetic import SITES, demo_codebook, generate, write_csv

    schema = tmp / "codebook.json"
    demo_codebook().save(schema)
    bundles = []
    for k, prof in enumerate(SITES):
        data = tmp / f"{prof.name}.csv"
        write_csv(data, generate(n, prof, seed=seed + k), slice(0, n))
        out = tmp / f"{prof.name}.bundle"
        r = marg("export", data, "--schema", schema, "--site", prof.name, "--out", out, "--stats", "all",
                 "--min-cell", "1", "--no-ledger", cwd=tmp)
        assert r.returncode == 0, r.stderr
        bundles.append(out)
    return bundles
