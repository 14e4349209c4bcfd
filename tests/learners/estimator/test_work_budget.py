"""Every learner's default certificate is the same on a loaded and an idle machine: its budgets count
work (rounds, iterations, branch-and-bound nodes), never wall-clock seconds. A loaded machine is
simulated by a clock that races ahead (every reading of ``time.perf_counter`` a minute later than
the last): a budget in seconds then stops the fit early, one in work does not."""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time

import numpy as np
import pytest

import marg.learners
import marg.lp
from marg.learners.estimator.base import LEARNERS, REGISTRY
from marg.learners.classifiers.naive_bayes import NaiveBayes
from tests.helpers.tan import three_sites

CLOCKS = ("perf_counter", "monotonic", "time", "process_time", "thread_time")
"""Every clock of the ``time`` module a budget in seconds could read (each also as ``…_ns``)."""


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


class _HighsSpy:
    """A HiGHS instance that records every ``time_limit`` it is given (HiGHS' own wall clock, which no
    patched Python clock reaches) and passes everything else through."""

    def __init__(self, h, limits: list):
        self._h, self._limits = h, limits

    def setOptionValue(self, name, value):
        if name == "time_limit":
            self._limits.append(float(value))
        return self._h.setOptionValue(name, value)

    def __getattr__(self, name):
        return getattr(self._h, name)


def _fit_racing_every_clock(learner: str, summary, monkeypatch, **params):
    """Fit under a racing clock in place of every clock of :data:`CLOCKS`; HiGHS' time limits recorded."""
    limits: list[float] = []
    real = marg.lp.new_highs
    with monkeypatch.context() as m:
        for name in CLOCKS:
            racing = RacingClock()
            racing.real = getattr(time, name)
            m.setattr(time, name, racing)
            m.setattr(time, name + "_ns", lambda r=racing: int(r() * 1e9))
        m.setattr(marg.lp, "new_highs", lambda **o: _HighsSpy(real(**o), limits))
        est = REGISTRY[learner](**params).fit(summary)
    return est, limits


@pytest.mark.parametrize("learner", LEARNERS)
def test_every_clock_racing_and_no_time_limit_for_highs(learner, summary, monkeypatch):
    """The same certificate and rule with every Python clock racing, and every HiGHS solve of the default fit
    without a time limit of its own (infinite): a loaded machine has nothing to stop early."""
    idle = _fit(learner, summary)
    loaded, limits = _fit_racing_every_clock(learner, summary, monkeypatch)
    assert loaded.certificate_.value == idle.certificate_.value
    assert [v for v in limits if v < marg.lp.INF] == []
    X = np.array([[i % summary.codebook.attribute_size(f.name) for f in summary.codebook.features] for i in range(50)],
                 dtype=float)
    np.testing.assert_array_equal(loaded.predict(X), idle.predict(X))


def test_the_highs_spy_sees_a_time_limit(summary, monkeypatch):
    """The spy bites: a budget in seconds reaches HiGHS as a finite time limit."""
    _, limits = _fit_racing_every_clock("mrc", summary, monkeypatch, time_limit=600.0)
    assert limits and min(limits) < marg.lp.INF


def test_no_learner_module_holds_a_clock_of_its_own():
    """Patching the ``time`` module reaches every clock a learner reads: no module of ``marg.learners`` (or
    ``marg.lp``) binds one by name (``from time import perf_counter``), which the racing clocks would miss."""
    for info in pkgutil.walk_packages(marg.learners.__path__, "marg.learners."):
        importlib.import_module(info.name)
    clocks = [getattr(time, n) for n in CLOCKS] + [getattr(time, n + "_ns") for n in CLOCKS]
    held = [f"{name}.{k}" for name, mod in list(sys.modules.items())
            if name == "marg.lp" or name.startswith("marg.learners.")
            for k, v in vars(mod).items() if any(v is c for c in clocks)]
    assert held == []
