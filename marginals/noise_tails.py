"""Tail bounds of released noise: a half-width q with P(|noise| > q) ≤ α, valid for the mechanisms actually used.

A released (aggregated, possibly marginalised) count is the true count plus a sum of
independent noise draws — one per site and per cell summed — each a discrete Laplace
(OpenDP's Laplace on integer counts), a continuous Laplace (moment tables), a discrete or
continuous Gaussian. A normal quantile on such a sum under-covers in the far tail that a
Bonferroni level reaches (Laplace tails are exponential). :func:`halfwidth` instead uses

- when every draw is discrete (count tables: the integer lattice), the EXACT distribution
  of the sum: each pmf truncated where its remaining tail mass is below 10⁻³·α, convolved
  (FFT), and q the smallest integer with P(|S| > q) + (truncated mass) ≤ α;
- one continuous Laplace draw: q = b·ln(1/α) exactly; continuous Gaussians: the normal quantile;
- otherwise (continuous draws of moment tables) the Chernoff bound, valid for every sum of
  independent draws,

    P(|S| ≥ q) ≤ 2·inf_{θ>0} exp(−θq)·Π_j M_j(θ)^{c_j},

with each draw's moment generating function M_j: continuous Laplace 1/(1 − θ²b²) (θ < 1/b);
discrete Laplace (1 − r)²/((1 − r·e^θ)(1 − r·e^{−θ})), r = e^{−1/b} (θ < 1/b); Gaussian
(continuous, or the discrete Gaussian, which is sub-Gaussian with the same parameter)
exp(θ²σ²/2). Solving for q: q(α) = inf_θ [ln(2/α) + Σ_j c_j ln M_j(θ)]/θ, a one-dimensional
minimisation. The bound is conservative by construction — never an approximation.

A noise part is ``(mechanism, scale, discrete, count)``: ``count`` independent draws of the
mechanism at that scale. Each draw's mgf, lattice pmf and closed form are its noise's own
(:mod:`marg.marginals.counts.noise_kinds`); this module combines them.
"""

from __future__ import annotations

import functools
import math
from typing import Iterable, Sequence

import numpy as np

from marg.errors import InputError

from .counts.noise_kinds import noise_of

NoisePart = tuple[str, float, bool, int]


def _log_mgf(part: NoisePart, theta: float) -> float:
    mech, b, discrete, count = part
    if b <= 0 or count == 0 or mech == "none":
        return 0.0
    return noise_of(mech).log_mgf(b, discrete, count, theta)


def _lattice_pmf(mech: str, b: float, tail: float) -> tuple[np.ndarray, float]:
    """pmf of one discrete draw on −T..T and the mass left outside (≤ ``tail``): its noise's."""
    return noise_of(mech).lattice_pmf(b, tail)


def lattice_pmf(parts: Sequence[NoisePart], tail: float) -> tuple[np.ndarray, int, float]:
    """The exact pmf of a sum of independent discrete draws, truncated.

    Each draw's pmf is cut where its remaining two-sided tail mass is below
    ``tail / (number of draws)`` and the pieces are convolved in one FFT: the spectrum of
    the sum is Π_j F_j^{c_j} (F_j the DFT of part j's truncated pmf, c_j its count), on a
    length that holds the whole support, so the circular convolution is the linear one —
    the same pmf as convolving the draws one by one, in O(L log L) for a support of L
    points instead of one growing convolution per draw.

    Parameters
    ----------
    parts : sequence of (mechanism, scale, discrete, count)
        Discrete draws only (integer lattice).
    tail : float in (0, 1)
        Total probability mass allowed outside the returned support.

    Returns
    -------
    pmf : ndarray (m,)
        P(S = lo + i), i = 0..m−1 (clipped at 0; sums to 1 − lost up to rounding).
    lo : int
        The value of the first entry.
    lost : float
        Mass outside the support, ≤ ``tail``: for any set A,
        pmf-mass(A) ≤ P(S ∈ A) ≤ pmf-mass(A) + lost.
    """
    from scipy import fft

    if any(not d for m, b, d, c in parts if b > 0 and c > 0 and m != "none"):
        raise InputError("lattice_pmf: continuous noise has no pmf on the integers")
    kinds = [(m, b, c) for m, b, d, c in merge(parts) if m != "none" and b > 0 and c > 0]
    n_draws = sum(c for _, _, c in kinds)
    if not n_draws:
        return np.ones(1), 0, 0.0
    per = tail / n_draws
    pieces = [(*_lattice_pmf(m, b, per), c) for m, b, c in kinds]
    size = 1 + sum(c * (f.size - 1) for f, _, c in pieces)  # the support of the sum (odd, centred on 0)
    if len(pieces) == 1 and pieces[0][2] == 1:
        pmf = pieces[0][0]
    else:
        L = fft.next_fast_len(size, real=True)
        spec = np.ones(L // 2 + 1, dtype=np.complex128)
        for f, _, c in pieces:
            spec *= fft.rfft(f, L) ** c
        pmf = fft.irfft(spec, L)[:size]
    lost = sum(c * t for _, t, c in pieces)
    return np.clip(pmf, 0.0, None), -((size - 1) // 2), min(1.0, lost)


@functools.lru_cache(maxsize=4096)
def _lattice_halfwidth(parts: tuple[NoisePart, ...], alpha: float) -> float:
    """The exact half-width of a lattice sum (remembered: column generation asks for the same
    draws — a rule summing as many cells of the same tables — again and again)."""
    pmf, lo, lost = lattice_pmf(parts, 1e-3 * alpha)
    c = -lo  # index of 0
    both = pmf[c:].copy()
    both[1:] += pmf[:c][::-1]  # P(|S| = k), k = 0..
    outside = np.concatenate([np.cumsum(both[::-1])[::-1][1:], [0.0]])  # P(|S| > k)
    ok = np.flatnonzero(outside + lost <= alpha)
    return float(ok[0]) if ok.size else float(both.size)


def halfwidth(parts: Iterable[NoisePart], alpha: float) -> float:
    """The smallest q this module can prove with P(|Σ noise| > q) ≤ ``alpha``.

    Parameters
    ----------
    parts : iterable of (mechanism, scale, discrete, count)
    alpha : float in (0, 1)

    Returns
    -------
    float
        0 when there is no noise.
    """
    if not (0.0 < alpha < 1.0):
        raise InputError(f"alpha must be in (0, 1), got {alpha!r}")
    parts = [(str(m), float(b), bool(d), int(c)) for m, b, d, c in parts if m != "none" and b > 0 and c > 0]
    if not parts:
        return 0.0
    if all(p[2] for p in parts) and sum(p[3] for p in parts) <= 4096:
        return _lattice_halfwidth(tuple(merge(parts)), alpha)
    kinds = {p[0] for p in parts}
    if len(kinds) == 1:  # one noise: its closed form, if it has one (one continuous Laplace; continuous Gaussians)
        q = noise_of(parts[0][0]).closed_halfwidth(parts, alpha)
        if q is not None:
            return q
    hi = min(noise_of(p[0]).theta_max(p[1]) for p in parts)  # where every draw's mgf exists
    log2a = math.log(2.0 / alpha)

    def q_of(theta: float) -> float:
        s = sum(_log_mgf(p, theta) for p in parts)
        return (log2a + s) / theta if math.isfinite(s) else math.inf

    from scipy.optimize import minimize_scalar

    upper = hi * (1.0 - 1e-9) if math.isfinite(hi) else 1e6
    best = min((q_of(t), t) for t in np.geomspace(upper * 1e-6, upper, 200))
    lo_t, hi_t = best[1] / 1.5, min(best[1] * 1.5, upper)
    res = minimize_scalar(q_of, bounds=(lo_t, hi_t), method="bounded", options={"xatol": lo_t * 1e-9})
    q = min(best[0], float(res.fun)) if res.success else best[0]
    return float(q)


def merge(parts: Sequence[NoisePart]) -> list[NoisePart]:
    """Parts with the same (mechanism, scale, discrete) added up into one count."""
    acc: dict[tuple[str, float, bool], int] = {}
    for m, b, d, c in parts:
        key = (str(m), float(b), bool(d))
        acc[key] = acc.get(key, 0) + int(c)
    return [(m, b, d, c) for (m, b, d), c in acc.items()]
