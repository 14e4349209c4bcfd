"""Signed models: a site predicts only with a model its learner signed, unaltered."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from marg.cli.main import app
from marg.marginals.synthetic import SITES, demo_codebook, generate, write_csv

runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("signed")
    schema = tmp / "codebook.json"
    demo_codebook().save(schema)
    cols = generate(1500, SITES[0], seed=11)
    write_csv(tmp / "rows.csv", cols, slice(0, 1200))
    write_csv(tmp / "test.csv", cols, slice(1200, 1500))
    b = tmp / "a.bundle"
    assert run("export", tmp / "rows.csv", "--schema", schema, "--site", "north", "--out", b, "--min-cell", "1",
               "--no-ledger").exit_code == 0
    for who in ("learner", "mallory"):
        assert run("keys", "init", "--site", who, "--dir", tmp / "keys").exit_code == 0
    trust = tmp / "trust"
    trust.mkdir()
    (trust / "learner.sign.pub").write_bytes((tmp / "keys" / "learner.sign.pub").read_bytes())
    model = tmp / "model.json"
    r = run("learn", b, "--learner", "mrc", "--out", model, "--allow-unsigned", "--sign-key", tmp / "keys" / "learner.sign.key", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["signed"] is True
    return tmp, model, trust


def test_a_signed_model_verifies_and_predicts(signed):
    tmp, model, trust = signed
    r = run("evaluate", model, tmp / "test.csv", "--trust", trust, "--json", "--schema", tmp / "codebook.json")
    assert r.exit_code == 0, r.output
    # without the site's codebook a signed model is not applied (issue 18: a model of another codebook)
    r = run("evaluate", model, tmp / "test.csv", "--trust", trust)
    assert r.exit_code == 2 and "--schema" in r.stderr and r.stderr.count("\n") == 1
    other = json.loads((tmp / "codebook.json").read_text())
    other["features"][0]["levels"] = list(reversed(other["features"][0]["levels"]))
    (tmp / "other.json").write_text(json.dumps(other))
    r = run("predict", model, tmp / "test.csv", "--out", tmp / "p.csv", "--trust", trust, "--schema", tmp / "other.json")
    assert r.exit_code == 2 and "differs from the model's" in r.stderr and not (tmp / "p.csv").exists()
    r = run("report", model, "--out", tmp / "card.html", "--trust", trust)
    assert r.exit_code == 0 and "Signed by" in (tmp / "card.html").read_text() and "learner" in (tmp / "card.html").read_text()
    d = json.loads(run("inspect", model, "--json").stdout)
    assert d["signed"] and d["signer"] == "learner" and d["bundles"][0]["site"] == "north"


@pytest.mark.parametrize("edit", ["negate", "certificate", "codebook"])
def test_an_altered_model_is_refused(signed, tmp_path, edit):
    tmp, model, trust = signed
    d = json.loads(model.read_text())
    if edit == "negate":  # the attack of the issue: every prediction flips
        d["estimator"]["state"]["mu"] = [[-x for x in row] for row in d["estimator"]["state"]["mu"]]
    elif edit == "certificate":
        d["worst_case_error"] = 0.01
        d["estimator"]["certificate"]["value"] = 0.01
    else:
        d["codebook"]["features"][0]["name"] = "renamed"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(d))
    for cmd in (["evaluate", bad, tmp / "test.csv"], ["predict", bad, tmp / "test.csv", "--out", tmp_path / "p.csv"]):
        r = run(*cmd, "--trust", trust)
        assert r.exit_code == 1 and "bad signature by 'learner'" in r.stderr and r.stderr.count("\n") == 1
    assert not (tmp_path / "p.csv").exists()


def test_unsigned_and_foreign_models_are_refused(signed, tmp_path):
    tmp, model, trust = signed
    d = json.loads(model.read_text())
    unsigned = tmp_path / "unsigned.json"
    unsigned.write_text(json.dumps({k: v for k, v in d.items() if k != "signature"}))
    r = run("evaluate", unsigned, tmp / "test.csv", "--trust", trust)
    assert r.exit_code == 1 and "unsigned model" in r.stderr
    assert run("evaluate", unsigned, tmp / "test.csv", "--allow-unsigned").exit_code == 0
    foreign = tmp_path / "foreign.json"
    assert run("learn", tmp / "a.bundle", "--learner", "mrc", "--out", foreign, "--allow-unsigned",
               "--sign-key", tmp / "keys" / "mallory.sign.key").exit_code == 0
    r = run("predict", foreign, tmp / "test.csv", "--out", tmp_path / "p.csv", "--trust", trust)
    assert r.exit_code == 1 and "unknown key" in r.stderr
    r = run("predict", model, tmp / "test.csv", "--out", tmp_path / "p.csv")
    assert r.exit_code == 1 and "no trust store was given" in r.stderr


def test_inspect_model_says_who_signed_it_and_from_which_bundles(signed):
    """The text of marg inspect MODEL: the signer, its key, the bundles (site and digest) it was
    learned from; 'verified' only with --trust."""
    from marg.protocols.bundle import load_bundle
    from marg.protocols.keys import key_id, load_verify_key

    tmp, model, trust = signed
    kid = key_id(load_verify_key(tmp / "keys" / "learner.sign.pub"))
    digest = load_bundle(tmp / "a.bundle").digest()
    r = run("inspect", model)
    assert r.exit_code == 0, r.output
    assert f"signed by 'learner' (key {kid[:12]}…)" in r.stdout
    assert f"learned from site 'north', bundle {digest[:16]}…" in r.stdout
    assert "signature verified" not in r.stdout and "not verified" in r.stdout
    r = run("inspect", model, "--trust", trust)
    assert r.exit_code == 0, r.output
    assert "signed by 'learner'" in r.stdout and "signature verified" in r.stdout and "not verified" not in r.stdout


def test_inspect_refuses_a_tampered_or_foreign_model_with_trust(signed, tmp_path):
    tmp, model, trust = signed
    d = json.loads(model.read_text())
    d["estimator"]["state"]["mu"] = [[-x for x in row] for row in d["estimator"]["state"]["mu"]]  # every prediction flips
    bad = tmp_path / "negated.json"
    bad.write_text(json.dumps(d))
    r = run("inspect", bad, "--trust", trust)
    assert r.exit_code == 1 and r.stderr.count("\n") == 1 and r.stderr.endswith("\n"), r.output
    assert "bad signature by 'learner'" in r.stderr and "altered" in r.stderr
    assert "signature verified" not in r.stdout
    r = run("inspect", bad)  # without a trust store it is described, never called verified
    assert r.exit_code == 0 and "signature verified" not in r.stdout and "not verified" in r.stdout
    # signed by mallory, whose key is not in the trust store; the record even claims 'learner'
    foreign = tmp_path / "foreign.json"
    assert run("learn", tmp / "a.bundle", "--learner", "mrc", "--out", foreign, "--allow-unsigned",
               "--sign-key", tmp / "keys" / "mallory.sign.key").exit_code == 0
    f = json.loads(foreign.read_text())
    f["signature"]["signer"] = "learner"
    claimed = tmp_path / "claims-learner.json"
    claimed.write_text(json.dumps(f))
    for m in (foreign, claimed):
        r = run("inspect", m, "--trust", trust)
        assert r.exit_code == 1 and r.stderr.count("\n") == 1 and r.stderr.endswith("\n"), r.output
        assert "signed by unknown key" in r.stderr and "not in trust store" in r.stderr, r.stderr
        assert "signature verified" not in r.stdout


def test_inspect_names_the_trust_stores_signer_not_the_claimed_one(signed, tmp_path):
    """The signer name in the signature record is not signed: with --trust, the verified signer is
    the trust store's name for the key, whatever the record claims."""
    tmp, model, trust = signed
    d = json.loads(model.read_text())
    d["signature"]["signer"] = "ethics-board"
    relabeled = tmp_path / "relabeled.json"
    relabeled.write_text(json.dumps(d))
    r = run("inspect", relabeled, "--trust", trust)
    assert r.exit_code == 0, r.output
    assert "signed by 'learner'" in r.stdout and "signature verified" in r.stdout, r.stdout
    assert "signed by 'ethics-board'" not in r.stdout
    assert json.loads(run("inspect", relabeled, "--trust", trust, "--json").stdout)["verified_signer"] == "learner"
