"""The dry run of an export: exactly what would leave the site, with nothing written.

:func:`plan_export` runs the export's steps 1-4 (:func:`protocols.export.prepare_release`:
budget check, counting, noise or min-cell rule, bundle built, signed and sealed in memory),
asks the ledger whether it would accept the entry (:meth:`protocols.ledger.Ledger.preview`:
the cap, the exact-release rules) and returns an :class:`ExportPlan`. It writes no bundle,
no ledger entry, no round marker, no held-out split and no site copy.

What a plan shows is what the bundle would hold: every table with its cells and its noise
(mechanism, scale, per-cell std, its share of the cost); the total cost against the site's cap
and what is already spent; and for an exact release the counts themselves (the values that
would leave, after the min-cell rule). Under DP the values are the counts plus fresh noise
drawn at the real export, so the plan shows the noise, not a draw of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from marg.marginals.accounting import PrivacyCost

from .export import prepare_release
from .release_request import Delivery, ReleaseRequest, release_options


@dataclass(frozen=True)
class PlannedTable:
    """One table of the plan: ``name``, ``kind`` (counts or moments), ``clique``, ``shape``,
    ``cells`` = prod(shape), the noise (``mechanism`` none/laplace/gaussian, ``scale``, per-cell
    ``std``, its ``epsilon``/``rho`` share) and, for an exact table, ``counts`` (nested lists of shape ``shape``)."""

    name: str
    kind: str
    clique: tuple[str, ...]
    shape: tuple[int, ...]
    cells: int
    mechanism: str
    scale: float
    std: float
    epsilon: float
    rho: float
    counts: Any = None
    suppressed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "clique": list(self.clique), "shape": list(self.shape),
                "cells": self.cells, "mechanism": self.mechanism, "scale": self.scale, "std": self.std,
                "epsilon": self.epsilon, "rho": self.rho, "counts": self.counts, "suppressed": self.suppressed}


@dataclass(frozen=True)
class ExportPlan:
    """What ``marg export`` would release, and what it would cost (see the module docstring).

    Attributes
    ----------
    site, out : the exporting site and the file that would be written
    n_rows : rows counted at the site (local); ``released_n_rows`` the row count the bundle
        states (None under DP: the noisy label table estimates it)
    stats : the resolved ``--stats``
    tables : list of :class:`PlannedTable`
    privacy : the bundle header's privacy record (mechanism, ε, δ, ρ, allocation, target)
    cost : PrivacyCost of this release (``inf`` for exact counts)
    spent, after, cap : the ledger's composed spend before and after it (ρ's add, converted once by
        OpenDP at the cap's δ: :class:`marginals.accounting.Spend`) and its cap (None: no ledger / no cap)
    ledger : the ledger folder that would record it (None: not recorded)
    signed, sealed_to : whether the bundle would be signed, and the learner it would be sealed to
    bundle_bytes : size of the file that would be written
    notes : warning lines (e.g. pair tables left out for size)
    """

    site: str
    out: Path
    n_rows: int
    released_n_rows: int | None
    stats: str
    tables: list[PlannedTable]
    privacy: dict[str, Any]
    cost: PrivacyCost
    spent: PrivacyCost | None
    cap: PrivacyCost | None
    after: PrivacyCost | None
    ledger: Path | None
    signed: bool
    sealed_to: str | None
    bundle_bytes: int
    notes: list[str] = field(default_factory=list)

    @property
    def exact(self) -> bool:
        return any(t.mechanism == "none" for t in self.tables)

    @property
    def cells(self) -> int:
        return sum(t.cells for t in self.tables)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``marg export --dry-run --json``)."""
        return {"dry_run": True, "site": self.site, "out": str(self.out), "n_rows": self.n_rows,
                "released_n_rows": self.released_n_rows, "stats": self.stats, "n_tables": len(self.tables),
                "cells": self.cells, "tables": [t.to_dict() for t in self.tables], "privacy": self.privacy,
                "cost": self.cost.to_dict(), "spent": None if self.spent is None else self.spent.to_dict(),
                "spent_after": None if self.after is None else self.after.to_dict(),
                "cap": None if self.cap is None else self.cap.to_dict(),
                "ledger": None if self.ledger is None else str(self.ledger), "signed": self.signed,
                "sealed_to": self.sealed_to, "bundle_bytes": self.bundle_bytes, "notes": list(self.notes)}


def plan_export(data: Any, codebook: Any, site: str, out: str | Path, request: ReleaseRequest | None = None,
                delivery: Delivery | None = None, *, progress: Callable[[int], None] | None = None,
                **options: Any) -> ExportPlan:
    """What :func:`protocols.export.export_site` would release with these arguments, writing nothing.

    Parameters
    ----------
    data, codebook, site, out
        As for ``export_site`` (``out`` is only named in the plan; an existing ``out`` is not refused).
    request, delivery, progress, **options
        As for :func:`protocols.export.prepare_release` (``delivery.package`` is not taken;
        ``delivery.recipient_name`` names the learner when ``delivery.recipient`` seals the bundle).

    Raises
    ------
    RefusedError, InputError
        Whatever the export would refuse: the budget, the exact-release rules, a bad value.
    """
    request, delivery = release_options(request, delivery, options)
    if delivery.package is not None:
        from marg.errors import InputError

        raise InputError("a dry run of a secure-aggregation upload is not supported: it would prepare the masks")
    rel = prepare_release(data, codebook, site, request, delivery, progress=progress, create_key=False)
    spent = cap = after = None
    if rel.ledger is not None:
        from marg.marginals.accounting import cap_delta

        state = rel.ledger.preview(rel.bundle, rel.cost, rel.suppressed)
        cap = state.cap
        d = cap_delta(cap)  # the δ `marg audit show` converts the spend at
        spent, after = state.spend.as_cost(d), state.spend.add(rel.cost).as_cost(d)
    per_table: dict[str, int] = {}
    for c in rel.suppressed:
        per_table[c.table] = per_table.get(c.table, 0) + 1
    tables = []
    for t in rel.tables:
        r = t.noise
        tables.append(PlannedTable(
            name=t.name, kind=t.kind, clique=tuple(t.clique), shape=tuple(int(x) for x in t.shape),
            cells=int(t.counts.size), mechanism=r.mechanism, scale=float(r.scale), std=float(r.std),
            epsilon=float(r.epsilon), rho=float(r.rho),
            counts=t.counts.tolist() if r.is_exact else None, suppressed=per_table.get(t.name, 0)))
    h = rel.bundle.header
    return ExportPlan(site=site, out=Path(out), n_rows=rel.n_rows, released_n_rows=h.get("n_rows"), stats=rel.stats,
                      tables=tables, privacy=dict(h.get("privacy") or {}), cost=rel.cost, spent=spent, cap=cap,
                      after=after,
                      ledger=rel.ledger_dir if rel.ledger is not None else None, signed=h.get("signature") is not None,
                      sealed_to=(delivery.recipient_name or h.get("recipient")) if h.get("recipient") else None,
                      bundle_bytes=len(rel.file_bytes), notes=list(rel.notes))
