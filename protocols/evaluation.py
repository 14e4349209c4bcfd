"""A site's evaluation release: what the holdout certificate needs about a model's errors on the site's held-out rows.

``marg export DATA --evaluate MODEL`` (:func:`evaluate_site`) is the second half of the
holdout protocol of :mod:`marg.marginals.holdout`: the site verifies the model (signature,
codebook), recomputes the split of the bundles the model learned from at this site
(refusing if one of them held nothing out, or if the held-out rows changed), predicts the
held-out rows with the model's deterministic rule and releases ONE count table, noised once,
with the same mechanisms, budget check and ledger as any export. Its content (``content``):

- ``errors`` (the default): N[outcome] = (correct, error), 2 cells — exactly what the
  certificate needs: the error count and, derived as their sum, the held-out count;
- ``classes``: N[truth, outcome], 2K cells — the same per true class, for class-wise bounds;
- ``confusion``: N[predicted, y], the K×K confusion matrix.

Each has sensitivity 1 (a patient is one cell), so the error count and the held-out count
together cost what the error count alone would; the noise per cell does not grow with the
cells, but the certificate sums more draws from the larger tables. The codebook is derived
(:func:`release_codebook`); the header names the model's digest, the study's fingerprint,
the content, whether the site asks for a certificate of its own (``site_certificate``) and
the training bundles whose held-out rows were evaluated, so the learner checks that every
site evaluated the same model on rows it never learned from
(:mod:`marg.learners.certification.holdout_certificate` has the bound).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from marg._util import atomic_write_bytes
from marg.errors import InputError, MargError, RefusedError
from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label
from marg.marginals.disclosure import apply_min_cell
from marg.marginals.holdout import ModelSplit, Splitter, split_for_model
from marg.marginals.accounting import PrivacyCost, at_cap
from marg.marginals.privacy import budget_for, check_delta
from marg.marginals.release_plan import ReleasePlan
from marg.marginals.counts.tables import MarginalTable

from . import evaluation_ledger as evl
from .bundle import Bundle
from .export import ExportResult, check_out
from .release_kind import release_kind
from .release_request import Delivery, ReleaseRequest, release_options

PREDICTED = "predicted"
TRUTH = "truth"
OUTCOME = "outcome"
OUTCOMES = ("correct", "error")
CONTENTS = ("errors", "classes", "confusion")


def predicted_name(j: int) -> str:
    """The feature of the ``j``-th model (0-based) of an evaluation of several: ``predicted``, ``predicted_2``, …"""
    return PREDICTED if int(j) == 0 else f"{PREDICTED}_{int(j) + 1}"


def evaluation_codebook(study: Codebook, models: int = 1) -> Codebook:
    """The derived codebook of an evaluation release of ``models`` models on the same held-out patients: one feature
    per model, ``predicted`` then ``predicted_2``, … (:func:`predicted_name`; levels: the classes), and the study's
    label — the tables N[predicted_j, y], one per model (a patient is one cell of each)."""
    classes = tuple(study.label.classes)
    if int(models) < 1:
        raise InputError(f"an evaluation of {models} models: it needs at least one")
    feats = tuple(CategoricalFeature(predicted_name(j), classes) for j in range(int(models)))
    return Codebook(features=feats, label=Label(study.label.name, classes))


def outcome_codebook(study: Codebook) -> Codebook:
    """The derived codebook of an error-count release: feature ``truth`` (levels: the
    classes) and label ``outcome`` (correct, error)."""
    return Codebook(features=(CategoricalFeature(TRUTH, tuple(study.label.classes)),), label=Label(OUTCOME, OUTCOMES))


def release_codebook(study: Codebook, content: str) -> Codebook:
    """The codebook of an evaluation release of ``content`` (one of :data:`CONTENTS`)."""
    if content not in CONTENTS:
        raise InputError(f"unknown evaluation content {content!r} (expected one of {', '.join(CONTENTS)})")
    return evaluation_codebook(study) if content == "confusion" else outcome_codebook(study)


def release_table(conf: np.ndarray, study: Codebook, content: str) -> MarginalTable:
    """The exact table of ``content`` from a confusion matrix ``conf`` (K, K) = N[predicted, y].

    ``errors``: (correct, error) = (Σ_y N[y, y], Σ_{ŷ≠y} N[ŷ, y]); ``classes``: row y =
    (N[y, y], Σ_{ŷ≠y} N[ŷ, y]); ``confusion``: ``conf`` itself.
    """
    conf = np.asarray(conf, dtype=np.int64)
    right = np.diag(conf)
    wrong = conf.sum(axis=0) - right
    if content == "errors":
        return MarginalTable(clique=(OUTCOME,), counts=np.array([right.sum(), wrong.sum()], dtype=np.int64))
    if content == "classes":
        return MarginalTable(clique=(TRUTH, OUTCOME), counts=np.stack([right, wrong], axis=1))
    if content == "confusion":
        return MarginalTable(clique=(PREDICTED, study.label.name), counts=conf)
    raise InputError(f"unknown evaluation content {content!r} (expected one of {', '.join(CONTENTS)})")


def model_digest(path: str | Path) -> str:
    """SHA-256 of a model file's bytes: the name under which sites evaluate it."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def confusion_on_holdout(data: Any, model: Any, ledger_dir: str | Path, site: str,
                         progress: Callable[[int], None] | None = None, *, engine: str | None = None,
                         spark_master: str | None = None, split: ModelSplit | None = None,
                         unit: Any = None, per_patient: bool = False,
                         allow_empty: bool = False) -> tuple[np.ndarray, int, ModelSplit]:
    """N[predicted, y] (K, K) of ``model`` on the rows of ``data`` held out of its training, their number, the split.

    ``data`` is any DATA argument (file, database URI, Spark path or table) or an open
    Source. The split is the one of the bundles of ``site`` the model learned from
    (:func:`marg.marginals.holdout.split_for_model`, unless ``split`` is given: refused when
    one of them held out nothing); refuses when the held-out rows differ from those at export
    time (count or fingerprint: the data changed). ``unit`` (a
    :class:`marg.marginals.privacy_unit.PrivacyUnit` with a column): at most its bound of rows
    of each held-out patient are counted (the matrix's sensitivity is then that bound).
    ``per_patient`` (a DP release): the repeat check of every DP release, whatever ``unit``
    (:func:`marg.marginals.privacy_unit.check_unit`), as at export.
    """
    from marg.marginals.held_confusion import held_confusion
    from marg.marginals.privacy_unit import check_unit

    from .export import source_of

    cb = model.codebook
    ms = split if split is not None else split_for_model(ledger_dir, model.info, cb.fingerprint, site)
    src = source_of(data, engine, spark_master)
    splitter = Splitter(ms.spec, ms.key)
    try:
        # an OMOP CDM checks itself and builds its rows
        src.prepare(cb, max_rows=unit.bound if unit is not None else None)
        if per_patient:  # whatever unit is declared (check_unit)
            check_unit(src, cb, unit, also=[ms.spec.id_column] if ms.spec.id_column else [])
        conf, _ = held_confusion(src, cb, model.predict, splitter, unit, progress)  # where the rows are (Spark)
        name = src.name
    finally:
        if src is not data:
            src.close()
    seen, held = splitter.rows, splitter.held
    if (seen, held, f"{splitter.fingerprint:016x}") != (ms.n_rows, ms.n_held, ms.held_fingerprint):
        raise InputError(f"{name}: {seen} rows ({held} held out), but the export counted {ms.n_rows} "
                         f"({ms.n_held} held out, or other rows): the data changed since the export, so its held-out "
                         "rows are unknown")
    if held == 0 and not allow_empty:  # a study's evaluation round: a small site may hold out nobody (its table is 0)
        raise InputError(f"{name}: no held-out rows")
    return conf, int(conf.sum()), ms


def plan_evaluation(model: Any, r: ReleaseRequest, epsilon: float | None, rho: float | None, delta: float
                    ) -> tuple[Any, tuple[str, ...], ReleasePlan | None]:
    """What an evaluation of ``model`` releases, before any row is read: ``(unit, the table's clique, the DP plan)``
    (the plan None for an exact release). ``epsilon``/``rho`` as :func:`budget_for` resolved them."""
    from marg.marginals.privacy_unit import resolve_unit

    unit = resolve_unit(model.codebook, r.privacy_unit, r.max_rows_per_unit)
    bound = unit.bound if unit is not None else 1
    ecb = release_codebook(model.codebook, r.content)
    clique = release_table(np.eye(model.codebook.n_classes, dtype=np.int64), model.codebook, r.content).clique
    # the release planned once: its cost now, its noise after counting (marginals.release_plan)
    dp = epsilon is not None or rho is not None
    plan = ReleasePlan.for_cliques([clique], ecb, epsilon=epsilon, rho=rho, delta=delta, max_rows=bound) if dp else None
    return unit, clique, plan


def evaluate_site(
    data: str | Path,
    model: Any,
    model_file_digest: str,
    site: str,
    out: str | Path,
    request: ReleaseRequest | None = None,
    delivery: Delivery | None = None,
    *,
    progress: Callable[[int], None] | None = None,
    signer: str | None = None,
    **options: Any,
) -> ExportResult:
    """Release what the certificate needs about ``model`` on this site's held-out rows (module docstring).

    ``request`` (:class:`~marg.protocols.release_request.ReleaseRequest`) and ``delivery``
    (:class:`~marg.protocols.release_request.Delivery`) as for
    :func:`marg.protocols.export.export_site` (keyword ``options`` set their fields), but
    ``epsilon`` is spent by the Laplace mechanism by default: for one small table its noise is
    far below the Gaussian's at δ = 1e-6. The cost is checked against the dataset's budget
    before any data is read and recorded in its ledger. ``request.content`` is one of
    :data:`CONTENTS`; ``request.site_certificate`` asks the learner for this site's own
    certificate beside the pooled one; ``request.holdout_plan`` (a JSON-safe dict, e.g. the ε
    split chosen by the planner) is recorded in the header.

    The caller has verified the model (:func:`marg.api.load_verified_model`); ``signer``
    names who signed it (None: unsigned, allowed). The header's ``evaluation.split`` names
    the training bundles whose held-out rows were evaluated, which ``marg certify`` checks
    against the model's own provenance, and ``evaluations_on_split`` the rank of this model
    among the models evaluated on the same held-out patients.

    No oracle (:mod:`protocols.evaluation_ledger`): one exact evaluation per held-out set,
    refused before any row is read after the first; a refusal after the rows are read is
    recorded in the ledger and names no cell or class. ``request.privacy_unit``/``max_rows_per_unit``
    (default the codebook's) bound each held-out patient's rows, as at export.
    """
    from .ledger import Ledger
    from .signing import finalize_bundle
    from .site import resolve_export_ledger

    r, delivery = release_options(request, delivery, options)
    # an evaluation: never a study round (refused in one line)
    release_kind(r, model.codebook, delivery, evaluation=True)
    epsilon, rho, delta, min_cell, min_cell_policy = r.epsilon, r.rho, r.delta, r.min_cell, r.min_cell_policy
    content, signing_key, recipient = r.content, delivery.signing_key, delivery.recipient
    out = check_out(out, force=True)  # the folder exists and can be written, before anything is read or charged
    if epsilon is not None and rho is not None:
        raise InputError("give --epsilon or --rho, not both")
    mech, epsilon, rho = budget_for(r.mechanism_or("laplace"), epsilon, rho, delta)
    dp = epsilon is not None or rho is not None
    if dp and not mech.pure:
        check_delta(delta)
    ecb = release_codebook(model.codebook, content)
    if not dp and min_cell_policy != "refuse":
        raise InputError(f"an evaluation release cannot suppress cells (--min-cell-policy {min_cell_policy}): the "
                         f"certificate would count suppressed errors as none; use refuse or differential privacy")
    unit, clique, dp_plan = plan_evaluation(model, r, epsilon, rho, delta)
    requested = dp_plan.cost if dp_plan is not None else PrivacyCost.unbounded()
    ledger_dir, site_cfg = resolve_export_ledger(delivery.ledger_dir, site, signing_key)
    if ledger_dir is None:
        raise InputError("an evaluation release needs the site's ledger (it remembers the held-out rows)")
    ledger = Ledger(ledger_dir, site=site_cfg)
    ledger.check(requested)  # the signed cap; refuses a missing, truncated, rolled-back or re-signed ledger
    ms = split_for_model(ledger_dir, model.info, model.codebook.fingerprint, site)
    if unit is not None and unit.column is not None and ms.spec.id_column != unit.column:
        raise InputError(f"the held-out rows were split by {ms.spec.by}, not by the privacy unit {unit.column!r}: "
                         "a patient's rows may lie on both sides")
    entries = ledger.entries()
    if not dp:
        evl.check_exact(entries, ms)  # before any row is read: the answer depends on the ledger alone
    repeat = dp and evl.check_uncapped(entries, ms, ledger.cap() is not None, r.allow_repeated_evaluations)
    rank = evl.ordinal(entries, ms, model_file_digest)

    try:
        conf, held, ms = confusion_on_holdout(data, model, ledger_dir, site, progress, engine=r.engine,
                                              spark_master=r.spark_master, split=ms, unit=unit, per_patient=dp)
        tables = [release_table(conf, model.codebook, content)]
        suppressed: list[Any] = []
        if dp:
            tables, cost = dp_plan.release(tables, ecb), dp_plan.cost
            privacy = {"mechanism": dp_plan.mechanism.name, **cost.to_dict(), **at_cap(ledger.cap(), cost)}
            released_n = None
        else:
            tables, suppressed = apply_min_cell(tables, k=min_cell, policy=min_cell_policy, label=ecb.label.name,
                                                codebook=ecb)
            cost = PrivacyCost.unbounded()
            privacy = {"mechanism": "none", "epsilon": 0.0, "delta": 0.0, "rho": 0.0}
            released_n = held
    except MargError as exc:  # after the rows were read: recorded like a release, and naming nothing of them
        why = _why(exc)  # only the min-cell rule's answer depends on the model: it spends the one exact evaluation
        raise _refused(ledger, signing_key, site, evl.record_of(ms, model_file_digest, not dp and why == "min-cell",
                                                                rank, why), exc)
    if unit is not None:
        privacy["unit"] = unit.to_dict()
    extra = {"evaluation": {"model": model_file_digest, "study": model.codebook.fingerprint, "learner": model.learner,
                            "signer": signer, "split": {"bundles": list(ms.bundles), "fraction": ms.spec.fraction,
                                                        "by": ms.spec.by},
                            "content": content, "site_certificate": bool(r.site_certificate),
                            **({"plan": dict(r.holdout_plan)} if r.holdout_plan else {})},
             "evaluations_on_split": rank}
    bundle = Bundle.build(ecb, tables, site=site, n_rows=released_n, privacy=privacy, extra=extra)
    final, file_bytes = finalize_bundle(bundle, signing_key, recipient)
    file_digest = hashlib.sha256(file_bytes).hexdigest() if recipient is not None else None
    entry = ledger.record(final, signing_key, file_digest=file_digest, cost=cost,
                          recipient_name=delivery.recipient_name,
                          suppressed=suppressed, evaluation=evl.record_of(ms, model_file_digest, not dp, rank,
                                                                          repeated_uncapped=repeat))
    atomic_write_bytes(out, file_bytes)
    return ExportResult(bundle=final, path=out, n_rows=held, tables=tables, cost=cost, sealed=recipient is not None,
                        ledger_entry=entry, suppressed=suppressed)


def _why(exc: MargError) -> str:
    """A refused evaluation's reason, in a word the ledger records (no cell, class or count)."""
    text = str(exc)
    return "min-cell" if "min-cell" in text else "data"


def _refused(ledger: Any, signing_key: Any, site: str, record: dict[str, Any], exc: MargError) -> MargError:
    """Record a refused evaluation in the ledger, and the error to raise: the min-cell rule's in
    words naming no cell, class or count; any other (a bad value, the data changed) as it was —
    it does not depend on the model."""
    try:
        evl.record_refusal(ledger, signing_key, site, record)
    except MargError:
        return exc  # the ledger refuses the entry too (tampered, unsigned): its own error said enough
    if record.get("refused") == "min-cell":
        return RefusedError("refused: a count of this evaluation is below the min-cell threshold (which one is not "
                            "said); recorded in the ledger as this held-out set's one exact evaluation: evaluate with "
                            "differential privacy (--epsilon)")
    return exc


def check_provenance(header: dict[str, Any], site: str, model_info: dict[str, Any], source: str) -> None:
    """Refuse an evaluation release whose held-out rows are not held out of the model's training at its site.

    The release names the training bundles of ``site`` whose split it evaluated
    (``evaluation.split.bundles``); the model's signed provenance lists the bundles it
    learned from. They must be the same set: a model that learned from another bundle of
    this site — one exported without ``--holdout``, or with another split — may have seen
    the evaluated rows, and its error on them would not bound its error on new patients.

    Raises
    ------
    RefusedError
        One line naming the file, the site and the digests.
    """
    from marg.errors import RefusedError
    from marg.marginals.holdout import training_bundles

    named = (header.get("evaluation") or {}).get("split") or {}
    evaluated = [str(d) for d in named.get("bundles") or []] if isinstance(named, dict) else []
    trained = training_bundles(model_info, site)
    if not evaluated:
        raise RefusedError(f"{source} refused: site {site!r}'s evaluation names no training bundle its held-out rows "
                           "belong to (released by an older marg: evaluate again)")
    if not trained:
        raise RefusedError(f"{source} refused: the model learned from no bundle of site {site!r}, so its evaluation "
                           "rows are held out of no training export of this model")
    if set(evaluated) != set(trained):
        other = sorted(set(trained) - set(evaluated)) or sorted(set(evaluated) - set(trained))
        raise RefusedError(
            f"{source} refused: site {site!r} evaluated the rows held out of bundle(s) "
            f"{', '.join(d[:12] + '…' for d in evaluated)}, but the model learned from its bundle(s) "
            f"{', '.join(d[:12] + '…' for d in trained)} ({other[0][:12]}… differs): the evaluated rows may have "
            "been in training")


@dataclass(frozen=True)
class EvaluationRelease:
    """One site's verified evaluation release of a model: its one table, its content
    (``errors``, ``classes`` or ``confusion``), whether the site asked for a certificate of its
    own, the release's privacy record and the bundle's digest."""

    site: str
    table: MarginalTable
    content: str
    site_certificate: bool
    privacy: Any
    digest: str
    fraction: float | None = None
    evaluations_on_split: int | None = None


def verified_evaluations(bundles: Sequence[str | Path], model_codebook: Codebook, model_info: dict[str, Any],
                         digest: str,
                         model_name: str, trust: str | Path | None = None, allow_unsigned: bool = False,
                         key: str | Path | None = None,
                         passphrase_file: str | Path | None = None) -> list[EvaluationRelease]:
    """The sites' evaluation releases of one model file, each verified like a training bundle.

    Each must evaluate *this* model file (``digest``, its SHA-256; ``model_name`` names it in
    messages) under its study codebook, one per site, on rows held out of every bundle the
    model learned from at that site (:func:`check_provenance`), in one table; anything else is
    a one-line InputError (RefusedError for the provenance) naming the file.
    """
    from .load import load_verified_bundles

    loaded = load_verified_bundles(list(bundles), trust=trust, allow_unsigned=allow_unsigned, key=key,
                                   passphrase_file=passphrase_file)
    out: list[EvaluationRelease] = []
    seen: set[str] = set()
    for p, b in zip(bundles, loaded):
        ev = b.header.get("evaluation")
        if not isinstance(ev, dict):
            raise InputError(f"{p}: not an evaluation release (export it with marg export DATA --evaluate MODEL)")
        if ev.get("model") != digest:
            raise InputError(f"{p}: evaluates model {str(ev.get('model'))[:16]}…, not {model_name} ({digest[:16]}…)")
        content = str(ev.get("content", "confusion"))  # releases before the error-count content were confusion tables
        if b.fingerprint != release_codebook(model_codebook, content).fingerprint:
            raise InputError(f"{p}: its evaluation codebook differs from this model's (another study or label)")
        check_provenance(b.header, b.site, model_info, str(p))
        if b.site in seen:
            raise InputError(f"{p}: a second evaluation release from site {b.site!r}")
        seen.add(b.site)
        tables = b.tables
        if len(tables) != 1:
            raise InputError(f"{p}: an evaluation release holds one table, found {len(tables)}")
        split = ev.get("split") if isinstance(ev.get("split"), dict) else {}
        frac = split.get("fraction")
        count = b.header.get("evaluations_on_split", ev.get("evaluations_on_split"))  # the site's ledger's ordinal
        out.append(EvaluationRelease(b.site, tables[0], content, bool(ev.get("site_certificate")),
                                     b.header.get("privacy"), b.digest(),
                                     None if not isinstance(frac, (int, float)) else float(frac),
                                     count if isinstance(count, int) and not isinstance(count, bool) and count >= 1
                                     else None))
    return out
