"""The best of K models evaluated on the same held-out patients, then the larger class (issue 44/49):
:func:`marg.learners.study.final_choice.final_among`. What must hold: the certificate of whatever is returned — the
model with the fewest held-out errors among K, or the larger class — covers its true error at the asked
coverage when the K models take consecutive ordinals on the held-out set (α split by g(o)); the same choice with
every model at the first ordinal (the K not counted) does not; K = 1 is the one-model comparison."""

from __future__ import annotations

import numpy as np
import pytest

from marg.errors import InputError
from marg.learners.study.final_choice import final_against_prior, final_among
from marg.learners.certification.holdout_certificate import evaluation_share
from tests.helpers.stand_in import StandIn


def _tables(rng, rates, n, prior_rate):
    """K confusion tables N[predicted, y] of K rules on the same n held-out patients (true class 1 w.p. prior_rate:
    the larger class 0 errs at prior_rate), rule k wrong on each patient independently w.p. rates[k]."""
    y = (rng.random(n) < prior_rate).astype(int)
    out = []
    for r in rates:
        wrong = rng.random(n) < r
        pred = np.where(wrong, 1 - y, y)
        conf = np.zeros((2, 2))
        np.add.at(conf, (pred, y), 1)
        out.append(conf)
    return out


def test_the_best_of_k_is_covered_at_consecutive_ordinals_and_not_without_them():
    """10 rules of equal true error 0.30 (the selection's bias is largest when nothing tells them apart) on 150
    held-out patients, the larger class at 0.40; 2,000 studies. Whatever is returned covers in ≥ 95 % at ordinals
    1..10; with every model at ordinal 1 (the K not counted) the best of 10 is flattered below 95 %."""
    rng = np.random.default_rng(49)
    K, n, prior_rate = 10, 150, 0.40
    rates = np.full(K, 0.30)
    prior = StandIn(class_=0)
    models = [StandIn(learner=f"m{k}") for k in range(K)]
    ok = flat = 0
    trials = 2000
    for _ in range(trials):
        tabs = _tables(rng, rates, n, prior_rate)
        fc = final_among(models, prior, tabs, [()] * K, "confusion", 0.95, ordinals=list(range(1, K + 1)))
        truth = rates[fc.index] if fc.chosen == "model" else prior_rate
        ok += fc.certificate.value >= truth
        f1 = final_among(models, prior, tabs, [()] * K, "confusion", 0.95, ordinals=[1] * K)
        truth1 = rates[f1.index] if f1.chosen == "model" else prior_rate
        flat += f1.certificate.value >= truth1
    assert ok / trials >= 0.95 and flat / trials < 0.95  # measured (seed 49): 0.973 against 0.898


def test_the_choice_is_the_fewest_held_out_errors_and_its_share_is_its_ordinals():
    prior = StandIn(class_=0)
    models = [StandIn(learner=n) for n in ("nb", "mrc", "renyi")]
    # N[predicted, y]: 400 held-out patients, 160 of class 1; errors 90, 60, 80; the larger class errs 160
    tabs = [np.array([[210.0, 60.0], [30.0, 100.0]]), np.array([[220.0, 40.0], [20.0, 120.0]]),
            np.array([[200.0, 40.0], [40.0, 120.0]])]
    fc = final_among(models, prior, tabs, [()] * 3, "confusion", 0.95, ordinals=[4, 5, 6])
    assert fc.chosen == "model" and fc.index == 1 and fc.estimator is models[1]
    assert fc.share == pytest.approx(evaluation_share(5)) and fc.model_bound.errors == 60.0
    assert [e["ordinal"] for e in fc.evaluated] == [4, 5, 6] and [e["errors"] for e in fc.evaluated] == [90, 60, 80]
    assert models[1].certificate_.value == fc.certificate.value and models[1].certificate_.kind == "holdout"
    # its bound is at α·g(5)/2, looser than the same counts at the first model's share
    alone = final_among([models[1]], prior, [tabs[1]], [()], "confusion", 0.95, ordinals=[4])
    assert fc.certificate.value > alone.certificate.value
    # the larger class is read from the first table at the first model's share: the same bound whichever is chosen
    assert fc.prior_bound.value == pytest.approx(alone.prior_bound.value)


def test_the_larger_class_when_no_model_beats_it_and_one_model_is_the_old_comparison():
    prior = StandIn(class_=0)
    models = [StandIn(learner="a"), StandIn(learner="b")]
    bad = [np.array([[60.0, 40.0], [40.0, 20.0]]), np.array([[50.0, 30.0], [50.0, 30.0]])]  # both ≥ the larger class
    fc = final_among(models, prior, bad, [(), ()], "confusion", 0.95)
    assert fc.chosen == "prior" and fc.estimator is prior and fc.share == pytest.approx(evaluation_share(1))
    one = final_against_prior(models[0], prior, bad[0], (), "confusion", 0.95, ordinal=3)
    same = final_among([models[0]], prior, [bad[0]], [()], "confusion", 0.95, ordinals=[3])
    assert (one.chosen, one.certificate.value, one.model_bound.value) == \
        (same.chosen, same.certificate.value, same.model_bound.value)
    with pytest.raises(InputError, match="2 models evaluated, but 1 tables"):
        final_among(models, prior, bad[:1], [()], "confusion", 0.95)
