"""Signed models (issue 18): the learner signs, sites verify; tampered, unsigned, foreign models are refused."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from marg.cli.main import app
from marg.errors import RefusedError
from marg.learners.model import Model
from marg.marginals.encoding import encode_file
from marg.marginals.synthetic import SITES, demo_codebook, generate, write_csv
from marg.protocols.model_signing import model_signing_bytes, read_model_dict, verify_model_dict

runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    """Two sites' signed bundles, a signed MRC model, the site's trust store of learner keys."""
    tmp = tmp_path_factory.mktemp("signed_models")
    schema = tmp / "codebook.json"
    demo_codebook().save(schema)
    for who in ("north", "south", "learner", "mallory"):
        assert run("keys", "init", "--site", who, "--dir", tmp / "keys").exit_code == 0
    trust = tmp / "trust"          # the learner's trust store of site keys
    site_trust = tmp / "site-trust"  # a site's trust store of learner keys
    for site in ("north", "south"):
        assert run("keys", "trust", tmp / "keys" / f"{site}.sign.pub", "--trust", trust).exit_code == 0
    assert run("keys", "trust", tmp / "keys" / "learner.sign.pub", "--trust", site_trust).exit_code == 0
    bundles = []
    for k, prof in enumerate(SITES[:2]):
        cols = generate(1500, prof, seed=300 + k)
        write_csv(tmp / f"{prof.name}.csv", cols, slice(0, 1200))
        write_csv(tmp / f"{prof.name}_test.csv", cols, slice(1200, 1500))
        b = tmp / f"{prof.name}.bundle"
        r = run("export", tmp / f"{prof.name}.csv", "--schema", schema, "--site", prof.name, "--out", b,
                "--min-cell", "1", "--key", tmp / "keys" / f"{prof.name}.sign.key", "--no-ledger")
        assert r.exit_code == 0, r.output
        bundles.append(b)
    model = tmp / "mrc.json"
    r = run("learn", *bundles, "--learner", "mrc", "--out", model, "--trust", trust,
            "--sign-key", tmp / "keys" / "learner.sign.key")
    assert r.exit_code == 0, r.output
    assert "signed by 'learner'" in r.stdout
    return tmp, schema, site_trust, bundles, model


def use(tmp, model, schema, trust, *extra):
    return run("evaluate", model, tmp / "north_test.csv", "--json", "--schema", schema, "--trust", trust, *extra)


def test_signed_model_verifies_and_binds_its_bundles(signed):
    tmp, schema, trust, bundles, model = signed
    r = use(tmp, model, schema, trust)
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["signer"] == "learner"
    d = read_model_dict(model)
    from marg.protocols.bundle import load_bundle

    assert [b["digest"] for b in d["bundles"]] == [load_bundle(p).digest() for p in bundles]
    assert [b["site"] for b in d["bundles"]] == ["north", "south"]
    r = run("inspect", model, "--trust", trust, "--json")
    assert r.exit_code == 0, r.output
    info = json.loads(r.stdout)
    assert info["signer"] == "learner" and info["verified"] and info["bundles"] == d["bundles"]
    r = run("inspect", model)
    assert r.exit_code == 0 and "not verified" in r.stdout and load_bundle(bundles[0]).digest() in r.stdout


def _tampered(tmp, model, name, edit):
    d = json.loads(model.read_text())
    edit(d)
    out = tmp / name
    out.write_text(json.dumps(d, indent=1))
    return out


def test_negated_coefficients_are_refused(signed):
    """The attack of issue 18: negating the coefficients flipped every prediction, certificate unchanged."""
    tmp, schema, trust, bundles, model = signed
    d = json.loads(model.read_text())
    mu = np.asarray(d["estimator"]["state"]["mu"], dtype=float)
    assert np.any(mu != 0)

    def negate(d):
        d["estimator"]["state"]["mu"] = (-np.asarray(d["estimator"]["state"]["mu"], dtype=float)).tolist()

    bad = _tampered(tmp, model, "negated.json", negate)
    # The attack works on the bare file: predictions change.
    X = encode_file(tmp / "north_test.csv", demo_codebook(), with_label=False).X
    assert np.any(Model.load(bad).predict(X) != Model.load(model).predict(X))
    for cmd in ("evaluate", "predict"):
        extra = ["--out", tmp / "p.csv"] if cmd == "predict" else []
        r = run(cmd, bad, tmp / "north_test.csv", "--schema", schema, "--trust", trust, *extra)
        assert r.exit_code == 1 and "bad signature" in r.stderr and "negated.json" in r.stderr
        assert r.stderr.count("\n") == 1
    assert not (tmp / "p.csv").exists()


@pytest.mark.parametrize("edit, words", [
    (lambda d: d.__setitem__("worst_case_error", 0.01), "bad signature"),
    (lambda d: d["bundles"].pop(), "bad signature"),
    (lambda d: d.__setitem__("round", "f" * 32), "bad signature"),
    (lambda d: d["signature"].__setitem__("signer", "other"), "bad signature|signer mismatch"),
    (lambda d: d["signature"].__setitem__("value", "AAAA"), "malformed signature value"),
    (lambda d: d.__setitem__("signature", None), "unsigned model"),
    (lambda d: d["signature"].__setitem__("key_id", "0" * 64), "unknown key"),
])
def test_edited_model_is_refused(signed, edit, words):
    tmp, schema, trust, bundles, model = signed
    bad = _tampered(tmp, model, "edited.json", edit)
    r = use(tmp, bad, schema, trust)
    assert r.exit_code == 1, r.output
    assert __import__("re").search(words, r.stderr) and r.stderr.count("\n") == 1


def test_every_byte_flip_of_the_signed_content_is_caught(signed):
    """Flip one bit in each of 300 random places of the signed bytes: never accepted."""
    tmp, schema, trust, bundles, model = signed
    d = read_model_dict(model)
    from marg.protocols.keys import TrustStore

    store = TrustStore(trust)
    assert verify_model_dict(d, store).verified
    raw = model.read_bytes()
    rng = np.random.default_rng(0)
    caught = 0
    for pos in rng.integers(0, len(raw), 300):
        b = bytearray(raw)
        b[pos] ^= 1 << int(rng.integers(0, 7))
        try:
            dd = json.loads(bytes(b).decode("utf-8"))
            if not isinstance(dd, dict):
                raise ValueError
        except (ValueError, UnicodeDecodeError):
            caught += 1  # no longer a model file at all
            continue
        if model_signing_bytes(dd) == model_signing_bytes(d) and dd.get("signature") == d.get("signature"):
            caught += 1  # the flip hit whitespace: the same model
            continue
        with pytest.raises(RefusedError):
            verify_model_dict(dd, store)
        caught += 1
    assert caught == 300


def test_foreign_key_and_foreign_codebook_are_refused(signed):
    tmp, schema, trust, bundles, model = signed
    # A model signed by a key the site does not trust.
    m2 = tmp / "mallory.json"
    r = run("learn", *bundles, "--learner", "nb", "--out", m2, "--trust", tmp / "trust",
            "--sign-key", tmp / "keys" / "mallory.sign.key")
    assert r.exit_code == 0, r.output
    r = use(tmp, m2, schema, trust)
    assert r.exit_code == 1 and "unknown key" in r.stderr
    # A site whose codebook differs (same columns, one level renamed).
    other = json.loads(schema.read_text())
    other["features"][1]["levels"] = list(reversed(other["features"][1]["levels"]))
    (tmp / "other.json").write_text(json.dumps(other))
    r = use(tmp, model, tmp / "other.json", trust)
    assert r.exit_code == 2 and "differs from the model's" in r.stderr
    # Without --schema a signed model is not applied (it could be a foreign codebook's).
    r = run("evaluate", model, tmp / "north_test.csv", "--trust", trust)
    assert r.exit_code == 2 and "--schema" in r.stderr


def test_unsigned_model_needs_allow_unsigned(signed):
    tmp, schema, trust, bundles, model = signed
    m = tmp / "unsigned.json"
    r = run("learn", *bundles, "--learner", "nb", "--out", m, "--trust", tmp / "trust")
    assert r.exit_code == 0 and "unsigned" in r.stderr
    r = use(tmp, m, schema, trust)
    assert r.exit_code == 1 and "unsigned model" in r.stderr
    assert use(tmp, m, schema, trust, "--allow-unsigned").exit_code == 0


def test_wrong_sign_key_fails_before_the_fit(signed, tmp_path):
    tmp, schema, trust, bundles, model = signed
    out = tmp_path / "m.json"
    r = run("learn", *bundles, "--learner", "mrc", "--out", out, "--trust", tmp / "trust",
            "--sign-key", tmp / "keys" / "learner.seal.key")
    assert r.exit_code == 2 and "learner.seal.key" in r.stderr and not out.exists()
