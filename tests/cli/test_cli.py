"""CLI tests through typer's CliRunner: every command, including error exits."""

import json

import numpy as np
import pytest

from marg.marginals.data.codebook import Codebook
from marg.marginals.synthetic import demo_codebook, generate, write_csv
from tests.helpers.console import run


@pytest.fixture
def site(tmp_path):
    cols = generate(400, "north", seed=1)
    data = tmp_path / "site.csv"
    write_csv(data, cols)
    schema = tmp_path / "codebook.json"
    demo_codebook().save(schema)
    return tmp_path, data, schema


def test_schema_init(tmp_path, site):
    _, data, _ = site
    out = tmp_path / "draft.json"
    r = run("schema", "init", data, "--label", "cv_event", "--out", out, "--exclude", "patient_id")
    assert r.exit_code == 0, r.output
    assert "DRAFT" in r.stderr
    cb = Codebook.load(out)
    assert cb.draft and cb.label.classes == ("no", "yes")
    assert cb.feature("smoking").missing == "(missing)"
    assert "patient_id" not in cb.feature_names


def test_schema_init_numeric_binning(tmp_path):
    data = tmp_path / "d.csv"
    data.write_text("age,grp,y\n" + "".join(f"{20 + i % 60},{'ab'[i % 2]},{i % 2}\n" for i in range(200)))
    out = tmp_path / "cb.json"
    r = run("schema", "init", data, "--label", "y", "--out", out, "--bins", "3")
    assert r.exit_code == 0, r.output
    f = Codebook.load(out).feature("age")
    assert f.kind == "numeric" and len(f.edges) == 2


def test_schema_init_bad_label(tmp_path, site):
    _, data, _ = site
    r = run("schema", "init", data, "--label", "nope", "--out", tmp_path / "x.json")
    assert r.exit_code == 2
    assert r.stderr.strip().count("\n") == 0 and "'nope'" in r.stderr


@pytest.mark.parametrize("stats, extra, n_tables", [("first", [], 9), ("all", [], 9 + 28),
                                                    ("pairs", ["--pairs", "sex:age_band,glucose:bmi_band"], 11)])
def test_export_and_inspect(site, stats, extra, n_tables):
    tmp, data, schema = site
    out = tmp / "b.bundle"
    r = run("export", data, "--schema", schema, "--site", "north", "--out", out, "--stats", stats, "--min-cell", "1",
            *extra)
    assert r.exit_code == 0, r.output
    assert f"{n_tables} tables" in r.stdout
    r = run("inspect", out, "--json")
    assert r.exit_code == 0
    d = json.loads(r.stdout)
    assert d["site"] == "north" and d["n_statistics"] == n_tables and d["n_rows"] == 400
    r = run("inspect", out)
    assert r.exit_code == 0 and "exact counts" in r.stdout and "N[age_band,cv_event]" in r.stdout


def test_min_cell_refuse_and_suppress(site):
    tmp, data, schema = site
    out = tmp / "b.bundle"
    r = run("export", data, "--schema", schema, "--site", "north", "--out", out, "--stats", "all", "--ledger",
            tmp / "led")
    assert r.exit_code == 1 and "min-cell" in r.stderr and r.stderr.count("\n") == 1
    assert not out.exists()
    assert not (tmp / "led" / "ledger.jsonl").exists() or (tmp / "led" / "ledger.jsonl").read_text() == ""
    # pair tables: suppression is audited for first-order releases only (issue 25)
    r = run("export", data, "--schema", schema, "--site", "north", "--out", out, "--stats", "all",
            "--min-cell-policy", "suppress", "--ledger", tmp / "led")
    assert r.exit_code == 1 and "first-order releases only" in r.stderr and not out.exists()
    r = run("export", data, "--schema", schema, "--site", "north", "--out", out, "--stats", "first",
            "--min-cell-policy", "suppress", "--min-cell", "20", "--ledger", tmp / "led")
    assert r.exit_code == 0, r.output
    assert "small cells suppressed" in r.stdout
    from marg.protocols.bundle import load_bundle

    for t in load_bundle(out).tables:
        c = t.counts
        assert not np.any((c > 0) & (c < 20)), t.name


def test_export_bad_row_writes_nothing(site):
    tmp, data, schema = site
    text = data.read_text().splitlines()
    text[-1] = text[-1].replace("yes", "maybe").replace(",no", ",maybe")
    data.write_text("\n".join(text) + "\n")
    out = tmp / "b.bundle"
    r = run("export", data, "--schema", schema, "--site", "north", "--out", out)
    assert r.exit_code == 2
    assert "row 400" in r.stderr and r.stderr.count("\n") == 1
    assert not out.exists()
    assert not list(tmp.glob(".b.bundle*"))


@pytest.mark.parametrize(
    "args, code, needle",
    [
        (["--stats", "triples"], 2, "unknown --stats 'triples'"),
        (["--stats", "pairs", "--pairs", "sex:nope"], 2, "unknown feature 'nope'"),
        (["--stats", "first", "--pairs", "sex:glucose"], 2, "--pairs needs --stats pairs"),
    ],
)
def test_export_option_errors(site, args, code, needle):
    tmp, data, schema = site
    r = run("export", data, "--schema", schema, "--site", "s", "--out", tmp / "b.bundle", *args)
    assert r.exit_code == code
    assert needle in r.stderr


def test_export_schema_mismatch(site):
    tmp, data, schema = site
    d = json.loads(schema.read_text())
    d["features"][0]["name"] = "age"
    schema.write_text(json.dumps(d))
    r = run("export", data, "--schema", schema, "--site", "s", "--out", tmp / "b.bundle")
    assert r.exit_code == 2 and "column 'age' is absent" in r.stderr


def test_inspect_errors(tmp_path):
    bad = tmp_path / "bad.bundle"
    bad.write_bytes(b"hello world, not a bundle")
    r = run("inspect", bad)
    assert r.exit_code == 2 and "not a marg bundle" in r.stderr
    r = run("inspect", tmp_path / "missing.bundle")
    assert r.exit_code == 2 and "not found" in r.stderr


def test_debug_shows_traceback(tmp_path, monkeypatch):
    monkeypatch.setenv("MARG_DEBUG", "1")
    r = run("inspect", tmp_path / "missing.bundle")
    assert r.exit_code != 0 and r.exception is not None


def test_demo(tmp_path):
    r = run("demo", "--per-site", "--dir", tmp_path / "demo")
    assert r.exit_code == 0, r.output
    assert "opens and verifies 3 bundles" in r.stdout
    assert r.stdout.count("chain and signatures verified") == 3
    assert r.stdout.count("1 release(s) to 'learner'") == 3  # one export each; the cap entry is not a release
    # Running it again over its own folder replaces the earlier demo.
    assert run("demo", "--per-site", "--dir", tmp_path / "demo").exit_code == 0
    # It refuses to overwrite a folder that is not a demo.
    other = tmp_path / "mine"
    other.mkdir()
    (other / "precious.txt").write_text("x")
    r = run("demo", "--dir", other)
    assert r.exit_code == 2 and "not a marg demo folder" in r.stderr
    assert (other / "precious.txt").exists()


def test_demo_story_numbers(tmp_path):
    from marg.demo import run_demo

    res = run_demo(tmp_path / "d", echo=lambda s: None)
    # Pooled held-out error is below each certificate; the default choice is not clearly worse than MRC.
    # (Not "always better": the DP noise is drawn afresh each run and the choice is among candidates
    # whose estimates the noise cannot tell apart — issue 38's rule; measured: auto 0.183 (nb) against
    # MRC 0.227 on two runs, and once auto 0.227 against MRC 0.200.)
    for name, m in res["models"].items():
        assert res["errors"]["all"][name] <= m.worst_case_error, name
    assert res["errors"]["all"]["auto"] <= res["errors"]["all"]["mrc"] + 0.05
    assert all(rep.ok for rep in res["audits"].values())
    # n is estimated from noisy tables: the rows counted, city's visits bounded to 3 per patient (its privacy unit)
    assert res["rows"]["north"] == 4500 and 6000 < res["rows"]["city"] <= 3 * 6000
    assert abs(res["summary"].n - sum(res["rows"].values())) < 200
    card = res["reports"]["model_card"].read_text()  # the card states each site's privacy unit and its bound
    assert "city: patient_id, at most 3 rows each" in card and "north: the row (each row a different person)" in card
