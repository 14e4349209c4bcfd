"""Select, then measure: how a site's total privacy budget for a study is split between its two rounds.

Under differential privacy the default export is two rounds (DESIGN.md, "Select, then
measure"). ``marg export DATA --epsilon ε`` states the site's **total** for the study,
ε at the cap's δ, as ρ_total = the largest ρ whose zCDP guarantee is (ε, δ)-DP
(:func:`marg.marginals.counts.dp_conversions.rho_for_epsilon`); every part below is a zCDP
release and their ρ's add — except a Laplace label table, whose ε_L is charged as the ρ it
takes from the others (below) — so the two rounds together are (ε, δ)-DP.

**Round 1** releases

- the label table N[y] at its own share a_L·ρ_total, so a learner with nothing else above the
  noise can still answer the larger class, certified by this table alone (``prior``). Its
  mechanism is the less noisy of two with the same effect on the rest (:func:`label_mechanism`):
  the discrete Gaussian at ρ_L = a_L·ρ_total (std K/sqrt(2ρ_L)), or OpenDP's Laplace at the ε
  the share frees, ε_L = ε − ε(ρ_total − ρ_L, δ) (std √2·K/ε_L; pure ε-DP, composed with the
  zCDP parts as ε_L + ε(ρ, δ), as the ledger does). Both leave the selection and round 2 the
  same ρ_total − ρ_L. A table of C cells has sensitivity K in both norms, and the Gaussian's
  (ε, δ) price for so small a release is high: at ε = 1, δ = 10⁻⁶ and a_L = 0.98 (the split
  rule's choice at leukemia's 19 patients a site) the Gaussian's std is 4.58 a cell and
  Laplace's 1.62, so the pooled class difference of three sites has std 11.2 against 4.0 —
  on ALLAML's split 0 (37 against 21 training patients) the Gaussian table called the larger
  class wrong far more often (simulated through the post-processing and ``prior``: BENCHMARKS.md,
  "Tiny sites: the label table by Laplace, and why no gene can be selected"). Laplace wins from a_L ≈ 0.3 up (tiny and
  small sites); below it the Gaussian does. The split rule's proxy still scores the Gaussian table (its P_wrong is then
  an upper bound; the plan records ``p_wrong_released``, Φ(−GAP·N/(σ·sqrt(2S))) at the Laplace table's continuous
  std σ = √2·K/ε_L, by that table alone — the proxy's P_wrong also reads round 2's column sums); a ρ cap keeps
  the Gaussian (it would count ε_L as ε_L²/2);
- the private selection (:mod:`marg.marginals.selection`): the k features whose
  single-feature rule scores highest, by OpenDP's noisy top-k at a_S·ρ_total.

**Round 2** (``marg export --request REQ``) measures what the learner asked for with the
rest, ρ_total − ρ_round1: the first-order tables of the features the sites agreed on and
the pair tables among the strongest of them (:mod:`marg.learners.study.two_round` decides which
and how to split the rest among them: least squares, the summed noise variance's minimiser,
within its noise rule).

**The split (a_L, a_S, k) is a rule, not a constant** (:mod:`marg.marginals.study_split`):
it minimises an expected-error proxy from what is known before anything is spent — the rows
per site as stated publicly (``--plan-rows``; without it ``DEFAULT_ROWS``, and the bundle says
so), the codebook's levels and classes, ρ_total and the rows per patient K. Tiny sites put
nearly everything on the label table (nothing else can rise above the noise there, so the
larger class is the answer and its call must be right); larger sites give the selection what
it needs to find their features and round 2 the rest. The plan is recorded in the round-1
bundle (its inputs, the shares, k, the objective's parts), so the learner and the auditor see
what was assumed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from marg.errors import InputError

from .accounting import PrivacyCost, release_cost, zcdp_cost
from .counts.dp_conversions import rho_for_epsilon
from .release_plan import ReleasePlan
from .selection import Selection, select_top_k
from .study_split import DEFAULT_ROWS, SplitInputs, choose_split

STUDY_FORMAT = "marg-study"
STUDY_MECHANISM = "gaussian"  # both rounds' tables: the (discrete) Gaussian, ρ-zCDP, so every part's ρ adds


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
        Σ_i m_i over the candidates (the learner's certificate covers all of them:
        :mod:`marg.learners.study.two_round`).
    rows, rows_stated : tuple of int, bool
        The rows per site the split was chosen for, and whether the site stated them (else ``DEFAULT_ROWS``).
    levels, classes, max_rows : the rest of the rule's inputs (to re-derive it at another K)
    split : dict
        :class:`marg.marginals.study_split.Split`'s record: shares, k, the expected error and its parts.
    label_mechanism, epsilon_label : str, float
        The label table's mechanism (:func:`label_mechanism`) and, for ``"laplace"``, its ε_L
        (``rho_label`` is then the ρ its ε_L takes from the zCDP parts: ρ_total − ρ(ε − ε_L, δ)).
    """

    epsilon: float
    delta: float
    rho_total: float
    rho_label: float
    rho_select: float
    k: int
    candidates: int
    cells: int = 0
    rows: tuple[int, ...] = DEFAULT_ROWS
    rows_stated: bool = False
    levels: tuple[int, ...] = ()
    classes: int = 2
    max_rows: int = 1
    split: dict[str, Any] | None = None
    label_mechanism: str = "gaussian"
    epsilon_label: float = 0.0

    @property
    def total_cost(self) -> PrivacyCost:
        """The study total as a cost, as the ledger composes it: what the cap is checked against before round 1 —
        ρ_total at δ, or with a Laplace label table its ε_L (pure) and the zCDP parts' ρ_total − ρ_label."""
        if self.label_mechanism == "laplace":
            from .counts.dp_conversions import pure_rho

            return release_cost([("laplace", self.epsilon_label, pure_rho(self.epsilon_label), 0.0),
                                 (STUDY_MECHANISM, 0.0, self.rho_total - self.rho_label, self.delta)])
        return zcdp_cost(self.rho_total, self.delta)

    @property
    def rho_rest(self) -> float:
        """What round 2 may spend: ρ_total − the round-1 shares."""
        return max(0.0, self.rho_total - self.rho_label - self.rho_select)

    def at_max_rows(self, max_rows: int) -> "StudyPlan":
        """The plan for a bound of ``max_rows`` rows per patient (the rule re-derived; itself when unchanged)."""
        if int(max_rows) == self.max_rows or not self.levels:
            return self
        return _plan(self.epsilon, self.delta, self.rho_total, self.levels, self.classes, self.cells, self.rows,
                     self.rows_stated, int(max_rows))

    def to_dict(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "delta": self.delta, "rho_total": self.rho_total, "rho_label": self.rho_label,
                "rho_select": self.rho_select, "rho_rest": self.rho_rest, "k": self.k, "candidates": self.candidates,
                "cells": self.cells, "rows": list(self.rows), "rows_stated": self.rows_stated,
                "max_rows": self.max_rows,
                "split": self.split, "label_mechanism": self.label_mechanism, "epsilon_label": self.epsilon_label,
                "rule": "shares and k minimise the expected-error proxy of marg.marginals.study_split for the rows "
                        + ("stated" if self.rows_stated else "assumed (none stated)")
                        + "; round 2 the rest, split by least squares"}


def _plan(epsilon: float, delta: float, rho: float, levels: tuple[int, ...], classes: int, cells: int,
          rows: tuple[int, ...], stated: bool, max_rows: int) -> StudyPlan:
    sp = choose_split(SplitInputs(rows, levels, classes, rho, max_rows))
    mech, eps_label = label_mechanism(epsilon, delta, rho, sp.label * rho)
    split = sp.to_dict()
    if mech == "laplace":  # the proxy's P_wrong is the Gaussian table's; say what the Laplace one alone gives
        from scipy.special import ndtr

        from .study_split import GAP

        std = math.sqrt(2.0) * max_rows / eps_label
        split["p_wrong_released"] = float(ndtr(-GAP * sum(rows) / (std * math.sqrt(2.0 * len(rows)))))
    return StudyPlan(epsilon, delta, rho, sp.label * rho, sp.select * rho, sp.k, len(levels), cells, rows, stated,
                     levels, classes, max_rows, split, mech, eps_label)


LAPLACE_SHAVE = 1e-6
"""ε_L is taken this fraction below ε − ε(ρ_total − ρ_L, δ), so rounding in OpenDP's composition never puts the
study a hair above its total."""


def label_mechanism(epsilon: float, delta: float, rho_total: float, rho_label: float) -> tuple[str, float]:
    """The label table's mechanism at its share (module docstring): ``("laplace", ε_L)`` when OpenDP's Laplace
    at ε_L = (ε − ε(ρ_total − ρ_label, δ))·(1 − ``LAPLACE_SHAVE``) has the smaller std per cell, √2/ε_L against
    the Gaussian's 1/sqrt(2·ρ_label) (both times the rows per patient K), else ``("gaussian", 0.0)``.

    Either way the zCDP parts (selection, round 2) keep ρ_total − ρ_label, and the study stays
    (ε, δ)-DP: ε_L + ε(ρ_total − ρ_label, δ) ≤ ε (ε(·, δ): :func:`marg.marginals.counts.dp_conversions.rho_to_epsilon`).
    """
    from .counts.dp_conversions import rho_to_epsilon

    if not rho_label > 0.0:
        return "gaussian", 0.0
    eps_label = (float(epsilon) - rho_to_epsilon(max(0.0, rho_total - rho_label), float(delta))) * (1.0 - LAPLACE_SHAVE)
    if eps_label > 0.0 and math.sqrt(2.0) / eps_label < 1.0 / math.sqrt(2.0 * rho_label):
        return "laplace", float(eps_label)
    return "gaussian", 0.0


def round1_study_rho(plan: StudyPlan, selection: Selection, cost: PrivacyCost) -> float:
    """What round 1 took from the study's ρ_total (round 2 may spend the rest): its cost's ρ, or with a Laplace
    label table ρ_label (the ρ its ε_L takes from the zCDP parts) plus the selection's ρ."""
    if plan.label_mechanism == "laplace":
        return plan.rho_label + selection.rho
    return cost.rho


def label_noise_std(plan: StudyPlan, max_rows: int = 1) -> float:
    """The label table's noise std per cell per site under ``plan`` (the discrete mechanism's, OpenDP's scale
    before rounding): √2-ish·K/ε_L for Laplace, about K/sqrt(2ρ_label) for the Gaussian."""
    from .mechanisms import get_mechanism

    g = get_mechanism(plan.label_mechanism)
    share = plan.epsilon_label if plan.label_mechanism == "laplace" else plan.rho_label
    return g.std(g.scale_for(share, max_rows), True)


def with_gaussian_label(plan: StudyPlan) -> StudyPlan:
    """``plan`` with its label table on the Gaussian (a cap in ρ counts Laplace's ε_L as ε_L²/2)."""
    from dataclasses import replace

    return replace(plan, label_mechanism="gaussian", epsilon_label=0.0)


def study_plan(codebook: Any, epsilon: float, delta: float, rows: Sequence[int] | None = None,
               max_rows: int = 1) -> StudyPlan:
    """The two-round plan of a site stating ``epsilon`` (at ``delta``) as its study total.

    ``rows``: the rows per site as stated publicly (never the data's own count); None assumes
    ``DEFAULT_ROWS``. ``max_rows``: the bound K on a patient's rows."""
    if epsilon is None or not (float(epsilon) > 0.0 and math.isfinite(float(epsilon))):
        raise InputError(f"the two-round DP export needs the site's total --epsilon (> 0), got {epsilon!r}")
    if not (0.0 < float(delta) < 1.0):
        raise InputError(f"the two-round DP export needs 0 < --delta < 1, got {delta!r}")
    rho = rho_for_epsilon(float(epsilon), float(delta))
    p = len(codebook.discrete_names)
    if p == 0:
        raise InputError("the two-round DP export selects among discrete features; this codebook has none (use "
                         "--rounds 1)")
    levels = tuple(int(codebook.feature(a).n_levels) for a in codebook.discrete_names)
    stated = rows is not None
    rows_t = tuple(int(r) for r in rows) if stated else DEFAULT_ROWS
    if not rows_t or min(rows_t) <= 0:
        raise InputError(f"the rows per site must be positive counts, got {list(rows_t)!r}")
    return _plan(float(epsilon), float(delta), rho, levels, int(codebook.label.n_classes), sum(levels), rows_t, stated,
                 int(max_rows))


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
    y = codebook.label.name
    label = [t for t in tables if t.clique == (y,) and t.kind == "counts"]
    if len(label) != 1:
        raise InputError("round 1 needs the label table N[y]")
    lp = label_plan(codebook, plan, max_rows)
    released = lp.release(label, codebook)
    sel = select_top_k(tables, codebook.discrete_names, y, plan.k, plan.rho_select, max_rows)
    cost = release_cost([*lp.parts, sel.cost_part(plan.delta)])
    return released, sel, cost


def label_plan(codebook: Any, plan: StudyPlan, max_rows: int = 1) -> ReleasePlan:
    """Round 1's label table N[y] planned once (:class:`marg.marginals.release_plan.ReleasePlan`) at its
    share ρ_label, sensitivity K = ``max_rows`` — before any data is read; its noise, std and cost part."""
    if plan.label_mechanism == "laplace":  # the less noisy for the same zCDP rest (label_mechanism)
        return ReleasePlan.for_cliques([(codebook.label.name,)], codebook, epsilon=plan.epsilon_label,
                                       mechanism="laplace",
                                       max_rows=max_rows)
    return ReleasePlan.for_cliques([(codebook.label.name,)], codebook, rho=plan.rho_label, delta=plan.delta,
                                   mechanism=STUDY_MECHANISM, max_rows=max_rows)


def round1_record(plan: StudyPlan, selection: Selection, cost: PrivacyCost) -> dict[str, Any]:
    """What the round-1 bundle's header says of the study (under the site's signature)."""
    return {"format": STUDY_FORMAT, "round": 1, "plan": plan.to_dict(), "selection": selection.to_dict(),
            "spent": cost.to_dict(), "rho_study": round1_study_rho(plan, selection, cost)}


def round2_record(asked_rho: float, cost: PrivacyCost, request_digest: str, signer: str | None) -> dict[str, Any]:
    """What the round-2 bundle's header says of the study."""
    return {"format": STUDY_FORMAT, "round": 2, "rho": asked_rho, "spent": cost.to_dict(),
            "request": request_digest, "requested_by": signer}


def study_record(header: Mapping[str, Any]) -> dict[str, Any] | None:
    """A bundle header's study record, or None (a one-round release)."""
    d = header.get("study")
    return dict(d) if isinstance(d, Mapping) and d.get("format") == STUDY_FORMAT else None
