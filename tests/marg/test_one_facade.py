"""One facade (issue 36): one ``learn`` and one ``load_model``; a learner named and the same estimator given make the
same model file.

Oracle: the model file's bytes. A name goes through the registry and the options, an estimator is
fitted as given; both go through :func:`marg.learners.learn.learn` and :func:`marg.learners.learn.as_model`,
so the files are byte-identical (the creation time fixed: it is the only field that may differ).
"""

from __future__ import annotations

import ast
import inspect

import numpy as np
import pytest

import marg
from marg.errors import InputError
from marg.learners.auto import AutoLearner
from marg.learners.classifiers.dcc import DCC
from tests.helpers.tan import three_sites


@pytest.fixture(scope="module")
def summary():
    _cb, S, _parts = three_sites(np.random.default_rng(36), (220, 180, 150), epsilon=2.0)
    return S


@pytest.fixture
def fixed_time(monkeypatch):
    import marg.learners.estimator.model as model_module

    monkeypatch.setattr(model_module, "now_iso", lambda: "2026-01-01T00:00:00Z")


def _file(model, path):
    model.save(path)
    return path.read_bytes()


def test_auto_by_name_and_by_estimator_write_the_same_model_file(summary, fixed_time, tmp_path):
    by_name = marg.learn(summary, "auto")
    by_estimator = marg.learn(summary, AutoLearner())
    assert by_estimator.learner == by_name.learner != "auto"  # the chosen candidate, both ways
    assert by_estimator.has_uncertainty_set == by_name.has_uncertainty_set
    assert _file(by_name, tmp_path / "a.json") == _file(by_estimator, tmp_path / "b.json")


def test_a_named_learner_with_options_equals_its_estimator(summary, fixed_time, tmp_path):
    by_name = marg.learn(summary, "dcc", greedy=True)
    by_estimator = marg.learn(summary, DCC(greedy=True))
    assert _file(by_name, tmp_path / "a.json") == _file(by_estimator, tmp_path / "b.json")


def test_an_estimator_takes_no_options_and_a_learner_is_a_name_or_an_estimator(summary):
    with pytest.raises(InputError, match="coverage"):
        marg.learn(summary, AutoLearner(), coverage=0.9)
    with pytest.raises(InputError, match="learner name or an estimator"):
        marg.learn(summary, 3)


def test_one_learn_and_one_load_model():
    """``marg.learn`` is the keyword spelling of the one fit; ``marg.load_model`` is ``marg.api``'s."""
    import marg.api
    import marg.notebook

    assert marg.load_model is marg.api.load_model and not hasattr(marg.notebook, "load_model")
    tree = ast.parse(inspect.getsource(marg.notebook.learn))
    calls = [n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    assert "learn_model" in calls  # marg.learners.learn.learn: no fit of its own
    assert not any(isinstance(n, ast.Name) and n.id == "Model" for n in ast.walk(tree))


def test_the_cli_learns_through_the_facade():
    """``marg learn`` fits through :func:`marg.learners.learn.learn` and builds no model itself."""
    from marg.cli import learn as cli_learn

    src = inspect.getsource(cli_learn.learn)
    assert "learn_model(summary" in src and "Model(" not in src and ".fit(" not in src
