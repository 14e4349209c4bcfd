"""The learner's round 2 of a study: which features it measures (the design's top k of round 1's pooled scores) and
which tables it asks for them (every first-order and pair table when the design measures every candidate, else the
first-order tables and the pairs :func:`marg.learners.study.two_round.choose_tables` affords). Post-processing of round
1's released sums and of the public plan only.
"""

from __future__ import annotations

from typing import Any


def measured_features(scores: Any, k: int) -> list[str]:
    """Round 2's features: the design's top ``k`` of round 1's pooled scores (:meth:`Scores.order`: the features
    whose lower bound is positive by that bound, then the rest by the plug-in score of the noisy sums), min(k, p).

    The noise of round 1 is already paid: ranking its noisy sums is post-processing, so nothing calls for a
    positive bound at 95 % before measuring a feature (that rule measured one feature on kr-vs-kp, where the pooled
    noise left no bound positive: BENCHMARKS.md, "Issue 44 (accept, round 2)"). The design
    (:mod:`marg.marginals.study_design`, ``"pooled"``) plans for the top k of these scores; the tables round 2 affords
    for them are :func:`marg.learners.study.two_round.choose_tables`'.

    Parameters
    ----------
    scores : Scores
        :func:`marg.learners.selection.screening.screen_scores` of round 1's sum (p features).
    k : int
        The study plan's k (at least 1).
    """
    return scores.order()[:max(int(k), 1)]


def round2_tables(kept: list[str], codebook: Any, rests: list[float], n_hat: float) -> Any:
    """Round 2's tables for the measured features ``kept`` (a :class:`marg.learners.study.two_round.TablePlan`): every
    first-order and every pair table when ``kept`` holds every candidate — the design measures every candidate
    (k = p) only when round 2 affords that whole workload within the noise rule
    (:func:`marg.marginals.study_split.measures_all`), so the learner follows its plan
    (:func:`marg.learners.study.two_round.every_table`) —, else the first-order tables and the pairs among the first M
    by the largest pair table's noise (:func:`marg.learners.study.two_round.choose_tables`).

    On adult (14 features, k = p) choose_tables kept a few pairs (native-country's 42 levels make every pair table
    with it the largest; Rényi needs every pair, so the automatic choice fell to naive Bayes), every_table all of them
    (BENCHMARKS.md, "Issue 44 (large)").

    Parameters
    ----------
    kept : list of str
        :func:`measured_features` (best first).
    codebook : Codebook
        The study's.
    rests : list of float
        The ρ of each noise source of round 2's pooled sum (one curator's at ρ·t/S under shared noise).
    n_hat : float
        The pooled noisy row count.
    """
    from marg.learners.study.two_round import choose_tables, every_table

    if len(kept) >= 2 and len(kept) >= len(codebook.discrete_names):
        return every_table(kept, codebook, rests)
    return choose_tables(kept, codebook, rests, n_hat)
