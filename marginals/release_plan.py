"""A DP release planned once: (tables, budget, weights, mechanism) → each table's calibrated OpenDP measurement, its
noise scale and std, and the release's cost; then the release itself.

OpenDP's lesson: a measurement's cost and its noise are one object. A :class:`ReleasePlan`
splits the budget across the tables (:mod:`marg.marginals.allocation`), calibrates one OpenDP
measurement per table at its share (the scale whose OpenDP map at the table's sensitivity is at
most the share) and keeps it; the plan's :attr:`~ReleasePlan.cost` is the composition of those
maps (:func:`marg.marginals.accounting.release_cost`), its :attr:`~ReleasePlan.scales` and
:attr:`~ReleasePlan.stds` the noise each table will carry, and :meth:`~ReleasePlan.release`
draws that noise through the same measurements. So the cost checked against a site's cap before
any data is read (:func:`marg.marginals.privacy.plan_cost`, from the codebook alone), the cost a
release reports (:func:`marg.marginals.privacy.privatize`) and the scales a planner expects
(:func:`marg.learners.certification.holdout_plan.release_scale`) are one computation. The mechanism
(:mod:`marg.marginals.mechanisms`) answers its own noise std, noise record and accounting.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, Sequence

import numpy as np

from marg.errors import InputError

from .accounting import DEFAULT_DELTA, PrivacyCost, release_cost
from .allocation import resolve_weights, split_budget
from .counts.dp_conversions import MAX_NOISE_SCALE, calibrated
from .mechanisms import Mechanism, get_mechanism
from .counts.noise import moment_bound


def table_sensitivity(kind: str, mechanism: str, integer: bool, max_rows: int = 1) -> float | int:
    """Sensitivity ``Δ`` of one (normalised) table under add/remove-one-unit, each unit counted
    on at most ``max_rows`` rows (:mod:`marg.marginals.privacy_unit`; 1: the unit is the row).

    Count tables: ``max_rows`` (L1 and L2: a unit's K rows may all fall in one cell). Moment
    tables on the normalised scale (row 0 / B, row 1 / B²): one row adds ``|x|/B ≤ 1`` to one
    sum and ``x²/B² ≤ 1`` to one sum of squares, so L1 ≤ 2K and L2 ≤ √2·K. This is the
    ``d_in`` at which OpenDP maps each measurement to its cost (``meas.map(Δ)``): every
    mechanism takes the bound here, and its noise and cost follow from OpenDP.
    """
    k = int(max_rows)
    if k < 1:
        raise InputError(f"max_rows_per_unit must be at least 1, got {max_rows!r}")
    if kind == "counts":
        return k if integer else float(k)
    if kind == "moments":
        return 2.0 * k if get_mechanism(mechanism).pure else math.sqrt(2.0) * k
    raise InputError(f"unknown table kind {kind!r}")


def budget_mechanism(epsilon: Any, rho: Any, delta: Any, name: str | None = None) -> tuple[Mechanism, float]:
    """Validate the budget arguments; return (the mechanism, total budget). ``name``: a registered
    mechanism of the budget's kind (default Laplace for ``epsilon``, Gaussian for ``rho``)."""
    if (epsilon is None) == (rho is None):
        raise InputError("give exactly one of epsilon (Laplace) or rho (Gaussian)")
    budget = epsilon if epsilon is not None else rho
    which = "epsilon" if epsilon is not None else "rho"
    try:
        budget = float(budget)
    except (TypeError, ValueError):
        raise InputError(f"{which} must be a number, got {budget!r}") from None
    if not (budget > 0.0) or not math.isfinite(budget):
        raise InputError(f"{which} must be finite and > 0, got {budget!r}")
    mech = get_mechanism(name if name is not None else ("laplace" if epsilon is not None else "gaussian"))
    if mech.pure != (epsilon is not None):
        raise InputError(f"mechanism {mech.name!r} takes a{'n epsilon' if mech.pure else ' rho'} budget, got {which}")
    try:
        dl = float(delta)
    except (TypeError, ValueError):
        raise InputError(f"delta must be a number, got {delta!r}") from None
    if not mech.pure and not (0.0 < dl < 1.0):
        raise InputError(f"delta must be in (0, 1), got {delta!r}")
    return mech, budget


def _calibrate(mech: Mechanism, share: float, sens: float | int, integer: bool) -> tuple[float, Any, float]:
    """Scale whose OpenDP map at ``sens`` is ≤ ``share`` (nudged up if rounding exceeds it).

    Raises
    ------
    InputError
        The share needs a noise scale above :data:`MAX_NOISE_SCALE` (or none OpenDP can
        build): one line naming the share and the scale, before any data is read.
    """
    mechanism = mech.name
    scale = mech.scale_for(share, sens)
    what = "ε" if mech.pure else "ρ"
    if not (scale <= MAX_NOISE_SCALE):
        raise InputError(f"a table's {what} share {share:.3g} needs {mechanism} noise of scale {scale:.3g} per cell, "
                         f"above the {MAX_NOISE_SCALE:.0e} marg can add to 64-bit counts: give a larger "
                         "--epsilon/--rho")
    return calibrated(lambda s: mech.measurement(s, integer), scale, sens, share,
                      lambda s: f"{mechanism} noise of scale {s:.3g} for a table's {what} share {share:.3g}")


def _is_integral(arr: np.ndarray) -> bool:
    if arr.dtype.kind in "iu":
        return True
    return bool(np.all(arr == np.round(arr))) and bool(np.all(np.abs(arr) < 2.0**62))


@dataclass(frozen=True)
class TableSpec:
    """A table as the plan sees it: its clique, kind (``counts`` or ``moments``), released numbers
    (cells, or 2K for a moment table) and whether it gets discrete noise (integral counts)."""

    clique: tuple[str, ...]
    kind: str
    size: int
    integer: bool

    @property
    def name(self) -> str:
        return (("moments:" if self.kind == "moments" else "N[") + ",".join(self.clique)
                + ("" if self.kind == "moments" else "]"))


def table_specs(cliques: Sequence[tuple[str, ...]], codebook: Any, discrete: bool) -> list[TableSpec]:
    """The specs of the tables of ``cliques`` under ``codebook`` (a clique ``(f, label)`` with ``f`` raw
    numeric is a moment table of 2K numbers; counts get discrete noise when ``discrete``)."""
    lab = codebook.label.name
    specs = []
    for c in cliques:
        c = tuple(c)
        if not c:
            raise InputError("empty clique in the release plan")
        if any(not codebook.feature(a).is_discrete for a in c if a != lab):
            specs.append(TableSpec(c, "moments", 2 * codebook.label.n_classes, False))
        else:
            specs.append(TableSpec(c, "counts", int(np.prod([codebook.attribute_size(a) for a in c])), discrete))
    if not specs:
        raise InputError("nothing to release: no cliques")
    return specs


@dataclass(frozen=True)
class Calibrated:
    """One table of a plan: its share of the budget, sensitivity, the OpenDP measurement at its
    noise ``scale`` (on the normalised scale of a moment table) and that measurement's map (its cost)."""

    spec: TableSpec
    share: float
    sensitivity: float | int
    scale: float
    measurement: Any
    cost: float


class ReleasePlan:
    """One release, planned (module docstring): built from the tables' specs and the budget.

    Parameters
    ----------
    specs : sequence of :class:`TableSpec`
    epsilon, rho : float — exactly one: the total budget (pure ε for a pure mechanism, ρ for zCDP).
    weights : None, allocation name, sequence or mapping — :func:`marg.marginals.allocation.resolve_weights`.
    delta : float — the δ a zCDP cost is stated at.
    mechanism : str, optional — a registered mechanism of the budget's kind.
    max_rows : int — the rows of one privacy unit each table counts at most (every sensitivity's K).
    label : str, optional — the label's name (first-order tables for the default split).
    """

    def __init__(self, specs: Sequence[TableSpec], *, epsilon: float | None = None, rho: float | None = None,
                 weights: Any = None, delta: float = DEFAULT_DELTA, mechanism: str | None = None, max_rows: int = 1,
                 label: str | None = None) -> None:
        self.mechanism, budget = budget_mechanism(epsilon, rho, delta, mechanism)
        self.delta = float(delta)
        specs = list(specs)
        shares = split_budget(budget, resolve_weights(specs, weights, label, self.mechanism.noise))
        tables = []
        for sp, share in zip(specs, shares):
            sens = table_sensitivity(sp.kind, self.mechanism.name, sp.integer, max_rows)
            scale, meas, cost = _calibrate(self.mechanism, float(share), sens, sp.integer)
            tables.append(Calibrated(sp, float(share), sens, scale, meas, cost))
        self.tables: tuple[Calibrated, ...] = tuple(tables)

    @classmethod
    def for_cliques(cls, cliques: Sequence[tuple[str, ...]], codebook: Any, **budget: Any) -> "ReleasePlan":
        """The plan of the tables of ``cliques`` under ``codebook`` — before any data is read (a
        clique ``(f, label)`` with ``f`` raw numeric is a moment table; counts get discrete noise
        when the mechanism has it)."""
        mech, _ = budget_mechanism(budget.get("epsilon"), budget.get("rho"), budget.get("delta", DEFAULT_DELTA),
                                   budget.get("mechanism"))
        return cls(table_specs(cliques, codebook, mech.discrete), label=codebook.label.name, **budget)

    @classmethod
    def for_tables(cls, tables: Sequence[Any], codebook: Any = None, **budget: Any) -> "ReleasePlan":
        """The plan of exact ``tables`` (integral count tables get discrete noise when the mechanism has it)."""
        mech, _ = budget_mechanism(budget.get("epsilon"), budget.get("rho"), budget.get("delta", DEFAULT_DELTA),
                                   budget.get("mechanism"))
        if not tables:
            raise InputError("nothing to privatize: no tables")
        specs = []
        for t in tables:
            if not t.noise.is_exact:
                raise InputError(f"table {t.name} already carries {t.noise.mechanism} noise; privatize exact tables "
                                 "only")
            counts = np.asarray(t.counts)
            integer = t.kind != "moments" and mech.discrete and _is_integral(counts)
            specs.append(TableSpec(tuple(t.clique), t.kind, int(counts.size), integer))
        return cls(specs, label=codebook.label.name if codebook is not None else None, **budget)

    @cached_property
    def cost(self) -> "PrivacyCost":
        """The release's cost: the composition of its tables' OpenDP maps (refused when its ρ is
        beyond what OpenDP's conversion can state as (ε, δ)); composed once, read before the
        count (the cap) and after it (the bundle's record)."""
        cost = release_cost(self.parts)
        if math.isinf(cost.epsilon):
            raise InputError(f"--rho {cost.rho:g} is beyond what OpenDP's zCDP conversion can state as (ε, δ = "
                             f"{cost.delta:g}); such a release protects nobody: give a smaller --rho")
        return cost

    @property
    def parts(self) -> list[tuple[str, float, float, float]]:
        """Each table's part of :func:`marg.marginals.accounting.release_cost` (its noise's: OpenDP's map
        of its measurement) — what :attr:`cost` composes, and what a release composing this plan with
        other measurements (a study's round 1: the label table and the selection) composes."""
        return [self.mechanism.cost_part(t.measurement, t.sensitivity, t.cost, self.delta) for t in self.tables]

    @property
    def scales(self) -> list[float]:
        """Each table's noise scale per cell (Laplace b or Gaussian σ; a moment table's normalised)."""
        return [t.scale for t in self.tables]

    @property
    def stds(self) -> list[float]:
        """Each table's noise std per cell (exact for the discrete noise; a moment table's normalised)."""
        return [self.mechanism.std(t.scale, t.spec.integer) for t in self.tables]

    def release(self, tables: Sequence[Any], codebook: Any = None) -> list[Any]:
        """``tables`` (those the plan was made for, in its order) with the planned noise drawn
        through OpenDP, each with its noise record (mechanism, scale, exact std, its cost share)."""
        if len(tables) != len(self.tables):
            raise InputError(f"the plan is for {len(self.tables)} tables, got {len(tables)}")
        return [self._release_one(t, c, codebook) for t, c in zip(tables, self.tables)]

    def _release_one(self, t: Any, c: Calibrated, codebook: Any) -> Any:
        counts = np.asarray(t.counts)
        if (t.kind, tuple(t.clique)) != (c.spec.kind, c.spec.clique) or (c.spec.integer and not _is_integral(counts)):
            raise InputError(f"table {t.name} is not the table the release was planned for ({c.spec.name}"
                             f"{', integral counts' if c.spec.integer else ''})")
        if t.kind == "moments":
            if codebook is None:
                raise InputError(f"table {t.name}: privatizing a moment table needs the codebook (public range)")
            B = moment_bound(codebook, t.clique[0])
            if B == 0.0:
                raise InputError(f"table {t.name}: feature range [0, 0] has nothing to release")
            vec, unit = np.concatenate([counts[0] / B, counts[1] / (B * B)]).astype(np.float64), B
        else:
            vec, unit = (counts.ravel() if c.spec.integer else counts.ravel().astype(np.float64)), 1.0
        integer = c.spec.integer
        out = np.asarray(c.measurement([int(v) for v in vec.astype(np.int64)] if integer else vec.tolist()))
        if t.kind == "moments":
            K = counts.shape[1]
            new = np.stack([out[:K] * B, out[K:] * B * B]).astype(np.float64)
        else:
            new = out.reshape(counts.shape).astype(np.int64 if integer and counts.dtype.kind in "iu" else np.float64)
        # a count table with continuous noise says so (its draws are not on the integer lattice)
        draws = ((self.mechanism.noise, c.scale * unit, False, 1),) if t.kind == "counts" and not integer else ()
        rec = self.mechanism.record(c.scale, integer, c.cost, self.delta, unit=unit, parts=draws)
        return replace(t, counts=new, noise=rec)


__all__ = ["Calibrated", "ReleasePlan", "TableSpec", "budget_mechanism", "table_sensitivity", "table_specs"]
