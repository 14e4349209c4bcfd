"""Screen, then learn: a learner on the top-M screened features, M and the learner chosen without test data, certified for the selection.

When the features outnumber what pair tables can carry (:func:`screening_applies`), the
automatic choice (:class:`marg.learners.auto.AutoLearner`) works on a screened subset:

1. **Screen** (:mod:`marg.learners.screening`): the features ranked by the lower
   confidence bound of their L1 dependence on the label, from the first-order tables and
   the DP noise as recorded (with K > 2 classes, the classes taking turns, each by its
   one-vs-rest bound); only features whose bound is positive are candidates.
2. **Fit** each learner of ``learners`` (naive Bayes, MRC; Rényi and DCC only where the
   pair tables of the screened features were released — the two-round request,
   ``marg request --top M`` then ``marg export --pairs @request.json``) on the top M
   features, for every M of ``sizes``.
2b. **The second round** (exact tables holding the pairs of the top k screened features, from
   ``marg request --top k``, and Rényi among ``learners``): Rényi on the top M of those k, M
   of ``sizes`` (and k itself) and its ridge chosen by generalized cross-validation computed
   from the pair tables (:func:`marg.learners.renyi_summary.gcv_path`); step 3's simulation
   is not used, because rows simulated from the tables miss the correlation between genes
   that makes more genes look better than they are (on the gene sets it chose naive Bayes on
   300 genes with an estimated error of 0.001 where the fold erred 0.29).
3. **Choose** (learner, M): the fewest features among the configurations whose estimated
   error is within ``tolerance`` of the smallest (ties: the order of ``learners``;
   :func:`choose_config`); while that is the largest M tried, M = :data:`GROWTH` × it is
   tried too (a signal spread over many weak features, as on four-class TOX_171, is not cut
   at an arbitrary cap; a set whose estimate has levelled off is not charged for it). The
   estimate never uses the tables it is judged on:

   - with 2–20 sites' own tables, **leave-one-site-out**
     (:func:`marg.learners.cross_site.loso_errors`): screening *and* fitting repeated on the
     other sites' sum, the error on rows simulated from the left-out site's tables;
   - on one site, a **parametric split of the released tables**: ``replicates`` training
     sets of the summary's class sizes drawn from the distribution the tables determine
     (:func:`marg.learners.cross_site.tan_sample`: features independent given the label
     when no pair table was released), each screened and fitted from its own exact
     first-order tables, each configuration's error measured on a separate simulated
     population. It sees the noise of screening thousands of features on n rows; it
     cannot see dependence between the features that the tables do not release.

4. **Certify** (:func:`selection_certificate`) the chosen rule over the uncertainty set of
   EVERY feature's first-order tables, the box calibrated for all their cells at
   ``coverage`` (:mod:`marg.learners.calibration`); features the rule does not use carry
   no weight (the LP keeps only the rule's cells, which can only raise the bound). Why the
   selection does not invalidate it: the certificate bounds
   W(h) = max_{p ∈ U} P_p(h(X) ≠ Y) with U = {p : |E_pΦ − τ| ≤ λ} over all features. U is
   fixed before any screening, and the event "the true distribution lies in U" has
   probability ≥ ``coverage`` whatever rule is later chosen; on that event W(h) ≥ the
   true error of *every* rule h at once, in particular of the one the data selected. A box
   calibrated for the screened features only (fewer Bonferroni terms) would not have
   this property, since which features those are depends on the same data.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from itertools import combinations
from typing import Any, Sequence

import numpy as np

from marg.errors import InputError

from .base import Certificate, MarginalEstimator, estimator_class
from .choice_certificates import split_coverage
from .choice_rule import PRIOR, TOLERANCE, choose_index
from .cross_site import MAX_SITES, MIN_SITES, SEED, loso_errors, sample_error, tan_sample
from .renyi_summary import gcv_path, sampling_ridge
from .screening import Scores, screen_scores

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
"""The learners tried on the screened features (Rényi needs their pair tables; without them it is skipped, saying so)."""
REPLICATES = 3
"""Training sets drawn for the one-site estimate."""
POPULATION = 2000
"""Simulated rows per class on which each configuration's error is measured (Monte Carlo error ≤ 0.5/√2000 ≈ 0.011 per class)."""
FIT_PARAMS: dict[str, dict[str, Any]] = {"nb": {"certify": "bound"}, "renyi": {"certify": "first"}}
"""Parameters of the fits (their own certificates are replaced by :func:`selection_certificate`, so each
takes its cheapest valid one). Rényi on exact tables also gets the ridge against the sampling noise
of n rows (:func:`marg.learners.renyi_summary.sampling_ridge`): on the screened genes M ≫ n."""


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
    """One (learner, M) tried: its estimated error (None: ``note`` says why) and whether it was chosen."""

    learner: str
    size: int
    error: float | None = None
    folds: list[float] = field(default_factory=list)
    chosen: bool = False
    note: str = ""
    fold_weights: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ScreenResult:
    """What :func:`screen_and_learn` chose and why.

    Attributes
    ----------
    chosen : MarginalEstimator
        The chosen learner fitted on the top ``size`` features of the whole summary, its
        ``certificate_`` the selection-valid one (:func:`selection_certificate`).
    features : list of str
        The features it uses (the top ``size`` of the ranking), best first.
    ranked : int
        How many features had a positive screening bound (of ``scored``).
    scored : int
    configs : list of Config
    method : str
        How the errors were estimated, in words.
    rule : str
        How the configuration was chosen, in words ("" : the fewest features within the tolerance, step 3).
    lower : list of float
        The chosen features' screening lower bounds, in order.
    """

    chosen: MarginalEstimator
    features: list[str]
    ranked: int
    scored: int
    configs: list[Config]
    method: str
    lower: list[float]
    rule: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The ``screen`` key of ``marg learn --json`` and the model's report."""
        return {"learner": self.chosen.learner, "size": len(self.features), "features": list(self.features),
                "lower_bounds": [float(v) for v in self.lower], "screened": self.ranked, "scored": self.scored,
                "configs": [c.to_dict() for c in self.configs], "method": self.method}


def selection_certificate(est: MarginalEstimator, summary: Any, coverage: float, exact: bool = False,
                          time_limit: float | None = None) -> Certificate:
    """A bound on W(h) of ``est``'s rule over the first-order uncertainty set of every discrete feature (module docstring, 4).

    U_all = {p : |E_pΦ − τ| ≤ λ} over every discrete feature's first-order cells, λ calibrated
    for all K·D of them together at ``coverage``. The rule uses the features S only; the
    LP is solved over the cells of S with THE SAME λ (the Bonferroni count of the whole map,
    ``n_intervals``): that set U_S contains the projection of U_all (dropping constraints
    only enlarges it), so W(h) over U_S ≥ W(h) over U_all ≥ the true error whenever the
    true distribution lies in U_all — an event of probability ≥ ``coverage`` fixed before
    screening. (Solving over U_all itself, the unused features with zero weight, gives a
    value between the two; on thousands of genes its LP takes minutes.)
    :func:`marg.learners.certify.certify_projected` computes it: the one-LP bound W_L ≥ W(h)
    by default, refined by row generation with ``exact`` (at most ``time_limit`` seconds,
    valid at any stop)."""
    from .certify import certify_projected

    return certify_projected(est, summary, coverage=coverage, exact=exact, time_limit=time_limit)


def _fit(summary: Any, learner: str, features: Sequence[str], coverage: float, **given: Any) -> MarginalEstimator:
    if learner == PRIOR:  # the label-only rule reads no feature
        return estimator_class(PRIOR)(coverage=split_coverage(coverage, 2)).fit(summary)
    cls = estimator_class(learner)
    kw: dict[str, Any] = {**FIT_PARAMS.get(learner, {}), "features": list(features), **given}
    if learner == "renyi" and not summary.is_noisy and "ridge" not in kw:  # under DP its ridge follows the noise
        kw["ridge"] = sampling_ridge(summary, features)
    if "coverage" in cls.param_names():
        kw["coverage"] = coverage
    return cls(**kw).fit(summary)


def _fit_screened(summary: Any, learner: str, size: int, coverage: float, features: Sequence[str] | None) -> Any:
    if learner == PRIOR:
        return _fit(summary, learner, [], coverage)
    ranked = screen_scores(summary, features, coverage).rank()
    if not ranked:
        raise InputError("no feature's dependence on the label is above the noise of these tables")
    return _fit(summary, learner, ranked[:size], coverage)


def screen_and_learn(summary: Any, learners: Sequence[str] = LEARNERS, sizes: Sequence[int] = SIZES,
                     coverage: float = 0.95, features: Sequence[str] | None = None,
                     replicates: int = REPLICATES, tolerance: float = TOLERANCE) -> ScreenResult:
    """Screen, fit every (learner, M), choose by estimated error, certify the choice (module docstring).

    Parameters
    ----------
    summary : Summary
    learners : sequence of str
        Registered learners that take ``features`` and whose rule is additive (certifiable by W(h)).
    sizes : sequence of int
        The numbers M of top-ranked features tried first (capped at the number with a positive
        bound); while the choice is the largest M tried, :data:`GROWTH` × it is tried next.
    coverage : float
        Coverage of the screening bounds and of the certificate.
    features : sequence of str or None
        The features screened (None: every discrete feature).
    replicates : int
        Training sets drawn for the one-site estimate.
    tolerance : float
        Configurations within this of the best estimated error count as equal (:func:`choose_config`).

    Raises
    ------
    InputError
        No feature's screening bound is positive (the noise swamps every dependence), or no
        learner could be fitted on the screened features.
    """
    if not sizes or any(int(m) != m or m < 1 for m in sizes):
        raise InputError(f"sizes must be positive integers, got {list(sizes)!r}")
    if int(replicates) != replicates or replicates < 1:
        raise InputError(f"replicates must be a positive integer, got {replicates!r}")
    scores = screen_scores(summary, features, coverage)
    ranked = scores.rank()
    if not ranked:
        raise InputError(f"no feature's dependence on the label is above the noise of these tables "
                         f"(all {len(scores.names)} screening lower bounds are 0 at coverage {coverage:g})")
    paired = paired_prefix(summary, ranked)
    if "renyi" in learners and paired >= 2 and not summary.is_noisy:
        return _second_round(summary, ranked, paired, sizes, coverage, scores)
    grid = sorted({min(int(m), len(ranked)) for m in sizes})
    prior = Config(PRIOR, 0)  # the label-only rule is always a configuration: never a rule estimated worse
    configs: list[Config] = [prior]
    fitted: dict[tuple[str, int], MarginalEstimator] = {(PRIOR, 0): _fit(summary, PRIOR, [], coverage)}
    failed: set[str] = set()
    live: list[Config] = []
    while True:
        new: list[Config] = [prior] if not live else []
        for name in learners:
            for m in grid:
                if name in failed:
                    break
                c = Config(name, m)
                configs.append(c)
                try:
                    fitted[(name, m)] = _fit(summary, name, ranked[:m], coverage)
                    new.append(c)
                except InputError as exc:  # e.g. Rényi without the screened features' pair tables: one row says why
                    c.note = str(exc)
                    failed.add(name)
        if not live and len(new) <= 1:
            raise InputError("no learner could be fitted on the screened features: "
                             + "; ".join(f"{c.learner}: {c.note}" for c in configs if c.note))
        if not new:
            break
        choosable = [c for c in new if c.learner != PRIOR]
        method = _estimate(summary, new, coverage, features, int(replicates))
        live += new
        best = choose_config(live, learners, tolerance)
        top = max(c.size for c in live)
        # the estimate still falls at the largest M tried: try GROWTH times more (module docstring, 3)
        if best.error is None or best.size < top or top >= len(ranked) or not choosable:
            break
        grid = [min(len(ranked), GROWTH * top)]
    best.chosen = True
    chosen = _certify_choice(fitted[(best.learner, best.size)], summary, coverage)
    top = ranked[: best.size]
    return ScreenResult(chosen, top, len(ranked), len(scores.names), configs, method, scores.lower_of(top))


def _certify_choice(chosen: MarginalEstimator, summary: Any, coverage: float) -> MarginalEstimator:
    """The chosen configuration's certificate at ``coverage``: two boxes could carry it (the label table's for the
    label-only rule, every feature's first-order cells for the others), each at 1 − α/2 (Bonferroni)."""
    if chosen.learner != PRIOR:  # the label-only rule was fitted at 1 − α/2 already (:func:`_fit`)
        chosen.certificate_ = selection_certificate(chosen, summary, split_coverage(coverage, 2))
    c = chosen.certificate_
    chosen.certificate_ = Certificate(c.value, c.kind, coverage, c.approximate, c.n_classes, note=c.note, box=c.box)
    return chosen


def paired_prefix(summary: Any, ranked: Sequence[str]) -> int:
    """How many of the first features of ``ranked`` have every pair among them released (the
    second round's ``marg request --top k``); 0 or 1 when there are no such pairs."""
    pairs = {frozenset(p) for c in summary.feature_cliques() if len(c) >= 2 for p in combinations(c, 2)}
    k = 0
    while k < len(ranked) and all(frozenset((ranked[k], ranked[j])) in pairs for j in range(k)):
        k += 1
    return k if k >= 2 else 0


def _second_round(summary: Any, ranked: list[str], paired: int, sizes: Sequence[int], coverage: float,
                  scores: Scores) -> ScreenResult:
    """Rényi on the top M of the requested pairs, (M, ridge) by generalized cross-validation (module docstring, 2b);
    M = 0 is the label-only rule (the intercept alone: the larger class), so the choice can always answer it."""
    grid = sorted({min(int(m), paired) for m in sizes} | {paired})
    path = gcv_path(summary, ranked, [0] + grid)
    M, ridge, _ = min(path, key=lambda t: (t[2], t[0]))
    configs = [Config(PRIOR, 0, chosen=M == 0, note=f"GCV {path[0][2]:.4g}: the intercept alone, the larger class")]
    for m in grid:
        _, r, g = min((t for t in path if t[0] == m), key=lambda t: t[2])
        configs.append(Config("renyi", m, chosen=m == M, note=f"GCV {g:.4g} at ridge {r:g}"))
    fitted = _fit(summary, PRIOR, [], coverage) if M == 0 else _fit(summary, "renyi", ranked[:M], coverage, ridge=ridge)
    chosen = _certify_choice(fitted, summary, coverage)
    method = (f"second round: Rényi on the top M of the {paired} features whose pairs were released, M and the ridge "
              f"by generalized cross-validation from the pair tables (GCV = γ / (1 − df/n)², no row needed; M = 0: "
              f"the label-only rule)")
    return ScreenResult(chosen, ranked[:M], len(ranked), len(scores.names), configs, method, scores.lower_of(ranked[:M]),
                        rule=f"the second round: the (M, ridge) of the smallest GCV among {len(path)}, M = 0 the "
                             f"label-only rule; certified over the label table's box or every feature's first-order "
                             f"uncertainty set, each at α/2")


def choose_config(configs: Sequence[Config], learners: Sequence[str], tolerance: float = TOLERANCE,
                  weights: Sequence[float] | None = None) -> Config:
    """The one rule of :mod:`marg.learners.choice_rule` without certificates: among the configurations
    whose estimate is within noise of the best (max(``tolerance``, one standard error of the paired
    difference over the folds)) and not above the label-only rule's, the fewest features (ties: the
    order of ``learners``; the label-only rule last); without any estimate, the fewest features."""
    order = {nm: k for k, nm in enumerate(learners)}
    if weights is None:
        weights = next((c.fold_weights for c in configs if c.fold_weights), None)
    keys = [(1, 0, 0) if c.learner == PRIOR else (0, c.size, order.get(c.learner, len(order))) for c in configs]
    k, _ = choose_index(configs, "balanced", tolerance, weights=weights, by_certificate=False, order=keys)
    return configs[k]


def _estimate(summary: Any, live: list[Config], coverage: float, features: Sequence[str] | None,
              replicates: int) -> str:
    """Set each configuration's estimated error; return how, in words."""
    parts = summary.site_parts
    if MIN_SITES <= len(parts) <= MAX_SITES:
        from marg.marginals.summary import Summary, sum_tables

        cb = summary.codebook
        fits = [(str(k), lambda s, c=c: _fit_screened(s, c.learner, c.size, coverage, features))
                for k, c in enumerate(live)]
        try:
            got = loso_errors(fits, parts, make_summary=lambda ts: Summary(cb, list(ts)),
                              combine=lambda ps: sum_tables(ps)[0])
        except InputError as exc:
            got = {key: str(exc) for key, _ in fits}
        for key, res in got.items():
            c = live[int(key)]
            if isinstance(res, str):
                c.note = f"no error estimate: {res}"
            else:
                c.error, c.folds, c.fold_weights = float(res.value), list(res.folds), list(res.weights)
        return (f"leave-one-site-out over {len(parts)} sites: screening and fitting repeated without each site, "
                f"the error on rows simulated from that site's tables")
    try:
        errs = _split_errors(summary, live, coverage, features, replicates)
    except InputError as exc:
        for c in live:
            c.note = f"no error estimate: {exc}"
        return "no estimate (rows cannot be simulated from these tables); the smallest M of the first learner"
    for c, e in zip(live, errs):
        c.error, c.folds = float(np.mean(e)), [float(v) for v in e]
    return (f"one site: {replicates} training sets of the summary's class sizes drawn from the distribution its "
            f"tables determine, each screened and fitted, the error on a separate simulated population")


def _split_errors(summary: Any, live: list[Config], coverage: float, features: Sequence[str] | None,
                  replicates: int) -> list[list[float]]:
    """Per configuration, its error in each parametric training split (module docstring, 3)."""
    from marg.marginals.counting import count_tables
    from marg.marginals.summary import Summary
    from marg.marginals.tables import plan_cliques

    cb = summary.codebook
    population = tan_sample(summary, draws=POPULATION)
    sizes = np.maximum(1, np.rint(np.clip(summary.class_counts, 0.0, None))).astype(int)
    out: list[list[float]] = [[] for _ in live]
    # the second round (marg request --top k): pair tables among the k top features the summary holds them for
    k_pairs = len({f for c in summary.feature_cliques() if len(c) == 2 for f in c})
    for r in range(replicates):
        draw = tan_sample(summary, draws=int(sizes.max()), seed=SEED + 1000 + r)
        keep = np.concatenate([np.flatnonzero(draw.y == k)[: sizes[k]] for k in range(sizes.size)])
        X, y = draw.X[keep], draw.y[keep]
        train = Summary.from_rows(cb, X, y)
        ranked = screen_scores(train, features, coverage).rank()
        if k_pairs and len(ranked) > 1:  # the replicate's own request round: the pairs of ITS top k_pairs (first-order kept)
            plan = plan_cliques(cb, "pairs", list(combinations(ranked[:k_pairs], 2)))
            train = Summary(cb, train.tables + count_tables(cb, X, y, [c for c in plan if len(c) > 2]))
        for k, c in enumerate(live):
            if not ranked:
                out[k].append(float(1.0 - population.w[population.y == np.argmax(summary.prior)].sum()))
                continue
            try:
                model = _fit(train, c.learner, ranked[: c.size], coverage)
            except InputError:
                model = None
            out[k].append(1.0 if model is None else sample_error(model, population))
    return out


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
