"""Privacy accounting: what a release costs, what a site has spent, and the cap it is held to.

Every conversion and composition of guarantees is done by OpenDP (``opendp.combinators``),
on *proxy* measurements whose OpenDP map is the recorded cost: a Gaussian on a scalar with
scale ``1/sqrt(2ρ)`` (its map at sensitivity 1 is ρ) and a Laplace with scale ``1/ε``.

**One release** has a :class:`PrivacyCost` ``(ε, δ, ρ)``: it is (ε, δ)-DP and ρ-zCDP. A
Laplace release is pure ε-DP (δ = 0) and ``Σ_t ε_t²/2``-zCDP (OpenDP's
``make_pureDP_to_zCDP`` per table); a Gaussian release is ρ-zCDP, and its ε is ρ converted
at the release's δ (``make_zCDP_to_approxDP``).

**Many releases** (:class:`Spend`, what the ledger keeps). Adding the releases' ε's (basic
composition) wastes budget: four Gaussian releases at (ε = 1, δ = 1e-6) would count as
ε = 4, while composed in zCDP — ρ's add — and converted **once** they are
(ε = 1.89, δ = 1e-5). So a spend keeps the sums by kind — ``ε`` and ``ρ`` of the pure-DP
(Laplace) releases, ``ρ`` of the zCDP (Gaussian) releases — and its ε at a given δ
(:meth:`Spend.epsilon_at`) is the smaller of

* every release in zCDP: ``ε(ρ_pure + ρ_zCDP, δ)`` — OpenDP's zCDP → (ε, δ) conversion;
* Laplace releases as pure ε, the Gaussian ones in zCDP: OpenDP's composition
  (``make_composition``) of an ε_pure-DP proxy (``make_approximate``) with the ρ_zCDP proxy
  converted and fixed at δ (``make_zCDP_to_approxDP``, ``make_fix_delta``).

* basic composition of the releases' recorded (ε, δ): ``Σ ε`` at ``Σ δ`` (when that is at
  most δ) — what the ledger did before; so the composed spend is never above it.

All are valid (ε, δ) guarantees of the whole history, so their minimum is. Releases whose
cost carries (ε, δ) but no ρ (none that marg makes) are composed on top by adding (ε, δ).

**The cap** :func:`check_budget` holds a spend to is a :class:`PrivacyCost` too: ``ε`` at
``δ`` (the spend converted at the cap's δ), ``ρ``, or both. :data:`DEFAULT_DELTA` is the one
default δ of exports and caps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Mapping

from marg.errors import InputError, RefusedError

DEFAULT_DELTA = 1e-6  # δ of a Gaussian export and of a cap, unless given
MAX_NOISE_SCALE = 1e15  # noise of a larger scale could leave the 64-bit counts (and is pure noise anyway)
_REL_TOL = 1e-9  # spends within this relative tolerance of the cap are allowed (float sums)


def _dp():
    """Import ``opendp.prelude`` with the contrib features enabled."""
    import opendp.prelude as dp

    dp.enable_features("contrib")
    return dp


def _opendp_words(exc: Exception) -> str:
    """OpenDP's error message on one line (its first non-empty line, without the backtrace)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return lines[0][:200] if lines else type(exc).__name__


# ---------------------------------------------------------------------------------------
# Privacy cost of one release (or a cap)
# ---------------------------------------------------------------------------------------
def _num(v: Any, what: str) -> float:
    if isinstance(v, str) and v.strip().lower() in ("inf", "infinity"):
        return math.inf
    if v is None:
        return 0.0
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise InputError(f"privacy cost field {what} must be a number, got {v!r}") from None
    if x != x or x < 0.0:
        raise InputError(f"privacy cost field {what} must be >= 0, got {v!r}")
    return x


def _g(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.6g}"


@dataclass(frozen=True)
class PrivacyCost:
    """The privacy cost of a release (or a cap on the total cost).

    A release with cost ``(ε, δ, ρ)`` is (ε, δ)-differentially private (pure ε-DP when
    ``δ = 0``) **and** ρ-zCDP, for add/remove-one-patient neighbours. ``+`` adds field by
    field (the ledger's recorded running sums); what a history of releases has spent is a
    :class:`Spend`. ``math.inf`` marks an exact (non-private) release: :meth:`unbounded`.

    As a **cap** (:func:`check_budget`), a field equal to 0 means "not capped in this
    currency": ``PrivacyCost(epsilon=1.0)`` caps pure ε at 1 (δ = 0, so Gaussian releases
    are refused), ``PrivacyCost(epsilon=1.0, delta=1e-5)`` caps ε at δ = 1e-5,
    ``PrivacyCost(rho=0.5)`` caps ρ-zCDP.

    Attributes
    ----------
    epsilon : float
    delta : float
    rho : float
    """

    epsilon: float = 0.0
    delta: float = 0.0
    rho: float = 0.0

    def __post_init__(self) -> None:
        for f in ("epsilon", "delta", "rho"):
            object.__setattr__(self, f, _num(getattr(self, f), f))
        if self.delta > 1.0:
            raise InputError(f"privacy cost field delta must be <= 1, got {self.delta!r}")

    @classmethod
    def zero(cls) -> "PrivacyCost":
        return cls()

    @classmethod
    def unbounded(cls) -> "PrivacyCost":
        """The cost of an exact (non-private) release: unbounded in every currency."""
        return cls(epsilon=math.inf, delta=0.0, rho=math.inf)

    @property
    def is_zero(self) -> bool:
        return self.epsilon == 0.0 and self.delta == 0.0 and self.rho == 0.0

    def __add__(self, other: "PrivacyCost") -> "PrivacyCost":
        if not isinstance(other, PrivacyCost):
            return NotImplemented
        return PrivacyCost(
            epsilon=self.epsilon + other.epsilon,
            delta=min(1.0, self.delta + other.delta),
            rho=self.rho + other.rho,
        )

    def describe(self) -> str:
        """One-line text, e.g. ``ε=0.5, δ=1e-06, ρ=0.125``."""
        return f"ε={_g(self.epsilon)}, δ={_g(self.delta)}, ρ={_g(self.rho)}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict; infinities are written as the string ``"inf"``."""
        return {k: ("inf" if math.isinf(v) else v) for k, v in
                (("epsilon", self.epsilon), ("delta", self.delta), ("rho", self.rho))}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "PrivacyCost":
        if not isinstance(d, Mapping):
            raise InputError(f"privacy cost must be an object, got {d!r}")
        return cls(epsilon=d.get("epsilon", 0.0), delta=d.get("delta", 0.0), rho=d.get("rho", 0.0))


# ---------------------------------------------------------------------------------------
# OpenDP conversions on proxy measurements
# ---------------------------------------------------------------------------------------
def _gaussian_proxy(rho: float):
    """A scalar Gaussian whose OpenDP map at sensitivity 1 is at least ``rho`` (scale 1/sqrt(2ρ))."""
    dp = _dp()
    scale = 1.0 / math.sqrt(2.0 * rho)

    def make(s: float):
        return dp.m.make_gaussian(dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=s)

    meas = make(scale)
    while float(meas.map(1.0)) < rho:  # make sure the proxy is at least as costly
        scale = math.nextafter(scale, 0.0)
        meas = make(scale)
    return meas


def _laplace_proxy(epsilon: float):
    """A scalar Laplace whose OpenDP map at sensitivity 1 is at least ``epsilon`` (scale 1/ε)."""
    dp = _dp()
    scale = 1.0 / epsilon

    def make(s: float):
        return dp.m.make_laplace(dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=s)

    meas = make(scale)
    while float(meas.map(1.0)) < epsilon:
        scale = math.nextafter(scale, 0.0)
        meas = make(scale)
    return meas


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
    dp = _dp()
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
    dp = _dp()
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
    return float(_dp().c.make_pureDP_to_zCDP(meas).map(sens))


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
    while hi - lo > 1e-9 * hi:
        mid = 0.5 * (lo + hi)
        if rho_to_epsilon(mid, delta) <= epsilon:
            lo = mid
        else:
            hi = mid
    if lo == 0.0:
        raise InputError(f"--epsilon {epsilon:g} at δ = {delta:g} is too small for any Gaussian noise OpenDP can "
                         "calibrate: give a larger --epsilon")
    return lo


# ---------------------------------------------------------------------------------------
# What a history of releases has spent
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Spend:
    """The composed privacy spend of a site's releases (see the module docstring).

    Attributes
    ----------
    eps_pure, rho_pure : float
        Σ ε and Σ ρ of the pure-DP (δ = 0) releases.
    rho_zcdp : float
        Σ ρ of the zCDP releases with δ > 0 (Gaussian).
    eps_zcdp, delta_zcdp : float
        Σ of the same releases' recorded ε and δ (basic composition).
    eps_approx, delta_approx : float
        Σ ε and Σ δ of releases that are (ε, δ)-DP without a ρ (none that marg makes).
    exact : bool
        An exact (non-private) release was made: the spend is unbounded.
    """

    eps_pure: float = 0.0
    rho_pure: float = 0.0
    rho_zcdp: float = 0.0
    eps_approx: float = 0.0
    delta_approx: float = 0.0
    exact: bool = False
    eps_zcdp: float = 0.0
    delta_zcdp: float = 0.0

    def add(self, cost: PrivacyCost) -> "Spend":
        """The spend after one more release of ``cost``."""
        if math.isinf(cost.epsilon) or math.isinf(cost.rho):
            return replace(self, exact=True)
        if cost.delta == 0.0:
            rho = cost.rho if cost.rho > 0.0 or cost.epsilon == 0.0 else pure_to_rho(_laplace_proxy(cost.epsilon), 1.0)
            return replace(self, eps_pure=self.eps_pure + cost.epsilon, rho_pure=self.rho_pure + rho)
        if cost.rho > 0.0:
            return replace(self, rho_zcdp=self.rho_zcdp + cost.rho, eps_zcdp=self.eps_zcdp + cost.epsilon,
                           delta_zcdp=self.delta_zcdp + cost.delta)
        return replace(self, eps_approx=self.eps_approx + cost.epsilon, delta_approx=self.delta_approx + cost.delta)

    @classmethod
    def of(cls, *costs: PrivacyCost) -> "Spend":
        s = cls()
        for c in costs:
            s = s.add(c)
        return s

    @property
    def is_zero(self) -> bool:
        return not self.exact and self.eps_pure == self.rho_pure == self.rho_zcdp == self.eps_approx == 0.0

    @property
    def pure(self) -> bool:
        """Only pure-DP releases (its ε needs no δ)."""
        return not self.exact and self.rho_zcdp == 0.0 and self.eps_approx == 0.0 and self.delta_approx == 0.0

    @property
    def rho(self) -> float:
        """Total ρ-zCDP (ρ's add); ``inf`` after an exact release or one without a ρ."""
        if self.exact or self.eps_approx > 0.0 or self.delta_approx > 0.0:
            return math.inf
        return self.rho_pure + self.rho_zcdp

    def epsilon_at(self, delta: float) -> float:
        """The smallest ε of the two compositions for which the history is (ε, ``delta``)-DP."""
        if self.exact:
            return math.inf
        d = float(delta) - self.delta_approx
        if d < -1e-300:
            return math.inf
        d = min(d, 1.0 - 1e-12)
        if self.rho_zcdp == 0.0:
            best = self.eps_pure
        else:
            best = pure_and_zcdp_to_epsilon(self.eps_pure, self.rho_zcdp, d) if d > 0.0 else math.inf
        r = self.rho_pure + self.rho_zcdp
        if r > 0.0 and d > 0.0:
            best = min(best, rho_to_epsilon(r, d))
        if self.rho_zcdp > 0.0 and self.delta_zcdp <= d * (1.0 + _REL_TOL):
            best = min(best, self.eps_pure + self.eps_zcdp)
        return best + self.eps_approx

    def as_cost(self, delta: float) -> PrivacyCost:
        """The spend as one (ε, δ, ρ): ε at ``delta`` (δ = 0 for a pure-DP history whose pure ε is
        at least as tight)."""
        if self.exact:
            return PrivacyCost.unbounded()
        d = float(delta)
        eps = self.epsilon_at(d)
        if self.pure and (d == 0.0 or eps >= self.eps_pure):  # pure ε is the tighter statement: δ = 0
            return PrivacyCost(epsilon=self.eps_pure, delta=0.0, rho=self.rho)
        return PrivacyCost(epsilon=eps, delta=d, rho=self.rho)

    def describe(self, delta: float) -> str:
        """``ε=…, δ=…, ρ=…`` with ε the spend converted at ``delta`` (:meth:`as_cost`)."""
        return self.as_cost(delta).describe()

    def to_dict(self) -> dict[str, Any]:
        return {"eps_pure": self.eps_pure, "rho_pure": self.rho_pure, "rho_zcdp": self.rho_zcdp,
                "eps_approx": self.eps_approx, "delta_approx": self.delta_approx, "exact": self.exact,
                "eps_zcdp": self.eps_zcdp, "delta_zcdp": self.delta_zcdp}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Spend":
        if not isinstance(d, Mapping) or not isinstance(d.get("exact"), bool):
            raise InputError(f"malformed privacy spend {d!r}")
        nums = {k: _num(d.get(k), k) for k in ("eps_pure", "rho_pure", "rho_zcdp", "eps_approx", "delta_approx",
                                                "eps_zcdp", "delta_zcdp")}
        return cls(**nums, exact=d["exact"])


def cap_delta(cap: PrivacyCost | None, default: float = DEFAULT_DELTA) -> float:
    """The δ a spend is converted at for display against ``cap`` (its δ, else ``default``)."""
    return cap.delta if cap is not None and cap.epsilon > 0.0 else default


# ---------------------------------------------------------------------------------------
# Budget cap and check
# ---------------------------------------------------------------------------------------
def check_budget(cap: PrivacyCost, spent: "Spend | PrivacyCost", requested: PrivacyCost) -> None:
    """Refuse a release whose cost would take the composed spend past the cap.

    Call it before anything is computed or written. With ``total = spent.add(requested)``
    the release is allowed iff ``total.rho ≤ cap.rho`` (if the cap sets ρ) and
    ``total.epsilon_at(cap.delta) ≤ cap.epsilon`` (if the cap sets ε), each up to a relative
    rounding tolerance of 1e-9. An exact release (:meth:`PrivacyCost.unbounded`) always
    exceeds it. ``spent`` may be one :class:`PrivacyCost` (a single earlier release).

    Raises
    ------
    InputError
        If the cap sets no currency (all fields 0).
    RefusedError
        ``privacy budget exhausted: spent …, requested …, cap …`` (one line).
    """
    if cap.epsilon == 0.0 and cap.rho == 0.0:
        raise InputError(f"privacy budget cap sets neither epsilon nor rho: {cap.describe()}")
    if isinstance(spent, PrivacyCost):
        spent = Spend.of(spent)
    total = spent.add(requested)

    def over(x: float, c: float) -> bool:
        return x > c * (1.0 + _REL_TOL) + 1e-300

    bad = cap.rho > 0.0 and over(total.rho, cap.rho)
    if cap.epsilon > 0.0 and not bad:
        bad = over(total.epsilon_at(cap.delta), cap.epsilon)
    if bad and cap.rho == 0.0 and cap.delta == 0.0 and requested.delta > 0.0:
        raise RefusedError(
            f"privacy budget refuses an (ε, δ) release: the cap is pure ε-DP (δ = 0, {cap.describe()}); export with "
            f"--mechanism laplace, or set a cap with --delta or --rho"
        )
    if bad:
        raise RefusedError(
            f"privacy budget exhausted: spent {spent.describe(cap.delta)}, requested {requested.describe()}, "
            f"cap {cap.describe()}"
        )
