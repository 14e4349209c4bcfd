"""DP noise mechanisms: how OpenDP builds each one, and where a new one plugs in.

A :class:`Mechanism` is what :func:`marginals.privacy.privatize` needs to release a table
through OpenDP: the OpenDP constructor of its measurement (``build``), the noise distribution
it adds (``noise``: a registered noise distribution, :mod:`marginals.counts.noise_kinds` —
``"laplace"`` or ``"gaussian"`` — which answers its std, its accounting and the exact tail
bounds the learner's λ uses, :mod:`marginals.noise_tails`) and whether integral
counts get discrete noise (integer domain) or continuous noise (float domain).

* ``noise="laplace"``: pure ε-DP under the L1 sensitivity; a share ε_t of the budget gives
  scale ``Δ/ε_t``; the table's cost is OpenDP's map (ε_t, and ρ_t = its pure → zCDP map).
* ``noise="gaussian"``: ρ-zCDP under the L2 sensitivity; a share ρ_t gives scale
  ``Δ/sqrt(2ρ_t)``; reported as (ε, δ) by OpenDP's conversion.

:data:`MECHANISMS` holds the two marg ships (``gaussian``, ``laplace``: OpenDP's
``make_gaussian`` and ``make_laplace``, discrete on integral counts). A new mechanism is a
:class:`Mechanism` passed to :func:`register`; ``privatize(..., mechanism=NAME)``,
:func:`marginals.privacy.plan_cost` and :func:`protocols.export.export_site` then use it
(``tests/marginals/test_plugins.py`` adds a toy one). A mechanism adding a noise marg does not
know yet registers that distribution first (:func:`marginals.counts.noise_kinds.register_noise`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from marg.errors import InputError

from .counts.dp_conversions import dp_prelude
from .counts.noise import NoiseRecord
from .counts.noise_kinds import NOISES, Noise, noise_of


@dataclass(frozen=True)
class Mechanism:
    """One DP noise mechanism (see the module docstring).

    Attributes
    ----------
    name : str
        What ``--mechanism`` and ``privatize(mechanism=...)`` call it; the bundle header's
        ``privacy.mechanism``.
    noise : {"laplace", "gaussian", …}
        The distribution it adds, a registered :class:`marg.marginals.counts.noise_kinds.Noise` named as noise
        records name it: it answers the std, tails, accounting and least-squares weights.
    build : callable
        ``build(dp, domain, metric, scale)`` → an OpenDP measurement on ``domain`` (a vector
        domain of i64 or f64) under ``metric`` (``l1_distance`` for Laplace noise,
        ``l2_distance`` for Gaussian), adding noise of ``scale`` per cell.
    discrete : bool
        Integral counts get the integer domain (discrete noise, integer output); False: every
        table is released on the float domain (continuous noise).
    """

    name: str
    noise: str
    build: Callable[[Any, Any, Any, float], Any]
    discrete: bool = True

    def __post_init__(self) -> None:
        if self.noise not in NOISES:
            raise InputError(f"mechanism {self.name!r}: noise must be one of {', '.join(NOISES)}, got {self.noise!r}")

    @property
    def kind(self) -> Noise:
        """The noise distribution it adds (:mod:`marg.marginals.counts.noise_kinds`): its std, tails, cost, weights."""
        return noise_of(self.noise)

    @property
    def pure(self) -> bool:
        """Pure ε-DP (its budget is an ε, L1), else ρ-zCDP (its budget is a ρ, L2): its noise's."""
        return self.kind.pure

    def measurement(self, scale: float, integer: bool) -> Any:
        """The OpenDP measurement releasing one table as a flat vector (``integer``: i64 domain)."""
        dp = dp_prelude()
        T = "i64" if integer else "f64"
        dom = dp.vector_domain(dp.atom_domain(T=T)) if integer else dp.vector_domain(dp.atom_domain(T=T, nan=False))
        metric = dp.l1_distance(T=T) if self.pure else dp.l2_distance(T=T)
        return self.build(dp, dom, metric, float(scale))

    def scale_for(self, share: float, sensitivity: float | int) -> float:
        """The scale whose cost at ``sensitivity`` is ``share`` before OpenDP's rounding (its noise's:
        ``Δ/ε_t`` Laplace, ``Δ/sqrt(2ρ_t)`` Gaussian)."""
        return self.kind.scale_for(share, sensitivity)

    def std(self, scale: float, integer: bool) -> float:
        """The noise std per cell at ``scale`` (exact for the discrete noise: its noise's)."""
        return self.kind.std(scale, integer)

    def record(self, scale: float, integer: bool, cost: float, delta: float, unit: float = 1.0,
               parts: tuple = ()) -> NoiseRecord:
        """The :class:`~marginals.counts.noise.NoiseRecord` of a table released at ``scale`` whose OpenDP map is
        ``cost`` (ε for pure DP; ρ for zCDP, also stated as (ε, ``delta``)); ``unit`` rescales a moment
        table's normalised noise."""
        std = self.std(scale, integer) * unit
        epsilon, dl, rho = self.kind.record_costs(cost, delta)
        return NoiseRecord(mechanism=self.noise, scale=scale * unit, std=std, epsilon=epsilon, delta=dl, rho=rho,
                           parts=parts)

    def cost_part(self, measurement: Any, sensitivity: float | int, cost: float,
                  delta: float) -> tuple[str, float, float, float]:
        """One calibrated table's part of :func:`marginals.accounting.release_cost` (its noise's)."""
        return self.kind.measured_part(measurement, sensitivity, cost, delta)


MECHANISMS: dict[str, Mechanism] = {}


def register(mechanism: Mechanism) -> Mechanism:
    """Make ``mechanism`` available by its name (a name already taken is refused)."""
    if mechanism.name in MECHANISMS or mechanism.name == "none":
        raise InputError(f"a DP mechanism named {mechanism.name!r} is already registered")
    MECHANISMS[mechanism.name] = mechanism
    return mechanism


def get_mechanism(name: str, what: str = "DP mechanism") -> Mechanism:
    """The registered mechanism ``name``; InputError naming the known ones."""
    try:
        return MECHANISMS[name]
    except (KeyError, TypeError):
        raise InputError(f"unknown {what} {name!r} (expected one of {', '.join(MECHANISMS)})") from None


register(Mechanism("gaussian", "gaussian", lambda dp, dom, metric, scale: dp.m.make_gaussian(dom, metric, scale=scale)))
register(Mechanism("laplace", "laplace", lambda dp, dom, metric, scale: dp.m.make_laplace(dom, metric, scale=scale)))
