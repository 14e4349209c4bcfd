"""``learn`` fits a clone of an estimator given (issue 47, scikit-learn's convention): the caller's estimator
is left unfitted with the same parameters, the model's estimator is the fitted clone, and a name and the
same estimator still give the same model."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from marg.errors import InputError
from marg.learners.estimator.base import REGISTRY
from marg.learners.learn import clone, learn
from marg.marginals.summary import Summary
from tests.helpers.tan import tan_codebook, tan_rows


@pytest.fixture(scope="module")
def summary():
    X, y = tan_rows(np.random.default_rng(21), 600)
    return Summary.from_rows(tan_codebook(), X, y, stats="all")


def _fitted_state(est):
    return sorted(k for k in vars(est) if k.endswith("_") and not k.startswith("_"))


@pytest.mark.parametrize("name,params", [("mrc", {"s": 0.3}), ("nb", {"alpha": 0.5, "coverage": 0.9}),
                                         ("prior", {}), ("dcc", {"greedy": True, "max_edges": 1})])
def test_learn_leaves_the_estimator_given_unfitted_and_unchanged(summary, name, params):
    est = REGISTRY[name](**params)
    before = copy.deepcopy(est.get_params())
    res = learn(summary, est)
    assert _fitted_state(est) == [] and est.get_params() == before
    assert res.model.estimator is not est and res.estimator is not est
    assert "certificate_" in _fitted_state(res.model.estimator) and res.model.estimator.get_params() == before
    # the same as the name with those parameters
    by_name = learn(summary, name, params, given=set(params))
    assert res.model.estimator.certificate_ == by_name.model.estimator.certificate_
    assert res.model.to_dict() == by_name.model.to_dict()


def test_a_selection_sets_the_features_of_the_clone_only(summary):
    est = REGISTRY["nb"]()
    res = learn(summary, est, select="group-lasso", max_features=2)
    assert est.features is None and _fitted_state(est) == []
    assert res.model.estimator.features == list(res.selection.selected)


def test_clone_is_a_new_unfitted_estimator_with_the_same_parameters(summary):
    seen = []
    est = REGISTRY["mrc"](features=["x0", "x1"], s=0.3, callback=seen.append).fit(summary)
    c = clone(est)
    assert type(c) is type(est) and _fitted_state(c) == [] and c.get_params() == est.get_params()
    assert c.features == est.features and c.features is not est.features  # a copy, not the caller's list
    assert c.callback is est.callback  # a transient callable is passed as it is
    assert clone(est, coverage=0.9).coverage == 0.9 and est.coverage == 0.95
    assert "certificate_" in _fitted_state(est)  # the estimator cloned is left fitted
    with pytest.raises(InputError, match="has no parameter 'colour'"):
        clone(est, colour="red")
    with pytest.raises(InputError, match="clone takes an estimator"):
        clone("mrc")
