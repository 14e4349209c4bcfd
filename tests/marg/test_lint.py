"""Lint gate: no unused or undefined names and no imports below code (ruff's F and E402 rules), and the
layering rule of the package (marginals never imports learners, protocols or cli; learners never
imports protocols or cli; protocols never imports learners or cli; the bottom — marg/errors.py and the LP
solver layer marg/lp.py — imports no layer), the one solver owner: only marg/lp.py imports HiGHS, no
import cycle among the library's modules (checked on a planted cycle too), and the plug-in contract in
types: ``mypy --strict`` clean on the minimax engine and the release plan (checked on a planted error too), and no
library docstring or comment quoting a measurement (issue 47: those go to BENCHMARKS.md; checked on planted ones)."""

from __future__ import annotations

import ast
import os
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


def library_files(root: Path, packages: dict[str, str]) -> dict[str, Path]:
    """Module name -> file, for every ``.py`` under the ``packages`` folders of ``root`` (``{folder: package
    name}``); a package is named by its ``__init__.py``."""
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
    return files


def import_graph(root: Path, packages: dict[str, str]) -> dict[str, set[str]]:
    """Module -> the library modules it imports, for every ``.py`` under the ``packages`` folders of
    ``root`` (``{folder: package name}``). Every import counts — at the top, inside a function
    (lazy) or under ``TYPE_CHECKING`` — since each one is a dependency a reader has to follow.
    ``from pkg import name`` depends on ``pkg.name`` when that is a module, else on ``pkg``."""
    files = library_files(root, packages)
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


BELOW_EVERY_LAYER = ("marg.errors", "marg._util", "marg.lp")
"""The root package's bottom (:data:`BOTTOM` and its helpers): below every layer, so a sub-package of
``marg/`` (``marg/reports/``) imports them downward although they sit in its parent folder."""

READS_UP: dict[str, str] = {}
"""Sub-packages that still import modules of their parent package, each with why: the check holds every
other sub-package to the rule and fails when an entry here no longer reads up (so the list only shrinks)."""


def upward_imports(root: Path, packages: dict[str, str]) -> dict[str, list[str]]:
    """Sub-package folder -> its imports that run UP: a module inside ``pkg/sub/`` that imports a module of
    ``pkg/`` itself (one that is no package), at the top, inside a function or under ``TYPE_CHECKING``,
    in relative or absolute form. A sibling package (``from ..other import x``) is sideways, not up."""
    files = library_files(root, packages)
    graph = import_graph(root, packages)
    out: dict[str, list[str]] = {}
    for name, path in sorted(files.items()):
        folder = path.parent
        if not (folder / "__init__.py").is_file() or not (folder.parent / "__init__.py").is_file() \
                or folder.parent.resolve() == root.resolve():
            continue  # not inside a sub-package
        for dep in sorted(graph[name]):
            target = files[dep]
            if target.name != "__init__.py" and target.parent == folder.parent and dep not in BELOW_EVERY_LAYER:
                out.setdefault(folder.relative_to(root).as_posix(), []).append(f"{name} imports {dep}")
    return out


def package_graph(graph: dict[str, set[str]], layer: str) -> dict[str, set[str]]:
    """The import graph of ``layer`` (a package name) collapsed to its parts: each sub-package of the layer is
    one node (its modules and its own sub-packages together), each module at the layer's top one node."""
    def part(module: str) -> str | None:
        if not module.startswith(layer + "."):
            return None
        return ".".join(module.split(".")[: len(layer.split(".")) + 1])

    out: dict[str, set[str]] = {}
    for module, deps in graph.items():
        if (a := part(module)) is not None:
            out.setdefault(a, set()).update(b for d in deps if (b := part(d)) is not None and b != a)
    for deps in list(out.values()):
        for b in deps:
            out.setdefault(b, set())
    return out


def test_no_import_runs_up_a_package():
    """No module of a sub-package imports a module of its parent package (learners/minimax/ never imports
    learners/auto.py): what a sub-package needs sits in it, below it or beside it."""
    found = upward_imports(ROOT, _package_dirs(ROOT))
    bad = {sub: lines for sub, lines in found.items() if sub not in READS_UP}
    assert not bad, "imports that run up a package:\n" + "\n".join(line for lines in bad.values() for line in lines)
    assert set(READS_UP) <= set(found), ("no longer reading up (strike them from READS_UP): "
                                         f"{sorted(set(READS_UP) - set(found))}")


def test_the_learners_packages_import_one_way():
    """The learners' packages (core, features, minimax, certification, ...) form no cycle among
    themselves, although no two of their modules do either: a package imports only packages below it."""
    graph = package_graph(import_graph(ROOT, _package_dirs(ROOT)), "marg.learners")
    assert {"marg.learners.minimax", "marg.learners.core", "marg.learners.classifiers"} <= set(graph)
    cycles = import_cycles(graph)
    assert not cycles, "package cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_the_upward_check_finds_planted_imports(tmp_path):
    """The detector on a layer whose sub-package imports its parent's module lazily (relative form),
    under TYPE_CHECKING (absolute form) and as ``from lib.layer import top``, beside imports it must let
    pass: a sibling package's module, a module of its own package, the sibling package itself."""
    layer = tmp_path / "layer"
    for sub in ("sub", "other"):
        (layer / sub).mkdir(parents=True)
        (layer / sub / "__init__.py").write_text("")
    (layer / "__init__.py").write_text("")
    (layer / "top.py").write_text("def f():\n    return 1\n")
    (layer / "other" / "x.py").write_text("g = 2\n")
    (layer / "sub" / "ok.py").write_text("from ..other.x import g\nfrom . import lazy\nfrom .. import other\n")
    (layer / "sub" / "lazy.py").write_text("def h():\n    from ..top import f\n    return f()\n")
    (layer / "sub" / "typed.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import "
                                            "lib.layer.top\n")
    (layer / "sub" / "named.py").write_text("from lib.layer import top\n")
    found = upward_imports(tmp_path, {"layer": "lib.layer"})
    assert found == {"layer/sub": ["lib.layer.sub.lazy imports lib.layer.top",
                                   "lib.layer.sub.named imports lib.layer.top",
                                   "lib.layer.sub.typed imports lib.layer.top"]}
    for name in ("lazy", "typed", "named"):
        (layer / "sub" / f"{name}.py").write_text("")
    assert upward_imports(tmp_path, {"layer": "lib.layer"}) == {}


def test_the_package_cycle_check_finds_a_planted_cycle(tmp_path):
    """Two sub-packages that import each other through different modules (no module cycle) are one
    package cycle; the top module above both is not in it; cutting one import opens it."""
    layer = tmp_path / "layer"
    for sub in ("a", "b"):
        (layer / sub).mkdir(parents=True)
        (layer / sub / "__init__.py").write_text("")
    (layer / "__init__.py").write_text("")
    (layer / "a" / "low.py").write_text("x = 1\n")
    (layer / "a" / "high.py").write_text("def f():\n    from ..b.mid import y\n    return y\n")
    (layer / "b" / "mid.py").write_text("from lib.layer.a.low import x\ny = x\n")
    (layer / "top.py").write_text("from .a.high import f\nfrom .b import mid\n")
    graph = import_graph(tmp_path, {"layer": "lib.layer"})
    assert import_cycles(graph) == []
    packages = package_graph(graph, "lib.layer")
    assert packages["lib.layer.top"] == {"lib.layer.a", "lib.layer.b"}
    assert import_cycles(packages) == [["lib.layer.a", "lib.layer.b"]]
    (layer / "a" / "high.py").write_text("")
    assert import_cycles(package_graph(import_graph(tmp_path, {"layer": "lib.layer"}), "lib.layer")) == []


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


UCI_AND_GENE_SETS = ("adult", "kr-vs-kp", "credit-a", "house-votes-84", "breast-w", "cleveland", "hungarian",
                     "sonar", "promoters", "leukemia", "ALLAML", "GLIOMA", "MLL", "TOX_171", "arcene", "colon",
                     "lymphoma", "nci9", "Prostate_GE", "lung_discrete")
"""The data sets the benchmarks run on (shared/datasets): "measured" and an error beside one of them is a result."""

QUOTED_MEASUREMENTS = {
    "a CPU or wall time": r"\d\s*(?:ms|s)\s+of\s+(?:CPU|wall|import|start-up)\b|\d\s*(?:ms|s)\s+CPU\b|\bCPU\s+s\b"
                          r"|\btook\s+(?:about\s+|≈\s*|~\s*)?\d+(?:\.\d+)?\s*(?:ms|s|seconds|min)\b",
    "a memory peak": r"\b(?:peak|RSS|resident|high-water)\b[^.;]{0,40}?\d\s*[KMG]iB\b"
                     r"|\d\s*→\s*≈?\s*\d+(?:\.\d+)?\s*[KMG]iB\b",
    "a speed-up": r"\d\s*×\s*(?:faster|slower|quicker|more accurate|less accurate)|\bspeed-?up\s+of\s+\d",
    "an observed error": r"\berred\s+(?:at\s+|about\s+|≈\s*)?\d*\.\d+",
}
"""What a docstring or comment quoting a measurement says (issue 47: measured numbers go to BENCHMARKS.md, which a
docstring may name). Each pattern is one no constant or formula of the code takes: CPU time is measured, never
configured (limits are wall seconds, ``time_limit`` None: 60 s), and ``took`` is a past run; a size in MiB is a
measurement only as a peak or a before → after (``64 KiB chunks`` is a constant); ``×`` is a dimension (``M × M``,
``1,000 × 20,000``) unless something is that many times faster or more accurate; ``erred 0.29`` is an observation,
where a formula's rule errs (present tense: ``errs q = 0.301``, ``errs 1 − 1/K``). Besides these
(:func:`quoted_measurements`): a clause with "measured", an error (err, errs, erred, error), one of
:data:`UCI_AND_GENE_SETS` and a decimal 0.dd that is not assigned (``ε = 0.25`` is a setting; a share 0.65 no error)."""


def prose(path: Path) -> list[tuple[int, str]]:
    """(first line, text with whitespace collapsed) of every docstring of a file — module, class, function and
    attribute docstrings: every statement that is a bare string — and of every block of consecutive comments."""
    import io
    import tokenize

    code = path.read_text(encoding="utf-8")
    bodies = [body for node in ast.walk(ast.parse(code, str(path)))
              if isinstance(body := getattr(node, "body", None), list)]
    out = [(st.lineno, st.value.value) for body in bodies for st in body
           if isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant) and isinstance(st.value.value, str)]
    block: list[str] = []
    start = last = -2
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        if tok.type == tokenize.COMMENT:
            if tok.start[0] != last + 1 and block:
                out.append((start, " ".join(block)))
                block = []
            start = start if block else tok.start[0]
            block.append(tok.string.lstrip("#"))
            last = tok.start[0]
    if block:
        out.append((start, " ".join(block)))
    return sorted((line, " ".join(text.split())) for line, text in out)


def quoted_measurements(path: Path) -> list[str]:
    """``line: what: the words`` for every measurement the docstrings and comments of ``path`` quote
    (:data:`QUOTED_MEASUREMENTS`, and a measured error on a named set)."""
    import re

    named_set = re.compile(r"\b(?:" + "|".join(map(re.escape, UCI_AND_GENE_SETS)) + r")\b", re.I)
    error = re.compile(r"(?<![=\w.])(?<!= )0\.\d{2,}\b")
    found = []
    for line, text in prose(path):
        for what, pattern in QUOTED_MEASUREMENTS.items():
            found += [f"{line}: {what}: {m.group(0)!r}" for m in re.finditer(pattern, text, re.I)]
        found += [f"{line}: a measured error on a named set: {clause[:100]!r}" for clause in re.split(r"[.;]\s", text)
                  if re.search(r"\bmeasured\b", clause, re.I) and re.search(r"\berr(?:or|ed|s)?\b", clause, re.I)
                  and named_set.search(clause) and error.search(clause)]
    return found


def test_no_docstring_quotes_a_measurement():
    """Measured numbers live in BENCHMARKS.md, where they can be re-measured, not in the library's docstrings and
    comments, where they go stale (issue 47): a docstring names the section instead."""
    bad = [f"{path.relative_to(ROOT)}:{hit}" for layer in LIBRARY for path in sorted((ROOT / layer).rglob("*.py"))
           for hit in quoted_measurements(path)]
    assert not bad, "move these to BENCHMARKS.md and name its section:\n" + "\n".join(bad)


PLANTED_MEASUREMENTS = [
    '"""A module.',
    "",
    'The import costs 0.27 s of CPU, a quarter of an export."""',
    "",
    "LIMIT = 3",
    '"""The wide export\'s peak memory fell to 519 MiB; the batched path is 1.8 × faster."""',
    "",
    "",
    "def f():",
    '    """Measured on kr-vs-kp: k = 7 of 14 left 3 features',
    '    and an error of 0.19. One rule erred 0.317 on test rows."""',
    "    # the bound took 0.014 s and then",
    "    # 4.54 against 2.91 CPU s",
    "    return LIMIT",
]
"""A module whose docstrings and comments quote one measurement of each kind (lines 1, 6, 10 and 12)."""

LEGITIMATE_NUMBERS = [
    '"""Counts in 64 KiB chunks, 32 MiB of int64 slots at most; Q is M × M, the CSV 1,000 × 20,000.',
    "",
    "Monte Carlo error ≤ 0.5/√2000 ≈ 0.011 per class; the seed uses 1.5; ``time_limit`` None: 60 s. A rule",
    "that reads one feature errs q = 0.301 here; the uniform guess errs 0.5. The error measured on adult at",
    'ε = 0.25 and 1: BENCHMARKS.md, "Issue 44 (large)"; the features round 2 measured on kr-vs-kp, a share 0.65."""',
    "# seconds of import and CPU time: 2 CPU cores; rows × features (memory)",
]
"""Constants, formula values and settings the library's docstrings hold, next to words of the patterns."""


def test_the_measurement_check_finds_planted_docstrings(tmp_path):
    """Each kind of quoted measurement planted in a docstring or a comment is found at its line; the constants,
    formula values and settings that read like numbers (:data:`LEGITIMATE_NUMBERS`) are not."""
    planted = tmp_path / "planted.py"
    planted.write_text("\n".join(PLANTED_MEASUREMENTS) + "\n", encoding="utf-8")
    hits = [hit.split(": ")[:2] for hit in quoted_measurements(planted)]
    assert hits == [["1", "a CPU or wall time"], ["6", "a memory peak"], ["6", "a speed-up"],
                    ["10", "an observed error"], ["10", "a measured error on a named set"],
                    ["12", "a CPU or wall time"], ["12", "a CPU or wall time"]], hits
    planted.write_text("\n".join(LEGITIMATE_NUMBERS) + "\n", encoding="utf-8")
    assert quoted_measurements(planted) == []


def installed_tree(root: Path, into: Path) -> Path:
    """``root``'s library as pyproject.toml's ``package-dir`` installs it, in links under ``into``:
    ``into/marg`` holds marg/'s entries with the layers (marginals, learners, …) beside them, so a
    type checker resolves ``marg.learners…`` to the working tree's files (an editable install's import
    hook is invisible to it; a non-editable one is a copy, not the files being edited)."""
    packages = sorted(_package_dirs(root).items(), key=lambda item: item[1].count("."))
    for folder, pkg in packages:
        target = into.joinpath(*pkg.split("."))
        if any(other.startswith(pkg + ".") for _, other in packages):  # holds layers: a folder of links
            target.mkdir(parents=True)
            for child in sorted((root / folder).iterdir()):
                if child.name != "__pycache__":
                    (target / child.name).symlink_to(child)
        else:
            target.symlink_to((root / folder).resolve(), target_is_directory=True)
    return into


def plant(tree: Path, module: str, text: str) -> None:
    """Append ``text`` to a copy of ``module`` (dotted, installed name) in an :func:`installed_tree`, the files
    of the repository untouched: each linked folder on the way becomes a folder of links."""
    here = tree
    parts = module.split(".")
    for part in parts[:-1]:
        here = here / part
        if here.is_symlink():
            source = here.resolve()
            here.unlink()
            here.mkdir()
            for child in sorted(source.iterdir()):
                (here / child.name).symlink_to(child)
    path = here / f"{parts[-1]}.py"
    code = path.read_text(encoding="utf-8")
    path.unlink()
    path.write_text(code + text, encoding="utf-8")


def run_mypy(tree: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    """mypy as pyproject.toml's ``[tool.mypy]`` configures it (its targets, strict) on an :func:`installed_tree`;
    the paths in its output are the repository's (learners/minimax/fit.py, not marg/learners/minimax/fit.py)."""
    import importlib.util

    if importlib.util.find_spec("mypy") is None:
        pytest.fail("mypy is not installed: pip install '.[test]'")
    r = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
                        "--cache-dir", str(cache)], cwd=tree, env={**os.environ, "MYPYPATH": str(tree)},
                       capture_output=True, text=True)
    out = r.stdout + r.stderr
    for folder, pkg in _package_dirs(ROOT).items():
        if pkg != "marg":
            out = out.replace(pkg.replace(".", "/") + "/", folder + "/")
    return subprocess.CompletedProcess(r.args, r.returncode, out, "")


def test_mypy_strict_on_the_minimax_engine_and_the_release_plan(tmp_path):
    """``mypy --strict`` on marg.learners.minimax and marg.marginals.release_plan (pyproject.toml's
    ``[tool.mypy]``): the formulations' contract, the searches' models and the problems are checked
    types, not prose. The same run on a copy with one planted type error must fail and name it."""
    r = run_mypy(installed_tree(ROOT, tmp_path / "tree"), tmp_path / "cache")
    assert r.returncode == 0, r.stdout
    assert "no issues found" in r.stdout
    planted = installed_tree(ROOT, tmp_path / "planted")
    plant(planted, "marg.learners.minimax.fit", '\n\ndef _planted() -> int:\n    return "not an int"\n')
    bad = run_mypy(planted, tmp_path / "cache")
    assert bad.returncode == 1, bad.stdout
    assert "learners/minimax/fit.py" in bad.stdout and "[return-value]" in bad.stdout, bad.stdout
