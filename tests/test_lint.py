"""Lint gate: no unused or undefined names and no imports below code (ruff's F and E402 rules), and the
layering rule of the package (marginals never imports learners, protocols or cli; learners never
imports protocols or cli; protocols never imports learners or cli; the bottom — marg/errors.py and the LP
solver layer marg/lp.py — imports no layer), and the one solver owner: only marg/lp.py imports HiGHS."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
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


BOTTOM = ("errors.py", "lp.py")
"""Modules of the root package below every layer: marginals and learners both import them."""

LIBRARY = ("marg", "marginals", "learners", "protocols", "cli")


def _imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, module, imported names) of every import in a file, nested ones included."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.append((node.lineno, node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out.extend((node.lineno, a.name, []) for a in node.names)
    return out


def test_bottom_imports_no_layer():
    bad = [f"marg/{name}:{line} imports {module}" for name in BOTTOM for line, module, _ in _imports(ROOT / "marg" / name)
           if module.split(".")[0] in ("marginals", "learners", "protocols", "cli")
           or (module.startswith("marg.") and module.split(".")[1] not in ("errors", "_util", "lp"))]
    assert not bad, "\n".join(bad)


def test_one_module_owns_the_lp_solver():
    """Exactly one library module imports highspy or SciPy's LP/MILP functions (linprog, milp, HiGHS)."""
    owners = set()
    for layer in LIBRARY:
        for path in sorted((ROOT / layer).rglob("*.py")):
            for _, module, names in _imports(path):
                scipy_lp = module.startswith("scipy.optimize") and (
                    "_highs" in module or "linprog" in module or "milp" in module
                    or any(n in ("linprog", "milp", "LinearConstraint") for n in names))
                if module.split(".")[0] == "highspy" or scipy_lp:
                    owners.add(str(path.relative_to(ROOT)))
    assert owners == {"marg/lp.py"}, sorted(owners)
