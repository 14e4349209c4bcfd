"""The automatic choice: the rule on a constructed table, the simulated plug-in error, the chooser end to end
on a three-site study, the patients a non-trivial DP certificate needs, and the console script's table."""

from __future__ import annotations

import json

import numpy as np
import pytest

from marg.errors import InputError
from marg.learners.auto import AutoLearner, CandidateRow, choose
from marg.learners.estimator.base import REGISTRY
from marg.learners.choice.cross_site import SEED, in_sample_error, sample_error, tan_sample
from marg.learners.certification.sample_size import scaled_summary
from marg.marginals.summary import Summary, sum_tables
from tests.helpers.tan import tan_codebook as _tan_codebook, tan_rows as _tan_rows, three_sites as _three_sites


def _row(name, error, cert, folds=(), trivial=None):
    return CandidateRow(name, {}, error=error, certificate=cert, kind="W(h)" if cert is not None else "",
                        folds=list(folds), trivial=bool(cert is not None and cert >= 0.5) if trivial is None
                        else trivial)


def test_the_rule_on_a_constructed_table():
    rows = [_row("a", 0.150, 0.90), _row("b", 0.155, 0.40), _row("c", 0.171, 0.30), _row("d", None, 0.10),
            _row("e", None, None)]
    k, words = choose(rows)  # the default, accuracy: the smallest estimate, whatever its certificate
    assert rows[k].learner == "a" and "the smallest estimated error (a, 0.1500)" in words
    k, words = choose(rows, prefer="certificate")  # the former default (balanced), kept under --prefer certificate
    assert rows[k].learner == "b"  # c is 0.021 above the best (no folds: the floor 0.01); d no estimate; e not fitted
    assert "within noise of the best estimate (0.1500" in words
    assert rows[choose(rows, prefer="balanced")[0]].learner == "b"  # the former name
    assert rows[choose(rows, prefer="certificate", tolerance=0.03)[0]].learner == "c"
    # ties: the same certificate goes to the smaller estimated error, the same error to the smaller certificate
    tie = [_row("x", 0.16, 0.4), _row("y", 0.15, 0.4), _row("z", 0.15, 0.45)]
    assert tie[choose(tie, prefer="certificate")[0]].learner == "y" and tie[choose(tie)[0]].learner == "y"
    # no estimate at all: the smallest certificate, and the words say why
    for prefer in ("accuracy", "certificate"):
        k, words = choose([_row("p", None, 0.7), _row("q", None, 0.6)], prefer=prefer)
        assert k == 1 and "no candidate's error could be estimated" in words
    with pytest.raises(InputError, match="no learner could be fitted"):
        choose([_row("e", None, None)])
    with pytest.raises(InputError, match="unknown prefer 'speed'"):
        choose(rows, prefer="speed")


def test_the_accurate_candidate_over_the_label_only_rule_unless_it_is_better_beyond_the_noise():
    """Issue 49: choose for accuracy. Within noise of each other (the prior's non-trivial certificate the smallest),
    the rule with the smallest estimate is taken; the label-only rule only when its estimate is lower than that rule's
    by more than max(tolerance, one standard error of the paired difference); never a rule estimated worse than the
    prior beyond that noise."""
    from marg.learners.choice.choice_rule import paired_se

    # four candidates within noise, the prior's certificate the only non-trivial one (the small-study table of issue 49)
    nb = _row("nb", 0.363, 0.95, folds=[0.30, 0.40, 0.39])
    mrc = _row("mrc", 0.379, 0.90, folds=[0.33, 0.41, 0.40])
    prior = _row("prior", 0.404, 0.483, folds=[0.44, 0.38, 0.39], trivial=False)
    rows = [mrc, nb, prior]
    assert paired_se(prior.folds, nb.folds) > 0.404 - 0.363  # within one standard error of the best
    k, words = choose(rows)
    assert rows[k] is nb and "is not estimated better by more than the noise" in words
    assert rows[choose(rows, prefer="certificate")[0]] is prior  # the former rule: the smallest non-trivial certificate
    # the prior estimated worse than the best rule beyond the noise: the accurate rule under both preferences
    far = _row("prior", 0.45, 0.483, folds=[0.45, 0.45, 0.45], trivial=False)
    assert 0.45 - 0.363 > paired_se(far.folds, nb.folds)
    assert [mrc, nb, far][choose([mrc, nb, far])[0]] is nb
    # the prior better beyond the noise: the prior (the same paired spread, every fold 0.05 below naive Bayes's)
    good = _row("prior", 0.313, 0.483, folds=[0.25, 0.35, 0.34], trivial=False)
    assert paired_se(good.folds, nb.folds) < 1e-12
    k, words = choose([mrc, nb, good])
    assert k == 2 and "the larger class: estimated 0.3130, better than the smallest estimated error (nb" in words
    # better, but within the noise: the rule stays
    near = _row("prior", 0.355, 0.483, folds=[0.30, 0.33, 0.45], trivial=False)
    assert 0.363 - 0.355 < paired_se(near.folds, nb.folds)
    assert [mrc, nb, near][choose([mrc, nb, near])[0]] is nb


def test_the_margin_is_the_folds_standard_error():
    from marg.learners.choice.choice_rule import paired_se

    # paired folds: b is 0.03 worse on average; the spread of the differences sets the margin
    a = _row("a", 0.20, 0.9, folds=[0.10, 0.20, 0.30])
    b = _row("b", 0.23, 0.3, folds=[0.22, 0.20, 0.30])
    d = np.array([0.12, 0.0, 0.0])
    se = np.sqrt(3 / 2 * np.sum((d - d.mean()) ** 2) / 9)  # equal weights: the textbook weighted SE
    assert paired_se(b.folds, a.folds) == pytest.approx(se, abs=1e-12) and se > 0.03
    assert choose([a, b], prefer="certificate")[0] == 1  # within one standard error: the non-trivial certificate
    assert choose([a, b])[0] == 0  # the default: the smaller estimate
    tight = _row("b", 0.23, 0.3, folds=[0.13, 0.23, 0.33])  # the same 0.03 everywhere: no noise, the floor only
    assert paired_se(tight.folds, a.folds) == pytest.approx(0.0, abs=1e-12)
    assert choose([a, tight], prefer="certificate")[0] == 0
    # weights: the sites' n
    assert paired_se([0.1, 0.2], [0.0, 0.0], [1, 1]) == pytest.approx(np.sqrt(2 * 2 * 0.25 * 0.05 ** 2), abs=1e-12)


def test_a_trivial_certificate_is_no_reason_and_the_prior_is_a_floor():
    """Under --prefer certificate (the former default)."""
    # within noise of each other, both trivial: the smaller estimate, not the smaller (trivial) certificate
    rows = [_row("mrc", 0.145, 0.50), _row("renyi", 0.150, 0.60), _row("nb", 0.152, 0.95)]
    k, words = choose(rows, prefer="certificate")
    assert rows[k].learner == "nb" and "trivial certificate, which is no reason" in words  # the noise order
    assert rows[choose(rows[:2], prefer="certificate")[0]].learner == "renyi"
    rows[2] = _row("nb", 0.170, 0.95)  # outside the noise: the smaller estimates decide, in the same order
    assert rows[choose(rows, prefer="certificate")[0]].learner == "renyi"
    # a rule estimated worse than the label-only rule is never chosen, whatever prefer says
    rows = [_row("mrc", 0.40, 0.20, trivial=False), _row("nb", 0.30, 0.90), _row("prior", 0.31, 0.45, trivial=False)]
    for prefer in ("certificate", "accuracy"):
        k, words = choose(rows, prefer=prefer)
        assert rows[k].learner in ("nb", "prior")
    assert "never a rule estimated worse than the larger class (0.3100)" in choose(rows, prefer="certificate")[1]
    assert rows[choose(rows, prefer="certificate")[0]].learner == "prior"  # within noise: its non-trivial certificate
    assert rows[choose(rows)[0]].learner == "nb"  # accuracy: the prior is not better beyond the noise


def test_a_default_is_kept_unless_beaten_beyond_the_noise_at_95_percent():
    """choice_rule's "Defaults": the first default stays unless the rule's pick is estimated lower by more than
    max(tolerance, 1.96 standard errors of the paired difference), then the next is tried; never one estimated
    worse than the prior."""
    from marg.learners.choice.choice_rule import DEFAULT_Z, paired_se

    one = _row("nb", 0.160, 1.0, folds=[0.15, 0.16, 0.17])  # the rule on one feature: the default
    d = np.array([-0.06, -0.02, 0.0])  # naive Bayes on all features: 0.0267 lower on average, noisy
    nb = _row("nb", 0.160 + d.mean(), 1.0, folds=list(np.array(one.folds) + d))
    prior = _row("prior", 0.45, 1.0, folds=[0.45, 0.45, 0.45])
    se = paired_se(nb.folds, one.folds)
    assert 0.0267 < DEFAULT_Z * se and 0.0267 > se  # beyond one standard error, within 1.96
    rows = [nb, one, prior]
    assert choose(rows, prefer="accuracy")[0] == 0  # without a default: the smallest estimate
    k, words = choose(rows, prefer="accuracy", defaults=[1])
    assert k == 1 and "the default nb (estimated 0.1600)" in words
    assert choose(rows, prefer="certificate", defaults=[1])[0] == 1  # both preferences keep a default not beaten
    # the same mean difference at a third of the spread: beyond 1.96 se, the default is replaced
    tight = _row("nb", nb.error, 1.0, folds=list(np.array(one.folds) + d.mean() + (d - d.mean()) / 3))
    assert d.mean() * -1 > DEFAULT_Z * paired_se(tight.folds, one.folds)
    k, words = choose([tight, one, prior], prefer="accuracy", defaults=[1])
    assert k == 0 and "beats the default (nb) beyond the noise at 95 %" in words
    # beaten, the next default is tried the same way: Rényi within 1.96 se of the pick stays
    renyi = _row("renyi", tight.error + 0.005, 1.0, folds=list(np.array(tight.folds) + [0.02, -0.01, 0.005]))
    k, words = choose([tight, one, prior, renyi], prefer="accuracy", defaults=[1, 3])
    assert k == 3 and "the default renyi" in words and "beaten: nb" in words
    # a default estimated worse than the prior is never kept
    bad = _row("nb", 0.47, 1.0, folds=[0.46, 0.47, 0.48])
    assert choose([_row("dcc", 0.44, 1.0, folds=[0.44, 0.45, 0.43]), bad, prior], prefer="accuracy",
                  defaults=[1])[0] != 1

def test_the_chooser_end_to_end_on_three_exact_sites():
    from marg.learners.certification.choice_certificates import label_certificate

    rng = np.random.default_rng(2)
    cb, S, parts = _three_sites(rng, (250, 150, 100))
    auto = AutoLearner(coverage=0.9).fit(S)
    rows = auto.candidates_
    assert [r.learner for r in rows] == ["mrc", "dcc", "dcc", "nb", "renyi", "prior"]
    each = 1 - 0.1 / 6  # one event for the six certificates compared: α split over them
    assert auto.each_coverage_ == pytest.approx(each) and auto.confidence_["candidates"] == 6
    for k, (row, fitted) in enumerate(zip(rows, auto.fitted_)):
        # the certificate is of the labels the candidate predicts, fitted alone at the split coverage
        alone = REGISTRY[row.learner](**row.params, coverage=each).fit(S)
        cert, rstar = label_certificate(alone, S, each)
        assert row.certificate == pytest.approx(cert.value, abs=1e-9) and row.kind == "W(h)"
        if row.learner in ("mrc", "dcc"):  # R* under its own name, never the certificate
            assert row.minimax_risk == pytest.approx(alone.minimax_risk_.value, abs=1e-9)
        # the estimate: fitted without site j, its error on rows simulated from site j's tables
        folds = []
        for j in range(3):
            rest = Summary(cb, sum_tables([p[1] for i, p in enumerate(parts) if i != j])[0])
            est = REGISTRY[row.learner](**{**row.params, **({"certify": "bound"} if row.learner == "nb" else {})},
                                        coverage=each).fit(rest)
            folds.append(sample_error(est, tan_sample(Summary(cb, list(parts[j][1])), seed=SEED + j)))
        assert row.method == "loso" and row.folds == pytest.approx(folds, abs=1e-12)
        # floored at the handed-out model's plug-in error under the whole summary (cross_site.whole_floor)
        whole = sample_error(fitted, tan_sample(S))
        assert row.error == pytest.approx(max(np.average(folds, weights=[250, 150, 100]), whole), abs=1e-12)
    k_want, _ = choose(rows)
    assert [r.chosen for r in rows].count(True) == 1 and rows[k_want].chosen
    assert auto.chosen_ is auto.fitted_[k_want] and auto.certificate_ == auto.chosen_.certificate_
    assert auto.certificate_.value == rows[k_want].certificate and auto.certificate_.coverage == 0.9
    X, _ = _tan_rows(rng, 300)
    assert np.array_equal(auto.predict(X), auto.fitted_[k_want].predict(X))
    # the default (accuracy): the smallest estimate, the prior estimated worse here
    assert auto.prefer is None and auto.prefer_ == "accuracy" and rows[k_want].error == min(r.error for r in rows)
    assert rows[k_want].learner != "prior" and all(r.error_se is not None and r.error_se > 0 for r in rows)
    by_cert = AutoLearner(coverage=0.9, prefer="certificate").fit(S)  # the former default
    k_cert, _ = choose(rows, prefer="certificate")
    assert [r.chosen for r in by_cert.candidates_].index(True) == k_cert
    assert auto.patients_ is None  # exact tables: no DP line


def test_one_site_uses_the_in_sample_estimate_and_says_so():
    rng = np.random.default_rng(3)
    cb = _tan_codebook()
    X, y = _tan_rows(rng, 500)
    S = Summary.from_rows(cb, X, y, stats="all")
    auto = AutoLearner(candidates=[("mrc", {}), ("nb", {})]).fit(S)
    assert auto.error_method_.startswith("in sample (no site's own tables were kept, only their sum)")
    for row, est in zip(auto.candidates_, auto.fitted_):
        assert row.method == "in-sample" and row.error == pytest.approx(in_sample_error(est, S).value, abs=1e-12)
    # a three-class label from first-order tables only: still an estimate per candidate, and it says how
    from tests.conftest import random_codebook, random_rows

    cb3 = random_codebook(rng, n_features=4, max_levels=3, n_classes=3)
    X3, y3 = random_rows(rng, cb3, 600)
    S3 = Summary.from_rows(cb3, X3, y3, stats="first")
    auto3 = AutoLearner().fit(S3)
    assert "no pair tables, so the features are simulated independent given the label" in auto3.error_method_
    for row, est in zip(auto3.candidates_, auto3.fitted_):
        if est is None:
            assert row.learner in ("dcc", "renyi") and row.note  # they need pair tables, and say so
            continue
        assert row.error == pytest.approx(sample_error(est, tan_sample(S3)), abs=1e-12) and 0 <= row.error <= 1
    with pytest.raises(InputError, match="cannot be auto itself"):
        AutoLearner(candidates=[("auto", {})]).fit(S)


def test_under_dp_too_few_patients_gives_the_patients_a_non_trivial_certificate_needs():
    rng = np.random.default_rng(4)
    cb, S, _ = _three_sites(rng, (300, 200, 100), epsilon=0.2)
    auto = AutoLearner(candidates=[("mrc", {}), ("nb", {"certify": "bound"})]).fit(S)
    assert all(r.certificate >= 0.5 - 1e-9 for r in auto.candidates_)  # every candidate trivial
    p = auto.patients_
    assert p is not None and p.needed is not None and p.needed > S.n and p.certificate < 0.5
    cand = next(r for r in auto.candidates_ if r.learner + ("(certify=bound)" if r.params else "") == p.learner)
    # recompute: the same learner on the tables scaled to that many patients, the noise records kept
    big = scaled_summary(S, p.factor)
    assert big.n == pytest.approx(p.needed, rel=0.02)
    assert [t.noise for t in big.released().tables] == [t.noise for t in S.tables]
    from marg.learners.certification.choice_certificates import label_certificate

    est = REGISTRY[cand.learner](**cand.params, coverage=auto.each_coverage_).fit(big)
    assert label_certificate(est, big, auto.each_coverage_)[0].value == pytest.approx(p.certificate, abs=1e-9)
    from marg.learners.certification.sample_size import patients_line

    line = patients_line(auto.choice_report())
    assert f"would need about {p.needed:,} patients" in line and "\n" not in line


def test_estimator_persistence_keeps_the_table(tmp_path):
    rng = np.random.default_rng(5)
    cb, S, _ = _three_sites(rng, (200, 100, 100))
    auto = AutoLearner(candidates=[("mrc", {}), ("renyi", {})]).fit(S)
    again = AutoLearner.from_dict(json.loads(json.dumps(auto.to_dict())))
    assert [r.to_dict() for r in again.candidates_] == [r.to_dict() for r in auto.candidates_]
    assert again.rule_ == auto.rule_ and again.chosen_.learner == auto.chosen_.learner


# ------------------------------------------------------------------ the console script
@pytest.mark.parametrize("prefer", ["accuracy", "certificate"])
def test_console_script_table_matches_the_model_file(site_bundles, prefer):
    from marg.cli.learn import choice_lines
    from marg.learners.estimator.model import Model
    from tests.helpers.console import marg

    tmp, bundles = site_bundles
    out, out2 = tmp / f"auto-{prefer}.json", tmp / f"auto-{prefer}-2.json"
    r = marg("learn", *bundles, "--prefer", prefer, "--out", out, "--json", "--allow-unsigned", cwd=tmp)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    m = Model.load(out)
    rep = m.info["report"]
    assert d["auto"] == rep["auto"] and d["auto_rule"] == rep["auto_rule"] and d["auto_prefer"] == prefer
    chosen = [c for c in d["auto"] if c["chosen"]]
    assert len(chosen) == 1 and m.learner == chosen[0]["learner"] == d["learner"]
    assert m.worst_case_error == pytest.approx(chosen[0]["certificate"], abs=1e-12)
    fitted = [c for c in d["auto"] if c["certificate"] is not None]
    from marg.learners.auto import CandidateRow

    assert fitted and d["auto"].index(chosen[0]) == choose([CandidateRow(**c) for c in d["auto"]], prefer)[0]
    assert d["auto_confidence"]["candidates"] == len(d["auto"])
    # each estimate's own noise beside it: the standard error of the folds' weighted mean
    from marg.learners.choice.choice_rule import estimate_se

    for c in d["auto"]:
        if c["error"] is not None:
            assert c["error_se"] == pytest.approx(estimate_se(c["folds"], c["fold_weights"]), abs=1e-12)
    text = marg("learn", *bundles, "--prefer", prefer, "--out", out2, "--allow-unsigned", cwd=tmp)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    printed = choice_lines(Model.load(out2).info["report"])
    assert lines[: len(printed)] == printed  # the table printed is the one the model file keeps
    assert sum(1 for ln in printed if ln.startswith("  * ")) == 1
    # the model card shows the same table (every number in a data-key span)
    import re

    from marg.reports.model_card import model_card

    html = model_card(m)
    shown = dict(re.findall(r'data-key="(auto_(?:error|certificate):\d+)" data-value="([^"]*)"', html))
    for k, c in enumerate(d["auto"]):
        for key in ("error", "certificate"):
            want = "" if c[key] is None else repr(float(c[key]))
            assert shown[f"auto_{key}:{k}"] == want
    bad = marg("learn", *bundles, "--prefer", "speed", "--out", tmp / "x.json", "--allow-unsigned", cwd=tmp)
    assert bad.returncode == 2 and "unknown prefer 'speed'" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_held_out_evidence_replaces_the_estimate_and_is_compared_by_its_own_noise():
    """Issue 49, an evaluation round's evidence (choice_rule.with_heldout): credit-a's table under suppression, where
    leave-one-site-out's independent simulated rows flatter naive Bayes (estimated 0.031, test 0.188) over the MRC
    (0.148, test 0.135). Measured on 300 held-out patients, naive Bayes errs 57 and the MRC 40: the MRC is chosen,
    each estimate the held-out rate with its binomial standard error. The larger class measured on the same patients
    is taken only when better beyond the unpaired noise √(se² + se²)."""
    from marg.learners.choice.choice_rule import HELDOUT, noise_margin, with_heldout

    w = [241.0, 144.0, 98.0]
    mrc = CandidateRow("mrc", {}, error=0.148, certificate=0.516, kind="W(h)", folds=[0.144, 0.119, 0.202],
                       fold_weights=w, trivial=True)
    nb = CandidateRow("nb", {}, error=0.031, certificate=1.0, kind="W(h)", folds=[0.025, 0.024, 0.057],
                      fold_weights=w, trivial=True)
    prior = CandidateRow("prior", {}, error=0.458, certificate=0.519, kind="W(h)", folds=[0.473, 0.438, 0.449],
                         fold_weights=w)
    rows = [mrc, nb, prior]
    assert rows[choose(rows)[0]] is nb
    got = with_heldout(rows, {0: (40, 300, 0.0), 1: (57, 300, 0.0)})
    assert rows[1].error == 0.031 and rows[1].folds  # the caller's rows are not changed
    assert got[choose(got)[0]].learner == "mrc"
    assert got[0].method == HELDOUT and got[0].folds == [] and got[0].error == pytest.approx(40 / 300)
    assert got[1].error_se == pytest.approx(np.sqrt(0.19 * 0.81 / 300))
    noisy = with_heldout(rows, {0: (40, 300, 6.0)})[0]
    assert noisy.error_se == pytest.approx(np.sqrt((40 / 300) * (260 / 300) / 300 + (6 / 300) ** 2))
    # the larger class on the same patients: better beyond the noise is chosen, within it the rule stays
    better = with_heldout(rows, {0: (80, 300, 0.0), 1: (90, 300, 0.0), 2: (45, 300, 0.0)})
    assert noise_margin(better[2], better[0], 0.01) < 80 / 300 - 45 / 300
    assert better[choose(better)[0]].learner == "prior"
    near = with_heldout(rows, {0: (40, 100, 0.0), 1: (45, 100, 0.0), 2: (35, 100, 0.0)})
    assert 0.40 - 0.35 < noise_margin(near[2], near[0], 0.01)
    assert near[choose(near)[0]].learner == "mrc"
    with pytest.raises(InputError, match="3 candidates"):
        with_heldout(rows, {5: (1, 10, 0.0)})
    with pytest.raises(InputError, match="at least one"):
        with_heldout(rows, {0: (0, 0, 0.0)})
