"""learn / predict / evaluate through the CLI, and model files."""

import csv
import json
from functools import partial

import numpy as np
import pytest

from marg.learners.estimator.model import Model
from marg.marginals.data.encoding import encode_file
from marg.marginals.synthetic import SITES, generate, write_csv
from tests.helpers.console import run as marg_run
from tests.helpers.study import export_study, write_study

run = partial(marg_run, env={"MARG_PROGRESS": "lines"})  # progress records as lines (not a terminal: a summary only)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """Three demo sites, 1,500 rows each: 1,200 exported exactly (every pair table), 300 in NAME_test.csv."""
    s = export_study(write_study(tmp_path_factory.mktemp("study"), 1500, seed=100, train=1200))
    return s.dir, s.schema, s.bundles


@pytest.mark.parametrize("learner", ["mrc", "renyi"])
def test_learn_json_contract(study, learner):
    tmp, schema, bundles = study
    out = tmp / f"{learner}.json"
    r = run("learn", *bundles, "--learner", learner, "--out", out, "--json", "--allow-unsigned")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    for key in ("learner", "n", "sites", "features", "worst_case_error", "seconds"):
        assert key in d
    assert d["n"] == 3600 and sorted(d["sites"]) == ["city", "north", "south"]
    assert 0 < d["worst_case_error"] <= 1
    if learner == "mrc":
        assert d["iterations"] and all(b <= a + 1e-9 for a, b in zip(d["iterations"], d["iterations"][1:]))
    else:
        # the rule's own worst case W(h) (2γ bounds the training sample only), never below R*-style 2γ's claim
        assert isinstance(d["gamma"], float) and d["certificate"]["kind"] == "W(h)" and 0 < d["worst_case_error"] <= 1
        assert isinstance(d["separable"], bool) and 0 <= d["hgr_lower_bound"] <= 1
    m = Model.load(out)
    assert m.learner == learner and m.worst_case_error == pytest.approx(d["worst_case_error"])


@pytest.mark.parametrize("learner", ["mrc", "renyi", "boost"])
def test_evaluate_and_predict(study, learner):
    tmp, schema, bundles = study
    model = tmp / f"{learner}_e.json"
    assert run("learn", *bundles, "--learner", learner, "--out", model, "--allow-unsigned").exit_code == 0
    test = tmp / "north_test.csv"
    r = run("evaluate", "--allow-unsigned", model, test, "--json", "--schema", schema)
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    m = Model.load(model)
    enc = encode_file(test, m.codebook)
    pred = m.predict(enc.X)
    assert d["n"] == 300
    assert d["accuracy"] == pytest.approx(np.mean(pred == enc.y))
    assert d["error"] == pytest.approx(1 - d["accuracy"])
    assert d["worst_case_error"] == pytest.approx(m.worst_case_error)
    assert np.sum(d["confusion"]) == 300
    r = run("evaluate", "--allow-unsigned", model, test)
    assert r.exit_code == 0 and "confusion matrix" in r.stdout
    out = tmp / f"pred_{learner}.csv"
    r = run("predict", "--allow-unsigned", model, test, "--out", out, "--id", "patient_id")
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 300 and rows[0]["patient_id"].startswith("N")
    P = np.array([[float(r["p_no"]), float(r["p_yes"])] for r in rows])
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-5)
    assert [r["predicted"] for r in rows] == [m.classes[k] for k in pred]


def test_boost_prints_its_rules_in_words(study):
    tmp, schema, bundles = study
    out = tmp / "boost_rules.json"
    r = run("learn", *bundles, "--learner", "boost", "--out", out, "--allow-unsigned")
    assert r.exit_code == 0, r.output
    rules = Model.load(out).estimator.rules()
    assert rules and "weighted rule" in r.stdout
    # progress counts the vote's candidate rule columns, not features (the codebook has few)
    progress = [ln for ln in r.stderr.splitlines() if ln.startswith("  iteration ")]
    assert progress and all("candidate rules in the LP" in ln and "features" not in ln for ln in progress)
    for rule in rules:  # every rule of the model file is printed with its weight and class
        assert f"{rule['weight']:+.4f}  {rule['class']}  if  {rule['rule']}" in r.stdout
    d = json.loads(run("learn", *bundles, "--learner", "boost", "--out", out, "--json", "--allow-unsigned").stdout)
    assert d["monomials"] == json.loads(json.dumps(rules)) and d["terms"] == sum(1 for _ in rules)
    assert run("learn", *bundles, "--learner", "mrc", "--max-order", "1", "--out", out,
               "--allow-unsigned").exit_code == 2


def test_model_round_trip_predicts_the_same(study):
    tmp, schema, bundles = study
    out = tmp / "rt.json"
    assert run("learn", *bundles, "--learner", "mrc", "--out", out, "--allow-unsigned").exit_code == 0
    m1 = Model.load(out)
    m1.save(tmp / "rt2.json")
    m2 = Model.load(tmp / "rt2.json")
    enc = encode_file(tmp / "city_test.csv", m1.codebook)
    np.testing.assert_array_equal(m1.predict(enc.X), m2.predict(enc.X))
    np.testing.assert_allclose(m1.predict_proba(enc.X), m2.predict_proba(enc.X))


def test_model_refuses_other_codebook(study):
    tmp, schema, bundles = study
    out = tmp / "m.json"
    assert run("learn", *bundles, "--learner", "mrc", "--out", out, "--allow-unsigned").exit_code == 0
    d = json.loads(schema.read_text())
    d["features"][1]["levels"] = ["M", "F"]
    other = tmp / "other.json"
    other.write_text(json.dumps(d))
    for cmd in (["evaluate", out, tmp / "city_test.csv"],
                ["predict", out, tmp / "city_test.csv", "--out", tmp / "p.csv"]):
        r = run(*cmd, "--schema", other, "--allow-unsigned")
        assert r.exit_code == 2 and "fingerprint" in r.stderr and "differs from the model's" in r.stderr


def test_learn_errors(study, tmp_path):
    tmp, schema, bundles = study
    r = run("learn", *bundles, "--learner", "svm", "--out", tmp_path / "m.json", "--allow-unsigned")
    assert r.exit_code == 2 and "unknown learner 'svm'" in r.stderr
    # Rényi needs pair tables.
    b = tmp_path / "first.bundle"
    assert run("export", tmp / "north.csv", "--schema", schema, "--site", "n", "--out", b, "--min-cell",
               "1").exit_code == 0
    r = run("learn", b, "--learner", "renyi", "--out", tmp_path / "m.json", "--allow-unsigned")
    assert r.exit_code == 2 and "pair table" in r.stderr and "--stats all" in r.stderr
    assert not (tmp_path / "m.json").exists()
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    r = run("evaluate", "--allow-unsigned", bad, tmp / "city_test.csv")
    assert r.exit_code == 2 and "not a marg model" in r.stderr


@pytest.mark.parametrize("learner, select, extra",
                         [("renyi", "gbd", ["--max-features", "3"]), ("mrc", "group-lasso", ["--max-features", "2"]),
                                                   ("renyi", "gbd", ["--feature-cost", "0.002"])])
def test_learn_with_selection(study, learner, select, extra):
    tmp, schema, bundles = study
    out = tmp / f"sel_{learner}_{select}.json"
    r = run("learn", *bundles, "--learner", learner, "--out", out, "--select", select, *extra, "--json",
            "--allow-unsigned")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["selected"] == d["features"]
    if "--max-features" in extra:
        assert len(d["selected"]) == int(extra[1])
    if select == "gbd":
        assert d["gap"] is not None and d["gap"] <= 1e-6
        assert "gbd iteration 1: best" in r.stderr  # progress: the first iteration, then every 5 s
    m = Model.load(out)
    enc = encode_file(tmp / "city_test.csv", m.codebook)
    # The refit model only looks at the selected features: changing another column changes nothing.
    other = [i for i, f in enumerate(m.codebook.features) if f.name not in d["selected"]][0]
    X2 = enc.X.copy()
    X2[:, other] = (X2[:, other] + 1) % m.codebook.features[other].n_levels
    np.testing.assert_array_equal(m.predict(enc.X), m.predict(X2))


def test_learn_selection_errors(study, tmp_path):
    tmp, schema, bundles = study
    r = run("learn", *bundles, "--learner", "renyi", "--out", tmp_path / "m.json", "--select", "gbd",
            "--allow-unsigned")
    assert r.exit_code == 2 and "--max-features" in r.stderr
    r = run("learn", *bundles, "--learner", "renyi", "--out", tmp_path / "m.json", "--select", "magic",
            "--allow-unsigned")
    assert r.exit_code == 2 and "unknown feature selection --select magic" in r.stderr


@pytest.mark.parametrize("learner", ["dcc", "renyi"])
def test_evaluate_reports_rows_outside_the_uncertainty_set(learner, tmp_path, demo_bundles):
    """evaluate counts the rows no distribution of U reaches (Model.outside) and the error on
    them — with 3 × 40 training rows many pair cells are empty, so new rows fall outside;
    renyi records no ruled-out cells (None)."""
    bundles = demo_bundles(rows=40, seed=500)
    model = tmp_path / f"{learner}_out.json"
    extra = ["--s", "0"] if learner == "dcc" else []
    r = run("learn", *bundles, "--learner", learner, *extra, "--out", model, "--allow-unsigned")
    assert r.exit_code == 0, r.output
    test = tmp_path / "fresh.csv"
    write_csv(test, generate(300, SITES[0], seed=999), slice(0, 300))
    d = json.loads(run("evaluate", "--allow-unsigned", model, test, "--json").stdout)
    if learner == "renyi":
        assert d["outside"] is None and d["outside_error"] is None
        assert "outside the uncertainty set" not in run("evaluate", "--allow-unsigned", model, test).stdout
        r = run("predict", "--allow-unsigned", model, test, "--out", tmp_path / "p.csv", "--flag-outside")
        assert r.exit_code == 2 and "--flag-outside needs an mrc or dcc model" in r.output
        assert not (tmp_path / "p.csv").exists()
        return
    m = Model.load(model)
    enc = encode_file(test, m.codebook)
    out = m.outside(enc.X)
    assert 0 < d["outside"] == int(out.sum()) < 300
    pred = m.predict(enc.X)
    assert d["outside_error"] == pytest.approx(np.mean(pred[out] != enc.y[out]))
    assert f"{d['outside']:,} rows" in run("evaluate", "--allow-unsigned", model, test).stdout
    pred_csv = tmp_path / "pred.csv"
    r = run("predict", "--allow-unsigned", model, test, "--out", pred_csv, "--flag-outside")
    assert r.exit_code == 0, r.output
    flags = [int(row["outside"]) for row in csv.DictReader(pred_csv.open())]
    assert flags == [int(v) for v in out] and f"{d['outside']:,} of 300 rows" in r.stdout


def test_learn_warns_when_the_certificate_is_trivial(tmp_path, demo_bundles):
    """3 × 15 rows with every pair table: the 95% box is so wide that R* = 1 − 1/K and the labels' W(h) is no
    better; learn says so (and not when the certificate is informative)."""
    small = demo_bundles(rows=15, seed=700)
    r = run("learn", *small, "--learner", "dcc", "--out", tmp_path / "m.json", "--allow-unsigned")
    assert r.exit_code == 0, r.output
    m = Model.load(tmp_path / "m.json")
    assert m.estimator.minimax_risk_.value == pytest.approx(0.5) and m.worst_case_error >= 0.5
    assert "warning: the certificate is trivial" in r.output and "--s" in r.output
    assert "marg export --holdout" in r.output  # the route to a certificate measured on held-out patients
    r = run("learn", *small, "--learner", "dcc", "--s", "0", "--out", tmp_path / "m0.json", "--allow-unsigned")
    assert r.exit_code == 0 and "trivial" not in r.output


def test_learn_prints_greedy_dcc_progress(study, tmp_path):
    """--greedy prints one stderr line per added edge, matching the reported edges and R^k."""
    tmp, schema, bundles = study
    r = run("learn", *bundles, "--learner", "dcc", "--greedy", "--s", "0", "--out", tmp_path / "g.json", "--json",
            "--allow-unsigned")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("  greedy: edge ")]
    assert d["edges"] and len(lines) == len(d["edges"])
    for k, ((a, b), ln, R) in enumerate(zip(d["edges"], lines, d["iterations"][1:]), start=1):
        assert ln == f"  greedy: edge {k} {a}–{b}, R = {R:.6f}"


def test_predict_failure_leaves_no_partial_output(study, tmp_path):
    """The output is streamed into a temporary file: a bad row late in the data leaves neither a partial
    file nor a temporary one, and an earlier output at that path is untouched."""
    tmp, schema, bundles = study
    model = tmp / "stream.json"
    assert run("learn", *bundles, "--learner", "mrc", "--out", model, "--allow-unsigned").exit_code == 0
    rows = list(csv.reader(open(tmp / "north_test.csv")))
    col = rows[0].index("age_band")
    rows[-1][col] = "not-a-level"
    bad = tmp_path / "bad.csv"
    with open(bad, "w", newline="") as fh:
        csv.writer(fh).writerows(rows)
    out = tmp_path / "pred.csv"
    r = run("predict", "--allow-unsigned", model, bad, "--out", out)
    assert r.exit_code == 2 and "column 'age_band': unknown level at row" in r.stderr
    assert "not-a-level" not in r.stderr  # a patient's value is never echoed (issue 35)
    assert not out.exists() and list(tmp_path.glob(".pred.csv*")) == []
    out.write_text("earlier\n")
    assert run("predict", "--allow-unsigned", model, bad, "--out", out).exit_code == 2
    assert out.read_text() == "earlier\n"
    good = run("predict", "--allow-unsigned", model, tmp / "north_test.csv", "--out", out)
    assert good.exit_code == 0 and len(out.read_text().splitlines()) == len(rows)


def test_learn_refuses_an_option_of_another_learner(study, tmp_path):
    tmp, schema, bundles = study
    r = run("learn", *bundles, "--learner", "renyi", "--greedy", "--out", tmp_path / "x.json", "--allow-unsigned")
    assert r.exit_code == 2 and "--greedy does not apply to learner 'renyi'" in r.stderr
    assert not (tmp_path / "x.json").exists()


def test_learn_auto_with_one_site_estimates_in_sample(study, tmp_path):
    """With one site (no leave-one-site-out) every candidate is fitted and certified at the same
    coverage, its error estimated in sample, and the rule picks among them; the report lists them all."""
    tmp, schema, bundles = study
    out = tmp_path / "auto.json"
    r = run("learn", bundles[0], "--out", out, "--json", "--allow-unsigned")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["auto_error_method"].startswith("in sample (one site's tables)")
    tried = [c for c in d["auto"] if c["certificate"] is not None]
    assert {c["learner"] for c in tried} >= {"mrc", "dcc", "nb", "renyi"}
    assert all(c["method"] == "in-sample" and 0 <= c["error"] <= 1 for c in tried)
    from marg.learners.auto import CandidateRow, choose

    # the one rule (tests/learners/test_auto_choice.py)
    want = d["auto"][choose([CandidateRow(**c) for c in d["auto"]])[0]]
    assert d["learner"] == want["learner"] and d["worst_case_error"] == pytest.approx(want["certificate"])
    assert all(c["kind"] in ("R*", "W(h)") for c in tried)  # no 2γ: every candidate's bound is on test error
    assert Model.load(out).learner == d["learner"]
    text = run("learn", bundles[0], "--out", tmp_path / "auto2.json", "--allow-unsigned")
    assert f"auto: chose {d['learner']} by {d['auto_rule']}" in text.stdout and ("the smallest estimated "
                                                                                 "error") in text.stdout
    bad = run("learn", *bundles, "--out", tmp_path / "x.json", "--greedy", "--allow-unsigned")
    assert bad.exit_code == 2 and "--greedy needs a chosen learner, not --learner auto" in bad.stderr
    bad = run("learn", *bundles, "--learner", "mrc", "--prefer", "certificate", "--out", tmp_path / "x.json",
              "--allow-unsigned")
    assert bad.exit_code == 2 and "--prefer does not apply to learner 'mrc' (it is for auto)" in bad.stderr


def test_learn_auto_leave_one_site_out_with_several_sites(study, tmp_path):
    """Several sites: each candidate's error is estimated on left-out sites; --prefer accuracy keeps
    the smallest estimate (the larger class only when estimated better beyond the noise, issue 49), and the chosen
    certificate bounds the chosen model's own rule."""
    tmp, schema, bundles = study
    r = run("learn", *bundles, "--out", tmp_path / "auto.json", "--json", "--allow-unsigned", "--prefer", "accuracy")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["auto_error_method"].startswith(f"leave-one-site-out over {len(bundles)} sites")
    scored = [c for c in d["auto"] if c["error"] is not None]
    assert {c["learner"] for c in scored} == {"mrc", "dcc", "nb", "renyi", "prior"}
    assert all(c["method"] == "loso" and len(c["folds"]) == len(bundles) for c in scored)
    best = min((c for c in scored if c["learner"] != "prior"), key=lambda c: (c["error"], c["certificate"]))
    if not best["chosen"]:
        best = next(c for c in scored if c["learner"] == "prior")
        assert "the larger class: estimated" in d["auto_rule"] and best["chosen"]
    assert d["learner"] == best["learner"] and best["chosen"] and 0 <= best["error"] <= 1
    assert d["certificate"]["kind"] in ("R*", "W(h)") and d["worst_case_error"] == pytest.approx(best["certificate"])


def test_naive_bayes_through_the_cli(study, tmp_path):
    tmp, schema, bundles = study
    out = tmp_path / "nb.json"
    r = run("learn", *bundles, "--learner", "nb", "--alpha", "1", "--out", out, "--json", "--allow-unsigned")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["certificate"]["kind"] == "W(h)" and 0 < d["worst_case_error"] <= 1
    ev = run("evaluate", "--allow-unsigned", out, tmp / "north_test.csv", "--json")
    assert ev.exit_code == 0 and 0 <= json.loads(ev.stdout)["error"] <= 1
