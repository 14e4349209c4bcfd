"""Calibration of λ, the half-widths of the MRC uncertainty set |E_p Φ − τ| ≤ λ.

The certificate R* bounds the true error of the MRC whenever the true expectation
E_{p*}Φ lies inside the box τ ± λ (seed 000, eq. (34)). λ is therefore a *simultaneous*
confidence box for the m = K·D entries of τ, not a tuning knob.

Default (``s=None``): a two-sided interval per entry at level α' = (1 − coverage)/m,
Bonferroni-corrected over all m entries so that all intervals hold together with
probability ≥ ``coverage``. For an exact release::

    λ = h_CP(τ, n, α')               (one-hot entries: a Bernoulli mean)
    λ = z · tau_std / sqrt(n)        (raw numeric entries; z = Φ⁻¹(1 − α'/2))

where h_CP(τ, n, α') = max(τ − lo, hi − τ) is the smallest half-width around τ that covers the
Clopper–Pearson interval [lo, hi] of k = n·τ successes in n trials (:func:`binomial_halfwidth`).
That interval is exact-conservative for every n and every true probability, including
empty cells (τ = 0: hi = 1 − (α'/2)^{1/n}), where the normal interval z·sqrt(τ(1−τ)/n)
would be 0 — ruling the cell out though a small sample says little about it. For large
counts h_CP ≈ z·sqrt(τ(1−τ)/n). The numeric entries' interval is the normal approximation
of a sample mean (asymptotic).

Under differential privacy the released τ is the sample's τ̂ plus noise, so each entry's
α' is split in two halves (union bound: |τ − E τ| ≤ |τ − τ̂| + |τ̂ − E τ|)::

    λ = q(draws, α'/2)/n  +  max_{t ∈ τ ± q/n} h_CP(t, n, α'/2)

q the noise half-width with P(|noise| > q) ≤ α'/2 for the draws actually added
(:func:`marg.marginals.noise_tails.halfwidth`: exact for the discrete Laplace and Gaussian
noise of count tables, summed over sites; no normal approximation), and the sampling
half-width taken at the τ̂ in the noise interval where it is largest (closest to ½), since
τ̂ itself is not released. The noise on n (the label table's total, the denominator of
every τ = N/n̂) is one more interval of the Bonferroni count: with q_n its half-width, λ
grows by min(1, |τ| + λ)·q_n/(n − q_n). A Bernoulli entry's λ is capped at
max(|τ|, |1 − τ|): the box then already holds all of [0, 1], so the set U is unchanged. A
column whose noise has no recorded draws falls back to z·noise_std (a normal
approximation: :attr:`ConfidenceBox.approximate`).

:func:`confidence_box` is the one entry point: every learner (MRC, DCC, naive Bayes, boost)
and every certificate (:func:`marg.learners.certification.certify.certify`) builds its box there, from the
moments of its feature map as released (:func:`marg.learners.features.statistics.map_moments`).

Hidden cells (class columns released as 0 by min-cell suppression, exact releases): the
true count lies in [lo, hi] (:meth:`marg.marginals.summary.Summary.count_bounds`), not at the
point estimate τ, so the entry's λ is max(τ − CP_lo(lo/n), CP_hi(hi/n) − τ): the box holds the
Clopper–Pearson interval of every count the release leaves possible (wider than a real cell's).

Override (``s`` given): λ = s · tau_std / sqrt(n) + the noise term at α', the seed's λ = s/√n
multiplier (MRCpy uses s = 0.3, whose certificates sit far below the real error in high
dimensions); ``s = 0`` gives λ = 0 for exact releases: the pure minimax problem on the
released marginals, in which an empty cell is ruled out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
# scipy.stats' beta.ppf and -norm.isf, without its import time (BENCHMARKS.md, "Issue 48 (autospeed)")
from scipy.special import betaincinv, ndtri

from marg.errors import InputError



def bonferroni_z(coverage: float, m: int) -> float:
    """Two-sided normal quantile for simultaneous coverage of m intervals.

    Parameters
    ----------
    coverage : float in (0, 1)
    m : int ≥ 1

    Returns
    -------
    float
        z = Φ⁻¹(1 − (1 − coverage)/(2m)).
    """
    if not (0.0 < coverage < 1.0):
        raise InputError(f"coverage must be in (0, 1), got {coverage!r}")
    if m < 1:
        raise InputError(f"the number of intervals must be >= 1, got {m}")
    return float(-ndtri((1.0 - coverage) / (2.0 * m)))


def binomial_halfwidth(tau: np.ndarray, n: float, alpha: float) -> np.ndarray:
    """Half-width h around τ covering the two-sided Clopper–Pearson interval at level 1 − alpha.

    With k = n·τ successes in n trials, lo = Beta⁻¹(alpha/2; k, n − k + 1) (0 when k = 0) and
    hi = Beta⁻¹(1 − alpha/2; k + 1, n − k) (1 when k = n); P(lo ≤ p ≤ hi) ≥ 1 − alpha for every
    true p. h = max(τ − lo, hi − τ), so [τ − h, τ + h] ⊇ [lo, hi]. Non-integer k (a
    post-processed noisy count) uses the same Beta quantiles.

    Parameters
    ----------
    tau : ndarray
        Observed proportions k/n, clipped to [0, 1].
    n : float
        Trials (rows), > 0.
    alpha : float in (0, 1)

    Returns
    -------
    ndarray, same shape as tau
        h ≥ 0; for τ = 0, h = 1 − (alpha/2)^{1/n}.
    """
    t = np.clip(np.asarray(tau, dtype=np.float64), 0.0, 1.0)
    lo, hi = binomial_interval(t, n, alpha)
    return np.maximum(t - lo, hi - t)


def binomial_interval(tau: np.ndarray, n: float, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """The two-sided Clopper–Pearson interval [lo, hi] at level 1 − alpha of k = n·τ successes
    in n trials (see :func:`binomial_halfwidth`); both ends increase with k.

    Returns
    -------
    (lo, hi) : ndarrays, same shape as tau
    """
    if not (0.0 < alpha < 1.0):
        raise InputError(f"alpha must be in (0, 1), got {alpha!r}")
    n = float(n)
    k = np.clip(np.asarray(tau, dtype=np.float64), 0.0, 1.0) * n
    # the Beta quantiles once per distinct count (a box's cells repeat counts: the pair cells of a feature-map
    # repeat across labels and blocks); elementwise, so each cell gets the very number it would alone
    u, inv = np.unique(k, return_inverse=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = np.where(u > 0, betaincinv(np.maximum(u, 1e-300), n - u + 1.0, alpha / 2.0), 0.0)
        hi = np.where(u < n, betaincinv(u + 1.0, np.maximum(n - u, 1e-300), 1.0 - alpha / 2.0), 1.0)
    inv = inv.reshape(k.shape)
    return lo[inv], hi[inv]


@dataclass(frozen=True)
class ConfidenceBox:
    """The half-widths λ of the box τ ± λ and whether they rest on an approximation.

    Attributes
    ----------
    lam : ndarray, shape (K, D)
        λ ≥ 0 per entry of τ.
    approximate : bool
        Some entry's interval is asymptotic rather than exact-conservative: a raw numeric
        entry's normal interval, or noise without recorded draws (its normal approximation
        z·noise_std). False whenever λ is set by hand (``s``: no coverage is claimed).
    """

    lam: np.ndarray
    approximate: bool


def confidence_box(moments: Any, binary: np.ndarray, s: float | None = None, coverage: float = 0.95,
                   n_intervals: int | None = None) -> ConfidenceBox:
    """λ for the uncertainty set |E_pΦ − τ| ≤ λ from the moments as released: THE entry point.

    Every learner and certificate builds its box here (see the module docstring for the
    formula), from the noise as released: each column's recorded draws (mechanism, scale,
    how many) give the exact noise tail, and the draws behind n its term.

    Parameters
    ----------
    moments : :class:`marg.learners.features.statistics.Moments`
        τ, its sample std and noise std (each (K, D)), n, the noise draws per column and of n.
    binary : ndarray of bool, shape (D,) or (K, D)
        Entries that are Bernoulli means (one-hot cells, pair cells, monomials): with
        ``s=None`` they get the Clopper–Pearson half-width; the others (raw numeric
        entries) the normal interval z·std/√n.
    s : float or None
        None: Bonferroni-calibrated intervals at ``coverage``; otherwise λ = s·std/√n + noise term.
    coverage : float
        Simultaneous coverage of the box (default 0.95).
    n_intervals : int, optional
        The Bonferroni count m of entries the box must cover together, when it exceeds the
        entries given (column generation computes λ for the columns it adds, but a column is
        chosen among all candidates: m counts every candidate). Default: the entries given.

    Returns
    -------
    ConfidenceBox
    """
    tau_std = np.asarray(moments.std, dtype=np.float64)
    noise_std = np.asarray(moments.noise, dtype=np.float64)
    tau = np.asarray(moments.tau, dtype=np.float64)
    D = tau_std.shape[1] if tau_std.ndim == 2 else 0
    draws = tuple(moments.draws) if moments.draws else ((),) * D
    b = np.broadcast_to(np.asarray(binary, dtype=bool), tau_std.shape)
    lo, hi = getattr(moments, "lo", None), getattr(moments, "hi", None)
    lam = _lambda(tau_std, noise_std, float(moments.n), s=s, coverage=coverage, tau=tau, binary=b,
                  draws=draws, n_draws=tuple(moments.n_draws), n_intervals=n_intervals,
                  bounds=None if lo is None or hi is None else (np.asarray(lo), np.asarray(hi)))
    no_draws = np.array([not d for d in draws], dtype=bool)
    approximate = s is None and bool(np.any(~b & (tau_std > 0)) or np.any((noise_std > 0) & no_draws[None, :]))
    return ConfidenceBox(lam, approximate)


def _lambda(
    tau_std: np.ndarray,
    noise_std: np.ndarray,
    n: float,
    s: float | None,
    coverage: float,
    tau: np.ndarray,
    binary: np.ndarray,
    draws: Sequence[tuple],
    n_draws: Sequence[tuple],
    n_intervals: int | None,
    bounds: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """λ (K, D) from arrays: ``draws`` one noise record per column (() for a column without
    recorded draws, whose noise term falls back to z·noise_std); ``bounds`` (lo, hi), each
    (K, D), where hidden cells leave the sample value only bounded (see :func:`confidence_box`)."""
    if tau_std.shape != noise_std.shape or tau.shape != tau_std.shape:
        raise InputError(f"tau {tau.shape}, its std {tau_std.shape} and noise std {noise_std.shape} differ in shape")
    if not (np.all(np.isfinite(tau_std)) and np.all(tau_std >= 0)):
        raise InputError("tau_std must be finite and >= 0")
    if not (np.all(np.isfinite(noise_std)) and np.all(noise_std >= 0)):
        raise InputError("noise_std must be finite and >= 0")
    if not np.all(np.isfinite(tau)):
        raise InputError("tau must be finite")
    if not (n > 0 and np.isfinite(n)):
        raise InputError(f"n must be positive, got {n!r}")
    if s is not None and not (np.isfinite(s) and s >= 0):
        raise InputError(f"s must be finite and >= 0, got {s!r}")
    if len(draws) != tau_std.shape[1]:
        raise InputError(f"draws must give one entry per column ({tau_std.shape[1]}), got {len(draws)}")
    has_draws = np.array([bool(d) for d in draws], dtype=bool)
    noisy = bool(np.any(noise_std > 0)) or bool(has_draws.any())
    if s == 0 and not noisy and bounds is None:  # exact tables at s = 0: every term below is 0 (a column
        return np.zeros_like(tau)                # generation's box asks this once per column it prices)
    with_n = bool(noisy and n_draws)
    if n_intervals is not None and (int(n_intervals) != n_intervals or n_intervals < tau_std.size):
        raise InputError(f"n_intervals must be an integer >= the {tau_std.size} entries given, got {n_intervals!r}")
    m = max(1, tau_std.size if n_intervals is None else int(n_intervals)) + int(with_n)
    z = bonferroni_z(coverage, m)
    alpha = (1.0 - coverage) / m
    # per column: the exact tail of the recorded draws at α'/2 (α' with s given), or z·noise_std without draws
    a_noise = alpha / 2.0 if s is None else alpha
    exact_noise = np.broadcast_to((_noise_widths(draws, a_noise) / float(n))[None, :], tau_std.shape)
    noise = np.where(has_draws[None, :], exact_noise, z * noise_std)
    # the sampling half-width gets what the noise term left of α'
    a_sample = np.where(has_draws[None, :], alpha - a_noise, alpha) if s is None else alpha
    if s is None:
        a_all = np.broadcast_to(a_sample, tau.shape)
        lam = -ndtri(a_all / 2.0) * tau_std / np.sqrt(n)
        if binary.any():
            # τ̂ (the sample's) is within the noise width of the released τ: take the worst one
            at = np.clip(0.5, tau - noise, tau + noise) if noisy else tau
            for a in np.unique(a_all[binary]):  # at most two levels: with and without recorded draws
                sel = binary & (a_all == a)
                lam = np.where(sel, binomial_halfwidth(at, n, float(a)), lam)
    else:
        lam = float(s) * tau_std / np.sqrt(n)
    lam = lam + noise
    if bounds is not None:
        lam = _widen_hidden(lam, tau, noise, n, bounds, binary, a_sample if s is None else None)
    if with_n:
        from marg.marginals.noise_tails import halfwidth

        qn = halfwidth(tuple(n_draws), alpha)
        lam = lam + np.minimum(1.0, np.abs(tau) + lam) * qn / max(float(n) - qn, 1.0)
    # a Bernoulli mean lies in [0, 1]: a half-width reaching past both ends adds nothing to the box
    return np.where(binary, np.minimum(lam, np.maximum(np.abs(tau), np.abs(1.0 - tau))), lam)


def _widen_hidden(lam: np.ndarray, tau: np.ndarray, noise: np.ndarray, n: float,
                  bounds: tuple[np.ndarray, np.ndarray], binary: np.ndarray, a_all: Any) -> np.ndarray:
    """λ of the entries whose sample value is only known to lie in [lo, hi] (hidden cells).

    With ``a_all`` the entries' miss rates (``s=None``): the true probability is in
    [CP_lo(lo), CP_hi(hi)] (Clopper–Pearson at the true count, which lies in [lo·n, hi·n]; both
    ends increase with the count), so λ = max(τ − CP_lo(lo), CP_hi(hi) − τ) + noise. With λ
    set by hand (``a_all`` None): the hand-set λ plus max(τ − lo, hi − τ)."""
    lo, hi = bounds
    hid = (hi > lo) & binary
    if not hid.any():
        return lam
    if a_all is None:
        return np.where(hid, lam + np.maximum(tau - lo, hi - tau), lam)
    a_all = np.broadcast_to(a_all, tau.shape)
    out = lam.copy()
    for a in np.unique(a_all[hid]):
        sel = hid & (a_all == a)
        low, _ = binomial_interval(lo, n, float(a))
        _, up = binomial_interval(hi, n, float(a))
        out = np.where(sel, np.maximum(tau - low, up - tau) + noise, out)
    return out


def _noise_widths(draws: Sequence[tuple], alpha: float) -> np.ndarray:
    """Per column, the half-width q with P(|noise| > q) ≤ ``alpha`` (computed once per distinct draws)."""
    from marg.marginals.noise_tails import halfwidth

    cache: dict[tuple, float] = {}
    out = np.zeros(len(draws))
    for j, d in enumerate(draws):
        key = tuple(d)
        if key not in cache:
            cache[key] = halfwidth(key, alpha) if key else 0.0
        out[j] = cache[key]
    return out
