"""The library facade the command line calls: learn from bundle files, apply a model to a data file.

Each function does one user-level job end to end and returns plain results; the CLI only
parses options and prints. The learners are chosen through the registry
(:data:`marg.learners.base.REGISTRY`); which ``marg learn`` option sets which estimator
parameter is one table (:data:`LEARN_OPTIONS`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Collection, Mapping, Sequence

from marg.errors import InputError, option

LEARN_OPTIONS: dict[str, dict[str, str]] = {
    "s": {"mrc": "s", "dcc": "s", "nb": "s", "boost": "s"},
    "coverage": {"mrc": "coverage", "dcc": "coverage", "renyi": "coverage", "nb": "coverage", "boost": "coverage",
                 "auto": "coverage"},
    "prefer": {"auto": "prefer"},
    "alpha": {"nb": "alpha"},
    "solver": {"mrc": "solver"},
    "eps": {"mrc": "eps"},
    "n_max": {"mrc": "n_max"},
    "k_max": {"mrc": "k_max"},
    "ridge": {"renyi": "ridge"},
    "greedy": {"dcc": "greedy"},
    "max_edges": {"dcc": "max_edges"},
    "edge_weight": {"dcc": "edge_weight"},
    "structure": {"dcc": "structure"},
    "loss": {"dcc": "loss"},
    "max_order": {"boost": "max_order"},
    "kappa": {"boost": "kappa"},
    "patience": {"boost": "patience"},
    "stall_tol": {"boost": "stall_tol"},
    "time_limit": {"boost": "time_limit", "nb": "time_limit"},
}
"""``marg learn`` option → {learner: the estimator parameter it sets}. An option a learner
does not take is refused when the user gave it (not when it only has its default)."""


def make_estimator(learner: str, options: Mapping[str, Any], given: Collection[str] = (),
                   features: Sequence[str] | None = None, callback: Callable[[dict], None] | None = None) -> Any:
    """The registered estimator for ``learner`` with the parameters ``options`` set.

    Parameters
    ----------
    learner : str
        A name in :data:`marg.learners.base.LEARNERS`.
    options : mapping option -> value
        Keys of :data:`LEARN_OPTIONS`.
    given : collection of str
        The options the user set explicitly; one that does not apply to ``learner`` is an
        InputError naming it.
    features : list of str, optional
        Features to use (e.g. after feature selection).
    callback : callable, optional
        Progress records (learners that report progress take it).
    """
    from marg.learners.base import estimator_class

    cls = estimator_class(learner)
    params: dict[str, Any] = {}
    for opt, value in options.items():
        if opt not in LEARN_OPTIONS:
            raise InputError(f"unknown learn option {opt!r}")
        target = LEARN_OPTIONS[opt].get(learner)
        if target is None:
            if opt in given:
                takers = ", ".join(sorted(LEARN_OPTIONS[opt]))
                raise InputError(f"{option(opt)} does not apply to learner {learner!r} (it is for {takers})")
            continue
        params[target] = value
    names = set(cls.param_names())
    if features is not None:
        params["features"] = list(features)
    if callback is not None and "callback" in names:
        params["callback"] = callback
    return cls(**params)


def learn_estimator(learner: str, options: Mapping[str, Any], given: Collection[str] = (),
                    callback: Callable[[dict], None] | None = None) -> Any:
    """:func:`make_estimator` with its parameters checked (before any work); ``auto`` takes only
    ``coverage`` and ``prefer`` (it tries each candidate with its defaults)."""
    if learner == "auto":
        extra = sorted(set(given) - {"coverage", "prefer"})
        if extra:
            raise InputError(f"{option(extra[0])} needs a chosen learner, not {option('learner', 'auto')} (auto tries each learner's defaults)")
    est = make_estimator(learner, options, given, callback=callback)
    est.check_params()
    return est


@dataclass
class LearnResult:
    """What :func:`learn` produced: the model (not yet saved), its report, the selection."""

    model: Any
    report: dict[str, Any]
    selection: Any
    seconds: float


def learn(
    summary: Any,
    learner: str,
    options: Mapping[str, Any],
    given: Collection[str] = (),
    select: str = "none",
    max_features: int | None = None,
    feature_cost: float | None = None,
    norm: str = "linf",
    time_limit: float | None = 60.0,
    callback: Callable[[dict], None] | None = None,
    on_selected: Callable[[Any], None] | None = None,
) -> LearnResult:
    """Select features (optionally), fit the learner on ``summary`` and wrap it as a model.

    Parameters
    ----------
    summary : marginals.summary.Summary
    learner, options, given : see :func:`make_estimator`; ``learner="auto"`` picks the learner
        (:class:`marg.learners.auto.AutoLearner`; only ``coverage`` and ``prefer`` may be given) and the
        model is the chosen candidate, its report carrying the candidates table.
    select : {"none", "group-lasso", "gbd"}
    max_features, feature_cost, norm, time_limit : feature selection (see
        :func:`marg.learners.selection.select_features`; ``time_limit`` None: 60 s).
    callback : progress records of the selection and the fit.
    on_selected : called with the selection result before the fit (to report it).

    Returns
    -------
    LearnResult
        ``report`` holds the keys of the ``marg learn --json`` contract.
    """
    from marg.learners.model import Model

    t0 = time.perf_counter()
    if select not in ("none", "group-lasso", "gbd"):
        raise InputError(f"unknown feature selection {option('select', select)} (expected none, group-lasso or gbd)")
    auto = learner == "auto"
    est = learn_estimator(learner, options, given, callback=callback)
    selection = None
    if select != "none":
        from marg.learners.selection import select_features

        if select == "gbd" and max_features is None and feature_cost is None:
            raise InputError(f"{option('select', 'gbd')} needs {option('max_features')} or {option('feature_cost')}")
        if max_features is not None and max_features < 1:
            raise InputError(f"{option('max_features')} must be at least 1, got {max_features}")
        selection = select_features(summary, method=select, max_features=max_features, norm=norm,
                                    feature_cost=feature_cost, time_limit=60.0 if time_limit is None else time_limit,
                                    callback=callback)
        if not selection.selected:
            raise InputError(f"{select} selected no feature (the label looks independent of every feature)")
        if on_selected is not None:
            on_selected(selection)
        est.set_params(features=list(selection.selected))
    if auto:  # the choice is the estimator's (marg.learners.auto); the model is the chosen candidate
        choice = est.fit(summary)
        est, learner = choice.chosen_, choice.chosen_.learner
    else:
        est.fit(summary)
    seconds = time.perf_counter() - t0
    report = {**est.report(), "n": summary.n, "sites": [s["site"] for s in summary.provenance.get("sites", [])],
              "seconds": seconds}
    if auto:
        report.update(choice.choice_report())
    if selection is not None:
        report["features"] = list(selection.selected)
        report["selected"] = list(selection.selected)
        report["selection"] = {"method": select, "status": selection.status, "objective": selection.objective,
                               "lambda": selection.lam,
                               "path": [{"lam": p["lam"], "n_active": p["n_active"], "entered": p["entered"]}
                                        for p in selection.path if select == "group-lasso" and "lam" in p]}
        if select == "gbd":
            report["gap"] = selection.gap
            report["selection"].update(lower_bound=selection.lower_bound, upper_bound=selection.upper_bound)
    info = model_info(summary, {k: v for k, v in report.items() if k != "seconds"})
    model = Model(learner=learner, codebook=summary.codebook, estimator=est, info=info)
    return LearnResult(model, report, selection, seconds)


def model_info(summary: Any, report: dict[str, Any]) -> dict[str, Any]:
    """A model file's provenance record: when, n (and ``n_exact`` for an exact release), the
    sites, the learn report, and each level's released counts with their noise half-width
    (:func:`marg.marginals.level_counts.level_counts`: the card's caveats on noise-set weights)."""
    from marg.learners.model import now_iso
    from marg.marginals.level_counts import level_counts

    info = {"created": now_iso(), "n": summary.n, "sites": summary.provenance.get("sites", []), "report": report}
    if summary.n_exact is not None:
        info["n_exact"] = summary.n_exact
    levels = level_counts(summary)
    if levels is not None:
        info["level_counts"] = levels
    return info


def boost_request(summary: Any, max_order: int = 3, s: float | None = None, kappa: float = 1.5) -> list[Any]:
    """Higher-order tables a ``boost`` vote could use, best bound first (``marg request --learner boost``).

    Fits the vote on ``summary`` and ranks the tables one order above the released ones by
    :func:`marg.learners.boost.request.rank_cliques`; only tables whose bound exceeds eps.
    """
    from marg.learners.boost.request import rank_cliques
    from marg.learners.boost.vote import BoostVote

    return rank_cliques(BoostVote(s=s, max_order=max_order, kappa=kappa), summary)


def trivial_certificate_warning(model: Any, summary: Any) -> str | None:
    """The warning for a certificate no better than guessing uniformly, naming the remedies; None otherwise."""
    est = model.estimator
    cert = est.certificate_
    if not cert.trivial:
        return None
    from marg.learners.auto import patients_line

    line = patients_line((model.info or {}).get("report") or {})
    if line:  # the automatic choice under DP: every candidate trivial, and the patients it would take
        return f"warning: {line}"
    if cert.note:
        return f"warning: {cert.note}"
    remedies = list(getattr(est, "remedies", ()))
    if cert.coverage is not None:
        remedies.append("or lower --coverage, or use --s for an uncalibrated model")
    K = cert.n_classes
    cov = f"{cert.coverage:.0%} coverage" if cert.coverage is not None else "this λ"
    what = {"W(h)": "W(h)", "holdout": "the holdout bound"}.get(cert.kind, "R*")
    return (f"warning: the certificate is trivial ({what} = {cert.value:.4f} ≥ 1 − 1/{K}, what guessing uniformly "
            f"achieves): {summary.n:,.0f} rows are too few for {cov} over this many table entries, so the model "
            f"guarantees no more than a coin; " + ", ".join(remedies))


def load_model(path: str | Path, schema: str | Path | None = None, data: bytes | None = None) -> Any:
    """A model file, checked against the site's codebook when ``schema`` is given.

    ``data``: the file's bytes as already read and verified
    (:func:`marg.protocols.model_signing.read_verified_model`); the path is then not read again.
    """
    from marg.learners.model import Model
    from marg.marginals.codebook import Codebook

    m = Model.load(path) if data is None else Model.from_bytes(data, source=str(path))
    if schema is not None:
        m.check_codebook(Codebook.load(schema))
    return m


def load_verified_model(path: str | Path, schema: str | Path | None, trust: str | Path | None = None,
                        allow_unsigned: bool = False) -> tuple[Any, str | None, str]:
    """A model a site may run: its signature verified against ``trust`` (unsigned refused
    unless ``allow_unsigned``), its codebook equal to the site's ``schema`` (when given).

    The file is read once (:func:`marg.protocols.model_signing.read_verified_model`): the bytes
    verified are the bytes loaded and named.

    Returns
    -------
    (model, the signer's name or None, SHA-256 of the bytes used)
    """
    import hashlib

    from marg.protocols.model_signing import read_verified_model

    data, signer = read_verified_model(path, trust, allow_unsigned)
    return load_model(path, schema, data=data), signer, hashlib.sha256(data).hexdigest()


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
    from marg.marginals.encoding import iter_encoded
    from marg.marginals.io import iter_batches

    if flag_outside and not model.has_uncertainty_set:
        raise InputError(f"{option('flag_outside', True)} needs an mrc or dcc model; this is a {model.learner} model "
                         "(it records no ruled-out cells)")
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
                row = ([idv[r]] if idv is not None else []) + [f"{p:.6g}" for p in proba[r]] + [model.classes[int(pred[r])]]
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


def evaluate_file(model: Any, data: str | Path) -> dict[str, Any]:
    """Accuracy, error, certificate, confusion matrix and rows outside the uncertainty set on labelled ``data``."""
    from marg.learners.model import evaluate
    from marg.marginals.encoding import encode_file

    enc = encode_file(data, model.codebook, with_label=True)
    return evaluate(model, enc.X, enc.y)


@dataclass
class HoldoutResult:
    """What :func:`certify_with_holdout` produced: the model with its new certificate, the pooled
    bound, the per-site and class-wise bounds (:class:`marg.learners.holdout_certificate.Certificates`)."""

    model: Any
    bound: Any
    sites: list[str]
    certificates: Any = None


def certify_with_holdout(model_path: str | Path, bundles: Sequence[str | Path], coverage: float = 0.95,
                         trust: str | Path | None = None, allow_unsigned: bool = False, key: str | Path | None = None,
                         passphrase_file: str | Path | None = None) -> HoldoutResult:
    """Replace a model's certificate by the holdout bound of the sites' evaluation releases.

    Every bundle is verified like a training bundle and must be an evaluation of *this* model
    file (its SHA-256) under its study codebook, one per site, of rows held out of every
    bundle the model learned from at that site (:func:`marg.protocols.evaluation.check_provenance`,
    refused otherwise); the bound is
    :func:`marg.learners.holdout_certificate.holdout_certificates` at ``coverage``: the
    pooled one becomes the model's certificate, per-site bounds (sites whose release asks
    for one) and class-wise bounds (releases with per-class counts) go to ``model.info``.
    """
    from marg.learners.base import Certificate
    from marg.learners.holdout_certificate import holdout_certificates, released_counts
    from marg.learners.model import Model
    from marg.protocols.evaluation import check_provenance, release_codebook
    from marg.protocols.load import load_verified_bundles

    model, digest = Model.read(model_path)  # read once: the digest names the bytes certified
    loaded = load_verified_bundles(list(bundles), trust=trust, allow_unsigned=allow_unsigned, key=key,
                                   passphrase_file=passphrase_file)
    releases, asked, seen = [], [], set()
    for p, b in zip(bundles, loaded):
        ev = b.header.get("evaluation")
        if not isinstance(ev, dict):
            raise InputError(f"{p}: not an evaluation release (export it with marg export DATA --evaluate MODEL)")
        if ev.get("model") != digest:
            raise InputError(f"{p}: evaluates model {str(ev.get('model'))[:16]}…, not {Path(model_path).name} ({digest[:16]}…)")
        content = str(ev.get("content", "confusion"))  # releases before the error-count content were confusion tables
        if b.fingerprint != release_codebook(model.codebook, content).fingerprint:
            raise InputError(f"{p}: its evaluation codebook differs from this model's (another study or label)")
        check_provenance(b.header, b.site, model.info, str(p))
        if b.site in seen:
            raise InputError(f"{p}: a second evaluation release from site {b.site!r}")
        seen.add(b.site)
        tables = b.tables
        if len(tables) != 1:
            raise InputError(f"{p}: an evaluation release holds one table, found {len(tables)}")
        t = tables[0]
        overall, per_class = released_counts(t.counts, t.noise.draws(True), content)
        releases.append((b.site, overall, per_class))
        if ev.get("site_certificate"):
            asked.append(b.site)
    certs = holdout_certificates(releases, list(model.codebook.label.classes), coverage, per_site=asked)
    bound = certs.pooled
    est = model.estimator
    est.certificate_ = Certificate(bound.value, "holdout", coverage, False, len(model.codebook.label.classes))
    sites = [s for s, _, _ in releases]
    privacy = {b.site: b.header.get("privacy") for b in loaded}
    model.info = {**model.info, "holdout_certificate": {**bound.to_dict(), "sites": sites, "privacy": privacy,
                                                        "site_certificates": {s: v.to_dict() for s, v in certs.sites.items()},
                                                        "class_certificates": {c: v.to_dict() for c, v in certs.classes.items()},
                                                        "bundles": [b.digest() for b in loaded]}}
    return HoldoutResult(model, bound, sites, certs)
