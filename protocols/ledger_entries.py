"""What the ledger records of one event: a release (from its facts or from its bundle) or a cap.

:func:`release_entry` and :func:`cap_entry` build the entry dict a site appends — every field
of :mod:`protocols.ledger_format` except the ones the ledger fills in when it appends (``seq``,
``prev``, ``cumulative``, the cap in force, ``key_id``, ``signature``). :func:`release_facts`
reads a bundle for :meth:`protocols.ledger.Ledger.record` and
:meth:`~protocols.ledger.Ledger.preview` alike: its statistics, its cost and the digests of
what an exact release disclosed.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from marg._util import now_iso
from marg.errors import InputError, MargError
from marg.marginals.accounting import PrivacyCost, validate_cap
from marg.marginals.privacy import tables_cost

from .exact_releases import release_digests
from .ledger_format import ENTRY_VERSION, HEX64, statistics_of


def as_cost(x: Any, what: str) -> PrivacyCost:
    """``x`` as a :class:`PrivacyCost` (one, or its ``{epsilon, delta, rho}`` dict); InputError naming ``what``."""
    if isinstance(x, PrivacyCost):
        return x
    if isinstance(x, Mapping):
        return PrivacyCost.from_dict(x)
    raise InputError(f"{what} must be a privacy cost {{epsilon, delta, rho}}, got {x!r}")


OPTIONAL_FACTS = ("recipient", "recipient_name", "mechanism", "file_digest", "n_rows", "source", "round", "exact",
                  "suppressed", "own_cost")
"""The facts a release entry may record beside the four it must (:func:`release_entry`)."""


def release_entry(
    *,
    bundle_digest: str,
    site: str,
    statistics: Sequence[Mapping[str, Any]],
    cost: Any,
    time: str | None = None,
    **optional: Any,
) -> dict[str, Any]:
    """The release entry for these facts (before the ledger chains and signs it).

    The optional facts (:data:`OPTIONAL_FACTS`) default to None, ``suppressed`` to 0.

    Parameters
    ----------
    bundle_digest : ``Bundle.digest()`` of the signed bundle (sha256 hex)
    site : the releasing site
    statistics : ``{name, kind, clique, shape, mechanism, std}`` per table (:func:`statistics_of`)
    cost : PrivacyCost or {epsilon, delta, rho}; ``inf`` for exact releases
    recipient, recipient_name : the learner's sealing key id and name, if sealed
    mechanism : default derived from ``statistics``
    file_digest : sha256 hex of the file written, if it differs from the bundle (sealed)
    n_rows : the row count the bundle states
    time : default now (UTC)
    source : where the site counted (``Source.describe()``)
    round : the learner's round id answered
    exact : :func:`protocols.exact_releases.release_digests` of an exact release
    suppressed : cells suppressed by the min-cell rule
    own_cost : a shared-noise share's second guarantee (:mod:`marginals.shared_noise`): the site's share
        alone (``SharedNoisePlan.site_cost()``), written as ``own_cost``; ``cost`` is then the study's
        guarantee (``SharedNoisePlan.study_cost()``, the secure sum of ≥ t survivors), the one charged
        against the cap. Absent (None): the entry is written as before, without the field.

    Raises
    ------
    InputError
        A malformed digest, site or statistic record (one line naming it).
    """
    unknown = sorted(set(optional) - set(OPTIONAL_FACTS))
    if unknown:
        raise TypeError(f"release_entry() got an unexpected keyword argument {unknown[0]!r}")
    recipient, recipient_name, mechanism, file_digest, n_rows, source, round, exact = (
        optional.get(k) for k in OPTIONAL_FACTS[:-2])
    suppressed = optional.get("suppressed", 0)
    own_cost = optional.get("own_cost")
    for name, v in (("bundle digest", bundle_digest), ("file digest", file_digest)):
        if v is not None and (not isinstance(v, str) or not HEX64.match(v)):
            raise InputError(f"{name} must be a sha256 hex string, got {v!r}")
    if bundle_digest is None:
        raise InputError("a release entry needs the bundle digest")
    if not isinstance(site, str) or not site:
        raise InputError(f"site must be a non-empty string, got {site!r}")
    stats = [dict(s) for s in statistics]
    for s in stats:
        if not isinstance(s.get("name"), str) or not isinstance(s.get("clique"), list):
            raise InputError(f"malformed statistic record {s!r} (needs name and clique list)")
    mechs = sorted({str(s.get("mechanism", "none")) for s in stats})
    extra = {} if own_cost is None else {"own_cost": as_cost(own_cost, "the site's own cost").to_dict()}
    return {**extra,
        "v": ENTRY_VERSION, "kind": "release", "time": time or now_iso(), "site": site,
        "recipient": recipient, "recipient_name": recipient_name, "bundle": bundle_digest,
        "file_sha256": file_digest, "n_rows": None if n_rows is None else int(n_rows), "statistics": stats,
        "mechanism": mechanism or (mechs[0] if len(mechs) == 1 else ("mixed" if mechs else "none")),
        "cost": as_cost(cost, "release cost").to_dict(), "source": dict(source) if source else None,
        "round": round or None, "exact": dict(exact) if exact else None,
        "suppressed": int(suppressed),
    }


def cap_entry(cap: Any, site: str, time: str | None = None) -> dict[str, Any]:
    """The entry recording the dataset's privacy cap ``cap`` (validated: :func:`marginals.accounting.validate_cap`)."""
    c = validate_cap(as_cost(cap, "budget cap"))
    return {
        "v": ENTRY_VERSION, "kind": "cap", "time": time or now_iso(), "site": site, "recipient": None,
        "recipient_name": None, "bundle": None, "file_sha256": None, "n_rows": None, "statistics": [],
        "mechanism": "none", "cost": PrivacyCost.zero().to_dict(), "cap": c.to_dict(), "source": None,
        "round": None, "exact": None, "suppressed": 0,
    }


def bundle_cost(bundle: Any, cost: Any = None) -> PrivacyCost:
    """The cost a bundle's entry records: ``cost`` if given, else its header's ``privacy``, else
    :func:`marginals.privacy.tables_cost` of its tables (before the exact-table rule of
    :func:`release_facts`)."""
    if cost is not None:
        return as_cost(cost, "release cost")
    try:
        return as_cost(bundle.header.get("privacy"), "bundle privacy")
    except MargError:
        return tables_cost(bundle.tables)


def release_facts(bundle: Any, cost: Any, suppressed: Sequence[Any]) -> tuple[list[dict[str, Any]], PrivacyCost, Any]:
    """What the ledger records of a release: its statistics, its cost (``inf`` when it holds an
    exact table) and the digests of what an exact release disclosed (scoped to held-out rows for
    an evaluation, else the study's rows)."""
    c = as_cost(cost, "release cost")
    stats = statistics_of(bundle)
    if any(s["mechanism"] == "none" for s in stats):
        c = PrivacyCost.unbounded()
    hidden = sorted({getattr(s, "table", None) or s["table"] for s in suppressed})
    rows = "evaluation" if bundle.header.get("evaluation") else "study"
    return stats, c, _exact_digests(bundle, hidden, rows)


_LAST_DIGESTS: list = []
"""The last release's ``(key, digests)``: an export previews (checks) and then records one release, and
a wide one's digests (20,000 tables) cost seconds; ``key`` is a SHA-256 of everything they are made of (the
codebook by its fingerprint, which :attr:`~protocols.bundle.Bundle.codebook` checks)."""


def _exact_digests(bundle: Any, hidden: list, rows: str) -> Any:
    """:func:`~protocols.exact_releases.release_digests` of ``bundle``'s tables, computed once per content."""
    import hashlib
    import json

    import numpy as np

    codebook = bundle.codebook  # checked against its fingerprint (and parsed once per bundle)
    h = hashlib.sha256(json.dumps([bundle.header.get("statistics"), codebook.fingerprint, bundle.header.get("n_rows"),
                                   hidden, rows], default=str).encode())
    for a in bundle.arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    key = h.hexdigest()
    if _LAST_DIGESTS and _LAST_DIGESTS[0][0] == key:
        return dict(_LAST_DIGESTS[0][1]) if _LAST_DIGESTS[0][1] is not None else None
    exact = release_digests(bundle.tables, bundle.header.get("n_rows"), hidden, codebook, rows)
    _LAST_DIGESTS[:] = [(key, dict(exact) if exact is not None else None)]
    return exact
