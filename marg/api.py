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
    "s": {"mrc": "s", "dcc": "s", "nb": "s", "boost": "s"},
    "coverage": {"mrc": "coverage", "dcc": "coverage", "renyi": "coverage", "nb": "coverage", "boost": "coverage"},
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
    ("nb", {"certify": "bound"}),  # the one-LP bound: the exact W(h) takes minutes on thousands of features
    ("renyi", {}),
)
"""What ``--learner auto`` tries: (learner, its parameters) — all certified at the same coverage."""
AUTO_NB_MAX_FEATURES = 2000  # beyond this, naive Bayes' certificate LP costs minutes per fit: auto skips it


LOSO_CANDIDATES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("mrc", {}),
    ("nb", {}),
    ("renyi", {}),
)
FOLD_PARAMS: dict[str, dict[str, Any]] = {"nb": {"certify": "bound"}}
"""Parameters of the leave-one-site-out folds only (their certificates are not used)."""
"""What leave-one-site-out model choice compares: the binary additive rules (their error bound
is a function of first-order and pairwise statistics; :mod:`marg.learners.cross_site`)."""


@dataclass
class Candidate:
    """One learner tried by the automatic choice: its certificate (None: not fitted on the
    whole summary) and, under leave-one-site-out choice, its score (mean fold bound)."""

    learner: str
    params: dict[str, Any]
    certificate: float | None
    kind: str
    note: str = ""
    score: float | None = None


def _make(learner: str, params: Mapping[str, Any], coverage: float, features: Sequence[str] | None) -> Any:
    from marg.learners.base import estimator_class

    cls = estimator_class(learner)
    kw = dict(params)
    if "coverage" in cls.param_names():
        kw["coverage"] = coverage
    if features is not None:
        kw["features"] = list(features)
    return cls(**kw)


def _certified(est: Any, summary: Any, coverage: float) -> Any:
    """A fitted estimator whose certificate bounds the error of the rule it predicts with."""
    from marg.learners.certify import certify

    if est.certificate_.kind in ("2gamma",):  # bounds the training sample only: certify the rule itself
        est.certificate_ = certify(est, summary, coverage=coverage)
    return est


def loso_reason(summary: Any, features: Sequence[str] | None = None) -> str | None:
    """Why leave-one-site-out choice does not apply to ``summary`` (None: it applies)."""
    from marg.learners.cross_site import MAX_SITES, MIN_SITES

    k = len(summary.site_parts)
    if not MIN_SITES <= k <= MAX_SITES:
        return f"leave-one-site-out needs {MIN_SITES}-{MAX_SITES} sites' own tables, have {k}"
    if summary.n_classes != 2:
        return f"leave-one-site-out scores binary rules; the label has {summary.n_classes} classes"
    if features is not None:
        return "features were selected: leave-one-site-out scores rules over every feature"
    cb = summary.codebook
    if cb.numeric_names:
        return "raw numeric features: their rules are not sums of one-hot scores"
    disc = cb.discrete_names
    for a_i, a in enumerate(disc):
        for b in disc[a_i + 1:]:
            if not summary.has_clique((a, b)):
                if summary.pairs:  # round 2 of the two-round protocol: the requested features' pairs
                    return (f"pair tables of some features only (none of {a!r} and {b!r}): leave-one-site-out "
                            "scores rules over every feature")
                return f"no pair table of {a!r} and {b!r} (export with --stats all)"
    return None


def choose_learner(summary: Any, coverage: float = 0.95, features: Sequence[str] | None = None,
                   callback: Callable[[dict], None] | None = None) -> tuple[Any, list[Candidate], str]:
    """Pick the learner for ``summary`` without test data, and say why.

    With 2–20 sites' own tables, a binary label and every pair table
    (:func:`loso_reason`): **leave-one-site-out** — each candidate of
    :data:`LOSO_CANDIDATES` is fitted on all sites but one and scored by the error bound of
    its rule on the left-out site's tables (:func:`marg.learners.cross_site.loso_scores`);
    the smallest mean score wins and is refitted on every site. Otherwise every candidate of
    :data:`AUTO_CANDIDATES` is fitted and the **smallest certificate** wins: R* for mrc/dcc
    (their randomized rule), W(h) for the additive rules (naive Bayes, Rényi:
    :func:`marg.learners.certify.certify`). Candidates whose tables are missing are skipped
    and say why. The chosen model's certificate is a valid bound on its own rule's
    worst-case error either way.

    Returns
    -------
    (fitted estimator of the choice, the candidates in the order tried, the rule used in words)
    """
    reason = loso_reason(summary, features)
    if reason is None:
        return _choose_by_sites(summary, coverage, callback)
    best, table = _choose_by_certificate(summary, coverage, features, callback)
    return best, table, f"smallest certificate ({reason})"


def _choose_by_sites(summary: Any, coverage: float, callback: Callable[[dict], None] | None):
    from marg.learners.certify import linear_rule
    from marg.learners.cross_site import FoldScore, loso_scores
    from marg.marginals.summary import Summary, sum_tables

    cb = summary.codebook
    fits = [(f"{name}{params or ''}",
             lambda s, n=name, p=params: _make(n, {**p, **FOLD_PARAMS.get(n, {})}, coverage, None).fit(s))
            for name, params in LOSO_CANDIDATES]
    scores = loso_scores(fits, cb, summary.site_parts, make_summary=lambda ts: Summary(cb, list(ts)),
                         combine=lambda parts: sum_tables(parts)[0], rule_of=linear_rule)
    table: list[Candidate] = []
    best_k, best_score = None, float("inf")
    for k, (name, params) in enumerate(LOSO_CANDIDATES):
        sc = scores[fits[k][0]]
        if isinstance(sc, FoldScore):
            table.append(Candidate(name, dict(params), None, "", "", sc.score))
            if callback is not None:
                callback({"stage": "auto", "learner": name, "params": params, "score": sc.score, "folds": sc.folds})
            if sc.score < best_score - 1e-12:
                best_k, best_score = k, sc.score
        else:
            table.append(Candidate(name, dict(params), None, "", sc))
    if best_k is None:
        best, rest = _choose_by_certificate(summary, coverage, None, callback)
        return best, table + rest, "smallest certificate (no candidate could be scored leave-one-site-out)"
    name, params = LOSO_CANDIDATES[best_k]
    est = _certified(_make(name, params, coverage, None).fit(summary), summary, coverage)
    table[best_k].certificate, table[best_k].kind = float(est.certificate_.value), est.certificate_.kind
    return est, table, (f"leave-one-site-out over {len(summary.site_parts)} sites: the smallest mean error "
                        f"bound ({best_score:.4f}) on the left-out sites' tables")


def _choose_by_certificate(summary: Any, coverage: float, features: Sequence[str] | None,
                           callback: Callable[[dict], None] | None) -> tuple[Any, list[Candidate]]:
    best, table = None, []
    lab = summary.codebook.label.name
    has_pairs = any(t.kind == "counts" and len([a for a in t.clique if a != lab]) >= 2 for t in summary.tables)
    n_feats = len(features) if features is not None else len(summary.codebook.features)
    for learner, params in AUTO_CANDIDATES:
        if learner == "dcc" and not has_pairs:
            table.append(Candidate(learner, params, None, "", "no pair tables released (it would be the MRC)"))
            continue
        if learner == "nb" and n_feats > AUTO_NB_MAX_FEATURES:
            table.append(Candidate(learner, params, None, "", f"{n_feats:,} features: its certificate's LP takes minutes "
                                                             "(fit --learner nb to compute it)"))
            continue
        est = _make(learner, params, coverage, features)
        try:
            _certified(est.fit(summary), summary, coverage)
        except InputError as exc:
            table.append(Candidate(learner, params, None, "", str(exc)))
            continue
        cert = est.certificate_
        table.append(Candidate(learner, params, float(cert.value), cert.kind))
        if callback is not None:
            callback({"stage": "auto", "learner": learner, "params": params, "certificate": float(cert.value)})
        if best is None or cert.value < best.certificate_.value - 1e-12:
            best = est
    if best is None:
        raise InputError("no learner could be fitted on these summaries: " + "; ".join(f"{c.learner}: {c.note}" for c in table))
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
    learner, options, given : see :func:`make_estimator`; ``learner="auto"`` picks the learner
        (:func:`choose_learner`; only ``coverage`` may be given).
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
        est, table, why = choose_learner(summary, coverage=float(options.get("coverage", 0.95)),
                                         features=None if selection is None else selection.selected, callback=callback)
        learner = est.learner
    else:
        _certified(est.fit(summary), summary, float(getattr(est, "coverage", 0.95) or 0.95))
    seconds = time.perf_counter() - t0
    report = {**est.report(), "n": summary.n, "sites": [s["site"] for s in summary.provenance.get("sites", [])],
              "seconds": seconds}
    if table is not None:
        report["auto"] = [{"learner": c.learner, "params": c.params, "certificate": c.certificate, "kind": c.kind,
                           "score": c.score, "note": c.note} for c in table]
        report["auto_rule"] = why
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
    info = {"created": now_iso(), "n": summary.n, "sites": summary.provenance.get("sites", []),
            "report": {k: v for k, v in report.items() if k != "seconds"}}
    model = Model(learner=learner, codebook=summary.codebook, estimator=est, info=info)
    return LearnResult(model, report, selection, seconds)


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
    """What :func:`certify_with_holdout` produced: the model with its new certificate and the bound's parts."""

    model: Any
    bound: Any
    sites: list[str]


def certify_with_holdout(model_path: str | Path, bundles: Sequence[str | Path], coverage: float = 0.95,
                         trust: str | Path | None = None, allow_unsigned: bool = False, key: str | Path | None = None,
                         passphrase_file: str | Path | None = None) -> HoldoutResult:
    """Replace a model's certificate by the holdout bound of the sites' evaluation releases.

    Every bundle is verified like a training bundle and must be an evaluation of *this* model
    file (its SHA-256) under its study codebook, one per site; the bound is
    :func:`marg.learners.holdout_certificate.holdout_bound` at ``coverage``.
    """
    from marg.learners.base import Certificate
    from marg.learners.holdout_certificate import holdout_bound
    from marg.learners.model import Model
    from marg.protocols.aggregate import summary_from_bundles
    from marg.protocols.evaluation import PREDICTED, evaluation_codebook, model_digest
    from marg.protocols.load import load_verified_bundles

    model = Model.load(model_path)
    digest = model_digest(model_path)
    loaded = load_verified_bundles(list(bundles), trust=trust, allow_unsigned=allow_unsigned, key=key,
                                   passphrase_file=passphrase_file)
    ecb = evaluation_codebook(model.codebook)
    for p, b in zip(bundles, loaded):
        ev = b.header.get("evaluation")
        if not isinstance(ev, dict):
            raise InputError(f"{p}: not an evaluation release (export it with marg export DATA --evaluate MODEL)")
        if ev.get("model") != digest:
            raise InputError(f"{p}: evaluates model {str(ev.get('model'))[:16]}…, not {Path(model_path).name} ({digest[:16]}…)")
        if b.fingerprint != ecb.fingerprint:
            raise InputError(f"{p}: its evaluation codebook differs from this model's (another study or label)")
    summary = summary_from_bundles(loaded, [str(p) for p in bundles])
    bound = holdout_bound(summary, PREDICTED, coverage)
    est = model.estimator
    est.certificate_ = Certificate(bound.value, "holdout", coverage, False, len(model.codebook.label.classes))
    sites = [s["site"] for s in summary.provenance.get("sites", [])]
    model.info = {**model.info, "holdout_certificate": {**bound.to_dict(), "sites": sites,
                                                        "bundles": [b.digest() for b in loaded]}}
    return HoldoutResult(model, bound, sites)
