"""A ``marg`` command runs on Arrow's jemalloc pool where the platform's pyarrow has it (issue 48:
mimalloc keeps freed pages, so a wide CSV export's peak was every block's high-water mark); a pool
the user names in ``ARROW_DEFAULT_MEMORY_POOL`` is kept. Checked through the console script."""

from __future__ import annotations

import os
import subprocess
import sys

import pyarrow as pa
import pytest

from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label
from tests.helpers.console import marg

PROBE = ("import sys; from marg.cli.app import lean_arrow_memory; lean_arrow_memory(); import pyarrow as pa; "
         "print(pa.default_memory_pool().backend_name)")


def has_jemalloc() -> bool:
    try:
        pa.jemalloc_memory_pool()
        return True
    except (NotImplementedError, pa.ArrowNotImplementedError):
        return False


def pool(env: dict) -> str:
    full = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"} | env
    return subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=full,
                          check=True).stdout.strip()


@pytest.mark.skipif(not sys.platform.startswith("linux") or not has_jemalloc(), reason="pyarrow without jemalloc")
def test_a_command_uses_jemalloc_and_keeps_the_users_choice():
    assert pool({}) == "jemalloc"
    assert pool({"ARROW_DEFAULT_MEMORY_POOL": "system"}) == "system"


def test_an_export_through_the_console_script_says_nothing_about_the_pool(tmp_path):
    cb = Codebook(features=tuple(CategoricalFeature(f"f{k}", ("a", "b")) for k in range(3)),
                  label=Label("y", ("n", "p")))
    cb.save(tmp_path / "cb.json")
    (tmp_path / "d.csv").write_text("f0,f1,f2,y\n"
                                    + "".join(f"{'ab'[r % 2]},a,b,{'np'[r % 3 == 0]}\n" for r in range(60)))
    res = marg("export", "d.csv", "--schema", "cb.json", "--site", "s1", "--out", "s1.bundle", "--ledger", "ledger",
               "--stats", "first", "--min-cell", "1", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "backend" not in res.stderr.lower() and "memory pool" not in res.stderr.lower()
