"""The model card: what a marg model is, what its certificate promises, where its data came from.

:func:`model_card` renders one self-contained HTML page from a model file's contents (and,
given labelled data, an evaluation): the task and codebook; the learner and its
parameters; the certificate with what it does and does not promise; the evaluated error and
confusion matrix; the selected features; the largest weights of an additive rule; the R*
trace of column generation; the sites, their row counts and privacy spend.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import plots
from .html import Page, e, fmt, value

PROMISE = {
    "R*": "the largest error of the model's randomized rule over every distribution whose released "
          "statistics lie within the confidence box (τ ± λ)",
    "R*_L": "an upper bound (local-polytope relaxation) on the largest error of the randomized rule over "
            "every distribution whose released statistics lie within the confidence box",
    "W(h)": "the largest error of the model's own deterministic rule over every distribution whose released "
            "statistics lie within the confidence box",
    "holdout": "an upper confidence bound on the deterministic rule's error rate, from the sites' held-out "
               "patients (rows the model never saw), released with their noise",
    "hinge": "the worst-case hinge loss over the confidence box (twice the minimax 0-1 risk); it bounds the "
             "deterministic rule's worst-case error",
    "2gamma": "2γ for distributions with exactly the released pairwise marginals (the training sample); "
              "no allowance for sampling error",
}


def _weights(model: Any) -> tuple[list[str], np.ndarray] | None:
    """(column names "feature = level", weights of the binary score difference or of the first class
    against the rest), for models with an additive rule; None otherwise."""
    from marg.errors import InputError
    from marg.learners.certify import linear_rule

    try:
        rule = linear_rule(model.estimator)
    except (InputError, AttributeError):
        return None
    names = []
    for b in rule.fmap.blocks:
        if b.kind != "onehot":
            names.append(b.name)
            continue
        f = model.codebook.feature(b.name)
        levels = tuple(f.level_names) if hasattr(f, "level_names") else tuple(str(k) for k in range(b.size))
        names.extend(f"{b.name} = {lv}" for lv in levels[: b.size])
    W = rule.weights
    w = W[1] - W[0] if W.shape[0] == 2 else W[0] - W[1:].mean(axis=0)
    return names, w


def model_card(model: Any, evaluation: dict[str, Any] | None = None, source: str = "", top: int = 15) -> str:
    """The HTML model card of ``model`` (a :class:`marg.learners.model.Model`).

    Parameters
    ----------
    evaluation : dict, optional
        :func:`marg.learners.model.evaluate` output on labelled data.
    source : str
        The model file's name, for the title.
    top : int
        Bars in the weight chart.
    """
    est, cb, info = model.estimator, model.codebook, model.info or {}
    rep = info.get("report") or {}
    cert = est.certificate_
    page = Page(f"Model card — {model.learner} model{f' ({source})' if source else ''}")

    page.h2("Task")
    feats = ", ".join(f.name for f in cb.features)
    page.dl([
        ("Predicts", f"{e(cb.label.name)} ∈ {{{e(', '.join(cb.label.classes))}}}"),
        ("Features", f"{value('n_features', len(cb.features))}: {e(feats)}"),
        ("Codebook fingerprint", f"<code>{e(cb.fingerprint)}</code>"),
        ("Created", e(info.get("created", "—"))),
        ("Signed by", e(info["signed_by"]) if info.get("signed_by") else "unsigned (nobody vouches for this file)"),
        ("Patients summarised (n)", value("n", float(info["n"]) if info.get("n") is not None else None)),
    ])

    page.h2("Learner")
    params = {k: v for k, v in est.get_params().items() if k != "callback"}
    page.table(["parameter", "value"], [[e(k), e(v)] for k, v in sorted(params.items())], key="params")
    used = rep.get("features") or getattr(est, "feature_names_in_", None) or []
    if used:
        page.p(f"Features used: {value('n_features_used', len(used))} — {e(', '.join(map(str, used)))}")
    if rep.get("auto_rule"):
        page.p(f"Chosen automatically by {e(rep['auto_rule'])}.")

    page.h2("Certificate")
    page.p(f"Worst-case error ≤ {value('certificate', float(cert.value))} "
           f"(kind {value('certificate_kind', cert.kind, cert.kind)}"
           + (f", coverage {value('coverage', float(cert.coverage), f'{cert.coverage:.0%}')}" if cert.coverage is not None else "")
           + ")")
    page.p(e(f"It is {PROMISE.get(cert.kind, cert.kind)}" + (
        f", and it holds with probability at least {cert.coverage:.0%} over the sample"
        + (" and the released noise" if _noisy(info) else "") + "." if cert.coverage is not None else ".")), "note")
    page.text("It does not promise: accuracy on a population other than the one the sites' patients come from; "
              "anything about rows outside the uncertainty set (cells the released tables rule out), which the "
              "evaluation below counts; a tight value — it is an upper bound, often far above the error.", "note")
    if cert.trivial:
        page.text("This certificate is trivial (no better than guessing): the released statistics are too few or "
                  "too noisy for a meaningful guarantee.", "bad")
    if _noisy(info):
        page.text("The sites added differential-privacy noise: the confidence box was widened by intervals exact for "
                  "the noise actually added, so the bound is larger than it would be on exact counts.", "note")
    hold = info.get("holdout_certificate")
    if hold:
        page.p(f"Held-out evaluation: {value('holdout_errors', float(hold['errors']))} errors in "
               f"{value('holdout_rows', float(hold['rows']))} held-out rows (released with noise), sites "
               f"{e(', '.join(hold.get('sites', [])))}.")

    if evaluation is not None:
        page.h2("Evaluation on the given data")
        page.dl([
            ("Rows", value("eval_n", int(evaluation["n"]))),
            ("Error (deterministic rule)", value("eval_error", float(evaluation["error"]))),
            ("Error of the randomized rule", value("eval_randomized_error", float(evaluation["randomized_error"]))),
            ("Certificate", value("eval_certificate", float(evaluation["worst_case_error"]))),
            ("Rows outside the uncertainty set", value("eval_outside", evaluation.get("outside"),
                                                      "not defined for this learner" if evaluation.get("outside") is None
                                                      else None)),
        ])
        classes = list(evaluation["classes"])
        conf = evaluation["confusion"]
        page.table(["true \\ predicted", *classes],
                   [[e(c), *[value(f"confusion_{i}_{j}", int(conf[i][j])) for j in range(len(classes))]]
                    for i, c in enumerate(classes)], key="confusion")
        page.figure(plots.confusion(conf, classes), "confusion matrix", "confusion")

    w = _weights(model)
    if w is not None:
        names, vals = w
        order = np.argsort(-np.abs(vals))[:top]
        lab = (f"score({cb.label.classes[1]}) − score({cb.label.classes[0]})" if len(cb.label.classes) == 2
               else f"score({cb.label.classes[0]}) − mean of the others")
        page.h2("Largest weights")
        page.text(f"The deterministic rule adds one weight per feature level; the {len(order)} largest in magnitude "
                  f"of {lab}:")
        page.figure(plots.bars([names[i] for i in order], [float(vals[i]) for i in order], "largest weights", lab),
                    "largest weights", "weights")
        page.table(["feature = level", "weight"], [[e(names[i]), value(f"weight:{names[i]}", float(vals[i]))] for i in order],
                   key="weights")

    iters = rep.get("iterations")
    if iters and len(iters) > 1:
        page.h2("Column generation")
        page.text(f"R* after each of the {len(iters)} iterations (never increasing; each a valid certificate):")
        page.figure(plots.trace([float(x) for x in iters], "R* by column-generation iteration", "R*"), "R* trace", "trace")
    sel = rep.get("selection")
    if sel:
        page.h2("Feature selection")
        page.p(f"{e(sel.get('method'))}: {e(sel.get('status'))}; objective {value('selection_objective', sel.get('objective'))}")
        path = [p for p in sel.get("path") or [] if p.get("lam", 0) > 0]
        if len(path) > 1:
            page.figure(plots.lasso_path([float(p["lam"]) for p in path], [int(p["n_active"]) for p in path]),
                        "regularization path", "path")
            page.table(["λ", "features", "entered"], [[value(f"path_lam:{k}", float(p["lam"])),
                                                       value(f"path_active:{k}", int(p["n_active"])),
                                                       e(", ".join(p.get("entered") or []))] for k, p in enumerate(path)],
                       key="path")

    sites = info.get("sites") or []
    page.h2("Where the data came from")
    rows = []
    for s in sites:
        p = s.get("privacy") or {}
        mech = p.get("mechanism", "none")
        rows.append([e(s.get("site")), value(f"site_rows:{s.get('site')}", s.get("n_rows"),
                                              "not released (DP)" if s.get("n_rows") is None else None),
                     e(mech), value(f"site_epsilon:{s.get('site')}", _num(p.get("epsilon"))),
                     value(f"site_delta:{s.get('site')}", _num(p.get("delta"))), e(s.get("created", "")),
                     "signed" if s.get("signed") else "unsigned"])
    page.table(["site", "rows", "noise", "ε", "δ", "exported", "signature"], rows, key="sites")
    return page.render()


def _num(v: Any) -> float | None:
    try:
        return None if v is None else float(v)
    except (TypeError, ValueError):
        return None


def _noisy(info: dict) -> bool:
    return any((s.get("privacy") or {}).get("mechanism", "none") != "none" for s in info.get("sites") or [])


__all__ = ["model_card", "fmt"]
