"""The automatic learner choice as an estimator: candidates from a generator, one estimator, one rule, the chosen
estimator's own certificate.

:class:`AutoLearner` is one composition (:mod:`marg.learners.choice.candidates`): a **generator**
proposes candidates — :class:`~marg.learners.choice.candidates.PlainCandidates` (the learners as given;
:data:`DEFAULT_CANDIDATES`) or, on wide summaries, :class:`~marg.learners.choice.screened.ScreeningCandidates`
((learner, M) on the top M screened features, the label-only rule as M = 0) —; each candidate is
fitted on the summary and records:

- its **certificate** — asked of the fitted estimator itself
  (:meth:`~marg.learners.estimator.base.MarginalEstimator.certificate`: a bound on the error of the labels
  it predicts, at the same coverage for all; a training-sample quantity (2γ) or R* replaced by
  W(h) of the rule, :mod:`marg.learners.certification.choice_certificates`);
- its **estimated error**, by the ONE estimator :func:`marg.learners.choice.cross_site.estimate_errors`:
  with 2–20 sites' own tables, **leave-one-site-out** — the candidate refitted without site k
  (a screened candidate screens again), its error on rows simulated from site k's tables (the
  tree-augmented naive-Bayes distribution those tables determine; the model's own ``predict``,
  so any rule and tie-break is covered), averaged over the sites by their n; with one site (or
  more than 20), the fitted model's error on rows simulated from the whole summary **in sample**
  (optimistic: the tables it was fitted on), or for screened candidates the **split** fallback
  (refitted on training sets drawn from the tables, so the noise of screening is seen). Raw
  numeric features give no estimate (only their moments are released), and the row says why.

The choice (:func:`choose`) is the one rule of :mod:`marg.learners.choice.choice_rule`, set by ``prefer``:
``"accuracy"`` (default) — **choose for accuracy, certify what was chosen**: the smallest estimated
error, the label-only rule ``prior`` (always a candidate) only when it is estimated better beyond the
noise (max(``tolerance``, one standard error of the paired difference over the folds)), the chosen
model's own certificate computed after; ``"certificate"`` (the default before issue 49; ``"balanced"``
its former name) — among the candidates whose estimate is within noise of the best, the smallest
non-trivial certificate, never a rule estimated worse than the prior. Each row reports its estimate's own
standard error (``error_se``).

**Certificates for the choice** (:mod:`marg.learners.certification.choice_certificates`): each candidate's
certificate bounds the error of the labels it predicts (W(h); a minimax learner's R*, the
randomized rule's, is kept under ``minimax_risk`` and never compared), and the m candidates
are fitted and certified at coverage 1 − (1 − ``coverage``)/m each, so that every certificate
the choice looked at holds at once with probability ≥ ``coverage`` — the chosen one's
coverage is ``coverage`` whichever is chosen.

The chosen fitted estimator is ``chosen_``; predictions and the certificate are its own.

**Many features** (:func:`marg.learners.choice.screened.screening_applies`: more than
:data:`~marg.learners.choice.screened.SCREEN_MIN_FEATURES` discrete features whose pair tables are
not all released) with the default candidates: the screening generator — each (learner, number
of screened features M) a candidate row, chosen by the same rule without certificates (the fewest
features within noise of the best), the chosen one certified by itself over every feature's
first-order uncertainty set (valid for the selection); ``screen_``
records the genes. When no feature passes the screen (DP noise above every dependence), the
label-only rule (:data:`FALLBACK`, :class:`marg.learners.classifiers.label_only.LabelOnly`): the class whose
share's lower confidence bound is largest, for every row, certified by the label table's box
alone — a rule that reads features whose signal is below the noise predicts from the noise.
Under DP, when every candidate's certificate is trivial (≥ 1 − 1/K), ``patients_`` says how
many patients would give a candidate a non-trivial one under the same noise
(:func:`marg.learners.certification.sample_size.patients_needed`; the candidates in order of their
certificate, the first that gets there within 2¹⁴·n patients).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Collection, Sequence

import numpy as np

from marg.errors import InconsistentStatistics, InputError, option

from .estimator.base import MarginalEstimator, estimator_class, features_param
from .choice.candidates import (Candidate, CandidateRow, NoisySplitCandidates, PlainCandidates, candidate_name,
                                choice_warning, choose,
                         record_estimate)
from .choice.candidates import candidate_list as _candidate_list
from .certification.choice_certificates import randomized_risk
from .choice.choice_rule import ALIASES, PREFER, PRIOR, TOLERANCE
from .choice.cross_site import estimate_errors
from .core.params import COVERAGE, Check, Interval, check_choice
from .choice.screened import ScreeningCandidates, screening_applies

__all__ = ["DEFAULT_CANDIDATES", "FALLBACK", "AutoLearner", "CandidateRow", "candidate_list", "candidate_name",
           "choice_warning", "choose"]

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


class AutoLearner(MarginalEstimator):
    """Choose among candidate learners by estimated error and certificate (see the module docstring).

    Parameters
    ----------
    candidates : sequence of (learner, params) or None
        The learners tried, each with its parameters (None: :data:`DEFAULT_CANDIDATES`; on a select-then-measure
        study's summary the study's own, :data:`marg.learners.study.two_round.STUDY_CHOICE`, with its ``defaults``);
        ``coverage`` and ``features`` are set on every candidate that takes them.
    prefer : {"accuracy", "certificate"} or None (``"balanced"``: the former name of ``"certificate"``)
        None: ``"accuracy"``, or on a select-then-measure study's summary (``summary.selection``) the study's
        choice (:func:`marg.learners.study.two_round.study_choice`).
    tolerance : float
        The floor of the noise margin (:data:`marg.learners.choice.choice_rule.TOLERANCE`).
    coverage : float
        Coverage of every candidate's certificate.
    features : sequence of str or None
        Features the candidates use (None: every feature).
    defaults : sequence of (learner, params) or None
        Some of ``candidates``, in order: the first not beaten beyond the noise at 95 % by the pick of ``prefer``
        is chosen (:mod:`marg.learners.choice.choice_rule`, "Defaults"; the study's rule on its best-ranked feature,
        then Rényi).
    one_site : {"in-sample", "split"}
        How each plain candidate's error is estimated without 2–20 sites' own tables (one pooled summary, e.g. a
        study's secure sum): ``"in-sample"`` — the fitted model on rows simulated from its own tables (optimistic);
        ``"split"`` — :func:`marg.learners.choice.cross_site.split_errors` with training sets that carry the summary's
        own noise (:func:`marg.learners.choice.cross_site.noisy_replica`): refitted on noisy tables of n drawn rows,
        measured on held-out draws.
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
    unmeasured_ : list of str
        Features left out because min-cell suppression hid every cell of their table (``Summary.unmeasured``;
        only when ``features`` is None): the release says nothing about them beyond the class totals.
    screen_ : dict or None
        With the default candidates on a wide summary (:func:`marg.learners.choice.screened.screening_applies`):
        the screening's record (``applied``; the chosen ``learner``, ``size`` and ``features``, their
        ``lower_bounds``, every (learner, M) tried under ``configs``, the error ``method``; or, when no feature passed
        the screen, the ``note`` that the label-only rule stands in and the screen's ``reason``). None otherwise.
    certificate_, classes_, feature_names_in_, n_, fingerprint_ : the chosen candidate's.
    """

    learner = "auto"
    display_name = "an automatic-choice"
    learn_options = ("coverage", "prefer")

    def __init__(self, candidates: Sequence[Sequence[Any]] | None = None, prefer: str | None = None,
                 tolerance: float = TOLERANCE, coverage: float = 0.95, features: Sequence[str] | None = None,
                 callback: Callable[[dict], None] | None = None, defaults: Sequence[Sequence[Any]] | None = None,
                 one_site: str = "in-sample"):
        self.candidates = candidates
        self.one_site = one_site
        self.defaults = defaults
        self.prefer = prefer
        self.tolerance = tolerance
        self.coverage = coverage
        self.features = features
        self.callback = callback

    # ------------------------------------------------------------ parameters
    @classmethod
    def check_given(cls, given: Collection[str]) -> None:
        """Only ``coverage`` and ``prefer`` may be given: the automatic choice tries each candidate with its
        defaults."""
        extra = sorted(set(given) - set(cls.learn_options))
        if extra:
            raise InputError(f"{option(extra[0])} needs a chosen learner, not {option('learner', 'auto')} "
                             "(auto tries each learner's defaults)")

    _parameter_constraints = {
        "prefer": Check(lambda v: v is None or check_choice("prefer", v, PREFER + tuple(ALIASES)), bad="fastest",
                        what="prefer"),
        "tolerance": Interval(0, 1),
        "coverage": COVERAGE,
        "features": Check(features_param, bad="age", what="features"),
        "candidates": Check(lambda c: candidate_list(c), bad=[("svm", {})], what="learner"),
        "one_site": Check(lambda v: check_choice("one_site", v, ("in-sample", "split")), bad="loso", what="one_site"),
    }

    def _study(self, summary: Any) -> tuple[Any, Any, str]:
        """(candidates, defaults, prefer) for ``summary``: the parameters as given, those left None taken from the
        study's choice on a select-then-measure study's summary (:func:`marg.learners.study.two_round.study_choice`; its
        defaults come with its candidates), else the defaults (:data:`DEFAULT_CANDIDATES`, none, ``"accuracy"``)."""
        choice: dict[str, Any] = {}
        if summary.selection is not None:
            from .study.two_round import study_choice

            choice = study_choice(summary)
        candidates = self.candidates if self.candidates is not None else choice.get("candidates")
        defaults = self.defaults if self.defaults is not None else \
            (choice.get("defaults") if self.candidates is None else None)
        return candidates, defaults, self.prefer if self.prefer is not None else choice.get("prefer", "accuracy")

    def _feats(self) -> list[str] | None:
        """The features the candidates use: ``features``, or without one every feature the summary measured
        (``unmeasured_``: those whose every cell was hidden by min-cell suppression are left out)."""
        if self.features is not None:
            return features_param(self.features)
        return getattr(self, "measured_", None)

    def _make(self, name: str, params: dict[str, Any], coverage: float | None = None) -> MarginalEstimator:
        cls = estimator_class(name)
        kw = dict(params)
        names = cls.param_names()
        if "coverage" in names:
            kw.setdefault("coverage", self.coverage if coverage is None else coverage)
        if self._feats() is not None and "features" in names:
            kw["features"] = features_param(self._feats())
        return cls(**kw)

    # --------------------------------------------------------------- fitting
    def fit(self, summary: Any) -> "AutoLearner":
        """Candidates from a generator, fitted, estimated by the one estimator, chosen by the one rule, certified by
        the chosen estimator itself (:mod:`marg.learners.choice.candidates`)."""
        self.check_params()
        candidates, given_defaults, prefer = self._study(summary)
        self.unmeasured_ = list(summary.unmeasured) if self.features is None else []
        names = [f.name for f in summary.codebook.features if f.name not in self.unmeasured_]
        self.measured_ = names if self.unmeasured_ and names else None
        screen: dict[str, Any] | None = None
        if candidates is None and screening_applies(summary):
            try:
                gen = ScreeningCandidates(summary, coverage=self.coverage, features=self._feats())
                return self.fit_candidates(summary, gen, prefer=prefer)
            except InputError as exc:  # nothing above the noise: the label-only rule
                screen = {"applied": False, "reason": str(exc),
                          "note": f"no feature above the noise: predicting the class with the largest share, "
                                  f"{FALLBACK[0]}"}
        if screen is not None:
            return self.fit_candidates(summary, _EmptyScreen([FALLBACK], self._make, self.coverage), screen, prefer)
        cands = candidate_list(candidates)
        defaults = []
        for d in (candidate_list([c])[0] for c in given_defaults or ()):  # each as (learner, params); no prior added
            if d not in cands:
                raise InputError(f"the default candidate {d!r} is not one of the candidates")
            defaults.append(cands.index(d))
        args = (cands, self._make, self.coverage, self._screened(summary, cands), defaults)
        gen = PlainCandidates(*args) if self.one_site == "in-sample" else NoisySplitCandidates(*args, summary=summary)
        return self.fit_candidates(summary, gen, prefer=prefer)

    def _screened(self, summary: Any, cands: list) -> Callable[[str, int], Candidate] | None:
        """The screening generator's candidate factory, for candidates ``(learner, {"screened": M})`` given in a list;
        when the screen keeps nothing, each such candidate fails saying why."""
        if not any("screened" in p for _, p in cands):
            return None
        try:
            return ScreeningCandidates(summary, coverage=self.coverage, features=self._feats()).candidate
        except InputError as exc:
            def failed(s: Any, why: str = str(exc)) -> Any:
                raise InputError(why)

            return lambda name, m: Candidate(name, {"screened": m}, fit=failed, refit=failed, size=m)

    def fit_candidates(self, summary: Any, gen: Any, screen: dict[str, Any] | None = None,
                       prefer: str | None = None) -> "AutoLearner":
        """Fit on the candidates of the generator ``gen`` (what :meth:`fit` does with the generator the summary
        calls for — e.g. :class:`marg.learners.choice.screened.ScreeningCandidates` with other learners or sizes).

        The one composition: the generator proposes (lazily, batch by batch), each candidate is fitted on the
        whole summary (and certified at the per-box coverage when the generator compares certificates), each
        batch estimated by :func:`marg.learners.choice.cross_site.estimate_errors` and the choice made by the
        generator's mode of :func:`marg.learners.choice.choice_rule.choose_index`, until the generator proposes nothing
        more; then the chosen estimator certifies itself
        (:meth:`~marg.learners.estimator.base.MarginalEstimator.certificate`). ``screen``: the screen's record when it
        kept nothing (``screen_``; a screening generator records its own); ``prefer``: the choice's rule (None:
        ``self.prefer``, else ``"accuracy"``)."""
        self.check_params()
        self.prefer_ = prefer or self.prefer or "accuracy"
        if abs(float(gen.coverage) - float(self.coverage)) > 1e-12:  # its boxes' coverage is what the choice reports
            raise InputError(f"the candidates were generated at coverage {gen.coverage:g}, the choice is at "
                             f"{option('coverage', self.coverage)}: give both the same")
        self.each_coverage_ = gen.each  # one event for every certificate compared
        rows: list[CandidateRow] = []
        cands: list[Candidate] = []
        certs: list[Any] = []
        k: int | None = None
        method, words = "", ""
        while True:
            batch: list[Candidate] = []
            for cand in gen.propose(rows, k):
                row, cert = CandidateRow(cand.learner, cand.params, note=cand.note), None
                try:
                    cand.model = cand.fit(summary)
                    if gen.certify_all:
                        cert = cand.model.certificate(summary, gen.each, self._feats())
                        row.minimax_risk = randomized_risk(cand.model)
                except InputError as exc:
                    cand.model, cand.note, row.note = None, str(exc), str(exc)
                else:
                    if cert is not None:
                        row.certificate, row.kind, row.trivial = float(cert.value), cert.kind, bool(cert.trivial)
                rows.append(row)
                cands.append(cand)
                certs.append(cert)
                batch.append(cand)
                if self.callback is not None:  # progress while the candidates are fitted
                    self.callback({"stage": "auto", "learner": candidate_name(cand.learner, cand.params),
                                   "params": cand.params, "error": None, "certificate": row.certificate})
            if not batch:
                break
            gen.fitted(batch)
            live = [i for i in range(len(cands) - len(batch), len(cands)) if cands[i].model is not None]
            if gen.estimated and live:
                if self.callback is not None:
                    self.callback({"stage": "note", "text": "auto: estimating each candidate's error"})
                how, got = estimate_errors(summary, [(str(i), cands[i].refit) for i in live], gen.fallback,
                                           fitted={str(i): cands[i].model for i in live}, replicates=gen.replicates,
                                           train=gen.train)
                for key, res in got.items():
                    record_estimate(rows[int(key)], res)
                method = gen.method(how, summary, got)
            elif not gen.estimated:
                method = gen.method("", summary, {})
            k, words = gen.choose(rows, cands, self.prefer_, self.tolerance)
        rows[k].chosen = True
        chosen = cands[k].model
        assert chosen is not None
        if summary.selection is not None:  # one event, the selection-wide box, holds every candidate's certificate
            c = chosen.certificate(summary, self.coverage, self._feats())  # (selection_certificate): no Bonferroni
        else:
            c = certs[k] if certs[k] is not None else chosen.certificate(summary, gen.each, self._feats())
        # the certificate holds with every other box the choice looked at: coverage as asked (Bonferroni)
        chosen.set_certificate(type(c)(c.value, c.kind, None if c.coverage is None else float(self.coverage),
                                       c.approximate, c.n_classes, note=c.note, box=c.box))
        if certs[k] is None:
            rows[k].certificate, rows[k].kind = float(chosen.certificate_.value), chosen.certificate_.kind
            rows[k].trivial = bool(chosen.certificate_.trivial)
        record = gen.record(rows, cands, method)
        self.screen_ = record if record is not None else screen
        self._say_choice(rows)
        self.chosen_ = chosen
        self.fitted_ = [c.model for c in cands]  # every candidate fitted on the whole summary (None: failed); not saved
        self.candidates_ = rows
        self.rule_ = gen.rule(words, self.tolerance)
        self.error_method_ = method
        self.confidence_ = gen.confidence(self.coverage)
        self.patients_ = None
        if gen.patients and summary.is_noisy and all(r.certificate is None or r.trivial for r in rows):
            self.patients_ = self._patients(summary, [(c.learner, c.params) for c in cands], rows)
        self._adopt(chosen)
        return self

    def _patients(self, summary: Any, cands: list, rows: list[CandidateRow]) -> Any:
        from .certification.sample_size import patients_needed

        order = sorted((k for k, r in enumerate(rows) if r.certificate is not None),
                       key=lambda k: (rows[k].certificate, math.inf if rows[k].error is None else rows[k].error, k))
        last = None
        for k in order:
            name, params = cands[k]
            if "screened" in params:  # its certificate is over every feature's box, not a refit at scale
                continue

            def certificate_at(scaled: Any, name: str = name, params: dict = params) -> float:
                try:
                    est = self._make(name, params, self.each_coverage_).fit(scaled)
                    return float(est.certificate(scaled, self.each_coverage_, self._feats()).value)
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
                               "auto_prefer": self.prefer_, "auto_error_method": self.error_method_}
        if getattr(self, "confidence_", None) is not None:
            out["auto_confidence"] = self.confidence_
        if getattr(self, "unmeasured_", None):
            out["auto_unmeasured"] = list(self.unmeasured_)
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
        from .certification.sample_size import PatientsNeeded

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
        self.prefer_ = str(state.get("auto_prefer") or self.prefer or "accuracy")
        self.unmeasured_ = list(state.get("auto_unmeasured") or [])
        self._adopt(chosen)


def candidate_list(candidates: Sequence[Any] | None) -> list[tuple[str, dict[str, Any]]]:
    """The candidates as (learner, params) pairs (None: :data:`DEFAULT_CANDIDATES`;
    :func:`marg.learners.choice.candidates.candidate_list`)."""
    return _candidate_list(candidates, DEFAULT_CANDIDATES)


class _EmptyScreen(PlainCandidates):
    """After an empty screen: the label-only rule alone, not estimated (it errs at the share of the classes it does
    not predict, which its certificate bounds)."""

    estimated = False

    def method(self, how: str, summary: Any, estimates: dict[str, Any]) -> str:
        return ("not estimated (the one candidate after an empty screen: the label-only rule errs at the share of the "
                "classes it does not predict, which its certificate bounds)")

    def rule(self, words: str, tolerance: float = 0.0) -> str:
        return "the screen: no feature passed it, so the label table alone decides"
