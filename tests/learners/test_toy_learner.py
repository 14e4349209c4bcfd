"""Where a new learner plugs in: a toy estimator registered at run time goes the whole way.

The toy predicts the majority class of the released label table. It declares its
``marg learn`` options and parameter constraints, gives its rule as a ``LinearRule`` (zero
weights, the log prior as intercept) and takes its certificate from
:func:`marg.learners.certification.certify.certify` — nothing else. Through the registry it is learned by
:func:`marg.learners.learn.learn` (the library path of ``marg learn --learner toy``), saved to a
model file, loaded back, certified and rendered as a model card, with no edit to marg.

Oracle: a constant rule predicting class c errs with probability 1 − P(Y = c). With λ = 0
(``s = 0``) the uncertainty set fixes the label marginal to the released one, so the rule's
exact worst case W(h) is 1 − max_c prior_c; with a calibrated λ the box is wider and the
certificate can only be larger.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

import numpy as np
import pytest

from marg.errors import InputError
from marg.learners.estimator.base import REGISTRY, MarginalEstimator, features_param, register
from marg.learners.certification.certify import certify
from marg.learners.features.blocks import FeatureMap, node_blocks
from marg.learners.learn import learn, trivial_certificate_warning
from marg.learners.minimax.fixed_rule import LinearRule
from marg.learners.estimator.model import Model
from marg.learners.core.params import COVERAGE, LAMBDA_SCALE, Check
from marg.marginals.summary import Summary
from marg.reports.model_card import model_card
from tests.conftest import random_codebook, random_rows


class Majority(MarginalEstimator):
    """The majority class of the label table, certified by W(h) of that constant rule."""

    learner = "toy"
    display_name = "a toy"
    learn_options = ("s", "coverage")
    _parameter_constraints = {"s": LAMBDA_SCALE, "coverage": COVERAGE,
                              "features": Check(features_param, bad="age", what="features")}

    def __init__(self, s: float | None = None, coverage: float = 0.95, features: Sequence[str] | None = None):
        self.s = s
        self.coverage = coverage
        self.features = features

    def fit(self, summary: Any) -> "Majority":
        self.check_params()
        blocks = [b for b in node_blocks(summary.codebook, features_param(self.features)) if b.kind == "onehot"]
        self.map_ = FeatureMap(blocks, [b.column for b in blocks])
        self.classes_ = tuple(summary.classes)
        self.prior_ = np.asarray(summary.prior, dtype=float)
        self.feature_names_in_ = list(self.map_.names)
        self.n_ = float(summary.n)
        self.fingerprint_ = str(summary.fingerprint)
        self.certificate_ = certify(self, summary, coverage=self.coverage, s=self.s, structure="first", exact=True)
        return self

    def linear_rule(self) -> LinearRule:  # called by certify() inside fit, before certificate_ is set
        return LinearRule(self.map_, np.zeros((len(self.classes_), self.map_.dim)), np.log(self.prior_))

    def predict(self, X: np.ndarray) -> np.ndarray:
        self._check_fitted()
        return np.full(len(X), int(np.argmax(self.prior_)), dtype=np.int64)

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        return np.eye(len(self.classes_))[self.predict(X)]

    def _state(self) -> dict[str, Any]:
        return {"classes": list(self.classes_), "prior": self.prior_.tolist(), "map": self.map_.to_dict(),
                "n": self.n_, "fingerprint": self.fingerprint_}

    def _load_state(self, state: dict[str, Any]) -> None:
        self.classes_ = tuple(state["classes"])
        self.prior_ = np.asarray(state["prior"], dtype=float)
        self.map_ = FeatureMap.from_dict(state["map"])
        self.feature_names_in_ = list(self.map_.names)
        self.n_ = float(state["n"])
        self.fingerprint_ = str(state["fingerprint"])


@pytest.fixture
def toy():
    register(Majority)
    yield Majority
    REGISTRY.pop("toy", None)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(27)
    cb = random_codebook(rng, n_features=3, max_levels=3, n_classes=3)
    X, y = random_rows(rng, cb, 500)
    return Summary.from_rows(cb, X, y, stats="all"), X, y


def test_a_registered_toy_learner_gets_a_model_file_a_certificate_and_a_card(toy, data, tmp_path):
    summary, X, y = data
    res = learn(summary, "toy", {"s": 0.0, "coverage": 0.95}, given={"s"})
    model = res.model
    assert model.learner == "toy" and isinstance(model.estimator, Majority)
    majority = float(np.max(summary.prior))
    cert = model.estimator.certificate_
    assert cert.kind == "W(h)" and cert.coverage is None  # λ set by s: no coverage level claimed
    assert cert.value == pytest.approx(1.0 - majority, abs=1e-6)  # the exact worst case of a constant rule
    assert res.report["learner"] == "toy" and res.report["worst_case_error"] == cert.value
    # the error on the very rows the tables count is 1 − max prior, within the certificate
    assert float(np.mean(model.predict(X) != y)) <= cert.value + 1e-9

    path = tmp_path / "toy.model"
    model.save(path)
    back = Model.load(path)
    assert back.learner == "toy" and back.estimator.certificate_.value == cert.value
    assert np.array_equal(back.predict(X), model.predict(X))

    card = model_card(back)
    shown = dict(re.findall(r'data-key="([^"]+)" data-value="([^"]*)"', card))
    assert float(shown["certificate"]) == cert.value and shown["certificate_kind"] == "W(h)"
    assert shown["learner"] == "toy"

    calibrated = learn(summary, "toy", {"coverage": 0.9}).model.estimator.certificate_
    assert calibrated.coverage == 0.9 and calibrated.value >= cert.value - 1e-9  # a wider box, a larger bound
    warning = trivial_certificate_warning(model, summary.n)
    assert (warning is None) == (not cert.trivial)


def test_the_toy_learners_options_and_constraints_are_its_own(toy, data):
    summary, _, _ = data
    with pytest.raises(InputError, match=r"greedy.* does not apply to learner 'toy' \(it is for dcc\)"):
        learn(summary, "toy", {"greedy": True}, given={"greedy"})
    with pytest.raises(InputError, match="coverage must be a finite number > 0 and < 1, got 1.5"):
        learn(summary, "toy", {"coverage": 1.5}, given={"coverage"})
    with pytest.raises(InputError, match="cannot register learner 'toy'"):
        register(Majority)
    assert "toy" in REGISTRY


def test_the_automatic_choice_takes_the_toy_as_a_candidate(toy, data):
    summary, _, _ = data
    from marg.learners.auto import AutoLearner

    auto = AutoLearner(candidates=[("toy", {}), ("nb", {"certify": "bound"})], prefer="certificate").fit(summary)
    by_name = {r.learner: r for r in auto.candidates_}
    assert by_name["toy"].certificate is not None and by_name["toy"].kind == "W(h)"
    from marg.learners.auto import choose

    k, _ = choose(auto.candidates_, "certificate")  # the one rule, on the toy's row like any other
    assert auto.candidates_[k].chosen and auto.chosen_.certificate_.value == auto.candidates_[k].certificate
