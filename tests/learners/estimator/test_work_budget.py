"""Every learner's default certificate is the same on a loaded and an idle machine: its budgets count
work (rounds, iterations, branch-and-bound nodes), never wall-clock seconds. A loaded machine is
simulated by a clock that races ahead (every reading of ``time.perf_counter`` a minute later than
the last): a budget in seconds then stops the fit early, one in work does not."""

from __future__ import annotations

import time

import numpy as np
import pytest

from marg.learners.estimator.base import LEARNERS, REGISTRY
from marg.learners.classifiers.naive_bayes import NaiveBayes
from tests.helpers.tan import three_sites


class RacingClock:
    """``time.perf_counter`` that advances ``step`` seconds more at every reading (a machine so loaded
    that each step of the fit seems to take a minute)."""

    def __init__(self, step: float = 60.0):
        self.real, self.step, self.skew = time.perf_counter, step, 0.0

    def __call__(self) -> float:
        self.skew += self.step
        return self.real() + self.skew


@pytest.fixture(scope="module")
def summary():
    return three_sites(np.random.default_rng(4), (300, 250, 200))[1]


def _fit(learner: str, summary, monkeypatch=None, **params):
    est = REGISTRY[learner](**params)
    if monkeypatch is None:
        return est.fit(summary)
    with monkeypatch.context() as m:
        m.setattr(time, "perf_counter", RacingClock())
        return est.fit(summary)


@pytest.mark.parametrize("learner", LEARNERS)
def test_the_default_certificate_does_not_depend_on_the_clock(learner, summary, monkeypatch):
    idle = _fit(learner, summary)
    loaded = _fit(learner, summary, monkeypatch)
    assert loaded.certificate_.value == idle.certificate_.value
    X = np.array([[i % summary.codebook.attribute_size(f.name) for f in summary.codebook.features] for i in range(50)],
                 dtype=float)
    np.testing.assert_array_equal(loaded.predict(X), idle.predict(X))


def test_the_racing_clock_stops_a_budget_in_seconds():
    """The simulation bites: with a budget in seconds, naive Bayes' refinement stops at once under the
    racing clock (fewer rounds than on the idle clock), while its work budget runs the same rounds."""
    import marg.learners.classifiers.naive_bayes as nb_module

    S = three_sites(np.random.default_rng(4), (300, 250, 200))[1]
    rounds = {}
    real = nb_module.certify_rule

    def counting(*a, **kw):
        cert = real(*a, **kw)
        rounds[key] = cert.rounds
        return cert

    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(nb_module, "certify_rule", counting)
        key = "idle"
        idle = NaiveBayes(time_limit=600.0).fit(S)
        assert rounds["idle"] >= 2  # the refinement has rounds to run
        mp.setattr(time, "perf_counter", RacingClock())
        key = "seconds"
        NaiveBayes(time_limit=600.0).fit(S)
        key = "work"
        loaded = NaiveBayes().fit(S)
    finally:
        mp.undo()
    assert rounds["seconds"] < rounds["idle"]
    assert rounds["work"] == rounds["idle"] and loaded.certificate_.value == idle.certificate_.value


def test_the_work_budget_bounds_the_rounds():
    S = three_sites(np.random.default_rng(4), (300, 250, 200))[1]
    full = NaiveBayes(certify="exact").fit(S)
    one = NaiveBayes(certify="exact", max_rounds=1).fit(S)
    assert one.certificate_.value >= full.certificate_.value - 1e-12  # fewer rounds: a valid, looser bound
    assert not one.certificate_converged_ or one.certificate_.value == full.certificate_.value
