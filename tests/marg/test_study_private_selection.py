"""A wide study's round 1 with the private selection (:mod:`marg.protocols.study_top_k`): the label table through
the secure sum, each site's own OpenDP top-k, the learner's vote, round 2 pooled; its cost against OpenDP's map."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from tests.helpers.console import run

SITES = ("north", "south", "city")
P, STRONG, ROWS = 100, 4, 300


def _wide_rows(rng, n):
    """n rows of P binary features; the first STRONG copy the label except a fifth of the rows, the rest are coins."""
    y = rng.integers(0, 2, n)
    X = rng.integers(0, 2, (n, P))
    for j in range(STRONG):
        X[:, j] = np.where(rng.random(n) < 0.2, 1 - y, y)
    return X, y


@pytest.fixture(scope="module")
def wide_study(tmp_path_factory):
    """Three sites of 300 patients over 100 binary features, declared (rows stated) and run to its end in process."""
    from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label

    d = tmp_path_factory.mktemp("wide")
    cb = Codebook(features=tuple(CategoricalFeature(f"g{j}", ("a", "b")) for j in range(P)),
                  label=Label("y", ("n", "p")))
    cb.save(d / "codebook.json")
    rng = np.random.default_rng(4401)
    data, homes = {}, {}
    roster, drop = d / "roster", d / "drop"
    roster.mkdir()
    drop.mkdir()
    for s in SITES:
        X, y = _wide_rows(rng, ROWS)
        lines = [",".join([f"g{j}" for j in range(P)] + ["y"])]
        lines += [",".join([("a", "b")[v] for v in row] + [("n", "p")[c]]) for row, c in zip(X, y)]
        data[s] = d / f"{s}.csv"
        data[s].write_text("\n".join(lines) + "\n")
    for name, role in [(s, "site") for s in SITES] + [("learner", "learner")]:
        homes[name] = d / f"home-{name}"
        assert run("keys", "init", "--site", name, "--role", role, "--dir", homes[name] / "keys").exit_code == 0
        for suffix in (".sign.pub", ".seal.pub"):
            (roster / f"{name}{suffix}").write_bytes((homes[name] / "keys" / f"{name}{suffix}").read_bytes())
    study = d / "study.json"
    r = run("study", "init", "--schema", d / "codebook.json", "--roster", roster, "--epsilon", "1", "--delta", "1e-6",
            "--drop", drop, "--sign-key", homes["learner"] / "keys" / "learner.sign.key", "--out", study,
            "--rows", ",".join([str(ROWS)] * 3))
    assert r.exit_code == 0, r.output
    for _ in range(8):
        r = run("study", "run", study, "--learner", "--json", home=homes["learner"])
        assert r.exit_code == 0, r.output
        if (drop / "final" / "result.json").exists():
            break
        for s in SITES:
            r = run("study", "run", study, "--site", s, "--data", data[s], home=homes[s])
            assert r.exit_code == 0, r.output
    return {"dir": d, "study": study, "drop": drop, "homes": homes, "data": data}


def _entries(home):
    p = home / "ledger" / "ledger.jsonl"
    return [e for e in (json.loads(x) for x in p.read_text().splitlines() if x.strip()) if e.get("kind") == "release"]


def test_the_design_chooses_the_private_selection_and_the_study_ends_in_a_model(wide_study):
    plan = json.loads(wide_study["study"].read_text())["plan"]
    assert plan["selection"] == plan["selection_run"] == "private"
    assert abs(plan["rho_label"] + plan["rho_select"] - plan["rho"]["select"]) <= 1e-12 * plan["rho"]["select"]
    result = json.loads((wide_study["drop"] / "final" / "result.json").read_text())
    assert result["model"] and 0.0 < result["certificate"] <= 1.0
    # round 1 released one pooled table (the label's); the sites' selections travelled in their signed uploads
    from marg.protocols.bundle import Bundle

    s1 = Bundle.from_bytes((wide_study["drop"] / "select" / "sum.bundle").read_bytes())
    assert [t.clique for t in s1.tables] == [("y",)]
    sels = [p["selection"] for p in s1.header["privacy"]["per_site"]]
    assert sorted(s["site"] for s in sels) == sorted(SITES) and all(s["candidates"] == P for s in sels)
    # round 2 measured the features the sites agreed on: the strong ones lead every site's top-k at 300 patients
    measure = json.loads((wide_study["drop"] / "measure" / "round.json").read_text())["study"]["selection"]
    assert set(measure["measured"]) <= {f"g{j}" for j in range(P)}
    assert len(set(measure["measured"]) & {f"g{j}" for j in range(STRONG)}) >= STRONG - 1


def test_the_ledger_charges_the_label_tables_secure_sum_plus_opendps_top_k_map(wide_study):
    from marg.marginals.counts.dp_conversions import rho_for_epsilon
    from marg.marginals.selection import top_k_measurement
    from marg.protocols.bundle import Bundle
    from marg.marginals.shared_noise import shared_plan
    from marg.marginals.data.codebook import Codebook

    plan = json.loads(wide_study["study"].read_text())["plan"]
    cb = Codebook.load(wide_study["dir"] / "codebook.json")
    label = shared_plan(cb, [("y",)], plan["rho_label"], 2, 3, delta=1e-6)
    s1 = Bundle.from_bytes((wide_study["drop"] / "select" / "sum.bundle").read_bytes())  # each site's signed selection
    for s in SITES:
        entries = _entries(wide_study["homes"][s])
        assert len(entries) == 3  # select, measure, evaluate: one ledger entry each
        assert abs(sum(e["cost"]["rho"] for e in entries) - rho_for_epsilon(1.0, 1e-6)) < 1e-9
        first = entries[0]
        sel = next(p["selection"] for p in s1.header["privacy"]["per_site"] if p["selection"]["site"] == s)
        # OpenDP's own map of the noisy top-k the site ran (monotonic L∞, zCDP) at its recorded scale
        meas = top_k_measurement(sel["k"], sel["scale"])
        top = float(meas.map(1.0))
        assert top == sel["rho"] <= plan["rho_select"] * (1 + 1e-12)
        assert float(top_k_measurement(sel["k"], sel["scale"] * (1 - 1e-6)).map(1.0)) > plan["rho_select"] * (1 - 1e-5)
        # the cost charged: the secure sum's guarantee for the label table plus the top-k (zCDP: ρ's add)
        assert math.isclose(first["cost"]["rho"], label.study_cost().rho + top, rel_tol=1e-12)
        # the site's own guarantee (every other party colluding): its share alone plus the same top-k
        assert math.isclose(first["own_cost"]["rho"], label.site_cost().rho + top, rel_tol=1e-12)
        assert first["cost"]["rho"] <= plan["rho"]["select"] * (1 + 1e-9)


def test_a_round_asking_more_than_its_rho_for_the_selection_is_refused():
    from marg.errors import RefusedError
    from marg.protocols.study_top_k import check_top_k

    assert check_top_k({"rho": 0.3, "tables_rho": 0.1, "top_k": {"k": 5, "rho": 0.2}}, "r") == (5, 0.2, 0.1)
    with pytest.raises(RefusedError, match="add to the round"):
        check_top_k({"rho": 0.3, "tables_rho": 0.1, "top_k": {"k": 5, "rho": 0.25}}, "r")
    with pytest.raises(RefusedError, match="malformed"):
        check_top_k({"rho": 0.3, "top_k": {"k": 5, "rho": 0.2}}, "r")


def test_the_pooled_round_one_spends_the_designs_label_and_selection_shares():
    """Round 1 pooled: the label table at the design's ρ_label and each first-order table at ρ_select/p (the half
    split gave the label table one (p + 1)-th of the round: a noise std of 474 a cell on leukemia's 58 patients)."""
    from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label
    from marg.marginals.shared_noise import shared_plan
    from marg.study_select import select_weights

    p = 40
    cb = Codebook(features=tuple(CategoricalFeature(f"g{j}", ("a", "b", "c")) for j in range(p)),
                  label=Label("y", ("n", "p")))
    plan = {"rho_label": 0.02, "rho_select": 0.004}
    w = select_weights(plan, p)
    cliques = [("y",)] + [(f"g{j}", "y") for j in range(p)]
    sp = shared_plan(cb, cliques, 0.024, 2, 3, delta=1e-6, weights=w)
    shares = [t.share for t in sp.tables]
    assert math.isclose(shares[0], 0.02, rel_tol=1e-12)
    assert all(math.isclose(s, 0.004 / p, rel_tol=1e-12) for s in shares[1:])
    assert sp.stds[0] < sp.stds[1] / 10  # the label table far less noisy than a first-order table here
    assert select_weights({}, p) is None and select_weights(plan, 0) is None  # an older study file: the half split


def test_the_mode_rule_on_public_quantities_pooled_where_narrow_private_where_wide_or_hopeless():
    from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label
    from marg.marginals.study_design import design_study

    def cb(p, m=2):
        return Codebook(features=tuple(CategoricalFeature(f"g{j}", tuple("abc"[:m])) for j in range(p)),
                        label=Label("y", ("n", "p")))

    narrow = design_study(cb(36), 3, [1278, 767, 512], 1.0, 1e-6, threshold=2)  # kr-vs-kp's shape
    assert narrow.selection == "pooled"
    wide = design_study(cb(1000), 3, [1000] * 3, 1.0, 1e-6, threshold=2)  # the planted study's shape, fewer features
    assert wide.selection == "private" and wide.mode_errors["private"] < wide.mode_errors["pooled"] - 0.1
    tiny = design_study(cb(300, 3), 3, [29, 17, 12], 1.0, 1e-6, threshold=2)  # a gene set's sites: nothing is found
    assert tiny.selection == "private" and abs(tiny.mode_errors["private"] - tiny.mode_errors["pooled"]) < 1e-3
    assert tiny.split["p_any"] < 0.5


def test_the_vote_keeps_what_two_sites_chose_and_falls_back_to_one_feature_marked_as_nothing_agreed():
    from types import SimpleNamespace

    from marg.study_select import voted_features

    def sel(site, feats):
        return {"selection": {"site": site, "features": feats, "candidates": 5000, "scale": 3.0, "sensitivity": 1.0,
                              "rho": 0.01}}

    study = SimpleNamespace(names=list(SITES), plan={"rows": [500, 300, 200], "rows_stated": True})
    agree = SimpleNamespace(header={"privacy": {"per_site": [sel("north", ["g1", "g7"]), sel("south", ["g7", "g2"]),
                                                             sel("city", ["g9", "g1"])]}})
    kept, why = voted_features(study, agree)
    assert set(kept) == {"g1", "g7"} and why["agreed"] == 2  # g1: 70 % of the rows, g7: 80 %; g2, g9 one site each
    apart = SimpleNamespace(header={"privacy": {"per_site": [sel("north", ["g1"]), sel("south", ["g2"]),
                                                             sel("city", ["g3"])]}})
    kept, why = voted_features(study, apart)
    assert kept == ["g1"] and why["agreed"] == 0  # one feature measured; the study's model is then the larger class
