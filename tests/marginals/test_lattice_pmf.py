"""The one-FFT pmf of a noise sum equals convolving the truncated draws one by one (the
definition), and the half-width read from it is the one the definition gives."""

from __future__ import annotations

import numpy as np
import pytest

from marg.marginals.noise_tails import _lattice_pmf, halfwidth, lattice_pmf, merge

CASES = [
    [("gaussian", 24.8, True, 3)],
    [("gaussian", 61.1, True, 54)],
    [("laplace", 8.0, True, 4), ("laplace", 15.0, True, 8)],
    [("laplace", 3.0, True, 40), ("gaussian", 7.0, True, 13)],
    [("gaussian", 0.7, True, 1), ("laplace", 0.4, True, 2), ("none", 0.0, True, 5)],
    [("laplace", 12.0, True, 1)],
]


def one_by_one(parts, tail):
    """The definition: each draw's truncated pmf (tail / draws each), convolved directly, draw by draw."""
    draws = [(m, b) for m, b, d, c in merge(parts) if m != "none" and b > 0 for _ in range(c)]
    pmf, lost = np.ones(1), 0.0
    for m, b in draws:
        f, t = _lattice_pmf(m, b, tail / len(draws))
        pmf = np.convolve(pmf, f)
        lost += t
    return pmf, -((pmf.size - 1) // 2), min(1.0, lost)


def halfwidth_of(pmf, lo, lost, alpha):
    """The smallest integer q with P(|S| > q) + lost ≤ alpha, by summing the pmf directly."""
    values = np.arange(lo, lo + pmf.size)
    for q in range(pmf.size):
        if pmf[np.abs(values) > q].sum() + lost <= alpha:
            return float(q)
    return float(pmf.size)


@pytest.mark.parametrize("parts", CASES, ids=range(len(CASES)))
def test_one_fft_equals_the_draw_by_draw_convolution(parts):
    for tail in (1e-6, 1e-10):
        pmf, lo, lost = lattice_pmf(parts, tail)
        ref, ref_lo, ref_lost = one_by_one(parts, tail)
        assert (lo, pmf.size) == (ref_lo, ref.size)
        assert lost == pytest.approx(ref_lost, rel=1e-12, abs=0)
        assert np.max(np.abs(pmf - ref)) < 1e-15
        assert abs(pmf.sum() + lost - 1.0) < 1e-9 + lost  # a pmf: what is kept plus what is cut is 1


@pytest.mark.parametrize("parts", CASES[:4], ids=range(4))
def test_halfwidth_is_the_definitions_quantile(parts):
    for alpha in (1e-2, 3.6e-7):
        ref = one_by_one(parts, 1e-3 * alpha)
        assert halfwidth(parts, alpha) == halfwidth_of(*ref, alpha)
        assert halfwidth(list(reversed(parts)), alpha) == halfwidth(parts, alpha)  # remembered, order-free
