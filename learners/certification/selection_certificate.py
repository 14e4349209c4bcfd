"""The certificate of a rule fitted on features selected from the same patients (a select-then-measure study).

A summary whose features were chosen by round 1's private selections (``Summary.selection``,
:class:`marg.marginals.selected_from.SelectedFrom`) carries that record wherever it goes, and
every estimator fitted on it certifies itself over a box that covers the selection — its fit's
last step (:meth:`marg.learners.estimator.base.MarginalEstimator.cover_selection`), so ``MRC().fit(S)``
and ``marg.learn(S, "mrc")`` give the same certificate:

- a rule additive in one-hot features: W(h) over the first-order box with λ calibrated for
  **every candidate feature's** cells together (``n_intervals`` = K·Σ_i m_i over all p
  candidates, :meth:`SelectedFrom.candidate_entries`, as
  :func:`marg.learners.certification.certify.certify_projected` does for screened genes): on the event that all
  p candidates' cells lie in their intervals — an event fixed before any selection — the selected
  ones do too, whichever were chosen; at α/2 (:func:`split_coverage` (coverage, 2));
- the label-only rule (:class:`marg.learners.classifiers.label_only.LabelOnly`): the label counts of
  :func:`label_source` at α/2 — the least noisy of the label table and a measured table's column
  sums, both drawn after the selection; three events (the sample and the noise of either source,
  whose pick depends on round 2's plan), α/6 each;
- a rule that is not additive (a DCC with pairs): the trivial 1, saying why.

The two halves of α make the certificate hold for whichever of the two models a study returns
(:func:`marg.learners.study.two_round.finish`: the larger class when nothing is above the noise, else
the fitted rule): each model's certificate rests on its own event at α/2, so together they hold at
``coverage`` (union bound). One event serves every rule at once (the box is the same for all), so
the automatic choice needs no Bonferroni over its candidates for it.
"""

from __future__ import annotations

from typing import Any

from marg.errors import InputError

from ..core.certificate import Certificate
from .choice_certificates import split_coverage
from ..features.statistics import released

RULE_EVENTS = 2
"""The study's two possible models (the fitted rule, the larger class) each hold at α/2."""
PRIOR_EVENTS = 3
"""Inside the larger class's α/2: the sample, the label table's noise and a round-2 source's (α/6 each)."""


def selection_coverage(coverage: float) -> float:
    """The coverage of the selection-wide box of a rule: 1 − α/2 (module docstring)."""
    return split_coverage(coverage, RULE_EVENTS)


def prior_coverage(coverage: float) -> float:
    """The coverage the label-only bound is computed at on a selected summary: 1 − α/3 (module docstring)."""
    return split_coverage(coverage, PRIOR_EVENTS)


def selection_certificate(est: Any, summary: Any, coverage: float) -> Certificate:
    """W(h) of ``est``'s additive rule over the first-order box of every candidate feature of ``summary``'s
    selection at 1 − α/2, reported at ``coverage`` (module docstring); the trivial 1 for a rule that is not additive."""
    from dataclasses import replace

    from .certify import certify

    sel = summary.selection
    if sel is None:
        raise InputError("the summary records no selection of its features (not a select-then-measure study)")
    entries = candidate_entries(summary)
    try:
        cert = certify(est, summary, coverage=selection_coverage(coverage), structure="first", n_intervals=entries)
        return replace(cert, coverage=float(coverage))
    except InputError as exc:  # a rule that is not additive in one-hot features: no certificate under selection
        return Certificate(1.0, "W(h)", float(coverage), False, int(summary.n_classes),
                           note=f"the rule cannot be certified over the selection-wide box ({exc}); trivial 1")


def candidate_entries(summary: Any) -> int:
    """K·Σ_i m_i over every candidate feature the sites selected from (the full codebook's discrete features)."""
    own = sum(int(f.n_levels) for f in summary.codebook.features if f.is_discrete)
    sel = summary.selection
    return int(summary.n_classes) * own if sel is None else sel.candidate_entries(summary.n_classes, own)


def label_source(summary: Any) -> Any:
    """The summary the label-only rule reads: the released tables whose N[y] is least noisy — the label
    table (round 1's share), or the column sums Σ_x N[x, y] of a measured first-order table (round 2's
    share, m cells' noise). Either is the sample's label counts plus noise drawn after the selection,
    so the label-only box holds whichever feature was selected."""
    from marg.marginals.summary import Summary

    rel = released(summary)
    lab = summary.codebook.label.name
    best, best_std = summary, float(rel.count_noise_std((lab,)))
    for t in rel.tables:
        if t.kind != "counts" or len(t.clique) != 2 or t.clique[1] != lab:
            continue
        try:
            sub = Summary(summary.codebook.subset([t.clique[0]]), [t], provenance=summary.provenance,
                          parent_fingerprint=summary.fingerprint, postprocess=False)
        except InputError:  # its noisy total is not positive: far noisier than the label table
            continue
        std = float(sub.count_noise_std((lab,)))
        if std < best_std:
            best, best_std = sub, std
    return best


__all__ = ["PRIOR_EVENTS", "RULE_EVENTS", "candidate_entries", "label_source", "prior_coverage",
           "selection_certificate", "selection_coverage"]
