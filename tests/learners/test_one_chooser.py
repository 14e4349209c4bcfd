"""One chooser (issue 36): the automatic choice is one composition — candidates from generators, ONE estimator
(cross_site.estimate_errors), ONE rule with ONE tolerance (choice_rule.choose_index), and the chosen estimator's own
certificate (MarginalEstimator.certificate). Each test fails when the composition breaks: a screened and a plain
candidate compared on different footings, a certificate written from outside the estimator, a tolerance that does
not reach the screened choice."""

from __future__ import annotations

import numpy as np
import pytest

from marg.errors import InputError
from marg.learners.auto import AutoLearner
from marg.learners.certification.choice_certificates import split_coverage
from marg.learners.choice.choice_rule import PRIOR
from marg.learners.choice.cross_site import estimate_errors
from marg.learners.classifiers.mrc import MRC
from marg.learners.classifiers.naive_bayes import NaiveBayes
from marg.learners.choice.screened import SCREEN_MIN_FEATURES, ScreeningCandidates, selection_certificate
from marg.learners.selection.screening import screen_scores
from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label
from marg.marginals.counts.counting import count_tables
from marg.marginals.summary import Summary, sum_tables
from marg.marginals.counts.tables import plan_cliques
from tests.helpers.tan import three_sites


def _wide_sites(seed=5, p=SCREEN_MIN_FEATURES + 10, sizes=(160, 130, 110), strong=3, flip=0.1):
    """Three exact sites, first-order tables: ``strong`` features copy the label (``flip`` of them flipped), the
    rest are noise."""
    rng = np.random.default_rng(seed)
    cb = Codebook(features=tuple(CategoricalFeature(f"g{j}", ("a", "b")) for j in range(p)),
                  label=Label("y", ("no", "yes")))
    parts = []
    for k, n in enumerate(sizes):
        y = rng.integers(0, 2, n)
        X = rng.integers(0, 2, (n, p)).astype(np.float64)
        for j in range(strong):
            X[:, j] = np.where(rng.random(n) < flip, 1 - y, y)
        parts.append((f"s{k}", count_tables(cb, X, y, plan_cliques(cb, "first"))))
    return cb, Summary(cb, sum_tables([t for _, t in parts])[0], site_parts=parts), parts


def test_a_screened_and_a_plain_candidate_are_compared_by_the_same_estimator_on_the_same_folds():
    """A plain naive Bayes on the three label copies and the screened one on the top 3: where every fold's screen
    also picks those three, the one estimator gives both the same fold errors on the same left-out sites (the same
    simulated rows), so the rule compares them on one footing; the screened one's certificate, over every feature's
    box (valid for the selection), is never below the plain one's, over its own three features' box."""
    cb, S, parts = _wide_sites()
    top = ["g0", "g1", "g2"]
    for k in range(3):  # the precondition: without site k the screen still ranks the three copies first
        rest = Summary(cb, sum_tables([t for j, (_, t) in enumerate(parts) if j != k])[0])
        assert sorted(screen_scores(rest).rank()[:3]) == top
    auto = AutoLearner(candidates=[("nb", {"certify": "bound", "features": top}), ("nb", {"screened": 3})]).fit(S)
    plain, screened, prior = auto.candidates_
    assert prior.learner == PRIOR and screened.params == {"screened": 3}
    assert plain.method == screened.method == "loso" and plain.fold_weights == screened.fold_weights == [160, 130, 110]
    assert screened.folds == pytest.approx(plain.folds, abs=1e-12) and len(plain.folds) == 3
    assert screened.error == pytest.approx(plain.error, abs=1e-12)
    assert sorted(auto.fitted_[1].feature_names_in_) == top
    assert screened.certificate >= plain.certificate - 1e-9
    # the same folds as the estimator called directly on the two refits
    gen = ScreeningCandidates(S)
    how, got = estimate_errors(S, [("s", gen.candidate("nb", 3).refit),
                                   ("p", lambda s: NaiveBayes(features=top, certify="bound").fit(s))])
    assert how == "loso" and got["s"].folds == pytest.approx(screened.folds, abs=1e-12)
    assert got["p"].folds == pytest.approx(plain.folds, abs=1e-12)


def test_the_chosen_estimator_certifies_itself():
    """Every certificate the choice shows is the candidate estimator's own, recomputed by its own method at the
    per-box coverage: the plain candidates at 1 − α/m; on wide summaries the chosen screened model's over every
    feature's first-order box at 1 − α/2 (= selection_certificate), the label-only rule's over its label table."""
    _cb, S, _parts = three_sites(np.random.default_rng(38), (220, 180, 150))
    auto = AutoLearner().fit(S)
    each = split_coverage(0.95, len(auto.candidates_))
    assert auto.each_coverage_ == pytest.approx(each)
    for row, est in zip(auto.candidates_, auto.fitted_):
        if est is not None:
            assert est.certificate(S, each).value == pytest.approx(row.certificate, abs=1e-12), row.learner
    assert auto.chosen_.certificate(S, each).value == pytest.approx(auto.certificate_.value, abs=1e-12)
    assert auto.certificate_.coverage == 0.95

    _cb, W, _parts = _wide_sites(seed=6)
    wide = AutoLearner().fit(W)
    assert wide.screen_["applied"] and wide.chosen_.learner != PRIOR
    assert wide.chosen_.selected_from_  # chosen from these tables: it knows, and certifies for the selection
    half = split_coverage(0.95, 2)
    own = wide.chosen_.certificate(W, half)
    assert own.value == pytest.approx(wide.certificate_.value, abs=1e-12)
    assert own.value == pytest.approx(selection_certificate(wide.chosen_, W, half).value, abs=1e-12)
    chosen_row = next(r for r in wide.candidates_ if r.chosen)
    assert chosen_row.certificate == pytest.approx(own.value, abs=1e-12)
    assert all(r.certificate is None for r in wide.candidates_ if not r.chosen)  # only the chosen is certified


def test_an_estimator_certified_at_another_coverage_is_refitted_there():
    """MarginalEstimator.certificate at the coverage it was fitted at is its certificate_; at another it is the
    certificate of the same estimator fitted there (the box is calibrated at the coverage)."""
    _cb, S, _parts = three_sites(np.random.default_rng(3), (200, 150, 120))
    mrc = MRC(coverage=0.95).fit(S)
    assert mrc.certificate(S, 0.95) == mrc.certificate_
    at90 = mrc.certificate(S, 0.9)
    assert at90.value == pytest.approx(MRC(coverage=0.9).fit(S).certificate_.value, abs=1e-12)
    assert at90.coverage == 0.9 and mrc.certificate_.coverage == 0.95  # the fitted estimator is left as it was


def test_one_tolerance_reaches_the_screened_choice():
    """The screened (learner, M) are chosen by the same rule with the AutoLearner's tolerance: with a tolerance
    of 1 every configuration is within it, so the fewest features win (the smallest M of the first learner), where
    the default tolerance takes more: the signal is spread over 40 weak features. The screened path used to take
    its own tolerance and ignore the AutoLearner's."""
    _cb, W, _parts = _wide_sites(seed=7, strong=40, flip=0.35)
    wide = AutoLearner(tolerance=1.0).fit(W)
    configs = [c for c in wide.screen_["configs"] if c["error"] is not None]
    smallest = min(c["size"] for c in configs if c["learner"] == "nb")
    assert wide.chosen_.learner == "nb" and wide.screen_["size"] == smallest
    assert smallest < AutoLearner().fit(W).screen_["size"]


def test_a_screened_candidate_is_written_learner_and_m_alone():
    _cb, S, _parts = three_sites(np.random.default_rng(1), (100, 100, 100))
    for bad in ([("nb", {"screened": 0})], [("nb", {"screened": 2, "certify": "bound"})], [("prior", {"screened": 2})]):
        with pytest.raises(InputError, match="screened candidate"):
            AutoLearner(candidates=bad).fit(S)


def test_the_generator_and_the_choice_state_one_coverage():
    """The chosen certificate is reported at the AutoLearner's coverage, so a generator built at another is refused."""
    _cb, W, _parts = _wide_sites(seed=6)
    with pytest.raises(InputError, match="coverage"):
        AutoLearner(coverage=0.95).fit_candidates(W, ScreeningCandidates(W, coverage=0.8))
