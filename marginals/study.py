"""Select, then measure: how a site's total privacy budget for a study is split between its two rounds.

Under differential privacy the default export is two rounds (DESIGN.md, "Select, then
measure"). ``marg export DATA --epsilon ε`` states the site's **total** for the study,
ε at the cap's δ, as ρ_total = the largest ρ whose zCDP guarantee is (ε, δ)-DP
(:func:`marg.marginals.dp_conversions.rho_for_epsilon`); every part below is a zCDP
release and their ρ's add, so the two rounds together are (ε, δ)-DP.

**Round 1** releases

- the label table N[y], discrete Gaussian at ``LABEL_SHARE``·ρ_total — its own share, so
  a learner with nothing else above the noise can still answer the larger class,
  certified by this table alone (``prior``);
- the private selection (:mod:`marg.marginals.selection`): the k features whose
  single-feature rule scores highest, by OpenDP's noisy top-k at ``SELECT_SHARE``·ρ_total,
  k = min(``K_SELECT``, p/2) — at most half the candidates, so that a feature the sites
  agree on is not agreed on by chance.

**Round 2** (``marg export --request REQ``) measures what the learner asked for with the
rest, ρ_total − ρ_round1: the first-order tables of the features the sites agreed on and
the pair tables among the strongest of them (:mod:`marg.learners.two_round` decides which
and how to split the rest among them).

**Why these shares.** The label table is K numbers: at 5 % of ρ_total (ε = 1 per site at
δ = 10⁻⁶ is ρ ≈ 0.0244) its per-cell noise std is 1/sqrt(2·0.05·ρ) ≈ 20 rows, a few per cent
of a site of a few hundred patients. The selection's Gumbel scale at 10 % with k = 16 is
sqrt(k/(8·0.1·ρ)) ≈ 29 rows: below the correct-count gap of a feature that moves a single
rule's accuracy by 10 points at 500 patients (50 rows), far below a strong one's. The
remaining 85 % goes where the learner reads: the selected tables (measured on kr-vs-kp, five
splits: 20 % for the selection gave a mean error of 0.115, 10 % 0.097). The split of round 2 among
its tables is the least-squares rule (:func:`marg.marginals.allocation.least_squares_weights`),
which minimises the summed noise variance of the released counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from marg.errors import InputError

from .accounting import PrivacyCost, release_cost
from .dp_conversions import rho_for_epsilon
from .selection import Selection, select_top_k

LABEL_SHARE = 0.05
SELECT_SHARE = 0.10
K_SELECT = 16
STUDY_FORMAT = "marg-study"


@dataclass(frozen=True)
class StudyPlan:
    """A site's split of its study total (module docstring): what round 1 spends, what round 2 may.

    Attributes
    ----------
    epsilon, delta : float
        The site's total for the study, (ε, δ)-DP.
    rho_total : float
        ρ_total, the largest ρ that is (ε, δ)-DP (OpenDP's conversion).
    rho_label, rho_select : float
        Round 1's shares: the label table and the selection.
    k, candidates : int
        Features the selection keeps, among ``candidates``.
    cells : int
        Σ_i m_i over the candidates (the learner's certificate covers all of them: :mod:`marg.learners.two_round`).
    """

    epsilon: float
    delta: float
    rho_total: float
    rho_label: float
    rho_select: float
    k: int
    candidates: int
    cells: int = 0

    @property
    def rho_rest(self) -> float:
        """What round 2 may spend: ρ_total − the round-1 shares."""
        return max(0.0, self.rho_total - self.rho_label - self.rho_select)

    def to_dict(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "delta": self.delta, "rho_total": self.rho_total, "rho_label": self.rho_label,
                "rho_select": self.rho_select, "rho_rest": self.rho_rest, "k": self.k, "candidates": self.candidates,
                "cells": self.cells,
                "rule": f"label table {LABEL_SHARE:g}, selection {SELECT_SHARE:g} of rho_total (k = min({K_SELECT}, p // 2)); "
                        "round 2 the rest, split by least squares"}


def study_plan(codebook: Any, epsilon: float, delta: float) -> StudyPlan:
    """The two-round plan of a site stating ``epsilon`` (at ``delta``) as its study total."""
    if epsilon is None or not (float(epsilon) > 0.0 and math.isfinite(float(epsilon))):
        raise InputError(f"the two-round DP export needs the site's total --epsilon (> 0), got {epsilon!r}")
    if not (0.0 < float(delta) < 1.0):
        raise InputError(f"the two-round DP export needs 0 < --delta < 1, got {delta!r}")
    rho = rho_for_epsilon(float(epsilon), float(delta))
    p = len(codebook.discrete_names)
    if p == 0:
        raise InputError("the two-round DP export selects among discrete features; this codebook has none (use --rounds 1)")
    cells = sum(int(codebook.feature(a).n_levels) for a in codebook.discrete_names)
    return StudyPlan(float(epsilon), float(delta), rho, LABEL_SHARE * rho, SELECT_SHARE * rho, max(1, min(K_SELECT, p // 2)), p, cells)


def round1_cliques(codebook: Any) -> list[tuple[str, ...]]:
    """What round 1 counts at the site: the label table, and every discrete feature's N[x_i, y]
    (the selection scores them; only the label table and the chosen indices leave)."""
    y = codebook.label.name
    return [(y,)] + [(a, y) for a in codebook.discrete_names]


def release_round1(tables: Sequence[Any], codebook: Any, plan: StudyPlan,
                   max_rows: int = 1) -> tuple[list[Any], Selection, PrivacyCost]:
    """Round 1 from the site's exact tables: the noisy label table, the selection, their composed cost.

    Parameters
    ----------
    tables : the exact tables of :func:`round1_cliques`
    max_rows : the bound K on a patient's rows (:mod:`marg.marginals.privacy_unit`): the label
        table's sensitivity and the selection scores' L∞ sensitivity are K rows

    Returns
    -------
    released : [the noisy label table]
    selection : :class:`marg.marginals.selection.Selection`
    cost : PrivacyCost — the label table's and the selection's ρ added, converted once (δ = ``plan.delta``)
    """
    from .privacy import privatize

    y = codebook.label.name
    label = [t for t in tables if t.clique == (y,) and t.kind == "counts"]
    if len(label) != 1:
        raise InputError("round 1 needs the label table N[y]")
    released, label_cost = privatize(label, rho=plan.rho_label, delta=plan.delta, codebook=codebook, mechanism="gaussian",
                                   max_rows=max_rows)
    sel = select_top_k(tables, codebook.discrete_names, y, plan.k, plan.rho_select, max_rows)
    cost = release_cost([("gaussian", 0.0, label_cost.rho, plan.delta), sel.cost_part(plan.delta)])
    return released, sel, cost


def round1_record(plan: StudyPlan, selection: Selection, cost: PrivacyCost) -> dict[str, Any]:
    """What the round-1 bundle's header says of the study (under the site's signature)."""
    return {"format": STUDY_FORMAT, "round": 1, "plan": plan.to_dict(), "selection": selection.to_dict(),
            "spent": cost.to_dict()}


def round2_record(asked_rho: float, cost: PrivacyCost, request_digest: str, signer: str | None) -> dict[str, Any]:
    """What the round-2 bundle's header says of the study."""
    return {"format": STUDY_FORMAT, "round": 2, "rho": asked_rho, "spent": cost.to_dict(),
            "request": request_digest, "requested_by": signer}


def study_record(header: Mapping[str, Any]) -> dict[str, Any] | None:
    """A bundle header's study record, or None (a one-round release)."""
    d = header.get("study")
    return dict(d) if isinstance(d, Mapping) and d.get("format") == STUDY_FORMAT else None
