"""The parametric bootstrap of a whole study (:mod:`marg.learners.choice.study_bootstrap`): exact computations on
studies whose errors are known, its folds paired across candidates, and noisy tables refused."""

from __future__ import annotations

import numpy as np
import pytest

from marg.errors import InputError
from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label
from marg.marginals.summary import Summary, sum_tables


def _study(rng, flip: float, sizes=(60, 150, 300)):
    """x0 is the label flipped for ``flip`` of the patients, x1 noise; the larger class holds about 70 %."""
    cb = Codebook(features=(CategoricalFeature("x0", ("0", "1")), CategoricalFeature("x1", ("0", "1", "2"))),
                  label=Label("y", ("a", "b")))
    parts = []
    for s, n in enumerate(sizes):
        y = (rng.random(n) < 0.3).astype(int)
        X = np.column_stack([np.where(rng.random(n) < flip, 1 - y, y), rng.integers(0, 3, n)]).astype(np.float64)
        parts.append((f"s{s}", list(Summary.from_rows(cb, X, y).tables)))
    return Summary(cb, sum_tables([t for _, t in parts])[0], site_parts=parts)


def test_the_bootstrap_estimates_known_errors_and_pairs_its_replicates():
    from marg.learners.classifiers.label_only import LabelOnly
    from marg.learners.classifiers.naive_bayes import NaiveBayes
    from marg.learners.choice.study_bootstrap import bootstrap_errors

    S = _study(np.random.default_rng(3), 0.1)
    got = bootstrap_errors(S, [("nb", lambda s: NaiveBayes().fit(s)), ("prior", lambda s: LabelOnly().fit(s))],
                           replicates=3)
    nb, prior = got["nb"], got["prior"]
    assert nb.method == prior.method == "bootstrap" and len(nb.folds) == len(prior.folds) == 3
    # the world is the tables' own: y = x0 except for ~10 %, so the rule x0 → y errs ~0.10 and the larger class the
    # minority's share (~0.30); the Monte Carlo error of the world's 2000 rows a class is ≈ 0.01
    share = S.class_counts / S.n
    assert prior.value == pytest.approx(float(share.min()), abs=0.02)
    assert nb.value == pytest.approx(0.1, abs=0.04) and nb.value < prior.value - 0.1
    assert nb.value == pytest.approx(np.mean(nb.folds), abs=1e-12)
    # the same replicates: deterministic, so the same call gives the same folds
    again = bootstrap_errors(S, [("nb", lambda s: NaiveBayes().fit(s))], replicates=3)
    assert again["nb"].folds == nb.folds


def test_noisy_tables_are_refused():
    from marg.learners.choice.study_bootstrap import bootstrap_errors
    from marg.marginals.privacy import privatize

    S = _study(np.random.default_rng(4), 0.1)
    noisy, _ = privatize(list(S.tables), rho=1.0, codebook=S.codebook)
    with pytest.raises(InputError, match="exact tables only"):
        bootstrap_errors(Summary(S.codebook, noisy), [("x", lambda s: s)])


def test_the_optimism_correction_measures_the_model_as_fitted():
    """The estimate is the fitted model's own plug-in error plus the refits' optimism: with a rule that cannot
    adapt to its study (the larger class) the optimism is 0 up to the worlds' Monte Carlo error, and naive Bayes on
    the rule x0 → y (errs ~0.10) is estimated near 0.10."""
    from marg.learners.choice.cross_site import POPULATION, SEED, sample_error, tan_sample
    from marg.learners.classifiers.label_only import LabelOnly
    from marg.learners.classifiers.naive_bayes import NaiveBayes
    from marg.learners.choice.study_bootstrap import optimism_errors

    S = _study(np.random.default_rng(3), 0.1)
    fits = {"nb": lambda s: NaiveBayes().fit(s), "prior": lambda s: LabelOnly().fit(s)}
    fitted = {k: f(S) for k, f in fits.items()}
    got = optimism_errors(S, list(fits.items()), fitted, replicates=3)
    nb, prior = got["nb"], got["prior"]
    assert nb.method == "optimism" and len(nb.folds) == 3
    world = tan_sample(S, draws=POPULATION, seed=SEED + 2999)
    assert nb.whole == pytest.approx(sample_error(fitted["nb"], world), abs=1e-12)
    assert prior.value == pytest.approx(prior.whole, abs=0.03)  # the larger class does not adapt: no optimism
    assert nb.value == pytest.approx(0.1, abs=0.04) and nb.value < prior.value - 0.1
    out = optimism_errors(S, [("nb", fits["nb"]), ("x", fits["nb"])], {"nb": fitted["nb"]}, replicates=1)
    assert isinstance(out["x"], str) and "not fitted" in out["x"]
