"""The two-round protocol through the installed console script: round 1 first-order tables, the
learner's request, round 2 the requested pair tables alone, and the learners on all the bundles;
what each site paid (its ledger) against what the model says it paid; the refusals."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from marg.learners.estimator.model import Model
from marg.marginals.data.encoding import encode_file
from marg.marginals.synthetic import demo_codebook
from marg.protocols.load import load_summary
from tests.helpers.console import marg
from tests.helpers.study import write_study

TOP = 4


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """Three demo sites, 2,000 rows each: 1,600 in NAME.csv, 400 in NAME_test.csv."""
    s = write_study(tmp_path_factory.mktemp("tworound"), 2000, seed=700, train=1600)
    return s.dir, s.schema, s.data


def two_rounds(study, tag: str, priv: list[str]):
    """Round 1 at every site, `marg request`, round 2 at every site: (round-1 bundles,
    round-2 bundles, the request as JSON, ledger folders by site)."""
    tmp, schema, data = study
    r1, r2, ledgers = [], [], {}
    for site, f in data.items():
        ledgers[site] = tmp / f"{site}-{tag}-ledger"
        out = tmp / f"{site}-{tag}-r1.bundle"
        p = marg("export", f, "--schema", schema, "--site", site, "--out", out, "--stats", "first",
                 "--ledger", ledgers[site], *priv, cwd=tmp)
        assert p.returncode == 0, p.stderr
        r1.append(out)
    req = tmp / f"request-{tag}.json"
    p = marg("request", *r1, "--top", TOP, "--out", req, "--allow-unsigned", "--json", cwd=tmp)
    assert p.returncode == 0, p.stderr
    for site, f in data.items():
        out = tmp / f"{site}-{tag}-r2.bundle"
        p = marg("export", f, "--schema", schema, "--site", site, "--out", out, "--pairs", f"@{req}",
                 "--allow-unsigned", "--ledger", ledgers[site], *priv, cwd=tmp)
        assert p.returncode == 0, p.stderr
        r2.append(out)
    return r1, r2, json.loads(req.read_text()), ledgers


@pytest.fixture(scope="module")
def dp_rounds(study):
    return two_rounds(study, "dp", ["--epsilon", "1", "--rounds", "1"])


@pytest.fixture(scope="module")
def exact_rounds(study):
    return two_rounds(study, "exact", ["--min-cell", "1"])


def inspect(path, cwd) -> dict:
    p = marg("inspect", path, "--json", cwd=cwd)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_dp_two_rounds_renyi_fits_on_the_requested_features(study, dp_rounds):
    tmp, schema, data = study
    r1, r2, req, ledgers = dp_rounds
    cb = demo_codebook()
    lab = cb.label.name
    assert len(req["features"]) == TOP and len(req["pairs"]) == TOP * (TOP - 1) // 2
    want = {f"N[{','.join(sorted(p, key=cb.index))},{lab}]" for p in req["pairs"]}
    for b in r2:  # round 2 pays for the requested pair tables and nothing else
        assert {s["name"] for s in inspect(b, tmp)["statistics"]} == want

    model = tmp / "renyi-dp.json"
    p = marg("learn", *r1, *r2, "--learner", "renyi", "--out", model, "--allow-unsigned", cwd=tmp)
    assert p.returncode == 0, p.stderr
    assert f"features: the {TOP} whose pair tables were all released" in p.stdout
    m = Model.load(model)
    rep = m.info["report"]
    assert sorted(rep["features"]) == sorted(req["features"])
    assert rep["unpaired_features"] == [f for f in cb.discrete_names if f not in req["features"]]
    assert rep["certificate"]["kind"] == "W(h)" and 0 < m.worst_case_error <= 1
    enc = encode_file(tmp / "north_test.csv", m.codebook)
    err = float(np.mean(m.predict(enc.X) != enc.y))
    assert err <= min(np.mean(enc.y), 1 - np.mean(enc.y)) + 0.02  # never worse than the majority vote

    # what each site paid: its ledger's total is its two exports' costs, and the model's provenance says the same
    sites = {s["site"]: s for s in m.info["sites"]}
    for site, ledger in ledgers.items():
        p = marg("audit", "show", "--ledger", ledger, "--json", cwd=tmp)
        assert p.returncode == 0, p.stderr
        led = json.loads(p.stdout)
        assert led["n_entries"] == 2
        costs = [inspect(tmp / f"{site}-dp-r{k}.bundle", tmp)["privacy"] for k in (1, 2)]
        for field in ("epsilon", "delta", "rho"):
            total = costs[0][field] + costs[1][field]
            assert led["spent_sum"][field] == pytest.approx(total, rel=1e-12)
        # composed in zCDP and converted once (marginals.accounting): the ledger at its default δ,
        # the model's provenance at the rounds' summed δ; ρ adds in both, ε is below the sum
        from marg.marginals.accounting import DEFAULT_DELTA, PrivacyCost, Spend

        spend = Spend.of(*(PrivacyCost.from_dict(c) for c in costs))
        both = costs[0]["epsilon"] + costs[1]["epsilon"]
        assert led["spent"]["epsilon"] == pytest.approx(spend.epsilon_at(DEFAULT_DELTA), rel=1e-12)
        assert led["spent"]["epsilon"] <= both * (1 + 1e-12)
        assert sites[site]["privacy"]["epsilon"] == pytest.approx(
            spend.epsilon_at(costs[0]["delta"] + costs[1]["delta"]), rel=1e-12)
        assert sites[site]["privacy"]["epsilon"] <= both * (1 + 1e-12)
        for p_ in (led["spent"], sites[site]["privacy"]):
            assert p_["rho"] == pytest.approx(costs[0]["rho"] + costs[1]["rho"], rel=1e-12)
        assert sites[site]["privacy"]["rounds"] == 2 and len(sites[site]["rounds"]) == 2

    # the other learners and the automatic choice take the rounds too
    for extra in (["--learner", "dcc"], ["--learner", "nb"], []):
        p = marg("learn", *r1, *r2, *extra, "--out", tmp / "other-dp.json", "--allow-unsigned", "--json", cwd=tmp)
        assert p.returncode == 0, p.stderr


def test_exact_rounds_combined_equal_the_one_round_release(study, exact_rounds):
    tmp, schema, data = study
    r1, r2, req, _ = exact_rounds
    combined = load_summary(r1 + r2, allow_unsigned=True)
    one = []
    pairs = ",".join(f"{a}:{b}" for a, b in req["pairs"])
    for site, f in data.items():
        out = tmp / f"{site}-one.bundle"
        p = marg("export", f, "--schema", schema, "--site", site, "--out", out, "--stats", "pairs", "--pairs", pairs,
                 "--no-ledger", "--min-cell", "1", cwd=tmp)
        assert p.returncode == 0, p.stderr
        one.append(out)
    single = load_summary(one, allow_unsigned=True)
    a = {(t.clique, t.kind): t.counts for t in combined.tables}
    b = {(t.clique, t.kind): t.counts for t in single.tables}
    assert a.keys() == b.keys() and sum(len(c) == 3 for c, _ in a) == len(req["pairs"])
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    # and the models fitted on them are the same model
    for name, bundles in (("rounds", r1 + r2), ("one", one)):
        p = marg("learn", *bundles, "--learner", "renyi", "--out", tmp / f"renyi-{name}.json", "--allow-unsigned",
                 cwd=tmp)
        assert p.returncode == 0, p.stderr
    x, y = Model.load(tmp / "renyi-rounds.json"), Model.load(tmp / "renyi-one.json")
    np.testing.assert_allclose(x.estimator.z_, y.estimator.z_, rtol=0, atol=1e-12)
    assert x.worst_case_error == pytest.approx(y.worst_case_error, abs=1e-9)


def refused(*args, cwd, match: str) -> None:
    p = marg(*args, cwd=cwd)
    assert p.returncode == 2, (p.returncode, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and match in lines[0], p.stderr


def test_two_round_refusals(study, exact_rounds):
    tmp, schema, data = study
    r1, r2, req, _ = exact_rounds
    out = ["--out", tmp / "refused.json", "--allow-unsigned"]
    # a site's round 2 exported twice: its patients would count twice
    copy = tmp / "north-copy.csv"
    shutil.copy(data["north"], copy)
    again = tmp / "north-again-r2.bundle"
    p = marg("export", copy, "--schema", schema, "--site", "north", "--out", again, "--pairs",
             f"@{tmp / 'request-exact.json'}",
             "--allow-unsigned", "--no-ledger", "--min-cell", "1", cwd=tmp)
    assert p.returncode == 0, p.stderr
    refused("learn", *r1, *r2, again, *out, cwd=tmp, match="site 'north' already released N[")
    refused("learn", *r1, *r2, r2[0], *out, cwd=tmp, match="given twice")
    # a site missing from a round, named
    refused("learn", *r1, *r2[:2], *out, cwd=tmp, match="site 'city' is missing from round 2 (pair tables)")
    refused("learn", *r1[:2], *r2, *out, cwd=tmp, match="site 'city' is missing from round 1 (first-order tables)")
    # another study's bundle, and another study's site answering the request
    other = tmp / "other-codebook.json"
    demo_codebook().subset(demo_codebook().feature_names[:-1]).save(other)
    stranger = tmp / "north-other-r1.bundle"
    p = marg("export", data["north"], "--schema", other, "--site", "north", "--out", stranger, "--stats", "first",
             "--no-ledger", "--min-cell", "1", cwd=tmp)
    assert p.returncode == 0, p.stderr
    refused("learn", *r1[1:], stranger, *r2, *out, cwd=tmp, match="codebook fingerprint")
    refused("export", data["north"], "--schema", other, "--site", "north", "--out", tmp / "x.bundle",
            "--pairs", f"@{tmp / 'request-exact.json'}", "--no-ledger", cwd=tmp, match="is for study")
    # Rényi with no pair table at all: one line saying what to export
    refused("learn", *r1, "--learner", "renyi", *out, cwd=tmp, match="first-order tables only")
    assert not (tmp / "refused.json").exists()
