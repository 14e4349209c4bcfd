"""The library facade for what crosses layers: a verified model file, a model applied to a data file, a holdout
certificate.

Each function does one user-level job end to end and returns plain results; the CLI only
parses options and prints. Learning itself is the learners' (:func:`marg.learners.learn.learn`:
options, registry, selection, the automatic choice); what a model file holds and how it is
certified from held-out rows, theirs too (:mod:`marg.learners.estimator.model`,
:mod:`marg.learners.certification.holdout_certificate`); this module joins them to the protocols that
verify files (signatures, evaluation releases) and the site's data readers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from marg.errors import InputError, option

def load_model(path: str | Path, trust: str | Path | None = None, allow_unsigned: bool = False,
               schema: str | Path | None = None) -> Any:
    """A model file, its signature verified first (as ``marg predict`` does): the one way a model file is loaded.

    Parameters
    ----------
    path : the model file
    trust : folder of ``NAME.sign.pub`` files
        The learner keys this site accepts models from; an altered file, an unknown signer
        or an unsigned file is refused (:class:`marg.errors.RefusedError`).
    allow_unsigned : bool
        Accept a model without a signature (experiments; ``repr(model)`` then says "unsigned").
    schema : path, optional
        The site's codebook: a model of another study is refused.

    Returns
    -------
    marg.learners.estimator.model.Model
        ``model.info["signed_by"]`` names the signer (None: unsigned).
    """
    model, signer, _ = load_verified_model(path, schema, trust, allow_unsigned)
    model.info = {**model.info, "signed_by": signer}
    return model


def load_verified_model(path: str | Path, schema: str | Path | None, trust: str | Path | None = None,
                        allow_unsigned: bool = False) -> tuple[Any, str | None, str]:
    """:func:`load_model`, with who signed it and the digest of the bytes used (what an
    evaluation release names): a model a site may run, its signature verified against ``trust``
    (unsigned refused unless ``allow_unsigned``), its codebook equal to the site's ``schema``
    (when given).

    The file is read once (:func:`marg.protocols.model_signing.read_verified_model`): the bytes
    verified are the bytes loaded and named.

    Returns
    -------
    (model, the signer's name or None, SHA-256 of the bytes used)
    """
    import hashlib

    from marg.learners.estimator.model import Model
    from marg.marginals.data.codebook import Codebook
    from marg.protocols.model_signing import read_verified_model

    data, signer = read_verified_model(path, trust, allow_unsigned)
    m = Model.from_bytes(data, source=str(path))
    if schema is not None:
        m.check_codebook(Codebook.load(schema))
    return m, signer, hashlib.sha256(data).hexdigest()


def predict_file(model: Any, data: str | Path, out: str | Path, id_column: str | None = None,
                 flag_outside: bool = False) -> tuple[int, int]:
    """Write class probabilities and the predicted label of every row of ``data`` to ``out`` (CSV).

    The output is streamed batch by batch into a temporary file renamed over ``out`` at the
    end (memory independent of the data's size; a failure leaves no partial file).

    Returns
    -------
    (rows, rows outside the uncertainty set)
    """
    import csv

    from marg._util import atomic_text_writer
    from marg.marginals.data.encoding import iter_encoded
    from marg.marginals.data.io import iter_batches

    if flag_outside and not model.has_uncertainty_set:
        raise InputError(f"{option('flag_outside', True)} needs an mrc or dcc model; this is a {model.learner} model "
                         "(it records no ruled-out cells)")
    if is_omop(data):
        return _predict_omop(model, str(data), out, flag_outside)
    n = n_out = 0
    with atomic_text_writer(out) as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(([id_column] if id_column else []) + [f"p_{c}" for c in model.classes] + ["predicted"]
                   + (["outside"] if flag_outside else []))
        ids = _RowAligned(iter_batches(data, [id_column]), id_column, data) if id_column else None
        for enc in iter_encoded(data, model.codebook, with_label=False):
            proba = model.predict_proba(enc.X)
            pred = model.predict(enc.X)
            outside = model.outside(enc.X) if flag_outside else None
            idv = ids.take(enc.n) if ids is not None else None
            for r in range(enc.n):
                row = (([idv[r]] if idv is not None else []) + [f"{p:.6g}" for p in proba[r]]
                       + [model.classes[int(pred[r])]])
                if outside is not None:
                    row.append(int(outside[r]))
                w.writerow(row)
            n += enc.n
            n_out += int(outside.sum()) if outside is not None else 0
    return n, n_out


class _RowAligned:
    """The id column's values handed out ``n`` rows at a time, whatever its own batches are
    (a Parquet file's id column alone is read in batches of another size than the features)."""

    def __init__(self, batches: Any, column: str, source: Any) -> None:
        self.batches, self.column, self.source = batches, column, source
        self.pending: list[Any] = []

    def take(self, n: int) -> list[Any]:
        while len(self.pending) < n:
            try:
                self.pending.extend(next(self.batches)[self.column].to_pylist())
            except StopIteration:
                raise InputError(f"{self.source}: the id column {self.column!r} has fewer rows than the data") from None
        out, self.pending = self.pending[:n], self.pending[n:]
        return out


def is_omop(data: Any) -> bool:
    """``data`` names an OMOP CDM database (``omop+duckdb://``, ``omop+postgresql://``)."""
    return isinstance(data, str) and data.lower().startswith("omop+")


def omop_encoded(data: str, codebook: Any, *, with_label: bool, all_entries: bool = False,
                 extra: Sequence[str] = ()) -> Any:
    """The encoded rows of an OMOP CDM (each person's first entry; ``all_entries``: every entry) and the
    values of ``extra`` row columns (``person_id``, ``cohort_start_date``): ``(Encoded, {column: list})``."""
    import numpy as np

    from marg.marginals.data.encoding import Encoded, encode_batch
    from marg.marginals.sources import open_source

    parts, ids = [], {c: [] for c in extra}
    with open_source(data) as src:
        src.prepare(codebook, with_label=with_label, all_entries=all_entries)
        cols = list(extra) + codebook.feature_names + ([codebook.label.name] if with_label else [])
        row = 1
        for batch in src.row_batches(cols):
            enc = encode_batch(codebook, batch, row, with_label=with_label, where=src.where_rows())
            for c in extra:
                ids[c].extend(batch[c].to_pylist())
            parts.append(enc)
            row += enc.n
    if not parts:
        raise InputError(f"{data.split('?', 1)[0]}: the target cohort has no entries to read")
    X = tuple(np.concatenate([e.column(i) for e in parts]) for i in range(codebook.n_features))
    y = np.concatenate([e.y for e in parts]) if with_label else None
    return Encoded(X, y, 1), ids


def _predict_omop(model: Any, data: str, out: str | Path, flag_outside: bool) -> tuple[int, int]:
    """``marg predict`` on an OMOP CDM: one line per cohort entry, ``person_id, cohort_start_date``, the
    class probabilities and the predicted ``label`` (no partial file on failure)."""
    import csv

    from marg._util import atomic_text_writer

    enc, ids = omop_encoded(data, model.codebook, with_label=False, all_entries=True,
                            extra=("person_id", "cohort_start_date"))
    proba, pred = model.predict_proba(enc.X), model.predict(enc.X)
    outside = model.outside(enc.X) if flag_outside else None
    with atomic_text_writer(out) as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["person_id", "cohort_start_date"] + [f"p_{c}" for c in model.classes] + ["label"]
                   + (["outside"] if flag_outside else []))
        for r in range(enc.n):
            w.writerow([ids["person_id"][r], ids["cohort_start_date"][r]] + [f"{p:.6g}" for p in proba[r]]
                       + [model.classes[int(pred[r])]] + ([int(outside[r])] if outside is not None else []))
    return enc.n, int(outside.sum()) if outside is not None else 0


def evaluate_file(model: Any, data: str | Path) -> dict[str, Any]:
    """Accuracy, error, certificate, confusion matrix and rows outside the uncertainty set on labelled ``data``
    (a file, or an OMOP CDM: each person's first cohort entry)."""
    from marg.learners.estimator.model import evaluate
    from marg.marginals.data.encoding import encode_file

    if is_omop(data):
        enc, _ = omop_encoded(str(data), model.codebook, with_label=True)
    else:
        enc = encode_file(data, model.codebook, with_label=True)
    return evaluate(model, enc.X, enc.y)


HOLDOUT_PLAN_RECORD = ("rows", "epsilon", "expected_error", "holdout", "epsilon_tables", "epsilon_evaluate",
                       "expected_certificate", "rule")
"""What a bundle records of a ``--holdout auto`` plan (the header's ``holdout.plan``)."""


def plan_holdout(request: Any, n_features: int, rows: Sequence[int], sites: int | None = None,
                 expected_error: float = 0.2) -> tuple[Any, dict[str, Any]]:
    """``--holdout auto``: the release ``request`` with the planned holdout, and the plan.

    ``request.epsilon`` is the site's total (training tables + the later evaluation); the plan
    (:func:`marg.learners.certification.holdout_plan.resolve_plan` for ``rows`` as stated publicly — one count
    with ``sites``, or one per site — and the features of the codebook) chooses the fraction held
    out and the split of ε. The returned request releases the tables at their share of ε, holds
    out the planned fraction and records the plan (:data:`HOLDOUT_PLAN_RECORD`) in the bundle's
    header; the plan dict also carries the ε the site gives the evaluation later.

    Parameters
    ----------
    request : marg.protocols.release_request.ReleaseRequest
    n_features : int — the codebook's features (the planner weighs the training tables by them).
    rows : sequence of int — rows per site, as stated publicly (the data's own count is private).
    sites : int, optional — the number of sites when ``rows`` is one count.
    expected_error : float — the error rate the model is expected to reach.
    """
    from marg.learners.certification.holdout_plan import resolve_plan

    if request.epsilon is None or request.rho is not None:
        raise InputError(f"{option('holdout', 'auto')} splits a total ε between the tables and the evaluation: "
                         f"give {option('epsilon')}")
    if rows is None:
        raise InputError(f"{option('holdout', 'auto')} needs {option('plan_rows')} (the rows per site as stated "
                         "publicly; the data's own count is private)")
    plan = resolve_plan(list(rows), sites, request.epsilon, expected_error, n_features, None, None, request.delta)
    record = {k: plan[k] for k in HOLDOUT_PLAN_RECORD}
    return request.with_(holdout=plan["holdout"], epsilon=plan["epsilon_tables"], holdout_plan=record), plan


@dataclass
class HoldoutResult:
    """What :func:`certify_with_holdout` produced: the model with its new certificate, the pooled
    bound, the per-site and class-wise bounds
    (:class:`marg.learners.certification.holdout_certificate.Certificates`)."""

    model: Any
    bound: Any
    sites: list[str]
    certificates: Any = None


def certify_with_holdout(model_path: str | Path, bundles: Sequence[str | Path], coverage: float = 0.95,
                         trust: str | Path | None = None, allow_unsigned: bool = False, key: str | Path | None = None,
                         passphrase_file: str | Path | None = None, evaluations: int | None = None) -> HoldoutResult:
    """Replace a model's certificate by the holdout bound of the sites' evaluation releases.

    The releases are verified and matched to *this* model file (its SHA-256) by
    :func:`marg.protocols.evaluation.verified_evaluations`; the bound is
    :func:`marg.learners.certification.holdout_certificate.certify_model` at ``coverage``: the population the sites'
    patients weighted by their numbers, α this model's share over every model evaluated on the held-out set (6/(π²·j²)
    for the j-th, its ordinal in the sites' ledgers; ``evaluations``, a number the user states, can only lower it).
    """
    from marg.learners.certification.holdout_certificate import certify_model
    from marg.learners.estimator.model import Model
    from marg.protocols.evaluation import verified_evaluations

    model, digest = Model.read(model_path)  # read once: the digest names the bytes certified
    releases = verified_evaluations(bundles, model.codebook, model.info, digest, Path(model_path).name, trust=trust,
                                    allow_unsigned=allow_unsigned, key=key, passphrase_file=passphrase_file)
    certs = certify_model(model, releases, coverage, evaluations=evaluations)
    return HoldoutResult(model, certs.pooled, [r.site for r in releases], certs)
