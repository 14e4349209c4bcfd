"""The models a study's evaluation round evaluates: the automatic choice's top K, their files and their ordinals.

The learner's evaluation round (:mod:`marg.study_learner`) evaluates the chosen model and up to
:data:`EVALUATED` − 1 of the choice's next candidates (:func:`runners_up`) on the sites' held-out patients;
each site counts every one of them in its ledger against that held-out set and states each one's rank
(:func:`evaluation_ordinals` reads them back from the summed bundle), so that the certificate of the one
kept (:func:`marg.learners.study.final_choice.final_among`) takes its own ordinal's share of α.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from marg.errors import InputError

from .study_runner import evaluation_ordinal


EVALUATED = 3
"""How many of the automatic choice's candidates the evaluation round evaluates (the chosen one first, then the
next by estimated error whose labels differ from those before): each costs one more table on the same held-out
patients (the round's ρ split over them) and one more model counted in each site's ledger."""


def candidate_file(j: int) -> str:
    """The learner's own copy of the ``j``-th evaluated model (0-based)."""
    return "candidate.model.json" if j == 0 else f"candidate-{j + 1}.model.json"


def runners_up(est: Any, s2: Any, k: int) -> list[Any]:
    """Up to ``k`` more models for the evaluation round: the automatic choice's other fitted candidates by estimated
    error (never the label-only rule: the evaluation reads the larger class from the same table), each kept only when
    its labels differ from every model before it on more than 1 % of rows simulated from ``s2`` (a rule with the
    same labels would spend the round's ρ on the same counts). None when ``est`` is not an automatic choice."""
    from marg.learners.choice.choice_rule import PRIOR
    from marg.learners.learn import as_model

    rows, fitted = getattr(est, "candidates_", None), getattr(est, "fitted_", None)
    if k < 1 or not rows or not fitted:
        return []
    order = sorted((i for i, r in enumerate(rows) if not r.chosen and r.learner != PRIOR and fitted[i] is not None
                    and r.error is not None), key=lambda i: (rows[i].error, i))
    try:
        from marg.learners.choice.cross_site import tan_sample

        X = tan_sample(s2, draws=300, seed=4401).X
    except InputError:  # raw numeric features: no rows to compare labels on, one model per learner
        X = None
    taken = [est.chosen_]
    labels = [] if X is None else [np.asarray(est.chosen_.predict(X))]
    out = []
    for i in order:
        f = fitted[i]
        if X is None:
            if any(f.learner == t.learner for t in taken):
                continue
        else:
            lab = np.asarray(f.predict(X))
            if any(np.mean(lab != other) <= 0.01 for other in labels):
                continue
            labels.append(lab)
        taken.append(f)
        out.append(as_model(f, s2, {**f.report(), "n": s2.n}))
        if len(out) >= k:
            break
    return out


def evaluation_ordinals(summed: Any, k: int) -> list[int]:
    """Each evaluated model's ordinal on the sites' held-out sets (``k`` models, in the round's order): per model the
    largest rank the sites state under their signatures (``evaluations_on_split_each``); a site that states only the
    first's (:func:`marg.study_runner.evaluation_ordinal`) is read as ranking the others after it, one by one."""
    first = evaluation_ordinal(summed)
    out = [first + j for j in range(int(k))]
    per_site = ((getattr(summed, "header", None) or {}).get("privacy") or {}).get("per_site") or []
    for p in per_site:
        each = p.get("evaluations_on_split_each") if isinstance(p, dict) else None
        if isinstance(each, list) and len(each) == k and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1
                                                             for v in each):
            out = [max(a, int(b)) for a, b in zip(out, each)]
    return out
