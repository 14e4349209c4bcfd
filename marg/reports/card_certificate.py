"""The model card's guarantee: the certificate in plain words, and the model's error on given rows beside it.

:func:`certificate_section` states the bound, its kind and coverage, what it promises
(:data:`PROMISE`) and does not, and what the sites' DP noise did to it; a certificate from
held-out patients gets its own wording (:func:`holdout_section`). :func:`evaluation_section`
shows an evaluation on labelled rows next to the certificate, with the confusion matrix.
Numbers sit in ``data-key`` elements (:func:`marg.reports.html.value`). The page around them
is :mod:`marg.reports.model_card`.
"""

from __future__ import annotations

from typing import Any

from . import plots
from .html import Page, e, value

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
"""A certificate kind → what it promises, in words."""


def certificate_section(page: Page, cert: Any, info: dict, rep: dict, randomized: Any = None) -> None:
    """The card's first section: the bound, its kind and coverage, its promise, its caveats; ``randomized``:
    the randomized rule's bound R* (a minimax learner's), shown under its own name, never compared."""
    page.h2("Certificate: what this model guarantees")
    if cert.kind == "holdout":
        holdout_section(page, cert, info)
        return
    page.p(f"Worst-case error ≤ {value('certificate', float(cert.value))} "
           f"(kind {value('certificate_kind', cert.kind, cert.kind)}"
           + (f", coverage {value('coverage', float(cert.coverage), f'{cert.coverage:.0%}')}"
              if cert.coverage is not None else
              ", λ set by hand: no coverage level") + ")")
    dp = noisy(info)
    page.p(e(f"It is {PROMISE.get(cert.kind, cert.kind)}" + (
        f", and it holds with probability at least {cert.coverage:.0%} over the sample"
        + (" and the released noise" if dp else "") + "." if cert.coverage is not None else ".")), "note")
    if randomized is not None:
        page.text(f"The minimax risk of the randomized rule (predict_proba; {randomized.kind}) is "
                  f"{float(randomized.value):.4f}: {PROMISE.get(randomized.kind, randomized.kind)}. It bounds that "
                  "rule, not the labels this model predicts, and is not compared with the certificate above.", "note")
        page.p(f"Minimax risk of the randomized rule: {value('minimax_risk', float(randomized.value))}")
    page.text("It does not promise: accuracy on a population other than the one the sites' patients come from; "
              "anything about rows outside the uncertainty set (cells the released tables rule out), which the "
              "evaluation below counts; a tight value — it is an upper bound, often far above the error.", "note")
    if cert.trivial:
        page.text("This certificate is trivial (no better than guessing): the released statistics are too few or "
                  "too noisy for a meaningful guarantee.", "bad")
    if cert.approximate:
        page.text("This bound rests on an approximation (see the learner's documentation): treat it as an estimate, "
                  "not a guarantee.", "bad")
    if dp:
        words = ("The sites added differential-privacy noise (table below). The confidence box was widened by "
                 "intervals exact for the noise actually added, so the bound holds with the stated probability "
                 "despite the noise, and is larger than it would be on exact counts.")
        if rep.get("noise_margin") is not None or rep.get("ridge") is not None:
            words += (" The Rényi fit also regularised against the noise (ridge penalty and noise margin under 'What "
                      "the fit found').")
        page.text(words, "note")
    else:
        page.text("The sites released exact counts (no differential-privacy noise): the box reflects sampling error "
                  "alone.",
                  "note")


def holdout_section(page: Page, cert: Any, info: dict) -> None:
    """A certificate from held-out patients: its kind and promise in plain words."""
    hold = info.get("holdout_certificate") or {}
    cov = float(cert.coverage) if cert.coverage is not None else float(hold.get("coverage", 0.95))
    page.p(f"Error rate ≤ {value('certificate', float(cert.value))} on new patients "
           f"(kind {value('certificate_kind', cert.kind, 'holdout: measured on held-out patients')}, "
           f"coverage {value('coverage', cov, f'{cov:.0%}')})")
    rows = hold.get("rows")
    page.p(e(f"What it promises: among new patients drawn from the same population as the sites' patients, this "
             f"model's prediction is wrong for at most a fraction {float(cert.value):.3f} of them. Each site set aside "
             "patients before training (chosen by a keyed hash of each record, kept secret at the site), the model "
             "never learned from them, and the sites then released how often it was wrong on them"
             + (f" ({float(hold['errors']):,.0f} errors in {float(rows):,.0f} patients, as released)" if rows else "")
             + f". The bound holds with probability at least {cov:.0%} over which patients were set aside and the "
             "privacy noise added to those counts."), "note")
    if hold.get("population"):
        page.text(f"Which population: {hold['population']}.", "note")
    if hold.get("models_note"):
        page.text(f"Models evaluated on these patients: {hold['models_note']}.",
                  "note" if hold.get("models_known", True) else "bad")
    page.text("What it assumes and does not promise: the set-aside patients are like the patients the model will "
              "see (same hospitals, same period, same coding); it says nothing about another population, and it is an "
              "average error rate over patients, not a promise for every subgroup or every patient.", "note")
    if cert.trivial:
        page.text("This certificate is trivial (no better than guessing): too few patients were set aside, or their "
                  "counts were released with too much noise, for a meaningful guarantee.", "bad")
    if hold:
        page.p(f"Held-out evaluation: {value('holdout_errors', float(hold['errors']))} errors in "
               f"{value('holdout_rows', float(hold['rows']))} held-out rows (released with noise), sites "
               f"{e(', '.join(hold.get('sites', [])))}.")


def evaluation_section(page: Page, ev: dict) -> None:
    page.h2("Evaluation on the given data")
    out = ev.get("outside")
    page.dl([
        ("Rows", value("eval_n", int(ev["n"]))),
        ("Error (deterministic rule)", value("eval_error", float(ev["error"]))),
        ("Error of the randomized rule", value("eval_randomized_error", float(ev["randomized_error"]))),
        ("Certificate", value("eval_certificate", float(ev["worst_case_error"]))),
        ("Rows outside the uncertainty set", value("eval_outside", out,
                                                   "not defined for this learner" if out is None else None)),
        ("Error on those rows", value("eval_outside_error", ev.get("outside_error"),
                                      "—" if ev.get("outside_error") is None else None)),
    ])
    if float(ev["error"]) > float(ev["worst_case_error"]):
        page.text("The error on these rows is above the certificate: they may come from another population than the "
                  "summaries describe, or the certificate's coverage event failed.", "bad")
    classes = list(ev["classes"])
    conf = ev["confusion"]
    page.table(["true \\ predicted", *classes],
               [[e(c), *[value(f"confusion_{i}_{j}", int(conf[i][j])) for j in range(len(classes))]]
                for i, c in enumerate(classes)], key="confusion")
    page.figure(plots.confusion(conf, classes), "confusion matrix", "confusion")


def noisy(info: dict) -> bool:
    """Whether any site added DP noise to the tables the model was fitted on (its provenance records)."""
    return any((s.get("privacy") or {}).get("mechanism", "none") != "none" for s in info.get("sites") or [])
