"""The HTML reports: well-formed, self-contained, with the plots, stating the model's and the ledger's numbers."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from marg.learners.estimator.model import Model
from marg.protocols.ledger import Ledger
from tests.helpers.console import run
from tests.helpers.reports import parse, values


def test_model_card_states_the_models_numbers(demo, tmp_path):
    model_path = demo["workdir"] / "learner" / "auto.model.json"
    test_rows = demo["files"]["north"]["test"]
    out = tmp_path / "card.html"
    trust = demo["workdir"] / "learner" / "trust-models"
    trust.mkdir(exist_ok=True)
    (trust / "learner.sign.pub").write_bytes((demo["workdir"] / "learner" / "learner.sign.pub").read_bytes())
    r = run("report", model_path, "--out", out, "--data", test_rows, "--trust", trust, "--schema",
            demo["workdir"] / "codebook.json")
    assert r.exit_code == 0, r.output
    root = parse(out)
    v = values(root)
    m = Model.load(model_path)
    assert float(v["certificate"]) == m.worst_case_error and v["certificate_kind"] == m.estimator.certificate_.kind
    assert float(v["n"]) == pytest.approx(m.info["n"])
    ev = json.loads(run("evaluate", model_path, test_rows, "--json", "--trust", trust,
                        "--schema", demo["workdir"] / "codebook.json").stdout)
    assert float(v["eval_error"]) == pytest.approx(ev["error"]) and int(v["eval_n"]) == ev["n"]
    K = len(m.classes)
    assert [[int(v[f"confusion_{i}_{j}"]) for j in range(K)] for i in range(K)] == ev["confusion"]
    plots = {img.get("data-plot") for img in root.iter("img")}
    assert {"confusion", "weights"} <= plots
    from marg.protocols.aggregate import composed_privacy

    for site in m.info["sites"]:  # the site's ledger's number (at its cap's δ), not the release's own ε at its δ
        records = [r["privacy"] for r in site.get("rounds") or []] or [site["privacy"]]
        assert v[f"site_epsilon:{site['site']}"] == repr(float(composed_privacy(records)["epsilon"]))
    # parameters as the model file has them
    params = next(t for t in root.iter("table") if t.get("data-table") == "params")
    rows = {tr[0].text: tr[1].text for tr in params.find("tbody")}
    assert rows["Confidence of the certificate"] == f"{m.estimator.get_params()['coverage']:.0%}"


def test_model_card_escapes_text(demo, tmp_path):
    from marg.reports.model_card import model_card

    m = Model.load(demo["workdir"] / "learner" / "mrc.model.json")
    m.info = {**m.info, "report": {"auto_rule": "<script>alert(1)</script> & co"}}
    out = tmp_path / "mrc.html"
    out.write_text(model_card(m, source='evil "<name>".json'), encoding="utf-8")
    root = parse(out)
    text = "".join(root.itertext())
    assert "<script>alert(1)</script> & co" in text  # shown as text, not markup
    assert float(values(root)["certificate"]) == m.worst_case_error


def test_ledger_page_states_the_ledgers_numbers_and_verification(demo, tmp_path):
    led_dir = demo["files"]["north"]["dir"] / "marg-ledger"
    out = tmp_path / "ledger.html"
    r = run("audit", "show", "--ledger", led_dir, "--html", out)
    assert r.exit_code == 0, r.output
    root = parse(out)
    v = values(root)
    led = Ledger(led_dir)
    entries = [x for x in led.entries() if x.get("kind", "release") == "release"]  # not the cap entry
    assert int(v["n_entries"]) == len(entries) and v["integrity"] == "ok"
    from marg.marginals.accounting import cap_delta

    assert float(v["spent_epsilon"]) == pytest.approx(led.state().spend.as_cost(cap_delta(led.cap())).epsilon)
    assert float(v["spent_epsilon_sum"]) == pytest.approx(led.spent().epsilon)
    assert float(v["spent_rho"]) == pytest.approx(led.state().spend.rho)
    assert float(v["cap_epsilon"]) == pytest.approx(led.cap().epsilon)
    for x in entries:
        assert int(v[f"n_statistics:{x['seq']}"]) == len(x["statistics"])
        for st in x["statistics"]:
            assert float(v[f"std:{x['seq']}:{st['name']}"]) == pytest.approx(float(st["std"]))
    assert "spend" in {img.get("data-plot") for img in root.iter("img")}
    # a tampered ledger shows as failed
    path = led.path
    lines = path.read_text().splitlines()
    lines[0] = lines[0].replace('"site":"north"', '"site":"nörth"')
    path.write_text("\n".join(lines) + "\n")
    out2 = tmp_path / "ledger2.html"
    assert run("audit", "show", "--ledger", led_dir, "--html", out2).exit_code == 0
    assert values(parse(out2))["integrity"] == "failed"


def test_demo_writes_both_reports(demo):
    for path in demo["reports"].values():
        assert path.exists() and parse(path) is not None


def test_model_card_shows_the_group_lasso_path(tmp_path):
    from marg.demo import run_demo
    from marg.reports.model_card import model_card

    res = run_demo(tmp_path / "d", echo=lambda s: None)
    bundles = res["bundles"]
    learner = res["workdir"] / "learner"
    out = tmp_path / "gl.json"
    r = run("learn", *bundles, "--learner", "mrc", "--select", "group-lasso", "--max-features", "3", "--out", out,
            "--trust", learner / "trust", "--key", learner / "learner.seal.key")
    assert r.exit_code == 0, r.output
    m = Model.load(out)
    page = tmp_path / "gl.html"
    page.write_text(model_card(m), encoding="utf-8")
    root = parse(page)
    assert "path" in {img.get("data-plot") for img in root.iter("img")}
    v = values(root)
    path = [p for p in m.info["report"]["selection"]["path"] if p["lam"] > 0]
    assert [int(v[f"path_active:{k}"]) for k in range(len(path))] == [p["n_active"] for p in path]


def test_model_card_lists_a_boost_votes_rules(demo_bundles, tmp_path):
    """A boost model's card states each rule of the vote in words with its weight (as the model
    file and marg learn do) and counts as used only the features its rules read.

    On exact tables (three demo sites, every pair table): the DP demo's bundles — its city site
    counting up to 3 visits per patient, so three times a row's noise — leave boost's vote empty,
    which ``marg learn`` refuses to write."""
    from marg.reports.model_card import model_card

    out = tmp_path / "boost.json"
    r = run("learn", *demo_bundles(), "--learner", "boost", "--out", out, "--allow-unsigned")
    assert r.exit_code == 0, r.output
    m = Model.load(out)
    rules = m.estimator.rules()
    assert rules, "the demo's vote should hold a rule"
    page = tmp_path / "boost.html"
    page.write_text(model_card(m), encoding="utf-8")
    root = parse(page)
    v = values(root)
    for k, rule in enumerate(rules):
        assert float(v[f"rule_weight:{k}"]) == rule["weight"] and int(v[f"rule_order:{k}"]) == rule["order"]
    table = next(t for t in root.iter("table") if t.get("data-table") == "rules"
                 or "rule_weight:0" in ET.tostring(t, encoding="unicode"))
    text = ET.tostring(table, encoding="unicode")
    assert all(rule["rule"].replace("<", "&lt;").replace(">", "&gt;") in text for rule in rules)
    used = {f for u in range(m.estimator.map_.dim) if (m.estimator.mu_[:, u] != 0).any()
            for f in m.estimator.map_.features(u)}
    assert int(v["n_features_used"]) == len(used) < len(m.codebook.features)
