"""The study's final rule against the larger class, on evidence that did not select its features.

In a select-then-measure study (:mod:`marg.learners.study.two_round`) the features were chosen from
round 1's releases of the same patients whose round-2 tables the model is fitted and estimated
on: a leave-one-site-out estimate of the rule fitted on the study's features judges it on rows
of a site whose patients helped choose those features, and flatters it (issue 44: in a simulated study the
path returned a model worse than the larger class, BENCHMARKS.md, "Issue 47: numbers moved out of docstrings").

**The check** (:func:`unselected_comparison`): leave one site out of the *whole procedure*. For
each site k, the features are selected again from the other sites' round-1 selections alone
(:func:`marg.learners.study.two_round.above_chance` over the sites ≠ k, the same agreement rule; kept
in their pooled order, restricted to the features round 2 measured), the final rule's learner
is refitted with its parameters on those features over the other sites' summed round-2 tables
(a rule given ``features`` of its own keeps as many of the fold's ranking; no feature agreed:
the fold's rule is the larger class, as the study would have returned), the label-only rule is
refitted on the same tables, and both are judged on rows simulated from site k's tables
(:func:`marg.learners.choice.cross_site.tan_sample`, the same rows for both): site k's patients did not
choose fold k's features. The estimates are the folds' means weighted by the sites' n; the
paired standard error of their difference (:func:`marg.learners.choice.choice_rule.paired_se`) is
reported beside them.

**The rule** (:func:`marg.learners.study.two_round.finish`): the final rule is kept only when it beats
the larger class on this evidence, ê_rule < ê_prior; otherwise the larger class is the model
("not beaten": a rule no better than answering the larger class on patients who did not choose
its features is not worth the risk that its features were chosen by the noise). Not a bound: an
estimate, like every estimate of the choice.

**Limits.** The measured features were chosen with every site, so fold k can only re-select
among them (a feature the other sites agree on that round 2 did not measure is dropped). Without
2–20 sites' own tables (only their secure sum) there is no per-site evidence: the check says so
and the study's evaluation round is the evidence to use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from marg.errors import InputError

from ..choice.choice_rule import paired_se

MIN_SITES, MAX_SITES = 2, 20


@dataclass
class Comparison:
    """The final rule against the larger class on selection-free folds (module docstring).

    ``rule``, ``prior``: the two estimates (weighted means of ``rule_folds``, ``prior_folds``); ``se``: the paired
    standard error of their difference; ``weights``: the folds' (the sites' n); ``features``: each fold's re-selected
    features (empty: the fold's rule is the larger class)."""

    rule: float
    prior: float
    se: float
    rule_folds: list[float] = field(default_factory=list)
    prior_folds: list[float] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)
    features: list[list[str]] = field(default_factory=list)

    @property
    def beaten(self) -> bool:
        """Whether the rule beats the larger class on this evidence (ê_rule < ê_prior)."""
        return self.rule < self.prior - 1e-12

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "prior": self.prior, "se": self.se, "beaten": self.beaten,
                "rule_folds": self.rule_folds, "prior_folds": self.prior_folds, "weights": self.weights,
                "features": self.features}

    def words(self) -> str:
        verdict = "beats" if self.beaten else "does not beat"
        return (f"on each site's rows with features re-selected from the other sites' round 1 alone, the rule "
                f"(estimated {self.rule:.4f}) {verdict} the larger class ({self.prior:.4f}; paired se {self.se:.4f})")


def _fold_params(est: Any, feats: list[str]) -> dict[str, Any]:
    """``est``'s parameters with the fold's features: as many of the fold's ranking as it was given, else all."""
    params = dict(est.get_params())
    own = params.get("features")
    params["features"] = feats[: len(own)] if own else list(feats)
    if est.learner == "nb":
        params["certify"] = "bound"  # the folds' certificates are not used
    return params


def unselected_comparison(est: Any, summary: Any, sites: Sequence[Any],
                          select: Callable[[Sequence[Any]], list[str]]) -> Comparison | str:
    """The final rule ``est`` (fitted on ``summary``) against the label-only rule on selection-free folds
    (module docstring); a one-line reason when there is no such evidence.

    ``sites``: the round-1 selections (:func:`marg.learners.study.two_round.pool_records`, each with ``site``);
    ``select``: the study's agreement rule on some of them (:func:`marg.learners.study.two_round.above_chance`)."""
    from marg.marginals.summary import Summary, sum_tables

    from ..estimator.base import estimator_class
    from ..choice.cross_site import SEED, sample_error, tan_sample
    from ..classifiers.label_only import LabelOnly

    parts = list(summary.site_parts or ())
    if not MIN_SITES <= len(parts) <= MAX_SITES:
        return (f"no site's own tables were kept ({len(parts)} parts): the selection-free comparison needs "
                f"{MIN_SITES}-{MAX_SITES} sites' tables; the study's evaluation round is the evidence to use")
    names = {p[0] for p in parts}
    if {s.site for s in sites} != names:
        return "the round-1 records do not name the same sites as the round-2 tables"
    cb = summary.codebook
    measured = [f.name for f in cb.features]
    cls = estimator_class(est.learner)
    rule_f, prior_f, wts, chosen = [], [], [], []
    try:
        for k, (site, tables) in enumerate(parts):
            others = [s for s in sites if s.site != site]
            feats = [a for a in select(others) if a in measured]
            rest = Summary(cb, sum_tables([ts for j, (_, ts) in enumerate(parts) if j != k])[0])
            held = Summary(cb, list(tables))
            sample = tan_sample(held, seed=SEED + k)
            prior = LabelOnly().fit(rest)
            model = cls(**_fold_params(est, feats)).fit(rest) if feats and est.learner != "prior" else prior
            rule_f.append(sample_error(model, sample))
            prior_f.append(sample_error(prior, sample))
            wts.append(max(float(held.n), 0.0))
            chosen.append(feats)
    except InputError as exc:
        return f"the selection-free comparison could not be made: {exc}"
    w = np.asarray(wts) if sum(wts) > 0 else np.ones(len(wts))
    return Comparison(float(np.average(rule_f, weights=w)), float(np.average(prior_f, weights=w)),
                      paired_se(rule_f, prior_f, list(w)), [float(v) for v in rule_f], [float(v) for v in prior_f],
                      [float(v) for v in w], chosen)
