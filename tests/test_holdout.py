"""The holdout protocol: rows left out of the export, the model's confusion matrix on them, the certificate."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import beta
from typer.testing import CliRunner

from marg.cli.main import app
from marg.learners.model import Model
from marg.marginals.encoding import encode_file
from marg.marginals.holdout import Holdout, recall
from marg.marginals.synthetic import SITES, demo_codebook, generate, write_csv

runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_split_is_a_function_of_the_row_number_and_the_seed():
    h = Holdout(0.3, 12345)
    whole = h.mask(1, 10_000)
    parts = np.concatenate([h.mask(1, 3_333), h.mask(3_334, 5_000), h.mask(8_334, 1_667)])
    assert np.array_equal(whole, parts)  # chunking does not matter
    assert abs(whole.mean() - 0.3) < 0.02
    assert not np.array_equal(whole, Holdout(0.3, 12346).mask(1, 10_000))
    for bad in (0.0, 1.0, -0.1):
        with pytest.raises(Exception, match="--holdout must be a fraction in"):
            Holdout(bad, 1)


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("holdout")
    schema = tmp / "codebook.json"
    demo_codebook().save(schema)
    out = {}
    for k, prof in enumerate(SITES):
        cols = generate(1500, prof, seed=300 + k)
        write_csv(tmp / f"{prof.name}.csv", cols, slice(0, 1500))
        out[prof.name] = tmp / f"{prof.name}.csv"
    return tmp, schema, out


@pytest.mark.parametrize("dp", [False, True])
def test_holdout_round_trip_certifies_the_models_error_on_the_held_out_rows(sites, dp):
    tmp, schema, data = sites
    tag = "dp" if dp else "exact"
    priv = ["--epsilon", "2"] if dp else ["--stats", "all", "--min-cell", "1"]
    bundles = []
    for site, f in data.items():
        b = tmp / f"{site}-{tag}.bundle"
        r = run("export", f, "--schema", schema, "--site", site, "--out", b, "--holdout", "0.25",
                "--ledger", tmp / f"{site}-{tag}-ledger", *priv)
        assert r.exit_code == 0, r.output
        bundles.append(b)
    model = tmp / f"model-{tag}.json"
    r = run("learn", *bundles, "--out", model, "--allow-unsigned", "--learner", "mrc")
    assert r.exit_code == 0, r.output
    m = Model.load(model)
    evals, errors, held = [], 0, 0
    for site, f in data.items():
        ev = tmp / f"{site}-{tag}.eval"
        r = run("export", f, "--schema", schema, "--site", site, "--out", ev, "--evaluate", model,
                "--ledger", tmp / f"{site}-{tag}-ledger", *([] if not dp else ["--epsilon", "0.5"]),
                *(["--min-cell", "1"] if not dp else []))
        assert r.exit_code == 0, r.output
        evals.append(ev)
        # the held-out rows, recomputed independently: the training release never saw them
        spec, n_rows, n_held = recall(tmp / f"{site}-{tag}-ledger", m.codebook.fingerprint, site)
        enc = encode_file(f, m.codebook)
        mask = spec.mask(1, enc.n)
        assert (n_rows, n_held) == (enc.n, int(mask.sum()))
        errors += int(np.sum(m.predict(enc.X[mask]) != enc.y[mask]))
        held += int(mask.sum())
    cert = tmp / f"cert-{tag}.json"
    r = run("certify", model, *evals, "--out", cert, "--allow-unsigned", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    back = Model.load(cert)
    assert back.estimator.certificate_.kind == "holdout" and back.worst_case_error == pytest.approx(d["worst_case_error"])
    if not dp:  # exact releases: the released counts are the true ones, the bound the one-sided Clopper-Pearson limit
        assert (d["errors"], d["rows"]) == (errors, held)
        assert d["worst_case_error"] == pytest.approx(beta.ppf(1 - 0.05, errors + 1, held - errors), rel=1e-12)
    assert d["worst_case_error"] >= errors / held
    # the training tables exclude the held-out rows
    from marg.protocols.bundle import Bundle

    heads = [Bundle.from_bytes(b.read_bytes()).header for b in bundles]
    assert all(h["holdout"] == {"fraction": 0.25} for h in heads)
    if not dp:
        assert sum(h["n_rows"] for h in heads) == 3 * 1500 - held


def test_holdout_refusals(sites, tmp_path):
    tmp, schema, data = sites
    f = data["north"]
    led = tmp_path / "ledger"
    r = run("export", f, "--schema", schema, "--site", "north", "--out", tmp_path / "a.bundle", "--holdout", "0.2",
            "--no-ledger", "--stats", "first", "--min-cell", "1")
    assert r.exit_code == 2 and "--holdout needs the site's ledger folder" in r.stderr
    assert not (tmp_path / "a.bundle").exists()
    r = run("export", f, "--schema", schema, "--site", "north", "--out", tmp_path / "a.bundle", "--holdout", "1.5",
            "--ledger", led, "--min-cell", "1")
    assert r.exit_code == 2 and "--holdout must be a fraction in (0, 1), got 1.5" in r.stderr
    r = run("export", f, "--schema", schema, "--site", "north", "--out", tmp_path / "a.bundle", "--holdout", "0.2",
            "--ledger", led, "--min-cell", "1")
    assert r.exit_code == 0, r.output
    r = run("learn", tmp_path / "a.bundle", "--out", tmp_path / "m.json", "--allow-unsigned", "--learner", "nb")
    assert r.exit_code == 0, r.output
    # the data changed since the export: its held-out rows are unknown
    lines = f.read_text().splitlines()
    changed = tmp_path / "changed.csv"
    changed.write_text("\n".join(lines[:-10]) + "\n")
    r = run("export", changed, "--schema", schema, "--site", "north", "--out", tmp_path / "e.eval", "--evaluate",
            tmp_path / "m.json", "--ledger", led, "--min-cell", "1")
    assert r.exit_code == 2 and "the data changed since the export" in r.stderr and not (tmp_path / "e.eval").exists()
    # another site has no split recorded here
    r = run("export", f, "--schema", schema, "--site", "south", "--out", tmp_path / "e.eval", "--evaluate",
            tmp_path / "m.json", "--ledger", led, "--min-cell", "1")
    assert r.exit_code == 2 and "no holdout recorded for site 'south'" in r.stderr
    r = run("export", f, "--schema", schema, "--site", "north", "--out", tmp_path / "e.eval", "--evaluate",
            tmp_path / "m.json", "--ledger", led, "--min-cell", "1")
    assert r.exit_code == 0, r.output
    # certify refuses an evaluation of another model file
    other = tmp_path / "m2.json"
    other.write_bytes((tmp_path / "m.json").read_bytes() + b"\n")
    r = run("certify", other, tmp_path / "e.eval", "--out", tmp_path / "c.json", "--allow-unsigned")
    assert r.exit_code == 2 and "evaluates model" in r.stderr and not (tmp_path / "c.json").exists()
    # a training bundle is not an evaluation
    r = run("certify", tmp_path / "m.json", tmp_path / "a.bundle", "--out", tmp_path / "c.json", "--allow-unsigned")
    assert r.exit_code == 2 and "not an evaluation release" in r.stderr
