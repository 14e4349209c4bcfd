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
τ̂ itself is not released. When no noise draws are given, the noise term falls back to
z·noise_std (a normal approximation, flagged by the learners as approximate).

Override (``s`` given): λ = s · tau_std / sqrt(n) + the noise term at α', the seed's λ = s/√n
multiplier (MRCpy uses s = 0.3, whose certificates sit far below the real error in high
dimensions); ``s = 0`` gives λ = 0 for exact releases: the pure minimax problem on the
released marginals, in which an empty cell is ruled out.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from scipy.stats import beta, norm

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
    return float(norm.isf((1.0 - coverage) / (2.0 * m)))


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
    if not (0.0 < alpha < 1.0):
        raise InputError(f"alpha must be in (0, 1), got {alpha!r}")
    n = float(n)
    k = np.clip(np.asarray(tau, dtype=np.float64), 0.0, 1.0) * n
    t = k / n
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = np.where(k > 0, beta.ppf(alpha / 2.0, np.maximum(k, 1e-300), n - k + 1.0), 0.0)
        hi = np.where(k < n, beta.ppf(1.0 - alpha / 2.0, k + 1.0, np.maximum(n - k, 1e-300)), 1.0)
    return np.maximum(t - lo, hi - t)


def confidence_lambda(
    tau_std: np.ndarray,
    noise_std: np.ndarray,
    n: float,
    s: float | None = None,
    coverage: float = 0.95,
    tau: np.ndarray | None = None,
    binary: np.ndarray | None = None,
    draws: Sequence[tuple] | None = None,
    n_draws: Sequence[tuple] = (),
    n_intervals: int | None = None,
) -> np.ndarray:
    """λ for the MRC uncertainty set (see the module docstring for the formula).

    Parameters
    ----------
    tau_std : ndarray, shape (K, D)
        Sample std of each Φ entry.
    noise_std : ndarray, shape (K, D)
        Std of the released noise on each τ entry, in τ units (used only without ``draws``).
    n : float
        Number of rows the summary was computed from.
    s : float or None
        None: Bonferroni-calibrated intervals; otherwise the raw multiplier of tau_std/√n.
    coverage : float
        Simultaneous coverage of the box (default 0.95).
    tau : ndarray, shape (K, D), optional
        The released τ; with ``binary``, needed for the exact binomial intervals.
    binary : ndarray of bool, shape (D,) or (K, D), optional
        Entries that are Bernoulli means (one-hot cells): with ``s=None`` they get the
        Clopper–Pearson half-width :func:`binomial_halfwidth` instead of z·tau_std/√n.
        Without ``tau``/``binary`` every entry gets the normal interval.
    draws : sequence (length D) of noise parts, optional
        Per Ψ column, the independent noise draws in one count behind it
        (:func:`marg.marginals.noise_tails.halfwidth` turns them into the exact noise term).
    n_draws : noise parts of n (the label table's total), optional
        With noise on n, τ = N/n̂ also moves by τ·|n̂ − n|/n̂: one more interval (on n) joins
        the Bonferroni count and that term is added.
    n_intervals : int, optional
        The Bonferroni count m of entries the box must cover together, when it exceeds the
        entries given (column generation computes λ for the columns it adds, but a column is
        chosen among all candidates: m counts every candidate). Default: the entries given.

    Returns
    -------
    ndarray, shape (K, D)
        λ ≥ 0.
    """
    tau_std = np.asarray(tau_std, dtype=np.float64)
    noise_std = np.asarray(noise_std, dtype=np.float64)
    if tau_std.shape != noise_std.shape:
        raise InputError(f"tau_std {tau_std.shape} and noise_std {noise_std.shape} differ in shape")
    if not (np.all(np.isfinite(tau_std)) and np.all(tau_std >= 0)):
        raise InputError("tau_std must be finite and >= 0")
    if not (np.all(np.isfinite(noise_std)) and np.all(noise_std >= 0)):
        raise InputError("noise_std must be finite and >= 0")
    if not (n > 0 and np.isfinite(n)):
        raise InputError(f"n must be positive, got {n!r}")
    if s is not None and not (np.isfinite(s) and s >= 0):
        raise InputError(f"s must be finite and >= 0, got {s!r}")
    noisy = bool(np.any(noise_std > 0)) or bool(draws and any(draws))
    with_n = bool(noisy and draws is not None and n_draws)
    if n_intervals is not None and (int(n_intervals) != n_intervals or n_intervals < tau_std.size):
        raise InputError(f"n_intervals must be an integer >= the {tau_std.size} entries given, got {n_intervals!r}")
    m = max(1, tau_std.size if n_intervals is None else int(n_intervals)) + int(with_n)
    alpha = (1.0 - coverage) / m if 0.0 < coverage < 1.0 else None
    z = bonferroni_z(coverage, m)
    if draws is not None and noisy:
        if len(draws) != tau_std.shape[1]:
            raise InputError(f"draws must give one entry per column ({tau_std.shape[1]}), got {len(draws)}")
        a_noise = alpha / 2.0 if s is None else alpha
        widths = _noise_widths(draws, a_noise) / float(n)  # (D,)
        noise = np.broadcast_to(widths[None, :], tau_std.shape)
    else:
        a_noise = 0.0
        noise = z * noise_std
    a_sample = alpha - a_noise if s is None and draws is not None and noisy else alpha
    if s is None:
        lam = bonferroni_z_level(a_sample) * tau_std / np.sqrt(n)
        if (tau is None) != (binary is None):
            raise InputError("the binomial intervals need both tau and binary (or neither)")
        if tau is not None:
            tau = np.asarray(tau, dtype=np.float64)
            if tau.shape != tau_std.shape:
                raise InputError(f"tau {tau.shape} and tau_std {tau_std.shape} differ in shape")
            if not np.all(np.isfinite(tau)):
                raise InputError("tau must be finite")
            b = np.broadcast_to(np.asarray(binary, dtype=bool), tau.shape)
            if b.any():
                # τ̂ (the sample's) is within the noise width of the released τ: take the worst one
                at = np.clip(0.5, tau - noise, tau + noise) if noisy else tau
                lam = np.where(b, binomial_halfwidth(at, n, a_sample), lam)
    else:
        lam = float(s) * tau_std / np.sqrt(n)
    lam = lam + noise
    if with_n:
        from marg.marginals.noise_tails import halfwidth

        qn = halfwidth(tuple(n_draws), alpha)
        t = np.abs(tau) if tau is not None else tau_std
        lam = lam + np.minimum(1.0, t + lam) * qn / max(float(n) - qn, 1.0)
    return lam


def bonferroni_z_level(alpha: float) -> float:
    """Two-sided normal quantile Φ⁻¹(1 − α/2) of one interval at miss rate ``alpha``."""
    return float(norm.isf(alpha / 2.0))


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


def map_lambda(moments, fmap, s: float | None = None, coverage: float = 0.95) -> np.ndarray:
    """λ (K, D) for a feature map's :class:`marg.learners.features.statistics.Moments`.

    The map's indicator columns (one-hot levels, edge cells) get the exact binomial
    intervals when ``s`` is None; the Bonferroni count is every entry of the map; under DP
    the noise term is exact for the draws behind each column (``moments.draws``).
    """
    return confidence_lambda(moments.std, moments.noise, moments.n, s=s, coverage=coverage, tau=moments.tau,
                             binary=fmap.indicator_columns(), draws=moments.draws or None, n_draws=moments.n_draws)
