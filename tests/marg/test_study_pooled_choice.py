"""The study's final choice on one pooled summary (issue 44, pooled): the split estimate with training sets that carry
the release's own noise (``AutoLearner(one_site="split")``, :func:`marg.learners.choice.cross_site.noisy_replica`)."""

from __future__ import annotations

import numpy as np
import pytest

from marg.learners.auto import AutoLearner
from marg.learners.choice.cross_site import noisy_replica
from marg.learners.choice.cross_site import REPLICATES
from marg.marginals.counts.counting import count_tables
from marg.marginals.privacy import privatize
from marg.marginals.summary import Summary
from marg.marginals.counts.tables import plan_cliques
from marg.study_learner import final_learner
from tests.helpers.tan import tan_codebook, tan_rows, three_sites


def _pooled(rng, n=900, epsilon=1.0):
    cb = tan_codebook()
    X, y = tan_rows(rng, n)
    tables, _ = privatize(count_tables(cb, X, y, plan_cliques(cb, "all")), epsilon=epsilon, codebook=cb)
    return cb, Summary(cb, tables)


def test_a_replica_is_distributed_as_the_release_of_its_rows():
    """Its cells' noise (after the Summary's own post-processing, as the release's) has the spread of a real release
    of the same rows at the same privacy; its noise records are the release's."""
    rng = np.random.default_rng(11)
    cb, S = _pooled(rng)
    X, y = tan_rows(rng, 700)
    cliques = [t.clique for t in S.tables]
    exact = count_tables(cb, X, y, cliques)
    truth = {t.clique: t.counts for t in exact}
    released = {t.clique: t for t in S.tables}
    train = noisy_replica(S)

    def residuals(summary):
        return np.concatenate([(t.counts - truth[t.clique]).ravel() for t in summary.tables])

    rep, real = [], []
    for _ in range(40):
        r = train(X, y)
        assert all(t.noise == released[t.clique].noise for t in r.tables)  # the release's noise record, kept
        rep.append(residuals(r))
        real.append(residuals(Summary(cb, privatize(exact, epsilon=1.0, codebook=cb)[0])))
    rep_all, real_all = np.concatenate(rep), np.concatenate(real)
    se = rep_all.std() / np.sqrt(rep_all.size)
    assert abs(rep_all.mean()) < 4 * se  # unbiased
    assert rep_all.std() / real_all.std() == pytest.approx(1.0, abs=0.08)  # the release's spread, cell by cell


def test_one_pooled_summary_is_estimated_by_the_noisy_split_and_several_sites_by_their_folds():
    rng = np.random.default_rng(5)
    _, S = _pooled(rng)
    auto = AutoLearner(candidates=[("nb", {}), ("renyi", {})], one_site="split").fit(S)
    assert auto.error_method_.startswith("split (no site's own tables)")
    for row in auto.candidates_:
        assert row.method == "split" and len(row.folds) == REPLICATES and 0 <= row.error <= 1
    _, S3, _ = three_sites(rng, (300, 300, 300), epsilon=1.0)
    auto3 = AutoLearner(candidates=[("nb", {}), ("renyi", {})], one_site="split").fit(S3)
    assert all(r.method == "loso" for r in auto3.candidates_)
    with pytest.raises(Exception, match="one_site"):
        AutoLearner(one_site="loso").fit(S)


def test_the_study_final_learner_splits_on_the_pooled_sum_and_first_order_stays_naive_bayes():
    rng = np.random.default_rng(2)
    _, S = _pooled(rng)
    est, params = final_learner(S, False)
    assert isinstance(est, AutoLearner) and est.one_site == "split" and params == {}
    assert final_learner(S, True)[0] == "nb"
