"""A study's design (issue 44): the rounds' ρ add to the site's total, shared noise is planned as one curator's over
the threshold, the evaluation share and held-out fraction minimise the expected certificate on their grid, the
selection mode follows the smaller expected error (√p against log p), and the design round-trips through JSON."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.stats import norm

from marg.errors import InputError
from marg.marginals import study_design as sd
from marg.marginals import study_split as ss
from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label
from marg.marginals.counts.dp_conversions import rho_for_epsilon


def codebook(p: int, m: int = 3, classes: int = 2) -> Codebook:
    return Codebook(features=tuple(CategoricalFeature(f"x{i}", tuple(str(v) for v in range(m))) for i in range(p)),
                    label=Label("y", tuple(f"c{c}" for c in range(classes))))


@pytest.fixture(scope="module")
def votes():
    """house-votes-84's shape: 16 features of 3 levels, 348 patients at 3 sites 50/30/20 %, ε = 1, t = 2."""
    return sd.design_study(codebook(16), 3, (174, 104, 70), 1.0, 1e-6, 2)


@pytest.fixture(scope="module")
def adult():
    """adult's shape: 14 features of 5 levels, 39,074 training patients at 3 sites 50/30/20 %, ε = 1, t = 2."""
    return sd.design_study(codebook(14, 5), 3, (19537, 11722, 7815), 1.0, 1e-6, 2)


@pytest.fixture(scope="module")
def planted():
    """3 sites of 1,000 patients, 40 binary features."""
    return sd.design_study(codebook(40, 2), 3, (1000, 1000, 1000), 1.0, 1e-6, 2)


def test_the_rounds_add_to_the_sites_total_as_opendp_converts_it(votes, planted):
    for d in (votes, planted):
        rho = rho_for_epsilon(1.0, 1e-6)
        assert d.rho_total == pytest.approx(rho, rel=1e-12)
        assert sum(d.rounds.values()) == pytest.approx(rho, rel=1e-9)
        assert min(d.rounds.values()) > 0 and d.rho_label > 0 and (d.rho_select > 0) == (d.selection != sd.FIRST_ORDER)
    assert planted.round_names == ("select", "measure", "evaluate") and 0.10 <= planted.holdout <= 0.50
    assert votes.round_names == ("select", "measure") and votes.holdout == 0.0  # too small for an evaluation round
    off = sd.design_study(codebook(16), 3, (174, 104, 70), 1.0, 1e-6, 2, evaluate=False)
    assert off.round_names == ("select", "measure") and off.holdout == 0.0 and off.rho_evaluate == 0.0
    assert sum(off.rounds.values()) == pytest.approx(off.rho_total, rel=1e-9) and off.expected_certificate == 1.0


def test_shared_noise_is_planned_as_the_pooled_sums_variance_and_lowers_the_expected_error():
    assert sd.curators("shared", 3, 2) == 1.5 and sd.curators("per-site", 3, 2) == 3.0
    assert sd.curators("shared", 10, 6) == pytest.approx(10 / 6)
    args = (codebook(16), 3, (174, 104, 70), 1.0, 1e-6, 2)
    shared = sd.design_study(*args, evaluate=False)
    per_site = sd.design_study(*args, evaluate=False, noise="per-site")
    assert per_site.threshold == 3 and shared.threshold == 2
    # the same split rule with less pooled noise: its least expected error cannot be larger
    assert shared.expected_error <= per_site.expected_error + ss.TIE
    x = ss.SplitInputs((174, 104, 70), (3,) * 16, 2, shared.rho_total, 1, 1.5)
    y = ss.SplitInputs((174, 104, 70), (3,) * 16, 2, shared.rho_total)
    assert y.curators == 3.0 and ss.k_max(x, 0.5) >= ss.k_max(y, 0.5)
    # round 2's flip probability at the same share: σ_2² scales with the curators (1.5 against 3)
    assert float(ss._p_flip(x, 0.5, 4.0)) < float(ss._p_flip(y, 0.5, 4.0))


def test_the_expected_bound_is_its_stated_formula():
    p, n, v, C = 0.2, 200.0, 10.0, 2
    a = 0.05 * 6 / math.pi ** 2 / 2
    n_low = n - norm.isf(0.25 * a) * math.sqrt(C * C * v)
    want = (p * n + norm.isf(0.75 * a) * math.sqrt(n * p * (1 - p) + C * (C - 1) * v)) / n_low
    assert sd.expected_bound(p, n, v, C) == pytest.approx(want, rel=1e-12)
    assert sd.expected_bound(p, 5.0, 1e4, C) == 1.0  # the held-out count's lower bound is below zero
    assert sd.expected_bound(p, n, 0.0, C) < sd.expected_bound(p, n, v, C) < sd.expected_bound(p, n, 4 * v, C)


def test_the_evaluation_choice_minimises_the_error_plus_the_needed_width_on_its_grid(votes, planted, adult):
    """J = p_m + max(W, WIDTH_NEED) is least at the choice (within J_TIE), and no tied round leaves training more
    signal (1 − f)²·(1 − a_E), recomputed here from the stated formula over the whole grid."""
    assert votes.selection == sd.FIRST_ORDER  # its evaluation: tests/marginals/test_study_first_order.py
    for d in (planted, adult):
        x = ss.SplitInputs(d.rows, d.levels, d.classes, d.rho_total, 1, d.curators)
        full = sd.mode_split(x, d.selection, True) if not ss.measures_all(x) else ss.measure_all_split(x)
        J, W = {}, {}
        for f in sd.FRACTIONS:
            for a in sd.EVAL_SHARES:
                pm = min(0.5, sd.split_error(sd._training(x, f, a), full, d.selection, True))
                W[f, a] = sd.expected_bound(pm, f * sum(d.rows), d.curators / (2 * a * d.rho_total), d.classes) - pm
                J[f, a] = pm + max(W[f, a], sd.WIDTH_NEED)
        best = min(J.values())
        f, a = d.evaluation["holdout"], d.evaluation["evaluate_share"]
        assert J[f, a] <= best + sd.J_TIE
        assert all((1 - ff) ** 2 * (1 - aa) <= (1 - f) ** 2 * (1 - a) + 1e-12 for (ff, aa), v in J.items()
                   if v <= best + sd.J_TIE)
        assert d.holdout == f and d.rho_evaluate == pytest.approx(a * d.rho_total)
        assert sd.training_signal(f, a) == pytest.approx((1 - f) ** 2 * (1 - a))


def test_a_large_study_spends_on_the_evaluation_only_the_width_it_needs(adult):
    """adult's shape: the planning world's model error is flat in (f, a_E) (every candidate measured, the planted
    features found), so the rule takes the least round whose width is within WIDTH_NEED: 10 % of the patients and
    12 % of ρ, where the width alone chose 30 % and 46 % (a width of 0.008 the certificate does not need); that round
    still orders two models SEPARATE apart with probability ≥ 0.975, where a width need of 0.04 (4 % of ρ) did not."""
    ev = adult.evaluation
    assert ev["expected_width"] <= sd.WIDTH_NEED + sd.J_TIE and (adult.holdout, ev["evaluate_share"]) == (0.10, 0.12)
    assert adult.rho_measure > 0.85 * adult.rho_total
    x = ss.SplitInputs(adult.rows, adult.levels, adult.classes, adult.rho_total, 1, adult.curators)
    n_h = adult.holdout * sum(adult.rows)
    assert sd.separation(ev["model_error"], n_h, sd._cell_var(x, 0.12), 2) >= 0.975
    assert sd.separation(ev["model_error"], n_h, sd._cell_var(x, 0.04), 2) < 0.95
    old = {}
    for f in sd.FRACTIONS:  # the previous rule: J = p_m + W, ties to the smallest f, then the smallest a_E
        for a in sd.EVAL_SHARES:
            pm = min(0.5, sd.split_error(sd._training(x, f, a), ss.measure_all_split(x), "pooled", True))
            old[f, a] = sd.expected_bound(pm, f * sum(adult.rows), adult.curators / (2 * a * adult.rho_total), 2)
    least = min(old.values())
    assert min(k for k, v in old.items() if v <= least + sd.J_TIE) == (0.30, 0.46)


def test_separation_is_the_probability_two_models_are_ordered_right():
    """P_sep is a lower bound on a seeded simulation of two models' released error counts (patients where exactly one
    errs, binomial; each count plus the noise of C(C − 1) cells): its sampling variance n·(2p_m + gap) is the most."""
    rng = np.random.default_rng(44)
    n, pm, gap, v, C = 3000, 0.15, 0.025, 800.0, 2
    # A alone errs on pm of the patients, B alone on pm + gap: they disagree on 2·pm + gap
    a_only = rng.binomial(n, pm, 200_000)
    b_only = rng.binomial(n - a_only, (pm + gap) / (1 - pm))
    noise = rng.normal(0, math.sqrt(2 * C * (C - 1) * v), a_only.size)
    right = np.mean(b_only - a_only + noise > 0)
    want = sd.separation(pm, n, v, C, gap)
    assert want - 0.005 <= right <= want + 0.03


def test_the_selection_mode_is_the_smaller_expected_error_and_pooled_costs_grow_with_p():
    gaps = []
    for p in (16, 40):  # 3 sites of 300 patients
        x = ss.SplitInputs((300, 300, 300), (2,) * p, 2, rho_for_epsilon(1.0, 1e-6), 1, 1.5)
        e = {m: sd.mode_split(x, m, True).expected_error for m in sd.MODES}
        gaps.append(e["pooled"] - e["private"])
    assert abs(gaps[0]) < 0.002 and gaps[1] > 0.01  # noise on p pooled scores grows like √p, a top-k's like log p
    wide = sd.design_study(codebook(100, 2), 3, (300, 300, 300), 1.0, 1e-6, 2, evaluate=False)  # p > 64
    assert wide.selection == "private" and wide.mode_errors["private"] < wide.mode_errors["pooled"]
    narrow = sd.design_study(codebook(40, 2), 3, (300, 300, 300), 1.0, 1e-6, 2, evaluate=False)
    assert narrow.selection == sd.FIRST_ORDER and narrow.mode_errors["private"] < narrow.mode_errors["pooled"]
    many = sd.design_study(codebook(8, 2), 10, (100,) * 10, 1.0, 1e-6, 6, evaluate=False)
    assert many.selection == "pooled" and many.mode_errors["pooled"] <= many.mode_errors["private"] + ss.TIE


def test_the_rules_outputs_for_stated_inputs(votes, planted, adult):
    """Pinned outputs of the rule (they change only when the rule does): house-votes-84's shape and a planted study."""
    assert (votes.selection, votes.k, votes.holdout, votes.rho_evaluate) == (sd.FIRST_ORDER, 16, 0.0, 0.0)
    assert votes.evaluation["none"] == 1.0 and votes.evaluation["power"] == pytest.approx(0.629, abs=0.005)
    assert votes.evaluation["guard_caught"] == pytest.approx(0.077, abs=0.005)
    assert (planted.selection, planted.k, planted.holdout,
            planted.evaluation["evaluate_share"]) == ("pooled", 10, 0.25, 0.26)
    # the final split: within SELECT_TIE of the least E (0.0839), ties to round 2
    assert (0.0839 - 5e-4 <= planted.expected_error <= 0.0839 + ss.SELECT_TIE + 5e-4
            and planted.expected_certificate < 0.15)
    assert adult.split.get("measure_all") == 1.0 and adult.selection == "pooled" and adult.k == 14
    assert adult.expected_certificate - adult.expected_error <= sd.WIDTH_NEED + sd.J_TIE


def test_the_design_round_trips_through_json(votes):
    d = json.loads(json.dumps(votes.to_dict()))
    back = sd.StudyDesign.from_dict(d)
    assert back == votes and back.rounds == votes.rounds
    assert d["round_names"] == ["select", "measure"] and "stated" in d["rule"] and "no evaluation round" in d["rule"]
    with pytest.raises(InputError, match="missing"):
        sd.StudyDesign.from_dict({k: v for k, v in d.items() if k != "holdout"})
    assert any("evaluate: none (no patient held out)" in line for line in sd.design_lines(d))


@pytest.mark.parametrize("kw, match", [
    ({"threshold": 4}, "threshold"), ({"noise": "loud"}, "noise"), ({"epsilon": 0.0}, "epsilon"),
    ({"delta": 1.0}, "delta"), ({"rows": (10, 20)}, "rows"), ({"n_sites": 0}, "sites"),
])
def test_bad_inputs_are_one_line_errors(kw, match):
    args = {"codebook": codebook(4), "n_sites": 3, "rows": (100, 100, 100), "epsilon": 1.0, "delta": 1e-6,
            "threshold": 2, **kw}
    with pytest.raises(InputError, match=match):
        sd.design_study(**args)


def test_without_stated_rows_the_rule_assumes_its_default_and_says_so():
    d = sd.design_study(codebook(4, 2), 4, None, 1.0, 1e-6, 3, evaluate=False)
    assert d.rows == (ss.DEFAULT_ROWS[0],) * 4 and not d.rows_stated and "assumed" in d.to_dict()["rule"]
    assert np.isclose(sum(d.rounds.values()), d.rho_total)


def test_marg_plan_shows_the_studys_design_as_the_library_computes_it(tmp_path):
    from tests.helpers.console import marg

    codebook(6, 2).save(tmp_path / "cb.json")
    r = marg("plan", "--rows", "300,200,100", "--epsilon", "1", "--schema", tmp_path / "cb.json", "--threshold", "2",
             "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)["study_design"]
    want = sd.design_study(codebook(6, 2), 3, (300, 200, 100), 1.0, 1e-6, 2).to_dict()
    assert got == json.loads(json.dumps(want))
    r = marg("plan", "--rows", "300,200,100", "--epsilon", "1", "--schema", tmp_path / "cb.json", cwd=tmp_path)
    assert r.returncode == 0 and "study design (3 sites" in r.stdout and "t = 2" in r.stdout
    assert f"hold out {want['holdout']:.0%} of each site's patients" in r.stdout
    codebook(14, 5).save(tmp_path / "adult.json")  # adult's shape: the width it needs, and what that leaves training
    r = marg("plan", "--rows", "19537,11722,7815", "--epsilon", "1", "--schema", tmp_path / "adult.json", "--threshold",
             "2",
             "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    want = sd.design_study(codebook(14, 5), 3, (19537, 11722, 7815), 1.0, 1e-6, 2).to_dict()
    assert json.loads(r.stdout)["study_design"] == json.loads(json.dumps(want))
    r = marg("plan", "--rows", "19537,11722,7815", "--epsilon", "1", "--schema", tmp_path / "adult.json", cwd=tmp_path)
    assert "hold out 10% of each site's patients" in r.stdout and (f"a width below {sd.WIDTH_NEED:g} buys "
                                                                   "nothing") in r.stdout
