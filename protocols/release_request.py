"""What a site asks to release, as one value: :class:`ReleaseRequest` (what leaves and how it is protected) and
:class:`Delivery` (where it goes, who signs and records it).

``marg export`` builds these two values from its options and hands them to the library; the
export (:func:`marg.protocols.export.export_site`), its dry run
(:func:`marg.protocols.export_plan.plan_export`) and the evaluation release
(:func:`marg.protocols.evaluation.evaluate_site`) accept them, so a notebook that builds the
same values produces the same bundle. The library's functions still take the fields as
keyword arguments (``export_site(..., epsilon=1.0, ledger_dir=...)``): :func:`release_options`
sorts them into the two values, one place for the names.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from marg.errors import InputError
from marg.marginals.accounting import DEFAULT_DELTA
from marg.marginals.data.codebook import MAX_LEVELS


@dataclass(frozen=True)
class ReleaseRequest:
    """What a release holds and how it is protected (every field has the export's default).

    Attributes
    ----------
    stats : {"auto", "first", "pairs", "pairs-only", "all"}
        The tables (:func:`marg.protocols.release_tables.resolve_stats`); ``pairs`` the pairs of ``"pairs"``.
    epsilon, rho, delta : the privacy budget of this release (neither: exact counts under the min-cell rule).
    mechanism : str or None
        A registered mechanism (:mod:`marg.marginals.mechanisms`); None: the release's own default
        (Gaussian for tables, Laplace for an evaluation's single small table).
    allocation, first_share : how the budget is split across tables (:mod:`marg.marginals.allocation`).
    holdout, holdout_id : the fraction of rows held out, and the id column that splits them.
    holdout_plan : dict, optional
        The plan of ``--holdout auto`` (:func:`marg.api.plan_holdout`), recorded in the header.
    round_id : the learner's round, signed into the bundle.
    min_cell, min_cell_policy : disclosure control of exact releases.
    max_levels : the level cap (a feature with more levels is refused).
    privacy_unit, max_rows_per_unit : the column naming each patient and the bound K on its rows.
    allow_large_delta : accept a Gaussian release's δ above the usual maximum.
    allow_repeated_evaluations : at a site with no cap, accept a second DP evaluation of one held-out set
        (refused otherwise: with no cap, repeated evaluations of probe models are an oracle); the
        ledger records that it was allowed.
    study : a round of select-then-measure (:mod:`marg.protocols.study`), which then says what is
        counted and what it costs; None: :func:`marg.protocols.release_kind.release_kind` decides from the
        fields below (``export_site`` asks it).
    rounds : {None, 1, 2}
        Under DP with ``epsilon``: None or 2 = select, then measure (``epsilon`` this site's total for the
        study; round 1 releases the label table and a private selection) when no option chooses the tables
        or their protection; 1: one release of the ``stats`` tables (:mod:`marg.protocols.release_kind`).
    study_request, trust : round 2 of select-then-measure: the learner's signed request file, and the trust
        store (a folder or :class:`~marg.protocols.trust_store.TrustStore`) holding the learner's key.
    plan_rows, plan_sites : the rows per site as stated publicly (one count per site, or one count for
        ``plan_sites`` sites), which round 1's split rule reads (:mod:`marg.marginals.study_split`; None:
        it assumes ``DEFAULT_ROWS`` and says so).
    engine, spark_master : who counts a file (:func:`marg.marginals.sources.open_source`).
    content, site_certificate : an evaluation release's table (:data:`marg.protocols.evaluation.CONTENTS`)
        and whether it asks for this site's own certificate.
    """

    stats: str = "auto"
    pairs: Sequence[tuple[str, str]] | None = None
    epsilon: float | None = None
    rho: float | None = None
    delta: float = DEFAULT_DELTA
    mechanism: str | None = None
    allocation: str = "half"
    first_share: float | None = None
    holdout: float | None = None
    holdout_id: str | None = None
    holdout_plan: Mapping[str, Any] | None = None
    round_id: str | None = None
    min_cell: int = 3
    min_cell_policy: str = "refuse"
    max_levels: int = MAX_LEVELS
    privacy_unit: str | None = None
    max_rows_per_unit: int | None = None
    allow_large_delta: bool = False
    study: Any = None
    rounds: int | None = None
    study_request: str | Path | None = None
    trust: Any = None
    plan_rows: Sequence[int] | None = None
    plan_sites: int | None = None
    engine: str | None = None
    spark_master: str | None = None
    content: str = "errors"
    site_certificate: bool = False
    allow_repeated_evaluations: bool = False

    def mechanism_or(self, default: str) -> str:
        """The mechanism asked for, else the release's ``default``."""
        return self.mechanism or default

    def with_(self, **changes: Any) -> "ReleaseRequest":
        """A copy with ``changes`` (the value is frozen)."""
        return replace(self, **changes)


@dataclass(frozen=True)
class Delivery:
    """Where a release goes and who vouches for it.

    Attributes
    ----------
    signing_key : Ed25519PrivateKey, optional — signs the bundle and the ledger entry.
    recipient, recipient_name : the learner's X25519 public key (seals the bundle) and its name (for the ledger).
    ledger_dir : the site's ledger (None: not recorded); ``site_home`` its configuration folder.
    package : writes ``package(signed bundle)`` instead of the bundle (a secure-aggregation upload).
    force : replace an existing output file.
    keep_copy : keep the plain signed bundle of a sealed release beside the ledger.
    """

    signing_key: Any = None
    recipient: Any = None
    recipient_name: str | None = None
    ledger_dir: str | Path | None = None
    site_home: str | Path | None = None
    package: Callable[[Any], bytes] | None = None
    force: bool = False
    keep_copy: bool = True


_REQUEST = frozenset(f.name for f in fields(ReleaseRequest))
_DELIVERY = frozenset(f.name for f in fields(Delivery))


def release_options(request: ReleaseRequest | None, delivery: Delivery | None,
                    options: Mapping[str, Any]) -> tuple[ReleaseRequest, Delivery]:
    """The two values from given ones and keyword ``options`` (each option a field of one of them).

    Options update the given values (or the defaults); a name that is neither is an InputError
    naming it (a misspelt option must not be dropped silently: it may be the privacy budget).
    """
    unknown = sorted(set(options) - _REQUEST - _DELIVERY)
    if unknown:
        raise InputError(f"unknown release option {unknown[0]!r} (expected one of "
                         f"{', '.join(sorted(_REQUEST | _DELIVERY))})")
    req = replace(request or ReleaseRequest(), **{k: v for k, v in options.items() if k in _REQUEST})
    dlv = replace(delivery or Delivery(), **{k: v for k, v in options.items() if k in _DELIVERY})
    return req, dlv


__all__ = ["Delivery", "ReleaseRequest", "release_options"]
