"""The estimator base every marg learner shares: parameters, fitted state, certificate, report, persistence.

Conventions follow scikit-learn's, with a Summary in place of rows:

- ``__init__`` only stores its arguments; :meth:`MarginalEstimator.get_params` reads their
  names from the signature and :meth:`MarginalEstimator.set_params` sets them;
- ``fit(summary)`` validates the parameters, sets fitted state in attributes with a
  trailing underscore (among them ``certificate_``, a :class:`Certificate`, and
  ``feature_names_in_``) and returns ``self``; using an estimator before ``fit`` raises
  :class:`marg.errors.NotFittedError`; code outside an estimator gives it a certificate proved
  elsewhere (a holdout bound, a chooser's) only through :meth:`MarginalEstimator.set_certificate`;
- :meth:`MarginalEstimator.report` gives the keys of ``marg learn --json``;
- persistence is written once: ``to_dict`` stores ``{"learner", "params", "state"}`` (the
  parameters once, from ``get_params``; the state from the learner's ``_state``) and
  ``from_dict`` rebuilds ``cls(**params)`` and loads the state — model files of the previous
  release (parameters inside the state) are read too;
- :data:`REGISTRY` maps learner names to classes (filled lazily, so that importing this
  module stays cheap).
"""

from __future__ import annotations

import inspect
from importlib import import_module
from typing import Any, ClassVar, Collection, Sequence

import numpy as np

from marg.errors import InputError, NotFittedError

from ..core.certificate import Certificate, CertificateKind, certificate_from as _certificate_from
from ..core.params import Check, Constraint, validate_params

__all__ = ["Certificate", "CertificateKind", "MarginalEstimator"]  # Certificate lives in certificate.py; re-exported

_PARAM_NAMES: dict[Any, tuple[str, ...]] = {}
"""Each constructor's parameter names (:meth:`MarginalEstimator.param_names`), keyed by the function itself."""


class MarginalEstimator:
    """Base of every learner fitted from a Summary (see the module docstring)."""

    learner: ClassVar[str] = ""
    display_name: ClassVar[str] = ""
    """The learner's name in messages, with its article (e.g. "an MRC")."""
    _transient: ClassVar[tuple[str, ...]] = ("callback",)
    """Parameters that are not saved with a model (callables)."""
    learn_options: ClassVar[tuple[str, ...]] = ()
    """The ``marg learn`` options that set this learner's parameter of the same name
    (:func:`marg.learners.learn.make_estimator`); the others given by the user are refused."""
    _parameter_constraints: ClassVar[dict[str, Constraint]] = {}
    """Parameter name → what it may hold (:mod:`marg.learners.core.params`), declared once per learner;
    :meth:`check_params` validates them."""
    remedies: ClassVar[tuple[str, ...]] = ()
    """What the user can do about a trivial certificate, in CLI words (:meth:`trivial_warning`)."""

    # ------------------------------------------------------------ parameters
    @classmethod
    def param_names(cls) -> list[str]:
        """The constructor's parameter names (scikit-learn's recipe: read from the signature, once per
        constructor: ``get_params`` asks at every fit, clone and check)."""
        init = cls.__init__
        names = _PARAM_NAMES.get(init)
        if names is None:
            sig = inspect.signature(init)
            names = _PARAM_NAMES[init] = tuple(p.name for p in sig.parameters.values()
                                               if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD))
        return list(names)

    def get_params(self) -> dict[str, Any]:
        """The hyper-parameters as given to ``__init__`` (or :meth:`set_params`)."""
        return {name: getattr(self, name) for name in self.param_names()}

    def set_params(self, **params: Any) -> "MarginalEstimator":
        """Set hyper-parameters by name; an unknown name is an InputError naming it."""
        valid = set(self.param_names())
        for name, value in params.items():
            if name not in valid:
                raise InputError(f"{type(self).__name__} has no parameter {name!r} (it has {', '.join(sorted(valid))})")
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        defaults = {p.name: p.default for p in inspect.signature(type(self).__init__).parameters.values()}
        shown = [f"{k}={v!r}" for k, v in self.get_params().items() if not _same(v, defaults.get(k))]
        head = f"{type(self).__name__}({', '.join(shown)})"
        cert = getattr(self, "certificate_", None)
        if cert is None:
            return head + "  # not fitted"
        cov = f" at {cert.coverage:.0%} coverage" if cert.coverage is not None else ""
        n_feat = len(getattr(self, "feature_names_in_", None) or [])
        return f"{head}  # fitted on {n_feat} features: certificate {cert.kind} ≤ {cert.value:.4f}{cov}"

    @classmethod
    def check_given(cls, given: Collection[str]) -> None:
        """Refuse, before any work, options the user gave that this learner cannot take as a
        whole (one-line InputError); the options it does not take one by one are refused by
        :func:`marg.learners.learn.make_estimator`, which names the learners that do."""

    # --------------------------------------------------------------- fitting
    def check_params(self) -> None:
        """Validate the hyper-parameters against :attr:`_parameter_constraints` (one-line InputError
        naming the bad one and its value); ``fit`` calls it first. A learner overrides it only to
        add rules that tie parameters together."""
        validate_params(self._parameter_constraints, self.get_params())

    def fit(self, summary: Any) -> "MarginalEstimator":  # pragma: no cover - abstract
        raise NotImplementedError

    def fit_predictor(self, summary: Any) -> "MarginalEstimator":
        """Fit for :meth:`predict` only: the same rule as :meth:`fit`, its certificate left out where that is work
        beyond the rule (a learner overrides this; by default it is :meth:`fit`). For models that are asked only
        for labels — the automatic choice's leave-one-site-out folds; ``certificate_`` is then only the bound the
        fit had on the way (a minimax learner's R*, Rényi's 2γ), never reported."""
        return self.fit(summary)

    def _check_fitted(self) -> None:
        if not hasattr(self, "certificate_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet: call fit(summary) first")

    @property
    def worst_case_error_(self) -> float:
        """The certificate's value (the CLI contract's ``worst_case_error``)."""
        self._check_fitted()
        return float(self.certificate_.value)

    def score(self, X: Any, y: Any) -> float:
        """Accuracy of the deterministic rule on integer codes: the fraction of rows with ``predict(X) == y``.

        ``X`` (n, d) holds codes of every codebook feature, ``y`` (n,) class codes. Rows of
        values (a data frame, an Arrow table, a file) go through a model, which holds the
        codebook: :meth:`marg.learners.estimator.model.Model.score`.
        """
        self._check_fitted()
        y = np.asarray(y)
        pred = np.asarray(self.predict(X))
        if y.shape != pred.shape:
            raise InputError(f"{len(pred)} rows but labels of shape {y.shape}")
        if len(y) == 0:
            raise InputError("no rows to score")
        return float(np.mean(pred == y))

    # ---------------------------------------------------------------- report
    def report(self) -> dict[str, Any]:
        """The machine-readable result of ``marg learn`` (the CLI contract's keys for this learner)."""
        self._check_fitted()
        return {
            "learner": self.learner,
            "n": float(self.n_),
            "features": list(self.feature_names_in_),
            "worst_case_error": float(self.certificate_.value),
            "certificate": {"kind": self.certificate_.kind, "coverage": self.certificate_.coverage,
                            "approximate": self.certificate_.approximate, "trivial": self.certificate_.trivial,
                            **({"note": self.certificate_.note} if self.certificate_.note else {})},
            **self._report(),
        }

    def _report(self) -> dict[str, Any]:
        return {}

    def model_estimator(self) -> "MarginalEstimator":
        """The fitted estimator a model file holds: this one (the automatic choice: its chosen candidate)."""
        return self

    def choice_report(self) -> dict[str, Any]:
        """Keys the learn report adds after the model estimator's own (the automatic choice's
        candidates table); {} for a learner that chose nothing."""
        return {}

    def trivial_warning(self, n: float) -> str | None:
        """The warning for a certificate no better than guessing uniformly, naming :attr:`remedies`
        (``n``: the rows the tables summarise); None for a non-trivial certificate."""
        cert = self.certificate_
        if not cert.trivial:
            return None
        if cert.note:
            return f"warning: {cert.note}"
        remedies = list(self.remedies)
        if cert.coverage is not None:
            remedies.append("or lower --coverage, or use --s for an uncalibrated model")
        if cert.kind != "holdout":  # a bound measured on patients the model never saw needs no box over the tables
            remedies.append("or hold patients out at export (marg export --holdout) for a certificate measured on them")
        K = cert.n_classes
        cov = f"{cert.coverage:.0%} coverage" if cert.coverage is not None else "this λ"
        what = {"W(h)": "W(h)", "holdout": "the holdout bound"}.get(cert.kind, "R*")
        return (f"warning: the certificate is trivial ({what} = {cert.value:.4f} ≥ 1 − 1/{K}, what guessing uniformly "
                f"achieves): {n:,.0f} rows are too few for {cov} over this many table entries, so the model "
                f"guarantees no more than a coin; " + ", ".join(remedies))

    # ------------------------------------------- what the card, certify and the CLI ask
    def linear_rule(self) -> Any:
        """The deterministic rule as a :class:`marg.learners.minimax.fixed_rule.LinearRule` (scores
        additive in one-hot features), which :func:`marg.learners.certification.certify.certify` bounds; a learner
        whose rule is not additive raises a one-line InputError (its certificate is its own)."""
        raise InputError(f"a {self.learner} model with pairwise features is not an additive rule; its certificate is "
                         "its own R*")

    def score_weights(self) -> tuple[Any, np.ndarray] | None:
        """(feature map, W (K, D)): the per-class column weights the deterministic rule adds up,
        what the card charts; None for a rule without them. Default: :meth:`linear_rule`'s."""
        try:
            rule = self.linear_rule()
        except InputError:
            return None
        return rule.fmap, np.asarray(rule.weights, dtype=float)

    def impossible_cells(self) -> np.ndarray | None:
        """Bool (K, D): the (class, column) cells the exact counts rule out, left out of the card's
        weights; None when the learner records none."""
        return None

    def used_features(self) -> list[str] | None:
        """The features the rule reads when the learner knows them itself (a vote: its rules'
        features); None: the card derives them from :meth:`score_weights`."""
        return None

    def rules(self) -> list[dict[str, Any]] | None:
        """A vote's rules in words (``class``, ``rule``, ``order``, ``weight``); None: not a vote of rules."""
        return None

    def working_set(self) -> list[str]:
        """The features column generation kept in its final working set ([] without one)."""
        return []

    def pairs(self) -> list[tuple[str, str]]:
        """The pairs of features modelled jointly (the edges of the learner's graph; [] for none)."""
        return []

    def trace(self) -> list[float]:
        """The bound after each iteration of the fit (column or edge generation); [] for a one-shot fit."""
        return []

    has_uncertainty_set: ClassVar[bool] = False
    """The learner records the cells its uncertainty set rules out, so :meth:`outside` answers."""

    def outside(self, X: np.ndarray) -> np.ndarray | None:
        """Bool (n,): rows of codes outside the uncertainty set (the certificate does not cover
        them); None for a learner that records no uncertainty set."""
        return None

    def falls_back(self) -> bool:
        """True when the fitted rule set its fit aside and predicts the majority class."""
        return False

    def start_note(self) -> str | None:
        """A line ``marg learn`` says before a fit that can take long with these parameters (None: nothing)."""
        return None

    def learn_lines(self, report: dict[str, Any]) -> list[str]:
        """The learner's own lines of ``marg learn``'s text output, after the certificate
        (``report``: the learn report, :func:`marg.learners.learn.learn`)."""
        return []

    def learn_warnings(self, report: dict[str, Any]) -> list[str]:
        """Warnings ``marg learn`` writes on stderr after the model is saved (both text and --json)."""
        return []

    # ----------------------------------------------------------- persistence
    def saved_params(self) -> dict[str, Any]:
        """``get_params`` without transient parameters, as JSON-ready values."""
        return {k: _jsonable(v) for k, v in self.get_params().items() if k not in self._transient}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready model: ``{"learner", "params", "state", "certificate"}`` — the certificate
        as it stands (:meth:`Certificate.record`, with the box it was computed over), which a
        holdout bound may have replaced."""
        self._check_fitted()
        return {"learner": self.learner, "params": self.saved_params(), "state": self._state(),
                "certificate": self.certificate_.record()}

    @classmethod
    def from_dict(cls, d: Any) -> "MarginalEstimator":
        """Rebuild a fitted estimator from :meth:`to_dict` output (or a previous release's layout).

        A damaged dict gives one InputError line naming what is wrong.
        """
        if not isinstance(d, dict) or d.get("learner") != cls.learner:
            got = d.get("learner") if isinstance(d, dict) else d
            raise InputError(f"not {cls.display_name} model (learner {got!r})")
        try:
            params = d.get("params") or {}
            if not isinstance(params, dict):
                raise TypeError(f"params must be an object, got {type(params).__name__}")
            state = d["state"] if "state" in d else d  # the previous release kept the state at the top level
            valid = set(cls.param_names())
            est = cls(**{k: cls._param_from_json(k, v) for k, v in params.items() if k in valid})
            est._load_state(state)
            if "certificate" in d:  # files without it (previous releases) keep the learner's own
                k = est.certificate_.n_classes if hasattr(est, "certificate_") else len(est.classes_)
                est.certificate_ = _certificate_from(d["certificate"], k)
            est._certificate_loaded()
        except InputError:
            raise
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise InputError(f"malformed {cls.display_name.split(' ', 1)[-1]} model: {exc}") from None
        return est

    def certificate(self, summary: Any, coverage: float, features: Sequence[str] | None = None) -> Certificate:
        """The certificate of the labels this fitted estimator predicts, over the uncertainty set at ``coverage``.

        The estimator's own (:func:`marg.learners.certification.choice_certificates.own_certificate`): its
        ``certificate_`` when it was fitted on ``summary`` at ``coverage`` (W(h) of its rule when
        that is still R*, the randomized rule's); refitted at ``coverage`` when it was fitted at
        another; for a rule on features screened from these same tables (``selected_from_``, set by
        :class:`marg.learners.choice.screened.ScreeningCandidates`), W(h) over EVERY feature's first-order
        box — the selection-aware certificate. ``features``: the features the fit was restricted to
        (None: every one). The automatic choice asks its chosen candidate this, at the coverage
        each of its boxes holds (:mod:`marg.learners.certification.choice_certificates`)."""
        from ..certification.choice_certificates import own_certificate

        self._check_fitted()
        return own_certificate(self, summary, coverage, features)[0]

    def set_certificate(self, certificate: Certificate) -> "MarginalEstimator":
        """Give this fitted estimator a certificate proved for its labels outside its fit, and return it.

        The one way code outside an estimator sets ``certificate_`` (its ``fit`` and the model loader
        set it from inside; ``tests/marg/test_lint.py`` checks): the holdout bound of a model file
        (:func:`marg.learners.certification.holdout_certificate.certify_model`), the study's final choice
        (:func:`marg.learners.study.final_choice.final_among`), the automatic choice's chosen candidate at
        the coverage every box it looked at holds together (:class:`marg.learners.auto.AutoLearner`).

        Raises
        ------
        NotFittedError
            Before ``fit``.
        InputError
            ``certificate`` is no :class:`Certificate`, its value no bound (not finite, or negative), or
            it counts other classes than the estimator's.
        """
        self._check_fitted()
        if not isinstance(certificate, Certificate):
            raise InputError(f"a certificate must be a Certificate, got {type(certificate).__name__}")
        if not (np.isfinite(certificate.value) and certificate.value >= 0.0):
            raise InputError(f"a certificate's value must be a finite bound >= 0, got {certificate.value!r}")
        classes = getattr(self, "classes_", None)
        k = len(classes) if classes is not None else self.certificate_.n_classes
        if certificate.n_classes != k:
            raise InputError(f"a certificate over {certificate.n_classes} classes for {self.display_name} of {k}")
        self.certificate_ = certificate
        return self

    def cover_selection(self, summary: Any) -> None:
        """A fit's last step: on a summary whose features were selected from the same patients
        (``summary.selection``, a select-then-measure study), ``certificate_`` becomes the certificate
        that covers the selection (:meth:`selection_certificate` at the estimator's coverage, 0.95
        without one); nothing otherwise. Every built-in learner's ``fit`` ends with it."""
        if summary.selection is None:
            return
        self.certificate_ = self.selection_certificate(summary, float(getattr(self, "coverage", None) or 0.95))

    def selection_certificate(self, summary: Any, coverage: float) -> Certificate:
        """The certificate of this fitted rule that holds whichever features the study selected
        (:func:`marg.learners.certification.selection_certificate.selection_certificate`: W(h) over every candidate's
        first-order box at 1 − α/2; the label-only rule overrides it)."""
        from ..certification.selection_certificate import selection_certificate

        return selection_certificate(self, summary, coverage)

    def randomized_bound(self) -> "Certificate | None":
        """The bound on the learner's randomized rule (``predict_proba``), R*, when it has one apart from
        the certificate of the labels it predicts; None otherwise. Never compared with a certificate."""
        return None

    def _certificate_loaded(self) -> None:
        """Called once a model file's certificate is in place: a learner whose earlier files
        certified something else than the labels it predicts mends it here (default: nothing)."""

    @classmethod
    def _param_from_json(cls, name: str, value: Any) -> Any:
        """A saved parameter back in the form ``__init__`` takes (lists stay lists)."""
        return value

    def _state(self) -> dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _load_state(self, state: dict[str, Any]) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b) if not isinstance(a, np.ndarray) else False
    except Exception:  # noqa: BLE001 - repr must never fail
        return False


def _jsonable(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, tuple):
        return [_jsonable(x) for x in v]
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    return v


# ------------------------------------------------------------------------ registry
_LEARNER_MODULES = {"mrc": ("marg.learners.classifiers.mrc", "MRC"), "dcc": ("marg.learners.classifiers.dcc", "DCC"),
                    "renyi": ("marg.learners.classifiers.renyi", "RenyiClassifier"),
                    "nb": ("marg.learners.classifiers.naive_bayes", "NaiveBayes"),
                    "boost": ("marg.learners.boost.vote", "BoostVote"),
                    "prior": ("marg.learners.classifiers.label_only", "LabelOnly"),
                    "auto": ("marg.learners.auto", "AutoLearner")}
LEARNERS: tuple[str, ...] = tuple(_LEARNER_MODULES)


class _Registry(dict):
    """Learner name → estimator class, importing each learner's module on first use."""

    def __missing__(self, name: str) -> type[MarginalEstimator]:
        if name not in _LEARNER_MODULES:
            raise InputError(f"unknown learner {name!r} (expected one of {', '.join(LEARNERS)})")
        module, attr = _LEARNER_MODULES[name]
        cls = getattr(import_module(module), attr)
        self[name] = cls
        return cls


REGISTRY: dict[str, type[MarginalEstimator]] = _Registry()


def estimator_class(learner: str) -> type[MarginalEstimator]:
    """The estimator class of a learner name (one-line InputError for an unknown one)."""
    return REGISTRY[str(learner)]


def register(cls: type[MarginalEstimator]) -> type[MarginalEstimator]:
    """Add a learner outside marg to :data:`REGISTRY` under ``cls.learner`` (usable as a decorator):
    :func:`marg.learners.learn.learn`, model files and the card then know it. A name already
    taken is an InputError."""
    name = cls.learner
    if not name or name in _LEARNER_MODULES or name in REGISTRY:
        raise InputError(f"cannot register learner {name!r}: the name is empty or taken")
    REGISTRY[name] = cls
    return cls


def registered_learners() -> list[str]:
    """Every learner name: the built-in ones (:data:`LEARNERS`), then those added by :func:`register`."""
    return [*LEARNERS, *(n for n in REGISTRY if n not in _LEARNER_MODULES)]


def features_param(features: Sequence[str] | None) -> list[str] | None:
    """A ``features`` parameter as a list of names (None stays None; a bare string is refused)."""
    if features is None:
        return None
    if isinstance(features, str):
        raise InputError(f"features must be a list of feature names, got the string {features!r}")
    return [str(f) for f in features]


FEATURES = Check(features_param, bad="age", what="features")
"""The ``features`` constraint of every learner that takes one (:func:`features_param`)."""
