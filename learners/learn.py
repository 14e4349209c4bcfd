"""``marg learn`` as a library call: options → a registered estimator → optional feature selection → fit → model.

The learner is found through the registry (:data:`marg.learners.estimator.base.REGISTRY`); which
``marg learn`` option sets which parameter each estimator declares itself
(``learn_options``: an option sets the parameter of the same name), and an option the user
gave that the learner does not take is refused, naming the learners that take it. The
automatic choice is an estimator like the others (:class:`marg.learners.auto.AutoLearner`):
the model holds its ``model_estimator()`` and the report carries its ``choice_report()``.
An estimator given is never fitted itself: :func:`learn` fits a :func:`clone` of it, as
scikit-learn does, and leaves the caller's estimator unfitted and unchanged.
"""

from __future__ import annotations

import copy
import inspect
import time
from dataclasses import dataclass
from typing import Any, Callable, Collection, Mapping, Sequence

from marg.errors import InputError, option

from .estimator.base import MarginalEstimator, estimator_class, registered_learners

SELECTORS = ("none", "group-lasso", "gbd")
"""``--select``: no feature selection, the group-lasso path, or GBD's exact best M."""


def option_takers(opt: str) -> list[str]:
    """The registered learners that take the ``marg learn`` option ``opt`` (sorted; imports every learner)."""
    return sorted(n for n in registered_learners() if opt in estimator_class(n).learn_options)


def make_estimator(learner: str, options: Mapping[str, Any], given: Collection[str] = (),
                   features: Sequence[str] | None = None,
                   callback: Callable[[dict], None] | None = None) -> MarginalEstimator:
    """The registered estimator for ``learner`` with the parameters ``options`` set.

    Parameters
    ----------
    learner : str
        A registered learner name (:func:`marg.learners.estimator.base.registered_learners`).
    options : mapping option -> value
        ``marg learn`` options; those in the estimator's ``learn_options`` set its parameter
        of the same name, the others are ignored unless given.
    given : collection of str
        The options the user set explicitly; one that does not apply to ``learner`` is an
        InputError naming it and the learners it is for (or "unknown" when none takes it).
    features : list of str, optional
        Features to use (e.g. after feature selection).
    callback : callable, optional
        Progress records (learners that report progress take it).
    """
    cls = estimator_class(learner)
    cls.check_given(given)
    params: dict[str, Any] = {}
    for opt, value in options.items():
        if opt in cls.learn_options:
            params[opt] = value
        elif opt in given:
            takers = option_takers(opt)
            if not takers:
                raise InputError(f"unknown learn option {opt!r}")
            raise InputError(f"{option(opt)} does not apply to learner {learner!r} (it is for {', '.join(takers)})")
    if features is not None:
        params["features"] = list(features)
    if callback is not None and "callback" in cls.param_names():
        params["callback"] = callback
    return cls(**params)


def clone(estimator: MarginalEstimator, **params: Any) -> MarginalEstimator:
    """A new, unfitted estimator of ``estimator``'s class with its parameters and ``params`` set (scikit-learn's
    ``clone``).

    The parameters are :meth:`~marg.learners.estimator.base.MarginalEstimator.get_params`' (read from the
    constructor's signature): an estimator among them is cloned in turn, a callable that is not
    saved with a model (``_transient``: the progress callback) is passed as it is, the others are
    deep copies. ``estimator`` is left as it is, fitted or not; ``params`` naming no parameter are
    an InputError (:meth:`~marg.learners.estimator.base.MarginalEstimator.set_params`).
    """
    if not isinstance(estimator, MarginalEstimator):
        raise InputError(f"clone takes an estimator, got {type(estimator).__name__}")
    own = {k: v if k in estimator._transient else _copied(v) for k, v in estimator.get_params().items()}
    return type(estimator)(**own).set_params(**params)


def _copied(value: Any) -> Any:
    """A parameter's value for a clone: estimators cloned, containers copied through, the rest deep-copied."""
    if isinstance(value, MarginalEstimator):
        return clone(value)
    if type(value) in (list, tuple):
        return type(value)(_copied(v) for v in value)
    if type(value) is dict:
        return {k: _copied(v) for k, v in value.items()}
    return copy.deepcopy(value)


def learn_estimator(learner: str, options: Mapping[str, Any], given: Collection[str] = (),
                    callback: Callable[[dict], None] | None = None) -> MarginalEstimator:
    """:func:`make_estimator` with its parameters checked (before any work)."""
    est = make_estimator(learner, options, given, callback=callback)
    est.check_params()
    return est


@dataclass
class LearnResult:
    """What :func:`learn` produced: the model (not yet saved), its report, the selection, the seconds, and the
    estimator fitted (a clone of one given; the automatic choice itself, with its candidates, whose model is its
    chosen candidate)."""

    model: Any
    report: dict[str, Any]
    selection: Any
    seconds: float
    estimator: Any


def learn(
    summary: Any,
    learner: "str | MarginalEstimator" = "auto",
    options: Mapping[str, Any] | None = None,
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

    The one way a summary becomes a model: ``marg learn``, ``marg.learn`` and the scripts all
    come here, and a learner named gives the same model as the same estimator given
    (``learn(s, "auto")`` and ``learn(s, AutoLearner())`` write the same file).

    Parameters
    ----------
    summary : marginals.summary.Summary
    learner : str or MarginalEstimator
        A registered learner name, with ``options`` and ``given`` (see :func:`make_estimator`;
        ``"auto"`` picks the learner, :class:`marg.learners.auto.AutoLearner`); or an estimator,
        whose :func:`clone` is fitted (``options`` must then be empty: its parameters are its own;
        the estimator given is left unfitted and unchanged).
        The model is the estimator's ``model_estimator()`` — for the automatic choice the chosen
        candidate, its report carrying the candidates table.
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
    t0 = time.perf_counter()
    if select not in SELECTORS:
        raise InputError(f"unknown feature selection {option('select', select)} (expected none, group-lasso or gbd)")
    est, _given = _estimator(learner, options or {}, given, callback)
    selection = None
    if select != "none":
        from .selection.select import select_features

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
    est.fit(summary)  # on a study's summary the estimator's own certificate covers the selection (summary.selection)
    fitted = est.model_estimator()  # the automatic choice's model is its chosen candidate
    if summary.selection is not None:  # select-then-measure: the larger class unless a rule is above the noise
        from .study.two_round import finish

        # the prior certifies itself at the coverage asked (the choice's own, not its candidate's 1 − α/m: the
        # selection-wide events hold whichever candidate was chosen, so the choice's Bonferroni does not enter them)
        cov = getattr(est, "coverage", None) or getattr(fitted, "coverage", None) or 0.95
        study: dict[str, Any] = {}
        fitted, note = finish(fitted, summary, float(cov), getattr(est, "candidates_", None),  # the choice's rows
                              record=study)
        study_report = {"study_model": note, **study}
    seconds = time.perf_counter() - t0
    report = {**fitted.report(), "n": summary.n, "sites": [s["site"] for s in summary.provenance.get("sites", [])],
              "seconds": seconds}
    report.update(est.choice_report())
    if summary.selection is not None:
        report["study"] = study_report
    if selection is not None:
        report.update(selection.learn_report())
    return LearnResult(as_model(fitted, summary, report), report, selection, seconds, est)


def as_model(fitted: MarginalEstimator, summary: Any, report: Mapping[str, Any]) -> Any:
    """The one place a fitted estimator becomes a :class:`~marg.learners.estimator.model.Model`: the
    codebook of ``summary``, the estimator, and the provenance (:func:`marg.learners.estimator.model.model_info`)
    with ``report`` (its time of fitting left out: a model file depends on what was learned)."""
    from .estimator.model import Model, model_info

    info = model_info(summary, {k: v for k, v in report.items() if k != "seconds"})
    return Model(learner=fitted.learner, codebook=summary.codebook, estimator=fitted, info=info)


def _estimator(learner: Any, options: Mapping[str, Any], given: Collection[str],
               callback: Callable[[dict], None] | None) -> tuple[MarginalEstimator, Collection[str]]:
    """The estimator to fit and the parameters the user set: a name's options (:func:`learn_estimator`),
    or a :func:`clone` of an estimator given (the parameters set: those that differ from its defaults)."""
    if isinstance(learner, MarginalEstimator):
        if options:
            raise InputError(f"{option(sorted(options)[0])}: give an estimator's parameters to its constructor")
        learner.check_params()
        defaults = {p.name: p.default for p in inspect.signature(type(learner).__init__).parameters.values()}
        return clone(learner), {k for k, v in learner.get_params().items() if not _is_default(v, defaults.get(k))}
    if not isinstance(learner, str):
        raise InputError(f"learner must be a learner name or an estimator, got {type(learner).__name__}")
    return learn_estimator(learner, options, given, callback=callback), given


def _is_default(value: Any, default: Any) -> bool:
    """Whether a parameter holds its default (an array never counts as one)."""
    try:
        return value is default or bool(value == default)
    except (TypeError, ValueError):
        return False


def trivial_certificate_warning(model: Any, n: float) -> str | None:
    """The warning for a model whose certificate is no better than guessing uniformly, naming the
    remedies (:meth:`MarginalEstimator.trivial_warning`; the automatic choice under DP: the
    patients a candidate would need); None otherwise. ``n``: the rows the tables summarise."""
    from .certification.sample_size import patients_line

    from .auto import choice_warning

    if not model.estimator.certificate_.trivial:
        return None
    report = (model.info or {}).get("report") or {}
    line = patients_line(report)
    if line:  # the automatic choice under DP: every candidate trivial, and the patients it would take
        return (f"warning: {line}; or hold patients out at export (marg export --holdout auto) for a measured "
                "certificate")
    return choice_warning(report) or model.estimator.trivial_warning(n)


__all__ = ["LearnResult", "SELECTORS", "as_model", "clone", "learn", "learn_estimator", "make_estimator",
           "option_takers",
           "trivial_certificate_warning"]
