"""The estimated error of a fitted model from count tables: on left-out sites' tables, or in sample.

The tables do not determine a distribution over whole rows, only its first-order and pair
marginals. The **plug-in error** (:func:`sample_error`) of a model under a Summary is its error
rate under the tree-augmented naive-Bayes (TAN) distribution those tables determine::

    p(x, y) = p(y) · Π_i p(x_i | x_π(i), y)

with π the maximum-weight spanning forest of I(X_i; X_j | Y) over the released pair tables
(:func:`marg.learners.features.structure.chow_liu_forest`), each factor read from the tables
(N[x_i, y] for a root, N[x_π(i), x_i, y] for a child): the distribution closest (in
Kullback–Leibler terms, among those that factor over a tree given the label) to any
distribution with these marginals, and one that reproduces the tables on the forest's edges
exactly. It is computed by simulation (:func:`tan_sample`): ``DRAWS`` rows per class drawn
ancestrally with a fixed seed, weighted by p(y), and the model's own ``predict`` applied to
them — so any rule is covered (ties broken as the model breaks them, pairwise DCC rules,
multiclass labels). Monte Carlo error: ≤ 0.5/√DRAWS per class (≈ 0.004). It is an
**estimate**, not a bound: the dependence beyond the forest is not released, and the TAN
distribution stands in for it. Raw numeric features are not covered (only their per-class
moments are released).

**Leave one site out** (:func:`loso_errors`). The learner has every site's tables. For each
site k a candidate is fitted on the other sites' sum and its plug-in error computed under
site k's tables (the same draws for every candidate; a class column site k hid by min-cell
suppression is filled in proportion to the other sites' column, within its interval: :data:`LOSO_FILL`
says why and what it costs); the candidate's estimate is the mean over the sites weighted by their n. The model is never
evaluated on the tables it was fitted on, so a learner that over-fits the tables (or their noise) is seen to. With one
site (or more than :data:`MAX_SITES`) the estimate is the fitted model's plug-in error on the whole
summary (:func:`in_sample_error`) — in sample, hence optimistic.

**The model itself, not only its refits** (:func:`whole_floor`). Leave-one-site-out measures the
candidate *refitted* on each fold; the model the choice hands out is the fit on all sites, and it
can be a different rule. Under DP it can: a minimax learner (DCC, MRC) whose box sits just at
the edge where the worst case stops being the uniform guess is the uniform rule on every fold
(R* = 1 − 1/K, μ = 0: it predicts by its naive-Bayes tie-break) and, on all sites' tables — a
slightly narrower box —, a rule with R* a hair below 1 − 1/K whose μ is non-zero on a few cells and
overrides the tie-break wherever they occur (measured, issue 34: the planted wide study's DCC on 10
informative features, at a box slightly narrower than the choice's, read one pair cell and erred more
on test rows than the tie-break rule its folds fitted, which the folds estimated lower still; one console
run's chosen DCC erred far more, not reproduced since: BENCHMARKS.md, "Issue 34: the planted study's DCC
failure (i34i)"). The folds cannot see that. So with the fitted models at hand, each candidate's estimate
is at least the fitted model's plug-in error under the whole summary's tables (:func:`in_sample_error`'s
rows): that error is optimistic for the model's own tables (it was fitted on them), so when even it exceeds the folds'
mean, the folds did not describe this model, and the larger value stands
(``ErrorEstimate.whole`` records it). Both are plug-in errors of the same simulated world family;
the folds and their paired standard errors are kept as they are.

**The one estimator of the automatic choice** (:func:`estimate_errors`): leave-one-site-out
whenever 2–:data:`MAX_SITES` sites' tables were kept, for every candidate alike (a plain learner
and a learner on screened features are refitted on the same folds and judged on the same
simulated rows); otherwise its fallback — in sample, or the **split** (:func:`split_errors`:
each candidate refitted on training sets drawn from the tables, and measured on a separate
simulated population), which the screening generator asks for because the noise of screening
thousands of features on n rows is what must be seen.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from marg.errors import InputError

from ..features.structure import chow_liu_forest

MIN_SITES = 2
MAX_SITES = 20  # beyond this a leave-one-site-out sweep costs more fits than it is worth


@dataclass
class ErrorEstimate:
    """A rule's estimated error and how it was obtained.

    Attributes
    ----------
    value : float
        The estimate (mean over folds for leave-one-site-out).
    method : str
        ``"loso"`` (leave-one-site-out) or ``"in-sample"``.
    folds : list of float
        The per-site plug-in errors (leave-one-site-out); empty in sample.
    weights : list of float
        The folds' weights (the left-out sites' n); empty in sample.
    whole : float or None
        Leave-one-site-out with the fitted model at hand: its plug-in error under the whole
        summary's tables, the floor of ``value`` (:func:`whole_floor`); None otherwise.
    se : float or None
        The estimate's own standard error when its method gives one other than its folds' spread
        (None: :func:`marg.learners.choice.choice_rule.estimate_se` of the folds).
    """

    value: float
    method: str
    folds: list[float] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)
    whole: float | None = None
    se: float | None = None


DRAWS = 10000
"""Simulated rows per class of the plug-in error (fewer on wide codebooks: :data:`MAX_CELLS`)."""
MAX_CELLS = 20_000_000
"""Cap on simulated rows × features (memory): a wide codebook gets ⌊MAX_CELLS / (K·p)⌋ rows per
class (at least 500; Monte Carlo error ≤ 0.5/√rows)."""
SEED = 20241
"""Seed of the simulation (fixed: the same tables give the same estimate)."""


@dataclass
class TanSample:
    """Rows drawn from the TAN distribution of a Summary: codes ``X`` (n, p), labels ``y`` (n,)
    and weights ``w`` (n,) summing to p(y) within each class (so Σ w·loss is an expectation)."""

    X: np.ndarray
    y: np.ndarray
    w: np.ndarray


def tan_sample(summary: Any, draws: int = DRAWS, seed: int = SEED) -> TanSample:
    """``draws`` rows per class from the TAN distribution of ``summary``'s tables (module docstring).

    Raises
    ------
    InputError
        The codebook has raw numeric features (one line naming one).
    """
    cb = summary.codebook
    if cb.numeric_names:
        raise InputError(f"raw numeric feature {cb.numeric_names[0]!r}: only its per-class moments are released, "
                         "so rows cannot be simulated from the tables")
    lab = cb.label.name
    p, K = cb.n_features, summary.n_classes
    draws = int(min(draws, max(500, MAX_CELLS // max(1, K * p))))
    edges, _ = chow_liu_forest(summary)
    adj: dict[int, list[int]] = {i: [] for i in range(p)}
    for i, j in edges:
        adj[i].append(j)
        adj[j].append(i)
    order: list[tuple[int, int | None]] = []  # (node, parent) in breadth-first order from each component's root
    seen: set[int] = set()
    for r in range(p):
        if r in seen:
            continue
        seen.add(r)
        queue = [(r, None)]
        while queue:
            node, parent = queue.pop(0)
            order.append((node, parent))
            for nb in sorted(adj[node]):
                if nb not in seen:
                    seen.add(nb)
                    queue.append((nb, node))
    prior = np.clip(summary.prior, 0.0, None)
    prior = prior / prior.sum() if prior.sum() > 0 else np.full(K, 1.0 / K)
    rng = np.random.default_rng(seed)
    X = np.zeros((K * draws, p))
    for y in range(K):
        rows = slice(y * draws, (y + 1) * draws)
        for node, parent in order:
            name = cb.features[node].name
            first = _normalised(np.clip(summary.counts((name, lab))[:, y], 0.0, None))
            if parent is None:
                X[rows, node] = _draw(rng, first[None, :], np.zeros(draws, dtype=np.int64))
                continue
            P = np.clip(summary.counts((cb.features[parent].name, name, lab))[:, :, y], 0.0, None)
            cond = np.array([_normalised(r) if r.sum() > 0 else first for r in P])  # p(x_node | x_parent, y)
            X[rows, node] = _draw(rng, cond, X[rows, parent].astype(np.int64))
    y_all = np.repeat(np.arange(K), draws)
    return TanSample(X, y_all, prior[y_all] / draws)


def _normalised(v: np.ndarray) -> np.ndarray:
    t = float(v.sum())
    return v / t if t > 0 else np.full(v.shape, 1.0 / v.size)


def _draw(rng: np.random.Generator, table: np.ndarray, at: np.ndarray) -> np.ndarray:
    """One category per row of ``table[at]`` ((n, m); ``table``'s rows sum to 1): each distinct row's cumulative
    sums once, the same numbers as row by row."""
    cdf = np.cumsum(table, axis=1)[at]
    u = rng.random(cdf.shape[0]) * cdf[:, -1]
    return np.minimum((cdf < u[:, None]).sum(axis=1), cdf.shape[1] - 1).astype(np.float64)


def sample_error(model: Any, sample: TanSample) -> float:
    """The plug-in error of ``model`` (anything with ``predict``) on a :class:`TanSample`."""
    pred = np.asarray(model.predict(sample.X))
    return float(np.sum(sample.w * (pred != sample.y)))


def in_sample_error(model: Any, summary: Any) -> ErrorEstimate:
    """The plug-in error of ``model`` under the tables it was fitted on (optimistic)."""
    return ErrorEstimate(sample_error(model, tan_sample(summary)), "in-sample")


def loso_errors(
    candidates: Sequence[tuple[str, Callable[[Any], Any]]],
    parts: Sequence[tuple[str, Sequence[Any]]],
    make_summary: Callable[[Sequence[Any]], Any],
    combine: Callable[[Sequence[Sequence[Any]]], Sequence[Any]],
    fill: Callable[[Sequence[Any], Any], Sequence[Any]] | None = None,
) -> dict[str, ErrorEstimate | str]:
    """Leave-one-site-out plug-in errors of each candidate.

    Parameters
    ----------
    candidates : sequence of (name, fit)
        ``fit(summary)`` returns a fitted model.
    parts : sequence of (site, tables)
        Each site's released tables (:data:`MIN_SITES` ≤ sites ≤ :data:`MAX_SITES`).
    make_summary : tables → Summary
    combine : list of table lists → summed tables
    fill : (site k's tables, the other sites' Summary) → site k's tables, optional
        What the left-out site's rows are simulated from (its min-cell-hidden columns filled from the
        other sites' shape, :func:`marg.marginals.hidden.fill_from`); None: its tables as released.

    Returns
    -------
    dict
        name → :class:`ErrorEstimate` (``folds[k]``: the model fitted without site k, its
        plug-in error under site k's tables; ``value``: their mean weighted by the sites' n),
        or a one-line reason the candidate could not be estimated.
    """
    if not MIN_SITES <= len(parts) <= MAX_SITES:
        raise InputError(f"leave-one-site-out needs {MIN_SITES} to {MAX_SITES} sites, got {len(parts)}")
    folds: list[tuple[Any, TanSample, float]] = []
    for k in range(len(parts)):
        rest = make_summary(combine([p[1] for j, p in enumerate(parts) if j != k]))
        held = make_summary(parts[k][1] if fill is None else fill(parts[k][1], rest))
        folds.append((rest, tan_sample(held, seed=SEED + k), max(float(held.n), 0.0)))
    out: dict[str, ErrorEstimate | str] = {}
    for name, fit in candidates:
        try:
            errs = [sample_error(fit(rest), sample) for rest, sample, _ in folds]
        except InputError as exc:
            out[name] = str(exc)
            continue
        wts = np.array([n for _, _, n in folds])
        value = float(np.average(errs, weights=wts)) if wts.sum() > 0 else float(np.mean(errs))
        out[name] = ErrorEstimate(value, "loso", [float(x) for x in errs], [float(x) for x in wts])
    return out


def fill_hidden(tables: Sequence[Any], reference: Any) -> list[Any]:
    """One site's tables with the class columns it hid (min-cell suppression) filled in proportion to
    ``reference``'s counts of the same table (:func:`marg.marginals.hidden.fill_from`): the rows a simulation of
    that site draws, each hidden cell within its interval."""
    from marg.marginals.hidden import fill_from

    def shape(clique: tuple[str, ...]) -> Any:
        try:
            return reference.counts(clique)
        except InputError:
            return None

    return fill_from(tables, shape)


def whole_floor(estimates: dict[str, ErrorEstimate | str], summary: Any,
                fitted: dict[str, Any]) -> dict[str, ErrorEstimate | str]:
    """Each leave-one-site-out estimate floored at its fitted model's plug-in error under the whole summary
    (module docstring): ``value = max(fold mean, in-sample error of fitted[key])``, the latter in ``whole``.
    Estimates without a fitted model (or a reason instead of an estimate) are returned as they are."""
    keys = [k for k, e in estimates.items() if isinstance(e, ErrorEstimate) and fitted.get(k) is not None]
    if not keys:
        return estimates
    sample = tan_sample(summary)
    out = dict(estimates)
    for k in keys:
        e = estimates[k]
        assert isinstance(e, ErrorEstimate)
        whole = sample_error(fitted[k], sample)
        out[k] = ErrorEstimate(max(e.value, whole), e.method, e.folds, e.weights, whole, e.se)
    return out


LOSO_FILL = fill_hidden
"""How the left-out site's min-cell-hidden class columns are filled for its simulated rows: in proportion to
the other sites' column (:func:`fill_hidden`), not evenly. Measured side by side on breast-w, cleveland,
hungarian, credit-a and house-votes-84 (BENCHMARKS.md, "Issue 49 (choice)"): on breast-w, whose benign class
column is hidden at every site for most features, the even fill made every rule look worse than the larger
class, which was then chosen. The cost: those left-out rows follow the distribution the fold's model was
fitted on in the hidden cells, which flatters naive Bayes (on credit-a it was estimated far below its test
error and chosen over the MRC)."""

EXACT_ESTIMATE: Callable[[Any, Sequence[tuple[str, Callable[[Any], Any]]], dict[str, Any]], dict] | None = None
"""The estimate of exact releases with 2–:data:`MAX_SITES` sites' own tables: None — leave-one-site-out —, or
:func:`marg.learners.choice.study_bootstrap.optimism_errors` (the fitted model's plug-in error plus the study
bootstrap's optimism; ``bench/choice_49.py --estimate optimism`` sets it), measured against each other in
``bench/estimate_49.py`` (BENCHMARKS.md, "Issue 49 (chooser2)")."""

REPLICATES = 3
"""Training sets drawn for the split estimate (one site)."""
POPULATION = 2000
"""Simulated rows per class on which the split estimate measures each candidate (Monte Carlo error ≤ 0.5/√2000 ≈ 0.011
per class)."""


def estimate_errors(summary: Any, candidates: Sequence[tuple[str, Callable[[Any], Any]]], fallback: str = "in-sample",
                    fitted: dict[str, Any] | None = None, replicates: int = REPLICATES,
                    train: Callable[[np.ndarray, np.ndarray], Any]
                    | None = None) -> tuple[str, dict[str, ErrorEstimate | str]]:
    """THE estimator of the automatic choice: every candidate estimated on the same footing.

    Parameters
    ----------
    summary : Summary
    candidates : sequence of (key, fit)
        ``fit(summary)`` refits the candidate on another summary (a fold, a training set).
    fallback : {"in-sample", "split"}
        Without 2–:data:`MAX_SITES` sites' own tables: ``"in-sample"`` — each fitted model
        (``fitted[key]``, fitted on the whole summary) on rows simulated from ``summary``
        (:func:`in_sample_error`, optimistic); ``"split"`` — :func:`split_errors` (each candidate
        refitted on ``replicates`` training sets drawn from the tables: it sees the noise of
        choosing from n rows, e.g. screening thousands of features).
    fitted : dict key → fitted model (fitted on the whole summary): for ``"in-sample"``, and with
        leave-one-site-out the floor of each estimate (:func:`whole_floor`).
    replicates, train : for ``"split"`` (:func:`split_errors`).

    Returns
    -------
    (how, estimates)
        ``how`` ∈ {"loso", "in-sample", "split"}; ``estimates[key]`` an :class:`ErrorEstimate`
        or a one-line reason the candidate has none.
    """
    parts = summary.site_parts
    if EXACT_ESTIMATE is not None and not summary.is_noisy and fitted and MIN_SITES <= len(parts) <= MAX_SITES:
        try:
            return "optimism", EXACT_ESTIMATE(summary, candidates, fitted)
        except InputError as exc:  # e.g. raw numeric features: no rows can be simulated
            return "optimism", {key: str(exc) for key, _ in candidates}
    if MIN_SITES <= len(parts) <= MAX_SITES:
        from marg.marginals.summary import Summary, sum_tables

        cb = summary.codebook
        try:
            got = loso_errors(candidates, parts, make_summary=lambda ts: Summary(cb, list(ts)),
                              combine=lambda ps: sum_tables(ps)[0], fill=LOSO_FILL)
        except InputError as exc:  # e.g. raw numeric features: no rows can be simulated
            return "loso", {key: str(exc) for key, _ in candidates}
        return "loso", whole_floor(got, summary, fitted or {})
    if fallback == "in-sample":
        try:
            sample: TanSample | str = tan_sample(summary)
        except InputError as exc:
            sample = str(exc)
        return "in-sample", {key: sample if isinstance(sample, str) else
                             ErrorEstimate(sample_error(model, sample), "in-sample")
                             for key, model in (fitted or {}).items()}
    try:
        errs = split_errors(summary, candidates, replicates, train)
    except InputError as exc:
        return "split", {key: str(exc) for key, _ in candidates}
    return "split", {key: ErrorEstimate(float(np.mean(e)), "split", [float(v) for v in e]) for key, e in errs.items()}


def split_errors(summary: Any, candidates: Sequence[tuple[str, Callable[[Any], Any]]], replicates: int = REPLICATES,
                 train: Callable[[np.ndarray, np.ndarray], Any] | None = None) -> dict[str, list[float]]:
    """Per candidate, its error in each of ``replicates`` parametric training splits of the tables.

    Training set r: the summary's class sizes drawn from its TAN distribution (:func:`tan_sample`,
    seed ``SEED + 1000 + r``), turned into a Summary by ``train(X, y)`` (default: its exact
    first-order tables; a generator may add what its own request round would release). Each
    candidate is refitted there and its error measured on one separate simulated population of
    :data:`POPULATION` rows per class. A candidate that cannot be fitted on a training set errs 1
    there; a training set on which ``train`` finds nothing to learn from (None) is answered by the
    summary's larger class, for every candidate.

    Raises
    ------
    InputError
        Rows cannot be simulated from the tables (raw numeric features).
    """
    from marg.marginals.summary import Summary

    cb = summary.codebook
    population = tan_sample(summary, draws=POPULATION)
    sizes = np.maximum(1, np.rint(np.clip(summary.class_counts, 0.0, None))).astype(int)
    out: dict[str, list[float]] = {key: [] for key, _ in candidates}
    for r in range(int(replicates)):
        draw = tan_sample(summary, draws=int(sizes.max()), seed=SEED + 1000 + r)
        keep = np.concatenate([np.flatnonzero(draw.y == k)[: sizes[k]] for k in range(sizes.size)])
        X, y = draw.X[keep], draw.y[keep]
        data = Summary.from_rows(cb, X, y) if train is None else train(X, y)
        for key, fit in candidates:
            if data is None:
                out[key].append(float(1.0 - population.w[population.y == np.argmax(summary.prior)].sum()))
                continue
            try:
                model = fit(data)
            except InputError:
                model = None
            out[key].append(1.0 if model is None else sample_error(model, population))
    return out


def noisy_replica(summary: Any, seed: int = 20242) -> Callable[[np.ndarray, np.ndarray], Any]:
    """``train(X, y)`` for the split estimate: the tables ``summary`` released, counted on the rows (X, y) and given
    independent Gaussian noise of each table's own per-cell std (its noise record kept), so that a training set is
    what the release would have been on those rows — the noise a learner must withstand is seen, not only n."""
    from dataclasses import replace

    from marg.marginals.counts.counting import count_tables
    from marg.marginals.summary import Summary

    rng = np.random.default_rng(seed)
    tables = [t for t in summary.tables if t.kind == "counts"]

    def train(X: np.ndarray, y: np.ndarray) -> Any:
        exact = count_tables(summary.codebook, X, y, [t.clique for t in tables])
        return Summary(summary.codebook, [replace(e, counts=e.counts + rng.normal(0.0, t.noise.std, e.counts.shape),
                                                  noise=t.noise) for e, t in zip(exact, tables)])

    return train
