"""A site's part of a study: ``marg study run STUDY --site NAME --data DATA`` does whatever is pending, once.

In order, for each round the learner opened (:mod:`marg.study_runner` has the drop box's files):
check the data against the study's codebook (before anything is spent); answer the round (count
its tables with the study's held-out patients left out, protect them, record the release in the
site's ledger, then upload them masked, :class:`marg.protocols.study_round.StudyTables` through
:func:`marg.protocols.export.export_site`); reveal the shares that unmask the survivors' sum, once
(:func:`marg.protocols.secagg_round.reveal_once`); in the evaluation round, the chosen model's
confusion table N[predicted, y] on the held-out patients (:func:`marg.protocols.evaluation.confusion_on_holdout`;
each patient is one cell, so its sensitivity is one patient's rows; the larger class's errors are read
from the same table) — one table per model the round names (at most :data:`MAX_MODELS`, the round's ρ split
over them), each model recorded in the ledger against the held-out set at its own rank. Every spend is checked
against the site's cap (its ledger) and the study's total (its study state) before any row is read.

Re-running is safe: what was done is in the site's study state (``$MARG_HOME/studies/<id>``) and
ledger; a finished step is not repeated, a round closed without this site is not joined late. The data are
checked once per content (:func:`data_key`: a re-run on the same file's bytes skips the check). In a round
whose file asks for the private selection (``top_k``), the site releases its label table and its own
OpenDP top-k (:mod:`marg.protocols.study_top_k`).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from marg._util import canonical_json
from marg.errors import InputError, RefusedError

from .study_runner import (EVAL_MODEL, FINAL_RESULT, Party, learner_signed, open_party, refused_file,
                           request_file, reveal_file, round_file, upload_file)

def check_data(data: str, codebook: Any) -> None:
    """Refuse data that does not fit the codebook (one line naming the column, never a value)."""
    from marg.marginals.schema_check import check_schema
    from marg.marginals.sources import open_source

    with open_source(data) as src:
        res = check_schema(src, codebook)
    if not res.fits:
        m = res.misfits[0]
        what = "is absent" if m.absent else ("holds values that are not numbers" if m.numeric and m.unknown else
                                             "holds levels the codebook lacks" if m.unknown else
                                             "has missing values and no missing level")
        more = f" (and {len(res.misfits) - 1} more columns)" if len(res.misfits) > 1 else ""
        raise InputError(f"{data}: column {m.column!r} {what}: the data does not fit the study's codebook{more}; "
                         "nothing was spent")


def data_key(data: str, codebook: Any) -> str | None:
    """The digest of a data file's bytes and the codebook's fingerprint, or None (not one regular file: a folder, a
    database, a URL). A site's study state keeps the key of the data it checked (:func:`check_data`), so a re-run on
    the same bytes does not read them again only to check them (on a wide file the check costs more than the round)."""
    p = Path(str(data))
    if not p.is_file():
        return None
    h = hashlib.blake2b(codebook.fingerprint.encode(), digest_size=32)
    with open(p, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def ledger_of(party: Party) -> tuple[Path, Any]:
    """The site's ledger: the configured site's (``marg audit init``), else ``$MARG_HOME/ledger``."""
    from marg.protocols.site import DEFAULT_LEDGER, SiteConfig

    cfg = SiteConfig.load(party.home)
    return (cfg.ledger if cfg is not None else party.home / DEFAULT_LEDGER), cfg


MAX_MODELS = 5
"""The most models a site evaluates in one evaluation round (each one more table on the same held-out patients,
the round's ρ split over them, and one more model counted in the ledger against that held-out set)."""


def eval_codebook(study_cb: Any, models: int = 1) -> Any:
    """The evaluation round's codebook: N[predicted_j, y] for ``models`` models
    (:func:`marg.protocols.evaluation.evaluation_codebook`)."""
    from marg.protocols.evaluation import evaluation_codebook

    return evaluation_codebook(study_cb, models)


def eval_clique(study_cb: Any, j: int = 0) -> tuple[str, str]:
    """Model ``j``'s table (0-based) in the evaluation round: (predicted_j, y)."""
    from marg.protocols.evaluation import predicted_name

    return (predicted_name(j), study_cb.label.name)


def eval_model_file(j: int) -> str:
    """Model ``j``'s file (0-based) in the drop box: the first at :data:`marg.study_runner.EVAL_MODEL`."""
    return EVAL_MODEL if int(j) == 0 else EVAL_MODEL.replace("model.json", f"model-{int(j) + 1}.json")


def eval_models(block: dict[str, Any]) -> list[str]:
    """The digests of the models the evaluation round names, in order (an older round file: its one ``model``);
    refused when there are none or more than :data:`MAX_MODELS`."""
    models = block.get("models") or ([block["model"]] if block.get("model") else [])
    if not models or not all(isinstance(m, str) for m in models) or len(set(models)) != len(models):
        raise RefusedError("the evaluation round names no model, or a model twice")
    if len(models) > MAX_MODELS:
        raise RefusedError(f"the evaluation round names {len(models)} models; a site evaluates at most {MAX_MODELS} "
                           "in one round")
    return [str(m) for m in models]


class _OnStudyRows:
    """A model over a subset of the study's features, read on rows encoded by the study's codebook."""

    def __init__(self, model: Any, study_cb: Any) -> None:
        self.model, self.codebook, self.info = model, study_cb, {}
        self.idx = [study_cb.feature_names.index(f) for f in model.codebook.feature_names]

    def predict(self, X: Any) -> np.ndarray:
        return np.asarray(self.model.predict(np.asarray(X)[:, self.idx]))


def shared_noise(study: Any, codebook: Any, cliques: list[tuple[str, ...]], block: dict[str, Any], n_sites: int,
                 max_rows: int) -> Any:
    """The round's shared-noise plan (``noise: shared``), or None (each site adds its own full noise).

    Planned from the round file alone, the same at every site and at the learner
    (:func:`marg.marginals.shared_noise.shared_plan`): the round's ρ for the secure sum of any t of its
    ``n_sites`` sites, split over its tables by the learner's weights.
    """
    if study.noise != "shared":
        return None
    from marg.marginals.shared_noise import shared_plan

    # a round with the private selection spends ``tables_rho`` of its ρ on its tables (marg.protocols.study_top_k)
    return shared_plan(codebook, cliques, float(block.get("tables_rho", block["rho"])), study.threshold, n_sites,
                       max_rows=max_rows, delta=study.delta, weights=block.get("weights"))


def _answer(party: Party, r: str, rnd: Any, block: dict[str, Any], data: str, state: dict[str, Any]) -> dict[str, Any]:
    """Upload this site's answer to round ``r`` (ledgered first); return what was done."""
    from marg.protocols.export import export_site
    from marg.protocols.release_request import Delivery, ReleaseRequest
    from marg.protocols.secagg_round import make_upload
    from marg.protocols.study_round import StudyTables, cliques_of
    from marg.protocols.study_top_k import StudyTopK, check_top_k, top_k_block

    study, site = party.study, party.name
    ledger_dir, _cfg = ledger_of(party)
    out = party.local / f"upload-{site}-{r}.json"
    from marg.marginals.privacy_unit import resolve_unit

    unit = resolve_unit(study.codebook, None, None)
    max_rows = unit.bound if unit is not None else 1
    rho = float(block["rho"])

    def package(bundle: Any) -> bytes:
        return canonical_json(make_upload(rnd, site, bundle.tables, party.seal_key, party.sign_key,
                                          bundle.header.get("privacy"))) + b"\n"

    if r != "evaluate":
        cliques = cliques_of(block)
        share = shared_noise(study, study.codebook, cliques, block, len(rnd.names), max_rows)
        if top_k_block(block) is not None:  # round 1 with each site's own private top-k (the design's "private")
            k, r_sel, r_tab = check_top_k(block, f"{party.drop}/{round_file(r)}")
            hook = StudyTopK(study, r, rnd.id, cliques, rho, block.get("weights"), party.local, site, share=share,
                             names=list(study.codebook.discrete_names), k=k, tables_rho=r_tab, top_k_rho=r_sel)
        else:
            hook = StudyTables(study, r, rnd.id, cliques, rho, block.get("weights"), party.local, site, share=share)
        req = ReleaseRequest(study=hook, holdout=study.holdout or None, round_id=rnd.id, delta=study.delta)
        res = export_site(data, study.codebook, site, out, req,
                          Delivery(signing_key=party.sign_key, ledger_dir=ledger_dir, package=package, force=True))
        cost = res.cost
    else:
        cost = _evaluate(party, rnd, block, data, ledger_dir, out, state)
    party.drop.write(upload_file(r, site), out.read_bytes())
    return {"did": f"answered round {r!r}", "round": r, "spent": cost.to_dict()}


def _evaluate(party: Party, rnd: Any, block: dict[str, Any], data: str, ledger_dir: Path, out: Path,
              state: dict[str, Any]) -> Any:
    """The evaluation round's upload: the model's N[predicted, y] on the held-out patients, protected."""
    from marg._util import atomic_write_bytes
    from marg.learners.estimator.model import Model
    from marg.marginals.holdout import split_for_model
    from marg.marginals.privacy_unit import resolve_unit
    from marg.marginals.counts.tables import MarginalTable
    from marg.protocols.bundle import Bundle
    from marg.protocols import evaluation_ledger as evl
    from marg.protocols.evaluation import confusion_on_holdout
    from marg.protocols.ledger import Ledger
    from marg.protocols.model_signing import read_verified_model
    from marg.protocols.secagg_round import make_upload
    from marg.protocols.signing import finalize_bundle
    from marg.protocols.study_round import StudyTables
    from marg.protocols.site import resolve_export_ledger
    from marg.protocols.trust_store import TrustStore

    study, site = party.study, party.name
    digests = eval_models(block)
    lrn = study.learner
    trust = TrustStore.from_keys({lrn.site: lrn.sign_pub}, {lrn.site: "learner"})
    models = []
    for j, digest in enumerate(digests):  # every model verified before any row is read
        name = eval_model_file(j)
        raw = party.drop.read(name)
        if raw is None or hashlib.sha256(raw).hexdigest() != digest:
            raise RefusedError(f"drop box {party.drop}: {name} is missing or not the model the evaluation round names")
        local_model = party.local / ("evaluate-model.json" if j == 0 else f"evaluate-model-{j + 1}.json")
        atomic_write_bytes(local_model, raw)
        verified, _ = read_verified_model(local_model, trust)
        models.append(Model.from_bytes(verified, name))
    bundles = [state["rounds"][r]["bundle"] for r in ("select", "measure") if state["rounds"].get(r, {}).get("bundle")]
    split = split_for_model(ledger_dir, {"sites": [{"site": site, "rounds": [{"digest": d} for d in bundles]}]},
                            study.fingerprint, site)
    unit = resolve_unit(study.codebook, None, None)
    ecb = eval_codebook(study.codebook, len(models))
    bound = unit.bound if unit is not None else 1
    cliques = [eval_clique(study.codebook, j) for j in range(len(models))]
    hook = StudyTables(study, "evaluate", rnd.id, cliques, float(block["rho"]), None, party.local, site,
                       share=shared_noise(study, ecb, cliques, block, len(rnd.names), bound), max_rows=bound)
    ledger_dir, cfg = resolve_export_ledger(ledger_dir, site, party.sign_key)
    ledger = Ledger(ledger_dir, site=cfg)
    hook.check(ledger_dir, ecb, site)  # the study's total: before any row is read
    ledger.check(hook.requested, rnd.id)  # the site's cap, and this round not answered
    # the model's ordinal among the distinct models evaluated on this held-out set, from the ledger alone (every
    # evaluation, a study's or marg evaluate's, is recorded there): the learner's share of α is g(j) = 6/(π²j²)
    # every model evaluated counts, each at its own rank (consecutive for new ones)
    ranks = evl.ordinals(ledger.entries(), split, digests)
    rank = ranks[0]
    tables = []
    for j, model in enumerate(models):
        conf, _held, _ = confusion_on_holdout(data, _OnStudyRows(model, study.codebook), ledger_dir, site, split=split,
                                              unit=unit, per_patient=True, allow_empty=True)
        tables.append(MarginalTable(clique=cliques[j], counts=conf))
    released, cost, privacy, record = hook.protect(tables, ecb)
    extra = {"round": rnd.id, "study": record, "evaluation": {"model": digests[0], "models": digests,
                                                             "split": list(split.bundles)},
             "evaluations_on_split": rank, "evaluations_on_split_each": ranks}
    final, _ = finalize_bundle(Bundle.build(ecb, released, site=site, n_rows=None, privacy=privacy, extra=extra),
                               party.sign_key)
    # signed by the site in its upload; the learner reads them (each model's rank: evaluations_on_split_each)
    said = {**(privacy or {}), "evaluations_on_split": rank, "evaluations_on_split_each": ranks}
    data_bytes = canonical_json(make_upload(rnd, site, released, party.seal_key, party.sign_key, said)) + b"\n"
    entry = ledger.record(final, party.sign_key, file_digest=hashlib.sha256(data_bytes).hexdigest(), cost=cost,
                          own_cost=hook.own_cost, evaluation=_records(evl, split, digests, ranks))
    hook.commit(ledger_dir, study.fingerprint, final, entry, cost)
    atomic_write_bytes(out, data_bytes)
    return cost


def _records(evl: Any, split: Any, digests: list[str], ranks: list[int]) -> dict[str, Any]:
    """The ledger's record of one evaluation release of several models: the first model's, the others' under
    ``others`` (:func:`marg.protocols.evaluation_ledger.evaluations` counts each)."""
    first = evl.record_of(split, digests[0], False, ranks[0])
    if len(digests) > 1:
        first["others"] = [evl.record_of(split, d, False, k) for d, k in zip(digests[1:], ranks[1:])]
    return first


def _reveal(party: Party, r: str, rnd: Any, request: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    from marg.protocols.ledger import Ledger
    from marg.protocols.secagg_round import make_reveal, reveal_once
    from marg.protocols.site import resolve_export_ledger
    from marg.protocols.study_round import save_state

    study, site = party.study, party.name
    doc = make_reveal(rnd, request, site, party.seal_key, party.sign_key, members=study.pinned())  # both keys pinned
    ledger_dir, cfg = resolve_export_ledger(ledger_of(party)[0], site, party.sign_key)
    marker = reveal_once(Ledger(ledger_dir, site=cfg), rnd, site)
    try:
        party.drop.write(reveal_file(r, site), canonical_json(doc) + b"\n")
    except BaseException:
        marker.unlink()  # nothing revealed: the round may still be answered
        raise
    state["rounds"][r]["revealed"] = True
    save_state(party.local, site, state)
    return {"did": f"revealed its shares for round {r!r}", "round": r}


def run_site(study_path: str | Path, site: str, data: str, dry_run: bool = False) -> dict[str, Any]:
    """Do what is pending for ``site`` (module docstring); return what it did and what comes next."""
    from marg.marginals.counts.dp_conversions import rho_for_epsilon
    from marg.protocols.pinning import check_pinned_roster
    from marg.protocols.study_round import load_state, parse_study_round, save_state, spent_rho

    from marg.protocols.study_file import pin_learner

    party = open_party(study_path, site, learner=False, pin=False)
    study, drop = party.study, party.drop
    key = data_key(data, study.codebook)
    state = load_state(party.local, site)  # (reads only: nothing written yet)
    if key is None or state.get("data_checked") != key:
        check_data(data, study.codebook)  # data that does not fit: refused before anything is written, here or there
    pin_learner(study, party.home)
    party.local.mkdir(parents=True, exist_ok=True, mode=0o700)
    if key is not None and state.get("data_checked") != key:
        state["data_checked"] = key
        save_state(party.local, site, state)
    did: list[dict[str, Any]] = []
    nxt = None
    for r in study.rounds:
        doc = learner_signed(party, drop, round_file(r))
        if doc is None:
            nxt = f"wait for the learner to open round {r!r}, then run this command again"
            break
        rnd, block = parse_study_round(study, doc, r, f"{drop}/{round_file(r)}")
        if site not in rnd.names:
            nxt = f"none: this site was dropped from the study before round {r!r} (it did not answer in time)"
            break
        check_pinned_roster({m.site: (m.sign_pub, m.seal_pub) for m in rnd.members}, study.pinned(), site,
                            study.threshold, f"{drop}/{round_file(r)}")
        st = state["rounds"].get(r, {})
        if st.get("round_id") not in (None, rnd.id):
            raise RefusedError(f"{drop}/{round_file(r)} refused: round {r!r} now has id {rnd.id}, but this site "
                               f"answered round id {st['round_id']} (the learner may not replace a round)")
        if not st.get("uploaded"):
            if drop.exists(request_file(r)) or drop.exists(refused_file(r)):
                nxt = f"none: round {r!r} closed without this site; a late site cannot rejoin a finished round"
                break
            if dry_run:
                spent = spent_rho(state)
                total = rho_for_epsilon(study.epsilon, study.delta)  # the site's own conversion of its (ε, δ)
                did.append({"did": f"would answer round {r!r} (dry run: nothing read, spent or uploaded)", "round": r,
                            "rho": float(block["rho"]), "spent_rho": spent, "total_rho": total})
                nxt = "run without --dry-run to answer it"
                break
            did.append(_answer(party, r, rnd, block, data, state))
            state = load_state(party.local, site)
            st = state["rounds"][r]
        elif not drop.exists(upload_file(r, site)):  # uploaded locally, the copy to the drop box failed: resend it
            drop.write(upload_file(r, site), (party.local / f"upload-{site}-{r}.json").read_bytes())
            did.append({"did": f"re-sent its upload for round {r!r}", "round": r})
        if not st.get("revealed"):
            request = learner_signed(party, drop, request_file(r))
            if request is None:
                nxt = f"wait for the learner to collect round {r!r}, then run this command again"
                break
            if site not in request.get("survivors", []):
                nxt = f"none: the learner closed round {r!r} without this site's upload"
                break
            if dry_run:
                did.append({"did": f"would reveal its shares for round {r!r} (dry run)", "round": r})
                nxt = "run without --dry-run"
                break
            did.append(_reveal(party, r, rnd, request, state))
    else:
        nxt = ("none: the study is done (marg study status)" if drop.exists(FINAL_RESULT) else
               "wait for the learner to certify the model; nothing more is asked of this site")
    state = load_state(party.local, site)
    if not dry_run:
        save_state(party.local, site, state)
    # shown only; every spend is checked against the site's own conversion
    total = float(study.plan.get("rho_total", 0.0))
    return {"study_id": study.study_id, "site": site, "did": did, "next": nxt, "spent_rho": spent_rho(state),
            "total_rho": total, "epsilon": study.epsilon, "delta": study.delta,
            "rounds": {k: {kk: v[kk] for kk in ("uploaded", "revealed", "seq", "rho") if kk in v}
                       for k, v in state["rounds"].items()}}
