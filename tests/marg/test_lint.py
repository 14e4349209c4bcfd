"""Lint gate: no unused or undefined names and no imports below code (ruff's F and E402 rules), and the
layering rule of the package (marginals never imports learners, protocols or cli; learners never
imports protocols or cli; protocols never imports learners or cli; the bottom — marg/errors.py and the LP
solver layer marg/lp.py — imports no layer), the one solver owner: only marg/lp.py imports HiGHS, and no
import cycle among the library's modules (checked on a planted cycle too)."""

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
    r = subprocess.run([ruff, "check", "--output-format", "concise",
                        *[str(ROOT / d) for d in LAYERS if (ROOT / d).is_dir()]],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


FORBIDDEN = {"marginals": ("learners", "protocols", "cli", "api", "reports"),
             "learners": ("protocols", "cli", "api", "reports"),
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
    bad = [f"marg/{name}:{line} imports {module}" for name in BOTTOM
           for line, module, _ in _imports(ROOT / "marg" / name)
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


def _package_dirs(root: Path) -> dict[str, str]:
    """Folder -> installed package name, as pyproject.toml's ``package-dir`` maps them."""
    import tomllib

    conf = tomllib.loads((root / "pyproject.toml").read_text())
    return {folder: pkg for pkg, folder in conf["tool"]["setuptools"]["package-dir"].items()}


def import_graph(root: Path, packages: dict[str, str]) -> dict[str, set[str]]:
    """Module -> the library modules it imports, for every ``.py`` under the ``packages`` folders of
    ``root`` (``{folder: package name}``). Every import counts — at the top, inside a function
    (lazy) or under ``TYPE_CHECKING`` — since each one is a dependency a reader has to follow.
    ``from pkg import name`` depends on ``pkg.name`` when that is a module, else on ``pkg``."""
    files: dict[str, Path] = {}
    for folder, pkg in packages.items():
        nested = [f for f in packages if f != folder and (root / f).resolve().is_relative_to((root / folder).resolve())]
        for path in (root / folder).rglob("*.py"):
            if any(path.resolve().is_relative_to((root / f).resolve()) for f in nested):
                continue  # a package of its own
            parts = list(path.relative_to(root / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            files[".".join([pkg, *parts])] = path
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                base = ".".join(here[: len(here) - node.level + 1]
                                + ([node.module] if node.module else [])) if node.level \
                    else (node.module or "")
                for alias in node.names:
                    target = f"{base}.{alias.name}"
                    deps.add(target if target in files else base)
            elif isinstance(node, ast.Import):
                deps.update(alias.name for alias in node.names)
        graph[name] = {d for d in deps if d in files and d != name}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan): each holds a cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    """No two library modules import each other, directly or through others (lazy and
    TYPE_CHECKING imports included): each module's dependencies form a layer below it."""
    graph = import_graph(ROOT, _package_dirs(ROOT))
    assert len(graph) > 100  # every module was read
    cycles = import_cycles(graph)
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_check_finds_a_planted_cycle(tmp_path):
    """The detector on a package with a three-module cycle through a lazy import, a
    TYPE_CHECKING import and an absolute import, beside modules that only form a chain."""
    pkg = tmp_path / "layer"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import f\n")
    (pkg / "b.py").write_text("def f():\n    from . import c\n    return c\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from lib.layer.a import f\n")
    (pkg / "d.py").write_text("from .a import f\nfrom .e import g\n")
    (pkg / "e.py").write_text("import os\ng = os.sep\n")
    graph = import_graph(tmp_path, {"layer": "lib.layer"})
    assert graph["lib.layer.d"] == {"lib.layer.a", "lib.layer.e"}
    assert import_cycles(graph) == [["lib.layer.a", "lib.layer.b", "lib.layer.c"]]
    (pkg / "c.py").write_text("")
    assert import_cycles(import_graph(tmp_path, {"layer": "lib.layer"})) == []


def test_no_test_module_imports_another():
    """What tests share lives in tests/helpers/ (functions) or tests/conftest.py (fixtures): a test module
    that imports another runs that module's set-up and hides what is shared."""
    bad = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [node.module] if isinstance(node, ast.ImportFrom) and node.module else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            bad += [f"{path.relative_to(ROOT)}:{node.lineno} imports {n}"
                    for n in names if n.split(".")[-1].startswith("test_")]
    assert not bad, "\n".join(bad)


def test_bench_scripts_import_names_that_exist():
    """Every ``from marg… import name`` in bench/ (at any depth: a benchmark's setting may import
    inside a function) names a module or attribute that exists: a module split must move the
    benchmarks' imports too (bench/auto_highdim.py's DP setting once imported a moved function)."""
    import importlib

    bad = []
    for path in sorted((ROOT / "bench").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "marg"):
                continue
            try:
                mod = importlib.import_module(node.module)
            except ImportError as exc:
                bad.append(f"{path.name}:{node.lineno} {node.module} ({exc})")
                continue
            for alias in node.names:
                if not hasattr(mod, alias.name) and importlib.util.find_spec(f"{node.module}.{alias.name}") is None:
                    bad.append(f"{path.name}:{node.lineno} {node.module}.{alias.name}")
    assert not bad, "bench imports of names that do not exist: " + "; ".join(bad)
