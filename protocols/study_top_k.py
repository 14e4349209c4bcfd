"""A study's round 1 with the private selection: the label table through the secure sum, and each site's own OpenDP
top-k.

Where the study's design (:mod:`marg.marginals.study_design`, ``selection = "private"``) finds that pooled
first-order scores cost more than they give — p tables share round 1's budget, so each pooled score's noise
std grows like √p —, round 1 releases at each site

- the label table N[y], through the secure sum like every study table (its share of the study's one noise,
  :mod:`marg.marginals.shared_noise`, or the site's own Gaussian noise without secure aggregation), at the
  round's ``tables_rho``;
- the indices of its k best features by OpenDP's noisy top-k (:func:`marg.marginals.selection.select_top_k`:
  the exponential mechanism k times without replacement, Gumbel noise on each score, monotonic L∞ sensitivity
  of the privacy unit's row bound K), at ``top_k.rho``. Its zCDP cost is OpenDP's map of the measurement,
  k·(K/scale)²/8, whatever p is: the cost of a private top-k grows with k, and its error like scale·ln p.

The site computes its scores from its own exact first-order tables N[x_i, y] (counted, never released). The
selection is not summed: it travels in the site's signed upload (``privacy.selection``), and the learner pools
the sites' lists by their vote (:func:`marg.learners.study.two_round.above_chance`). Both parts are ρ-zCDP, so the
round's cost is their sum: the ledger is charged the label table's study guarantee (the secure sum of any t
shares) plus the top-k's ρ, and records beside it the site's own guarantee (its share alone plus the same
top-k: a selection is this site's alone whoever colludes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from marg.errors import RefusedError
from marg.marginals.accounting import PrivacyCost, release_cost
from marg.marginals.release_plan import ReleasePlan
from marg.marginals.selection import Selection, select_top_k

from .study_round import MECHANISM, StudyTables

SLACK = 1e-9


def top_k_block(block: Mapping[str, Any]) -> dict[str, Any] | None:
    """The round file's ``top_k`` request (``{"k": k, "rho": ρ}``), or None (no private selection this round)."""
    tk = block.get("top_k")
    return dict(tk) if isinstance(tk, Mapping) else None


def check_top_k(block: Mapping[str, Any], where: str) -> tuple[int, float, float]:
    """(k, ρ_top_k, ρ_tables) of a round asking for the private selection; RefusedError when they do not add
    to the round's ρ (the learner may not ask for more than the round says) or are not positive."""
    tk = top_k_block(block) or {}
    try:
        k, r_sel, r_tab, r = int(tk["k"]), float(tk["rho"]), float(block["tables_rho"]), float(block["rho"])
    except (KeyError, TypeError, ValueError):
        raise RefusedError(f"{where} refused: a malformed private-selection request") from None
    if k < 1 or not (r_sel > 0.0 and r_tab > 0.0 and math.isfinite(r)) or abs(r_sel + r_tab - r) > SLACK * r + 1e-15:
        raise RefusedError(f"{where} refused: the private selection's ρ ({r_sel:.6g}) and the tables' ({r_tab:.6g}) "
                           f"must be positive and add to the round's ρ ({r:.6g})")
    return k, r_sel, r_tab


@dataclass
class StudyTopK(StudyTables):
    """Round 1 of a study with the private selection (module docstring): ``export_site``'s ``study=`` hook.

    ``cliques_`` are the released tables (the label table); ``names`` the candidates, whose first-order tables
    are counted for the scores only. ``rho`` is the round's whole ρ (checked against the study's total and
    recorded in the site's study state), ``tables_rho`` the released tables' part, ``top_k_rho`` the selection's.
    """

    names: Sequence[str] = ()
    k: int = 1
    tables_rho: float = 0.0
    top_k_rho: float = 0.0
    selection: Selection | None = None

    def cliques(self, codebook: Any) -> list[tuple[str, ...]]:
        y = codebook.label.name
        return list(self.cliques_) + [(a, y) for a in self.names]

    def check(self, ledger_dir: Any, codebook: Any, site: str) -> None:
        super().check(ledger_dir, codebook, site)
        if self.share is None:  # each site's own noise on the released tables, at their part of the round
            self.release_plan = ReleasePlan.for_cliques(self.cliques_, codebook, rho=self.tables_rho,
                                                        weights=self.weights, delta=self.study.delta,
                                                        mechanism=MECHANISM, max_rows=self.max_rows)

    def protect(self, tables: Sequence[Any], codebook: Any) -> tuple[list[Any], PrivacyCost, dict[str, Any],
                                                                     dict[str, Any]]:
        released_cliques = {tuple(c) for c in self.cliques_}
        label_tables = [t for t in tables if tuple(t.clique) in released_cliques]
        first = [t for t in tables if tuple(t.clique) not in released_cliques]
        sel = select_top_k(first, list(self.names), codebook.label.name, self.k, self.top_k_rho,
                           sensitivity=float(self.max_rows))
        self.selection = sel
        released, tables_cost, privacy, record = super().protect(label_tables, codebook)
        delta = float(self.study.delta)
        cost = with_selection(tables_cost, sel, delta)
        own = with_selection(self.own_cost, sel, delta) if self.own_cost is not None else cost
        self.own_cost, self.study_cost = (own if self.share is not None else None), cost
        privacy = {**privacy, **cost.to_dict(), "selection": {**sel.to_dict(), "site": self.site}}
        record = {**record, "site_cost": cost.to_dict(), "study_cost": cost.to_dict(), "selection": sel.to_dict(),
                  "tables_rho": self.tables_rho}
        if self.share is not None:
            record["noise"] = {**record["noise"], "own_cost": own.to_dict()}
        self.record = record
        return released, cost, privacy, record


def with_selection(cost: PrivacyCost, sel: Selection, delta: float) -> PrivacyCost:
    """``cost`` (a zCDP release: the round's tables) composed with the selection's zCDP part (ρ's add, ε at δ by
    OpenDP)."""
    return release_cost([("zcdp", 0.0, float(cost.rho), max(float(cost.delta), delta)), sel.cost_part(delta)])


def selections_of(privacy: Sequence[Mapping[str, Any]] | None) -> list[tuple[str, Selection]]:
    """(site, selection) of each site as its signed upload states it (``privacy.selection``), in upload order."""
    return [(str(p["selection"].get("site")), Selection.from_dict(p["selection"])) for p in (privacy or [])
            if isinstance(p, Mapping) and isinstance(p.get("selection"), Mapping)]


__all__ = ["StudyTopK", "check_top_k", "selections_of", "top_k_block", "with_selection"]
