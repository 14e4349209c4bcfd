"""Boost reads the tables as every minimax learner does (issue 47): a monomial column's τ and its box λ
come from the tables as released and their n (``Summary.n_released``), through the one
``TableReader``; the problem's n (the price c(k)/n) is the reported ``Summary.n``.

On a noisy Summary the two n's differ: λ is checked against the box's formula
(:mod:`marg.learners.features.calibration`, ``s`` given) written out with the released n, and shown to differ
from the same formula at the post-processed n.
"""

from __future__ import annotations

import numpy as np
import pytest

from marg.errors import InputError
from marg.learners.boost.columns import clique_mask, monomial_moments
from marg.learners.boost.cost import code_length_cost
from marg.learners.boost.from_summary import count_candidates, prices_exactly, problem_from
from marg.learners.boost.literals import Literal, codebook_tests, features_of
from marg.learners.boost.vote import BoostVote
from marg.learners.features.statistics import released
from marg.learners.minimax.from_summary import TableReader
from marg.marginals.noise_tails import halfwidth
from tests.helpers.tan import three_sites

S_SCALE, COVERAGE = 0.3, 0.95


def _box_by_formula(S, tests, mono, n, m):
    """τ and λ of one monomial column with s given: s·std/√n + q/n, then the term of n's noise, capped at the
    Bernoulli range; τ from the tables as released divided by ``n``."""
    rel = released(S)
    lab = S.codebook.label.name
    feats = features_of(mono, tests)
    names = (*feats, lab)
    N = np.asarray(rel.counts(names), dtype=float)
    mask = clique_mask(mono, tests, feats, N.shape[:-1])
    cells = int(mask.sum())
    tau = N[mask].sum(axis=0) / n
    alpha = (1.0 - COVERAGE) / m
    q = halfwidth(tuple((a, b, d, c * cells) for a, b, d, c in rel.noise_draws(names)), alpha)
    lam = S_SCALE * np.sqrt(np.clip(tau * (1.0 - tau), 0.0, None)) / np.sqrt(n) + q / n
    K = S.n_classes
    qn = halfwidth(tuple((a, b, d, c * K) for a, b, d, c in rel.noise_draws((lab,))), alpha)
    lam = lam + np.minimum(1.0, np.abs(tau) + lam) * qn / (n - qn)
    return tau, np.minimum(lam, np.maximum(np.abs(tau), np.abs(1.0 - tau)))


def test_boost_box_uses_the_released_n():
    cb, S, _ = three_sites(np.random.default_rng(11), (300, 250, 200), epsilon=0.3)
    assert S.n != S.n_released  # the two n's of a noisy release
    tests = codebook_tests(cb)
    cliques = [(f.name,) for f in cb.features] + S.feature_cliques()
    problem = problem_from(S, tests, cliques, 2, s=S_SCALE, coverage=COVERAGE)
    K = S.n_classes
    m = K * count_candidates(tests, cliques, 2) + 1  # every candidate column, and n
    price = code_length_cost(len(tests), S.n, 2, 1.5) / S.n  # the price's n is the reported one
    t0, t1 = next(i for i, t in enumerate(tests) if t.feature == "x0"), next(i for i, t in enumerate(tests)
                                                                             if t.feature == "x2")
    for mono in [(), (Literal(t0),), (Literal(t0), Literal(t1, False))]:
        tau, lam = problem.src.moments(mono)
        want_tau, want_lam = _box_by_formula(S, tests, mono, S.n_released, m)
        np.testing.assert_allclose(tau, want_tau, rtol=1e-12)
        np.testing.assert_allclose(lam, want_lam + price[len(mono)], rtol=1e-10)
        # the post-processed n would give another box: the check can tell the two apart
        _, other = _box_by_formula(S, tests, mono, S.n, m)
        assert not np.allclose(other, want_lam, rtol=1e-10, atol=0.0)
    # the pricing search reads the same tables' cells
    np.testing.assert_allclose(problem.src.clique_tau[("x0",)], released(S).counts(("x0", "y")) / S.n_released)


def test_the_reader_refuses_moments_not_read_from_the_tables_as_released():
    cb, S, _ = three_sites(np.random.default_rng(12), (200, 150, 100), epsilon=0.3)
    mom = monomial_moments(S, codebook_tests(cb), ())
    assert mom.n == S.n_released
    post = type(mom)(mom.tau * S.n_released / S.n, mom.std, mom.noise, S.n, mom.draws, mom.n_draws)
    with pytest.raises(InputError, match="not the tables as released"):
        TableReader(S).box(post, np.ones(1, dtype=bool))


def test_boost_fit_reports_its_box_from_the_released_tables():
    """The fitted vote's τ and λ are those of the problem's columns (released τ, released n)."""
    cb, S, _ = three_sites(np.random.default_rng(13), (400, 300, 300), epsilon=1.0)
    est = BoostVote(max_order=1, k_max=3).fit(S)
    problem = problem_from(S, est.map_.tests, [(f.name,) for f in cb.features], 1, s=est.s, coverage=est.coverage)
    for u, mono in enumerate(est.map_.monomials):
        tau, lam = problem.src.moments(mono)
        np.testing.assert_allclose(est.tau_[:, u], tau, rtol=1e-12)
        np.testing.assert_allclose(est.lambda_[:, u], lam, rtol=1e-12)
    # noisy pair tables disagree as released on the cells they share with the first-order tables: the
    # search, which prices a one-feature monomial on a pair table's cells, then ranks and proves nothing
    pair = released(S).counts(("x0", "x1", "y")).sum(axis=1)
    assert np.max(np.abs(pair - released(S).counts(("x0", "y")))) > 0.5
    singles = [(f.name,) for f in cb.features]
    assert prices_exactly(S, singles) and not prices_exactly(S, singles + S.feature_cliques())
    _, exact, _ = three_sites(np.random.default_rng(13), (40, 30, 30))
    assert prices_exactly(exact, singles + S.feature_cliques())
