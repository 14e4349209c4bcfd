"""Issue 44/49: a select-then-measure study's final rule against the larger class on evidence that did not select its
features (:mod:`marg.learners.study.unselected`, :func:`marg.learners.study.two_round.finish`)."""

from __future__ import annotations

import numpy as np
import pytest

from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label
from marg.marginals.summary import Summary, sum_tables
from tests.helpers.study import round1_records



def _study(rng, signal: float, share: float = 0.75, sizes=(300, 200, 150)):
    """Three sites whose round-1 selections all chose g0..g2 (of 40 candidates); g0 equals the label for ``signal``
    of the patients (0.5: no signal, like g1 and g2, which are always null); the larger class holds ``share``."""
    names = ["g0", "g1", "g2"]
    cb = Codebook(features=tuple(CategoricalFeature(a, ("0", "1")) for a in names), label=Label("y", ("a", "b")))
    parts = []
    for s, n in enumerate(sizes):
        y = (rng.random(n) > share).astype(int)
        g0 = np.where(rng.random(n) < signal, y, 1 - y)
        X = np.column_stack([g0, rng.integers(0, 2, n), rng.integers(0, 2, n)]).astype(np.float64)
        parts.append((f"s{s}", list(Summary.from_rows(cb, X, y).tables)))
    return Summary(cb, sum_tables([t for _, t in parts])[0], site_parts=parts,
                   provenance=round1_records([names] * 3, 40, 80))


def test_the_comparison_is_each_sites_rows_judging_a_rule_selected_without_it():
    """The oracle: fold k refits the rule on the other sites' sum with the features the other sites agree on, and the
    label-only rule on the same tables; both are judged on the same rows simulated from site k's tables."""
    from marg.learners.choice.cross_site import SEED, sample_error, tan_sample
    from marg.learners.classifiers.label_only import LabelOnly
    from marg.learners.classifiers.naive_bayes import NaiveBayes
    from marg.learners.study.two_round import above_chance, pool_records
    from marg.learners.study.unselected import unselected_comparison

    S = _study(np.random.default_rng(1), 0.85)
    est = NaiveBayes(certify="bound").fit(S)
    got = unselected_comparison(est, S, pool_records(S), above_chance)
    assert not isinstance(got, str)
    rule, prior = [], []
    for k in range(3):
        rest = Summary(S.codebook, sum_tables([ts for j, (_, ts) in enumerate(S.site_parts) if j != k])[0])
        rows = tan_sample(Summary(S.codebook, list(S.site_parts[k][1])), seed=SEED + k)
        rule.append(sample_error(NaiveBayes(certify="bound", features=["g0", "g1", "g2"]).fit(rest), rows))
        prior.append(sample_error(LabelOnly().fit(rest), rows))
    assert got.rule_folds == pytest.approx(rule, abs=1e-12) and got.prior_folds == pytest.approx(prior, abs=1e-12)
    assert got.rule == pytest.approx(np.average(rule, weights=[300, 200, 150]), abs=1e-12)
    assert got.features == [["g0", "g1", "g2"]] * 3 and got.beaten
    # without the sites' own tables (a secure sum) there is no such evidence, and the reason says so
    alone = Summary(S.codebook, S.tables, provenance=S.provenance)
    assert "no site's own tables" in unselected_comparison(est, alone, pool_records(alone), above_chance)


def test_a_rule_on_features_chosen_by_the_noise_gives_way_to_the_larger_class():
    """Null features the sites all happened to choose: a rule on them is no better than the larger class on patients
    who did not choose them, and finish returns the larger class in most such studies (the code before issue 49
    returned the rule in every one); a feature that carries the label keeps its rule in every study."""
    from marg.learners.classifiers.naive_bayes import NaiveBayes
    from marg.learners.study.two_round import finish

    rng = np.random.default_rng(5)
    kept_null = kept_signal = 0
    reps = 12
    for _ in range(reps):
        S = _study(rng, 0.5, share=0.65)
        rec: dict = {}
        model, note = finish(NaiveBayes(certify="bound").fit(S), S, record=rec)
        assert rec["unselected"]["beaten"] == (model.learner != "prior")
        kept_null += model.learner != "prior"
        if model.learner == "prior":
            assert note.startswith("the larger class: on each site's rows with features re-selected")
        S = _study(rng, 0.85, share=0.65)
        model, _ = finish(NaiveBayes(certify="bound").fit(S), S)
        kept_signal += model.learner != "prior"
    assert kept_signal == reps
    assert kept_null <= reps // 3
