"""The candidates of the automatic choice: what a candidate is, the generators that propose them, the row that reports
one.

:class:`marg.learners.auto.AutoLearner` is one composition (issue 36)::

    generator.propose(chosen) ──► Candidate ──fit──► estimator ──► cross_site.estimate_errors (ONE estimator)
         ──► choice_rule.choose_index (ONE rule, one tolerance) ──► chosen.certificate(summary, each) (the estimator's
         own)

A **generator** proposes candidates, lazily (a learner whose fit failed is not tried again), and
says how its candidates are compared: :class:`PlainCandidates` (the learners as given, each
certified, the choice by certificate among the estimates within noise) and
:class:`marg.learners.choice.screened.ScreeningCandidates` (on wide summaries: (learner, M) on the top M
screened features, the label-only rule as M = 0, M grown while the largest is chosen; only the
chosen one certified, with the selection-aware box). Every generator's candidates are estimated
by :func:`marg.learners.choice.cross_site.estimate_errors` and chosen by
:func:`marg.learners.choice.choice_rule.choose_index`; the generator only fixes the one-site fallback of
the estimate and the rule's mode (``by_certificate``, the tie order).

A :class:`Candidate` is a learner with its parameters and two fits: ``fit`` on the whole summary
(the model, its coverage the choice's per-box coverage) and ``refit`` on a fold or a training set
(the estimate; for a screened candidate the screen is repeated there).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterator, Sequence

from marg.errors import InputError

from ..estimator.base import MarginalEstimator, estimator_class
from ..certification.choice_certificates import split_coverage
from .choice_rule import PRIOR, TOLERANCE, choose_index, estimate_se
from .cross_site import MAX_SITES, REPLICATES, ErrorEstimate, noisy_replica


@dataclass(eq=False)
class Candidate:
    """One candidate: ``learner`` with ``params`` (as the report shows them), its two fits, and once fitted its
    ``model``.

    ``size``: the number of screened features it uses (0: none, or not screened); ``note``: what its row says
    before any estimate (why its fit failed, once it has)."""

    learner: str
    params: dict[str, Any]
    fit: Callable[[Any], MarginalEstimator]
    refit: Callable[[Any], MarginalEstimator]
    size: int = 0
    note: str = ""
    model: MarginalEstimator | None = None


@dataclass
class CandidateRow:
    """One candidate of the automatic choice: what was estimated and certified, and whether it was chosen.

    ``error`` None: no estimate (``note`` says why); ``error_se``: the estimate's own standard error
    (:func:`marg.learners.choice.choice_rule.estimate_se`; None in sample, where it has no measure); ``certificate``
    None: not fitted (``note``) or, on screened features, not the chosen one (only the chosen is certified)."""

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
    error_se: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def record_estimate(row: CandidateRow, res: ErrorEstimate | str) -> None:
    """Put an estimate (or the reason there is none) on its row."""
    if isinstance(res, str):
        row.note = (row.note + "; " if row.note else "") + f"no error estimate: {res}"
        return
    row.error, row.method, row.folds = float(res.value), res.method, list(res.folds)
    row.fold_weights = list(res.weights)
    row.error_se = res.se if res.se is not None else estimate_se(row.folds, row.fold_weights or None)


def fold_weights(rows: Sequence[CandidateRow]) -> list[float] | None:
    """The folds' weights (the sites' n), the same for every row that has them."""
    return next((r.fold_weights for r in rows if r.fold_weights), None)


def choose(rows: Sequence[CandidateRow], prefer: str = "accuracy", tolerance: float = TOLERANCE,
           defaults: Sequence[int] = ()) -> tuple[int, str]:
    """The index of the chosen candidate and the rule in words (:mod:`marg.learners.choice.choice_rule`, the one rule).

    Only candidates with a certificate (fitted) are considered; the folds' weights are the rows'.

    Raises
    ------
    InputError
        No candidate was fitted.
    """
    return choose_index(rows, prefer, tolerance, weights=fold_weights(rows), defaults=defaults)


FOLD_PARAMS: dict[str, dict[str, Any]] = {"nb": {"certify": "bound"}}
"""Parameters of the leave-one-site-out folds only (their certificates are not used)."""


class PlainCandidates:
    """The learners as given: each fitted and certified at 1 − α/m (m candidates: one event for the whole choice),
    estimated in sample on one site; the choice by :func:`choose_index` with ``prefer`` (certificates compared).

    A candidate ``(learner, {"screened": M})`` is the screening generator's (``screened(learner, M)``:
    :meth:`marg.learners.choice.screened.ScreeningCandidates.candidate`) — the learner on the top M screened
    features, screened again in every fold — estimated by the same estimator on the same folds and
    certified by itself (over every feature's box, valid for the selection) at the same 1 − α/m."""

    fallback = "in-sample"
    replicates = 0
    certify_all = True
    patients = True

    def __init__(self, candidates: Sequence[tuple[str, dict[str, Any]]], make: Callable[..., MarginalEstimator],
                 coverage: float, screened: Callable[[str, int], Candidate] | None = None,
                 defaults: Sequence[int] = ()):
        self.candidates = list(candidates)
        # the indices of the choice's default candidates, in order (choice_rule, "Defaults")
        self.defaults = list(defaults)
        self.make = make
        self.screened = screened
        self.coverage = float(coverage)
        self.each = split_coverage(coverage, len(self.candidates))
        self._proposed = False

    estimated = True

    def propose(self, rows: Sequence[CandidateRow], k: int | None) -> Iterator[Candidate]:
        """Every candidate, once."""
        if self._proposed:
            return
        self._proposed = True
        for name, params in self.candidates:
            if "screened" in params:  # (learner, M) of the screening generator, estimated and certified like the rest
                assert self.screened is not None
                yield self.screened(name, int(params["screened"]))
                continue
            yield Candidate(name, params, fit=lambda s, n=name, p=params: self.make(n, p, self.each).fit(s),
                            refit=lambda s, n=name, p=params: self.make(n, {**p,
                                                                            **FOLD_PARAMS.get(n, {})}).fit_predictor(s))

    def fitted(self, batch: Sequence[Candidate]) -> None:
        """Nothing to check: a candidate that could not be fitted keeps its row, saying why."""

    train = None

    def choose(self, rows: Sequence[CandidateRow], cands: Sequence[Candidate], prefer: str, tolerance: float
               ) -> tuple[int, str]:
        return choose(rows, prefer, tolerance, self.defaults)

    def method(self, how: str, summary: Any, estimates: dict[str, Any]) -> str:
        parts = summary.site_parts
        pairs = ("" if summary.feature_cliques(2)
                 else "; no pair tables, so the features are simulated independent given the label")
        if how == "loso":
            return (f"leave-one-site-out over {len(parts)} sites: each candidate refitted without a site, its error on "
                    "rows simulated from that site's tables (tree-augmented naive Bayes), weighted by the sites' "
                    f"n{pairs}")
        if how == "optimism":
            return ("the model as fitted, its error on rows simulated from the tables (tree-augmented naive Bayes), "
                    f"plus the optimism of a refit on studies of the same {len(parts)} sites drawn again from their "
                    f"own tables (the study bootstrap){pairs}")
        why = {0: "no site's own tables were kept, only their sum", 1: "one site's tables"}.get(
            len(parts), f"{len(parts)} sites (leave-one-site-out up to {MAX_SITES})")
        return (f"in sample ({why}): each model's error on rows simulated from the tables it was fitted on "
                f"(tree-augmented naive Bayes) — optimistic{pairs}")

    def rule(self, words: str, tolerance: float = 0.0) -> str:
        return words

    def confidence(self, coverage: float) -> dict[str, Any]:
        return confidence_record(coverage, len(self.candidates), self.each)

    def record(self, rows: list[CandidateRow], cands: Sequence[Candidate], how: str) -> dict[str, Any] | None:
        """The generator's own record for the report (None: none)."""
        return None


def candidate_list(candidates: Sequence[Any] | None, default: Sequence[tuple[str, dict[str, Any]]]
                   ) -> list[tuple[str, dict[str, Any]]]:
    """The candidates as (learner, params) pairs (None: ``default``); a bare name means its defaults. One-line
    InputError for a malformed entry, an unknown learner, auto itself or none. The label-only rule is always one."""
    if candidates is None:
        return [(n, dict(p)) for n, p in default]
    out = []
    for c in candidates:
        if isinstance(c, str):
            c = (c, {})
        if not (isinstance(c, (tuple, list)) and len(c) == 2 and isinstance(c[0], str) and isinstance(c[1], dict)):
            raise InputError(f"a candidate must be (learner, params), got {c!r}")
        if c[0] == "auto":
            raise InputError("a candidate of the automatic choice cannot be auto itself")
        estimator_class(c[0])  # one-line error for an unknown learner
        if "screened" in c[1]:
            m = c[1]["screened"]
            if set(c[1]) != {"screened"} or isinstance(m, bool) or not isinstance(m, int) or m < 1 or c[0] == PRIOR:
                raise InputError(f"a screened candidate is (learner, {{'screened': M}}) with M a positive integer and "
                                 f"no other parameter, got {c!r}")
        out.append((c[0], dict(c[1])))
    if not out:
        raise InputError("candidates must name at least one learner")
    if all(name != PRIOR for name, _ in out):  # the label-only rule is always a candidate
        out.append((PRIOR, {}))
    return out


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
    is named with its numbers, and ``--prefer certificate`` with what it would choose when that is another
    candidate; the holdout route (a bound measured on
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
        sub = [CandidateRow(**{f: v for f, v in r.items() if f in fields}) for r in rows]
        k, _ = choose(sub, "certificate")
        c = rows[k]
        by_cert = "" if c is chosen else (
            f"marg learn --prefer certificate chooses {candidate_name(c['learner'], c['params'])} "
            f"({c['certificate']:.4f}" + ("" if c.get("error") is None else f", estimated error {c['error']:.4f}")
            + "); ")
        return (f"{head}; {candidate_name(u['learner'], u['params'])} has a useful one ({u['certificate']:.4f}{est}"
                f"{mine}); {by_cert}or {holdout}")
    return f"{head}; no candidate's is useful from these tables: {holdout}"


class NoisySplitCandidates(PlainCandidates):
    """The plain candidates, estimated on one summary by the split with noisy training sets (``one_site="split"``)."""

    fallback = "split"

    def __init__(self, *args: Any, summary: Any) -> None:
        super().__init__(*args)
        self.replicates = REPLICATES
        self.train = noisy_replica(summary)

    def method(self, how: str, summary: Any, estimates: dict[str, Any]) -> str:
        if how != "split":
            return super().method(how, summary, estimates)
        return (f"split ({len(summary.site_parts) or 'no'} site's own tables): each candidate refitted on "
                f"{self.replicates} training sets of the summary's n drawn from its tables (tree-augmented naive "
                "Bayes), counted and given the release's own noise, its error on separate simulated rows")
