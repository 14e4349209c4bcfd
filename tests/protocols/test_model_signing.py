"""Signed models: a site predicts only with a model its learner signed, unaltered."""

from __future__ import annotations

import json

import pytest

from marg.marginals.synthetic import SITES, demo_codebook, generate, write_csv
from tests.helpers.console import run


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
        assert run("keys", "init", "--site", who, "--dir", tmp / "keys", "--role", "learner").exit_code == 0
    trust = tmp / "trust"
    trust.mkdir()
    (trust / "learner.sign.pub").write_bytes((tmp / "keys" / "learner.sign.pub").read_bytes())
    model = tmp / "model.json"
    r = run("learn", b, "--learner", "mrc", "--out", model, "--allow-unsigned", "--sign-key",
            tmp / "keys" / "learner.sign.key", "--json")
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
    r = run("predict", model, tmp / "test.csv", "--out", tmp / "p.csv", "--trust", trust, "--schema",
            tmp / "other.json")
    assert r.exit_code == 2 and "differs from the model's" in r.stderr and not (tmp / "p.csv").exists()
    r = run("report", model, "--out", tmp / "card.html", "--trust", trust)
    assert (r.exit_code == 0 and "Signed by" in (tmp / "card.html").read_text()
            and "learner" in (tmp / "card.html").read_text())
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
    # every prediction flips
    d["estimator"]["state"]["mu"] = [[-x for x in row] for row in d["estimator"]["state"]["mu"]]
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


def test_a_model_signed_by_a_site_key_is_refused(signed, tmp_path):
    """Issue 25: keys have roles. The secure-aggregation workflow puts site keys in the trust store;
    a model signed by one of them is refused (a site's key), and so is a key whose trust-store
    file declares no role (an older marg) until the verifier marks it a learner's."""
    tmp, model, trust = signed
    assert run("keys", "init", "--site", "north", "--dir", tmp_path / "keys").exit_code == 0  # role site (default)
    store = tmp_path / "trust"
    for pub, role in ((tmp / "keys" / "learner.sign.pub", "learner"), (tmp_path / "keys" / "north.sign.pub", "site")):
        assert run("keys", "trust", pub, "--trust", store, "--role", role).exit_code == 0
    forged = tmp_path / "forged.json"
    assert run("learn", tmp / "a.bundle", "--learner", "mrc", "--out", forged, "--allow-unsigned",
               "--sign-key", tmp_path / "keys" / "north.sign.key").exit_code == 0
    r = run("predict", forged, tmp / "test.csv", "--out", tmp_path / "p.csv", "--trust", store, "--schema",
            tmp / "codebook.json")
    assert r.exit_code == 1 and "signed by 'north'" in r.stderr and ("a site's key: a learner's signature is "
                                                                     "needed") in r.stderr
    assert r.stderr.count("\n") == 1 and not (tmp_path / "p.csv").exists()
    ok = run("predict", model, tmp / "test.csv", "--out", tmp_path / "p.csv", "--trust", store, "--schema",
             tmp / "codebook.json")
    assert ok.exit_code == 0, ok.output
    # a learner key without a role line (made by an older marg): refused for models, until marked
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    pem = (tmp / "keys" / "learner.sign.pub").read_bytes().split(b"\n", 1)[1]
    assert pem.startswith(b"-----BEGIN PUBLIC KEY")
    (legacy / "learner.sign.pub").write_bytes(pem)
    r = run("predict", model, tmp / "test.csv", "--out", tmp_path / "q.csv", "--trust", legacy, "--schema",
            tmp / "codebook.json")
    assert r.exit_code == 1 and "declares no role" in r.stderr and "--role learner" in r.stderr
    (legacy / "learner.sign.pub").unlink()
    (tmp_path / "old.sign.pub").write_bytes(pem)
    assert run("keys", "trust", tmp_path / "old.sign.pub", "--site", "learner", "--trust", legacy, "--role",
               "learner").exit_code == 0
    assert run("predict", model, tmp / "test.csv", "--out", tmp_path / "q.csv", "--trust", legacy,
               "--schema", tmp / "codebook.json").exit_code == 0


def test_the_model_file_swapped_after_verification_is_not_used(signed, tmp_path, monkeypatch):
    """Issue 25: the model was read once to verify and again to load; swapping the file in between
    gave flipped predictions. A hook swaps the file for a negated model right after the first read
    of its path: the predictions are still the verified model's, byte for byte."""
    import io
    import pathlib

    tmp, model, trust = signed
    work = tmp_path / "model.json"
    work.write_bytes(model.read_bytes())
    args = ["--trust", trust, "--schema", tmp / "codebook.json"]
    assert run("predict", work, tmp / "test.csv", "--out", tmp_path / "want.csv", *args).exit_code == 0
    d = json.loads(model.read_text())
    d["estimator"]["state"]["mu"] = [[-x for x in row] for row in d["estimator"]["state"]["mu"]]
    negated = json.dumps(d).encode()
    original = pathlib.Path.open
    swapped = []

    def open_then_swap(self, mode="r", *a, **k):
        fh = original(self, mode, *a, **k)
        if pathlib.Path(self) == work and "r" in mode and not swapped:  # the first read of the model's path
            data = fh.read()
            fh.close()
            work.write_bytes(negated)  # every later read of the path sees the attacker's model
            swapped.append(True)
            return io.BytesIO(data) if "b" in mode else io.StringIO(data)
        return fh

    monkeypatch.setattr(pathlib.Path, "open", open_then_swap)
    r = run("predict", work, tmp / "test.csv", "--out", tmp_path / "got.csv", *args)
    assert swapped and r.exit_code == 0, r.output
    assert (tmp_path / "got.csv").read_bytes() == (tmp_path / "want.csv").read_bytes()


def test_a_signed_model_holding_nan_is_refused_not_an_internal_error(signed, tmp_path):
    """Issue 25: NaN in a signed model was an internal error; NaN has no canonical JSON, so marg never
    signed it: the file was altered (exit 1, one line). Signing such a file is a one-line error."""
    from marg.errors import InputError
    from marg.protocols.keys import load_signing_key
    from marg.protocols.model_signing import sign_model_file

    tmp, model, trust = signed
    d = json.loads(model.read_text())
    d["worst_case_error"] = float("nan")
    bad = tmp_path / "nan.json"
    bad.write_text(json.dumps(d))
    assert "NaN" in bad.read_text()
    r = run("predict", bad, tmp / "test.csv", "--out", tmp_path / "p.csv", "--trust", trust, "--schema",
            tmp / "codebook.json")
    assert r.exit_code == 1 and "non-finite number" in r.stderr and r.stderr.count("\n") == 1, r.output
    with pytest.raises(InputError, match="non-finite number"):
        sign_model_file(bad, load_signing_key(tmp / "keys" / "learner.sign.key"), "learner")
