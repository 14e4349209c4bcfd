"""Model files written by the previous release (model-file version 1) load and predict identically.

The fixtures in tests/fixtures/compat/ were written by release 3c9b7f2 with
bench/make_compat_fixtures.py: each model file, the data it is applied to, and what that
release predicted (labels, probabilities, certificate).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from marg.cli.main import app
from marg.learners.estimator.model import Model
from marg.marginals.data.encoding import encode_file

HERE = Path(__file__).resolve().parents[2] / "fixtures" / "compat"
EXPECTED = json.loads((HERE / "expected.json").read_text())["models"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_previous_release_model_predicts_identically(name):
    exp = EXPECTED[name]
    raw = json.loads((HERE / f"{name}.json").read_text())
    assert raw["version"] == 1  # written by the previous release
    m = Model.load(HERE / f"{name}.json")
    enc = encode_file(HERE / exp["data"], m.codebook, with_label=True)
    assert np.array_equal(m.predict(enc.X), np.asarray(exp["predict"]))
    assert np.allclose(m.predict_proba(enc.X), np.asarray(exp["proba"]), rtol=0, atol=1e-12)
    assert m.worst_case_error == labels_certificate(m, exp["worst_case_error"])


def labels_certificate(model, saved: float) -> float:
    """A previous release's MRC/DCC file certified R*, its randomized rule's bound: it is read as
    ``minimax_risk_``, and the labels' certificate is 2·R* (capped at 1); other learners' stand."""
    est = model.estimator
    if model.learner in ("mrc", "dcc") and est.minimax_risk_.kind in ("R*", "R*_L"):
        assert est.minimax_risk_.value == saved and est.certificate_.kind == "W(h)"
        return min(1.0, 2 * saved)
    return saved


@pytest.mark.parametrize("name", ["dcc_greedy", "renyi", "mrc_cg"])
def test_previous_release_model_through_the_cli(name, tmp_path):
    exp = EXPECTED[name]
    model = tmp_path / f"{name}.json"
    shutil.copy(HERE / f"{name}.json", model)
    r = CliRunner().invoke(app, ["evaluate", "--allow-unsigned", str(model), str(HERE / exp["data"]), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["worst_case_error"] == labels_certificate(Model.load(model), exp["worst_case_error"])
    out = tmp_path / "pred.csv"
    r = CliRunner().invoke(app, ["predict", "--allow-unsigned", str(model), str(HERE / exp["data"]), "--out", str(out)])
    assert r.exit_code == 0, r.output
    rows = out.read_text().splitlines()[1:]
    classes = Model.load(model).classes
    assert [row.split(",")[-1] for row in rows] == [classes[k] for k in exp["predict"]]
