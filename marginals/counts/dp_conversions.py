"""OpenDP's conversions between privacy definitions — pure ε-DP, ρ-zCDP, (ε, δ)-DP — on proxy measurements.

Every conversion marg states is OpenDP's (``opendp.combinators``), applied to a *proxy*
measurement whose OpenDP map is the recorded cost: a Gaussian on a scalar with scale
``1/sqrt(2ρ)`` (its map at sensitivity 1 is ρ) and a Laplace with scale ``1/ε``, each nudged
so that its map is at least the cost (a conversion never understates it).
:mod:`marginals.accounting` (what releases cost and compose to) and :mod:`marginals.privacy`
(the mechanisms) call these; nothing else converts.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

from marg._util import bisect_monotone
from marg.errors import InputError

MAX_NOISE_SCALE = 1e15  # noise of a larger scale could leave the 64-bit counts (and is pure noise anyway)


def dp_prelude() -> SimpleNamespace:
    """OpenDP's names marg uses, as ``opendp.prelude`` spells them (``dp.m``, ``dp.c``, ``dp.atom_domain``…),
    with the contrib features enabled — from OpenDP's core submodules: ``opendp.prelude`` itself also
    imports its extras (scikit-learn, and with it pandas and scipy, when installed: seconds of CPU
    at every DP export that uses none of them)."""
    global _DP
    if _DP is None:
        import opendp.combinators as c
        import opendp.domains as domains
        import opendp.measurements as m
        import opendp.measures as measures
        import opendp.metrics as metrics
        import opendp.mod as mod

        names = {}
        for module in (mod, domains, metrics, measures):
            names.update({k: getattr(module, k) for k in getattr(module, "__all__", ())})
        _DP = SimpleNamespace(**names, m=m, c=c)
    _DP.enable_features("contrib")
    return _DP


_DP: SimpleNamespace | None = None


def opendp_words(exc: Exception) -> str:
    """OpenDP's error message on one line (its first non-empty line, without the backtrace)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return lines[0][:200] if lines else type(exc).__name__


def calibrated(build, scale: float, sensitivity: float, budget: float, describe) -> tuple[float, Any, float]:
    """``(scale, measurement, cost)``: the first scale from ``scale`` up whose measurement ``build(scale)``
    costs at most ``budget`` by OpenDP's map at ``sensitivity`` (float rounding can put the formula's
    scale a hair over the budget; the scale is nudged up until it is not).

    Raises
    ------
    InputError
        OpenDP cannot build the measurement: one line, ``describe(scale)`` and OpenDP's words.
    """
    for i in range(64):
        try:
            meas = build(scale)
            cost = float(meas.map(sensitivity))
        except dp_prelude().OpenDPException as exc:
            raise InputError(f"OpenDP cannot build {describe(scale)} ({opendp_words(exc)})") from None
        if cost <= budget:
            return scale, meas, cost
        scale = math.nextafter(scale, math.inf) if i < 32 else scale * (1.0 + 1e-12)
    raise RuntimeError(f"could not calibrate {describe(scale)}")  # pragma: no cover


def _nudged(make, scale: float, cost: float):
    """``make(scale)`` with the scale nudged down until its OpenDP map at sensitivity 1 is at least ``cost``."""
    meas = make(scale)
    while float(meas.map(1.0)) < cost:  # make sure the proxy is at least as costly
        scale = math.nextafter(scale, 0.0)
        meas = make(scale)
    return meas


def _gaussian_proxy(rho: float):
    """A scalar Gaussian (scale 1/sqrt(2ρ)) whose OpenDP map at sensitivity 1 is at least ``rho``."""
    dp = dp_prelude()
    return _nudged(lambda s: dp.m.make_gaussian(dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float),
                                                scale=s),
                   1.0 / math.sqrt(2.0 * rho), rho)


def _laplace_proxy(epsilon: float):
    """A scalar Laplace (scale 1/ε) whose OpenDP map at sensitivity 1 is at least ``epsilon``."""
    dp = dp_prelude()
    return _nudged(lambda s: dp.m.make_laplace(dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float),
                                               scale=s),
                   1.0 / epsilon, epsilon)


def rho_to_epsilon(rho: float, delta: float) -> float:
    """ε such that ρ-zCDP implies (ε, δ)-DP, by OpenDP's ``make_zCDP_to_approxDP``.

    Computed on a proxy Gaussian measurement (scale ``1/sqrt(2ρ)``, sensitivity 1) whose
    OpenDP map is ``ρ``; the conversion depends on ρ only.
    """
    if rho == 0.0:
        return 0.0
    if math.isinf(rho):
        return math.inf
    if not (0.0 < delta < 1.0):
        raise InputError(f"delta must be in (0, 1) to report a zCDP cost as (ε, δ), got {delta!r}")
    dp = dp_prelude()
    try:
        return float(dp.c.make_zCDP_to_approxDP(_gaussian_proxy(rho)).map(1.0).epsilon(delta))
    except dp.OpenDPException:  # OpenDP overflows for ρ in the thousands: no finite ε it can vouch for
        return math.inf


def pure_and_zcdp_to_epsilon(epsilon: float, rho: float, delta: float) -> float:
    """ε of the composition of an ε-DP release with a ρ-zCDP release, at ``delta``.

    OpenDP: ``make_composition`` of the pure proxy (``make_approximate``) and the zCDP proxy
    converted (``make_zCDP_to_approxDP``) and fixed at δ (``make_fix_delta``).
    """
    if rho == 0.0:
        return epsilon
    if not (0.0 < delta < 1.0):
        raise InputError(f"delta must be in (0, 1) to report a zCDP cost as (ε, δ), got {delta!r}")
    dp = dp_prelude()
    try:
        parts = [dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(_gaussian_proxy(rho)), delta)]
        if epsilon > 0.0:
            parts.append(dp.c.make_approximate(_laplace_proxy(epsilon)))
        eps, _ = dp.c.make_composition(parts).map(1.0) if len(parts) > 1 else parts[0].map(1.0)
    except dp.OpenDPException:
        return math.inf
    return float(eps)


def pure_to_rho(meas, sens: float | int) -> float:
    """ρ of an ε-DP measurement seen as zCDP (OpenDP ``make_pureDP_to_zCDP``: ρ = ε²/2)."""
    return float(dp_prelude().c.make_pureDP_to_zCDP(meas).map(sens))


def pure_rho(epsilon: float) -> float:
    """ρ of an ε-DP release seen as zCDP, by OpenDP (:func:`pure_to_rho` of a Laplace proxy whose
    map is at least ε, so ρ ≥ ε²/2): what a Laplace cost recorded without its ρ counts in zCDP."""
    if epsilon == 0.0 or math.isinf(epsilon):
        return epsilon
    return pure_to_rho(_laplace_proxy(epsilon), 1.0)


def rho_for_epsilon(epsilon: float, delta: float) -> float:
    """The largest ρ whose zCDP guarantee implies (``epsilon``, ``delta``)-DP under OpenDP's
    conversion (:func:`rho_to_epsilon`, monotone in ρ), by bisection to a relative 1e-9.

    A Gaussian release at this ρ is an (ε, δ)-DP release: noise grows like the square root
    of the number of tables instead of linearly (pure-ε Laplace), so it is the better choice
    for releases of many tables.
    """
    epsilon = float(epsilon)
    if not (epsilon > 0.0 and math.isfinite(epsilon)):
        raise InputError(f"epsilon must be finite and > 0, got {epsilon!r}")
    lo, hi = 0.0, epsilon  # ρ ≤ ε always suffices as an upper end: ε(ρ) ≥ ρ
    if 1.0 / math.sqrt(2.0 * epsilon) > MAX_NOISE_SCALE:  # even ρ = ε needs noise beyond what counts can hold
        raise InputError(f"--epsilon {epsilon:g} needs Gaussian noise of scale above {MAX_NOISE_SCALE:.0e} per cell, "
                         "more than marg can add to 64-bit counts: give a larger --epsilon")
    while math.isinf(rho_to_epsilon(hi, delta)):  # OpenDP's conversion overflows for ρ in the thousands
        hi *= 0.5
        if rho_to_epsilon(hi, delta) < epsilon:
            raise InputError(f"--epsilon {epsilon:g} at δ = {delta:g} is beyond what OpenDP's zCDP conversion can "
                             f"compute (it overflows above ρ ≈ {2 * hi:.3g}); such a release protects nobody: give a "
                             "smaller --epsilon")
    lo, hi = bisect_monotone(lambda rho: rho_to_epsilon(rho, delta) > epsilon, lo, hi, 1e-9)
    if lo == 0.0:
        raise InputError(f"--epsilon {epsilon:g} at δ = {delta:g} is too small for any Gaussian noise OpenDP can "
                         "calibrate: give a larger --epsilon")
    return lo
