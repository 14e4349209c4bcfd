"""Certify a fitted model's own rule: its worst-case error over an uncertainty set built from a Summary.

Any model whose deterministic rule is an argmax of scores additive in one-hot features (Rényi's
MAP rule, naive Bayes, the MRC's argmax) gives it as a
:class:`marg.learners.minimax.fixed_rule.LinearRule` (its estimator's ``linear_rule()``; ties are
over-approximated, so any tie-break is covered) and is certified over
U = {p : |E_pΦ − τ| ≤ λ}, Φ the first-order indicators (``structure="first"``) or those plus
the pairs of a maximum spanning forest on I(X_i, X_j; Y) (``"forest"``), λ calibrated to the
simultaneous ``coverage`` as for the MRC. ``exact=True`` computes W(h) by row generation
with MILP separation (:func:`..minimax.fixed_rule_fit.certify_rule`, valid at any stop), or the
one-LP bound where that is smaller; otherwise the one-LP Lagrangian bound W_L ≥ W(h)
(:func:`..minimax.fixed_rule_lp.certify_rule_lp`), which can be far above W(h) over a forest's box.
Either is a valid certificate for the rule the model predicts with.
"""

from __future__ import annotations

from typing import Any, Literal


from marg.errors import InconsistentStatistics, InputError

from ..core.certificate import Certificate
from ..features.calibration import confidence_box
from ..features.box import box_tables
from ..features.blocks import FeatureMap, node_blocks
from ..features.pairwise import PairwiseFeatureMap
from ..features.statistics import map_moments, released
from ..minimax.fixed_rule_fit import certify_rule
from ..minimax.fixed_rule_lp import certify_rule_lp
from ..features.structure import max_spanning_forest, pair_label_information

Structure = Literal["first", "forest"]


def uncertainty_map(summary: Any, structure: Structure = "forest", features: list[str] | None = None) -> Any:
    """The map of U: every discrete feature's first-order indicators, plus a maximum spanning
    forest's pairs on I(X_i, X_j; Y) over the released pair tables for ``"forest"``."""
    blocks = [b for b in node_blocks(summary.codebook, features) if b.kind == "onehot"]
    nodes = FeatureMap(blocks, [b.column for b in blocks])
    if structure == "first":
        return nodes
    if structure != "forest":
        raise InputError(f"unknown uncertainty structure {structure!r} (expected 'first' or 'forest')")
    node_of = {b.column: k for k, b in enumerate(blocks)}
    info = {(node_of[i], node_of[j]): v for (i, j), v in pair_label_information(summary,
                                                                                [b.name for b in blocks]).items()}
    forest = max_spanning_forest(len(blocks), info)
    return PairwiseFeatureMap(blocks, [b.column for b in blocks], sorted(forest))


def candidate_count(summary: Any, features: list[str] | None = None) -> int:
    """The Bonferroni count of the forest's box: K × (every first-order cell + every released pair's
    cells) among ``features`` (None: every discrete feature).

    The forest of :func:`uncertainty_map` is chosen from the same tables (by I(X_i, X_j; Y)), so
    its box must be the projection of the box over every pair it could have chosen: a count of
    the chosen pairs' cells alone would make the event depend on the choice."""
    blocks = [b for b in node_blocks(summary.codebook, features) if b.kind == "onehot"]
    node_of = {b.column: k for k, b in enumerate(blocks)}
    pairs = [(node_of[i], node_of[j]) for (i, j) in pair_label_information(summary, [b.name for b in blocks])]
    full = PairwiseFeatureMap(blocks, [b.column for b in blocks], sorted(pairs))
    return int(summary.n_classes) * int(full.dim)


def certify(est: Any, summary: Any, coverage: float = 0.95, s: float | None = None, structure: Structure = "forest",
            exact: bool = False, time_limit: float | None = None, features: list[str] | None = None,
            n_intervals: int | None = None) -> Certificate:
    """A valid certificate (kind ``"W(h)"``) for ``est``'s deterministic rule from ``summary``'s tables.

    ``features`` restricts the uncertainty map to those features (they must include the
    rule's) and ``n_intervals`` counts the entries the box must cover together
    (:func:`marg.learners.features.calibration.confidence_box`): with the count of the whole
    summary's map, the box is the projection of the whole box, so W(h) over it bounds W(h)
    over the whole set from above (:mod:`marg.learners.choice.screened`). With ``structure="forest"``
    the count defaults to :func:`candidate_count` (every pair the forest could have taken)."""
    rule = est.linear_rule()  # each estimator knows its rule; a non-additive one raises InputError
    cov = coverage if s is None else None
    try:
        released(summary)  # the box is built from the tables as released
    except InputError as exc:
        if not summary.is_noisy:
            raise
        return Certificate(1.0, "W(h)", cov, False, rule.n_classes,
                           note=f"the tables as released give no confidence box ({exc}: the DP noise swamps the "
                                f"counts); the certificate is the trivial 1")
    bad = summary.released_invalid if summary.is_noisy else None
    if bad:  # tiny sites under heavy noise: the tables as released sum to n ≤ 0
        return Certificate(1.0, "W(h)", cov, False, rule.n_classes,
                           note=f"the noisy tables as released admit no interval ({bad}); the certificate is the "
                                "trivial 1")
    umap = uncertainty_map(summary, structure, features)
    # the forest is chosen from the tables: count every candidate pair
    if structure == "forest" and n_intervals is None:
        n_intervals = candidate_count(summary, features)
    m = map_moments(summary, umap)
    cbox = confidence_box(m, umap.indicator_columns(), s=s, coverage=coverage, n_intervals=n_intervals)
    lam = cbox.lam
    box = box_tables(umap, m.tau, lam, summary.codebook.label.name)
    try:
        value = certify_rule_lp(rule, umap, m.tau, lam)
        if exact:  # row generation is valid at any stop; the LP bound may still be the smaller
            value = min(value, certify_rule(rule, umap, m.tau, lam, time_limit=time_limit).value)
    except InconsistentStatistics:
        if not summary.is_noisy:
            raise  # exact tables that admit no distribution: the data's fault
        # Under DP the box τ ± λ (built from the tables as released) is empty only when the noise
        # left its calibrated half-width (probability ≤ 1 − coverage): no bound at this coverage;
        # the rule stands with the trivial certificate, and says why.
        return Certificate(1.0, "W(h)", cov, cbox.approximate, rule.n_classes, box=box,
                           note=f"no distribution lies within the {coverage:.0%} confidence box of the noisy tables "
                                "(the DP noise exceeded its calibrated half-width, probability <= "
                                f"{1 - coverage:.0%}); the certificate is the trivial 1")
    return Certificate(float(value), "W(h)", cov, cbox.approximate, rule.n_classes, box=box)


def certify_projected(est: Any, summary: Any, coverage: float = 0.95, exact: bool = False,
                      time_limit: float | None = None) -> Certificate:
    """W(h) of ``est``'s rule over the first-order box of the features it uses, λ calibrated for
    every discrete feature's first-order cells together.

    With U_all = {p : |E_pΦ − τ| ≤ λ} over all K·D first-order cells of the summary, the LP
    over the rule's features S alone with THE SAME λ (``n_intervals`` = K·D) is over a set U_S
    that contains the projection of U_all, so its value bounds W(h) over U_all from above: a
    valid certificate on the event that U_all holds the truth, an event fixed before any
    feature was chosen from the same tables (:mod:`marg.learners.choice.screened`). Its LP has the
    rule's cells only, where U_all's has every feature's (minutes on thousands of genes)."""
    K = int(summary.n_classes)
    cells = sum(b.size for b in node_blocks(summary.codebook) if b.kind == "onehot")
    return certify(est, summary, coverage=coverage, structure="first", exact=exact, time_limit=time_limit,
                   features=list(est.feature_names_in_), n_intervals=K * cells)
