"""Screening as a candidate generator of the automatic choice: (learner, M) on the top-M screened features, certified
for the selection.

When the features outnumber what pair tables can carry (:func:`screening_applies`), the
automatic choice (:class:`marg.learners.auto.AutoLearner`) takes its candidates from
:class:`ScreeningCandidates`; they are estimated by the choice's one estimator
(:func:`marg.learners.choice.cross_site.estimate_errors`) and chosen by its one rule
(:func:`marg.learners.choice.choice_rule.choose_index`), like any candidate:

1. **Screen** (:mod:`marg.learners.selection.screening`): the features ranked by the lower
   confidence bound of their L1 dependence on the label, from the first-order tables and
   the DP noise as recorded (with K > 2 classes, the classes taking turns, each by its
   one-vs-rest bound); only features whose bound is positive are candidates.
2. **Propose** the label-only rule (M = 0) and each learner of ``learners`` (naive Bayes,
   MRC; Rényi and DCC only where the pair tables of the screened features were released —
   the two-round request, ``marg request --top M`` then ``marg export --pairs @request.json``)
   on the top M features, for every M of ``sizes``; a learner that cannot be fitted is not
   tried at a larger M.
2b. **The second round** (exact tables holding the pairs of the top k screened features, from
   ``marg request --top k``, and Rényi among ``learners``): the label-only rule and Rényi on
   the top M of those k, M of ``sizes`` (and k itself), each M with the ridge of its smallest
   generalized cross-validation computed from the pair tables
   (:func:`marg.learners.classifiers.renyi_summary.gcv_path`); the GCV is the estimate, the one rule takes
   the smallest (``prefer="accuracy"``). Rows simulated from the tables are not used here:
   they miss the correlation between genes that makes more genes look better than they are
   (on the gene sets it chose naive Bayes on 300 genes, estimated almost perfect where the fold
   erred far more: BENCHMARKS.md, "Screen, then learn on the gene sets").
3. **Choose** (learner, M) by the one rule without certificates (only the chosen one is
   certified): the fewest features among the configurations whose estimated error is within
   noise of the smallest (ties: the order of ``learners``; the label-only rule last); while
   that is the largest M tried, M = :data:`GROWTH` × it is proposed too (a signal spread over
   many weak features, as on four-class TOX_171, is not cut at an arbitrary cap; a set whose
   estimate has levelled off is not charged for it). The estimate never uses the tables it is
   judged on: with 2–20 sites' own tables, **leave-one-site-out** — screening *and* fitting
   repeated on the other sites' sum (each candidate's ``refit``), the error on rows simulated
   from the left-out site's tables; on one site, the estimator's **split** fallback
   (:func:`marg.learners.choice.cross_site.split_errors`): training sets of the summary's class
   sizes drawn from the distribution the tables determine, each screened by :meth:`train`
   (with its own request round's pair tables when the summary holds some) and every
   candidate refitted there. It sees the noise of screening thousands of features on n rows;
   it cannot see dependence between the features that the tables do not release.
4. **Certify**: the chosen model carries ``selected_from_`` and certifies itself
   (:meth:`marg.learners.estimator.base.MarginalEstimator.certificate`, :func:`selection_certificate`) over
   the uncertainty set of EVERY feature's first-order tables, the box calibrated for all their
   cells at 1 − α/2 (the label-only rule: its label table's box at 1 − α/2; two boxes could
   carry the choice, Bonferroni); features the rule does not use carry no weight (the LP keeps
   only the rule's cells, which can only raise the bound). Why the selection does not
   invalidate it: the certificate bounds W(h) = max_{p ∈ U} P_p(h(X) ≠ Y) with
   U = {p : |E_pΦ − τ| ≤ λ} over all features. U is fixed before any screening, and the event
   "the true distribution lies in U" has probability ≥ its coverage whatever rule is later
   chosen; on that event W(h) ≥ the true error of *every* rule h at once, in particular of the
   one the data selected. A box calibrated for the screened features only (fewer Bonferroni
   terms) would not have this property, since which features those are depends on the same data.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from itertools import combinations
from typing import Any, Iterator, Sequence

import numpy as np

from marg.errors import InputError

from ..estimator.base import Certificate, MarginalEstimator, estimator_class
from .candidates import Candidate, CandidateRow, confidence_record, fold_weights
from ..certification.choice_certificates import split_coverage
from .choice_rule import PRIOR, TOLERANCE, choose_index
from .cross_site import REPLICATES
from ..classifiers.renyi_summary import gcv_path, sampling_ridge
from ..selection.screening import screen_scores

__all__ = ["GROWTH", "LEARNERS", "REPLICATES", "SCREEN_MIN_FEATURES", "SIZES", "Config",
           "ScreeningCandidates", "paired_prefix", "screen_line", "screening_applies", "selection_certificate"]

SCREEN_MIN_FEATURES = 100
"""Screening is the default when there are more discrete features than this and the pair
tables do not cover all of them (:func:`screening_applies`)."""
SIZES: tuple[int, ...] = (5, 10, 20, 50, 100)
"""The numbers of screened features tried first."""
GROWTH = 3
"""When the chosen M is the largest tried (the estimate still falls there by more than the
tolerance), M = GROWTH × that is tried next, until the choice is below the largest M or every
feature that passed the screen is used."""
LEARNERS: tuple[str, ...] = ("nb", "mrc", "renyi")
"""The learners tried on the screened features (Rényi needs their pair tables; without them it is skipped, saying
so)."""
FIT_PARAMS: dict[str, dict[str, Any]] = {"nb": {"certify": "bound"}, "renyi": {"certify": "first"}}
"""Parameters of the fits (the chosen one certifies itself for the selection, so each fit takes its cheapest
valid certificate). Rényi on exact tables also gets the ridge against the sampling noise of n rows
(:func:`marg.learners.classifiers.renyi_summary.sampling_ridge`): on the screened genes M ≫ n."""


def screening_applies(summary: Any) -> bool:
    """The rule under which ``marg learn`` screens by default: more than
    :data:`SCREEN_MIN_FEATURES` discrete features, and pair tables that do not cover every
    one of them (a first-order release, or the pairs of a requested few)."""
    cb = summary.codebook
    discrete = set(cb.discrete_names)
    if len(discrete) <= SCREEN_MIN_FEATURES:
        return False
    paired = {f for c in summary.feature_cliques(2) for f in c}
    return not discrete <= paired


@dataclass
class Config:
    """One (learner, M) tried, as the ``screen`` record lists it: its estimated error (None: ``note`` says why)."""

    learner: str
    size: int
    error: float | None = None
    folds: list[float] = field(default_factory=list)
    chosen: bool = False
    note: str = ""
    fold_weights: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def selection_certificate(est: MarginalEstimator, summary: Any, coverage: float, exact: bool = False,
                          time_limit: float | None = None) -> Certificate:
    """A bound on W(h) of ``est``'s rule over the first-order uncertainty set of every discrete feature (module
    docstring, 4).

    U_all = {p : |E_pΦ − τ| ≤ λ} over every discrete feature's first-order cells, λ calibrated
    for all K·D of them together at ``coverage``. The rule uses the features S only; the
    LP is solved over the cells of S with THE SAME λ (the Bonferroni count of the whole map,
    ``n_intervals``): that set U_S contains the projection of U_all (dropping constraints
    only enlarges it), so W(h) over U_S ≥ W(h) over U_all ≥ the true error whenever the
    true distribution lies in U_all — an event of probability ≥ ``coverage`` fixed before
    screening. (Solving over U_all itself, the unused features with zero weight, gives a
    value between the two; on thousands of genes its LP takes minutes.)
    :func:`marg.learners.certification.certify.certify_projected` computes it: the one-LP bound W_L ≥ W(h)
    by default, refined by row generation with ``exact`` (at most ``time_limit`` seconds,
    valid at any stop). A screened model's :meth:`~marg.learners.estimator.base.MarginalEstimator.certificate`
    is this at ``exact=False``."""
    from ..certification.certify import certify_projected

    return certify_projected(est, summary, coverage=coverage, exact=exact, time_limit=time_limit)


def paired_prefix(summary: Any, ranked: Sequence[str]) -> int:
    """How many of the first features of ``ranked`` have every pair among them released (the
    second round's ``marg request --top k``); 0 or 1 when there are no such pairs."""
    pairs = {frozenset(p) for c in summary.feature_cliques() if len(c) >= 2 for p in combinations(c, 2)}
    k = 0
    while k < len(ranked) and all(frozenset((ranked[k], ranked[j])) in pairs for j in range(k)):
        k += 1
    return k if k >= 2 else 0


class ScreeningCandidates:
    """The screening generator of the automatic choice (module docstring): its candidates, how they are compared, its
    record.

    Parameters
    ----------
    summary : Summary
    coverage : float
        Coverage of the screening bounds and of the choice's certificate (each of its two boxes at 1 − α/2).
    features : sequence of str or None
        The features screened (None: every discrete feature).
    learners : sequence of str
        Registered learners that take ``features`` and whose rule is additive (certifiable by W(h)).
    sizes : sequence of int
        The numbers M of top-ranked features proposed first (capped at the number with a positive
        bound); while the choice is the largest M tried, :data:`GROWTH` × it is proposed next.
    replicates : int
        Training sets of the one-site (split) estimate.
    ranked : sequence of str or None
        The features in the order to take them (None: the screen's, those with a positive bound) — e.g. the
        genes of a request the sites answered.

    Raises
    ------
    InputError
        No feature's screening bound is positive (the noise swamps every dependence); later
        (:meth:`fitted`), no learner could be fitted on the screened features.
    """

    fallback = "split"
    certify_all = False
    patients = False

    def __init__(self, summary: Any, coverage: float = 0.95, features: Sequence[str] | None = None,
                 learners: Sequence[str] = LEARNERS, sizes: Sequence[int] = SIZES, replicates: int = REPLICATES,
                 ranked: Sequence[str] | None = None):
        if not sizes or any(int(m) != m or m < 1 for m in sizes):
            raise InputError(f"sizes must be positive integers, got {list(sizes)!r}")
        if int(replicates) != replicates or replicates < 1:
            raise InputError(f"replicates must be a positive integer, got {replicates!r}")
        self.summary, self.coverage, self.features, self.learners = summary, float(coverage), features, tuple(learners)
        self.replicates = int(replicates)
        self.each = split_coverage(coverage, 2)  # two boxes could carry the choice: the label table's, every feature's
        self.scores = screen_scores(summary, features, coverage)
        self.ranked = self.scores.rank() if ranked is None else list(ranked)
        if not self.ranked:
            raise InputError(f"no feature's dependence on the label is above the noise of these tables "
                             f"(all {len(self.scores.names)} screening lower bounds are 0 at coverage {coverage:g})")
        self._ranks: dict[int, tuple[Any, list[str]]] = {id(summary): (summary, self.ranked)}
        self.paired = paired_prefix(summary, self.ranked)
        self.path = None  # the second round's GCV path
        if "renyi" in self.learners and self.paired >= 2 and not summary.is_noisy:
            grid = sorted({min(int(m), self.paired) for m in sizes} | {self.paired})
            self.path = gcv_path(summary, self.ranked, [0] + grid)
        self.grid = sorted({min(int(m), len(self.ranked)) for m in sizes})
        self.estimated = self.path is None
        self.cands: list[Candidate] = []
        self._last: list[Candidate] = []

    # ------------------------------------------------------------- the candidates
    def _rank(self, summary: Any) -> list[str]:
        """The screen of ``summary`` (once per summary: every candidate of a fold shares it)."""
        got = self._ranks.get(id(summary))
        if got is None or got[0] is not summary:
            got = (summary, screen_scores(summary, self.features, self.coverage).rank())
            self._ranks[id(summary)] = got
        return got[1]

    def _fit(self, summary: Any, learner: str, size: int, ridge: float | None = None) -> MarginalEstimator:
        if learner == PRIOR:  # the label-only rule reads no feature; fitted at its box's coverage, 1 − α/2
            return estimator_class(PRIOR)(coverage=self.each).fit(summary)
        ranked = self._rank(summary)
        if not ranked:
            raise InputError("no feature's dependence on the label is above the noise of these tables")
        cls, top = estimator_class(learner), ranked[:size]
        kw: dict[str, Any] = {**FIT_PARAMS.get(learner, {}), "features": list(top)}
        if ridge is not None:
            kw["ridge"] = ridge
        elif learner == "renyi" and not summary.is_noisy:  # under DP its ridge follows the noise
            kw["ridge"] = sampling_ridge(summary, top)
        if "coverage" in cls.param_names():
            kw["coverage"] = self.coverage
        est = cls(**kw).fit(summary)
        est.selected_from_ = tuple(self.scores.names)  # chosen from these tables: it certifies itself for the selection
        return est

    def candidate(self, learner: str, size: int, ridge: float | None = None, note: str = "") -> Candidate:
        """(``learner``, M = ``size``) on the top M screened features (its ``fit`` on the whole summary, its ``refit``
        screening the fold or training set it is given first); ``ridge``: Rényi's, fixed."""
        c = Candidate(learner, {} if learner == PRIOR else {"screened": size},
                      fit=lambda s: self._fit(s, learner, size, ridge), refit=lambda s: self._fit(s, learner, size),
                      size=size, note=note)
        self.cands.append(c)
        return c

    def propose(self, rows: Sequence[CandidateRow], k: int | None) -> Iterator[Candidate]:
        """The next batch, lazily (the caller fits each as it comes): first the label-only rule and every
        (learner, M) of the grid (the second round: the label-only rule and Rényi on each M, at its ridge); then,
        while the chosen (``rows[k]``) is at the largest M tried, GROWTH × that M; then nothing."""
        if self.path is not None:
            if not self.cands:
                yield self.candidate(PRIOR, 0, note=f"GCV {self.path[0][2]:.4g}: the intercept alone, the larger class")
                for m in sorted({t[0] for t in self.path} - {0}):
                    _, r, g = min((t for t in self.path if t[0] == m), key=lambda t: t[2])
                    yield self.candidate("renyi", m, r, note=f"GCV {g:.4g} at ridge {r:g}")
            return
        if not self.cands:
            grid = self.grid
            batch = [self.candidate(PRIOR, 0)]  # the label-only rule is always a configuration
            yield batch[0]
        else:
            live = [c for c in self.cands if c.model is not None]
            top = max(c.size for c in live)
            best = self.cands[k] if k is not None else None
            # the estimate still falls at the largest M tried: try GROWTH times more (module docstring, 3)
            if best is None or rows[k].error is None or best.size < top or top >= len(self.ranked) \
                    or not any(c.model is not None and c.learner != PRIOR for c in self._last):
                return
            grid, batch = [min(len(self.ranked), GROWTH * top)], []
        failed = {c.learner for c in self.cands if c.model is None and c.learner != PRIOR and c.size}
        for name in self.learners:
            for m in grid:
                if name in failed:
                    break
                c = self.candidate(name, m)
                batch.append(c)
                yield c
                if c.model is None:  # e.g. Rényi without the screened features' pair tables: one row says why
                    failed.add(name)
        self._last = batch

    def fitted(self, batch: Sequence[Candidate]) -> None:
        """After the first batch: at least one learner besides the label-only rule must have been fitted."""
        if self.path is None and batch and batch[0].learner == PRIOR \
                and sum(c.model is not None for c in batch) <= 1:
            raise InputError("no learner could be fitted on the screened features: "
                             + "; ".join(f"{c.learner}: {c.note}" for c in batch if c.note))

    def train(self, X: np.ndarray, y: np.ndarray) -> Any:
        """A split training set's summary: its exact first-order tables, and when the summary holds the pairs of a
        requested few, the pairs of ITS OWN top k (its request round); None when its screen keeps nothing."""
        from marg.marginals.counts.counting import count_tables
        from marg.marginals.summary import Summary
        from marg.marginals.counts.tables import plan_cliques

        cb = self.summary.codebook
        train = Summary.from_rows(cb, X, y)
        ranked = screen_scores(train, self.features, self.coverage).rank()
        if not ranked:
            return None
        k_pairs = len({f for c in self.summary.feature_cliques() if len(c) == 2 for f in c})
        if k_pairs and len(ranked) > 1:
            plan = plan_cliques(cb, "pairs", list(combinations(ranked[:k_pairs], 2)))
            train = Summary(cb, train.tables + count_tables(cb, X, y, [c for c in plan if len(c) > 2]))
        self._ranks[id(train)] = (train, ranked)
        return train

    # ------------------------------------------------------------- the choice
    def choose(self, rows: Sequence[CandidateRow], cands: Sequence[Candidate], prefer: str, tolerance: float
               ) -> tuple[int, str]:
        """The one rule (:func:`choose_index`) without certificates, among the fitted configurations: the fewest
        features within noise of the best (the label-only rule last); the second round: the smallest GCV."""
        live = [i for i, c in enumerate(cands) if c.model is not None]
        if self.path is not None:
            gcv = [_Gcv(cands[i].learner, min(t[2] for t in self.path if t[0] == cands[i].size)) for i in live]
            j, words = choose_index(gcv, "accuracy", 0.0, by_certificate=False)  # no folds: the smallest GCV
            return live[j], words
        order = {nm: n for n, nm in enumerate(self.learners)}
        keys = [(1, 0, 0) if cands[i].learner == PRIOR else (0, cands[i].size, order.get(cands[i].learner, len(order)))
                for i in live]
        sub = [rows[i] for i in live]
        j, words = choose_index(sub, "certificate", tolerance, weights=fold_weights(sub), by_certificate=False,
                                order=keys)
        return live[j], words

    def method(self, how: str, summary: Any, estimates: dict[str, Any]) -> str:
        if self.path is not None:
            return (f"second round: Rényi on the top M of the {self.paired} features whose pairs were released, M and "
                    f"the ridge by generalized cross-validation from the pair tables (GCV = γ / (1 − df/n)², no row "
                    f"needed; M = 0: the label-only rule)")
        if how == "loso":
            return (f"leave-one-site-out over {len(summary.site_parts)} sites: screening and fitting repeated without "
                    f"each site, the error on rows simulated from that site's tables")
        if estimates and all(isinstance(v, str) for v in estimates.values()):
            return "no estimate (rows cannot be simulated from these tables); the smallest M of the first learner"
        return (f"one site: {self.replicates} training sets of the summary's class sizes drawn from the distribution "
                f"its tables determine, each screened and fitted, the error on a separate simulated population")

    def rule(self, words: str, tolerance: float = TOLERANCE) -> str:
        if self.path is not None:
            return (f"the second round: the (M, ridge) of the smallest GCV among {len(self.path)}, M = 0 the "
                    f"label-only rule; certified over the label table's box or every feature's first-order "
                    f"uncertainty set, each at α/2")
        return (f"screening: the fewest of the top-M features (of {len(self.ranked)} whose screening lower bound is "
                "positive) among the (learner, M) whose estimated error is within noise of the best "
                f"(max({tolerance:g}, one standard error over the folds)) and not above the label-only rule's; "
                f"certified over every feature's first-order uncertainty set")

    def confidence(self, coverage: float) -> dict[str, Any]:
        rec = confidence_record(coverage, 2, self.each)
        rec["words"] = (f"two boxes could carry the chosen rule's certificate (every feature's first-order "
                        f"cells, the label table's), each at {rec['each']:g}: the chosen one holds at {coverage:g} "
                        f"(Bonferroni)")
        return rec

    def record(self, rows: list[CandidateRow], cands: Sequence[Candidate], method: str) -> dict[str, Any]:
        """The ``screen`` key of ``marg learn --json`` and the model's report (every (learner, M) under ``configs``);
        the rows keep their folds, their weights only here."""
        k = next(i for i, r in enumerate(rows) if r.chosen)
        configs = [Config(c.learner, c.size, r.error, r.folds, r.chosen, r.note, r.fold_weights)
                   for r, c in zip(rows, cands)]
        for r in rows:
            r.fold_weights = []
        top = self.ranked[: cands[k].size]
        return {"applied": True, "learner": cands[k].model.learner, "size": len(top), "features": list(top),
                "lower_bounds": [float(v) for v in self.scores.lower_of(top)], "screened": len(self.ranked),
                "scored": len(self.scores.names), "configs": [c.to_dict() for c in configs], "method": method}


@dataclass
class _Gcv:
    """A second-round configuration as the one rule sees it: its GCV as the estimate."""

    learner: str
    error: float
    folds: tuple = ()
    certificate: None = None


def screen_line(report: dict[str, Any]) -> str | None:
    """One line for a screened choice: the features used, how many of how many, and by which learner
    (or why nothing passed the screen); None when the report has no screening record."""
    scr = report.get("screen")
    if not scr:
        return None
    if not scr.get("applied"):
        return str(scr["note"])
    return (f"screened: {scr['size']} of {scr['scored']} features used by {scr['learner']} "
            f"({scr['screened']} above the noise): {', '.join(scr['features'])}")
