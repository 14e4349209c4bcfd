"""Calibration of λ, the half-widths of the MRC uncertainty set |E_p Φ − τ| ≤ λ.

The certificate R* bounds the true error of the MRC whenever the true expectation
E_{p*}Φ lies inside the box τ ± λ (seed 000, eq. (34)). λ is therefore a *simultaneous*
confidence box for the m = K·D entries of τ, not a tuning knob.

Default (``s=None``)::

    λ = z · tau_std / sqrt(n)  +  z · noise_std,
    z = Φ⁻¹(1 − (1 − coverage) / (2 m)),

a two-sided normal interval per entry, Bonferroni-corrected over all m entries, so that all
intervals hold together with probability ≥ ``coverage`` (asymptotically: the normal
approximation of each sample mean). ``tau_std`` is the sample standard deviation of the
Φ entry (sqrt(τ(1−τ)) for one-hot entries), ``noise_std`` the standard deviation of the
differential-privacy noise on τ (in τ units; zero for exact releases); both terms get the
same z, which over-covers their sum (|a + b| ≤ |a| + |b|).

Override (``s`` given): λ = s · tau_std / sqrt(n) + z · noise_std, the seed's λ = s/√n
multiplier (MRCpy uses s = 0.3, whose certificates sit far below the real error in high
dimensions); ``s = 0`` gives λ = 0 for exact releases.

Caveat: an entry with τ = 0 (an empty cell) has tau_std = 0 and, for an exact release,
λ = 0: the uncertainty set then rules the cell out ("impossible"), which the normal
approximation does not justify for small n.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import norm

from marginals.errors import InputError


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


def confidence_lambda(
    tau_std: np.ndarray,
    noise_std: np.ndarray,
    n: float,
    s: float | None = None,
    coverage: float = 0.95,
) -> np.ndarray:
    """λ for the MRC uncertainty set (see the module docstring for the formula).

    Parameters
    ----------
    tau_std : ndarray, shape (K, D)
        Sample std of each Φ entry.
    noise_std : ndarray, shape (K, D)
        Std of the released noise on each τ entry, in τ units.
    n : float
        Number of rows the summary was computed from.
    s : float or None
        None: Bonferroni-calibrated z; otherwise the raw multiplier of tau_std/√n.
    coverage : float
        Simultaneous coverage of the box (default 0.95); also sets z of the noise term.

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
    z = bonferroni_z(coverage, max(1, tau_std.size))
    if s is None:
        lam = z * tau_std / np.sqrt(n)
    else:
        if not (np.isfinite(s) and s >= 0):
            raise InputError(f"s must be finite and >= 0, got {s!r}")
        lam = float(s) * tau_std / np.sqrt(n)
    return lam + z * noise_std


def summary_lambda(summary, columns: np.ndarray | None = None, s: float | None = None, coverage: float = 0.95) -> np.ndarray:
    """λ for (a column subset of) a Summary's τ.

    Parameters
    ----------
    summary : marginals.summary.Summary
    columns : ndarray of int, optional
        Ψ columns in use (e.g. the selected features' blocks); all D columns if None. The
        Bonferroni count m is K times the number of columns in use.
    s, coverage : see :func:`confidence_lambda`.

    Returns
    -------
    ndarray, shape (K, len(columns))
    """
    ts, ns = summary.tau_std, summary.noise_std
    if columns is not None:
        ts, ns = ts[:, columns], ns[:, columns]
    return confidence_lambda(ts, ns, summary.n, s=s, coverage=coverage)
