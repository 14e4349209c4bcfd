"""The learner's part of a study: ``marg study run STUDY --learner`` opens, collects and sums each round, then
certifies.

For each round (:mod:`marg.study_runner` has the drop box's files): open it (the round file,
signed; its roster the survivors of the round before, its tables planned from what the rounds
before released), collect the uploads and write the request once every member answered (or, with
``close``, at least ``t``: the missing sites are dropped), sum once every survivor revealed (or at
least ``t`` did). The plan of each round is post-processing of the sums before it:

- ``select``: the pooled label table and first-order tables N[x_i, y] of every discrete feature — or, when the
  design chose the private selection (many features against the budget), the pooled label table and each site's
  own OpenDP top-k (:mod:`marg.protocols.study_top_k`), pooled by :func:`marg.study_select.voted_features`;
- ``measure``: the plan's top ``k`` features by their pooled screening score (:func:`measured_features`,
  :func:`marg.learners.selection.screening.screen_scores` on the noisy sums: post-processing, no per-site
  vote), and the tables round 2 affords for them
  (:func:`marg.learners.study.two_round.choose_tables`: first-order tables, pairs among the first M);
- ``evaluate``: the model fitted on the measured tables by the automatic choice
  (:func:`final_learner`), and beside it up to :data:`~marg.study_evaluated.EVALUATED` − 1 of the choice's next
  candidates by estimated error whose labels differ (:func:`marg.study_evaluated.runners_up`), each evaluated on each
  site's held-out patients (one confusion table N[predicted_j, y] per model; the larger class read from the first).

The certificate is the holdout bound on the pooled evaluation counts of the model as chosen: the best of the
K evaluated by the held-out counts, against the larger class, by :func:`marg.learners.study.final_choice.final_among`
(model j's bound at α·g(o_j)/2 for its ordinal o_j on the held-out set — each model counted in the sites'
ledgers, :func:`marg.study_evaluated.evaluation_ordinals` —, the larger class's at α·g(o_1)/2; the model kept only when
its bound beats the larger class's). The certified model is signed and written to the drop box with
the study's result.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from marg._util import atomic_write_bytes, canonical_json, now_iso
from marg.errors import InputError, RefusedError

from .study_runner import (FINAL_MODEL, FINAL_RESULT, ROUND_NAMES, Party, learner_signed,
                           open_party, read_json, refused_file, request_file, reveal_file, round_file, sum_file,
                           upload_file)
from .study_evaluated import EVALUATED, candidate_file, evaluation_ordinals, runners_up  # noqa: F401 (re-exported)
from .study_measure import measured_features, round2_tables  # noqa: F401  (round 2: the features, the tables)
from .study_select import select_weights, voted_features  # noqa: F401  (round 1: the weights, the vote)
from .study_site import eval_clique, eval_codebook, eval_model_file


COVERAGE = 0.95
FIRST_ORDER = "first-order"
"""The design's mode with no selection (:data:`marg.marginals.study_design.FIRST_ORDER`)."""
PRIVATE = "private"
"""The design's mode with each site's own top-k in round 1 (:mod:`marg.protocols.study_top_k`)."""


def _local_sum(party: Party, r: str) -> Any:
    """The learner's summed bundle of round ``r`` (its own copy, else the drop box's, verified)."""
    from marg.protocols.bundle import Bundle
    from marg.protocols.signing import parse_verified
    from marg.protocols.trust_store import TrustStore

    p = party.local / f"sum-{r}.bundle"
    data = p.read_bytes() if p.exists() else party.drop.read(sum_file(r))
    if data is None:
        raise InputError(f"round {r!r} has no sum yet")
    lrn = party.study.learner
    trust = TrustStore.from_keys({lrn.site: lrn.sign_pub}, {lrn.site: "learner"})
    parse_verified(data, trust, source=sum_file(r))
    return Bundle.from_bytes(data, source=sum_file(r))


def _summary(bundle: Any, study_fingerprint: str | None = None) -> Any:
    """The summed bundle as a Summary; a round over some of the study's features names the study's codebook as its
    parent (``study_fingerprint``), so a model fitted on it accepts data coded under the study codebook."""
    from marg.protocols.aggregate import summary_from_bundles

    s = summary_from_bundles([bundle], [bundle.site])
    if study_fingerprint is not None and s.codebook.fingerprint != study_fingerprint:
        s.parent_fingerprint = study_fingerprint
    return s


def _survivors(party: Party, r: str) -> list[str]:
    """The sites of round ``r``: every site for the first, the survivors of the round before otherwise."""
    k = ROUND_NAMES.index(r)
    if k == 0:
        return party.study.names
    req = learner_signed(party, party.drop, request_file(ROUND_NAMES[k - 1]))
    return list(req["survivors"]) if req else []


def round2_summary(party: Party) -> Any:
    """Round 2's pooled sum as a Summary; under the private selection with round 1's pooled label table added (the
    larger class is called from the least noisy N[y]: round 1's label table carries the design's label share, where
    the column sums of the vote's fallback table carry round 2's scraps; measured on leukemia in
    BENCHMARKS.md, "Issue 47: numbers moved out of docstrings"). Post-processing of released tables only."""
    from marg.marginals.summary import Summary

    study = party.study
    s2 = _summary(_local_sum(party, "measure"), study.fingerprint)
    y = study.codebook.label.name
    if study.plan.get("selection_run") != PRIVATE or any(tuple(t.clique) == (y,) for t in s2.tables):
        return s2
    label = [t for t in _local_sum(party, "select").tables if tuple(t.clique) == (y,)]
    return Summary(s2.codebook, list(s2.tables) + label, provenance=s2.provenance,
                   parent_fingerprint=s2.parent_fingerprint, site_parts=s2.site_parts)


def nothing_agreed(party: Party) -> bool:
    """Whether round 2's features came from the private vote's fallback (no feature agreed: :func:`voted_features`)."""
    doc = learner_signed(party, party.drop, round_file("measure")) or {}
    sel = (doc.get("study") or {}).get("selection") or {}
    return sel.get("agreed") == 0


def _plan(party: Party, r: str, members: list[str]) -> tuple[dict[str, Any], Any]:
    """The study block of round ``r`` (tables, weights, ρ; the model for the evaluation) and its sum's codebook."""
    study = party.study
    cb, y = study.codebook, study.codebook.label.name
    rho = study.round_rho(r)
    first_order = study.plan.get("selection") == FIRST_ORDER
    private = study.plan.get("selection_run") == PRIVATE
    if r == "select" and private:  # the label table pooled, each site's own OpenDP top-k (marg.protocols.study_top_k)
        r_sel = float(study.plan["rho_select"])
        return {"cliques": [[y]], "weights": None, "rho": rho, "tables_rho": rho - r_sel,
                "top_k": {"k": int(study.plan.get("k") or 1), "rho": r_sel}}, cb
    if r == "select":
        cliques = [(y,)] + ([] if first_order else [(a, y) for a in cb.discrete_names])
        return {"cliques": [list(c) for c in cliques], "weights": select_weights(study.plan, len(cliques) - 1),
                "rho": rho}, cb
    if r == "measure" and first_order:  # no selection: every first-order table, equal shares
        cliques = [list(canonical_first(cb, a)) for a in cb.discrete_names]
        why = {"ranked": list(cb.discrete_names), "measured": list(cb.discrete_names), "pairs": 0,
               "rule": "every first-order table (the design's first-order mode: no selection)"}
        return {"cliques": cliques, "weights": None, "rho": rho, "selection": why}, cb.subset(list(cb.discrete_names))
    if r == "measure":
        from marg.learners.selection.screening import screen_scores
        from marg.marginals.counts.tables import canonical_clique

        b1 = _local_sum(party, "select")
        if private:  # the sites' own top-k lists, pooled by their vote (no first-order table was released)
            kept, why1 = voted_features(study, b1)
            label = next(t.counts for t in b1.tables if tuple(t.clique) == (y,))
        else:
            s1 = _summary(b1)
            scores = screen_scores(s1, coverage=COVERAGE)
            kept = measured_features(scores, int(study.plan.get("k") or len(cb.discrete_names)))
            why1 = {"scores_positive": len(scores.rank())}
            label = s1.counts((y,))
        n_hat = float(max(np.asarray(label, dtype=float).clip(min=0).sum(), 1.0))
        # the pooled noise: one curator's at ρ·t/S with shared noise (S/t curators' variance), S sites' per-site
        rests = [rho * study.threshold / len(members)] if study.noise == "shared" else [rho] * len(members)
        tp = round2_tables(kept, cb, rests, n_hat)
        cliques = [list(canonical_clique(cb, tuple(c) + (y,))) for c in tp.tables]  # as the sites count them
        why = {"ranked": kept, "measured": sorted({a for c in tp.tables for a in c}, key=cb.index),
               "pairs": sum(len(c) == 2 for c in tp.tables), **why1,
               "rule": ("every first-order and pair table (the design measures every candidate, k = p)"
                        if len(kept) >= len(cb.discrete_names) else
                        "the first-order tables of the top k and the pairs among the first M (choose_tables)")}
        return {"cliques": cliques, "weights": list(tp.weights), "rho": rho, "selection": why}, \
            cb.subset([a for a in cb.feature_names if any(a in c for c in tp.tables)])
    # evaluate: fit, sign and publish the model; its errors and the larger class's on the held-out patients
    from marg.learners.learn import learn
    from marg.protocols.model_signing import sign_model_file

    s2 = round2_summary(party)
    if private and nothing_agreed(party):
        # the sites' private selections agreed on nothing (the vote's fallback feature was measured only so that the
        # study's summary has a table): the model is the larger class, as on the per-site path (two_round.finish)
        res = learn(s2, "prior")
        models = [res.model]
    else:
        est, params = final_learner(s2, first_order)
        res = learn(s2, est, params)
        models = [res.model] + runners_up(res.estimator, s2, EVALUATED - 1)  # the fitted clone: its candidates
    digests = []
    for j, m in enumerate(models):
        path = party.local / candidate_file(j)
        m.save(path)
        sign_model_file(path, party.sign_key, study.learner.site)
        raw = path.read_bytes()
        party.drop.write(eval_model_file(j), raw)
        digests.append(hashlib.sha256(raw).hexdigest())
    label = np.asarray(s2.counts((y,)), dtype=float)
    return {"cliques": [list(eval_clique(cb, j)) for j in range(len(models))], "weights": None, "rho": rho,
            "model": digests[0], "models": digests, "learner": res.model.learner,
            "learners": [m.learner for m in models], "larger_class": int(np.argmax(label)),
            "features": res.model.codebook.feature_names}, eval_codebook(cb, len(models))


def canonical_first(cb: Any, a: str) -> tuple[str, ...]:
    from marg.marginals.counts.tables import canonical_clique

    return canonical_clique(cb, (a, cb.label.name))


def final_learner(s2: Any, first_order: bool) -> tuple[Any, dict[str, Any]]:
    """The candidate fitted on round 2's sum: the automatic choice — on that one pooled summary each candidate's
    error estimated by the split with the release's own noise (``AutoLearner(one_site="split")``; in sample, the
    estimate is optimistic and chose worse on the same noisy kr-vs-kp sums, never better: BENCHMARKS.md,
    "Issue 44 (pooled)") —, or — every first-order table and nothing else
    measured (the design's first-order mode) — naive Bayes, the model those tables define, with a pseudo-count of
    half a pooled cell's noise std (at least 0.5): noisy counts near zero are shrunk towards the class's mean level
    rather than read as certainties (measured against 0.5 in BENCHMARKS.md, issue 44 studyacc)."""
    if not first_order:
        from marg.learners.auto import AutoLearner

        return AutoLearner(one_site="split"), {}
    y = s2.codebook.label.name
    stds = [s2.count_noise_std((a, y)) for a in s2.codebook.discrete_names if s2.has_clique((a, y))]
    return "nb", {"alpha": max(0.5, 0.5 * (max(stds) if stds else 0.0))}


def _round_codebook(party: Party, r: str, block: dict[str, Any]) -> Any:
    cb = party.study.codebook
    if r == "select":
        return cb
    if r == "evaluate":
        return eval_codebook(cb, len(block["cliques"]))
    inside = {a for c in block["cliques"] for a in c}
    return cb.subset([a for a in cb.feature_names if a in inside])


def _sum_records(party: Party, r: str, block: dict[str, Any], tables: list[Any], n_sites: int, m: int) -> list[Any]:
    """The summed tables with the shared noise's records of a sum of ``m`` shares (per-site noise: as summed)."""
    from dataclasses import replace

    from marg.marginals.privacy_unit import resolve_unit
    from marg.protocols.study_round import cliques_of

    from .study_site import shared_noise

    unit = resolve_unit(party.study.codebook, None, None)
    cb = eval_codebook(party.study.codebook, len(block["cliques"])) if r == "evaluate" else party.study.codebook
    plan = shared_noise(party.study, cb, cliques_of(block), block, n_sites, unit.bound if unit is not None else 1)
    if plan is None:
        return tables
    return [replace(t, noise=rec) for t, rec in zip(tables, plan.sum_records(m))]


def _refuse(party: Party, r: str, rnd: Any, why: str) -> None:
    """Record that round ``r`` is refused (nothing released) and stop the study."""
    from marg.protocols.signing import sign_document

    doc = sign_document({"format": "marg-study-refused", "version": 1, "study_id": party.study.study_id, "round": r,
                         "round_id": rnd.id, "why": why, "time": now_iso()}, party.sign_key)
    party.drop.write(refused_file(r), canonical_json(doc) + b"\n")
    raise RefusedError(f"round {r!r} refused: {why}; nothing was released (the study stopped)")


def _collect(party: Party, r: str, rnd: Any, close: bool) -> tuple[list[Any], list[str], list[str]]:
    """The verified uploads of round ``r`` (one per member at most), the members missing, and the refused files."""
    from marg.protocols.secagg_round import parse_upload

    ups, missing, bad = [], [], []
    for s in rnd.names:
        d = read_json(party.drop, upload_file(r, s))
        if d is None:
            missing.append(s)
            continue
        try:
            u = parse_upload(d, rnd, upload_file(r, s))
        except (InputError, RefusedError) as exc:
            bad.append(f"{upload_file(r, s)}: {exc}")
            missing.append(s)
            continue
        if u.masked.site != s:
            bad.append(f"{upload_file(r, s)}: signed by {u.masked.site!r}")
            missing.append(s)
            continue
        ups.append(u)
    return ups, missing, bad


def run_learner(study_path: str | Path, close: bool = False) -> dict[str, Any]:
    """Do what is pending for the learner (module docstring); return what it did and what comes next."""
    from marg.protocols.bundle import Bundle
    from marg.protocols.secagg_round import finish, make_request
    from marg.protocols.signing import finalize_bundle
    from marg.protocols.study_round import parse_study_round, round_doc

    party = open_party(study_path, None, learner=True)
    study, drop = party.study, party.drop
    party.local.mkdir(parents=True, exist_ok=True, mode=0o700)
    did: list[dict[str, Any]] = []
    notes: list[str] = []
    nxt = None
    for r in study.rounds:
        doc = learner_signed(party, drop, round_file(r))
        if doc is None:
            members = _survivors(party, r)
            block, _ = _plan(party, r, members)
            doc = round_doc(study, r, members, party.sign_key, block)
            drop.write(round_file(r), canonical_json(doc) + b"\n")
            did.append({"did": f"opened round {r!r} for {', '.join(members)}", "round": r, "rho": block["rho"],
                        "tables": len(block["cliques"])})
            nxt = f"each site runs marg study run STUDY --site NAME --data DATA (round {r!r})"
            break
        rnd, block = parse_study_round(study, doc, r, f"{drop}/{round_file(r)}")
        if drop.exists(refused_file(r)):
            raise RefusedError(f"round {r!r} was refused (fewer than t = {study.threshold} sites answered); "
                               "the study stopped, nothing more is released")
        request = learner_signed(party, drop, request_file(r))
        if request is None:
            ups, missing, bad = _collect(party, r, rnd, close)
            notes += bad
            if missing and not close:
                nxt = (f"waiting for {', '.join(missing)} to answer round {r!r} (run again later; --close drops them "
                       f"once at least t = {study.threshold} answered)")
                break
            if len(ups) < study.threshold:
                _refuse(party, r, rnd, f"{len(ups)} of {len(rnd.names)} sites answered, below t = {study.threshold}")
            request = make_request(rnd, ups, party.sign_key)
            drop.write(request_file(r), canonical_json(request) + b"\n")
            did.append({"did": f"collected round {r!r}", "round": r, "survivors": request["survivors"],
                        "dropped": request["dropped"]})
            nxt = f"the survivors ({', '.join(request['survivors'])}) reveal their shares for round {r!r}"
            break  # a request just written: --close applies to the reveals only on a later run
        if not drop.exists(sum_file(r)):
            survivors = list(request["survivors"])
            reveals = [d for d in (read_json(drop, reveal_file(r, s)) for s in survivors) if d is not None]
            waiting = [s for s in survivors if not drop.exists(reveal_file(r, s))]
            if waiting and not close:
                nxt = f"waiting for {', '.join(waiting)} to reveal their shares for round {r!r} (run again later)"
                break
            if len(reveals) < study.threshold:
                _refuse(party, r, rnd, f"{len(reveals)} survivors revealed their shares, below t = {study.threshold}: "
                                       "the sum cannot be unmasked")
            ups, _, _ = _collect(party, r, rnd, False)
            ups = [u for u in ups if u.masked.site in survivors]
            tables, info = finish(rnd, ups, request, reveals)
            tables = _sum_records(party, r, block, tables, len(rnd.names), len(info["sites"]))
            privacy = {"mechanism": "gaussian", "rho": float(block["rho"]), "noise": study.noise,
                       "per_site": [u.privacy for u in ups]}
            bundle = Bundle.build(_round_codebook(party, r, block), tables, site=study.learner.site, n_rows=None,
                                  privacy=privacy, extra={"secagg": info, "round": rnd.id,
                                                          "study": {"study_id": study.study_id, "round": r}})
            _, data = finalize_bundle(bundle, party.sign_key)
            atomic_write_bytes(party.local / f"sum-{r}.bundle", data)
            drop.write(sum_file(r), data)
            did.append({"did": f"summed round {r!r} over {', '.join(info['sites'])}", "round": r,
                        "dropped": info["dropped"]})
    else:
        if not drop.exists(FINAL_RESULT):
            did.append(_certify(party) if "evaluate" in study.rounds else _certify_own(party))
        nxt = "none: the study is done (marg study status)"
    return {"study_id": study.study_id, "learner": study.learner.site, "did": did, "next": nxt, "notes": notes,
            "model": f"{drop}/{FINAL_MODEL}" if drop.exists(FINAL_RESULT) else None}


def comparison_rule(study: Any) -> str:
    """``"beats"`` (the larger class unless the model beats it), or ``"not-worse"`` when the study's first-order
    design found no evaluation round decisive (:func:`marg.marginals.study_design.comparison_decisive` on the
    study's public rows, held-out fraction and evaluation ρ): there the model unless it is shown worse."""
    from marg.marginals.study_design import comparison_decisive, curators

    if study.plan.get("selection") != FIRST_ORDER:
        return "beats"
    rows = study.plan.get("rows") or []
    cur = curators(study.noise, len(study.names), study.threshold)
    from marg.marginals.privacy_unit import resolve_unit

    unit = resolve_unit(study.codebook, None, None)
    ok = comparison_decisive(rows, study.holdout, study.round_rho("evaluate"), cur, study.codebook.label.n_classes,
                             unit.bound if unit is not None else 1)
    return "beats" if ok else "not-worse"


def _certify(party: Party) -> dict[str, Any]:
    """The holdout certificate on the pooled evaluation; the model as chosen, or the larger class; signed, in the drop
    box."""
    from marg.learners.study.final_choice import final_among
    from marg.learners.classifiers.label_only import LabelOnly
    from marg.learners.learn import as_model
    from marg.learners.estimator.model import Model

    study = party.study
    summed = _local_sum(party, "evaluate")
    by_clique = {tuple(t.clique): t for t in summed.tables}
    K = sum(1 for j in range(len(summed.tables)) if tuple(eval_clique(study.codebook, j)) in by_clique)
    tables = [by_clique[tuple(eval_clique(study.codebook, j))] for j in range(K)]
    s2 = round2_summary(party)
    models = [Model.read(party.local / candidate_file(j))[0] for j in range(K)]
    prior = LabelOnly(coverage=COVERAGE).fit(s2)  # the larger class, fitted before the evaluation
    rule = comparison_rule(study)
    fc = final_among(models, prior, [np.asarray(t.counts) for t in tables], [t.noise.draws(True) for t in tables],
                     "confusion", COVERAGE, ordinals=evaluation_ordinals(summed, K), rule=rule,
                     cell_std=float(tables[0].noise.std))
    keep_model = fc.chosen == "model"
    model = models[fc.index]
    if not keep_model:
        model = as_model(prior, s2, {**prior.report(), "n": s2.n})
    bound = fc.certificate
    evaluation = {**fc.to_dict(), "model_errors": fc.model_bound.errors, "larger_class_errors": fc.prior_bound.errors,
                  "rows": fc.model_bound.rows, "kept": "model" if keep_model else "larger class"}
    model.info = {**model.info, "holdout_certificate": {**bound.to_dict(), "alpha_share": fc.share},
                  "study": {"study_id": study.study_id, "evaluation": evaluation}}
    return _publish(party, model, bound.value, "holdout", evaluation)


def _certify_own(party: Party) -> dict[str, Any]:
    """A study without the evaluation round (the design's first-order mode where even a guard round could not see a
    model worse than the larger class, :mod:`marg.marginals.study_first_order`): the model fitted on round 2's sum
    (:func:`final_learner`), its certificate its own — the estimator's worst case over its confidence box on the
    released tables —, signed, in the drop box. No patient was held out, so nothing compares it with the larger
    class (the result says so)."""
    from marg.learners.learn import learn

    study = party.study
    s2 = round2_summary(party)
    res = learn(s2, *final_learner(s2, study.plan.get("selection") == FIRST_ORDER))
    cert = res.model.estimator.certificate_
    res.model.info = {**res.model.info, "study": {"study_id": study.study_id, "evaluation": None}}
    evaluation = {"kept": "model", "rule": "no evaluation round (the study design held out no patient): the model as "
                                           "fitted, with its own certificate"}
    return _publish(party, res.model, float(cert.value), str(cert.kind), evaluation)


def _publish(party: Party, model: Any, certificate: float, kind: str, evaluation: dict[str, Any]) -> dict[str, Any]:
    """Sign the final model and the study's result and write both to the drop box."""
    from marg.protocols.model_signing import sign_model_file
    from marg.protocols.signing import sign_document

    study = party.study
    path = party.local / "final.model.json"
    model.save(path)
    sign_model_file(path, party.sign_key, study.learner.site)
    raw = path.read_bytes()
    rounds = {}
    for r in study.rounds:
        req = learner_signed(party, party.drop, request_file(r)) or {}
        rounds[r] = {"survivors": req.get("survivors"), "dropped": req.get("dropped")}
    result = sign_document({"format": "marg-study-result", "version": 1, "study_id": study.study_id,
                            "model": FINAL_MODEL, "model_sha256": hashlib.sha256(raw).hexdigest(),
                            "learner": model.learner, "certificate": certificate, "certificate_kind": kind,
                            "evaluation": evaluation, "rounds": rounds, "features": model.codebook.feature_names,
                            "time": now_iso()}, party.sign_key)
    party.drop.write(FINAL_MODEL, raw)
    party.drop.write(FINAL_RESULT, canonical_json(result) + b"\n")
    return {"did": "certified the model", "learner": model.learner, "certificate": certificate,
            "kept": evaluation["kept"], "model": f"{party.drop}/{FINAL_MODEL}"}
