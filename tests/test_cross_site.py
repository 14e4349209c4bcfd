"""Leave-one-site-out model choice: the pairwise Cantelli bound is the rows' exact value, folds never see their site."""

from __future__ import annotations

import numpy as np
import pytest

from marg.learners.certify import linear_rule
from marg.learners.cross_site import cantelli_bound, loso_scores, rule_direction
from marg.learners.features.quadratic import discrete_blocks
from marg.learners.naive_bayes import NaiveBayes
from marg.learners.renyi import RenyiClassifier
from marg.marginals.summary import Summary, sum_tables
from marg.marginals.tables import count_tables, plan_cliques
from tests.conftest import random_codebook, random_rows


def _onehot(cb, X):
    blocks = discrete_blocks(cb)
    W = np.zeros((X.shape[0], sum(b.size for b in blocks)))
    for b in blocks:
        W[np.arange(X.shape[0]), b.offset + X[:, b.column].astype(int)] = 1.0
    return W


@pytest.mark.parametrize("seed", range(8))
def test_cantelli_bound_from_tables_equals_the_rows_value_and_bounds_their_error(seed):
    rng = np.random.default_rng(seed)
    cb = random_codebook(rng, n_features=4, max_levels=3)
    X, y = random_rows(rng, cb, 400)
    S = Summary.from_rows(cb, X, y, stats="all")
    W = _onehot(cb, X)
    w, b = rng.standard_normal(W.shape[1]), float(rng.standard_normal())
    f = b + W @ w
    s = 2.0 * y - 1.0
    m, v = np.mean(s * f), np.mean(f * f)
    expect = 1.0 - m * m / v if m > 0 else 1.0
    got = cantelli_bound(w, b, S)
    assert got == pytest.approx(expect, abs=1e-10)
    assert got >= np.mean(s * f <= 0) - 1e-12  # Cantelli: a bound on the rule's error on these rows


def test_rule_direction_reproduces_the_rule_on_every_row():
    rng = np.random.default_rng(3)
    cb = random_codebook(rng, n_features=5, max_levels=4)
    X, y = random_rows(rng, cb, 600)
    S = Summary.from_rows(cb, X, y, stats="all")
    for est in (RenyiClassifier().fit(S), NaiveBayes().fit(S)):
        rule = linear_rule(est)
        w, b = rule_direction(rule, cb)
        sc = rule.scores(X)
        np.testing.assert_allclose(b + _onehot(cb, X) @ w, sc[:, 1] - sc[:, 0], atol=1e-9)


def test_each_fold_is_fitted_without_its_site_and_scored_on_it():
    rng = np.random.default_rng(5)
    cb = random_codebook(rng, n_features=4, max_levels=3)
    cl = plan_cliques(cb, "all")
    parts = []
    for k, n in enumerate((300, 200, 100)):
        X, y = random_rows(rng, cb, n)
        parts.append((f"s{k}", count_tables(cb, X, y, cl)))
    seen = []

    def fit(summary):
        seen.append(summary.n)
        return RenyiClassifier().fit(summary)

    out = loso_scores([("renyi", fit)], cb, parts, make_summary=lambda ts: Summary(cb, list(ts)),
                      combine=lambda ps: sum_tables(ps)[0], rule_of=linear_rule)
    assert seen == [300.0, 400.0, 500.0]  # fitted on the others' 300 = 200+100, 400 = 300+100, 500 = 300+200
    sc = out["renyi"]
    for k, (site, tabs) in enumerate(parts):
        rest = Summary(cb, sum_tables([p[1] for j, p in enumerate(parts) if j != k])[0])
        w, b = rule_direction(linear_rule(RenyiClassifier().fit(rest)), cb)
        assert sc.folds[k] == pytest.approx(cantelli_bound(w, b, Summary(cb, list(tabs))), abs=1e-12)
    assert sc.score == pytest.approx(np.average(sc.folds, weights=[300, 200, 100]))
