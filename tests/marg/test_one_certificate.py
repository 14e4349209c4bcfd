"""One certificate per model: the estimator fitted in Python, ``marg learn --json`` (the installed
console script), its plain output, the model file (``marg inspect --json``) and the model card
give the same number, kind and box for every registered learner."""

from __future__ import annotations

import json
import re

import pytest

from marg.learners.estimator.base import LEARNERS, estimator_class
from marg.protocols.load import load_summary
from tests.helpers.console import marg
from tests.helpers.reports import parse, values


@pytest.mark.parametrize("learner", LEARNERS)
def test_python_and_cli_certificates_are_identical(site_bundles, learner):
    tmp, bundles = site_bundles
    est = estimator_class(learner)().fit(load_summary(bundles, allow_unsigned=True))
    cert = est.certificate_
    assert cert.kind != "2gamma"  # a bound on the rule the estimator predicts with, not on the training sample
    model = tmp / f"one_{learner}.json"
    r = marg("learn", *bundles, "--learner", learner, "--out", model, "--json", "--allow-unsigned", cwd=tmp)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["worst_case_error"] == cert.value
    assert rep["certificate"]["kind"] == cert.kind and rep["certificate"]["approximate"] == cert.approximate
    text = marg("learn", *bundles, "--learner", learner, "--out", tmp / f"one_{learner}_text.json", "--allow-unsigned",
                cwd=tmp)
    assert text.returncode == 0, text.stderr
    assert re.search(r"worst-case error ≤ ([0-9.]+)", text.stdout).group(1) == f"{cert.value:.4f}"
    ins = marg("inspect", model, "--json", cwd=tmp)
    assert ins.returncode == 0, ins.stderr
    rec = json.loads(ins.stdout)["certificate"]
    assert rec["value"] == cert.value and rec["kind"] == cert.kind and rec["box"] == [dict(t) for t in cert.box]
    assert len(rec["box"]) > 0
    card = tmp / f"one_{learner}.html"
    r = marg("report", model, "--out", card, "--allow-unsigned", cwd=tmp)
    assert r.returncode == 0, r.stderr
    shown = values(parse(card))
    assert float(shown["certificate"]) == pytest.approx(cert.value, abs=0) and shown["certificate_kind"] == cert.kind
    if learner == "renyi":  # 2γ keeps its own name
        assert est.training_bound_.kind == "2gamma" and rep["training_bound"] == est.training_bound_.value
