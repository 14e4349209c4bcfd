"""Lint gate: no unused or undefined names and no imports below code (ruff's F and E402 rules), and the
layering rule of the package (marginals never imports learners, protocols or cli; learners never
imports protocols or cli; protocols never imports learners or cli)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("marg", "marginals", "learners", "protocols", "cli", "tests", "bench")


def test_ruff_clean():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        pytest.fail("ruff is not installed: pip install '.[test]'")
    r = subprocess.run([ruff, "check", "--output-format", "concise", *[str(ROOT / d) for d in LAYERS if (ROOT / d).is_dir()]],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


FORBIDDEN = {"marginals": ("learners", "protocols", "cli", "api", "reports"), "learners": ("protocols", "cli", "api", "reports"),
             "protocols": ("learners", "cli", "api", "reports")}
"""The reports (marg/reports/) sit on top, like marg.api: no layer imports them."""


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layers_import_one_way(layer):
    bad = []
    for path in sorted((ROOT / layer).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                parts = name.split(".")
                if parts[0] == "marg" and len(parts) > 1 and parts[1] in FORBIDDEN[layer]:
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {name}")
    assert not bad, "\n".join(bad)


def test_no_test_module_imports_another():
    """What tests share lives in tests/helpers/ (functions) or tests/conftest.py (fixtures): a test module
    that imports another runs that module's set-up and hides what is shared."""
    bad = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [node.module] if isinstance(node, ast.ImportFrom) and node.module else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            bad += [f"{path.relative_to(ROOT)}:{node.lineno} imports {n}" for n in names if n.split(".")[-1].startswith("test_")]
    assert not bad, "\n".join(bad)
