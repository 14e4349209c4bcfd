"""Planning the holdout certificate (marg plan, --holdout auto) and the small-site release through the installed script.

The planner's numbers are the bound's at the expected counts (checked against the bound
itself), the rows/ε it says are needed do reach the target and less does not, the chosen
split minimises the expected certificate (least spent on the evaluation among ties), and a full two-round run spends
exactly the site's total ε, records the plan and yields pooled, per-site and class-wise certificates equal to the bound
recomputed from the released bundles.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from marg.learners.certification.holdout_certificate import Released, exact_bound, released_counts
from marg.learners.certification.holdout_plan import (expected_holdout_certificate, needed_for, plan_holdout,
                                                      release_scale)
from marg.marginals.synthetic import SITES, demo_codebook, generate, write_csv
from marg.protocols.bundle import Bundle
from tests.helpers.console import marg
from tests.helpers.study import write_study


def test_expected_certificate_is_the_bound_at_the_expected_counts():
    exp = expected_holdout_certificate([200, 120, 80], 0.5, 0.2, holdout=0.25)
    b = release_scale(0.5)
    assert b == pytest.approx(2.0, rel=1e-9)  # Laplace on counts: b = Δ/ε
    n = 0.25 * 400
    direct = exact_bound(Released(round(0.2 * n), n, (("laplace", b, True, 3),), (("laplace", b, True, 6),)),
                         1 - 0.05 * 6 / np.pi ** 2)  # the first model's share of α, as marg certify takes it
    assert exp.value == direct.value and exp.held_out == n
    assert expected_holdout_certificate([200, 120, 80], None, 0.2, holdout=0.25).value < exp.value  # exact: tighter


def test_needed_rows_and_epsilon_reach_the_target_and_less_does_not():
    rows, eps, p = [100, 60, 40], 0.25, 0.2
    need = needed_for(rows, eps, p, holdout=0.2)
    tgt = p + 0.2
    assert expected_holdout_certificate(rows, eps, p, holdout=0.2).value > tgt  # not informative as planned
    assert expected_holdout_certificate(need["rows"], eps, p, holdout=0.2).value <= tgt
    fewer = [int(r * need["rows_factor"] * 0.97) for r in rows]
    assert expected_holdout_certificate(fewer, eps, p, holdout=0.2).value > tgt
    assert expected_holdout_certificate(rows, need["epsilon"], p, holdout=0.2).value <= tgt
    assert expected_holdout_certificate(rows, need["epsilon"] * 0.97, p, holdout=0.2).value > tgt


def test_the_split_minimises_the_expected_certificate_spending_least_among_ties():
    fr, sh = (0.2, 0.3, 0.4), (0.2, 0.5, 0.8)
    plan = plan_holdout([240, 150, 100], 1.0, 0.15, n_features=8, fractions=fr, shares=sh)
    values = {}
    for s in sh:
        sigma = release_scale((1 - s) * 1.0, "gaussian", 1e-6, 2 * 9)
        for f in fr:
            n_t = (1 - f) * 490
            pm = 0.15 + np.sqrt(9 * 0.15 * 0.85 / n_t + 2 * 3 * sigma**2 / (9 * n_t**2))
            values[(f, s)] = expected_holdout_certificate([240, 150, 100], s, pm, holdout=f).value
    best = min(values.values())
    f, s = min(k for k, v in values.items() if v <= best * 1.01)  # ties within 1 %: least spent on the evaluation
    assert (plan.fraction, plan.epsilon_evaluate) == (f, pytest.approx(s))
    assert plan.expected_certificate == pytest.approx(values[(f, s)])
    assert plan.epsilon_tables + plan.epsilon_evaluate == pytest.approx(1.0)


def test_marg_plan_prints_the_library_numbers(tmp_path):
    r = marg("plan", "--rows", "100,60,40", "--epsilon", "1", "--holdout", "0.2", "--evaluate-epsilon", "0.25",
             "--error", "0.2", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["expected_certificate"] == expected_holdout_certificate([100, 60, 40], 0.25, 0.2, holdout=0.2).value
    assert d["needed"]["rows"] == needed_for([100, 60, 40], 0.25, 0.2, holdout=0.2)["rows"]
    assert d["informative"] is False and d["epsilon_tables"] == pytest.approx(0.75)
    r = marg("plan", "--rows", "100", "--sites", "3", "--epsilon", "1", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "give --schema or --features" in r.stderr
    r = marg("plan", "--rows", "100,x", "--epsilon", "1", "--features", "3", cwd=tmp_path)
    assert (r.returncode == 2 and "--rows must be a row count or a comma-separated list of counts, got "
                                  "'100,x'" in r.stderr)


@pytest.fixture(scope="module")
def two_rounds(tmp_path_factory):
    """Three demo sites: round 1 with --holdout auto at ε = 1 in total, learn, round 2 at the planned ε
    (class-wise content; north asks for its own certificate), certify."""
    n = 400
    study = write_study(tmp_path_factory.mktemp("plan"), n, seed=700)
    tmp, schema, files, bundles = study.dir, study.schema, study.data, []
    for name, f in files.items():
        b = tmp / f"{name}.bundle"
        r = marg("export", f, "--schema", schema, "--site", name, "--out", b, "--epsilon", "1", "--holdout", "auto",
                 "--plan-rows", n, "--plan-sites", len(SITES), "--expected-error", "0.2", "--ledger",
                 tmp / f"{name}-led",
                 cwd=tmp)
        assert r.returncode == 0, r.stderr
        bundles.append(b)
    model = tmp / "model.json"
    r = marg("learn", *bundles, "--out", model, "--allow-unsigned", "--learner", "nb", cwd=tmp)
    assert r.returncode == 0, r.stderr
    plan = Bundle.from_bytes(bundles[0].read_bytes()).header["holdout"]["plan"]
    evals = []
    for name, f in files.items():
        ev = tmp / f"{name}.eval"
        extra = ["--site-certificate"] if name == SITES[0].name else []
        r = marg("export", f, "--schema", schema, "--site", name, "--out", ev, "--evaluate", model, "--epsilon",
                 plan["epsilon_evaluate"], "--evaluate-content", "classes", "--allow-unsigned", "--ledger",
                 tmp / f"{name}-led", *extra,
                 cwd=tmp)
        assert r.returncode == 0, r.stderr
        evals.append(ev)
    r = marg("certify", model, *evals, "--out", tmp / "cert.json", "--allow-unsigned", "--json", cwd=tmp)
    assert r.returncode == 0, r.stderr
    return tmp, bundles, evals, plan, json.loads(r.stdout)


def test_holdout_auto_spends_the_total_and_records_the_plan(two_rounds):
    tmp, bundles, evals, plan, _ = two_rounds
    from marg.learners.certification.holdout_plan import plan_holdout as ph

    expect = ph([400] * 3, 1.0, 0.2, n_features=demo_codebook().n_features)
    assert plan["holdout"] == expect.fraction and plan["epsilon_evaluate"] == pytest.approx(expect.epsilon_evaluate)
    for b, e in zip(bundles, evals):
        hb, he = Bundle.from_bytes(b.read_bytes()).header, Bundle.from_bytes(e.read_bytes()).header
        assert hb["holdout"]["fraction"] == expect.fraction
        total = float(hb["privacy"]["epsilon"]) + float(he["privacy"]["epsilon"])
        assert total == pytest.approx(1.0, rel=1e-6)  # the site's total ε: tables + evaluation
        assert he["evaluation"]["content"] == "classes"
        assert [s["shape"] for s in he["statistics"]] == [[2, 2]]  # N[truth, outcome]: nothing more leaves


def test_certify_gives_pooled_per_site_and_class_certificates_from_the_releases(two_rounds):
    tmp, _, evals, _, d = two_rounds
    rel = []
    for e in evals:
        b = Bundle.from_bytes(e.read_bytes())
        t = b.tables[0]
        rel.append((b.site, *released_counts(t.counts, t.noise.draws(True), "classes")))
    total = rel[0][1] + rel[1][1] + rel[2][1]
    level = 1 - 0.05 * 6 / np.pi ** 2  # the first model's share of α on its held-out set (issue 44)
    assert d["worst_case_error"] == exact_bound(total, level).value
    north = SITES[0].name
    assert list(d["site_certificates"]) == [north]
    assert d["site_certificates"][north]["value"] == exact_bound(rel[0][1], level).value
    classes = demo_codebook().label.classes
    assert sorted(d["class_certificates"]) == sorted(classes)
    for y, c in enumerate(classes):
        acc = rel[0][2][y] + rel[1][2][y] + rel[2][2][y]
        assert d["class_certificates"][c]["value"] == exact_bound(acc, 1 - (1 - level) / len(classes)).value
    assert 0.0 < d["worst_case_error"] < 1.0 and np.isfinite(d["noise_sd"]) and d["noise_sd"] > 0
    # the model file carries them: marg inspect MODEL --json shows the pooled, per-site and class-wise bounds
    r = marg("inspect", tmp / "cert.json", "--json", cwd=tmp)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)["holdout_certificate"]
    assert info["value"] == d["worst_case_error"] and info["site_certificates"] == d["site_certificates"]
    assert info["class_certificates"] == d["class_certificates"]


def test_holdout_auto_refusals(tmp_path):
    schema = tmp_path / "codebook.json"
    demo_codebook().save(schema)
    f = tmp_path / "a.csv"
    write_csv(f, generate(100, SITES[0], seed=1), slice(0, 100))
    r = marg("export", f, "--schema", schema, "--site", "a", "--out", tmp_path / "a.bundle", "--epsilon", "1",
             "--holdout", "auto", "--ledger", tmp_path / "led", cwd=tmp_path)
    assert r.returncode == 2 and "--holdout auto needs --plan-rows" in r.stderr and not (tmp_path / "a.bundle").exists()
    r = marg("export", f, "--schema", schema, "--site", "a", "--out", tmp_path / "a.bundle", "--rho", "0.1",
             "--holdout", "auto", "--plan-rows", "100", "--ledger", tmp_path / "led", cwd=tmp_path)
    assert r.returncode == 2 and "give --epsilon" in r.stderr
    r = marg("export", f, "--schema", schema, "--site", "a", "--out", tmp_path / "a.bundle", "--epsilon", "1",
             "--holdout", "half", "--ledger", tmp_path / "led", cwd=tmp_path)
    assert r.returncode == 2 and "--holdout must be a number or auto, got 'half'" in r.stderr
