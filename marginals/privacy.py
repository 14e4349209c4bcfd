"""Differential privacy of a site's release: budget split, OpenDP mechanisms, accounting.

Neighbouring datasets differ by **adding or removing one patient** — one privacy unit, whose
rows are bounded to K (:mod:`marg.marginals.privacy_unit`; K = 1 when each row is a patient,
and every sensitivity below is multiplied by K). For one row, under that
relation one count table ``N[clique]`` has L1 = L2 sensitivity 1 (the row adds 1 to
exactly one cell), and a moment table of a raw numeric feature on its public range
``[lo, hi]`` — per-class sums and sums of squares of the values clipped to the range —
moves by at most ``B = max(|lo|, |hi|)`` in one sum and ``B²`` in one sum of squares. A
moment table is therefore released on the normalised scale (row 0 / B, row 1 / B²; one
vector, L1 sensitivity 2, L2 sensitivity √2) and scaled back; see :mod:`marginals.counts.noise`.

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

from typing import Any, Sequence


from marg.errors import InputError
from .accounting import DEFAULT_DELTA, PrivacyCost, release_cost
from .counts.dp_conversions import rho_for_epsilon
from .mechanisms import Mechanism, get_mechanism
from .counts.noise_kinds import noise_of
from .release_plan import ReleasePlan


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


# ---------------------------------------------------------------------------------------
# Release
# ---------------------------------------------------------------------------------------
def budget_for(mechanism: str, epsilon: float | None, rho: float | None,
               delta: float = DEFAULT_DELTA) -> tuple[Mechanism, float | None, float | None]:
    """The registered ``mechanism`` (InputError naming the known ones) and the budget in its own
    currency: an ``epsilon`` given to a zCDP mechanism becomes the largest ρ whose guarantee
    implies (ε, ``delta``)-DP (:func:`marginals.counts.dp_conversions.rho_for_epsilon`).

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
        raise InputError(f"--delta {dl:g} is at least 1/n for this site's {n_units:,} patients: a release may then "
                         "fail its guarantee for a whole patient; give a --delta well below 1/n (e.g. 1e-6)")
    if dl > MAX_DELTA and not force:
        raise InputError(f"--delta {dl:g} is above {MAX_DELTA:g}: the guarantee would fail outright with that "
                         "probability; give a smaller --delta (default 1e-6), or --allow-large-delta to insist")


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
        Canonical cliques (e.g. from ``marginals.counts.tables.plan_cliques``); a clique
        ``(f, label)`` with ``f`` raw numeric is a moment table.
    codebook : Codebook
    epsilon, rho, weights, delta, mechanism, max_rows
        As for :func:`privatize`.

    Returns
    -------
    PrivacyCost
        Identical to the cost :func:`privatize` returns for tables of these cliques.
    """
    return ReleasePlan.for_cliques(cliques, codebook, epsilon=epsilon, rho=rho, weights=weights, delta=delta,
                                   mechanism=mechanism, max_rows=max_rows).cost


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
    tables = list(tables)
    plan = ReleasePlan.for_tables(tables, codebook, epsilon=epsilon, rho=rho, weights=weights, delta=delta,
                                  mechanism=mechanism, max_rows=max_rows)
    return plan.release(tables, codebook), plan.cost


def tables_cost(tables: Sequence[Any]) -> PrivacyCost:
    """The privacy cost of released tables, recomputed from their noise records by
    :func:`marginals.accounting.release_cost`.

    Each record's part is its noise's (:meth:`marg.marginals.counts.noise_kinds.Noise.recorded_part`): a
    Laplace record's ρ is its ε as zCDP (:func:`marginals.counts.dp_conversions.pure_rho`); a Gaussian
    record's ρ is reported as (ε, δ) at the records' δ. A release containing an exact table is
    unbounded.
    """
    parts = []
    for t in tables:
        r = t.noise
        parts.append(("none", 0.0, 0.0, 0.0) if r.is_exact else noise_of(r.mechanism).recorded_part(r))
    return release_cost(parts)
