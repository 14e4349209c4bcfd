"""What the reports state is what the model file and the ledger hold, read back from the page.

Oracles are the model's own arrays (μ, R^k, the codebook) and the ledger's own entries, never
the report module's helpers: every per-class weight equals μ[y] − mean_c μ[c] (K > 2), the
R* trace equals the column-generation record, every released statistic of every entry is on
the ledger page with its shape and noise, a bad signature shows at its entry, a tampered or
malformed input is refused, user-controlled text stays text, and the same input gives the
same bytes.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from marg.cli.main import app
from marg.learners.model import Model
from marg.marginals.codebook import CategoricalFeature, Codebook, Label
from marg.marginals.synthetic import demo_codebook, generate, write_csv
from marg.protocols.ledger import Ledger
from tests.conftest import gene_study
from tests.test_reports import parse, values

runner = CliRunner()


def run(*args, home=None):
    """Run marg; ``home``: the site configuration folder ($MARG_HOME) of the site running it."""
    return runner.invoke(app, [str(a) for a in args], env={"MARG_HOME": str(home)} if home else None)


def table(root, key: str) -> list[list[str]]:
    """The body rows of the table ``data-table=key`` as their cells' text."""
    for t in root.iter("table"):
        if t.get("data-table") == key:
            body = t.find("tbody")
            return [["".join(td.itertext()) for td in tr] for tr in body]
    raise AssertionError(f"no table {key!r}")


# ------------------------------------------------------------------------------ model card
@pytest.fixture(scope="module")
def genes(tmp_path_factory):
    """A 3-class gene study through the CLI: export (exact), learn an MRC by column generation
    (one feature per iteration), sign the model; returns (dir, model, trust, data)."""
    tmp = tmp_path_factory.mktemp("genes")
    schema, data = gene_study(tmp, n=150, p=120)
    assert run("keys", "init", "--site", "learner", "--dir", tmp / "keys", "--role", "learner").exit_code == 0
    trust = tmp / "trust"
    trust.mkdir()
    (trust / "learner.sign.pub").write_bytes((tmp / "keys" / "learner.sign.pub").read_bytes())
    r = run("export", data, "--schema", schema, "--site", "lab", "--out", tmp / "genes.bundle",
            "--min-cell", "1", "--ledger", tmp / "ledger")
    assert r.exit_code == 0, r.output
    model = tmp / "cg.json"
    r = run("learn", tmp / "genes.bundle", "--learner", "mrc", "--allow-unsigned", "--s", "0.3", "--eps", "0",
            "--n-max", "1", "--k-max", "50", "--out", model, "--sign-key", tmp / "keys" / "learner.sign.key")
    assert r.exit_code == 0, r.output
    return tmp, model, trust, data


def test_card_states_the_cg_trace_and_every_per_class_weight(genes, tmp_path):
    tmp, model, trust, data = genes
    out = tmp_path / "card.html"
    r = run("report", model, "--out", out, "--trust", trust, "--data", data, "--schema", tmp / "codebook.json")
    assert r.exit_code == 0, r.output
    root = parse(out)
    v = values(root)
    m = Model.load(model)
    est = m.estimator
    # the certificate and the trace are the model's
    assert float(v["certificate"]) == m.worst_case_error == est.certificate_.value
    R = est.iterations_
    assert len(R) >= 2 and R[-1] < R[0]
    assert [float(v[f"trace:{k}"]) for k in range(len(R))] == R
    assert "trace" in {img.get("data-plot") for img in root.iter("img")}
    # per-class weights: μ[y] − mean over classes, read from the model's own μ and level names
    mu = np.asarray(est.mu_)[:, : est.map_.dim]
    centred = mu - mu.mean(axis=0)
    names = [f"{b.name} = {lv}" for b in est.map_.blocks for lv in m.codebook.feature(b.name).level_names]
    for k, c in enumerate(m.classes):
        key = f"weights:{c}"
        assert key in {img.get("data-plot") for img in root.iter("img")}
        shown = {row[0]: float(v[f"{key}:{row[0]}"]) for row in table(root, key)}
        assert shown, key
        for name, w in shown.items():
            assert w == pytest.approx(centred[k, names.index(name)], abs=1e-12)
        # the largest |weight| of the class is the first row
        assert abs(next(iter(shown.values()))) == pytest.approx(np.abs(centred[k]).max(), abs=1e-12)
        assert int(v[f"{key}:nonzero"]) == np.count_nonzero(centred[k])
    # the working set of column generation and the codebook
    assert int(v["n_active_features"]) == len(est.selected_features_)
    assert [row[0] for row in table(root, "codebook")] == m.codebook.feature_names[:60]
    assert all(int(v[f"levels:{f.name}"]) == f.n_levels for f in m.codebook.features[:60])
    # the evaluation is the CLI's
    ev = json.loads(run("evaluate", model, data, "--json", "--trust", trust, "--schema", tmp / "codebook.json").stdout)
    assert float(v["eval_error"]) == pytest.approx(ev["error"]) and int(v["eval_outside"]) == ev["outside"]
    assert [[int(v[f"confusion_{i}_{j}"]) for j in range(3)] for i in range(3)] == ev["confusion"]


def test_card_is_deterministic(genes, tmp_path):
    tmp, model, trust, data = genes
    pages = []
    for k in range(2):
        out = tmp_path / f"card{k}.html"
        assert run("report", model, "--out", out, "--trust", trust, "--data", data, "--schema", tmp / "codebook.json").exit_code == 0
        pages.append(out.read_bytes())
    assert pages[0] == pages[1]


@pytest.mark.parametrize("edit", ["certificate", "weights", "unsigned"])
def test_report_refuses_a_tampered_or_unsigned_model(genes, tmp_path, edit):
    tmp, model, trust, data = genes
    d = json.loads(model.read_text())
    if edit == "certificate":  # a better-looking certificate
        d["worst_case_error"] = 0.01
        d["estimator"]["state"]["worst_case_error"] = 0.01
    elif edit == "weights":
        d["estimator"]["state"]["mu"] = [[-x for x in row] for row in d["estimator"]["state"]["mu"]]
    else:
        d.pop("signature")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(d))
    out = tmp_path / "card.html"
    r = run("report", bad, "--out", out, "--trust", trust)
    assert r.exit_code == 1 and r.stderr.count("\n") == 1, r.output
    assert ("unsigned" if edit == "unsigned" else "bad signature") in r.stderr
    assert not out.exists()


def test_user_text_stays_text(tmp_path):
    """Feature, level and class names (the study's, so user-controlled) cannot inject markup."""
    from marg.learners.mrc import MRC
    from marg.marginals.summary import Summary
    from marg.reports.model_card import model_card

    from marg.learners.model import evaluate

    # markup, and a $ that matplotlib would read as mathtext (and fail to parse) in the charts
    evil = ("<script>alert(1)</script>", 'a"b&c', "<img src=x onerror=1>", r"$\frac{$")
    cb = Codebook(features=(CategoricalFeature("f<i>", evil), CategoricalFeature("g&h", ("0", "1"))),
                  label=Label("y</td>", ("<b>no</b>", "yes&$x^{$")))
    rng = np.random.default_rng(1)
    X = np.column_stack([rng.integers(0, 4, 200), rng.integers(0, 2, 200)]).astype(float)
    y = ((X[:, 0] == 1) ^ (rng.random(200) < 0.2)).astype(int)
    m = Model("mrc", cb, MRC(s=0.3).fit(Summary.from_rows(cb, X, y)), {})
    out = tmp_path / "card.html"
    out.write_text(model_card(m, evaluate(m, X, y), source="<x>.json"), encoding="utf-8")
    root = parse(out)
    assert {"weights", "confusion"} <= {img.get("data-plot") for img in root.iter("img")}
    assert all(img.get("onerror") is None for img in root.iter("img"))
    text = "".join(root.itertext())
    for s in (*evil, "f<i>", "g&h", "y</td>", "<b>no</b>", "yes&$x^{$", "<x>.json"):
        assert s in text
    assert [row[3] for row in table(root, "codebook")][0] == ", ".join(evil)


# ------------------------------------------------------------------------------ ledger page
@pytest.fixture(scope="module")
def site_ledger(tmp_path_factory):
    """A site with three signed releases under a cap: pure-ε Laplace first-order tables, a
    zCDP pair table, (ε, δ) Gaussian tables."""
    tmp = tmp_path_factory.mktemp("site")
    data = tmp / "site.csv"
    write_csv(data, generate(600, "north", seed=3))
    schema = tmp / "codebook.json"
    demo_codebook().save(schema)
    assert run("keys", "init", "--site", "north", "--dir", tmp / "keys").exit_code == 0
    led, home = tmp / "ledger", tmp / "home"
    key = tmp / "keys" / "north.sign.key"
    r = run("audit", "init", "--site", "north", "--key", key, "--ledger", led, "--epsilon", "10", "--delta", "1e-5", home=home)
    assert r.exit_code == 0, r.output
    common = ["--schema", schema, "--site", "north", "--ledger", led, "--key", key]
    for k, opts in enumerate((["--stats", "first", "--epsilon", "1", "--mechanism", "laplace"],
                              ["--stats", "pairs-only", "--pairs", "age_band:sex", "--rho", "0.05"],
                              ["--stats", "first", "--epsilon", "0.5"])):
        r = run("export", data, *common, "--out", tmp / f"b{k}.bundle", *opts, home=home)
        assert r.exit_code == 0, r.output
    return tmp, led


def _page(led, out, *extra):
    r = run("audit", "show", "--ledger", led, "--html", out, *extra)
    assert r.exit_code == 0, r.output
    return parse(out)


def test_ledger_page_lists_every_released_statistic(site_ledger, tmp_path):
    tmp, led = site_ledger
    root = _page(led, tmp_path / "ledger.html")
    v = values(root)
    entries = [x for x in Ledger(led).entries() if x.get("kind", "release") == "release"]  # not cap entries
    assert len(entries) == 3 and int(v["n_entries"]) == 3 and v["integrity"] == "ok"
    for x in entries:
        seq = x["seq"]
        assert float(v[f"cumulative_epsilon:{seq}"]) == pytest.approx(float(x["cumulative"]["epsilon"]))
        assert float(v[f"rho:{seq}"]) == pytest.approx(float(x["cost"]["rho"]))
        rows = table(root, f"release:{seq}")
        assert [r[0] for r in rows] == [st["name"] for st in x["statistics"]]
        for row, st in zip(rows, x["statistics"]):
            assert int(v[f"cells:{seq}:{st['name']}"]) == int(np.prod(st["shape"]))
            assert float(v[f"std:{seq}:{st['name']}"]) == pytest.approx(float(st["std"]))
            assert row[2] == " × ".join(st["clique"]) and row[4] == st["mechanism"]
        assert v[f"status:{seq}"] == "ok"
    mechs = [x["mechanism"] for x in entries]
    assert mechs[0] == "laplace" and mechs[1] == "gaussian"
    plots = {img.get("data-plot") for img in root.iter("img")}
    assert {"spend", "spend_rho"} <= plots  # zCDP releases: ρ plotted beside ε


def test_ledger_page_shows_a_bad_signature_at_its_entry(site_ledger, tmp_path):
    tmp, led = site_ledger
    copy = tmp_path / "ledger"
    copy.mkdir()
    for f in led.rglob("*"):
        if f.is_file():
            dest = copy / f.relative_to(led)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(f.read_bytes())
    path = copy / "ledger.jsonl"
    lines = path.read_bytes().split(b"\n")
    entries = [json.loads(ln) for ln in lines if ln]
    k = [i for i, x in enumerate(entries) if x.get("kind", "release") == "release"][1]  # the second release
    entries[k]["time"] = entries[k]["time"].replace("20", "19", 1)  # backdated: still canonical JSON, signature broken
    from marg._util import canonical_json

    lines[k] = canonical_json(entries[k])
    path.write_bytes(b"\n".join(lines))
    v = values(_page(copy, tmp_path / "bad.html", "--key", tmp / "keys" / "north.sign.pub"))  # the site's key, not the folder's copy
    assert v["integrity"] == "failed"
    bad = entries[k]["seq"]
    assert [v[f"status:{x['seq']}"] for x in entries] == [
        "ok" if x["seq"] < bad else "failed" if x["seq"] == bad else "unverified" for x in entries]
    assert bad < entries[-1]["seq"]


def test_a_malformed_ledger_is_refused_and_no_page_written(site_ledger, tmp_path):
    tmp, led = site_ledger
    bad = tmp_path / "ledger"
    bad.mkdir()
    data = (led / "ledger.jsonl").read_bytes()
    (bad / "ledger.jsonl").write_bytes(data.replace(b'"seq":2', b'"seq":2 ', 1))  # not canonical any more
    out = tmp_path / "page.html"
    r = run("audit", "show", "--ledger", bad, "--html", out)
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "line 2" in r.stderr, r.output
    assert not out.exists()


def test_ledger_page_is_deterministic(site_ledger, tmp_path):
    tmp, led = site_ledger
    a, b = tmp_path / "a.html", tmp_path / "b.html"
    _page(led, a)
    _page(led, b)
    assert a.read_bytes() == b.read_bytes()
