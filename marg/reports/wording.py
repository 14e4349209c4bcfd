"""Plain words for a model card: what each learner parameter and fitted value means to a reader.

The card shows a parameter with its meaning when it shapes the model or its guarantee
(:data:`PARAMETERS`), and folds the solver's settings away (:data:`SOLVER_SETTINGS`); a fitted
value appears under a plain name (:data:`FITTED`), never under its field name. A parameter
that is ``None`` (a default decided at fit time) is described by what it became, not shown
as ``None`` (:func:`parameter_rows`).
"""

from __future__ import annotations

from typing import Any

PARAMETERS: dict[str, tuple[str, str]] = {
    "coverage": ("Confidence of the certificate",
                 "the probability that the box of plausible statistics (around the released counts) holds the truth"),
    "s": ("Width of the box, set by hand",
          "multiplier of the statistics' standard error; no confidence level is then claimed"),
    "features": ("Features allowed", "the model was restricted to these features"),
    "alpha@nb": ("Smoothing pseudo-count", "added to every count of the naive-Bayes tables (0.5: Jeffreys)"),
    "ridge": ("Ridge penalty", "shrinks the weights towards 0, against noise in the released counts"),
    "coding": ("Coding of the solution", "how the Rényi fit resolves a singular system"),
    "greedy": ("Greedy pairs", "pairs of features were added one at a time while they lowered the bound"),
    "max_edges": ("Most pairs modelled jointly", "cap on the pairs of features the model may read together"),
    "edge_weight": ("How pairs were chosen", "cmi: association of the pair given the outcome; label: with the outcome"),
    "structure": ("Which pairs", "forest: a tree of the strongest pairs; all: every released pair"),
    "loss": ("Loss minimised", "01: the worst-case error rate; hinge: the worst-case hinge loss"),
    "max_order": ("Longest rule", "the largest number of conditions combined in one rule of the vote"),
    "kappa": ("Price of a rule's length", "how much a longer rule must improve the bound to be kept"),
    "certify": ("How the certificate was computed", "exact: the rule's exact worst case; bound: a faster upper bound"),
}
"""Parameter (or ``name@learner``) → (plain name, meaning)."""

SOLVER_SETTINGS = frozenset({"bound", "eps", "formulation", "k_max", "n_max", "lp_solver", "solver", "time_limit",
                             "tol",
                             "empty_cells", "empty", "alpha@dcc", "extra_rows", "greedy_candidates", "greedy_tol",
                             "penalty"})
"""Settings of the optimisation, not of the model's meaning: listed folded, for reproduction."""

FITTED: dict[str, tuple[str, str]] = {
    "gamma": ("Rényi bound 2γ on exact pairwise tables", "the bound before allowing for sampling error and noise"),
    "hgr_lower_bound": ("Strength of the association between the features and the outcome",
                        "a lower bound on their maximal correlation (0: none, 1: perfect)"),
    "separable": ("The classes are perfectly separable",
                  "yes: in the released tables some levels occur with one class only"),
    "noise_margin": ("Noise margin", "how much the fit must beat always predicting the majority class, given the "
                                     "noise"),
    "ridge": ("Ridge penalty used", "set from the recorded noise when not given"),
    "majority_fallback": ("Falls back to the majority class",
                          "yes when the fit did not beat the prior by more than the noise margin"),
    "unpaired_features": ("Features without pair tables", "read on their own, not jointly with the others"),
    "relaxed": ("Bound relaxed", "yes when the pairs form cycles: the certificate is then an upper bound of the exact "
                                 "one"),
    "terms": ("Rules in the vote", ""),
    "converged": ("The search for rules finished", "yes: no rule left would lower the bound by more than its price"),
    "certificate_converged": ("The certificate's computation finished",
                              "yes: within its time limit (no: the bound is the faster upper bound)"),
}
"""Fitted value (a key of the learner's report) → (plain name, meaning)."""


def _key(name: str, learner: str, table: Any) -> str | None:
    for k in (f"{name}@{learner}", name):
        if k in table:
            return k
    return None


def parameter_rows(params: dict[str, Any], learner: str,
                   certificate: Any) -> tuple[list[tuple[str, str, str]], list[tuple[str, str]]]:
    """(the parameters that matter as (plain name, value in words, meaning), the solver settings as (name, value)).

    ``None`` values are left out, except ``s`` and ``ridge``, which say what the fit used
    instead (λ calibrated to the coverage; the ridge set from the noise).
    """
    shown: list[tuple[str, str, str]] = []
    solver: list[tuple[str, str]] = []
    for name, v in sorted(params.items()):
        if name == "callback":
            continue
        key = _key(name, learner, PARAMETERS)
        if key is None or _key(name, learner, SOLVER_SETTINGS) is not None:
            if v is not None:
                solver.append((name, _words(v)))
            continue
        label, meaning = PARAMETERS[key]
        if v is None:
            if name == "s" and certificate.coverage is not None:
                shown.append(("Width of the box", f"calibrated to {certificate.coverage:.0%} confidence",
                              "set from the statistics' standard errors (and the noise) so the certificate holds"))
            continue
        if name == "coverage" and certificate.coverage is None:
            continue  # λ was set by hand: the coverage did not apply
        shown.append((label, f"{float(v):.0%}" if name == "coverage" else _words(v), meaning))
    return shown, solver


def fitted_rows(report: dict[str, Any], skip: set[str]) -> list[tuple[str, str, Any, str]]:
    """(key, plain name, value, meaning) of the fitted values worth a reader's attention
    (empty lists, None and the keys in ``skip`` left out)."""
    rows = []
    for k, v in sorted(report.items()):
        if (k in skip or k.startswith("certificate_") and k != "certificate_converged" or v is None or v == []
            or v == ""):
            continue
        label, meaning = FITTED.get(k, (k.replace("_", " ").capitalize(), ""))
        rows.append((k, label, v, meaning))
    return rows


def _words(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (list, tuple)):
        return ", ".join(map(str, v))
    return str(v)


__all__ = ["FITTED", "PARAMETERS", "SOLVER_SETTINGS", "fitted_rows", "parameter_rows"]
