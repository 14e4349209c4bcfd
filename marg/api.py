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

from marg.errors import InputError

LEARN_OPTIONS: dict[str, dict[str, str]] = {
    "s": {"mrc": "s", "dcc": "s", "nb": "s"},
    "coverage": {"mrc": "coverage", "dcc": "coverage", "renyi": "coverage", "nb": "coverage"},
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
                raise InputError(f"--{opt.replace('_', '-')} does not apply to --learner {learner} (it is for {takers})")
            continue
        params[target] = value
    names = set(cls.param_names())
    if features is not None:
        params["features"] = list(features)
    if callback is not None and "callback" in names:
        params["callback"] = callback
    return cls(**params)


AUTO_CANDIDATES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("mrc", {}),
    ("dcc", {"edge_weight": "label"}),
    ("dcc", {"edge_weight": "cmi"}),
    ("nb", {}),
    ("renyi", {}),
)
"""What ``--learner auto`` tries: (learner, its parameters) — all certified at the same coverage."""


@dataclass
class Candidate:
    """One learner tried by the automatic choice, with its certificate (None: could not be fitted)."""

    learner: str
    params: dict[str, Any]
    certificate: float | None
    kind: str
    note: str = ""


def choose_learner(summary: Any, coverage: float = 0.95, features: Sequence[str] | None = None,
                   callback: Callable[[dict], None] | None = None) -> tuple[Any, list[Candidate]]:
    """Fit every candidate of :data:`AUTO_CANDIDATES` on ``summary`` and keep the smallest certificate.

    Every candidate's certificate is a valid bound on the worst-case error of its own rule
    at the same coverage: R* for mrc/dcc (their randomized rule), W(h) for the additive rules
    (naive Bayes, Rényi: :func:`marg.learners.certify.certify`, over first-order and forest
    pairs). Candidates whose tables are missing (e.g. no pair tables) are skipped and say why.

    Returns
    -------
    (fitted estimator of the choice, the candidates in the order tried)
    """
    from marg.errors import InputError as _InputError
    from marg.learners.base import estimator_class
    from marg.learners.certify import certify

    best, table = None, []
    for learner, params in AUTO_CANDIDATES:
        cls = estimator_class(learner)
        kw = dict(params)
        if "coverage" in cls.param_names():
            kw["coverage"] = coverage
        if features is not None:
            kw["features"] = list(features)
        est = cls(**kw)
        try:
            est.fit(summary)
            if est.certificate_.kind in ("2gamma",):  # not a bound on test error: certify the rule itself
                est.certificate_ = certify(est, summary, coverage=coverage)
        except _InputError as exc:
            table.append(Candidate(learner, params, None, "", str(exc)))
            continue
        cert = est.certificate_
        table.append(Candidate(learner, params, float(cert.value), cert.kind))
        if callback is not None:
            callback({"stage": "auto", "learner": learner, "params": params, "certificate": float(cert.value)})
        if best is None or cert.value < best.certificate_.value - 1e-12:
            best = est
    if best is None:
        raise _InputError("no learner could be fitted on these summaries: " + "; ".join(f"{c.learner}: {c.note}" for c in table))
    return best, table


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
    time_limit: float = 60.0,
    callback: Callable[[dict], None] | None = None,
    on_selected: Callable[[Any], None] | None = None,
) -> LearnResult:
    """Select features (optionally), fit the learner on ``summary`` and wrap it as a model.

    Parameters
    ----------
    summary : marginals.summary.Summary
    learner, options, given : see :func:`make_estimator`; ``learner="auto"`` picks the learner of
        the smallest certificate (:func:`choose_learner`; only ``coverage`` may be given).
    select : {"none", "group-lasso", "gbd"}
    max_features, feature_cost, norm, time_limit : feature selection (see
        :func:`marg.learners.selection.select_features`).
    callback : progress records of the selection and the fit.
    on_selected : called with the selection result before the fit (to report it).

    Returns
    -------
    LearnResult
        ``report`` holds the keys of the ``marg learn --json`` contract.
    """
    from marg.learners.model import Model, now_iso

    t0 = time.perf_counter()
    if select not in ("none", "group-lasso", "gbd"):
        raise InputError(f"unknown --select {select!r} (expected none, group-lasso or gbd)")
    auto = learner == "auto"
    if auto:
        extra = sorted(set(given) - {"coverage"})
        if extra:
            raise InputError(f"--{extra[0].replace('_', '-')} needs a chosen --learner (auto tries each learner's defaults)")
        est = None
    else:
        est = make_estimator(learner, options, given, callback=callback)
        est.check_params()  # before any work
    selection = None
    if select != "none":
        from marg.learners.selection import select_features

        if select == "gbd" and max_features is None and feature_cost is None:
            raise InputError("--select gbd needs --max-features M or --feature-cost C")
        if max_features is not None and max_features < 1:
            raise InputError(f"--max-features must be at least 1, got {max_features}")
        selection = select_features(summary, method=select, max_features=max_features, norm=norm,
                                    feature_cost=feature_cost, time_limit=time_limit, callback=callback)
        if not selection.selected:
            raise InputError(f"{select} selected no feature (the label looks independent of every feature)")
        if on_selected is not None:
            on_selected(selection)
        if est is not None:
            est.set_params(features=list(selection.selected))
    table = None
    if auto:
        est, table = choose_learner(summary, coverage=float(options.get("coverage", 0.95)),
                                    features=None if selection is None else selection.selected, callback=callback)
        learner = est.learner
    else:
        est.fit(summary)
    seconds = time.perf_counter() - t0
    report = {**est.report(), "n": summary.n, "sites": [s["site"] for s in summary.provenance.get("sites", [])],
              "seconds": seconds}
    if table is not None:
        report["auto"] = [{"learner": c.learner, "params": c.params, "certificate": c.certificate, "kind": c.kind,
                           "note": c.note} for c in table]
    if selection is not None:
        report["features"] = list(selection.selected)
        report["selected"] = list(selection.selected)
        report["selection"] = {"method": select, "status": selection.status, "objective": selection.objective,
                               "lambda": selection.lam}
        if select == "gbd":
            report["gap"] = selection.gap
            report["selection"].update(lower_bound=selection.lower_bound, upper_bound=selection.upper_bound)
    info = {"created": now_iso(), "n": summary.n, "sites": summary.provenance.get("sites", []),
            "report": {k: v for k, v in report.items() if k != "seconds"}}
    model = Model(learner=learner, codebook=summary.codebook, estimator=est, info=info)
    return LearnResult(model, report, selection, seconds)


def trivial_certificate_warning(model: Any, summary: Any) -> str | None:
    """The warning for a certificate no better than guessing uniformly, naming the remedies; None otherwise."""
    est = model.estimator
    cert = est.certificate_
    if not cert.trivial:
        return None
    remedies = list(getattr(est, "remedies", ()))
    if cert.coverage is not None:
        remedies.append("or lower --coverage, or use --s for an uncalibrated model")
    K = cert.n_classes
    cov = f"{cert.coverage:.0%} coverage" if cert.coverage is not None else "this λ"
    return (f"warning: the certificate is trivial (R* = {cert.value:.4f} = 1 − 1/{K}, what guessing uniformly "
            f"achieves): {summary.n:,.0f} rows are too few for {cov} over this many table entries, so the model "
            f"guarantees no more than a coin; " + ", ".join(remedies))


def save_model(model: Any, path: str | Path, sign_key: str | Path | None = None,
               passphrase_file: str | Path | None = None, round_id: str | None = None) -> dict[str, Any]:
    """Write a fitted model, bound to its bundles (and round) and signed with the learner's key.

    Parameters
    ----------
    sign_key : path to ``LEARNER.sign.key``, optional
        Signs the model; the signer's name is the file name before ``.sign.key``. Without
        it the model is written unsigned (sites need ``--allow-unsigned`` to use it).

    Returns
    -------
    dict
        What was written (its ``signature`` is None when unsigned).
    """
    from marg.protocols.keys import SIGN_KEY_SUFFIX, load_signing_key, read_passphrase_file
    from marg.protocols.model_signing import model_file_dict, write_model_dict

    key = signer = None
    if sign_key is not None:
        p = Path(sign_key)
        if not p.name.endswith(SIGN_KEY_SUFFIX):
            raise InputError(f"--sign-key must be the learner's NAME{SIGN_KEY_SUFFIX} file, got {p.name!r}")
        key = load_signing_key(p, read_passphrase_file(passphrase_file) if passphrase_file else None)
        signer = p.name[: -len(SIGN_KEY_SUFFIX)]
    d = model_file_dict(model.to_dict(), key, signer, round_id)
    write_model_dict(d, path)
    return d


def load_model(path: str | Path, schema: str | Path | None = None, trust: str | Path | None = None,
               allow_unsigned: bool = False) -> Any:
    """A site's way to read a model: verify its signature, check its codebook, load it.

    Parameters
    ----------
    path : model file
    schema : the site's codebook; required unless ``allow_unsigned``; a model fitted under
        another codebook is refused.
    trust : folder of ``LEARNER.sign.pub`` (the learners this site trusts)
    allow_unsigned : accept an unsigned model and skip the codebook requirement (experiments)

    Returns
    -------
    (Model, ModelOrigin)
        The model and who signed it from which bundles (:class:`marg.protocols.model_signing.ModelOrigin`).
    """
    from marg.learners.model import Model
    from marg.marginals.codebook import Codebook
    from marg.protocols.model_signing import read_model_dict, verify_model_dict

    name = str(path)
    d = read_model_dict(path)
    origin = verify_model_dict(d, trust, allow_unsigned=allow_unsigned, name=name)
    if schema is None and not allow_unsigned:
        raise InputError(f"{name}: give this site's codebook (--schema) so the model is checked against it")
    m = Model.from_dict(d, source=name)
    if schema is not None:
        m.check_codebook(Codebook.load(schema))
    return m, origin


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
        raise InputError(f"--flag-outside needs an mrc or dcc model; this is a {model.learner} model "
                         "(it records no ruled-out cells)")
    n = n_out = 0
    with atomic_text_writer(out) as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(([id_column] if id_column else []) + [f"p_{c}" for c in model.classes] + ["predicted"]
                   + (["outside"] if flag_outside else []))
        ids = iter_batches(data, [id_column]) if id_column else None
        for enc in iter_encoded(data, model.codebook, with_label=False):
            proba = model.predict_proba(enc.X)
            pred = model.predict(enc.X)
            outside = model.outside(enc.X) if flag_outside else None
            idv = next(ids)[id_column].to_pylist() if ids is not None else None
            for r in range(enc.n):
                row = ([idv[r]] if idv is not None else []) + [f"{p:.6g}" for p in proba[r]] + [model.classes[int(pred[r])]]
                if outside is not None:
                    row.append(int(outside[r]))
                w.writerow(row)
            n += enc.n
            n_out += int(outside.sum()) if outside is not None else 0
    return n, n_out


def evaluate_file(model: Any, data: str | Path) -> dict[str, Any]:
    """Accuracy, error, certificate, confusion matrix and rows outside the uncertainty set on labelled ``data``."""
    from marg.learners.model import evaluate
    from marg.marginals.encoding import encode_file

    enc = encode_file(data, model.codebook, with_label=True)
    return evaluate(model, enc.X, enc.y)
