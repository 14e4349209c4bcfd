"""``marg export``: a site's release, as the options say it — a :class:`~marg.protocols.release_request.ReleaseRequest`
and a :class:`~marg.protocols.release_request.Delivery` built here, the work done by the library.

The command parses its options into the two values (and ``--holdout auto`` into its plan,
:func:`marg.api.plan_holdout`), hands them to :func:`marg.protocols.export.export_site`, its dry
run :func:`marg.protocols.export_plan.plan_export` or the evaluation release
:func:`marg.protocols.evaluation.evaluate_site`, and prints what they return.
"""


from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from marg.errors import InputError
from marg.marginals.accounting import DEFAULT_DELTA
from marg.marginals.data.codebook import MAX_LEVELS

from .common import DataArg, EngineOpt, JsonOpt, OutOpt, SchemaOpt, SiteOpt, SparkMasterOpt, emit_json, err
from .progress import RowProgress


def export_cmd(
    data: DataArg,
    schema: SchemaOpt,
    site: SiteOpt,
    out: OutOpt,
    stats: Annotated[str, typer.Option(help="auto: what marg learn's default uses (with DP: first-order and every "
                                            "pair while the pair tables hold at most 250,000 cells; exact: first); "
                                            "first: N[y], N[x_i,y]; pairs: plus N[x_i,x_j,y] for --pairs (all if "
                                            "none); pairs-only: the --pairs tables alone (the default with @REQUEST); "
                                            "all: every pair.")] = "auto",
    pairs: Annotated[Optional[str], typer.Option(help='Pairs for --stats pairs: "a:b,c:d", or @REQUEST.json from the '
                                                      'learner (round 2: releases those pair tables alone).')] = None,
    epsilon: Annotated[Optional[float], typer.Option("--epsilon",
                                                     help="Differential privacy: total ε of this export; (ε, δ)-DP "
                                                          "with the Gaussian mechanism (default), pure ε-DP with "
                                                          "--mechanism laplace.")] = None,
    rho: Annotated[Optional[float], typer.Option("--rho", help="Differential privacy: total ρ of this export "
                                                               "(Gaussian, zCDP).")] = None,
    delta: Annotated[float, typer.Option(help="δ of a Gaussian release: --epsilon is met at (ε, δ); --rho is also "
                                              "reported as (ε, δ). The ledger composes releases in zCDP and converts "
                                              "the total at the cap's δ.")] = DEFAULT_DELTA,
    allow_large_delta: Annotated[bool, typer.Option("--allow-large-delta",
                                                    help="Accept a --delta above 1e-3 (refused otherwise: the "
                                                         "guarantee fails outright with probability δ); δ ≥ 1/n is "
                                                         "always refused.")] = False,
    mechanism: Annotated[Optional[str], typer.Option(help="gaussian (zCDP; noise grows with the square root of the "
                                                          "number of tables; the default for tables) or laplace (pure "
                                                          "DP; the default for --evaluate's single small table, where "
                                                          "it is less noisy).")] = None,
    allocation: Annotated[str, typer.Option(help="How the DP budget is split across tables: half (first-order tables "
                                                 "share half) or least-squares (see the README).")] = "half",
    first_order_share: Annotated[Optional[float], typer.Option(help="Fraction of the DP budget for first-order tables "
                                                                    "(overrides --allocation).")] = None,
    round_: Annotated[Optional[str], typer.Option("--round",
                                                  help="The learner's round (ROUND.json or its id): signed into the "
                                                       "bundle, so it cannot be replayed in another round.")] = None,
    trust: Annotated[Optional[Path], typer.Option("--trust",
                                                  help="Trust store holding the learner's key (role learner): the "
                                                       "signature of the --round file, of the --evaluate model and of "
                                                       "a --pairs @REQUEST is checked against it.")] = None,
    holdout: Annotated[Optional[str], typer.Option(help="Leave this fraction of the rows out of every table, for a "
                                                        "later --evaluate (chosen by a keyed hash of each row, the "
                                                        "key kept in the ledger folder; the same from every source); "
                                                        "auto: the fraction and the ε split of `marg plan` for "
                                                        "--plan-rows (--epsilon is then the site's total, tables + "
                                                        "evaluation).")] = None,
    holdout_id: Annotated[Optional[str], typer.Option("--holdout-id",
                                                      help="With --holdout: split by this id column instead of each "
                                                           "row's content (rows sharing an id stay together).")] = None,
    privacy_unit: Annotated[Optional[str], typer.Option("--privacy-unit",
                                                        help="The column naming each patient (the unit DP protects; "
                                                             "default the codebook's privacy_unit), or 'row' when "
                                                             "every row is a different person. Required under DP when "
                                                             "an id column repeats.")] = None,
    max_rows_per_unit: Annotated[Optional[int], typer.Option("--max-rows-per-unit",
                                                             help="With --privacy-unit: count at most K rows of each "
                                                                  "patient (the K of smallest keyed priority, the "
                                                                  "same from every source); every table's "
                                                                  "sensitivity, so its noise, scales with K.")] = None,
    plan_rows: Annotated[Optional[str], typer.Option("--plan-rows",
                                                     help="With --holdout auto, or round 1 of the DP default (select, "
                                                          "then measure): the rows per site as stated publicly (one "
                                                          "count with --plan-sites, or one per site); the plan never "
                                                          "reads the data.")] = None,
    plan_sites: Annotated[Optional[int], typer.Option("--plan-sites", help="With --plan-rows: the number of sites "
                                                                           "when it gives one count.")] = None,
    expected_error: Annotated[float, typer.Option("--expected-error", help="With --holdout auto: the error rate the "
                                                                           "model is expected to reach.")] = 0.2,
    evaluate: Annotated[Optional[Path], typer.Option("--evaluate",
                                                     help="Release instead MODEL's error count (--evaluate-content) "
                                                          "on the rows held out of the bundles it learned from here "
                                                          "(for marg certify); the model is verified first (--trust, "
                                                          "--schema).")] = None,
    allow_unsigned: Annotated[bool, typer.Option("--allow-unsigned",
                                                 help="With --evaluate: accept an unsigned model; with --pairs "
                                                      "@REQUEST: an unsigned request (for experiments: nobody vouches "
                                                      "for it).")] = False,
    evaluate_content: Annotated[str, typer.Option("--evaluate-content",
                                                  help="With --evaluate: errors (the error and correct counts, 2 "
                                                       "cells: what the certificate needs), classes (the same per "
                                                       "true class, for class-wise bounds) or confusion (the K×K "
                                                       "matrix).")] = "errors",
    allow_repeated_evaluations: Annotated[bool, typer.Option("--allow-repeated-evaluations",
                                                             help="With --evaluate at a site with no cap: accept a "
                                                                  "second DP evaluation of the held-out rows (refused "
                                                                  "otherwise: an oracle with no limit); the ledger "
                                                                  "records it.")] = False,
    site_certificate: Annotated[bool, typer.Option("--site-certificate",
                                                   help="With --evaluate: ask marg certify for this site's own "
                                                        "certificate (its held-out population) beside the pooled "
                                                        "one.")] = False,
    min_cell: Annotated[int, typer.Option("--min-cell",
                                          help="Exact exports: smallest allowed nonzero cell (1 disables).")] = 3,
    min_cell_policy: Annotated[str, typer.Option(help="Exact exports: refuse the export, or suppress (zero) small "
                                                      "cells.")] = "refuse",
    key: Annotated[Optional[Path], typer.Option("--key", help="The site's signing key (SITE.sign.key) to sign the "
                                                              "bundle and ledger entry.")] = None,
    passphrase_file: Annotated[Optional[Path], typer.Option(help="File holding the signing key's passphrase.")] = None,
    to: Annotated[Optional[Path], typer.Option("--to", help="The learner's sealing public key (LEARNER.seal.pub): "
                                                            "encrypt the bundle to it.")] = None,
    ledger: Annotated[Optional[Path], typer.Option("--ledger",
                                                   help="The site's ledger folder (default: the one `marg audit init` "
                                                        "configured, else ./marg-ledger).")] = None,
    no_ledger: Annotated[bool, typer.Option("--no-ledger", help="Do not record this export (refused once the site is "
                                                                "configured).")] = False,
    engine: EngineOpt = None,
    spark_master: SparkMasterOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run",
                                          help="Show exactly what would leave (tables, cells, noise, cost against the "
                                               "cap, exact counts) and write nothing.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing --out (refused otherwise, before "
                                                        "anything is counted or charged).")] = False,
    keep_copy: Annotated[bool, typer.Option("--keep-copy/--no-keep-copy",
                                            help="Keep the plain signed bundle of a sealed export beside the ledger, "
                                                 "so `marg inspect` can show this site what it sent.")] = True,
    max_levels: Annotated[int, typer.Option("--max-levels", help="Level cap: a feature with more levels is refused "
                                                                 "(it identifies patients).")] = MAX_LEVELS,
    rounds: Annotated[Optional[int], typer.Option("--rounds",
                                                  help="Under DP with --epsilon: 2 (the default) = select, then "
                                                       "measure — --epsilon is this site's TOTAL for the study; round "
                                                       "1 releases the label table and a private selection, marg "
                                                       "request decides round 2 (--request). 1: one release of the "
                                                       "--stats tables.")] = None,
    request: Annotated[Optional[Path], typer.Option("--request",
                                                    help="Round 2 of select-then-measure: the learner's signed "
                                                         "request (marg request); measures only what it asks with the "
                                                         "rest of this site's study total (--trust: the learner's "
                                                         "key).")] = None,
    allow_draft: Annotated[bool, typer.Option("--allow-draft",
                                              help="Release under a codebook still marked draft (refused otherwise: "
                                                   "run `marg schema check` at every site first).")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Compute this site's marginal tables, protect them, sign, record in the ledger and write a bundle."""
    from marg.protocols.export import export_site
    from marg.protocols.release_request import ReleaseRequest

    from marg.protocols.release_kind import release_kind

    from .plan import parse_rows

    cb = _codebook(schema, max_levels, dry_run or allow_draft)
    stats, pair_list = _tables(cb, stats, pairs, trust, allow_unsigned and evaluate is None)
    delivery = _delivery(ledger, no_ledger, key, passphrase_file, to, force, keep_copy)
    release = ReleaseRequest(
        stats=stats, pairs=pair_list, epsilon=epsilon, rho=rho, delta=delta, mechanism=mechanism, allocation=allocation,
        first_share=first_order_share, holdout_id=holdout_id, round_id=_round_id(round_, cb, trust), min_cell=min_cell,
        min_cell_policy=min_cell_policy, max_levels=max_levels, privacy_unit=privacy_unit,
        max_rows_per_unit=max_rows_per_unit, allow_large_delta=allow_large_delta, engine=engine,
        spark_master=spark_master, content=evaluate_content, site_certificate=site_certificate, rounds=rounds,
        study_request=request, trust=trust, plan_rows=parse_rows(plan_rows) if plan_rows is not None else None,
        plan_sites=plan_sites, allow_repeated_evaluations=allow_repeated_evaluations)
    release, holdout_plan = _holdout(release, holdout, cb.n_features, plan_rows, plan_sites, expected_error)
    # the library decides the kind (one round, round 1, round 2, an evaluation): a round spends its share of the total
    kind = release_kind(release, cb, delivery, evaluation=evaluate is not None)
    release, study = kind.request, kind.study
    prog = RowProgress(f"export {site}", quiet=json_out)
    with prog:
        if evaluate is None and allow_unsigned and not (pairs or "").startswith("@"):
            raise InputError("--allow-unsigned accepts an unsigned model of --evaluate MODEL or request of --pairs "
                             "@REQUEST; this export has neither")
        if dry_run and evaluate is not None:  # the evaluation's release, not the export's tables
            return _evaluate_dry_run(cb, site, release, json_out, evaluate, trust, allow_unsigned, schema)
        if dry_run:
            return _dry_run(data, cb, site, out, release, delivery, prog, json_out, holdout_plan)
        if evaluate is not None:
            return _evaluate(data, cb, site, out, release, delivery, prog, json_out, evaluate, trust, allow_unsigned,
                             schema, no_ledger, holdout is not None or holdout_id is not None or bool(pairs))
        res = export_site(data, cb, site, out, release, delivery, progress=prog)
        prog.done()
    _exported(res, cb, site, out, delivery, json_out, holdout_plan, study)
    if round_ is not None and trust is None:  # said after success: a refusal stays one line
        err(f"warning: the round file's signature was not checked (give --trust with the learner's key): "
            f"anyone could have written {round_}")


def _codebook(schema: Path, max_levels: int, draft_ok: bool) -> Any:
    """The study codebook, its level cap checked; a draft refused unless ``draft_ok`` (a dry run, --allow-draft)."""
    from marg.marginals.data.codebook import Codebook

    cb = Codebook.load(schema)
    cb.check_level_cap(max_levels)
    if cb.draft and not draft_ok:
        from marg.errors import RefusedError

        raise RefusedError(f"{schema} is still a draft (levels and edges from one site's data): another site's data "
                           "may hold levels it lacks, refused there after this site spent; review it, run `marg "
                           f"schema check DATA --schema {schema}` at every site, then remove \"draft\": true "
                           "(--allow-draft releases anyway)")
    return cb


def _tables(cb: Any, stats: str, pairs: str | None, trust: Path | None = None,
            allow_unsigned: bool = False) -> tuple[str, Any]:
    """``--stats`` and ``--pairs`` → (stats, the pairs); ``--pairs @REQUEST.json`` is round 2: the pair tables
    alone, asked by a request signed by a learner of ``trust`` (unsigned: refused unless ``allow_unsigned``)."""
    from marg.marginals.counts.tables import parse_pairs
    from marg.protocols.pair_request import read_signed_request

    if not pairs:
        return stats, None
    if not pairs.startswith("@"):
        return stats, parse_pairs(cb, pairs)
    req, signer = read_signed_request(pairs[1:], cb.fingerprint, trust, allow_unsigned)
    if signer is None:
        err(f"warning: {pairs[1:]} is unsigned (taken with --allow-unsigned): anyone could have written it")
    # round 2: the first-order tables came in round 1
    return ("pairs-only" if stats in ("first", "auto") else stats), parse_pairs(cb, req.spec)


def _delivery(ledger: Path | None, no_ledger: bool, key: Path | None, passphrase_file: Path | None, to: Path | None,
              force: bool, keep_copy: bool) -> Any:
    """Who signs, seals and records: a configured site's key and ledger are the defaults (and the only ones
    accepted)."""
    from marg.protocols.keys import load_seal_public_key, load_signing_key, read_passphrase_file
    from marg.protocols.release_request import Delivery
    from marg.protocols.site import site_ledger

    configured, cfg = site_ledger(ledger)
    if key is None and cfg is not None:
        key = cfg.sign_key
    passphrase = read_passphrase_file(passphrase_file) if passphrase_file else None
    return Delivery(signing_key=load_signing_key(key, passphrase) if key else None,
                    recipient=load_seal_public_key(to) if to else None,
                    recipient_name=to.name.split(".")[0] if to else None,
                    ledger_dir=None if no_ledger else configured, force=force, keep_copy=keep_copy)


def _round_id(round_: str | None, cb: Any, trust: Path | None) -> str | None:
    """``--round``: the learner's round id (its signature checked against ``--trust`` when given)."""
    if round_ is None:
        return None
    from marg.protocols.rounds import read_round

    return read_round(round_, cb.fingerprint, trust)


def _holdout(release: Any, holdout: str | None, n_features: int, plan_rows: str | None, plan_sites: int | None,
             expected_error: float) -> tuple[Any, dict | None]:
    """``--holdout F`` → the request with F; ``--holdout auto`` → the library's plan (:func:`marg.api.plan_holdout`)."""
    from .plan import parse_auto, parse_rows

    if holdout is None or holdout.strip().lower() != "auto":
        return release.with_(holdout=parse_auto(holdout, "--holdout")), None
    from marg.api import plan_holdout

    rows = parse_rows(plan_rows) if plan_rows is not None and release.epsilon is not None else None
    return plan_holdout(release, n_features, rows, plan_sites, expected_error)


def _dry_run(data: str, cb: Any, site: str, out: Path, release: Any, delivery: Any, prog: Any, json_out: bool,
             holdout_plan: dict | None) -> None:
    """``--dry-run``: what would leave, and its cost; nothing written."""
    from marg.protocols.export_plan import plan_export

    plan = plan_export(data, cb, site, out, release, delivery, progress=prog)
    prog.done()
    if json_out:
        emit_json({**plan.to_dict(), **_holdout_plan_json(holdout_plan)})
        return
    for line in plan.notes + _draft_note(cb):
        err(line)
    for line in plan_lines(plan):
        typer.echo(line)
    if release.study is not None:
        from .study import study_lines

        for line in study_lines(release.study.record or {}, out, dry_run=True):
            typer.echo(line)
    if holdout_plan is not None:
        typer.echo(_holdout_plan_line(holdout_plan))


def _evaluate(data: str, cb: Any, site: str, out: Path, release: Any, delivery: Any, prog: Any, json_out: bool,
              model: Path, trust: Path | None, allow_unsigned: bool, schema: Path, no_ledger: bool,
              table_options: bool) -> None:
    """``--evaluate MODEL``: the model's error count on this site's held-out rows, and what was written."""
    from marg.api import load_verified_model
    from marg.protocols.evaluation import evaluate_site
    from marg.protocols.export import check_out

    if no_ledger:
        raise InputError("--evaluate needs the site's ledger (it remembers the held-out rows and records the release)")
    if table_options:
        raise InputError("--evaluate releases counts on held-out rows: --holdout, --holdout-id and --pairs do not "
                         "apply")
    check_out(out, delivery.force)
    # read once: the bytes verified are the bytes used and named in the release
    m, signer, digest = load_verified_model(model, schema, trust, allow_unsigned)
    res = evaluate_site(data, m, digest, site, out, release, delivery, progress=prog, signer=signer)
    prog.done()
    split = res.bundle.header["evaluation"]["split"]
    if json_out:
        emit_json({"out": str(out), "site": site, "evaluated_model": str(model), "signed_by": signer,
                   "n_rows": res.n_rows, "training_bundles": list(split["bundles"]),
                   "privacy": res.bundle.describe()["privacy"], "digest": res.bundle.digest(),
                   "evaluations_on_split": res.bundle.header["evaluations_on_split"]})
        return
    what = {"errors": "the error count", "classes": "the error counts by true class"}.get(release.content,
                                                                                          "the confusion matrix")
    typer.echo(f"wrote {out}: site {site!r}, {what} of {model.name} "
               f"({'signed by ' + signer if signer else 'unsigned'}) on {res.n_rows:,} rows held out of its "
               f"{len(split['bundles'])} training bundle(s) from this site, "
               f"privacy: {_privacy_words(res.bundle.describe()['privacy'])}")


def _evaluate_dry_run(cb: Any, site: str, release: Any, json_out: bool, model: Path, trust: Path | None,
                      allow_unsigned: bool, schema: Path) -> None:
    """``--evaluate MODEL --dry-run``: the one table the evaluation would release (its cells, noise and cost);
    no row is read, nothing written or charged."""
    from marg.api import load_verified_model
    from marg.marginals.privacy import budget_for
    from marg.protocols.evaluation import plan_evaluation

    m, signer, _ = load_verified_model(model, schema, trust, allow_unsigned)
    mech, epsilon, rho = budget_for(release.mechanism_or("laplace"), release.epsilon, release.rho, release.delta)
    unit, clique, plan = plan_evaluation(m, release, epsilon, rho, release.delta)
    import numpy as np

    from marg.protocols.evaluation import release_table

    cells = int(np.asarray(release_table(np.eye(m.codebook.n_classes, dtype=np.int64), m.codebook,
                                         release.content).counts).size)
    name = "N[" + ",".join(clique) + "]"
    noise = "exact counts (the min-cell rule; this held-out set's one exact evaluation)" if plan is None else \
        f"{plan.mechanism.name} noise, std {plan.stds[0]:.3g}; cost {plan.cost.describe()}"
    if json_out:
        emit_json({"dry_run": True, "site": site, "evaluated_model": str(model), "signed_by": signer,
                   "tables": [{"name": name, "cells": cells, "mechanism": plan.mechanism.name if plan else "none",
                               "std": plan.stds[0] if plan else 0.0}],
                   "cost": plan.cost.to_dict() if plan else None,
                   "unit": unit.to_dict() if unit is not None else None})
        return
    typer.echo(f"dry run: the evaluation of {model.name} ({'signed by ' + signer if signer else 'unsigned'}) would "
               f"release 1 table from site {site!r}'s held-out rows: {name}, {cells} cells, {noise}; nothing was read, "
               "written or charged")


def _exported(res: Any, cb: Any, site: str, out: Path, delivery: Any, json_out: bool, holdout_plan: dict | None,
              study: bool) -> None:
    """What ``marg export`` says after writing a bundle."""
    d = res.bundle.describe()
    for line in res.notes + _draft_note(cb):  # said after success: a refusal stays one line
        err(line)
    ledger, name = delivery.ledger_dir, delivery.recipient_name
    if json_out:
        emit_json({"out": str(out), "site": site, "n_rows": res.n_rows, "n_tables": d["n_statistics"],
                   "cells": d["cells"],
                   "privacy": d["privacy"], "signed": delivery.signing_key is not None,
                   "sealed_to": name if res.sealed else None,
                   "ledger_entry": None if res.ledger_entry is None else res.ledger_entry["seq"],
                   "ledger": None if res.ledger_entry is None else str(ledger), "suppressed": len(res.suppressed),
                   "digest": d["digest"], "study": res.bundle.header.get("study"), **_holdout_plan_json(holdout_plan)})
        return
    extras = ["signed"] if delivery.signing_key is not None else []
    if res.sealed:
        extras.append(f"sealed to {name}")
    if res.ledger_entry is not None:
        extras.append(f"ledger entry #{res.ledger_entry['seq']} in {ledger}")
    if res.suppressed:
        extras.append(f"{len(res.suppressed)} small cells suppressed")
    typer.echo(
        f"wrote {out}: site {site!r}, {res.n_rows:,} rows, {d['n_statistics']} tables ({d['cells']:,} cells), "
        f"privacy: {_privacy_words(d['privacy'])}" + (f"; {', '.join(extras)}" if extras else "")
    )
    if holdout_plan is not None:
        typer.echo(_holdout_plan_line(holdout_plan))
    if study:
        from .study import study_lines

        for line in study_lines(res.bundle.header.get("study") or {}, out):
            typer.echo(line)


def _draft_note(cb) -> list[str]:
    return ["warning: the codebook is still marked as a draft (data-derived levels/edges); review it before sharing"] \
        if cb.draft else []


def _holdout_plan_json(plan: dict | None) -> dict:
    """``--json``'s ``holdout_plan``: what ``--holdout auto`` chose, round 2 included (what the text line says)."""
    if plan is None:
        return {}
    keep = ("rows", "epsilon", "expected_error", "holdout", "epsilon_tables", "epsilon_evaluate",
            "expected_certificate", "rule")
    return {"holdout_plan": {**{k: plan[k] for k in keep if k in plan},
                             "round_2": {"command": "--evaluate MODEL", "epsilon": plan["epsilon_evaluate"],
                                         "expected_certificate": plan["expected_certificate"]}}}


def _holdout_plan_line(plan: dict) -> str:
    """What ``--holdout auto`` chose, and what the site gives ``--evaluate`` later."""
    return (f"holdout plan (recorded in the bundle): {plan['holdout']:.0%} of the rows held out, tables at "
            f"ε = {plan['epsilon_tables']:.4g}; evaluate later with --evaluate MODEL --epsilon "
            f"{plan['epsilon_evaluate']:.4g} (expected certificate {plan['expected_certificate']:.3f})")


def plan_lines(plan) -> list[str]:
    """The text of ``marg export --dry-run``: what would leave, table by table, and its cost."""
    where = f"sealed to {plan.sealed_to}" if plan.sealed_to else "not sealed"
    lines = [f"dry run: nothing written. {plan.out} would hold site {plan.site!r}'s {len(plan.tables)} tables "
             f"({plan.cells:,} cells, {plan.bundle_bytes:,} bytes), {'signed' if plan.signed else 'unsigned'}, "
             f"{where}.",
             f"rows counted here: {plan.n_rows:,}; "
             + (f"released: {plan.released_n_rows:,}" if plan.released_n_rows is not None
                                                      else "not released (DP: the noisy label table estimates it)")]
    lines.append(f"privacy: {_privacy_words(plan.privacy)}")
    if plan.ledger is None:
        lines.append("cost: not recorded (--no-ledger)")
    else:
        cap = plan.cap.describe_cap() if plan.cap is not None else "no cap set (marg audit init --cap)"
        lines.append(f"cost: {plan.cost.describe()}; ledger {plan.ledger}: spent {plan.spent.describe()}, "
                     f"after this {plan.after.describe()} (composed in zCDP, converted by OpenDP), cap {cap}")
    # lines about what the release will buy the learner (such as the certificate to expect from it) belong here,
    # between the cost and the tables
    lines.append("tables:")
    for t in plan.tables:
        noise = (("exact" + (f", {t.suppressed} small cells suppressed" if t.suppressed else ""))
                 if t.mechanism == "none" else f"{t.mechanism} noise, scale {t.scale:.4g}, std {t.std:.4g} per cell")
        lines.append(f"  {t.name:<40} {' × '.join(map(str, t.shape))} = {t.cells:,} cells, {noise}")
    if plan.exact:
        import numpy as np

        lines.append("the exact counts that would leave (flattened in codebook order of the levels):")
        for t in plan.tables:
            lines.append(f"  {t.name}: " + " ".join(f"{v:g}" for v in np.asarray(t.counts, dtype=float).ravel()))
    return lines


def _privacy_words(p: dict | None) -> str:
    unit = (p or {}).get("unit")
    per = ""
    if isinstance(unit, dict):
        k = unit.get("max_rows_per_unit")
        per = ("; privacy unit: the row (each row a different person)" if unit.get("column") == "row" else
               f"; privacy unit: {unit.get('column')}, at most {k} row{'s' if k != 1 else ''} each")
    if not p or p.get("mechanism", "none") == "none":
        return "exact counts (no differential privacy)" + per
    from marg.marginals.mechanisms import MECHANISMS  # its noise says how to name it

    # a study's round 1 names its parts ("laplace+noisy-top-k"): each part by its noise's own label
    parts = str(p["mechanism"]).split("+")
    names = [MECHANISMS[m].kind.label if m in MECHANISMS else m for m in parts]
    kind = MECHANISMS[parts[0]].kind if len(parts) == 1 and parts[0] in MECHANISMS else None
    if kind is not None and kind.pure:
        return f"{kind.label} noise, ε = {float(p.get('epsilon')):.4g} (pure DP)" + per
    words = (f"{' + '.join(names)} noise, ρ = {float(p.get('rho')):.4g} zCDP (ε = {float(p.get('epsilon')):.3g}, δ = "
             f"{float(p.get('delta')):g})")
    if p.get("pure_epsilon"):
        words += f", of which pure ε = {float(p['pure_epsilon']):.4g}"
    if p.get("target"):
        words += f" for a target of (ε = {float(p['target']['epsilon']):g}, δ = {float(p['target']['delta']):g})"
    if isinstance(p.get("at_cap_delta"), dict):
        c = p["at_cap_delta"]
        words += f"; ε = {float(c['epsilon']):.3g} at the cap's δ = {float(c['delta']):g}"
    return words + per
