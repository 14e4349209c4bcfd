"""The study's last step: the final model against the larger class, on the evaluation counts that did not select its
features.

**Evidence.** The evaluation round releases one pooled table of the chosen model's predictions
on the sites' held-out patients (:mod:`marg.protocols.evaluation`): the confusion table
N[predicted, y] (K×K), or the class-wise table N[y, outcome] (K×2), every cell with its noise draws
(one curator's, or a sum of shares: the record's parts, whatever noise the registry
:mod:`marg.marginals.counts.noise_kinds` knows with a lattice pmf). Those patients never entered a table
the features were selected or the model fitted on, so the comparison is not the one that chose it.

**The larger class** is :class:`marg.learners.classifiers.label_only.LabelOnly`'s rule fitted on the training
summary (the class c whose share has the largest lower bound on the label table): chosen before the
evaluation, it is one more fixed rule evaluated on the same patients. Its errors are read from the
same table — every held-out patient whose class is not c:

    confusion: Ẽ_c = Σ_{y≠c} Σ_ŷ Ñ[ŷ, y]  (K(K − 1) cells),    classes: Ẽ_c = Σ_{y≠c} Σ_o Ñ[y, o]  (2(K − 1) cells),

and the held-out count ñ is the table's sum (K² or 2K cells), as for the model's own errors
(:func:`marg.learners.certification.holdout_certificate.released_counts`).

**The rule.** Both bounds (:func:`marg.learners.certification.holdout_certificate.exact_bound`) are taken at
α·share/2, share = g(j) for the model's ordinal j on the held-out set
(:func:`marg.learners.certification.holdout_certificate.evaluation_share`: the two rules split the model's
share). Both hold together with probability ≥ 1 − α·share, so whichever is returned — a choice
made from these very counts — keeps its certificate. The model is returned only when it
**beats** the larger class: its bound strictly below the larger class's (the bounds tied — both 1 on a
small evaluation —: its released error count strictly below); otherwise the larger class is returned with its
certificate on the same evaluation. The population both bounds name is the held-out rows' (one held-out fraction for the
study: the sites' patients weighted by their numbers).

**Several models evaluated** (:func:`final_among`, issue 49): the study's evaluation round may evaluate the
top K candidates of the automatic choice on the same held-out patients, one table N[predicted_j, y] each,
model j at its own ordinal o_j on the held-out set (consecutive: the ledger counts each). Model j's bound is
taken at α·g(o_j)/2 and the larger class's (read from the first model's table) at α·g(o_1)/2, so all K + 1
bounds hold together with probability ≥ 1 − α·Σ_j g(o_j) ≥ 1 − α (Σ_{o ≥ 1} g(o) = 1): a choice made from these
counts keeps its certificate, whichever is chosen. The choice among the K is the one rule of
:mod:`marg.learners.choice.choice_rule` on the held-out evidence
(:func:`~marg.learners.choice.choice_rule.with_heldout`: each model's released error rate with its binomial and noise
standard error; the smallest, ties by the bound); the chosen one is then compared with the larger class by ``rule`` as
above. K = 1 is :func:`final_against_prior`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from marg.errors import InputError

from ..certification.holdout_certificate import HoldoutBound, Released, evaluation_share, exact_bound, released_counts

LAYOUTS = ("confusion", "classes")


def prior_released(counts: np.ndarray, draws: Sequence[Any], layout: str, c: int) -> Released:
    """The constant rule ``c``'s released errors and held-out count from the evaluation table (module docstring).

    Parameters
    ----------
    counts : ndarray
        ``confusion``: N[predicted, y] (K, K); ``classes``: N[y, outcome] (K, 2).
    draws : sequence of (noise, scale, discrete, count)
        The noise draws in ONE cell (the table's record; () when exact).
    layout : {"confusion", "classes"}
    c : int
        The class the rule predicts for every row.
    """
    N = np.asarray(counts, dtype=np.float64)
    if layout not in LAYOUTS:
        raise InputError(f"the comparison with the larger class needs per-class counts (confusion or classes), "
                         f"got {layout!r}")
    K = N.shape[0]
    if layout == "confusion" and N.shape != (K, K) or layout == "classes" and N.shape != (K, 2):
        raise InputError(f"a {layout} evaluation table of shape {N.shape} for {K} classes")
    if not 0 <= int(c) < K:
        raise InputError(f"the larger class {c!r} is not one of the {K} classes")
    other = np.arange(K) != int(c)
    errors = float(N[:, other].sum()) if layout == "confusion" else float(N[other, :].sum())
    cells_e = K * (K - 1) if layout == "confusion" else 2 * (K - 1)

    def parts(k: int) -> tuple:
        return tuple((m, b, d, n * k) for m, b, d, n in draws)

    return Released(errors, float(N.sum()), parts(cells_e), parts(N.size))


@dataclass(frozen=True)
class FinalChoice:
    """What :func:`final_against_prior` returns: the rule kept (``"model"`` or ``"prior"``), its estimator (its
    ``certificate_`` the holdout bound), that bound, both bounds and the α share they were taken at."""

    chosen: str
    estimator: Any
    certificate: HoldoutBound
    model_bound: HoldoutBound
    prior_bound: HoldoutBound
    prior_class: int
    share: float
    coverage: float
    rule: str = "beats"
    index: int = 0
    evaluated: tuple = ()

    def to_dict(self) -> dict[str, Any]:
        return {"chosen": self.chosen, "certificate": self.certificate.value, "model_bound": self.model_bound.to_dict(),
                "model_index": self.index, "evaluated": [dict(e) for e in self.evaluated],
                "prior_bound": self.prior_bound.to_dict(), "prior_class": self.prior_class, "alpha_share": self.share,
                "coverage": self.coverage,
                "rule": ("the model only when its holdout bound is strictly below the larger class's on the same "
                         "evaluation; both at alpha*share/2" if self.rule == "beats" else
                         "the model unless its released error count exceeds the larger class's by more than the noise "
                         "passes at the bounds' level (an evaluation too small to be decisive); both at alpha*share/2")}


RULES = ("beats", "not-worse")


def final_against_prior(model: Any, prior: Any, counts: np.ndarray, draws: Sequence[Any], layout: str = "confusion",
                        coverage: float = 0.95, ordinal: int = 1, evaluations: int | None = None,
                        rule: str = "beats", cell_std: float = 0.0) -> FinalChoice:
    """The final model or the larger class, whichever the evaluation counts certify lower (module docstring).

    Parameters
    ----------
    model : MarginalEstimator or Model
        The fitted final model (its deterministic rule made the evaluation table).
    prior : LabelOnly or Model
        The label-only rule fitted on the training summary (``class_``: the larger class).
    counts : ndarray
        The pooled evaluation table: ``confusion`` N[predicted, y] (K, K) or ``classes`` N[y, outcome] (K, 2).
    draws : sequence of (noise, scale, discrete, count)
        Its noise draws in one cell (the record's parts; () when exact).
    coverage : float in (0, 1)
    ordinal, evaluations : int
        The model's ordinal on the held-out set (the sites' ledgers) and a stated number of models evaluated
        on it (can only lower the share): :func:`marg.learners.certification.holdout_certificate.evaluation_share`.
    rule : {"beats", "not-worse"}
        ``"beats"``: the model only when its bound is strictly below the larger class's (module docstring), or
        the bounds tie (both 1 on a small evaluation) and its released error count is strictly below the larger
        class's;
        ``"not-worse"`` (an evaluation too small to tell a good model from the larger class, the study design's
        guard round): the model unless its released error count exceeds the larger class's by more than
        z·sqrt(2(K − 1))·``cell_std``, z = Φ⁻¹(level) — the noise alone would pass it with probability ≤ 1 − level.
        Either way both bounds hold together, so the one returned keeps its certificate.
    cell_std : float
        The noise std of one cell of the table (``"not-worse"`` only).

    Returns
    -------
    FinalChoice
        Its ``estimator`` (``model`` or ``prior``) carries the chosen bound as its certificate (kind ``"holdout"``).
    """
    return final_among([model], prior, [np.asarray(counts)], [tuple(draws)], layout, coverage, [ordinal], evaluations,
                       rule, cell_std)


def final_among(models: Sequence[Any], prior: Any, tables: Sequence[np.ndarray], draws: Sequence[Sequence[Any]],
                layout: str = "confusion", coverage: float = 0.95, ordinals: Sequence[int] | None = None,
                evaluations: int | None = None, rule: str = "beats", cell_std: float = 0.0,
                names: Sequence[str] | None = None) -> FinalChoice:
    """The best of K models evaluated on the same held-out patients, or the larger class (module docstring).

    Parameters
    ----------
    models : sequence of MarginalEstimator or Model, length K
        The fitted models, in the order they were ranked before the evaluation (the first: the automatic choice's).
    prior : LabelOnly or Model
        The label-only rule fitted on the training summary (``class_``: the larger class).
    tables : sequence of ndarray, length K
        Model j's pooled evaluation table (``confusion`` N[predicted, y] (C, C) or ``classes`` N[y, outcome] (C, 2)).
    draws : sequence of (sequence of (noise, scale, discrete, count)), length K
        Each table's noise draws in one cell (() when exact).
    ordinals : sequence of int, length K
        Each model's ordinal on the held-out set (None: 1, 2, …, K).
    evaluations, rule, cell_std, coverage, layout : as :func:`final_against_prior`.
    names : sequence of str, optional
        The models' names for the record (default: their ``learner``).

    Returns
    -------
    FinalChoice
        ``index`` the chosen model's (when ``chosen == "model"``), ``evaluated`` one record per model (its name,
        ordinal, share, released errors and rows, bound); its ``estimator`` carries the chosen bound.
    """
    from ..estimator.base import Certificate
    from ..choice.candidates import CandidateRow
    from ..choice.choice_rule import choose_index, with_heldout

    if not 0.0 < coverage < 1.0:
        raise InputError(f"coverage must be in (0, 1), got {coverage!r}")
    if rule not in RULES:
        raise InputError(f"the final comparison's rule must be one of {', '.join(RULES)}, got {rule!r}")
    K = len(models)
    ordinals = list(range(1, K + 1)) if ordinals is None else [int(o) for o in ordinals]
    if K < 1 or len(tables) != K or len(draws) != K or len(ordinals) != K:
        raise InputError(f"{K} models evaluated, but {len(tables)} tables, {len(draws)} noise records and "
                         f"{len(ordinals)} ordinals")
    c = int(getattr(getattr(prior, "estimator", prior), "class_"))
    rels = [released_counts(np.asarray(t), tuple(d), layout)[0] for t, d in zip(tables, draws)]
    shares = [evaluation_share(o, evaluations) for o in ordinals]
    levels = [1.0 - (1.0 - coverage) * sh / 2.0 for sh in shares]
    bounds = [exact_bound(r, lv) for r, lv in zip(rels, levels)]
    prior_rel = prior_released(tables[0], tuple(draws[0]), layout, c)
    pb = exact_bound(prior_rel, levels[0])
    names = [str(getattr(m, "learner", "model")) for m in models] if names is None else [str(x) for x in names]
    j = 0
    if K > 1:  # the one rule on the held-out evidence: the smallest released error rate (ties: the smaller bound)
        rows = [CandidateRow(names[i], {}, certificate=bounds[i].value) for i in range(K)]
        rows = with_heldout(rows, {i: (rels[i].errors, max(rels[i].rows, 1.0), bounds[i].noise_sd) for i in range(K)})
        j, _ = choose_index(rows, "accuracy", tolerance=0.0)
    mb, model_rel = bounds[j], rels[j]
    C = len(np.asarray(tables[j]))
    if rule == "beats":  # tied bounds (both trivial at 1 on a small evaluation): the released error counts decide
        keep = mb.value < pb.value or (mb.value == pb.value and model_rel.errors < prior_rel.errors)
    else:
        from scipy.special import ndtri

        margin = float(ndtri(levels[j])) * float(np.sqrt(2.0 * (C - 1))) * float(cell_std)
        keep = model_rel.errors - prior_rel.errors <= margin
    chosen, est, bound = ("model", models[j], mb) if keep else ("prior", prior, pb)
    getattr(est, "estimator", est).set_certificate(Certificate(  # a Model file's estimator, or the estimator itself
        bound.value, "holdout", coverage, False, C,
        note=("" if keep else f"the model's holdout bound {mb.value:.4f} does not beat the larger class's "
                              f"{pb.value:.4f} on the same evaluation ({rule}): the larger class is returned")))
    evaluated = tuple({"learner": names[i], "ordinal": ordinals[i], "alpha_share": shares[i],
                       "errors": rels[i].errors, "rows": rels[i].rows, "bound": bounds[i].value} for i in range(K))
    return FinalChoice(chosen, est, HoldoutBound(**{**bound.__dict__, "coverage": coverage}), mb, pb, c,
                       shares[j] if keep else shares[0], coverage, rule, j, evaluated)
