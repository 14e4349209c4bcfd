"""The Rényi certificate under DP noise: the noise std of γ̂(z, b) and the widened certificate."""

import numpy as np
import pytest

from marg.learners.classifiers.renyi import RenyiClassifier
from marg.learners.classifiers.renyi_summary import noise_sd
from marg.marginals.privacy import privatize
from marg.marginals.summary import Summary
from marg.marginals.counts.counting import count_tables
from marg.marginals.counts.tables import plan_cliques
from tests.conftest import random_codebook, random_rows


def gamma_at(s: Summary, names, sizes, z, b, positive=1):
    """γ(z, b) = E[(b + Wᵀz − C)²] from the summary's released probabilities (uncentered)."""
    lab = s.codebook.label.name
    off = np.concatenate([[0], np.cumsum(sizes)])
    zs = [z[off[i]:off[i + 1]] for i in range(len(names))]
    prior = s.prior
    EC = (prior[positive] - (1 - prior[positive])) / 2
    g = b * b - 2 * b * EC + 0.25
    for nm, zi in zip(names, zs):
        P = s.joint((nm, lab))  # (m, K)
        p = P.sum(axis=1)
        d = 2 * P[:, positive] - p
        g += 2 * b * zi @ p + (zi**2) @ p - zi @ d
    for i in range(len(names)):
        for j in range(i + 1, len(names)):
            g += 2 * zs[i] @ s.joint((names[i], names[j])) @ zs[j]
    return g


def test_gamma_formula_matches_the_fit():
    rng = np.random.default_rng(3)
    cb = random_codebook(rng, n_features=4, max_levels=3)
    X, y = random_rows(rng, cb, 800)
    y = ((X[:, 0] + X[:, 1] + rng.integers(0, 2, 800)) > 2).astype(int)
    s = Summary.from_rows(cb, X, y, stats="all")
    m = RenyiClassifier().fit(s)
    assert abs(gamma_at(s, m.feature_names_in_, m.sizes_, m.z_[0], m.intercept_[0]) - m.gamma_[0]) < 1e-10
    assert m.noise_margin_[0] == 0.0 and not m.training_bound_.approximate


def _exact_tables(seed: int, n_features: int, n: int, cols: tuple[int, int]):
    """A random codebook and the exact tables (every pair) of n rows whose label leans on features ``cols``."""
    rng = np.random.default_rng(seed)
    cb = random_codebook(rng, n_features=n_features, max_levels=3)
    X, y = random_rows(rng, cb, n)
    y = ((X[:, cols[0]] + X[:, cols[1]] + rng.integers(0, 2, n)) > 2).astype(int)
    return cb, count_tables(cb, X, y, plan_cliques(cb, "all"))


def test_noise_sd_matches_empirical_std_over_releases():
    cb, exact = _exact_tables(seed=4, n_features=3, n=3000, cols=(0, 2))
    m = RenyiClassifier().fit(Summary(cb, exact))
    z, b, names, sizes = m.z_[0], m.intercept_[0], m.feature_names_in_, m.sizes_
    vals, sds = [], []
    for _ in range(500):
        noisy, _ = privatize(exact, epsilon=2.0, codebook=cb)
        s = Summary(cb, noisy, postprocess=False)  # raw noise: the formula is exact for it
        vals.append(gamma_at(s, names, sizes, z, b))
        sds.append(noise_sd(s, names, sizes, z, b, 1))
    emp = np.std(vals)
    # n is itself estimated from the noisy label table, a second-order effect: generous band.
    # OpenDP's noise is unseeded: over 1,500 releases the ratio was 1.036 and γ̂'s kurtosis 3.7, so
    # the std of 500 has relative SE √(2.7 / 2000) = 0.037 and the band is ≥ 5.8 SE away on each
    # side (P < 1e-8 per run; with 300 releases the upper edge was 4.5 SE, P ≈ 3e-6).
    assert 0.8 * np.mean(sds) < emp < 1.25 * np.mean(sds), (emp, np.mean(sds))


def test_noisy_certificate_is_widened_and_flagged():
    cb, exact = _exact_tables(seed=5, n_features=4, n=4000, cols=(0, 1))
    noisy, _ = privatize(exact, epsilon=1.0, codebook=cb)
    m = RenyiClassifier().fit(Summary(cb, noisy))
    assert m.training_bound_.approximate and m.noise_margin_[0] > 0
    assert m.training_bound_.value >= 2 * m.gamma_[0]
    m2 = RenyiClassifier.from_dict(m.to_dict())
    assert m2.training_bound_.approximate and m2.training_bound_.value == m.training_bound_.value
    assert m2.certificate_ == m.certificate_


def _dp_problem(eps, seed=5, n=3000):
    rng = np.random.default_rng(seed)
    cb = random_codebook(rng, n_features=6, max_levels=4)
    X, y = random_rows(rng, cb, 2 * n)
    y = ((X[:, 0] + X[:, 1] - X[:, 2] + rng.normal(0, 1.0, 2 * n)) > 1.5).astype(int)
    sites = np.array_split(np.arange(n), 3)
    tables = [privatize(count_tables(cb, X[s], y[s], plan_cliques(cb, "all")), epsilon=eps, codebook=cb)[0]
              for s in sites]
    from marg.marginals.summary import sum_tables

    return cb, Summary.from_tables(cb, sum_tables(tables)[0]), X[n:], y[n:]


def test_automatic_ridge_is_zero_exact_and_set_from_the_noise_under_dp():
    rng = np.random.default_rng(4)
    cb = random_codebook(rng, n_features=4, max_levels=3)
    X, y = random_rows(rng, cb, 600)
    assert RenyiClassifier().fit(Summary.from_rows(cb, X, y, stats="all")).ridge_ == 0.0
    cb, S, Xte, yte = _dp_problem(eps=1.0)
    m = RenyiClassifier().fit(S)
    lab = cb.label.name
    # Q's pair cell P(x_i = a, x_j = b) sums the K label cells of the released (x_i, x_j, y) table;
    # σ_Q is the root mean square of those cells' noise std over the pairs (tables differ in size,
    # so the budget split gives them different noise)
    from marg.learners.classifiers.renyi_summary import RIDGE_PER_NOISE

    pair_std = [t.noise.std * np.sqrt(cb.n_classes) / S.n for t in S.tables if len(t.clique) == 3]
    assert len(pair_std) == 6 * 5 // 2
    sigma_q = np.sqrt(np.mean(np.square(pair_std)))
    expected = RIDGE_PER_NOISE * sigma_q * np.sqrt(sum(f.n_levels for f in cb.features))
    assert m.ridge_ == pytest.approx(expected, rel=1e-9) and m.report()["ridge"] == m.ridge_
    majority = min(np.mean(yte), 1 - np.mean(yte))
    assert np.mean(m.predict(Xte) != yte) <= majority
    assert lab == "y"


def test_falls_back_to_the_majority_when_noise_swamps_the_signal():
    """With almost no budget the fitted rule cannot be told from the prior: it predicts the majority."""
    cb, S, Xte, yte = _dp_problem(eps=0.002)
    m = RenyiClassifier().fit(S)
    assert m.fallback_.all()
    pred = m.predict(Xte)
    assert np.unique(pred).size == 1 and pred[0] == int(np.argmax(S.prior))


def _tampered(noisy: bool):
    """A release whose raw tables contradict each other far beyond any noise: one first-order
    table N[x, y] claims three times as many patients as the label's table."""
    from dataclasses import replace

    rng = np.random.default_rng(11)
    cb = random_codebook(rng, n_features=3, max_levels=3)
    X, y = random_rows(rng, cb, 3000)
    y = ((X[:, 0] + X[:, 2] + rng.integers(0, 2, 3000)) > 2).astype(int)
    tables = count_tables(cb, X, y, plan_cliques(cb, "all"))
    if noisy:
        tables, _ = privatize(tables, epsilon=50.0, codebook=cb)
    k = next(i for i, t in enumerate(tables) if len(t.clique) == 2)
    tables[k] = replace(tables[k], counts=tables[k].counts * 3)
    return Summary(cb, tables)


def test_an_empty_confidence_box_under_noise_gives_a_trivial_flagged_certificate():
    """Under DP the box τ ± λ can be empty (the noise left its half-width): the rule is kept,
    its certificate is the trivial 1 and the learner says why; on exact tables the same
    contradiction is the data's fault and is refused."""
    from marg.errors import InconsistentStatistics
    from marg.learners.learn import learn, trivial_certificate_warning
    from marg.learners.estimator.model import Model

    s = _tampered(noisy=True)
    res = learn(s, "renyi", {}, ())
    cert = res.model.estimator.certificate_
    assert cert.kind == "W(h)" and cert.value == 1.0 and cert.trivial
    assert "confidence box" in res.report["certificate"]["note"]
    warning = trivial_certificate_warning(res.model, s.n)
    assert warning.startswith("warning: no distribution lies within the 95% confidence box") and "\n" not in warning
    # the rule itself is the one fitted on the post-processed tables
    assert np.array_equal(res.model.estimator.z_, RenyiClassifier().fit(s).z_)
    assert isinstance(res.model, Model)
    with pytest.raises(InconsistentStatistics, match="no distribution matches"):
        learn(_tampered(noisy=False), "renyi", {}, ())
