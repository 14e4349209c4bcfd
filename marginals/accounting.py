"""Privacy accounting: what a release costs, what a site has spent, and the cap it is held to.

Every conversion and composition of guarantees is done by OpenDP (``opendp.combinators``),
on proxy measurements whose OpenDP map is the recorded cost (:mod:`marginals.counts.dp_conversions`).

**One release** has a :class:`PrivacyCost` ``(ε, δ, ρ)``: it is (ε, δ)-DP and ρ-zCDP. A
Laplace release is pure ε-DP (δ = 0) and ``Σ_t ε_t²/2``-zCDP (OpenDP's
``make_pureDP_to_zCDP`` per table); a Gaussian release is ρ-zCDP, and its ε is ρ converted
at the release's δ (``make_zCDP_to_approxDP``). :func:`release_cost` is the one place that
composes a release's tables into its cost.

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

**Shared noise** (:mod:`marginals.shared_noise`) has two costs per round: the study's guarantee (the
secure sum of ≥ t survivors' shares, ``SharedNoisePlan.study_cost``) is the release's cost — the one
composed into the spend and charged against the cap — and the site's own (its share alone,
``SharedNoisePlan.site_cost``) is recorded beside it in the ledger (``own_cost``), never charged.

**The cap** :func:`check_budget` holds a spend to is a :class:`PrivacyCost` too: ``ε`` at
``δ`` (the spend converted at the cap's δ), ``ρ``, or both. :data:`DEFAULT_DELTA` is the one
default δ of exports and caps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping

from marg.errors import InputError, RefusedError, option

from .counts.dp_conversions import pure_and_zcdp_to_epsilon, pure_rho, rho_to_epsilon

DEFAULT_DELTA = 1e-6  # δ of a Gaussian export and of a cap, unless given
_REL_TOL = 1e-9  # spends within this relative tolerance of the cap are allowed (float sums)


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
    pure_epsilon : float
        Of a release that composes pure ε-DP parts with zCDP ones (:func:`release_cost`; round 1 of
        select-then-measure with a Laplace label table): the pure parts' Σ ε, which ``epsilon`` and
        ``rho`` include (ρ as OpenDP's ε²/2 map). :class:`Spend` keeps the two apart, so later zCDP
        releases compose with the zCDP part's ρ and the pure ε adds. 0 for every other release
        (and then not written).
    pure_rho : float
        Of the same mixed release: the pure parts' Σ ρ as :func:`release_cost` summed them (each
        part's OpenDP map), which ``rho`` includes — so the zCDP part's ρ is ``rho − pure_rho``,
        computed once, where the release's cost is. Written beside ``pure_epsilon``; a ledger
        entry written before it existed (one Laplace table) reads OpenDP's map of its ``pure_epsilon``.
    """

    epsilon: float = 0.0
    delta: float = 0.0
    rho: float = 0.0
    pure_epsilon: float = 0.0
    pure_rho: float = 0.0

    def __post_init__(self) -> None:
        for f in ("epsilon", "delta", "rho", "pure_epsilon", "pure_rho"):
            object.__setattr__(self, f, _num(getattr(self, f), f))
        if self.pure_rho > self.rho * (1.0 + 1e-12):
            raise InputError(f"privacy cost field pure_rho {self.pure_rho!r} exceeds rho {self.rho!r}")
        if self.pure_epsilon > self.epsilon * (1.0 + 1e-12):
            raise InputError(f"privacy cost field pure_epsilon {self.pure_epsilon!r} exceeds epsilon {self.epsilon!r}")
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
            pure_epsilon=self.pure_epsilon + other.pure_epsilon,
            pure_rho=self.pure_rho + other.pure_rho,
        )

    def describe(self) -> str:
        """One-line text, e.g. ``ε=0.5, δ=1e-06, ρ=0.125``."""
        return f"ε={_g(self.epsilon)}, δ={_g(self.delta)}, ρ={_g(self.rho)}"

    def describe_cap(self) -> str:
        """The text of a cap: the currencies it caps, a field of 0 said as not capped (never
        ``ρ=0``, which reads as a zero budget), e.g. ``ε=1 at δ=1e-05 (ρ not capped)``."""
        parts = []
        if self.epsilon > 0.0:
            parts.append(f"ε={_g(self.epsilon)} at δ={_g(self.delta)}" if self.delta > 0.0
                         else f"ε={_g(self.epsilon)} (pure DP, δ=0)")
        if self.rho > 0.0:
            parts.append(f"ρ={_g(self.rho)}")
        if not parts:
            return "nothing capped"
        missing = "ρ" if self.rho == 0.0 else ("ε" if self.epsilon == 0.0 else None)
        return ", ".join(parts) + (f" ({missing} not capped)" if missing else "")

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict; infinities are written as the string ``"inf"``."""
        d = {k: ("inf" if math.isinf(v) else v) for k, v in
             (("epsilon", self.epsilon), ("delta", self.delta), ("rho", self.rho))}
        if self.pure_epsilon > 0.0:
            d["pure_epsilon"] = self.pure_epsilon
            d["pure_rho"] = self.pure_rho
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "PrivacyCost":
        if not isinstance(d, Mapping):
            raise InputError(f"privacy cost must be an object, got {d!r}")
        pe = _num(d.get("pure_epsilon", 0.0), "pure_epsilon")
        pr = d["pure_rho"] if "pure_rho" in d else pure_rho(pe)  # an entry written before pure_rho: one Laplace table
        return cls(epsilon=d.get("epsilon", 0.0), delta=d.get("delta", 0.0), rho=d.get("rho", 0.0),
                   pure_epsilon=pe, pure_rho=pr)


def release_cost(parts: Iterable[tuple[str, float, float, float]]) -> PrivacyCost:
    """The privacy cost of one release: the sequential composition of its tables' costs.

    The one place a release's cost is computed: :func:`marginals.privacy.plan_cost` (before any
    data is read), :func:`marginals.privacy.privatize` (what it released) and
    :func:`marginals.privacy.tables_cost` (from the tables' noise records) all call it.

    Parameters
    ----------
    parts : iterable of (mechanism, epsilon, rho, delta)
        One per table, as OpenDP maps its measurement: a pure noise (``"laplace"``,
        :func:`marg.marginals.counts.noise_kinds.composes_pure`) is ε_t-DP and ρ_t-zCDP (ρ_t = OpenDP's
        pure → zCDP map); any other part (``"gaussian"``, the selection's noisy top-k) is ρ_t-zCDP,
        its ε reported at δ_t; ``"none"`` an exact table.

    Returns
    -------
    PrivacyCost
        ``(Σ ε_laplace + ε(Σ ρ_gaussian, δ), δ, Σ ρ)`` with δ the largest Gaussian δ_t (0 for a
        Laplace release): ε's add, ρ's add, the Gaussian ρ converted once by OpenDP
        (:func:`rho_to_epsilon`); :meth:`PrivacyCost.unbounded` if any table is exact.
    """
    from .counts.noise_kinds import composes_pure  # numpy: not loaded by `marg --help` (the CLI reads DEFAULT_DELTA)

    eps = rho = grho = gdelta = 0.0
    for mechanism, e, r, d in parts:
        if mechanism == "none":
            return PrivacyCost.unbounded()
        if composes_pure(mechanism):
            eps += e
            rho += r
        else:
            grho += r
            gdelta = max(gdelta, d)
    mixed = grho > 0.0 and eps > 0.0  # a mixed release: its pure part (ε and ρ), kept apart by Spend
    pure, prho = (eps, rho) if mixed else (0.0, 0.0)
    if grho > 0.0:
        eps += rho_to_epsilon(grho, gdelta)
        rho += grho
    return PrivacyCost(epsilon=eps, delta=gdelta, rho=rho, pure_epsilon=pure, pure_rho=prho)


def zcdp_cost(rho: float, delta: float) -> PrivacyCost:
    """The cost of a ρ-zCDP budget stated at δ (ε by OpenDP's conversion): what a study's total or a
    round-2 request is checked against the cap as, before its tables are planned."""
    return release_cost([("zcdp", 0.0, float(rho), float(delta))])


# ---------------------------------------------------------------------------------------
# What a history of releases has spent
# ---------------------------------------------------------------------------------------
def _tighter(best: tuple[str, float], other: tuple[str, float]) -> tuple[str, float]:
    """The smaller ε, named ``other`` only where it is below ``best``'s by more than rounding."""
    return (other[0] if other[1] < best[1] * (1.0 - 1e-12) else best[0]), min(best[1], other[1])


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
            rho = cost.rho if cost.rho > 0.0 or cost.epsilon == 0.0 else pure_rho(cost.epsilon)
            return replace(self, eps_pure=self.eps_pure + cost.epsilon, rho_pure=self.rho_pure + rho)
        # a mixed release (release_cost): its pure part and its zCDP part, each where it composes
        if cost.pure_epsilon > 0.0:
            pr = cost.pure_rho  # the release's own split (release_cost): its pure parts' ρ, each OpenDP's map
            zr = max(0.0, cost.rho - pr)
            return replace(self, eps_pure=self.eps_pure + cost.pure_epsilon, rho_pure=self.rho_pure + pr,
                           rho_zcdp=self.rho_zcdp + zr, eps_zcdp=self.eps_zcdp + (cost.epsilon - cost.pure_epsilon),
                           delta_zcdp=self.delta_zcdp + cost.delta)
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
        return self.composition_at(delta)[1]

    def composition_at(self, delta: float) -> tuple[str, float]:
        """(which composition, ε) for :meth:`epsilon_at`: ``"pure"`` (Σ ε of pure releases alone),
        ``"pure+zcdp"`` (the pure ε with the zCDP releases' ρ, OpenDP's ``pure_and_zcdp_to_epsilon``),
        ``"zcdp"`` (every ρ added, pure releases as ε²/2, converted once), ``"basic"`` (the recorded
        ε's added); ``"exact"`` with ``inf`` after an exact release, ``"none"`` when no ε holds at ``delta``."""
        if self.exact:
            return "exact", math.inf
        d = float(delta) - self.delta_approx
        if d < -1e-300:
            return "none", math.inf
        d = min(d, 1.0 - 1e-12)
        if self.rho_zcdp == 0.0:
            best = ("pure", self.eps_pure)
        else:
            best = ("pure+zcdp" if self.eps_pure > 0 else "zcdp",
                    pure_and_zcdp_to_epsilon(self.eps_pure, self.rho_zcdp, d) if d > 0.0 else math.inf)
        # another composition is named only where it is tighter beyond rounding (equal ε's keep the first's name)
        r = self.rho_pure + self.rho_zcdp
        if r > 0.0 and d > 0.0:
            best = _tighter(best, ("zcdp", rho_to_epsilon(r, d)))
        if self.rho_zcdp > 0.0 and self.delta_zcdp <= d * (1.0 + _REL_TOL):
            best = _tighter(best, ("basic", self.eps_pure + self.eps_zcdp))
        if math.isinf(best[1]):
            return "none", math.inf
        return best[0], best[1] + self.eps_approx

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


def at_cap(cap: PrivacyCost | None, cost: PrivacyCost, zcdp_delta: float | None = None) -> dict[str, Any]:
    """What a DP bundle's privacy record says of the site's cap — the one owner of "ε at the cap's δ".

    ``{"ledger_delta": δ}``: the δ the ledger states its spend at (:func:`cap_delta`: what ``marg
    audit show``, the dry run and the cap use), so the model card gives the ledger's number; and,
    for a zCDP release stated at ``zcdp_delta`` other than the cap's δ, ``{"at_cap_delta": {ε, δ}}``:
    the release's ε at the cap's δ as the ledger composes it (:meth:`Spend.epsilon_at` of this one
    release: a Laplace part's pure ε with the zCDP parts' ρ, not the ρ of both converted), so the
    bundle, the ledger and the model card state one ε for one spend. ``{}`` when no cap is in force.
    """
    if cap is None:
        return {}
    out: dict[str, Any] = {"ledger_delta": cap_delta(cap)}
    if zcdp_delta is not None and cap.delta > 0 and cap.delta != zcdp_delta:
        out["at_cap_delta"] = {"epsilon": Spend.of(cost).epsilon_at(cap.delta), "delta": cap.delta}
    return out


# ---------------------------------------------------------------------------------------
# Budget cap and check
# ---------------------------------------------------------------------------------------
def validate_cap(cap: PrivacyCost, finite: bool = True) -> PrivacyCost:
    """``cap`` if it is a usable privacy cap: it caps ε or ρ (a field of 0 caps nothing) and, with
    ``finite``, every field is finite (an infinite cap allows everything). InputError otherwise."""
    if cap.epsilon == 0.0 and cap.rho == 0.0:
        raise InputError(f"privacy budget cap sets neither epsilon nor rho: {cap.describe()}")
    if finite and (math.isinf(cap.epsilon) or math.isinf(cap.rho)):
        raise InputError(f"privacy budget cap must be finite, got {cap.describe_cap()}")
    return cap


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
    validate_cap(cap, finite=False)
    if math.isinf(requested.epsilon) and math.isinf(requested.rho):
        raise RefusedError(
            f"an exact release (no noise) has no differential-privacy guarantee, and this site's cap, "
            f"{cap.describe_cap()}, admits only DP releases: give {option('epsilon')} or {option('rho')} "
            f"(the ledger has spent {spent.describe(cap.delta) if isinstance(spent, Spend) else spent.describe()})"
        )
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
            f"privacy budget refuses an (ε, δ) release: the cap is pure ε-DP ({cap.describe_cap()}); export with "
            f"--mechanism laplace, or set a cap with --delta or --rho"
        )
    if bad:
        raise RefusedError(
            f"privacy budget exhausted: spent {spent.describe(cap.delta)}, requested {requested.describe()}, "
            f"cap {cap.describe_cap()}"
        )
