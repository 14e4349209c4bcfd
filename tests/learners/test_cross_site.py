"""The plug-in error from tables: simulated rows reproduce the tables on the forest, the estimate is the
population's error when the population is TAN, and each leave-one-site-out fold never sees its site."""

from __future__ import annotations

import numpy as np
import pytest

from marg.learners.base import REGISTRY
from marg.learners.cross_site import SEED, in_sample_error, loso_errors, sample_error, tan_sample
from marg.learners.naive_bayes import NaiveBayes
from marg.learners.renyi import RenyiClassifier
from marg.learners.structure import chow_liu_forest
from marg.marginals.summary import Summary, sum_tables
from marg.marginals.counting import count_tables
from marg.marginals.tables import plan_cliques
from tests.helpers.tan import tan_codebook as _tan_codebook, tan_rows as _tan_rows


def test_simulated_rows_reproduce_the_tables_on_the_forest():
    rng = np.random.default_rng(0)
    cb = _tan_codebook()
    X, y = _tan_rows(rng, 4000)
    S = Summary.from_rows(cb, X, y, stats="all")
    smp = tan_sample(S, draws=20000)
    T = Summary.from_rows(cb, smp.X, smp.y, stats="all")
    assert np.isclose(smp.w.sum(), 1.0) and np.allclose([smp.w[smp.y == c].sum() for c in (0, 1)], S.prior)
    tol = 4.0 / np.sqrt(20000)  # 4 standard errors of a proportion
    for f in cb.feature_names:  # p(x_i | y)
        P, Q = S.counts((f, "y")), T.counts((f, "y"))
        assert np.abs(P / P.sum(0) - Q / Q.sum(0)).max() < tol
    edges, _ = chow_liu_forest(S)
    assert len(edges) == 3
    for i, j in edges:  # p(x_i, x_j | y) on the forest's edges
        a, b = cb.features[i].name, cb.features[j].name
        P, Q = S.counts((a, b, "y")), T.counts((a, b, "y"))
        assert np.abs(P / P.sum((0, 1)) - Q / Q.sum((0, 1))).max() < tol
    assert tan_sample(S, draws=500).X.tolist() == tan_sample(S, draws=500).X.tolist()  # a fixed seed


def test_plug_in_error_is_the_population_error_when_the_population_is_tan():
    """Tables of a large sample from a TAN population: the simulated error of a rule is its error on
    fresh rows of that population (the estimate is exact up to Monte Carlo and sampling error)."""
    rng = np.random.default_rng(1)
    cb = _tan_codebook()
    X, y = _tan_rows(rng, 200_000)
    S = Summary.from_rows(cb, X, y, stats="all")
    Xt, yt = _tan_rows(rng, 200_000)
    for est in (NaiveBayes().fit(S), REGISTRY["mrc"]().fit(S)):
        truth = float(np.mean(est.predict(Xt) != yt))
        assert in_sample_error(est, S).value == pytest.approx(truth, abs=0.01), est.learner


def test_each_fold_is_fitted_without_its_site_and_scored_on_it():
    rng = np.random.default_rng(5)
    cb = _tan_codebook()
    cl = plan_cliques(cb, "all")
    parts = []
    for k, n in enumerate((300, 200, 100)):
        X, y = _tan_rows(rng, n)
        parts.append((f"s{k}", count_tables(cb, X, y, cl)))
    seen = []

    def fit(summary):
        seen.append(summary.n)
        return RenyiClassifier().fit(summary)

    out = loso_errors([("renyi", fit)], parts, make_summary=lambda ts: Summary(cb, list(ts)),
                      combine=lambda ps: sum_tables(ps)[0])
    assert seen == [300.0, 400.0, 500.0]  # fitted on the others' 300 = 200+100, 400 = 300+100, 500 = 300+200
    sc = out["renyi"]
    for k, (site, tabs) in enumerate(parts):
        rest = Summary(cb, sum_tables([p[1] for j, p in enumerate(parts) if j != k])[0])
        want = sample_error(RenyiClassifier().fit(rest), tan_sample(Summary(cb, list(tabs)), seed=SEED + k))
        assert sc.folds[k] == pytest.approx(want, abs=1e-12)
    assert sc.value == pytest.approx(np.average(sc.folds, weights=[300, 200, 100]))
