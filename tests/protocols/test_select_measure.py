"""Select, then measure (issue 34): the selection's cost is OpenDP's, the two rounds through the console script
under a cap, round 2 cannot overspend, bad requests are refused in one line with nothing spent."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from tests.helpers.console import marg, run


def _study(tmp, n_sites=3, n=240, p=12, seed=0):
    """A planted study: feature f0 and f1 carry the label, the rest are noise; one CSV per site."""
    rng = np.random.default_rng(seed)
    from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label

    schema = tmp / "codebook.json"
    Codebook(features=tuple(CategoricalFeature(f"f{j}", ("0", "1")) for j in range(p)),
             label=Label("y", ("a", "b"))).save(schema)
    files = []
    for s in range(n_sites):
        y = rng.integers(0, 2, n)
        X = rng.integers(0, 2, (n, p))
        for j in (0, 1):
            X[:, j] = np.where(rng.random(n) < 0.9, y, 1 - y)
        f = tmp / f"site{s}.csv"
        f.write_text("\n".join([",".join([f"f{j}" for j in range(p)] + ["y"])] +
                               [",".join([str(v) for v in X[i]] + ["ab"[y[i]]]) for i in range(n)]) + "\n")
        files.append(f)
    return schema, files


def test_the_selection_costs_what_opendp_says():
    import opendp.prelude as dp

    from marg.marginals.selection import calibrate_top_k

    dp.enable_features("contrib")
    for k, rho, sens in ((1, 0.01, 1.0), (16, 0.004, 1.0), (5, 0.02, 3.0)):
        scale, meas, cost = calibrate_top_k(k, rho, sens)
        space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.linf_distance(T=float, monotonic=True)
        ref = dp.m.make_noisy_top_k(*space, dp.zero_concentrated_divergence(), k=k, scale=scale)
        assert cost == pytest.approx(float(ref.map(sens)), rel=0, abs=0)
        assert cost <= rho and cost == pytest.approx(rho, rel=1e-6)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return _world(tmp_path_factory.mktemp("select"))


def _world(tmp, **study):
    """Keys, a trust store and a capped ledger (ε = 1, δ = 1e-6) per site of :func:`_study`."""
    schema, files = _study(tmp, **study)
    keys = tmp / "keys"
    assert run("keys", "init", "--site", "learner", "--dir", keys, "--role", "learner").exit_code == 0
    trust = tmp / "trust"
    trust.mkdir()
    (trust / "learner.sign.pub").write_bytes((keys / "learner.sign.pub").read_bytes())
    for s in range(len(files)):
        home = tmp / f"home{s}"
        assert run("keys", "init", "--site", f"s{s}", "--dir", keys).exit_code == 0
        (trust / f"s{s}.sign.pub").write_bytes((keys / f"s{s}.sign.pub").read_bytes())
        r = marg("audit", "init", "--site", f"s{s}", "--key", keys / f"s{s}.sign.key", "--epsilon", "1", "--delta",
                 "1e-6",
                 cwd=tmp, home=home)
        assert r.returncode == 0, r.stderr
    return {"tmp": tmp, "schema": schema, "files": files, "keys": keys, "trust": trust}


def _ledger_spend(w, s):
    r = marg("audit", "show", "--json", cwd=w["tmp"], home=w["tmp"] / f"home{s}")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _round1(w, rows):
    """Round 1 at every site through the console script (`marg export --epsilon 1 --plan-rows ROWS`)."""
    tmp, r1 = w["tmp"], []
    for s, f in enumerate(w["files"]):
        out = tmp / f"s{s}.r1"
        r = marg("export", f, "--schema", w["schema"], "--site", f"s{s}", "--out", out, "--epsilon", "1",
                 "--plan-rows", str(rows), "--plan-sites", "3", cwd=tmp, home=tmp / f"home{s}")
        assert r.returncode == 0, r.stderr
        assert "round 1 of select-then-measure" in r.stdout and f"stated rows {rows}/{rows}/{rows}" in r.stdout
        w.setdefault("round1_said", []).append(r.stdout)
        r1.append(out)
    return r1


def _round2(w, req):
    """Round 2 at every site through the console script (`marg export --request REQ --trust LEARNER-KEYS`)."""
    tmp, r2 = w["tmp"], []
    for s, f in enumerate(w["files"]):
        out = tmp / f"s{s}.r2"
        r = marg("export", f, "--schema", w["schema"], "--site", f"s{s}", "--out", out, "--request", req, "--trust",
                 w["trust"],
                 cwd=tmp, home=tmp / f"home{s}")
        assert r.returncode == 0, r.stderr
        assert "round 2 of select-then-measure" in r.stdout
        r2.append(out)
    return r2


def test_two_rounds_through_the_console_script_under_the_cap(world):
    w, tmp = world, world["tmp"]
    r1 = _round1(w, 240)
    # marg plan said, before anything was spent, the noise round 1 then added
    r = marg("plan", "--rows", "240,240,240", "--epsilon", "1", "--schema", w["schema"], "--json", cwd=tmp)
    assert r.returncode == 0, r.stderr
    said = json.loads(r.stdout)["select_then_measure"]
    from marg.protocols.bundle import Bundle

    b = Bundle.from_bytes(r1[0].read_bytes())
    assert [t.noise.std for t in b.tables] == [pytest.approx(said["label_std"], rel=1e-6)]
    assert b.header["study"]["selection"]["scale"] == pytest.approx(said["selection_scale"], rel=1e-9)
    k = said["plan"]["k"]
    assert k == b.header["study"]["selection"]["k"] and said["plan"]["split"] == b.header["study"]["plan"]["split"]
    # a second round 1 of the same study is refused (it would spend the total again), nothing written
    r = marg("export", w["files"][0], "--schema", w["schema"], "--site", "s0", "--out", tmp / "again.r1", "--epsilon",
             "1",
             cwd=tmp, home=tmp / "home0")
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1 and not (tmp / "again.r1").exists()
    req = tmp / "req.json"
    r = marg("request", *r1, "--out", req, "--trust", w["trust"], "--sign-key", w["keys"] / "learner.sign.key", cwd=tmp)
    assert r.returncode == 0, r.stderr
    d = json.loads(req.read_text())
    assert ["f0"] in d["tables"] and ["f1"] in d["tables"]
    # the request is refused unless signed by a trusted learner, and when altered to ask more than the rest
    forged = tmp / "forged.json"
    e = dict(d)
    e["budget"] = {k: {"rho": v["rho"] * 2} for k, v in d["budget"].items()}
    forged.write_text(json.dumps(e))
    r = marg("export", w["files"][0], "--schema", w["schema"], "--site", "s0", "--out", tmp / "x.r2", "--request",
             forged,
             "--trust", w["trust"], cwd=tmp, home=tmp / "home0")
    assert r.returncode != 0 and "bad signature" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = marg("export", w["files"][0], "--schema", w["schema"], "--site", "s0", "--out", tmp / "x.r2", "--request", req,
             cwd=tmp, home=tmp / "home0")
    assert r.returncode != 0 and "--trust" in r.stderr and not (tmp / "x.r2").exists()
    r2 = _round2(w, req)
    # round 2 cannot be answered twice: nothing is left to spend
    r = marg("export", w["files"][0], "--schema", w["schema"], "--site", "s0", "--out", tmp / "y.r2", "--request", req,
             "--trust", w["trust"], cwd=tmp, home=tmp / "home0")
    assert r.returncode != 0 and "already answered round 2" in r.stderr and not (tmp / "y.r2").exists()
    # what left the site in round 1, for its privacy officer: the label table and the selection
    r = marg("audit", "show", cwd=tmp, home=tmp / "home0")
    assert r.returncode == 0 and f"top-{k} of 12 features (noisy top-k)" in r.stdout, r.stdout
    _spent_the_total_then_learn(w, r1, r2, 0.3)


def _spent_the_total_then_learn(w, r1, r2, max_error):
    """The two rounds together spent each site's total, ε = 1 at δ = 1e-6 (the cap), never more; the model learnt
    from both rounds reads the measured features of the study's own data files and errs below ``max_error``."""
    from marg.marginals.counts.dp_conversions import rho_for_epsilon

    tmp, total = w["tmp"], rho_for_epsilon(1.0, 1e-6)
    for s in range(len(r1)):
        entries = [json.loads(x) for x in sorted((tmp / f"home{s}").rglob("ledger.jsonl"))[0].read_text().splitlines()]
        rho = sum(float(x["cost"]["rho"]) for x in entries if x.get("type", "release") == "release" and "cost" in x)
        assert rho <= total * (1 + 1e-9) and rho == pytest.approx(total, rel=1e-6)
    model = tmp / "model.json"
    r = marg("learn", *r1, *r2, "--out", model, "--trust", w["trust"], "--no-sign", cwd=tmp)
    assert r.returncode == 0, r.stderr
    r = marg("evaluate", model, w["files"][0], "--schema", w["schema"], "--allow-unsigned", "--json", cwd=tmp)
    assert r.returncode == 0 and json.loads(r.stdout)["error"] < max_error, r.stdout + r.stderr


def test_a_request_for_a_table_outside_the_codebook_is_refused_before_anything_is_spent(tmp_path):
    from marg.marginals.data.codebook import Codebook
    from marg.marginals.request import StudyRequest
    from marg.protocols.keys import load_signing_key
    from marg.protocols.study import write_request

    schema, files = _study(tmp_path, n_sites=1, seed=3)
    keys = tmp_path / "keys"
    assert run("keys", "init", "--site", "learner", "--dir", keys, "--role", "learner").exit_code == 0
    assert run("keys", "init", "--site", "s0", "--dir", keys).exit_code == 0
    trust = tmp_path / "trust"
    trust.mkdir()
    (trust / "learner.sign.pub").write_bytes((keys / "learner.sign.pub").read_bytes())
    home = tmp_path / "home"
    assert marg("audit", "init", "--site", "s0", "--key", keys / "s0.sign.key", "--epsilon", "1", "--delta", "1e-6",
                cwd=tmp_path, home=home).returncode == 0
    assert marg("export", files[0], "--schema", schema, "--site", "s0", "--out", tmp_path / "s0.r1", "--epsilon", "1",
                cwd=tmp_path, home=home).returncode == 0
    cb = Codebook.load(schema)
    sk = load_signing_key(keys / "learner.sign.key")
    for tables, budget, words in (([("nope",)], 1e-3, "not a discrete feature"), ([("f0",)], 1.0, "more than the rest"),
                                  ([("f0",)], 1e-3, None)):
        req = tmp_path / "req.json"
        write_request(req, StudyRequest(cb.fingerprint, tuple(tables), (1.0,), {"s0": budget}, {}), sk)
        before = sorted(p.read_bytes() for p in home.rglob("ledger.jsonl"))
        r = marg("export", files[0], "--schema", schema, "--site", "s0", "--out", tmp_path / "s0.r2", "--request", req,
                 "--trust", trust, cwd=tmp_path, home=home)
        if words is None:
            assert r.returncode == 0, r.stderr
            continue
        assert r.returncode != 0 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "s0.r2").exists()
        assert sorted(p.read_bytes() for p in home.rglob("ledger.jsonl")) == before
        assert not math.isnan(budget)


def test_marg_plan_says_tiny_sites_put_nearly_everything_on_the_label_table(tmp_path):
    """Before anything is spent, ``marg plan`` prints the split rule's choice and why; at 19 patients a site
    (leukemia) nothing can rise above the noise, so the label table takes nearly all the total (it failed on
    the old code: constant shares, and the holdout planner refused its own modelled error above 1)."""
    from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label

    schema = tmp_path / "genes.json"
    Codebook(features=tuple(CategoricalFeature(f"g{j}", ("lo", "mid", "hi")) for j in range(500)),
             label=Label("y", ("ALL", "AML"))).save(schema)
    r = marg("plan", "--rows", "19,19,19", "--epsilon", "1", "--schema", schema, "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    split = json.loads(r.stdout)["select_then_measure"]["plan"]["split"]
    assert split["label_share"] >= 0.9 and split["p_any"] < 0.01
    r = marg("plan", "--rows", "19,19,19", "--epsilon", "1", "--schema", schema, cwd=tmp_path)
    assert r.returncode == 0 and "label table 98%" in r.stdout and "stated rows 19/19/19" in r.stdout, r.stdout


def test_a_large_narrow_study_measures_every_candidate_through_the_console_script(tmp_path):
    """3 sites × 600 patients, 4 binary features: round 2 affords every first-order and pair table within the
    noise rule, so round 1 drops nothing (the label table and a noisy ranking of all 4), the learner's request
    asks for every feature and pair, and the two rounds spend the site's total, never more."""
    w = _world(tmp_path, n=600, p=4)
    r1 = _round1(w, 600)
    from marg.protocols.bundle import Bundle

    st = Bundle.from_bytes(r1[0].read_bytes()).header["study"]
    assert st["selection"]["k"] == st["selection"]["candidates"] == 4 and st["plan"]["split"]["measure_all"] == 1.0
    assert st["spent"]["rho"] <= (st["plan"]["rho_label"] + st["plan"]["rho_select"]) * (1 + 1e-9)
    req = tmp_path / "req.json"
    r = marg("request", *r1, "--out", req, "--trust", w["trust"], "--sign-key", w["keys"] / "learner.sign.key",
             cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    tables = {tuple(c) for c in json.loads(req.read_text())["tables"]}
    assert tables == {(f"f{j}",) for j in range(4)} | {(f"f{i}", f"f{j}") for i in range(4) for j in range(i + 1, 4)}
    r2 = []
    for s, f in enumerate(w["files"]):
        out = tmp_path / f"s{s}.r2"
        r = marg("export", f, "--schema", w["schema"], "--site", f"s{s}", "--out", out, "--request", req, "--trust",
                 w["trust"], cwd=tmp_path, home=tmp_path / f"home{s}")
        assert r.returncode == 0, r.stderr
        r2.append(out)
    _spent_the_total_then_learn(w, r1, r2, 0.2)


# --------------------------------------------------------------------------- small sites: a Laplace label table
def test_small_sites_release_the_label_table_by_laplace_and_round_two_spends_exactly_the_rest(tmp_path):
    from marg.marginals.accounting import PrivacyCost, Spend
    from marg.marginals.counts.dp_conversions import pure_and_zcdp_to_epsilon
    from marg.protocols.bundle import Bundle

    w = _world(tmp_path, n=40)
    r1 = _round1(w, 40)
    tmp = w["tmp"]
    b = Bundle.from_bytes(r1[0].read_bytes())
    plan = b.header["study"]["plan"]
    assert plan["label_mechanism"] == "laplace" and plan["epsilon_label"] > 0
    (lab,) = b.tables
    assert lab.noise.mechanism == "laplace" and lab.noise.epsilon <= plan["epsilon_label"]
    for said in w["round1_said"]:  # the export's privacy line names the label table's noise, not "Gaussian"
        assert "privacy: Laplace + noisy-top-k noise" in said and "of which pure ε = " in said, said
    # marg plan said so before anything was spent: the same mechanism and noise
    r = marg("plan", "--rows", "40,40,40", "--epsilon", "1", "--schema", w["schema"], "--json", cwd=tmp)
    assert r.returncode == 0, r.stderr
    said = json.loads(r.stdout)["select_then_measure"]
    assert said["label_mechanism"] == "laplace" and said["label_std"] == pytest.approx(lab.noise.std, rel=1e-9)
    req = tmp / "req.json"
    r = marg("request", *r1, "--out", req, "--trust", w["trust"], "--sign-key", w["keys"] / "learner.sign.key", cwd=tmp)
    assert r.returncode == 0, r.stderr
    asked = json.loads(req.read_text())["budget"]
    r2 = _round2(w, req)
    for s in range(len(w["files"])):
        # the rest round 2 was given is the plan's zCDP rest (ρ_total − ρ_label) less the selection's ρ
        st = Bundle.from_bytes(r1[s].read_bytes()).header["study"]
        rest = st["plan"]["rho_total"] - st["plan"]["rho_label"] - st["selection"]["rho"]
        assert asked[f"s{s}"]["rho"] == pytest.approx(rest, rel=1e-9)
        # the ledger's entries, composed by Spend: pure ε of the label table plus the zCDP parts at δ — exactly the
        # total
        entries = [json.loads(x) for x in sorted((tmp / f"home{s}").rglob("ledger.jsonl"))[0].read_text().splitlines()]
        costs = [PrivacyCost.from_dict(x["cost"]) for x in entries if x.get("type", "release") == "release"
                 and "cost" in x]
        costs = [c for c in costs if not c.is_zero]  # the two rounds (not the cap's entry)
        assert len(costs) == 2 and costs[0].pure_epsilon > 0 and costs[1].pure_epsilon == 0
        spent = Spend.of(*costs)
        eps = spent.epsilon_at(1e-6)
        assert eps <= 1.0 * (1 + 1e-9) and eps == pytest.approx(1.0, abs=1e-4)
        assert eps == pytest.approx(pure_and_zcdp_to_epsilon(spent.eps_pure, spent.rho_zcdp, 1e-6), rel=1e-12)
    # nothing is left: a one-round release of the smallest ε is refused by the cap, in one line
    r = marg("export", w["files"][0], "--schema", w["schema"], "--site", "s0", "--out", tmp / "more", "--epsilon",
             "0.01",
             "--rounds", "1", cwd=tmp, home=tmp / "home0")
    assert r.returncode != 0 and "budget" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    model = tmp / "model.json"
    r = marg("learn", *r1, *r2, "--out", model, "--trust", w["trust"], "--no-sign", cwd=tmp)
    assert r.returncode == 0, r.stderr


def test_audit_show_names_the_pure_and_the_zcdp_parts_of_a_mixed_ledger(tmp_path):
    """After a round 1 with a Laplace label table (a mixed release: pure ε_L + the selection's zCDP ρ), `marg audit
    show` says "pure ε=ε_L (Laplace) + ρ=ρ_sel (zCDP …) = (ε, δ) by OpenDP's composition", ε equal to OpenDP's
    pure+zCDP composition, and no longer a ρ holding the Laplace part's ε_L²/2 beside an ε it does not convert to.
    The release's pure ρ is its own cost's (``pure_rho``, release_cost's split), not recomputed by the ledger."""
    from marg.marginals.accounting import PrivacyCost, Spend
    from marg.marginals.counts.dp_conversions import pure_and_zcdp_to_epsilon, pure_rho

    w = _world(tmp_path, n_sites=1, n=40)
    _round1(w, 40)
    r = marg("audit", "show", cwd=w["tmp"], home=w["tmp"] / "home0")
    assert r.returncode == 0, r.stderr
    (line,) = [x for x in r.stdout.splitlines() if x.startswith("Spent so far:")]
    out = _ledger_spend(w, 0)
    (cost,) = [PrivacyCost.from_dict(e["cost"]) for e in out["entries"] if e.get("kind", "release") == "release"]
    assert cost.pure_epsilon > 0 and cost.pure_rho == pytest.approx(pure_rho(cost.pure_epsilon), rel=1e-12)
    spend = Spend.of(cost)
    assert spend.rho_zcdp == pytest.approx(cost.rho - cost.pure_rho, rel=1e-12) and spend.rho_zcdp < 0.01
    eps = pure_and_zcdp_to_epsilon(spend.eps_pure, spend.rho_zcdp, 1e-6)
    assert out["spent"]["epsilon"] == pytest.approx(eps, rel=1e-12)
    want = (f"Spent so far: pure ε={spend.eps_pure:.4g} (Laplace) + ρ={spend.rho_zcdp:.4g} (zCDP: the other releases' "
            f"ρ add) = (ε={eps:.4g}, δ=1e-06) by OpenDP's composition of pure DP with zCDP")
    assert line.startswith(want), line
    assert f"ρ={cost.rho:.4g}" not in line  # the ρ with the Laplace part's ε²/2 (≈ 0.38 here) is not what was spent
