"""``marg learn --time-limit`` reaches the learners that stop with a valid bound (boost's column
generation, naive Bayes' exact certificate) and leaves gbd's as it was; without it each keeps
its own default (nb's none: a work budget); the automatic choice still takes it for gbd selection only."""

from __future__ import annotations

import json

import pytest

from marg.learners import learn as api
from marg.errors import InputError
from marg.learners.boost.vote import DEFAULT_TIME_LIMIT as TIME_LIMIT
from tests.helpers.console import demo_bundles, marg


def test_the_option_sets_each_learners_time_limit():
    assert api.learn_estimator("boost", {"time_limit": 7.0}, {"time_limit"}).time_limit == 7.0
    assert api.learn_estimator("nb", {"time_limit": 3.0}, {"time_limit"}).time_limit == 3.0
    assert api.learn_estimator("boost", {}, ()).time_limit == TIME_LIMIT
    # its work budget alone: the same certificate on any machine
    assert api.learn_estimator("nb", {}, ()).time_limit is None
    with pytest.raises(InputError, match="time-limit|time_limit"):
        api.learn_estimator("mrc", {"time_limit": 3.0}, {"time_limit"})


def test_the_console_script_passes_it(tmp_path):
    bundles = demo_bundles(tmp_path, seed=40, n=200)
    out = tmp_path / "nb.json"
    r = marg("learn", *bundles, "--learner", "nb", "--time-limit", "3", "--out", out, "--allow-unsigned", "--no-sign",
             cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(out.read_text())["estimator"]["params"]["time_limit"] == 3.0
    out2 = tmp_path / "nb2.json"
    r = marg("learn", *bundles, "--learner", "nb", "--out", out2, "--allow-unsigned", "--no-sign", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(out2.read_text())["estimator"]["params"]["time_limit"] is None
