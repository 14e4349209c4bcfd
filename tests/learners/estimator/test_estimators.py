"""Every learner honours the estimator contract (marg.learners.estimator.base), checked the same way for all."""

from __future__ import annotations

import json

import numpy as np
import pytest

from marg.errors import InputError, NotFittedError
from marg.learners.estimator.base import LEARNERS, REGISTRY, Certificate
from marg.learners.estimator.model import Model
from marg.marginals.summary import Summary
from tests.conftest import random_codebook, random_rows

CONTRACT = {"learner", "n", "features", "worst_case_error"}
EXTRA = {"mrc": {"iterations"}, "dcc": {"iterations", "edges"}, "renyi": {"gamma", "hgr_lower_bound", "separable"},
         "nb": {"certificate_converged"}, "boost": {"iterations", "monomials", "terms"},
         "auto": {"chosen", "auto", "auto_rule", "auto_prefer", "auto_error_method"},
         "prior": {"predicts", "share_lower_bound", "shares"}}


@pytest.fixture(scope="module")
def summary():
    rng = np.random.default_rng(8)
    cb = random_codebook(rng, n_features=4, max_levels=3, n_classes=2)
    X, y = random_rows(rng, cb, 400)
    return cb, Summary.from_rows(cb, X, y, stats="all"), X


@pytest.mark.parametrize("learner", LEARNERS)
def test_estimator_contract(learner, summary):
    cb, S, X = summary
    cls = REGISTRY[learner]
    est = cls()
    params = est.get_params()
    assert list(params) == cls.param_names()
    assert cls(**params).get_params() == params  # parameters round-trip through the constructor
    assert est.set_params(coverage=0.9) is est and est.coverage == 0.9
    with pytest.raises(InputError, match="has no parameter 'nope'"):
        est.set_params(nope=1)
    with pytest.raises(NotFittedError, match="not fitted"):
        est.predict(X)
    assert est.fit(S) is est
    assert isinstance(est.certificate_, Certificate) and est.worst_case_error_ == est.certificate_.value
    assert est.feature_names_in_ == ([] if learner == "prior" else cb.feature_names)  # the label-only rule reads none
    rep = est.report()
    assert CONTRACT | EXTRA[learner] <= set(rep) and rep["learner"] == learner
    d = json.loads(json.dumps(est.to_dict()))
    assert set(d) == {"learner", "params", "state", "certificate"} and "callback" not in d["params"]
    again = cls.from_dict(d)
    assert again.get_params() == {k: v for k, v in params.items() if k != "callback"} | {"coverage": 0.9} | (
        {"callback": None} if "callback" in params else {})
    assert np.array_equal(again.predict(X), est.predict(X))
    assert np.allclose(again.predict_proba(X), est.predict_proba(X), rtol=0, atol=1e-15)
    assert again.certificate_ == est.certificate_
    # a replaced certificate (e.g. W(h) of the rule, a holdout bound) survives the file
    from dataclasses import replace

    est.set_certificate(replace(est.certificate_, value=0.321, kind="holdout", approximate=False))
    assert cls.from_dict(json.loads(json.dumps(est.to_dict()))).certificate_ == est.certificate_
    bad = json.loads(json.dumps(est.to_dict()))
    bad["certificate"]["kind"] = "guess"
    with pytest.raises(InputError, match="unknown certificate kind 'guess'"):
        cls.from_dict(bad)


@pytest.mark.parametrize("learner", LEARNERS)
def test_model_file_stores_parameters_once(learner, summary, tmp_path):
    cb, S, X = summary
    est = REGISTRY[learner](coverage=0.9).fit(S)
    m = Model(learner=learner, codebook=cb, estimator=est, info={"n": S.n})
    m.save(tmp_path / "m.json")
    raw = json.loads((tmp_path / "m.json").read_text())
    assert raw["version"] == 2 and "params" not in raw["info"]
    assert raw["estimator"]["params"]["coverage"] == 0.9
    # params, the model's certificate record and (but renyi and prior) the learner state's own; auto's state holds
    # the chosen estimator's whole record (its params, certificate and state) besides its own
    own = 2 + (learner not in ("renyi", "prior"))
    if learner == "auto":
        # ... and the choice's one confidence event (auto_confidence: the coverage all candidates hold at together)
        own = 3 + json.dumps(raw["estimator"]["state"]["chosen"]).count('"coverage"')
    assert json.dumps(raw).count('"coverage"') == own
    back = Model.load(tmp_path / "m.json")
    assert np.array_equal(back.predict(X), m.predict(X))


def test_unknown_learner_and_option_errors():
    from marg.learners.learn import make_estimator

    with pytest.raises(InputError, match="unknown learner 'svm'"):
        REGISTRY["svm"]
    with pytest.raises(InputError, match="greedy=… does not apply to learner .mrc."):
        make_estimator("mrc", {"greedy": True}, given={"greedy"})
    est = make_estimator("dcc", {"greedy": True, "solver": "cg", "s": 0.0}, given={"greedy", "s"})
    assert est.greedy is True and est.s == 0.0 and est.solver == "compact"  # --solver is the MRC's choice
