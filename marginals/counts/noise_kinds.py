"""The noise distributions a release adds: each answers its own std, tail, cost part and least-squares weight.

A noise record (:class:`marg.marginals.counts.noise.NoiseRecord`) and a noise part
``(noise, scale, discrete, count)`` (:mod:`marg.marginals.noise_tails`) name the distribution
that was drawn; every quantity that depends on which one it was is a method of its
:class:`Noise`, found by name in :data:`NOISES`:

- ``std(scale, discrete)`` — the exact standard deviation of one draw (discrete on integer
  counts, continuous on floats);
- ``log_mgf`` / ``theta_max`` / ``lattice_pmf`` / ``closed_halfwidth`` — what
  :func:`marg.marginals.noise_tails.halfwidth` needs to bound a sum of draws (its Chernoff
  bound, its exact lattice convolution, a closed form where there is one);
- ``scale_for(share, Δ)`` — the scale a budget share buys before OpenDP's rounding, and
  ``least_squares(c)`` — the unnormalised weights minimising Σ c_T·σ_T² for a fixed total
  (:func:`marg.marginals.allocation.least_squares_weights`);
- ``pure`` — the privacy definition its cost is stated in: pure ε-DP under L1 (ε's add) or
  ρ-zCDP under L2 (ρ's add, converted to (ε, δ) once); ``record_costs``, ``measured_part`` and
  ``recorded_part`` give a table's record and its part of
  :func:`marg.marginals.accounting.release_cost` — every cost is OpenDP's map
  (:mod:`marg.marginals.counts.dp_conversions`), never a formula of marg's.

Three ship: :class:`Laplace` (``"laplace"``: pure ε-DP, OpenDP's (discrete) Laplace),
:class:`Gaussian` (``"gaussian"``: ρ-zCDP, OpenDP's (discrete) Gaussian) and
:class:`DistributedDiscreteGaussian` (``"distributed-discrete-gaussian"``: one site's discrete
Gaussian share of a secure sum, :mod:`marg.marginals.shared_noise`). A new distribution is
one :class:`Noise` subclass passed to :func:`register_noise`; a
:class:`marg.marginals.mechanisms.Mechanism` naming it then releases, records, composes,
bounds and weights through it (``tests/marginals/test_noise_kinds.py`` registers one).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from marg.errors import InputError

from .dp_conversions import pure_rho, pure_to_rho, rho_to_epsilon

Part = tuple[str, float, bool, int]  # (noise, scale, discrete, count): a cell's independent draws of one kind


class Noise:
    """One noise distribution (module docstring). Subclasses set ``name``, ``label`` and ``pure``
    and give ``std``, ``scale_for``, ``least_squares`` and the tail pieces."""

    name: str = ""
    label: str = ""  # how a person calls it ("Laplace", "Gaussian")
    pure: bool = False  # pure ε-DP under L1 (True) or ρ-zCDP under L2 (False)

    # -- noise
    def checked(self, scale: Any) -> float:
        """``scale`` as a float, refused unless finite and > 0."""
        b = float(scale)
        if not (b > 0.0) or not math.isfinite(b):
            raise InputError(f"{self.label} scale must be finite and > 0, got {scale!r}")
        return b

    def std(self, scale: float, discrete: bool) -> float:
        """The std of one draw at ``scale`` (discrete: on the integer lattice)."""
        raise NotImplementedError

    def scale_for(self, share: float, sensitivity: float | int) -> float:
        """The scale whose cost at ``sensitivity`` is ``share`` before OpenDP's rounding."""
        raise NotImplementedError

    def least_squares(self, c: np.ndarray) -> np.ndarray:
        """Unnormalised weights w_T minimising Σ_T c_T·σ_T² at a fixed total budget (σ_T² ∝ share_T^−a:
        w ∝ c^{1/(1+a)})."""
        raise NotImplementedError

    # -- tails (marginals.noise_tails)
    def log_mgf(self, scale: float, discrete: bool, count: int, theta: float) -> float:
        """``count`` · ln M(θ) of one draw (``inf`` where the mgf does not exist)."""
        raise NotImplementedError

    def theta_max(self, scale: float) -> float:
        """The θ below which the mgf exists (``inf``: everywhere)."""
        return math.inf

    def lattice_pmf(self, scale: float, tail: float) -> tuple[np.ndarray, float]:
        """The pmf of one discrete draw on −T..T and the mass left outside (≤ ``tail``)."""
        raise InputError(f"{self.name} noise has no pmf on the integers")

    def closed_halfwidth(self, parts: Sequence[Part], alpha: float) -> float | None:
        """q with P(|Σ draws| > q) ≤ α in closed form for ``parts`` all of this noise (None: no closed form)."""
        return None

    # -- accounting (every cost is OpenDP's map)
    def record_costs(self, cost: float, delta: float) -> tuple[float, float, float]:
        """A table's record (ε, δ, ρ) from its OpenDP map ``cost`` (ε for pure DP; ρ for zCDP, its ε at ``delta``)."""
        if self.pure:
            return cost, 0.0, 0.0
        return rho_to_epsilon(cost, float(delta)), float(delta), cost

    def measured_part(self, measurement: Any, sensitivity: float | int, cost: float,
                      delta: float) -> tuple[str, float, float, float]:
        """A calibrated table's part of :func:`marg.marginals.accounting.release_cost`: OpenDP's map of its
        measurement (and, for pure DP, of that measurement seen as zCDP)."""
        if self.pure:
            return (self.name, cost, pure_to_rho(measurement, sensitivity), 0.0)
        return (self.name, 0.0, cost, float(delta))

    def recorded_part(self, record: Any) -> tuple[str, float, float, float]:
        """A released table's part of :func:`marg.marginals.accounting.release_cost` from its noise record
        (a pure record's ρ is its ε as zCDP, OpenDP's map of a proxy)."""
        if self.pure:
            return (self.name, record.epsilon, pure_rho(record.epsilon), 0.0)
        return (self.name, 0.0, record.rho, record.delta)


class Laplace(Noise):
    """Laplace noise of scale b: pure ε-DP, a share ε_t buys b = Δ/ε_t; discrete on integer counts
    (``P(z) ∝ exp(−|z|/b)``, ``Var = 2q/(1−q)²`` with ``q = exp(−1/b)``), else ``Var = 2b²``."""

    name, label, pure = "laplace", "Laplace", True

    def std(self, scale: float, discrete: bool) -> float:
        b = self.checked(scale)
        if not discrete:
            return math.sqrt(2.0) * b
        q = math.exp(-1.0 / b)
        return math.sqrt(2.0 * q) / -math.expm1(-1.0 / b)

    def scale_for(self, share: float, sensitivity: float | int) -> float:
        return float(sensitivity) / share

    def least_squares(self, c: np.ndarray) -> np.ndarray:
        return np.cbrt(c)  # σ_T² ∝ ε_T^−2

    def log_mgf(self, scale: float, discrete: bool, count: int, theta: float) -> float:
        b = scale
        if theta * b >= 1.0:
            return math.inf
        if not discrete:  # continuous: M(θ) = 1/(1 − θ²b²)
            return -count * math.log1p(-(theta * b) ** 2)
        r = math.exp(-1.0 / b)  # discrete: (1 − r)²/((1 − r·e^θ)(1 − r·e^{−θ}))
        a, c = r * math.exp(theta), r * math.exp(-theta)
        if a >= 1.0:
            return math.inf
        return count * (2.0 * math.log1p(-r) - math.log1p(-a) - math.log1p(-c))

    def theta_max(self, scale: float) -> float:
        return 1.0 / scale

    def lattice_pmf(self, scale: float, tail: float) -> tuple[np.ndarray, float]:
        b = scale
        r = math.exp(-1.0 / b)
        T = max(1, math.ceil(b * math.log(2.0 / (tail * (1.0 + r)))))
        z = np.arange(-T, T + 1)
        return (1.0 - r) / (1.0 + r) * r ** np.abs(z), 2.0 * r ** (T + 1) / (1.0 + r)

    def closed_halfwidth(self, parts: Sequence[Part], alpha: float) -> float | None:
        if len(parts) == 1 and parts[0][3] == 1:
            return parts[0][1] * math.log(1.0 / alpha)  # continuous: P(|L| > q) = exp(−q/b) exactly
        return None


class Gaussian(Noise):
    """Gaussian noise of scale σ: ρ-zCDP, a share ρ_t buys σ = Δ/sqrt(2ρ_t); discrete on integer counts
    (``P(z) ∝ exp(−z²/(2σ²))``, variance summed over ``|z| ≤ 40σ + 40``), else ``Var = σ²``."""

    name, label, pure = "gaussian", "Gaussian", False

    def std(self, scale: float, discrete: bool) -> float:
        s = self.checked(scale)
        if not discrete:
            return s
        if s >= 40.0:  # the lattice sum equals σ² to machine precision long before: no 80σ-long array
            return s
        zmax = int(math.ceil(40.0 * s + 40.0))
        z = np.arange(-zmax, zmax + 1, dtype=np.float64)
        w = np.exp(-(z * z) / (2.0 * s * s))
        return float(math.sqrt(float(np.sum(z * z * w) / np.sum(w))))

    def scale_for(self, share: float, sensitivity: float | int) -> float:
        return float(sensitivity) / math.sqrt(2.0 * share)

    def least_squares(self, c: np.ndarray) -> np.ndarray:
        return np.sqrt(c)  # σ_T² ∝ ρ_T^−1

    def log_mgf(self, scale: float, discrete: bool, count: int, theta: float) -> float:
        b = scale  # continuous, or the discrete Gaussian (sub-Gaussian with the same parameter): exp(θ²σ²/2)
        return count * 0.5 * theta * theta * b * b

    def lattice_pmf(self, scale: float, tail: float) -> tuple[np.ndarray, float]:
        b = scale  # normalised over a range far beyond the truncation
        T = max(1, math.ceil(b * math.sqrt(2.0 * math.log(2.0 / tail))) + 1)
        W = T + math.ceil(12.0 * b) + 10
        zw = np.arange(-W, W + 1)
        w = np.exp(-(zw.astype(np.float64) ** 2) / (2.0 * b * b))
        w /= w.sum()
        inner = w[W - T : W + T + 1]
        return inner, max(0.0, 1.0 - float(inner.sum()))

    def closed_halfwidth(self, parts: Sequence[Part], alpha: float) -> float | None:
        if all(not p[2] for p in parts):  # a continuous Gaussian sum: exactly normal
            from scipy.stats import norm

            return float(norm.isf(alpha / 2.0) * math.sqrt(sum(p[3] * p[1] ** 2 for p in parts)))
        return None


class DistributedDiscreteGaussian(Gaussian):
    """One site's share of the distributed discrete Gaussian (Kairouz, Liu, Steinke, ICML 2021;
    :mod:`marg.marginals.shared_noise`): each share is OpenDP's discrete Gaussian of scale σ, so one
    draw's std, mgf (sub-Gaussian with parameter σ) and lattice pmf are the discrete Gaussian's, and a
    secure sum of m shares is m independent draws (a record's ``parts`` count them; the exact tails
    convolve the m pmfs, :mod:`marg.marginals.noise_tails`). Its ρ-zCDP cost is not one draw's: a
    record states the sum's, by the theorem the plan names (``record.rho``)."""

    name, label, pure = "distributed-discrete-gaussian", "distributed discrete Gaussian", False


NOISES: dict[str, Noise] = {}


def register_noise(noise: Noise) -> Noise:
    """Make ``noise`` known by its name (a name already taken, or ``"none"``, is refused)."""
    if not noise.name or noise.name in NOISES or noise.name == "none":
        raise InputError(f"a noise named {noise.name!r} is already registered (or is no name)")
    NOISES[noise.name] = noise
    return noise


def noise_of(name: str) -> Noise:
    """The registered noise ``name``; InputError naming the known ones."""
    try:
        return NOISES[name]
    except (KeyError, TypeError):
        raise InputError(f"unknown noise mechanism {name!r} (expected one of {', '.join(NOISES)})") from None


def composes_pure(name: str) -> bool:
    """Whether a cost part of ``name`` composes as pure ε-DP; any other part (a registered zCDP noise,
    or a zCDP measurement that is no table noise, as the selection's noisy top-k) is ρ-zCDP."""
    noise = NOISES.get(name)
    return noise is not None and noise.pure


def laplace_std(scale: float, discrete: bool) -> float:
    """Std of Laplace noise of scale ``b`` (:meth:`Laplace.std`)."""
    return NOISES["laplace"].std(scale, discrete)


def gaussian_std(scale: float, discrete: bool) -> float:
    """Std of Gaussian noise of scale ``σ`` (:meth:`Gaussian.std`)."""
    return NOISES["gaussian"].std(scale, discrete)


register_noise(Laplace())
register_noise(Gaussian())
register_noise(DistributedDiscreteGaussian())
