"""The installed ``marg`` console script, run as a subprocess: what a user's shell sees.

In-process ``CliRunner`` tests cannot see bytes that C code (the HiGHS solver) writes to
file descriptor 1; these tests run the installed entry point and parse its whole stdout.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.console import marg


def test_help_runs():
    r = marg("--help", cwd=Path.cwd())
    assert r.returncode == 0 and "learn" in r.stdout


@pytest.mark.parametrize("extra", [
    ["--learner", "mrc"],
    ["--learner", "mrc", "--solver", "full"],
    ["--learner", "dcc"],
    ["--learner", "renyi"],
    ["--learner", "renyi", "--select", "gbd", "--max-features", "2"],
    ["--learner", "mrc", "--select", "group-lasso", "--max-features", "2"],
], ids=lambda e: "-".join(a.strip("-") for a in e))
def test_learn_json_is_the_whole_stdout(site_bundles, extra):
    tmp, bundles = site_bundles
    model = tmp / ("m_" + "_".join(a.strip("-") for a in extra) + ".json")
    r = marg("learn", *bundles, *extra, "--out", model, "--json", "--allow-unsigned", cwd=tmp)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)  # the whole of stdout is one JSON object: no solver banner
    assert 0.0 <= report["worst_case_error"] <= 1.0
    assert report["learner"] == extra[1]
    ev = marg("evaluate", "--allow-unsigned", model, tmp / "north.csv", "--json", cwd=tmp)
    assert ev.returncode == 0, ev.stderr
    assert set(json.loads(ev.stdout)) >= {"n", "accuracy", "error", "worst_case_error"}


def test_inspect_json_parses(site_bundles):
    tmp, bundles = site_bundles
    r = marg("inspect", bundles[0], "--json", cwd=tmp)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["site"] == "north"


def test_bad_input_is_one_line_and_exit_2(site_bundles):
    tmp, bundles = site_bundles
    r = marg("learn", tmp / "missing.bundle", "--learner", "mrc", "--out", tmp / "x.json", cwd=tmp)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "missing.bundle" in r.stderr
    assert r.stdout == ""
