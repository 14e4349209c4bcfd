"""An estimator's certificate is set only by that estimator (issue 47).

Lint-style: no module of the library or of the tests assigns ``certificate_`` on anything but
``self`` inside a method of a class (an estimator's ``fit`` and loaders), or on the instance a
classmethod builds with ``cls(...)`` (``MarginalEstimator.from_dict``); code outside an estimator
calls :meth:`~marg.learners.estimator.base.MarginalEstimator.set_certificate`, which validates. A planted
outside assignment proves the check; a behavioural test shows what ``set_certificate`` refuses.
"""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from marg.errors import InputError, NotFittedError
from marg.learners.classifiers.label_only import LabelOnly
from marg.marginals.summary import Summary
from tests.helpers.tan import tan_codebook, tan_rows

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("marg", "marginals", "learners", "protocols", "cli", "tests")


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        return list(node.targets)
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        return [node.target]
    return []


def _own(fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> bool:
    """``name`` is the instance a method works on: its first argument in an instance method, or a
    local a classmethod builds as ``cls(...)``."""
    args = fn.args.posonlyargs + fn.args.args
    if not args:
        return False
    first = args[0].arg
    classmethod_ = any(isinstance(d, ast.Name) and d.id == "classmethod" for d in fn.decorator_list)
    if not classmethod_:
        return name == first
    for node in ast.walk(fn):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name)
                and node.value.func.id == first and any(isinstance(t, ast.Name) and t.id == name
                                                        for t in node.targets)):
            return True
    return False


def outside_assignments(source: str, filename: str = "<planted>") -> list[str]:
    """Every assignment of an attribute ``certificate_`` that is not an estimator's own, as "file:line"."""
    tree = ast.parse(source, filename)
    bad: list[str] = []

    def visit(node: ast.AST, method: ast.FunctionDef | ast.AsyncFunctionDef | None, in_class: bool) -> None:
        for tgt in _targets(node):
            for t in ast.walk(tgt):
                if isinstance(t, ast.Attribute) and t.attr == "certificate_":
                    ok = method is not None and isinstance(t.value, ast.Name) and _own(method, t.value.id)
                    if not ok:
                        bad.append(f"{filename}:{node.lineno}")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr"
            and len(node.args) >= 2):
            if isinstance(node.args[1], ast.Constant) and node.args[1].value == "certificate_":
                bad.append(f"{filename}:{node.lineno} (setattr)")
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, None, True)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, child if in_class else None, False)  # a method only directly in a class body
            else:
                visit(child, method, False if method is not None else in_class)

    visit(tree, None, False)
    return bad


def test_no_module_sets_an_estimators_certificate_from_outside():
    bad = []
    for layer in SCANNED:
        for path in sorted((ROOT / layer).rglob("*.py")):
            bad += outside_assignments(path.read_text(), str(path.relative_to(ROOT)))
    assert not bad, "certificate_ assigned from outside an estimator (use set_certificate):\n" + "\n".join(bad)


def test_the_check_finds_planted_outside_assignments():
    planted = '''
def chooser(model, c):
    model.estimator.certificate_ = c
    setattr(model, "certificate_", c)

class Estimator:
    def fit(self, other, c):
        self.certificate_ = c                 # its own: allowed
        other.certificate_ = c                # another estimator's: not

    @classmethod
    def load(cls, d):
        est = cls()
        est.certificate_ = d                  # the instance it builds: allowed
        return est

    def nested(self, c):
        def helper(x):
            x.certificate_ = c                # a closure is not the method
        return helper
'''
    assert [b.split(":")[1].split()[0] for b in outside_assignments(planted)] == ["3", "4", "9", "19"]


def _fitted():
    cb = tan_codebook()
    X, y = tan_rows(np.random.default_rng(3), 300)
    return LabelOnly().fit(Summary.from_rows(cb, X, y))


def test_set_certificate_validates_and_sets():
    est = _fitted()
    c = replace(est.certificate_, value=0.25, kind="holdout", approximate=False, box=())
    assert est.set_certificate(c) is est and est.certificate_ == c
    with pytest.raises(InputError, match="must be a Certificate"):
        est.set_certificate(0.25)
    with pytest.raises(InputError, match="finite bound"):
        est.set_certificate(replace(c, value=float("nan")))
    with pytest.raises(InputError, match="over 3 classes"):
        est.set_certificate(replace(c, n_classes=3))
    assert est.certificate_ == c  # a refused certificate leaves the one in place
    with pytest.raises(NotFittedError):
        LabelOnly().set_certificate(c)
