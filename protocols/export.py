"""A site's export: data source → count tables → (noise | min-cell) → bundle → sign/seal → ledger → file.

This is the site-side pipeline behind ``marg export``. The order is what makes it safe:

1. the release plan (cliques) and its privacy cost are known from the codebook alone, so
   the budget is checked against the ledger **before any data is read**;
2. the source counts the tables (a file streams through the encoder here; a database or
   Spark runs the GROUP BY itself); any bad value, missing table or lost connection stops here;
3. exact releases pass the min-cell rule; DP releases get OpenDP noise;
4. the bundle is built, addressed, signed and (optionally) sealed in memory;
5. the ledger entry is appended (atomically; the budget is re-checked under its lock);
6. only then is the bundle file written, atomically.

A failure at 1–5 leaves no bundle file and no ledger entry; a crash between 5 and 6 leaves
a ledger that over-states what left the site, never one that under-states it.
"""

from __future__ import annotations

import os

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from marg.marginals.data.codebook import Codebook
from marg.marginals.disclosure import apply_min_cell
from marg.marginals.holdout import Holdout, has_site_key, record_path, remember, site_key
from marg.marginals.privacy_unit import agree_holdout, check_unit, count_rows, resolve_unit
from marg.marginals.sources import Source, open_source
from marg.errors import InputError
from marg._util import atomic_write_bytes
from marg.marginals.allocation import ALLOCATIONS
from marg.marginals.accounting import PrivacyCost, at_cap
from marg.marginals.privacy import budget_for, check_delta
from marg.marginals.release_plan import ReleasePlan
from marg.marginals.counts.tables import MarginalTable, check_plan_size, plan_cliques

from .bundle import Bundle
from .release_kind import release_kind
from .release_request import Delivery, ReleaseRequest, release_options
from .release_tables import first_order_weights, pairs_left_out, resolve_stats


@dataclass(frozen=True)
class ExportResult:
    bundle: Bundle
    path: Path
    n_rows: int
    tables: list[MarginalTable]
    cost: PrivacyCost
    sealed: bool = False
    ledger_entry: dict[str, Any] | None = None
    suppressed: list[Any] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # warning lines (pair tables left out for size)


def count_file(
    data: "str | Path | Source",
    codebook: Codebook,
    cliques: Sequence[tuple[str, ...]],
    progress: Callable[[int], None] | None = None,
    *,
    engine: str | None = None,
) -> tuple[list[MarginalTable], int]:
    """Count the tables of ``cliques`` from ``data`` (a file, a URI, a data frame or an open Source)."""
    if isinstance(data, Source):
        return data.count(codebook, cliques, progress)
    with source_of(data, engine) as src:
        return src.count(codebook, cliques, progress)


def source_of(data: Any, engine: str | None = None, spark_master: str | None = None) -> Source:
    """The Source of ``data``: itself, a frame's (a pandas DataFrame or pyarrow Table, counted as a file is:
    :mod:`marg.marginals.sources.frame_source`), else the one a DATA argument names (:func:`open_source`)."""
    if isinstance(data, Source):
        return data
    from marg.marginals.sources.frame_source import FrameSource, is_frame

    if is_frame(data):
        if engine not in (None, "local"):
            raise InputError(f"engine {engine!r} cannot count rows held in this process (a data frame): give a file "
                             "or a table it reads")
        return FrameSource(data)
    return open_source(data, engine=engine, spark_master=spark_master)


@dataclass
class Prepared:
    """An export up to the point where something is written (steps 1-4 of the module docstring).

    ``bundle`` is final (addressed, signed), ``file_bytes`` what would be written to ``out``,
    ``cost`` what the release costs (checked against the ledger's cap before counting),
    ``holdout``/``split`` the split to remember, ``notes`` warning lines (pair tables left out).
    """

    bundle: Bundle
    file_bytes: bytes
    tables: list[MarginalTable]
    n_rows: int
    cost: PrivacyCost
    suppressed: list[Any]
    ledger: Any
    ledger_dir: Path | None
    holdout: Holdout | None
    split: Any
    stats: str
    notes: list[str]


def check_out(out: str | Path, force: bool = False) -> Path:
    """Refuse an output path whose folder is missing, or that exists (unless ``force``): an export
    is not repeated by accident (each one is charged to the budget)."""
    out = Path(out)
    if not (out.parent if str(out.parent) else Path(".")).exists():
        raise InputError(f"output folder does not exist: {out.parent}")
    if not force and (out.exists() or out.is_symlink()):
        raise InputError(f"{out} exists: refusing to overwrite it (nothing was counted or charged); pass --force to "
                         "replace it")
    folder = out.parent if str(out.parent) else Path(".")
    try:  # the folder can be written: a probe written and removed before anything is counted or charged
        import tempfile

        fd, probe = tempfile.mkstemp(prefix=".marg-probe-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise InputError(f"cannot write in {folder} ({exc.strerror or exc}): nothing was counted or charged") from None
    return out


def export_site(
    data: "str | Path | Source",
    codebook: Codebook,
    site: str,
    out: str | Path,
    request: ReleaseRequest | None = None,
    delivery: Delivery | None = None,
    *,
    progress: Callable[[int], None] | None = None,
    **options: Any,
) -> ExportResult:
    """Count the planned tables of ``data``, protect them, and write the site's bundle.

    Parameters
    ----------
    data, codebook, site, request, delivery, progress, **options
        What to release and how: the arguments of :func:`prepare_release` (steps 1-4), which
        document them.
    out : path
        The file written (the bundle, sealed when ``delivery.recipient`` is given, or
        ``delivery.package``'s bytes). ``delivery.force`` replaces an existing one (refused
        otherwise, before anything is read or charged); ``delivery.recipient_name`` is recorded
        in the ledger entry of a sealed bundle; ``delivery.keep_copy`` keeps the plain signed
        bundle of a sealed file (or secure-aggregation package) beside the ledger
        (:mod:`protocols.site_copies`), so ``marg inspect`` shows the site what it sent.

    See Also
    --------
    marg.protocols.export_plan.plan_export : the same steps without writing (``--dry-run``).
    """
    request, delivery = release_options(request, delivery, options)
    out = check_out(out, delivery.force)
    request = release_kind(request, codebook, delivery).request  # one round, round 1 or round 2: decided once
    study = request.study
    rel = prepare_release(data, codebook, site, request, delivery, progress=progress)
    final, file_bytes, ledger = rel.bundle, rel.file_bytes, rel.ledger
    signing_key, sealed = delivery.signing_key, delivery.recipient is not None

    # 5. Ledger first (re-checks the budget under its lock), 6. then the file.
    entry = None
    if ledger is not None:
        file_digest = hashlib.sha256(file_bytes).hexdigest() if (sealed or delivery.package is not None) else None
        entry = ledger.record(final, signing_key, file_digest=file_digest, cost=rel.cost,
                              recipient_name=delivery.recipient_name, suppressed=rel.suppressed,
                              own_cost=getattr(study, "own_cost", None))  # a shared-noise share's own guarantee
        if delivery.keep_copy and file_digest is not None:
            from .site_copies import keep

            keep(rel.ledger_dir, final)
    if study is not None:  # after the ledger entry: the site's record of its study (what round 2 may spend)
        study.commit(rel.ledger_dir, codebook.fingerprint, final, entry, rel.cost)
    if rel.split is not None:
        remember(rel.ledger_dir, final.digest(), codebook.fingerprint, site, rel.holdout, rel.split)
    atomic_write_bytes(out, file_bytes)
    return ExportResult(
        bundle=final, path=out, n_rows=rel.n_rows, tables=rel.tables, cost=rel.cost, sealed=sealed,
        ledger_entry=entry, suppressed=rel.suppressed, notes=rel.notes,
    )


def prepare_release(
    data: "str | Path | Source",
    codebook: Codebook,
    site: str,
    request: ReleaseRequest | None = None,
    delivery: Delivery | None = None,
    *,
    progress: Callable[[int], None] | None = None,
    create_key: bool = True,
    **options: Any,
) -> Prepared:
    """Steps 1-4 of an export (plan, budget check, count, protect, build, sign, seal) in memory:
    nothing is written (:func:`export_site` then records and writes it).

    ``request`` (:class:`~marg.protocols.release_request.ReleaseRequest`) says what is released
    and how it is protected, ``delivery`` (:class:`~marg.protocols.release_request.Delivery`)
    who signs, seals and records it; keyword ``options`` set their fields by name
    (:func:`~marg.protocols.release_request.release_options`). The fields:

    Parameters
    ----------
    stats : {"auto", "first", "pairs", "all"}
        The tables to release (:func:`resolve_stats` for ``"auto"``).
    epsilon, rho : float, optional
        Total privacy budget of this export. ``epsilon`` with ``mechanism="gaussian"``
        (the default): the discrete Gaussian at the largest ρ whose zCDP guarantee implies
        (ε, ``delta``)-DP (:func:`marg.marginals.counts.dp_conversions.rho_for_epsilon`); with
        ``mechanism="laplace"``: the discrete Laplace, pure ε-DP. ``rho``: Gaussian,
        ρ-zCDP reported at ``delta``. Neither: exact counts under the min-cell rule.
    mechanism : str
        How ``epsilon`` is spent: ``"gaussian"``, ``"laplace"`` or another registered
        mechanism (:mod:`marg.marginals.mechanisms`). The Gaussian's noise grows like the square root of the
        number of tables, the Laplace's linearly: for releases of pair tables the Gaussian
        is far less noisy at the same ε (δ = 1e-6).
    allocation : {"half", "least-squares"}
        How the budget is split across tables (:mod:`marg.marginals.allocation`).
    first_share : float, optional
        Fraction of the budget for first-order tables (overrides ``allocation``).
    round_id : str, optional
        The learner's round id (:mod:`marg.protocols.rounds`), signed into the bundle.
    holdout : float, optional
        Leave this fraction of the rows out of every table (a ledger folder needed; any
        source: the rows pass through this process to be split by the site's key):
        :mod:`marg.marginals.holdout` remembers the split beside the ledger under the
        bundle's digest, for ``marg export --evaluate MODEL``
        (:func:`marg.protocols.evaluation.evaluate_site`).
    holdout_id : str, optional
        Split by this id column instead of each row's content (rows sharing an id stay together).
    min_cell, min_cell_policy
        Disclosure control for exact releases (``refuse`` or ``suppress`` cells below k).
    signing_key : Ed25519PrivateKey, optional
        Signs the bundle (and the ledger entry).
    recipient : X25519PublicKey, optional
        Seals the bundle to the learner.
    ledger_dir : path, optional
        The site's ledger (None: not recorded). Its signed cap is enforced before anything
        is read; once the site is configured (``marg audit init``, :mod:`protocols.site`,
        found under ``site_home``) only its own ledger and key are accepted.
    site_home : path, optional
        The site's configuration folder (default ``$MARG_HOME``, :func:`protocols.site.site_home`).
    package : callable, optional
        Writes ``package(signed bundle)`` instead of the bundle (a secure-aggregation upload,
        :mod:`protocols.secagg_round`); the ledger records the bundle and that file's digest.
    data, engine, spark_master
        The DATA argument (file, ``duckdb://``/``postgresql://`` URI, or a path or table
        for ``engine="spark"``; see :func:`marg.marginals.sources.open_source`), or an
        open Source. The bundle header records ``source`` (:meth:`Source.describe`: kind,
        location, table or query, never credentials).
    max_levels : int
        The level cap (:meth:`Codebook.check_level_cap`): a feature with more levels is refused.
    create_key : bool
        False (a dry run): do not make the site's split key when it has none; the split then
        uses a key of this call only.
    holdout_plan : dict, optional
        The plan of ``--holdout auto`` (:mod:`marg.learners.certification.holdout_plan`), recorded in the header.
    study : :class:`marg.protocols.study.Round1` or :class:`~marg.protocols.study.Round2`, optional
        A round of the select-then-measure path: it says what is counted, what the release
        costs (checked against the cap first) and protects the counts itself; its record
        goes into the header as ``study``. None: :func:`marg.protocols.release_kind.release_kind`
        decides the kind from ``rounds``, ``study_request`` (+ ``trust``), ``plan_rows`` and the
        options (a DP release stated by ``epsilon`` with the default tables, mechanism and a
        ledger is round 1, as ``marg export --epsilon E`` is).
    privacy_unit, max_rows_per_unit : optional
        The column naming each patient (``"row"``: each row is a person) and the bound K on a
        patient's rows (:mod:`marg.marginals.privacy_unit`; default the codebook's ``privacy_unit``):
        each table counts at most K rows of a patient and its sensitivity is K times a row's. A
        holdout then splits by the unit. Under DP with no unit declared, an id column that
        repeats (:func:`marg.marginals.privacy_unit.repeating_column`) is refused.
    allow_large_delta : bool
        Accept a Gaussian release's ``delta`` above :data:`marg.marginals.privacy.MAX_DELTA`;
        a ``delta`` of at least 1/n (n the patients counted) is always refused.
    """
    from .ledger import Ledger
    from .site import resolve_export_ledger
    from .signing import finalize_bundle

    request, delivery = release_options(request, delivery, options)
    request = release_kind(request, codebook, delivery).request  # (already decided when export_site asked)
    r = request
    stats, pairs, epsilon, rho, delta = r.stats, r.pairs, r.epsilon, r.rho, r.delta
    allocation, first_share, holdout, holdout_id, study = r.allocation, r.first_share, r.holdout, r.holdout_id, r.study
    min_cell, min_cell_policy, round_id = r.min_cell, r.min_cell_policy, r.round_id
    signing_key, recipient, ledger_dir = delivery.signing_key, delivery.recipient, delivery.ledger_dir
    codebook.check_level_cap(r.max_levels)
    if epsilon is not None and rho is not None:
        raise InputError("give --epsilon or --rho, not both")
    target_epsilon = None if epsilon is None else float(epsilon)
    mech, epsilon, rho = budget_for(r.mechanism_or("gaussian"), epsilon, rho, delta)
    if epsilon is not None:
        target_epsilon = None  # spent as given (pure ε-DP)
    elif rho is not None and mech.pure:
        raise InputError(f"--rho is a Gaussian (zCDP) budget; --mechanism {mech.name} needs --epsilon")
    dp = epsilon is not None or rho is not None or study is not None
    if dp and not mech.pure:
        check_delta(delta, r.allow_large_delta)
    unit = resolve_unit(codebook, r.privacy_unit, r.max_rows_per_unit)
    bound = unit.bound if unit is not None else 1
    holdout_id = agree_holdout(unit, holdout_id) if holdout is not None else holdout_id
    note = None if study is not None else pairs_left_out(codebook, stats, dp, pairs)
    if study is not None:
        study.max_rows = bound  # every table's and the selection's sensitivity: K rows per patient
        study.unit = unit.to_dict() if unit is not None else None  # round 2 refuses another unit than round 1
    notes: list[str] = []
    if study is not None:  # select-then-measure: the round says what is counted and what it costs
        stats, cliques, weights = "study", study.cliques(codebook), None
    else:
        stats = resolve_stats(codebook, stats, dp, pairs)
        cliques = plan_cliques(codebook, stats, pairs)
        check_plan_size(codebook, cliques)
        if allocation not in ALLOCATIONS:
            raise InputError(f"unknown --allocation {allocation!r} (expected one of {', '.join(ALLOCATIONS)})")
        weights = (first_order_weights(codebook, cliques, first_share) if (dp and first_share is not None)
                   else allocation)

    # 1. The cost is known from the plan: check the budget before reading any data.
    ledger_dir, site_cfg = resolve_export_ledger(ledger_dir, site, signing_key, delivery.site_home)
    if study is not None:
        study.check(ledger_dir, codebook, site)  # refusals before anything is read or charged
        requested = study.requested
    else:
        # the release planned once: its cost now, its noise after counting (marginals.release_plan)
        dp_plan = ReleasePlan.for_cliques(cliques, codebook, epsilon=epsilon, rho=rho, weights=weights, delta=delta,
                                          mechanism=mech.name, max_rows=bound) if dp else None
        requested = dp_plan.cost if dp_plan is not None else PrivacyCost.unbounded()
    ledger = Ledger(ledger_dir, site=site_cfg) if ledger_dir is not None else None
    position = None
    if ledger is not None:
        ledger.check(requested, round_id)  # also refuses a missing, truncated, rolled-back or re-signed ledger
        position = ledger.position()  # signed into the bundle: the learner detects a forked ledger

    # 2. Count (a database or Spark counts inside itself; a failure leaves nothing behind).
    counted = _count(data, codebook, cliques, unit, holdout, holdout_id, ledger_dir, r, dp=dp, create_key=create_key,
                     progress=progress)
    tables, n_rows, split, spec = counted.tables, counted.n_rows, counted.split, counted.spec
    notes += counted.notes
    if dp and not mech.pure:  # δ ≥ 1/n protects nobody (the site's own count, never released)
        check_delta(delta, True, counted.units)

    # 3. Protect.
    suppressed: list[Any] = []
    study_record = None
    if study is not None:
        tables, cost, privacy, study_record = study.protect(tables, codebook)
        released_n = None
    elif dp:
        tables, cost = dp_plan.release(tables, codebook), dp_plan.cost
        notes += useless_noise(tables, n_rows)
        released_n: int | None = None  # n is not public under DP: the noisy label table estimates it
        privacy = {"mechanism": mech.name, **cost.to_dict(),
                   "allocation": allocation if first_share is None else f"first-order share {first_share:g}"}
        if target_epsilon is not None:
            privacy["target"] = {"epsilon": target_epsilon, "delta": float(delta)}
    if dp:  # either round of select-then-measure, or the one-round release
        privacy["unit"] = unit.to_dict() if unit is not None else {"column": "row", "max_rows_per_unit": 1}
        zcdp_delta = float(privacy.get("delta", delta)) if (study is not None or not mech.pure) else None
        privacy.update(at_cap(ledger.cap() if ledger is not None else None, cost, zcdp_delta))
    else:
        tables, suppressed = apply_min_cell(tables, k=min_cell, policy=min_cell_policy, label=codebook.label.name,
                                            codebook=codebook)
        cost = PrivacyCost.unbounded()
        released_n = n_rows
        privacy = {"mechanism": "none", "epsilon": 0.0, "delta": 0.0, "rho": 0.0}
        if unit is not None:
            privacy["unit"] = unit.to_dict()
    extra = _header_extra(counted.source, spec, r.holdout_plan, study_record, round_id, position, suppressed,
                          None if dp else (min_cell, min_cell_policy))

    # 4. Build, address, sign, seal — in memory.
    bundle = Bundle.build(codebook, tables, site=site, n_rows=released_n, privacy=privacy, extra=extra)
    final, file_bytes = finalize_bundle(bundle, signing_key, recipient)
    if delivery.package is not None:
        file_bytes = delivery.package(final)

    return Prepared(bundle=final, file_bytes=file_bytes, tables=tables, n_rows=n_rows, cost=cost, suppressed=suppressed,
                    ledger=ledger, ledger_dir=Path(ledger_dir) if ledger_dir is not None else None, holdout=spec,
                    split=split, stats=stats, notes=([note] if note else []) + notes)


@dataclass(frozen=True)
class _Counted:
    """Step 2's result: the exact tables, the rows counted, the held-out split (and its spec), the
    source's description, the patients counted (for the δ < 1/n check) and warning lines."""

    tables: list[MarginalTable]
    n_rows: int
    split: Any
    spec: Holdout | None
    source: dict[str, Any]
    units: int
    notes: list[str]


def _count(data: "str | Path | Source", codebook: Codebook, cliques: Sequence[tuple[str, ...]], unit: Any,
           holdout: float | None, holdout_id: str | None, ledger_dir: str | Path | None, request: ReleaseRequest, *,
           dp: bool, create_key: bool, progress: Callable[[int], None] | None) -> _Counted:
    """Step 2 of an export: count the tables of ``cliques`` (held-out rows left out by the site's
    key, each patient's rows bounded by ``unit``); a failure leaves nothing behind."""
    notes: list[str] = []
    spec = split = None
    if holdout is not None or holdout_id is not None:
        if holdout is None:
            raise InputError("--holdout-id needs --holdout F (the fraction of rows to hold out)")
        spec = Holdout(holdout, holdout_id)
        if ledger_dir is None:
            raise InputError("--holdout needs the site's ledger folder, where the held-out rows are remembered")
    src = source_of(data, request.engine, request.spark_master)
    fresh_key: Path | None = None
    try:
        src.prepare(codebook, max_rows=unit.bound if unit is not None else None)  # an OMOP CDM checks itself here
        if dp:  # a patient with several rows is not protected by a per-row guarantee, whatever unit is declared
            check_unit(src, codebook, unit, also=[holdout_id] if holdout_id else [])
        key = None
        if spec is not None:  # the rows pass through here, to be split by the site's key
            if create_key or has_site_key(ledger_dir):
                fresh_key = None if record_path(ledger_dir).exists() else record_path(ledger_dir)
                key = site_key(ledger_dir, create=True)
            else:  # a dry run before the first --holdout export: the real export draws the site's key
                import secrets

                key = secrets.token_bytes(32)
                notes.append("note: this site has no split key yet; the real export draws it, so its held-out "
                             "patients (and the exact counts) will differ from this dry run's")
        kept = None
        if spec is not None or (unit is not None and unit.column is not None and not src.bounds_units(unit)):
            tables, n_rows, split, kept = count_rows(src, codebook, cliques, unit, spec, key, progress)
            if kept is not None and kept.note():
                notes.append(kept.note())
        else:
            tables, n_rows = src.count(codebook, cliques, progress)
        source = src.describe()  # after counting: a Spark source knows its master only then
    except BaseException:
        if fresh_key is not None:  # a refused export leaves no new file behind: the split key drawn for it included
            fresh_key.unlink(missing_ok=True)
        raise
    finally:
        if src is not data:
            src.close()
    return _Counted(tables, n_rows, split, spec, source, kept.units if kept is not None else n_rows, notes)


def _header_extra(source: dict[str, Any], spec: Holdout | None, holdout_plan: Any, study_record: Any, round_id: Any,
                  position: Any, suppressed: Sequence[Any], min_cell: tuple[int, str] | None) -> dict[str, Any]:
    """The bundle header's record of how the release was made (``min_cell``: (k, policy) of an exact release)."""
    # the bundle says that cells were suppressed, not where (the site's ledger records how many)
    extra: dict[str, Any] = {"min_cell": {"k": min_cell[0], "policy": min_cell[1], "suppressed": bool(suppressed)}
                             if min_cell is not None else None, "source": source}
    if spec is not None:
        extra["holdout"] = {"fraction": spec.fraction, "by": spec.by,
                            **({"plan": dict(holdout_plan)} if holdout_plan else {})}
    if study_record is not None:
        extra["study"] = study_record
    if round_id is not None:
        extra["round"] = str(round_id)  # under the site's signature: the learner refuses other rounds
    extra["ledger"] = position  # null: recorded nowhere (--no-ledger); the learner refuses it by default
    if suppressed:  # how many, per table — not where: positions would point at the rare cells
        per: dict[str, int] = {}
        for c in suppressed:
            per[c.table] = per.get(c.table, 0) + 1
        extra["suppressed_cells"] = per
    return extra


def useless_noise(tables: Sequence[MarginalTable], n_rows: int) -> list[str]:
    """A warning when a DP release will be mostly noise: count tables whose noise std per cell
    is at least the expected count of a cell, ``n / cells`` (empty when none is).

    The site sees its own row count; the warning stays on the site's terminal.
    """
    bad = [t for t in tables if t.kind == "counts" and t.noise.std >= max(n_rows, 1) / max(int(t.counts.size), 1)]
    if not bad:
        return []
    worst = max(bad, key=lambda t: t.noise.std * t.counts.size)
    return [f"warning: the noise std per cell is at least the expected cell count in {len(bad)} of "
            f"{sum(t.kind == 'counts' for t in tables)} tables (e.g. {worst.name}: std {worst.noise.std:.3g} against "
            f"{n_rows / worst.counts.size:.3g} patients per cell on average): this release is mostly noise, and it "
            "spends its privacy budget all the same"]
