"""Shared noise under secure aggregation: each site adds an integer share so that the secure sum of any t survivors
carries one curator's noise.

The mechanism is the **distributed discrete Gaussian** of Kairouz, Liu and Steinke ("The
Distributed Discrete Gaussian Mechanism for Federated Learning with Secure Aggregation", ICML
2021, arXiv:2102.06387). Each site adds to every cell of its integer count table an independent
draw of the discrete Gaussian ``N_Z(0, σ²)`` (``P(z) ∝ exp(−z²/(2σ²))``), sampled by OpenDP's exact
sampler (``make_gaussian`` on an i64 vector domain: the very measurement a per-site Gaussian
release uses). The secure sum of m shares is the true pooled table plus a sum of m independent
discrete Gaussians — close to, but not, ``N_Z(0, mσ²)``; the paper bounds its privacy
(Theorem 1, in its Rényi form Proposition 14, as in the authors' ``distributed_dp`` accounting):

    with τ_m = 10 · Σ_{k=1}^{m−1} exp(−2π²σ²·k/(k+1)) and s = √m·σ, for every α > 1 and
    neighbouring inputs whose d-cell tables differ by Δ (‖Δ‖₁ ≤ Δ₁, ‖Δ‖₂ ≤ Δ₂),

        D_α(sum at x ‖ sum at x+Δ) ≤ α·ρ_m,
        ρ_m = ½·min{ Δ₂²/s² + 2·τ_m·Δ₁/s + τ_m²·d,  (Δ₂/s + τ_m·√d)² }          (σ ≥ ½),

i.e. the sum is ρ_m-zCDP. The τ terms are the price of a sum of discrete Gaussians not being a
discrete Gaussian: negligible for σ ≥ 2, not for shares near σ = 1 with many cells (σ = 0.7,
m = 3, d = 100: τ = 0.095, so τ²d alone is 0.91), so every ρ here includes them
(:func:`ddg_rho`); :func:`calibrate_share` picks the smallest σ ≥ ½ whose worst ρ_m over the
survivor counts m = t…n is at most the table's share of the round's ρ.
``tests/marginals/test_shared_noise.py`` checks the stated ρ_m against the exact Rényi divergence of
the sum (its pmf by convolution, truncation bounded): with the τ terms dropped the check fails
already at σ ≈ 0.9; with them it holds, loosely at σ near ½ (there the exact D_α/α is about a third
of the stated ρ: the price of a published bound over an exact accountant).

Why this mechanism and not Skellam (Agarwal, Kairouz, Liu, NeurIPS 2021, whose sums are exactly
Skellam): OpenDP has the discrete Gaussian's exact sampler and its zCDP map — the site's own
guarantee (its share alone) is then OpenDP's map of the measurement it ran, and marg already
releases per-site tables through that sampler — while OpenDP has no Skellam sampler (a Poisson
difference from a floating-point library is exactly what Mironov's attack warns against). The cost
is the τ correction, which :func:`calibrate_share` pays by a slightly larger σ.

**Two guarantees** for every round (:class:`SharedNoisePlan`):

- the study's, :meth:`SharedNoisePlan.study_cost`: the secure sum of ``survivors ≥ t`` shares,
  ``Σ_T ρ_{T,m}`` over the round's tables (zCDP composes by adding ρ), stated as (ε, δ) by
  OpenDP's conversion (:func:`marg.marginals.accounting.release_cost`). It holds against the
  learner and anyone who sees only the secure sum, as long as at least t of the summed shares
  stay unknown to them: a site colluding with the learner can subtract its own share. This is the
  number charged against the site's cap (``study_cost()``, the worst over m = t…n, before anyone
  knows who survives);
- the site's own, :meth:`SharedNoisePlan.site_cost`: its share alone, ``Σ_T Δ₂²/(2σ_T²)`` — OpenDP's
  map of the discrete Gaussian it ran — the guarantee left if every other party colluded. Both are
  recorded in the site's ledger (``own_cost`` beside the entry's charged ``cost``).

Sensitivities are :func:`marg.marginals.release_plan.table_sensitivity` (a patient's ``max_rows``
rows move a count table by K in L1 and L2); the round's ρ is split across its tables by the same
allocation as every release (:func:`marg.marginals.allocation.resolve_weights`). Shares are
integers on integer count tables only: a moment table (a raw numeric feature) is refused, as
fixed-point rounding of real sums is not what the theorem covers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

import numpy as np

from marg.errors import InputError, RefusedError

from .accounting import DEFAULT_DELTA, PrivacyCost, release_cost
from .allocation import resolve_weights, split_budget
from .counts.dp_conversions import MAX_NOISE_SCALE, dp_prelude, opendp_words, rho_to_epsilon
from .mechanisms import get_mechanism
from .counts.noise import NoiseRecord
from .counts.noise_kinds import noise_of
from .release_plan import TableSpec, table_sensitivity, table_specs

MECHANISM = "distributed-discrete-gaussian"  # the noise registry's name (marginals.counts.noise_kinds)
MIN_SHARE_SCALE = 0.5  # the theorem's σ ≥ 1/2
PLAN_FORMAT = "marg-shared-noise"


def ddg_tau(sigma: float, m: int) -> float:
    """τ_m = 10 · Σ_{k=1}^{m−1} exp(−2π²σ²·k/(k+1)) of Kairouz–Liu–Steinke's Theorem 1 (0 for one share)."""
    return 10.0 * sum(math.exp(-2.0 * math.pi**2 * sigma * sigma * k / (k + 1)) for k in range(1, int(m)))


def ddg_rho(sigma: float, m: int, d: int, l1: float, l2: float) -> float:
    """ρ-zCDP of the sum of ``m`` independent ``N_Z(0, σ²)`` shares per cell of a ``d``-cell table of
    sensitivities ``l1`` (‖Δ‖₁) and ``l2`` (‖Δ‖₂): Kairouz–Liu–Steinke, Proposition 14 (module docstring),

        ρ_m = ½·min{ l2²/s² + 2·τ_m·l1/s + τ_m²·d,  (l2/s + τ_m·√d)² },   s = √m·σ.

    Parameters
    ----------
    sigma : float ≥ ½ — each share's scale (the discrete Gaussian's σ parameter)
    m : int ≥ 1 — the shares summed
    d : int ≥ 1 — the table's cells
    l1, l2 : float — the table's L1 and L2 sensitivities

    Returns
    -------
    float
        ρ such that the sum is ρ-zCDP (for m = 1: ``l2²/(2σ²)``, one discrete Gaussian).
    """
    if not sigma >= MIN_SHARE_SCALE:
        raise InputError(f"a distributed discrete Gaussian share needs σ ≥ {MIN_SHARE_SCALE} (the theorem's), got "
                         f"{sigma!r}")
    s = math.sqrt(m) * sigma
    tau = ddg_tau(sigma, m)
    a = (l2 / s) ** 2 + 2.0 * tau * l1 / s + tau * tau * d
    b = (l2 / s + tau * math.sqrt(d)) ** 2
    return 0.5 * min(a, b)


def worst_rho(sigma: float, threshold: int, n_sites: int, d: int, l1: float, l2: float) -> float:
    """The largest :func:`ddg_rho` over the survivor counts m = ``threshold`` … ``n_sites``: the
    guarantee of the secure sum of any set of at least t shares."""
    return max(ddg_rho(sigma, m, d, l1, l2) for m in range(int(threshold), int(n_sites) + 1))


def calibrate_share(share: float, threshold: int, n_sites: int, d: int, l1: float, l2: float) -> float:
    """The smallest share scale σ ≥ ½ (to a relative 1e-9, rounded up) with :func:`worst_rho` ≤ ``share``.

    Starts at the τ-free answer σ₀ = l2/√(2·t·share) (the continuous Gaussian's) and bisects upwards:
    ρ_m decreases in σ. InputError when σ would exceed :data:`MAX_NOISE_SCALE`.
    """
    def ok(s: float) -> bool:
        return worst_rho(s, threshold, n_sites, d, l1, l2) <= share

    lo = max(MIN_SHARE_SCALE, l2 / math.sqrt(2.0 * threshold * share))
    if ok(lo):
        return lo
    hi = lo * 1.25
    while not ok(hi):
        hi *= 1.25
        if hi > MAX_NOISE_SCALE:
            raise InputError(f"a table's ρ share {share:.3g} needs shared noise above the {MAX_NOISE_SCALE:.0e} marg "
                             "can add to 64-bit counts: give a larger budget")
    while hi - lo > 1e-9 * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


@dataclass(frozen=True)
class SharedTable:
    """One table of a shared plan: its spec, its share of the round's ρ, sensitivities (L1, L2) and
    each site's share scale σ."""

    spec: TableSpec
    share: float
    l1: float
    l2: float
    scale: float

    def rho(self, m: int) -> float:
        """ρ of the secure sum of ``m`` shares (:func:`ddg_rho`)."""
        return ddg_rho(self.scale, m, self.spec.size, self.l1, self.l2)

    def to_dict(self) -> dict[str, Any]:
        return {"clique": list(self.spec.clique), "kind": self.spec.kind, "size": self.spec.size, "share": self.share,
                "l1": self.l1, "l2": self.l2, "scale": self.scale}


def _checked_int(v: Any, what: str, lo: int) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or int(v) < lo:
        raise InputError(f"{what} must be an integer >= {lo}, got {v!r}")
    return int(v)


@dataclass(frozen=True)
class SharedNoisePlan:
    """One round's shared noise, planned before any data is read (module docstring).

    Attributes
    ----------
    tables : tuple of SharedTable — in the order the round releases them
    rho : float — the round's zCDP budget for the secure sum of any t survivors (one curator's)
    delta : float — the δ a cost is stated at as (ε, δ)
    threshold : int — t, the secure-aggregation threshold (the fewest survivors released)
    n_sites : int — the round's sites
    max_rows : int — the rows of one patient each table counts at most (K)
    """

    tables: tuple[SharedTable, ...]
    rho: float
    delta: float
    threshold: int
    n_sites: int
    max_rows: int = 1
    mechanism: str = field(default=MECHANISM)

    # ---------------------------------------------------------------- planning
    @classmethod
    def build(cls, specs: Sequence[TableSpec], rho: float, threshold: int, n_sites: int, max_rows: int = 1,
              delta: float = DEFAULT_DELTA, weights: Any = None, label: str | None = None) -> "SharedNoisePlan":
        """The plan of ``specs`` (count tables) at the round's ``rho``: shares by the allocation's weights,
        each table's σ by :func:`calibrate_share`."""
        n = _checked_int(n_sites, "n_sites", 1)
        t = _checked_int(threshold, "the secure-aggregation threshold", 1)
        if t > n:
            raise InputError(f"the secure-aggregation threshold {t} exceeds the round's {n} sites")
        k = _checked_int(max_rows, "max_rows_per_unit", 1)
        try:
            r, dl = float(rho), float(delta)
        except (TypeError, ValueError):
            raise InputError(f"rho and delta must be numbers, got {rho!r} and {delta!r}") from None
        if not (r > 0.0 and math.isfinite(r)):
            raise InputError(f"rho must be finite and > 0, got {rho!r}")
        if not 0.0 < dl < 1.0:
            raise InputError(f"delta must be in (0, 1), got {delta!r}")
        specs = list(specs)
        if not specs:
            raise InputError("nothing to release: no tables in the shared-noise plan")
        for sp in specs:
            if sp.kind != "counts":
                raise InputError(f"table {sp.name}: shared noise adds integer shares to count tables only; a raw "
                                 "numeric feature's moment table takes per-site noise (or bin it in the codebook)")
        shares = split_budget(r, resolve_weights(specs, weights, label, "gaussian"))
        tables = []
        for sp, share in zip(specs, shares):
            sp = replace(sp, integer=True)
            l1 = float(table_sensitivity("counts", "laplace", True, k))
            l2 = float(table_sensitivity("counts", "gaussian", True, k))
            tables.append(SharedTable(sp, float(share), l1, l2, calibrate_share(float(share), t, n, sp.size, l1, l2)))
        return cls(tuple(tables), r, dl, t, n, k)

    @property
    def scales(self) -> list[float]:
        """Each table's share scale σ (the discrete Gaussian's parameter), in the plan's order."""
        return [p.scale for p in self.tables]

    @property
    def stds(self) -> list[float]:
        """Each table's noise std per cell of one share (exact, the discrete Gaussian's)."""
        return [noise_of(self.mechanism).std(p.scale, True) for p in self.tables]

    # ---------------------------------------------------------------- the share
    def _measurement(self, table: SharedTable) -> Any:
        """OpenDP's discrete Gaussian on the table's i64 cells at the share's scale (the sampler and its map)."""
        try:
            return get_mechanism("gaussian").measurement(table.scale, True)
        except dp_prelude().OpenDPException as exc:  # pragma: no cover - scales are checked when planned
            raise InputError(f"OpenDP cannot build a discrete Gaussian share of scale {table.scale:.3g} "
                             f"({opendp_words(exc)})") from None

    def share_record(self, table: SharedTable) -> NoiseRecord:
        """The noise record of one site's share of ``table``: the mechanism, the share's scale and exact
        std, the round's t and sites, and the ρ (and ε at δ) of the secure sum of any ≥ t shares."""
        rho = worst_rho(table.scale, self.threshold, self.n_sites, table.spec.size, table.l1, table.l2)
        return NoiseRecord(mechanism=self.mechanism, scale=table.scale,
                           std=noise_of(self.mechanism).std(table.scale, True),
                           epsilon=rho_to_epsilon(rho, self.delta), delta=self.delta, rho=rho,
                           threshold=self.threshold, n_sites=self.n_sites)

    def share(self, tables: Sequence[Any]) -> list[Any]:
        """``tables`` (exact integer count tables, in the plan's order) with this site's integer noise
        share added to every cell, drawn by OpenDP; each carries :meth:`share_record`.

        Raises
        ------
        InputError
            A table that is not the planned one, not exact or not integral (nothing is drawn).
        """
        if len(tables) != len(self.tables):
            raise InputError(f"the shared-noise plan is for {len(self.tables)} tables, got {len(tables)}")
        for t, p in zip(tables, self.tables):
            counts = np.asarray(t.counts)
            if (t.kind, tuple(t.clique)) != (p.spec.kind, p.spec.clique) or counts.size != p.spec.size:
                raise InputError(f"table {t.name} is not the table the shared noise was planned for ({p.spec.name})")
            if not t.noise.is_exact:
                raise InputError(f"table {t.name} already carries {t.noise.mechanism} noise; shares go on exact counts")
            if not (counts.dtype.kind in "iu" or bool(np.all(counts == np.round(counts)))):
                raise InputError(f"table {t.name}: shared noise needs integer counts")
        out = []
        for t, p in zip(tables, self.tables):
            counts = np.asarray(t.counts)
            noisy = np.asarray(self._measurement(p)([int(v) for v in counts.ravel().astype(np.int64)]), dtype=np.int64)
            out.append(replace(t, counts=noisy.reshape(counts.shape), noise=self.share_record(p)))
        return out

    # ---------------------------------------------------------------- the two guarantees
    def site_cost(self) -> PrivacyCost:
        """The site's own guarantee: its share alone (every other party colluding) — OpenDP's map of each
        table's discrete Gaussian at its L2 sensitivity, composed (ρ's add), ε at δ by OpenDP."""
        mech = get_mechanism("gaussian")
        parts = []
        for p in self.tables:
            meas = self._measurement(p)
            sens = int(p.l2)
            parts.append(mech.cost_part(meas, sens, float(meas.map(sens)), self.delta))
        return release_cost(parts)

    def _survivors(self, survivors: Any) -> int:
        """The survivor count: an integer, or the survivors' names (each once)."""
        if isinstance(survivors, (list, tuple, set, frozenset)):
            names = [str(x) for x in survivors]
            if len(set(names)) != len(names):
                raise InputError(f"survivors name a site twice: {sorted(names)}")
            survivors = len(names)
        m = _checked_int(survivors, "survivors", 0)
        if m > self.n_sites:
            raise InputError(f"{m} survivors of a round of {self.n_sites} sites")
        if m < self.threshold:
            raise RefusedError(f"{m} of {self.n_sites} sites answered the round, fewer than the secure-aggregation "
                               f"threshold t = {self.threshold}: the sum is not released and nothing is spent")
        return m

    def table_rhos(self, survivors: int | None = None) -> list[float]:
        """Each table's ρ of the secure sum: of exactly ``survivors`` shares (a count, or the survivors' names),
        or (None) of any ≥ t (the worst m)."""
        if survivors is None:
            return [worst_rho(p.scale, self.threshold, self.n_sites, p.spec.size, p.l1, p.l2) for p in self.tables]
        m = self._survivors(survivors)
        return [p.rho(m) for p in self.tables]

    def study_cost(self, survivors: int | None = None) -> PrivacyCost:
        """The study's guarantee: the secure sum of ``survivors`` shares (None: of any set of at least t,
        what the ledger charges before the round), Σ_T ρ_T composed by zCDP, ε at δ by OpenDP.

        Valid against everyone who sees only the sum, while at least t summed shares stay secret from
        them (a site colluding with the learner subtracts its own share). The number charged against the cap.

        Raises
        ------
        RefusedError
            ``survivors < t``: the round releases nothing (one line).
        """
        return release_cost([(self.mechanism, 0.0, r, self.delta) for r in self.table_rhos(survivors)])

    def sum_records(self, survivors: int) -> list[NoiseRecord]:
        """The pooled tables' noise records for ``survivors`` shares: the same records
        :func:`marg.marginals.summary.sum_tables` combines from the sites' :meth:`share_record` (std in
        quadrature, ``survivors`` discrete Gaussian draws per cell for the exact tails, the ρ of any ≥ t)."""
        m = self._survivors(survivors)
        out = []
        for p in self.tables:
            one = self.share_record(p)
            out.append(replace(one, std=float(np.sqrt(sum([one.std**2] * m))),
                               parts=((self.mechanism, one.scale, True, m),)))
        return out

    # ---------------------------------------------------------------- the study file and the ledger
    def describe(self) -> str:
        """One line: mechanism, t of n, the two guarantees."""
        return (f"{self.mechanism} shares, sum of ≥ {self.threshold} of {self.n_sites} sites: study "
                f"{self.study_cost().describe()}; the site's share alone {self.site_cost().describe()}")

    def to_dict(self) -> dict[str, Any]:
        """The plan as JSON (the study file's round plan, a ledger's record): its inputs and each table's σ."""
        return {"format": PLAN_FORMAT, "mechanism": self.mechanism, "rho": self.rho, "delta": self.delta,
                "threshold": self.threshold, "n_sites": self.n_sites, "max_rows": self.max_rows,
                "tables": [p.to_dict() for p in self.tables]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "SharedNoisePlan":
        """The plan :meth:`to_dict` wrote, re-planned from its inputs (the tables' shares as weights); a
        stored σ other than the re-planned one is refused (the plan was altered or is another version's)."""
        try:
            if d.get("format") != PLAN_FORMAT or d.get("mechanism") != MECHANISM:
                raise InputError(f"not a {PLAN_FORMAT} plan of {MECHANISM} shares")
            specs = [TableSpec(tuple(str(a) for a in x["clique"]), str(x["kind"]), int(x["size"]), True)
                     for x in d["tables"]]
            weights = [float(x["share"]) for x in d["tables"]]
            plan = cls.build(specs, float(d["rho"]), d["threshold"], d["n_sites"], d["max_rows"], float(d["delta"]),
                             weights=weights)
            stored = [float(x["scale"]) for x in d["tables"]]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InputError(f"malformed shared-noise plan ({type(exc).__name__}: {exc})") from None
        for p, s in zip(plan.tables, stored):
            if not math.isclose(p.scale, s, rel_tol=1e-6):
                raise InputError(f"shared-noise plan: table {p.spec.name} states σ = {s:.6g}, its inputs give "
                                 f"{p.scale:.6g}")
        return plan


def shared_plan(codebook: Any, cliques: Sequence[tuple[str, ...]], rho: float, threshold: int, n_sites: int,
                max_rows: int = 1, *, delta: float = DEFAULT_DELTA, weights: Any = None) -> SharedNoisePlan:
    """The round's shared-noise plan for the tables of ``cliques`` under ``codebook``.

    Parameters
    ----------
    codebook : Codebook
    cliques : sequence of tuple of str — the round's count tables, in release order
    rho : float — the zCDP the secure sum of any ``threshold`` survivors must meet (one curator's round budget)
    threshold : int — t, the secure-aggregation threshold
    n_sites : int — the round's sites
    max_rows : int — K, each patient's row bound
    delta : float — the δ costs are stated at
    weights : the allocation (:func:`marg.marginals.allocation.resolve_weights`; default the half split)

    Returns
    -------
    SharedNoisePlan
    """
    return SharedNoisePlan.build(table_specs(cliques, codebook, True), rho, threshold, n_sites, max_rows, delta,
                                 weights, codebook.label.name)


__all__ = ["MECHANISM", "SharedNoisePlan", "SharedTable", "calibrate_share", "ddg_rho", "ddg_tau", "shared_plan",
           "worst_rho"]
