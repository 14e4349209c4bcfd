"""A study too small for an evaluation round (issue 44, small): holdout 0 in the study file, two rounds, the model's own
certificate.

The design's first-order mode holds out no patient where even a guard round could not catch a model erring on every
held-out patient (:func:`marg.marginals.study_first_order.guard_sees`): three demo sites stated at 80 patients each.
What is checked: the signed study file says so (rounds select and measure, holdout 0) and a file claiming one of the
two without the other is refused; the study ends in a signed model once every party re-ran ``marg study run``; each
site's ledger holds two releases whose ρ add to exactly its total (nothing was left for an evaluation); round 1
counted every patient (no hold-out: the label total within the shared noise of all the rows); the result's
certificate is the model's own, of the estimator's kind, not a holdout bound.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.helpers.console import run
from tests.helpers.study import declare_study

SITES = ("north", "south", "city")
ROWS = 80


def _ok(r):
    assert r.exit_code == 0, r.output
    return r


def _releases(home):
    p = home / "ledger" / "ledger.jsonl"
    return [e for e in (json.loads(x) for x in p.read_text().splitlines() if x.strip()) if e.get("kind") == "release"]


def test_a_tiny_study_runs_two_rounds_and_keeps_the_models_own_certificate(tmp_path):
    from marg.learners.estimator.model import Model
    from marg.marginals.counts.dp_conversions import rho_for_epsilon
    from marg.protocols.bundle import Bundle

    st = declare_study(tmp_path, ROWS, 45, "--rows", ",".join([str(ROWS)] * 3), script=False)
    doc = json.loads(st.study.read_text())
    assert doc["rounds"] == ["select", "measure"] and doc["holdout"] == 0.0
    assert doc["plan"]["selection"] == "first-order" and set(doc["plan"]["rho"]) == {"select", "measure"}
    for _ in range(6):
        _ok(run("study", "run", st.study, "--learner", home=st.home["learner"]))
        if (st.drop / "final" / "result.json").exists():
            break
        for s in SITES:
            _ok(run("study", "run", st.study, "--site", s, "--data", st.data[s], home=st.home[s]))
    status = json.loads(_ok(run("study", "status", st.study, "--json")).stdout)
    assert status["done"] and set(status["rounds"]) == {"select", "measure"}
    assert all(v["rounds"] == {"select": "revealed", "measure": "revealed"} for v in status["sites"].values())
    rho = rho_for_epsilon(1.0, 1e-6)
    for s in SITES:
        entries = _releases(st.home[s])
        assert len(entries) == 2 and abs(sum(e["cost"]["rho"] for e in entries) - rho) < 1e-9 * rho
    b = Bundle.from_bytes((st.drop / "select" / "sum.bundle").read_bytes())
    label = next(t for t in b.tables if t.clique == ("cv_event",))
    assert abs(float(np.sum(label.counts)) - 3 * ROWS) <= 6 * label.noise.std * np.sqrt(label.counts.size)
    result = json.loads((st.drop / "final" / "result.json").read_text())
    model, _ = Model.read(st.drop / "final" / "model.json")
    cert = model.estimator.certificate_
    assert result["certificate_kind"] == cert.kind != "holdout" and result["certificate"] == pytest.approx(cert.value)
    assert result["learner"] == "nb" and result["evaluation"]["kept"] == "model"
    assert set(result["rounds"]) == {"select", "measure"} and not (st.drop / "evaluate").exists()


@pytest.mark.parametrize("rounds, holdout", [(("select", "measure"), 0.2), (("select", "measure", "evaluate"), 0.0),
                                             (("select",), 0.0)])
def test_a_study_file_with_rounds_and_holdout_that_disagree_is_refused(rounds, holdout):
    from cryptography.hazmat.primitives.asymmetric import ed25519, x25519

    from marg.errors import InputError
    from marg.marginals.synthetic import demo_codebook
    from marg.protocols.pinning import Pinned
    from marg.protocols.study_file import make_study

    keys = {n: ed25519.Ed25519PrivateKey.generate() for n in ("learner", "a", "b")}
    parties = [Pinned(n, k.public_key(), x25519.X25519PrivateKey.generate().public_key()) for n, k in keys.items()]
    with pytest.raises(InputError, match="held-out|rounds"):
        make_study(demo_codebook(), parties, "learner", keys["learner"], epsilon=1.0, delta=1e-6, drop="d", plan={},
                   holdout=holdout, rounds=rounds)
