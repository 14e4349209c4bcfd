"""The model card: what a marg model guarantees, what it reads, where its data came from — for a clinician.

:func:`model_card` renders one self-contained HTML page from a model file's contents (and,
given labelled data, an evaluation), most important first: the certificate with what it
does and does not promise and what the sites' DP noise did to it
(:mod:`marg.reports.card_certificate`);
for ``--learner auto`` the candidates it was chosen from (:func:`_choice_table`); the
evaluated error and confusion matrix; the task, the patient count (an integer; "about …"
under DP noise) and the codebook; the learner with the settings that shape the model in
plain words (:mod:`marg.reports.wording`; solver settings folded); the features whose
weights change a prediction; the largest per-class weights (:mod:`marg.reports.weights`)
with a caveat on every weighted level whose released count the noise cannot tell from 0;
the R* trace of column generation; the group-lasso regularization path; the sites, their
row counts and their privacy spend (:func:`_sites`). Every number is read from the model
(never typed into a template) and sits in a ``data-key`` element, so tests read it back.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import plots
from .card_certificate import certificate_section, evaluation_section, noisy
from .html import Page, e, value
from .weights import RTOL, class_weights, features_with_weight, largest, noise_caveats
from .wording import fitted_rows, parameter_rows

CODEBOOK_ROWS = 60
"""Features listed one per row in the codebook table; a larger codebook is summarised."""
LEVELS_SHOWN = 20
"""Levels listed per feature in the codebook table."""
FOLD_ROWS = 12
"""A codebook table longer than this is shown folded (``<details>``)."""
SHOWN_ELSEWHERE = {"learner", "n", "features", "worst_case_error", "certificate", "iterations", "edges", "monomials",
                   "active_features", "sites", "seconds", "auto", "auto_rule", "selection", "selected", "gap", "screen",
                   "auto_confidence"}
"""Report keys with a section of their own (the rest go in the fitted-values table)."""


def model_card(model: Any, evaluation: dict[str, Any] | None = None, source: str = "", top: int = 15) -> str:
    """The HTML model card of ``model`` (a :class:`marg.learners.estimator.model.Model`).

    Parameters
    ----------
    evaluation : dict, optional
        :func:`marg.learners.estimator.model.evaluate` output on labelled data.
    source : str
        The model file's name, for the title.
    top : int
        Bars per weight chart.

    Returns
    -------
    str
        The page; the same model (and evaluation) always gives the same bytes.
    """
    est, info = model.estimator, model.info or {}
    rep = info.get("report") or {}
    page = Page(f"Model card — {model.learner} model{f' ({source})' if source else ''}")
    certificate_section(page, est.certificate_, info, rep, est.randomized_bound())  # first: what the model guarantees
    _choice_table(page, rep)
    if evaluation is not None:
        evaluation_section(page, evaluation)
    _task(page, model, info)
    _learner(page, model, rep)
    cw = class_weights(model)
    _features(page, model, rep, cw)
    _rules(page, model)
    _weights(page, model, top, cw)
    _trace(page, est, rep)
    _selection(page, rep)
    _sites(page, info)
    return page.render()


# ------------------------------------------------------------------------------ sections
def _task(page: Page, model: Any, info: dict) -> None:
    cb, est = model.codebook, model.estimator
    page.h2("Task")
    n = info["n"] if "n" in info else est.n_
    page.dl([
        ("Predicts", f"{e(cb.label.name)} ∈ {{{e(', '.join(cb.label.classes))}}}"),
        ("Features in the codebook", value("n_features", len(cb.features))),
        ("Codebook fingerprint", f"<code>{e(cb.fingerprint)}</code>"),
        ("Created", e(info.get("created", "—"))),
        ("Signed by", _signer(info)),
        ("Patients summarised", value("n", None if n is None else float(n), _patients(n, info))),
    ])
    page.text("The codebook is the study's public schema: every site coded its patients with these levels, and the "
              "certificate ranges over every combination of them.")
    rows = []
    for f in cb.features[:CODEBOOK_ROWS]:
        if f.is_discrete:
            lv = list(f.level_names)
            kind, what = (f.kind, ", ".join(lv[:LEVELS_SHOWN])
                          + (f", … ({len(lv):,} in all)" if len(lv) > LEVELS_SHOWN else ""))
        else:
            kind, what = "numeric (raw)", f"range [{f.lo:g}, {f.hi:g}]"
        rows.append([e(f.name), e(kind), value(f"levels:{f.name}", int(f.n_levels)), e(what)])
    page.table(["feature", "kind", "levels", "levels or range"], rows, key="codebook",
               folded=f"The codebook's {len(cb.features):,} features and their levels" if len(cb.features) > FOLD_ROWS
               else None)
    if len(cb.features) > CODEBOOK_ROWS:
        page.text(f"… and {len(cb.features) - CODEBOOK_ROWS:,} more features (the model file holds the whole "
                  "codebook).")


def _learner(page: Page, model: Any, rep: dict) -> None:
    est = model.estimator
    page.h2("Learner")
    page.p(f"{e(type(est).__name__)} (<code>{value('learner', model.learner, model.learner)}</code>), fitted from the "
           "sites' summaries alone.")
    shown, solver = parameter_rows(est.get_params(), model.learner, est.certificate_)
    if shown:
        page.table(["setting", "value", "what it means"], [[e(a), e(b), e(c)] for a, b, c in shown], key="params")
    if solver:
        page.table(["setting", "value"], [[e(k), e(v)] for k, v in solver], key="solver",
                   folded=f"The solver's settings ({len(solver)}), to reproduce the fit")
    fitted = fitted_rows(est.report(), SHOWN_ELSEWHERE)
    if fitted:
        page.p("What the fit found:")
        page.table(["", "value", "what it means"],
                   [[e(label), _cell(f"fitted:{k}", v), e(meaning)] for k, label, v, meaning in fitted],
                   key="fitted")


def _choice_table(page: Page, rep: dict) -> None:
    """``--learner auto``: the rule that chose, how errors were estimated, and every candidate's
    estimated error and certificate, the chosen one marked (and, under DP with every certificate
    trivial, the patients a non-trivial one would need)."""
    cands = rep.get("auto") or []
    if not cands and not rep.get("auto_rule"):
        return
    page.h2("How the learner was chosen")
    page.p(f"Chosen automatically by {e(rep.get('auto_rule', ''))}"
           + (f" (--prefer {e(rep['auto_prefer'])})" if rep.get("auto_prefer") else "") + ".")
    if rep.get("auto_error_method"):
        page.text(f"Estimated error: {rep['auto_error_method']}. An estimate, not a guarantee; the certificate is the "
                  "guarantee.", "note")
    conf = rep.get("auto_confidence")
    if conf:
        page.text(f"Chosen after seeing every candidate's estimated error and certificate: {conf['words']}. Each "
                  "certificate is about the labels that candidate writes out (its deterministic rule); a minimax "
                  "learner's R* bounds its randomized rule instead and is shown apart, never compared.", "note")
    if not cands:
        return
    rows = []
    for k, c in enumerate(cands):
        cert = c.get("certificate")
        rows.append([("✔ " if c.get("chosen") else "") + e(c.get("learner")), e(_params_words(c.get("params"))),
                     value(f"auto_error:{k}", _num(c.get("error")), "—" if c.get("error") is None else None),
                     value(f"auto_certificate:{k}", _num(cert),
                           "not fitted" if cert is None else f"{float(cert):.4g} ({c.get('kind')})"),
                     value(f"auto_minimax_risk:{k}", _num(c.get("minimax_risk")),
                           "—" if c.get("minimax_risk") is None else None),
                     e(c.get("note") or "")])
    page.table(["candidate", "parameters", "estimated error", "certificate (its labels)",
                "R* (randomized rule)", "note"], rows, key="auto")
    from marg.learners.certification.sample_size import patients_line
    from marg.learners.choice.screened import screen_line

    line = patients_line(rep)
    if line:
        page.text(line[0].upper() + line[1:] + ".", "bad")
    line = screen_line(rep)
    if line:
        page.text(line[0].upper() + line[1:] + ".", "note")


def _features(page: Page, model: Any, rep: dict, cw: Any) -> None:
    est = model.estimator
    allowed = list(rep.get("features") or est.feature_names_in_ or [])
    page.h2("Features the model uses")
    used = est.used_features()  # a vote of rules knows the features its rules read
    if used is not None:
        why = "the features its rules read"
    elif cw is not None:
        used = features_with_weight(cw, [f.name for f in model.codebook.features])
        why = (f"the features whose weights change a prediction: a feature counts when its levels' weights differ, or "
               f"a pair it is in has a nonzero weight, by more than {RTOL:g} × the largest weight")
    else:
        used, why = allowed, "the features it was fitted on"
    page.p(f"{value('n_features_used', len(used))} of {len(model.codebook.features):,} ({e(why)}): "
           f"{e(', '.join(map(str, used))) or 'none — it predicts the same class for every patient'}")
    if cw is not None and len(used) < len(allowed):
        page.text(f"It was fitted on {len(allowed)} features; the others ended with no weight (the bound did not need "
                  "them).")
    active = est.working_set()
    if active and len(active) < len(allowed):
        page.p(f"Column generation kept {value('n_active_features', len(active))} of them in its working set: "
               f"{e(', '.join(active))}")
    edges = est.pairs()
    if edges:
        page.p(f"Pairs modelled jointly ({value('n_edges', len(edges))} edges): "
               + e("; ".join(f"{a} – {b}" for a, b in edges)))


def _rules(page: Page, model: Any) -> None:
    """A vote of Boolean monomials (``boost``): its rules in words, as ``marg learn`` prints them."""
    est = model.estimator
    rules = est.rules()
    if rules is None:  # not a vote of rules
        return
    page.h2("The vote's rules")
    if not rules:
        page.text("The vote is empty: no rule lowered the worst-case error by more than its price (the code length of "
                  "the rule plus its confidence interval), so the model predicts the naive-Bayes class of the "
                  "first-order tables for every patient.", "bad")
        return
    page.text("A class's score is the sum of the weights of its rules that hold for the patient; the model predicts "
              "the class of the largest score. Where no rule separates the classes, it predicts the naive-Bayes class "
              "of the rule features' first-order tables.")
    page.table(["class", "rule", "order", "weight"],
               [[e(r["class"]), e(r["rule"]), value(f"rule_order:{k}", int(r["order"])),
                 value(f"rule_weight:{k}", float(r["weight"]))]
                for k, r in enumerate(rules)], key="rules",
               folded=f"The vote's {len(rules)} rules" if len(rules) > FOLD_ROWS else None)


def _weights(page: Page, model: Any, top: int, cw: Any) -> None:
    if cw is None:
        return
    info = model.info or {}
    page.h2("Largest weights")
    if model.estimator.falls_back():
        page.text("This model predicts the majority class (its fit did not beat the prior by more than the noise "
                  "margin); the weights below are the fit it set aside.", "bad")
    page.text("The deterministic rule adds one weight per feature level (and per pair of levels on an edge) and "
              "predicts the class of the largest score. Adding the same number to every class changes nothing, "
              "so the charts show "
              + ("the difference of the two classes' weights." if len(cw.titles) == 1 else
                 "each class's weights minus their mean over the classes."))
    caveats = noise_caveats(cw, info.get("level_counts"), model.codebook)
    _noise_caveats(page, caveats, info)
    for r, title in enumerate(cw.titles):
        w = cw.weights[r]
        order = largest(w, top)
        key = "weights" if len(cw.titles) == 1 else f"weights:{model.classes[r]}"
        if len(order) == 0:
            page.p(f"{e(title)}: every weight is 0.")
            continue
        page.p(f"The {len(order)} largest in magnitude of {e(title)} "
               f"({value(f'{key}:nonzero', int(np.count_nonzero(w)))} of {len(w):,} are nonzero):")
        page.figure(plots.bars([cw.names[i] for i in order], [float(w[i]) for i in order], title, "weight"),
                    f"largest weights, {title}", key)
        marked = {c.column for c in caveats}
        page.table(["feature = level", "weight", *(["caveat"] if marked else [])],
                   [[e(cw.names[i]), value(f"{key}:{cw.names[i]}", float(w[i])),
                     *(["⚠ count within the noise" if i in marked else ""] if marked else [])] for i in order], key=key)
    if cw.impossible:
        page.text(f"Ruled out ({len(cw.impossible)} cells): the exact counts show no patient of the class with the "
                  "level, so no distribution of the uncertainty set has one and the rule never predicts that class "
                  "there; these columns are left out of the charts above.", "note")
        page.table(["class", "feature = level"], [[e(c), e(nm)] for c, nm in cw.impossible], key="impossible",
                   folded=f"The {len(cw.impossible)} ruled-out cells" if len(cw.impossible) > FOLD_ROWS else None)


def _noise_caveats(page: Page, caveats: list, info: dict) -> None:
    """The weights the sites' DP noise may have set: a level whose released count for some class is within the noise of
    0."""
    if not noisy(info):
        return
    rec = info.get("level_counts")
    if not rec:
        page.text("The model file records no per-level counts, so the card cannot say which weights the noise may "
                  "have set.",
                  "note")
        return
    if not caveats:
        page.text("Every weighted level's released counts stand clear of the noise (each count is more than the "
                  f"noise's {1 - rec['alpha']:.0%} half-width away from 0).", "note")
        return
    page.text(f"Caveat: {len(caveats)} weighted level(s) rest on a released count that the noise cannot tell from 0 "
              f"(|count| ≤ the noise's {1 - rec['alpha']:.0%} half-width): their weight may be set by the noise "
              "rather than by the patients. Read them as unknown.", "bad")
    page.table(["feature = level", "class", "released count", "noise ±"],
               [[e(c.name), e(c.cls), value(f"caveat_count:{c.name}", c.count, f"{c.count:,.0f}"),
                 value(f"caveat_halfwidth:{c.name}", c.halfwidth, f"{c.halfwidth:,.0f}")] for c in caveats],
               key="noise_caveats",
               folded=f"The {len(caveats)} levels" if len(caveats) > FOLD_ROWS else None)


def _trace(page: Page, est: Any, rep: dict) -> None:
    iters = list(est.trace() or rep.get("iterations") or [])
    if len(iters) < 2:
        return
    page.h2("Column generation")
    page.text(f"R* after each of the {len(iters)} iterations (never increasing; each a valid certificate for the "
              "columns then in the model; the last is the certificate):")
    page.figure(plots.trace([float(x) for x in iters], "R* by column-generation iteration", "R*"), "R* trace", "trace")
    page.table(["iteration", "R*"], [[value(f"iteration:{k}", k + 1), value(f"trace:{k}", float(v))]
                                     for k, v in enumerate(iters)], key="trace")


def _selection(page: Page, rep: dict) -> None:
    sel = rep.get("selection")
    if not sel:
        return
    page.h2("Feature selection")
    page.p(f"{e(sel.get('method'))}: {e(sel.get('status'))}; objective "
           f"{value('selection_objective', sel.get('objective'))}"
           + (f"; optimality gap {value('selection_gap', rep.get('gap'))}" if rep.get("gap") is not None else ""))
    path = [p for p in sel.get("path") or [] if p.get("lam", 0) > 0]
    if len(path) > 1:
        page.figure(plots.lasso_path([float(p["lam"]) for p in path], [int(p["n_active"]) for p in path]),
                    "regularization path", "path")
        page.table(["λ", "features", "entered"], [[value(f"path_lam:{k}", float(p["lam"])),
                                                   value(f"path_active:{k}", int(p["n_active"])),
                                                   e(", ".join(p.get("entered") or []))] for k, p in enumerate(path)],
                   key="path")


def _sites(page: Page, info: dict) -> None:
    """Where the data came from: each site's rows, noise and privacy spend (the privacy table)."""
    from marg.protocols.aggregate import composed_privacy

    sites = info.get("sites") or []
    page.h2("Where the data came from")
    if not sites:
        page.text("The model file records no provenance (it was not fitted through marg learn).")
        return
    evaluation = (info.get("holdout_certificate") or {}).get("privacy") or {}
    rows = []
    for s in sites:
        name = s.get("site")
        ev = evaluation.get(name)
        records = [r.get("privacy") for r in s.get("rounds") or []] or [s.get("privacy")]
        records += [] if ev is None else [ev]  # both rounds: the training export(s) and the evaluation release
        p, rounds = composed_privacy(records), len(records)  # the ledger's number, each release's own beside it
        own = " + ".join(f"{r['epsilon']:.3g}" + (f" (δ={r['delta']:g})" if r["delta"] else "") for r in p["releases"])
        row = [e(name), value(f"site_rows:{name}", s.get("n_rows"),
                              "not released (DP)" if s.get("n_rows") is None else None),
               e(p.get("mechanism", "none")), value(f"site_epsilon:{name}", _num(p.get("epsilon"))),
               value(f"site_delta:{name}", _num(p.get("delta"))), value(f"site_rho:{name}", _num(p.get("rho"))),
               e(own if p.get("mechanism", "none") != "none" else "exact"),
               value(f"site_rounds:{name}", rounds), e(s.get("created", "")),
               "signed" if s.get("signed") else "unsigned"]
        if evaluation:
            row.insert(4, value(f"site_eval_epsilon:{name}", _num((ev or {}).get("epsilon"))))
        rows.append(row)
    head = ["site", "rows", "noise", "ε", "δ", "ρ", "ε of each release", "exports", "exported", "signature"]
    if evaluation:
        head[3:4] = ["ε (both rounds)", "of which evaluation"]
    page.table(head, rows, key="sites")
    units = [(s.get("site"), (s.get("privacy") or {}).get("unit")) for s in sites]
    if any(isinstance(u, dict) for _, u in units):
        page.text("Privacy unit (whom each site's guarantee protects, and the rows of one counted at most): "
                  + "; ".join(f"{n}: " + ("not stated" if not isinstance(u, dict)
                                          else "the row (each row a different person)"
                                          if u.get("column") == "row" else
                                          f"{u.get('column')}, at most {u.get('max_rows_per_unit')} rows each")
                              for n, u in units) + ".")
    page.text("Privacy spend is that of the bundles this model was fitted on"
              + (" plus its evaluation release on held-out patients" if evaluation else "")
              + ", a site's rounds composed as its ledger composes them (zCDP: the ρ's add; ε is the total ρ converted "
                "once by OpenDP at the δ the site's ledger uses, its cap's — the number marg audit show gives for "
                "these releases; at the rounds' δ's added for bundles without a cap), with each release's own ε beside "
                "it; a site's total spend over all its releases is in its ledger (marg audit show).")


# ------------------------------------------------------------------------------ helpers
def _signer(info: dict) -> str:
    """Who signed the file, as ``marg report`` verified it (``info["signed_by"]``: a name, or None
    for an unsigned file it was allowed to read); not checked when rendered without it."""
    if "signed_by" not in info:
        return "not checked (marg report --trust verifies the model's signature)"
    if info["signed_by"] is None:
        return '<span class="bad">unsigned</span> (nobody vouches for this file)'
    return f'<span class="ok">{e(info["signed_by"])}</span> (signature verified against the trust store)'


def _cell(key: str, v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if v is None:
        return "—"
    if isinstance(v, (int, float, np.integer, np.floating)):
        return value(key, float(v) if isinstance(v, (float, np.floating)) else int(v))
    if (isinstance(v, (list, tuple)) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)
        and len(v) <= 12):
        return ", ".join(value(f"{key}:{k}", float(x)) for k, x in enumerate(v))
    return e(v)


def _patients(n: Any, info: dict) -> str:
    """The patient count in words: exact ("13,501") or, under DP noise, "about 13,501 (noisy)"."""
    if n is None:
        return "—"
    if info.get("n_exact") is not None:
        return f"{int(info['n_exact']):,}"
    if noisy(info):
        return f"about {float(n):,.0f} (noisy: the sites added differential-privacy noise)"
    return f"{float(n):,.0f}"


def _params_words(p: Any) -> str:
    if not p:
        return "defaults"
    return ", ".join(f"{k}={v}" for k, v in sorted(dict(p).items()))


def _num(v: Any) -> float | None:
    try:
        return None if v is None else float(v)
    except (TypeError, ValueError):
        return None


__all__ = ["model_card"]
