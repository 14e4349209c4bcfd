"""A parametric bootstrap of the whole study from its summaries: each candidate's error when the study is run again.

Leave-one-site-out (:mod:`marg.learners.choice.cross_site`) judges a candidate refitted *without* a
site on that site's rows: at hospital sizes (3 sites of 50–300 patients) its folds train on
40–90 % of the patients and test on one site's 50–300 simulated rows, so it is biased upward
(fewer rows) and noisy (one small site weighs a fold). The summaries allow another estimate of
the same quantity — the error of the rule the whole study fits:

**The bootstrap** (:func:`bootstrap_errors`). Let P̂_s be site s's tree-augmented naive-Bayes
distribution (its own tables, :func:`marg.learners.choice.cross_site.tan_sample`) and P̂ the whole
summary's. Replicate r draws each site's n_s patients again from P̂_s (its class counts kept),
(a class column the site hid by min-cell suppression filled from the whole summary's shape,
:func:`fill_hidden`), counts the same tables the sites released
(:func:`marg.marginals.counts.counting.count_tables` over the released cliques), sums them into a study,
refits every candidate there, and measures it on one
separate sample of P̂ (:data:`marg.learners.choice.cross_site.POPULATION` rows per class, the same rows
for every replicate and candidate). The estimate is the mean over the ``replicates``; its folds
are the replicates (paired across candidates: the same resampled studies), so the choice's
paired standard error applies unchanged. The refit sees a study of the real study's size and
site structure, not a smaller one.

It estimates err_{P̂}(fit on a study drawn from P̂), the plug-in world standing in for the
population; measured against leave-one-site-out on simulated small studies from known
populations (``bench/estimate_49.py``, BENCHMARKS.md "Issue 49"). Exact releases only (a noisy
table would be resampled without its noise); raw numeric features give no estimate.

**The optimism-corrected plug-in error** (:func:`optimism_errors`; Efron 1983, "Estimating the error rate of a
prediction rule"): the model as fitted, h, has the plug-in error err_{P̂}(h) on the tables it was fitted on —
optimistic by how much a fit adapts to its own study. The bootstrap measures that optimism: on replicate r the
refit h_r is measured in the world it was fitted on, P̂_r (its resampled study's TAN distribution), and in P̂,

    ω̂ = mean_r [err_{P̂}(h_r) − err_{P̂_r}(h_r)],          estimate = err_{P̂}(h) + ω̂,

so the model handed out is the one measured (not a refit on fewer patients, as in leave-one-site-out) and its
optimism is that of a study of the real study's size and sites.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Sequence

import numpy as np

from marg.errors import InputError

from .cross_site import POPULATION, SEED, ErrorEstimate, fill_hidden, sample_error, tan_sample

REPLICATES = 4
"""Resampled studies per estimate (each refits every candidate once: 4 fits where leave-one-site-out makes S)."""


def _resample(site: Any, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Site ``site``'s patients drawn again from its TAN distribution, its class counts kept: codes (n, p), labels
    (n,)."""
    sizes = np.rint(np.clip(site.class_counts, 0.0, None)).astype(int)
    draw = tan_sample(site, draws=int(max(1, sizes.max())), seed=seed)
    keep = np.concatenate([np.flatnonzero(draw.y == k)[: sizes[k]] for k in range(sizes.size)])
    return draw.X[keep], draw.y[keep]


def bootstrap_errors(summary: Any, candidates: Sequence[tuple[str, Callable[[Any], Any]]],
                     replicates: int = REPLICATES) -> dict[str, ErrorEstimate | str]:
    """Each candidate's error under the parametric bootstrap of the whole study (module docstring).

    Parameters
    ----------
    summary : Summary
        With its sites' own tables (``site_parts``), or the whole summary as one site.
    candidates : sequence of (key, fit)
        ``fit(summary)`` refits the candidate on a resampled study.
    replicates : int

    Returns
    -------
    dict
        key → :class:`~marg.learners.choice.cross_site.ErrorEstimate` (``method="bootstrap"``, ``folds`` the
        replicates' errors, equal weights), or a one-line reason (a candidate that cannot be refitted).

    Raises
    ------
    InputError
        Noisy tables, or rows cannot be simulated (raw numeric features).
    """
    studies = _resampled_studies(summary, replicates)
    world = tan_sample(summary, draws=POPULATION, seed=SEED + 2999)
    errs: dict[str, list[float]] = {key: [] for key, _ in candidates}
    failed: dict[str, str] = {}
    for r, study in enumerate(studies):
        for key, fit in candidates:
            if key in failed:
                continue
            try:
                errs[key].append(sample_error(fit(study), world))
            except InputError as exc:
                failed[key] = str(exc)
    out: dict[str, ErrorEstimate | str] = {}
    for key, _ in candidates:
        if key in failed:
            out[key] = failed[key]
            continue
        e = errs[key]
        out[key] = ErrorEstimate(float(np.mean(e)), "bootstrap", [float(v) for v in e], [1.0] * len(e))
    return out


def optimism_errors(summary: Any, candidates: Sequence[tuple[str, Callable[[Any], Any]]], fitted: dict[str, Any],
                    replicates: int = REPLICATES, draws: int = POPULATION) -> dict[str, ErrorEstimate | str]:
    """Each fitted model's plug-in error under ``summary`` plus the bootstrap's optimism (module docstring).

    Parameters
    ----------
    summary : Summary
        With its sites' own tables (``site_parts``), or the whole summary as one site; exact tables.
    candidates : sequence of (key, fit)
        ``fit(summary)`` refits the candidate on a resampled study.
    fitted : dict key → fitted model
        Each candidate as fitted on ``summary`` (the model whose error is estimated).
    replicates : int
    draws : int
        Simulated rows per class of each world (P̂ and every P̂_r; Monte Carlo error ≤ 0.5/√draws per class).

    Returns
    -------
    dict
        key → :class:`~marg.learners.choice.cross_site.ErrorEstimate` (``method="optimism"``, ``folds`` the replicates'
        err_{P̂}(h) + (err_{P̂}(h_r) − err_{P̂_r}(h_r)), equal weights; ``whole`` err_{P̂}(h)), or a one-line reason.

    Raises
    ------
    InputError
        Noisy tables, or rows cannot be simulated (raw numeric features).
    """
    studies = _resampled_studies(summary, replicates)
    world = tan_sample(summary, draws=int(draws), seed=SEED + 2999)
    base = {key: sample_error(fitted[key], world) for key, _ in candidates if fitted.get(key) is not None}
    folds: dict[str, list[float]] = {key: [] for key in base}
    failed: dict[str, str] = {key: "not fitted on the whole summary" for key, _ in candidates if key not in base}
    for r, study in enumerate(studies):
        own = tan_sample(study, draws=int(draws), seed=SEED + 5000 + r)
        for key, fit in candidates:
            if key in failed:
                continue
            try:
                h = fit(study)
            except InputError as exc:
                failed[key] = str(exc)
                continue
            folds[key].append(base[key] + sample_error(h, world) - sample_error(h, own))
    out: dict[str, ErrorEstimate | str] = {}
    for key, _ in candidates:
        if key in failed:
            out[key] = failed[key]
            continue
        e = [float(np.clip(v, 0.0, 1.0)) for v in folds[key]]
        out[key] = ErrorEstimate(float(np.mean(e)), "optimism", e, [1.0] * len(e), whole=base[key])
    return out


def _resampled_studies(summary: Any, replicates: int) -> Iterator[Any]:
    """The bootstrap's ``replicates`` studies: each site's rows resampled from its own (hidden cells filled) tables,
    counted into the summary's cliques and summed (a generator; seeded, so the same for every caller).

    Raises
    ------
    InputError
        Noisy tables (checked before the first study is drawn).
    """
    from marg.marginals.counts.counting import count_tables
    from marg.marginals.summary import Summary, sum_tables

    if summary.is_noisy:
        raise InputError("the bootstrap of the study resamples exact tables only: these carry DP noise")
    cb = summary.codebook
    parts = summary.site_parts or (("all", tuple(summary.tables)),)
    cliques = sorted({t.clique for t in summary.tables if t.kind == "counts"}, key=lambda c: (len(c), c))
    sites = [Summary(cb, list(fill_hidden(ts, summary))) for _, ts in parts]

    def draw() -> Iterator[Any]:
        for r in range(int(replicates)):
            drawn = [_resample(s, SEED + 3000 + 100 * r + j) for j, s in enumerate(sites)]
            yield Summary(cb, sum_tables([count_tables(cb, X, y, cliques) for X, y in drawn])[0])

    return draw()
