"""Differential privacy of a site's release: budget split, OpenDP mechanisms, accounting.

Neighbouring datasets differ by **adding or removing one patient** — one privacy unit, whose
rows are bounded to K (:mod:`marg.marginals.privacy_unit`; K = 1 when each row is a patient,
and every sensitivity below is multiplied by K). For one row, under that
relation one count table ``N[clique]`` has L1 = L2 sensitivity 1 (the row adds 1 to
exactly one cell), and a moment table of a raw numeric feature on its public range
``[lo, hi]`` — per-class sums and sums of squares of the values clipped to the range —
moves by at most ``B = max(|lo|, |hi|)`` in one sum and ``B²`` in one sum of squares. A
moment table is therefore released on the normalised scale (row 0 / B, row 1 / B²; one
vector, L1 sensitivity 2, L2 sensitivity √2) and scaled back; see :mod:`marginals.noise`.

**n is not public.** The label table ``N[y]`` is released with noise like every other
table, and the learner estimates n from the noisy tables (every table's total is an
unbiased estimate of n; :func:`marginals.postprocess.postprocess_tables` pools them by
inverse variance). Declaring n public would change the neighbouring relation to
"replace one row" and double the L1 sensitivity of every count table.

Mechanisms (all built and accounted by OpenDP, ``opendp.prelude``, contrib):

- ``epsilon=ε`` → Laplace, pure ε-DP. Integer count tables get the discrete Laplace on
  ``vector_domain(atom_domain(i64))`` with ``l1_distance(i64)``; moment tables the
  (float) Laplace on ``l1_distance(f64)``. Each table's cost is ``meas.map(Δ)``.
- ``rho=ρ`` → Gaussian, ρ-zCDP (discrete Gaussian on integer counts, ``l2_distance``),
  also reported as (ε, δ)-DP at ``delta`` through OpenDP's ``make_zCDP_to_approxDP``.

**Budget split (sequential composition).** The k tables of one release are k measurements
of the same patients, so their costs add (pure DP: ε's add; zCDP: ρ's add). The total is
split across tables in proportion to ``weights``
(:mod:`marg.marginals.allocation`); by default first-order tables share half of it and pair
tables the other half. Each table's
scale is calibrated so that OpenDP's own map of its measurement is at most its share
(``Δ/ε_t`` or ``Δ/sqrt(2ρ_t)``, nudged up by ulps if OpenDP's conservative arithmetic
rounds the map above the share); the reported total is the sum of those maps, which
equals the requested budget to floating-point rounding and never exceeds it by more.

**Accounting** (what a release costs in ε, δ and ρ — :func:`marg.marginals.accounting.release_cost`,
which :func:`privatize`, :func:`plan_cost` and :func:`tables_cost` call —, what a site's releases
compose to, and the cap) lives in :mod:`marg.marginals.accounting`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np

from marg.errors import InputError
from .accounting import DEFAULT_DELTA, PrivacyCost, release_cost
from .dp_conversions import MAX_NOISE_SCALE, dp_prelude, opendp_words, pure_rho, pure_to_rho, rho_for_epsilon, rho_to_epsilon
from .allocation import resolve_weights, split_budget
from .mechanisms import Mechanism, get_mechanism
from .noise import NoiseRecord, gaussian_std, laplace_std, moment_bound


# ---------------------------------------------------------------------------------------
# OpenDP measurements
# ---------------------------------------------------------------------------------------
def table_measurement(mechanism: str, scale: float, integer: bool):
    """The OpenDP measurement that releases one table as a flat vector.

    Parameters
    ----------
    mechanism : str
        A registered mechanism (:mod:`marginals.mechanisms`: ``"laplace"``, ``"gaussian"``, …).
    scale : float
        Laplace ``b`` or Gaussian ``σ``, per cell.
    integer : bool
        True: ``vector_domain(atom_domain(i64))`` (discrete noise, integer output);
        False: ``vector_domain(atom_domain(f64, nan=False))``.

    Returns
    -------
    opendp.mod.Measurement
        Input metric ``l1_distance`` (Laplace noise, output measure ``MaxDivergence``) or
        ``l2_distance`` (Gaussian, ``ZeroConcentratedDivergence``) over the same type.
    """
    return get_mechanism(mechanism).measurement(scale, integer)


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


def _calibrate(mech: Mechanism, share: float, sens: float | int, integer: bool):
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
        raise InputError(f"a table's {what} share {share:.3g} needs {mechanism} noise of scale {scale:.3g} per cell, above "
                         f"the {MAX_NOISE_SCALE:.0e} marg can add to 64-bit counts: give a larger --epsilon/--rho")
    for _ in range(64):
        try:
            meas = mech.measurement(scale, integer)
            cost = float(meas.map(sens))
        except dp_prelude().OpenDPException as exc:
            raise InputError(f"OpenDP cannot build {mechanism} noise of scale {scale:.3g} for a table's {what} share "
                             f"{share:.3g} ({opendp_words(exc)})") from None
        if cost <= share:
            return scale, meas, cost
        scale = math.nextafter(scale, math.inf) if _ < 32 else scale * (1.0 + 1e-12)
    raise RuntimeError(f"could not calibrate a {mechanism} scale for a share of {share!r}")  # pragma: no cover


def _is_integral(arr: np.ndarray) -> bool:
    if arr.dtype.kind in "iu":
        return True
    return bool(np.all(arr == np.round(arr))) and bool(np.all(np.abs(arr) < 2.0**62))


# ---------------------------------------------------------------------------------------
# Release
# ---------------------------------------------------------------------------------------
def _mechanism(epsilon: Any, rho: Any, delta: Any, name: str | None = None) -> tuple[Mechanism, float]:
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


def budget_for(mechanism: str, epsilon: float | None, rho: float | None,
               delta: float = DEFAULT_DELTA) -> tuple[Mechanism, float | None, float | None]:
    """The registered ``mechanism`` (InputError naming the known ones) and the budget in its own
    currency: an ``epsilon`` given to a zCDP mechanism becomes the largest ρ whose guarantee
    implies (ε, ``delta``)-DP (:func:`marginals.dp_conversions.rho_for_epsilon`).

    Returns
    -------
    (Mechanism, epsilon, rho)
    """
    mech = get_mechanism(mechanism, "--mechanism")
    if epsilon is not None and not mech.pure:
        return mech, None, rho_for_epsilon(epsilon, delta)
    return mech, epsilon, rho


MAX_DELTA = 1e-3  # a larger δ is refused unless forced: δ is the chance the guarantee fails outright


def check_delta(delta: float, force: bool = False, n_units: int | None = None) -> None:
    """Refuse a δ that makes (ε, δ)-DP meaningless: above :data:`MAX_DELTA` (unless ``force``),
    or at least ``1/n`` for the ``n_units`` patients counted (never allowed: a mechanism that
    publishes one patient's rows in full is (0, 1/n)-DP). InputError naming the fix."""
    dl = float(delta)
    if n_units is not None and n_units > 0 and dl >= 1.0 / n_units:
        raise InputError(f"--delta {dl:g} is at least 1/n for this site's {n_units:,} patients: a release may then fail "
                         "its guarantee for a whole patient; give a --delta well below 1/n (e.g. 1e-6)")
    if dl > MAX_DELTA and not force:
        raise InputError(f"--delta {dl:g} is above {MAX_DELTA:g}: the guarantee would fail outright with that "
                         "probability; give a smaller --delta (default 1e-6), or --allow-large-delta to insist")


@dataclass(frozen=True)
class _Spec:
    clique: tuple[str, ...]
    kind: str
    size: int  # released numbers: cells of a count table, 2K of a moment table

    @property
    def name(self) -> str:
        return ("moments:" if self.kind == "moments" else "N[") + ",".join(self.clique) + ("" if self.kind == "moments" else "]")


def plan_cost(
    cliques: Sequence[tuple[str, ...]],
    codebook: Any,
    epsilon: float | None = None,
    rho: float | None = None,
    weights: Any = None,
    delta: float = DEFAULT_DELTA,
    mechanism: str | None = None,
    max_rows: int = 1,
) -> PrivacyCost:
    """The cost :func:`privatize` will report for these cliques — computed from the plan
    alone, before any data is read, so the budget can be checked first.

    Parameters
    ----------
    cliques : sequence of tuple of str
        Canonical cliques (e.g. from ``marginals.tables.plan_cliques``); a clique
        ``(f, label)`` with ``f`` raw numeric is a moment table.
    codebook : Codebook
    epsilon, rho, weights, delta, mechanism, max_rows
        As for :func:`privatize`.

    Returns
    -------
    PrivacyCost
        Identical to the cost :func:`privatize` returns for tables of these cliques.
    """
    mech, budget = _mechanism(epsilon, rho, delta, mechanism)
    lab = codebook.label.name
    specs = []
    for c in cliques:
        c = tuple(c)
        if not c:
            raise InputError("empty clique in the release plan")
        feats = [a for a in c if a != lab]
        raw = [a for a in feats if not codebook.feature(a).is_discrete]
        if raw:
            specs.append(_Spec(c, "moments", 2 * codebook.label.n_classes))
        else:
            specs.append(_Spec(c, "counts", int(np.prod([codebook.attribute_size(a) for a in c]))))
    if not specs:
        raise InputError("nothing to release: no cliques")
    shares = split_budget(budget, resolve_weights(specs, weights, lab, mech.noise))
    parts = []
    for sp, share in zip(specs, shares):
        integer = sp.kind == "counts" and mech.discrete
        sens = table_sensitivity(sp.kind, mech.name, integer, max_rows)
        _, meas, cost = _calibrate(mech, float(share), sens, integer)
        parts.append(_table_cost(mech, meas, sens, cost, float(delta)))
    return _stated(release_cost(parts))


def _table_cost(mech: Mechanism, meas: Any, sens: float | int, cost: float, delta: float) -> tuple[str, float, float, float]:
    """One calibrated table's part of :func:`marginals.accounting.release_cost`: OpenDP's map of its
    measurement (and, for Laplace noise, of that measurement seen as zCDP)."""
    if mech.pure:
        return ("laplace", cost, pure_to_rho(meas, sens), 0.0)
    return ("gaussian", 0.0, cost, delta)


def _stated(cost: PrivacyCost) -> PrivacyCost:
    """``cost``, refused when its ρ is beyond what OpenDP's conversion can state as (ε, δ)."""
    if math.isinf(cost.epsilon):
        raise InputError(f"--rho {cost.rho:g} is beyond what OpenDP's zCDP conversion can state as (ε, δ = {cost.delta:g}); "
                         "such a release protects nobody: give a smaller --rho")
    return cost


def privatize(
    tables: Sequence[Any],
    epsilon: float | None = None,
    rho: float | None = None,
    weights: Any = None,
    delta: float = DEFAULT_DELTA,
    codebook: Any = None,
    mechanism: str | None = None,
    max_rows: int = 1,
) -> tuple[list[Any], PrivacyCost]:
    """Release tables with differential privacy through OpenDP.

    Parameters
    ----------
    tables : sequence of MarginalTable
        Exact tables of one site (noise records must be exact). Count tables with integral
        counts get discrete noise and stay integer; moment tables need ``codebook``.
    epsilon : float, optional
        Total pure-DP budget ε > 0 → Laplace. Exactly one of ``epsilon``/``rho``.
    rho : float, optional
        Total zCDP budget ρ > 0 → Gaussian, reported also as (ε, δ).
    weights : None, sequence of float (one per table), or mapping
        Relative budget shares; a mapping is keyed by clique tuple, table name or
        ``"a,b,y"``; or an allocation name. None → the half split
        (:func:`marg.marginals.allocation.resolve_weights`).
    delta : float
        δ at which a zCDP cost is reported as (ε, δ); unused for Laplace.
    codebook : Codebook, optional
        Needed for moment tables (the public range gives ``B``) and to tell first-order
        tables by the label name.
    mechanism : str, optional
        A registered mechanism (:mod:`marginals.mechanisms`) taking the budget given:
        default ``"laplace"`` for ``epsilon``, ``"gaussian"`` for ``rho``.
    max_rows : int
        The rows of one privacy unit the tables count at most (:mod:`marg.marginals.privacy_unit`):
        every table's sensitivity, so its noise scale, is ``max_rows`` times a row's.

    Returns
    -------
    noisy : list of MarginalTable
        Same cliques and kinds, noisy counts, each with its :class:`NoiseRecord`
        (mechanism, scale, exact per-cell std, its own ε / δ / ρ share).
    cost : PrivacyCost
        Sum of OpenDP's maps: Laplace ``(Σ ε_t, 0, Σ ε_t²/2)``; Gaussian
        ``(ε(Σ ρ_t, δ), δ, Σ ρ_t)``.
    """
    mech, budget = _mechanism(epsilon, rho, delta, mechanism)
    tables = list(tables)
    if not tables:
        raise InputError("nothing to privatize: no tables")
    for t in tables:
        if not t.noise.is_exact:
            raise InputError(f"table {t.name} already carries {t.noise.mechanism} noise; privatize exact tables only")
    label = codebook.label.name if codebook is not None else None
    shares = split_budget(budget, resolve_weights(tables, weights, label, mech.noise))

    noisy: list[Any] = []
    parts = []
    for t, share in zip(tables, shares):
        counts = np.asarray(t.counts)
        if t.kind == "moments":
            if codebook is None:
                raise InputError(f"table {t.name}: privatizing a moment table needs the codebook (public range)")
            B = moment_bound(codebook, t.clique[0])
            if B == 0.0:
                raise InputError(f"table {t.name}: feature range [0, 0] has nothing to release")
            integer = False
            vec = np.concatenate([counts[0] / B, counts[1] / (B * B)]).astype(np.float64)
            unit = B
        else:
            integer = mech.discrete and _is_integral(counts)
            vec = counts.ravel() if integer else counts.ravel().astype(np.float64)
            unit = 1.0
        sens = table_sensitivity(t.kind, mech.name, integer, max_rows)
        scale, meas, cost = _calibrate(mech, float(share), sens, integer)
        out = np.asarray(meas([int(v) for v in vec.astype(np.int64)] if integer else vec.tolist()))
        if t.kind == "moments":
            K = counts.shape[1]
            new = np.stack([out[:K] * B, out[K:] * B * B]).astype(np.float64)
        else:
            new = out.reshape(counts.shape).astype(np.int64 if integer and counts.dtype.kind in "iu" else np.float64)
        # a count table with continuous noise says so (its draws are not on the integer lattice)
        draws = ((mech.noise, scale * unit, False, 1),) if t.kind == "counts" and not integer else ()
        if mech.pure:
            std = laplace_std(scale, integer) * unit
            rec = NoiseRecord(mechanism="laplace", scale=scale * unit, std=std, epsilon=cost, delta=0.0, rho=0.0, parts=draws)
        else:
            std = gaussian_std(scale, integer) * unit
            rec = NoiseRecord(mechanism="gaussian", scale=scale * unit, std=std,
                              epsilon=rho_to_epsilon(cost, float(delta)), delta=float(delta), rho=cost, parts=draws)
        parts.append(_table_cost(mech, meas, sens, cost, float(delta)))
        noisy.append(replace(t, counts=new, noise=rec))
    return noisy, _stated(release_cost(parts))


def tables_cost(tables: Sequence[Any]) -> PrivacyCost:
    """The privacy cost of released tables, recomputed from their noise records by
    :func:`marginals.accounting.release_cost`.

    A Laplace record's ρ is its ε as zCDP (:func:`marginals.accounting.pure_rho`); a Gaussian
    record's ρ is reported as (ε, δ) at the records' δ. A release containing an exact table is
    unbounded.
    """
    parts = []
    for t in tables:
        r = t.noise
        if r.is_exact:
            parts.append(("none", 0.0, 0.0, 0.0))
        elif r.mechanism == "laplace":
            parts.append(("laplace", r.epsilon, pure_rho(r.epsilon), 0.0))
        else:
            parts.append(("gaussian", 0.0, r.rho, r.delta))
    return release_cost(parts)
