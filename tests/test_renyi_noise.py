"""The Rényi certificate under DP noise: the noise std of γ̂(z, b) and the widened certificate."""

import numpy as np

from marg.learners.renyi import RenyiClassifier, noise_sd
from marg.marginals.privacy import privatize
from marg.marginals.summary import Summary
from marg.marginals.tables import count_tables, plan_cliques
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
    assert m.noise_margin_[0] == 0.0 and not m.certificate_approximate_


def test_noise_sd_matches_empirical_std_over_releases():
    rng = np.random.default_rng(4)
    cb = random_codebook(rng, n_features=3, max_levels=3)
    X, y = random_rows(rng, cb, 3000)
    y = ((X[:, 0] + X[:, 2] + rng.integers(0, 2, 3000)) > 2).astype(int)
    exact = count_tables(cb, X, y, plan_cliques(cb, "all"))
    m = RenyiClassifier().fit(Summary(cb, exact))
    z, b, names, sizes = m.z_[0], m.intercept_[0], m.feature_names_in_, m.sizes_
    vals, sds = [], []
    for _ in range(300):
        noisy, _ = privatize(exact, epsilon=2.0, codebook=cb)
        s = Summary(cb, noisy, postprocess=False)  # raw noise: the formula is exact for it
        vals.append(gamma_at(s, names, sizes, z, b))
        sds.append(noise_sd(s, names, sizes, z, b, 1))
    emp = np.std(vals)
    # n is itself estimated from the noisy label table, a second-order effect: generous band.
    assert 0.8 * np.mean(sds) < emp < 1.25 * np.mean(sds), (emp, np.mean(sds))


def test_noisy_certificate_is_widened_and_flagged():
    rng = np.random.default_rng(5)
    cb = random_codebook(rng, n_features=4, max_levels=3)
    X, y = random_rows(rng, cb, 4000)
    y = ((X[:, 0] + X[:, 1] + rng.integers(0, 2, 4000)) > 2).astype(int)
    exact = count_tables(cb, X, y, plan_cliques(cb, "all"))
    noisy, _ = privatize(exact, epsilon=1.0, codebook=cb)
    m = RenyiClassifier().fit(Summary(cb, noisy))
    assert m.certificate_approximate_ and m.noise_margin_[0] > 0
    assert m.worst_case_error_ >= 2 * m.gamma_[0]
    m2 = RenyiClassifier.from_dict(m.to_dict())
    assert m2.certificate_approximate_ and m2.worst_case_error_ == m.worst_case_error_
