"""The automatic learner choice as an estimator: estimate each candidate's error, compute its certificate, choose by one rule.

:class:`AutoLearner` fits every candidate (learner, parameters) on the summary and records,
per candidate:

- its **certificate** — the learner's own ``certificate_`` (a bound on the error of the
  rule it predicts with, at the same coverage for all); a training-sample quantity (2γ) is
  replaced by W(h) of the rule (:func:`marg.learners.certify.certify`);
- its **estimated error** (:mod:`marg.learners.cross_site`): with 2–20 sites' own tables,
  **leave-one-site-out** — the candidate refitted without site k, its error on rows
  simulated from site k's tables (the tree-augmented naive-Bayes distribution those tables
  determine; the model's own ``predict``, so any rule and tie-break is covered), averaged
  over the sites by their n; with one site (or more than 20), the fitted model's error on
  rows simulated from the whole summary **in sample** (optimistic: the tables it was fitted
  on). Raw numeric features give no estimate (only their moments are released), and the
  row says why.

The choice (:func:`choose`) is the one rule of :mod:`marg.learners.choice_rule`, set by ``prefer``:
``"balanced"`` (default) — among the candidates whose estimate is within noise of the best
(max(``tolerance``, one standard error of the paired difference over the folds)), the smallest
non-trivial certificate, or the smallest estimate when every one of them is trivial;
``"accuracy"``; ``"certificate"``. Never a rule estimated worse than the label-only rule
``prior``, which is always a candidate.

**Certificates for the choice** (:mod:`marg.learners.choice_certificates`): each candidate's
certificate bounds the error of the labels it predicts (W(h); a minimax learner's R*, the
randomized rule's, is kept under ``minimax_risk`` and never compared), and the m candidates
are fitted and certified at coverage 1 − (1 − ``coverage``)/m each, so that every certificate
the choice looked at holds at once with probability ≥ ``coverage`` — the chosen one's
coverage is ``coverage`` whichever is chosen.

The chosen fitted estimator is ``chosen_``; predictions and the certificate are its own.

**Many features** (:func:`marg.learners.screened.screening_applies`: more than
:data:`~marg.learners.screened.SCREEN_MIN_FEATURES` discrete features whose pair tables are
not all released) with the default candidates: screen, then learn
(:func:`marg.learners.screened.screen_and_learn`) — each (learner, number of screened
features M) is a candidate row, the chosen one the smallest estimated error, its certificate
W(h) over every feature's first-order uncertainty set (valid for the selection); ``screen_``
records the genes. When no feature passes the screen (DP noise above every dependence), the
label-only rule (:data:`FALLBACK`, :class:`marg.learners.label_only.LabelOnly`): the class whose
share's lower confidence bound is largest, for every row, certified by the label table's box
alone — a rule that reads features whose signal is below the noise predicts from the noise.
Under DP, when every candidate's certificate is trivial (≥ 1 − 1/K), ``patients_`` says how
many patients would give a candidate a non-trivial one under the same noise
(:func:`marg.learners.sample_size.patients_needed`; the candidates in order of their
certificate, the first that gets there within 2¹⁴·n patients).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Collection, Sequence

import numpy as np

from marg.errors import InconsistentStatistics, InputError, option

from .base import MarginalEstimator, estimator_class, features_param
from .choice_certificates import label_certificate, split_coverage
from .choice_rule import PREFER, PRIOR, TOLERANCE, choose_index
from .params import COVERAGE, Check, Interval, Options
from .screened import screen_and_learn, screening_applies
from .cross_site import MAX_SITES, MIN_SITES, ErrorEstimate, TanSample, loso_errors, sample_error, tan_sample

DEFAULT_CANDIDATES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("mrc", {}),
    ("dcc", {"edge_weight": "label"}),
    ("dcc", {"edge_weight": "cmi"}),
    ("nb", {"certify": "bound"}),  # the one-LP bound: the exact W(h) takes minutes on thousands of features
    ("renyi", {}),
    (PRIOR, {}),
)
"""What ``--learner auto`` tries by default (a DCC needs pair tables: without them it is skipped, saying so).
The label-only rule ``prior`` is always a candidate (:func:`candidate_list` adds it to any list)."""
FALLBACK: tuple[str, dict[str, Any]] = ("prior", {})
"""On a wide summary where no feature passes the screen: the label-only rule (no feature carries signal above
the noise, so a rule reading them predicts from the noise — the MRC on every gene erred at chance level)."""
FOLD_PARAMS: dict[str, dict[str, Any]] = {"nb": {"certify": "bound"}}
"""Parameters of the leave-one-site-out folds only (their certificates are not used)."""


@dataclass
class CandidateRow:
    """One candidate of the automatic choice: what was estimated and certified, and whether it was chosen.

    ``error`` None: no estimate (``note`` says why); ``certificate`` None: not fitted (``note``)."""

    learner: str
    params: dict[str, Any]
    error: float | None = None
    method: str = ""
    folds: list[float] = field(default_factory=list)
    certificate: float | None = None
    kind: str = ""
    chosen: bool = False
    note: str = ""
    trivial: bool = False
    minimax_risk: float | None = None
    fold_weights: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def choose(rows: Sequence[CandidateRow], prefer: str = "balanced", tolerance: float = TOLERANCE) -> tuple[int, str]:
    """The index of the chosen candidate and the rule in words (:mod:`marg.learners.choice_rule`, the one rule).

    Only candidates with a certificate (fitted) are considered; the folds' weights are the rows'.

    Raises
    ------
    InputError
        No candidate was fitted.
    """
    weights = next((r.fold_weights for r in rows if r.fold_weights), None)
    return choose_index(rows, prefer, tolerance, weights=weights)


class AutoLearner(MarginalEstimator):
    """Choose among candidate learners by estimated error and certificate (see the module docstring).

    Parameters
    ----------
    candidates : sequence of (learner, params) or None
        The learners tried, each with its parameters (None: :data:`DEFAULT_CANDIDATES`);
        ``coverage`` and ``features`` are set on every candidate that takes them.
    prefer : {"balanced", "accuracy", "certificate"}
    tolerance : float
        The floor of the noise margin under ``"balanced"`` (:data:`marg.learners.choice_rule.TOLERANCE`).
    coverage : float
        Coverage of every candidate's certificate.
    features : sequence of str or None
        Features the candidates use (None: every feature).
    callback : callable or None
        A progress record ``{"stage": "auto", "learner", "params", "error", "certificate"}`` per candidate
        as it is fitted (``error`` None), a ``note`` while errors are estimated, then one per
        candidate with its estimated error.

    Attributes
    ----------
    chosen_ : MarginalEstimator
        The chosen candidate, fitted on the whole summary.
    fitted_ : list of MarginalEstimator or None
        Every candidate fitted on the whole summary (None: it failed), in order; not saved.
    candidates_ : list of CandidateRow
    rule_ : str
        The rule that chose, in words.
    error_method_ : str
        How errors were estimated, in words.
    patients_ : PatientsNeeded or None
        Under DP with every certificate trivial: the patients a candidate would need (module docstring).
    screen_ : dict or None
        With the default candidates on a wide summary (:func:`marg.learners.screened.screening_applies`):
        the screening's record (``applied``; the chosen ``learner``, ``size`` and ``features``, their
        ``lower_bounds``, every (learner, M) tried under ``configs``, the error ``method``; or, when no feature passed the screen, the ``note`` that the
        label-only rule stands in and the screen's ``reason``). None otherwise.
    certificate_, classes_, feature_names_in_, n_, fingerprint_ : the chosen candidate's.
    """

    learner = "auto"
    display_name = "an automatic-choice"
    learn_options = ("coverage", "prefer")

    def __init__(self, candidates: Sequence[Sequence[Any]] | None = None, prefer: str = "balanced",
                 tolerance: float = TOLERANCE, coverage: float = 0.95, features: Sequence[str] | None = None,
                 callback: Callable[[dict], None] | None = None):
        self.candidates = candidates
        self.prefer = prefer
        self.tolerance = tolerance
        self.coverage = coverage
        self.features = features
        self.callback = callback

    # ------------------------------------------------------------ parameters
    @classmethod
    def check_given(cls, given: Collection[str]) -> None:
        """Only ``coverage`` and ``prefer`` may be given: the automatic choice tries each candidate with its defaults."""
        extra = sorted(set(given) - set(cls.learn_options))
        if extra:
            raise InputError(f"{option(extra[0])} needs a chosen learner, not {option('learner', 'auto')} "
                             "(auto tries each learner's defaults)")

    _parameter_constraints = {
        "prefer": Options(PREFER),
        "tolerance": Interval(0, 1),
        "coverage": COVERAGE,
        "features": Check(features_param, bad="age", what="features"),
        "candidates": Check(lambda c: candidate_list(c), bad=[("svm", {})], what="learner"),
    }

    def _candidate_list(self) -> list[tuple[str, dict[str, Any]]]:
        return candidate_list(self.candidates)

    def _make(self, name: str, params: dict[str, Any], coverage: float | None = None) -> MarginalEstimator:
        cls = estimator_class(name)
        kw = dict(params)
        names = cls.param_names()
        if "coverage" in names:
            kw.setdefault("coverage", self.coverage if coverage is None else coverage)
        if self.features is not None and "features" in names:
            kw["features"] = features_param(self.features)
        return cls(**kw)

    # --------------------------------------------------------------- fitting
    def fit(self, summary: Any) -> "AutoLearner":
        self.check_params()
        self.screen_: dict[str, Any] | None = None
        if self.candidates is None and screening_applies(summary):
            try:
                return self._fit_screened(summary)
            except InputError as exc:  # nothing above the noise: the label-only rule
                self.screen_ = {"applied": False, "reason": str(exc),
                                "note": f"no feature above the noise: predicting the class with the largest share, "
                                        f"{FALLBACK[0]}"}
        cands = [FALLBACK] if self.screen_ is not None else self._candidate_list()
        self.each_coverage_ = split_coverage(self.coverage, len(cands))  # one event for every certificate compared
        rows: list[CandidateRow] = []
        fitted: list[MarginalEstimator | None] = []
        certs: list[Any] = []
        for name, params in cands:
            row = CandidateRow(name, params)
            est = self._make(name, params, self.each_coverage_)
            cert = None
            try:
                est.fit(summary)
                cert, row.minimax_risk = label_certificate(est, summary, self.each_coverage_, self.features)
            except InputError as exc:
                row.note = str(exc)
                est = None
            else:
                row.certificate, row.kind, row.trivial = float(cert.value), cert.kind, bool(cert.trivial)
            rows.append(row)
            fitted.append(est)
            certs.append(cert)
            if self.callback is not None:  # progress while the candidates are fitted
                self.callback({"stage": "auto", "learner": candidate_name(name, params), "params": params, "error": None,
                               "certificate": row.certificate})
        if self.callback is not None:
            self.callback({"stage": "note", "text": "auto: estimating each candidate's error"})
        self.error_method_ = ("not estimated (the one candidate after an empty screen: the label-only rule errs at the "
                              "share of the classes it does not predict, which its certificate bounds)"
                              if self.screen_ is not None else self._estimate_errors(summary, cands, rows, fitted))
        k, words = choose(rows, self.prefer, self.tolerance)
        if self.screen_ is not None:
            words = "the screen: no feature passed it, so the label table alone decides"
        rows[k].chosen = True
        self._say_choice(rows)
        chosen = fitted[k]
        assert chosen is not None
        c = certs[k]  # the labels' certificate, holding with every other candidate's at once: coverage as asked
        chosen.certificate_ = type(c)(c.value, c.kind, None if c.coverage is None else float(self.coverage),
                                      c.approximate, c.n_classes, note=c.note, box=c.box)
        self.chosen_ = chosen
        self.fitted_ = fitted  # every candidate fitted on the whole summary (None: failed); not saved
        self.candidates_ = rows
        self.rule_ = words
        self.confidence_ = confidence_record(self.coverage, len(cands), self.each_coverage_)
        self.patients_ = None
        if summary.is_noisy and all(r.certificate is None or r.trivial for r in rows):
            self.patients_ = self._patients(summary, cands, rows)
        self._adopt(chosen)
        return self

    def _fit_screened(self, summary: Any) -> "AutoLearner":
        """Screen, then learn (:mod:`marg.learners.screened`): each (learner, M) a candidate row."""
        res = screen_and_learn(summary, coverage=self.coverage, features=self.features)
        how = "loso" if res.method.startswith("leave") else "split"
        rows = [CandidateRow(c.learner, {} if c.learner == PRIOR else {"screened": c.size}, error=c.error, method=how if c.error is not None else "",
                             folds=c.folds, chosen=c.chosen, note=c.note) for c in res.configs]
        for r in rows:
            if r.chosen:
                r.certificate, r.kind = float(res.chosen.certificate_.value), res.chosen.certificate_.kind
                r.trivial = bool(res.chosen.certificate_.trivial)
        self._say_choice(rows)
        self.chosen_ = res.chosen
        self.fitted_ = [res.chosen if r.chosen else None for r in rows]
        self.candidates_ = rows
        self.screen_ = {"applied": True, **res.to_dict()}
        self.rule_ = res.rule or (
            f"screening: the fewest of the top-M features (of {res.ranked} whose screening lower bound is positive) "
            f"among the (learner, M) whose estimated error is within noise of the best (max({TOLERANCE:g}, one standard "
            f"error over the folds)) and not above the label-only rule's; certified over every "
            f"feature's first-order uncertainty set")
        self.error_method_ = res.method
        self.confidence_ = confidence_record(self.coverage, 2, split_coverage(self.coverage, 2))
        self.confidence_["words"] = (f"two boxes could carry the chosen rule's certificate (every feature's first-order "
                                     f"cells, the label table's), each at {self.confidence_['each']:g}: the chosen one "
                                     f"holds at {self.coverage:g} (Bonferroni)")
        self.patients_ = None
        self._adopt(res.chosen)
        return self

    def _estimate_errors(self, summary: Any, cands: list, rows: list[CandidateRow], fitted: list) -> str:
        parts = summary.site_parts
        pairs = "" if summary.feature_cliques(2) else "; no pair tables, so the features are simulated independent given the label"
        if MIN_SITES <= len(parts) <= MAX_SITES:
            from marg.marginals.summary import Summary, sum_tables

            cb = summary.codebook
            fits = [(str(k), lambda s, n=name, p=params: self._make(n, {**p, **FOLD_PARAMS.get(n, {})}).fit(s))
                    for k, (name, params) in enumerate(cands) if fitted[k] is not None]
            try:
                got = loso_errors(fits, parts, make_summary=lambda ts: Summary(cb, list(ts)),
                                  combine=lambda ps: sum_tables(ps)[0])
            except InputError as exc:  # e.g. raw numeric features: no rows can be simulated
                got = {key: str(exc) for key, _ in fits}
            for key, res in got.items():
                _record(rows[int(key)], res)
            return (f"leave-one-site-out over {len(parts)} sites: each candidate refitted without a site, its error on "
                    f"rows simulated from that site's tables (tree-augmented naive Bayes), weighted by the sites' n{pairs}")
        why = {0: "no site's own tables were kept, only their sum", 1: "one site's tables"}.get(
            len(parts), f"{len(parts)} sites (leave-one-site-out up to {MAX_SITES})")
        try:
            sample: TanSample | str = tan_sample(summary)
        except InputError as exc:
            sample = str(exc)
        for k, est in enumerate(fitted):
            if est is not None:
                _record(rows[k], sample if isinstance(sample, str) else
                        ErrorEstimate(sample_error(est, sample), "in-sample"))
        return (f"in sample ({why}): each model's error on rows simulated from the tables it was fitted on "
                f"(tree-augmented naive Bayes) — optimistic{pairs}")

    def _patients(self, summary: Any, cands: list, rows: list[CandidateRow]) -> Any:
        from .sample_size import patients_needed

        order = sorted((k for k, r in enumerate(rows) if r.certificate is not None),
                       key=lambda k: (rows[k].certificate, math.inf if rows[k].error is None else rows[k].error, k))
        last = None
        for k in order:
            name, params = cands[k]

            def certificate_at(scaled: Any, name: str = name, params: dict = params) -> float:
                try:
                    est = self._make(name, params, self.each_coverage_).fit(scaled)
                    return float(label_certificate(est, scaled, self.each_coverage_, self.features)[0].value)
                except InconsistentStatistics:  # the noise left the box empty at this size: no bound there
                    return 1.0

            last = patients_needed(certificate_at, summary, summary.n_classes)
            last.learner = candidate_name(name, params)
            if last.needed is not None:
                break
        return last

    def _say_choice(self, rows: list[CandidateRow]) -> None:
        """Progress once the choice is made: each candidate's estimate and certificate, then the chosen one
        (``"chosen": True``, last), so the last line names what was chosen, not the last candidate tried."""
        if self.callback is None:
            return
        for r in rows:
            self.callback({"stage": "auto", "learner": candidate_name(r.learner, r.params), "params": r.params,
                           "error": r.error, "certificate": r.certificate})
        r = next(r for r in rows if r.chosen)
        self.callback({"stage": "auto", "learner": candidate_name(r.learner, r.params), "params": r.params,
                       "error": r.error, "certificate": r.certificate, "chosen": True})

    def _adopt(self, chosen: MarginalEstimator) -> None:
        self.certificate_ = chosen.certificate_
        for attr in ("classes_", "feature_names_in_", "n_", "fingerprint_"):
            if hasattr(chosen, attr):
                setattr(self, attr, getattr(chosen, attr))

    # ------------------------------------------------------------ prediction
    def predict(self, X: np.ndarray) -> np.ndarray:
        self._check_fitted()
        return self.chosen_.predict(X)

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        self._check_fitted()
        return self.chosen_.predict_proba(X)

    # ---------------------------------------------------------------- report
    def choice_report(self) -> dict[str, Any]:
        """The choice's keys of ``marg learn --json`` (and the model file's report): the candidates
        table, the rule, how errors were estimated, and under DP the patients a non-trivial
        certificate would need."""
        self._check_fitted()
        out: dict[str, Any] = {"auto": [r.to_dict() for r in self.candidates_], "auto_rule": self.rule_,
                               "auto_prefer": self.prefer, "auto_error_method": self.error_method_}
        if getattr(self, "confidence_", None) is not None:
            out["auto_confidence"] = self.confidence_
        if self.patients_ is not None:
            out["auto_patients"] = self.patients_.to_dict()
        if getattr(self, "screen_", None) is not None:
            out["screen"] = self.screen_
        return out

    def model_estimator(self) -> MarginalEstimator:
        """The chosen candidate: the model file holds it, and its report carries :meth:`choice_report`."""
        self._check_fitted()
        return self.chosen_

    def _report(self) -> dict[str, Any]:
        return {"chosen": self.chosen_.learner, **self.chosen_._report(), **self.choice_report()}

    # ----------------------------------------------------------- persistence
    def _state(self) -> dict[str, Any]:
        return {"chosen": self.chosen_.to_dict(), **self.choice_report()}

    def _load_state(self, state: dict[str, Any]) -> None:
        from .sample_size import PatientsNeeded

        d = state["chosen"]
        chosen = estimator_class(str(d["learner"])).from_dict(d)
        self.chosen_ = chosen
        self.candidates_ = [CandidateRow(**r) for r in state["auto"]]
        self.rule_ = str(state["auto_rule"])
        self.error_method_ = str(state["auto_error_method"])
        p = state.get("auto_patients")
        self.patients_ = None if p is None else PatientsNeeded(**p)
        self.screen_ = state.get("screen")
        self.confidence_ = state.get("auto_confidence")
        self._adopt(chosen)


def candidate_list(candidates: Sequence[Any] | None) -> list[tuple[str, dict[str, Any]]]:
    """The candidates as (learner, params) pairs (None: :data:`DEFAULT_CANDIDATES`); a bare name
    means its defaults. One-line InputError for a malformed entry, an unknown learner, auto itself or none."""
    if candidates is None:
        return [(n, dict(p)) for n, p in DEFAULT_CANDIDATES]
    out = []
    for c in candidates:
        if isinstance(c, str):
            c = (c, {})
        if not (isinstance(c, (tuple, list)) and len(c) == 2 and isinstance(c[0], str) and isinstance(c[1], dict)):
            raise InputError(f"a candidate must be (learner, params), got {c!r}")
        if c[0] == AutoLearner.learner:
            raise InputError("a candidate of the automatic choice cannot be auto itself")
        estimator_class(c[0])  # one-line error for an unknown learner
        out.append((c[0], dict(c[1])))
    if not out:
        raise InputError("candidates must name at least one learner")
    if all(name != PRIOR for name, _ in out):  # the label-only rule is always a candidate
        out.append((PRIOR, {}))
    return out


def _record(row: CandidateRow, res: ErrorEstimate | str) -> None:
    if isinstance(res, str):
        row.note = (row.note + "; " if row.note else "") + f"no error estimate: {res}"
        return
    row.error, row.method, row.folds = float(res.value), res.method, list(res.folds)
    row.fold_weights = list(res.weights)


def candidate_name(learner: str, params: dict[str, Any]) -> str:
    """A candidate as printed: ``nb(certify=bound)``, or the learner's name alone with its defaults."""
    return learner + ("" if not params else "(" + ", ".join(f"{k}={v}" for k, v in params.items()) + ")")


def confidence_record(coverage: float, m: int, each: float) -> dict[str, Any]:
    """The choice's one confidence event, as the report, the model file and the card say it."""
    words = (f"every candidate's certificate at coverage {each:.6g} (1 − {1 - coverage:.3g}/{m}), so that all {m} hold "
             f"together with probability ≥ {coverage:g} (Bonferroni): the chosen certificate holds at {coverage:g} "
             f"whichever was chosen" if m > 1 else f"one candidate, certified at {coverage:g}")
    return {"coverage": float(coverage), "candidates": int(m), "each": float(each), "words": words}


def choice_warning(report: dict[str, Any]) -> str | None:
    """What would give a useful certificate when the automatic choice kept a trivial one (None: the report
    is not the automatic choice's, or its chosen certificate is not trivial).

    A candidate with a non-trivial certificate that the rule passed over (estimated less accurate)
    is named with its numbers and ``--prefer certificate``; the holdout route (a bound measured on
    patients the model never saw) is named always. Rows are not said to be too few: a trivial
    certificate on many rows comes from the box over many table entries, not from the rows."""
    rows = report.get("auto")
    if not rows:
        return None
    chosen = next((r for r in rows if r.get("chosen")), None)
    if chosen is None or not chosen.get("trivial"):
        return None
    useful = sorted((r for r in rows if r.get("certificate") is not None and not r.get("trivial")),
                    key=lambda r: (math.inf if r.get("error") is None else r["error"], r["certificate"]))
    name = candidate_name(chosen["learner"], chosen["params"])
    head = (f"warning: the chosen {name}'s certificate is trivial ({chosen['kind']} = {chosen['certificate']:.4f}, no "
            f"better than guessing)")
    holdout = ("hold patients out at export (marg export --holdout auto, then marg export --evaluate MODEL and marg "
               "certify) for a certificate measured on patients the model never saw")
    if useful:
        u = useful[0]
        est = "" if u.get("error") is None else f", estimated error {u['error']:.4f}"
        mine = "" if chosen.get("error") is None else f" against {chosen['error']:.4f}"
        fields = set(CandidateRow.__dataclass_fields__)
        k, _ = choose([CandidateRow(**{f: v for f, v in r.items() if f in fields}) for r in rows], "certificate")
        c = rows[k]
        by_cert = (f"marg learn --prefer certificate chooses {candidate_name(c['learner'], c['params'])} "
                   f"({c['certificate']:.4f}" + ("" if c.get("error") is None else f", estimated error {c['error']:.4f}")
                   + ")")
        return (f"{head}; {candidate_name(u['learner'], u['params'])} has a useful one ({u['certificate']:.4f}{est}"
                f"{mine}); {by_cert}; or {holdout}")
    return f"{head}; no candidate's is useful from these tables: {holdout}"
