"""The ``marg`` command line: one thin command per step of the site/learner workflow.

Sub-apps per noun (``schema``, ``keys``, ``audit``) and top-level verbs (``export``,
``inspect``, ``learn``, ``predict``, ``evaluate``, ``demo``). Commands parse options, call
the library and print; every command is guarded in one place (:class:`marg.cli.app.MargTyper`).
Library modules are imported inside the commands that use them, so ``marg --help`` starts
without numpy, scipy or highspy (``python -X importtime -m marg.cli.main --help`` shows
what remains).
"""


import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from marg.errors import InputError
from marg.marginals.codebook import MAX_LEVELS
from marg.marginals.accounting import DEFAULT_DELTA

from . import audit as audit_cli
from . import demo as _demo  # noqa: F401  (registers `marg demo`)
from . import keys as keys_cli
from . import secagg as secagg_cli
from . import learn as _learn  # noqa: F401  (registers learn / request / predict / evaluate)
from . import report as _report  # noqa: F401  (registers `marg report`)
from . import plan as _plan  # noqa: F401  (registers `marg plan`)
from . import schema_check as _schema_check  # noqa: F401  (registers `marg schema check`)
from .app import app, schema_app
from .common import JsonOpt, OutOpt, SchemaOpt, emit_json, err, split_list
from .progress import RowProgress

app.add_typer(keys_cli.app, name="keys")
app.add_typer(audit_cli.app, name="audit")
app.add_typer(secagg_cli.app, name="secagg")


DataArg = Annotated[str, typer.Argument(
    metavar="DATA",
    help="The data: a CSV/TSV/.gz/Parquet file, duckdb://site.db?table=T (relative; duckdb:///abs/site.db absolute; or any file DuckDB reads), "
         "postgresql://host/db?table=T (or ?query=SELECT…), or with --engine spark a path or a Spark table.")]
EngineOpt = Annotated[Optional[str], typer.Option(
    "--engine", help="Who counts a file: local (this process, every core), duckdb, or spark. Databases count their own tables.")]
SparkMasterOpt = Annotated[Optional[str], typer.Option(
    "--spark-master", help="Spark master URL for --engine spark (default: $MARG_SPARK_MASTER or local[*]).")]


@schema_app.command("init")
def schema_init(
    data: DataArg,
    label: Annotated[str, typer.Option("--label", help="The label column.")],
    out: OutOpt,
    max_levels: Annotated[int, typer.Option(help="Numeric columns with more distinct values are binned.")] = 20,
    bins: Annotated[int, typer.Option(help="Quantile bins for numeric columns.")] = 4,
    categorical: Annotated[Optional[str], typer.Option(help="Comma-separated columns to force categorical.")] = None,
    numeric: Annotated[Optional[str], typer.Option(help="Comma-separated columns to force numeric.")] = None,
    exclude: Annotated[Optional[str], typer.Option(help="Comma-separated columns to leave out.")] = None,
    level_cap: Annotated[int, typer.Option("--level-cap", help="Text columns with more levels are left out (export's --max-levels refuses them).")] = MAX_LEVELS,
    engine: EngineOpt = None,
    spark_master: SparkMasterOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Draft a codebook from local data. Review it before sharing: levels and edges come from the data.

    Columns that identify rows are left out, each named with its reason: id-like names (id, mrn,
    ssn, name, email, phone, date of birth…), text nearly unique per row, a whole number unique
    per row, more levels than --level-cap. --categorical/--numeric keep a column regardless."""
    from marg.marginals.draft import draft_codebook
    from marg.marginals.sources import open_source

    left_out: list = []
    with open_source(data, engine=engine, spark_master=spark_master) as src:
        cb = draft_codebook(
            src, label, max_levels=max_levels, bins=bins,
            categorical=split_list(categorical), numeric=split_list(numeric), exclude=split_list(exclude),
            level_cap=level_cap, left_out=left_out,
        )
    cb.save(out)
    for x in left_out:
        err(f"left out {x.column!r}: {x.reason}")
    if cb.privacy_unit is not None:
        err(f"privacy unit: {cb.privacy_unit[0]!r} repeats, so a patient has several rows; DP exports bound each "
            "patient's rows: set \"max_rows_per_unit\" in the codebook's privacy_unit (or give --max-rows-per-unit K)")
    if json_out:
        emit_json({"out": str(out), "features": cb.feature_names, "label": cb.label.name, "classes": list(cb.label.classes),
                   "fingerprint": cb.fingerprint, "draft": True, "privacy_unit": cb.unit_declaration or None,
                   "left_out": [{"column": x.column, "reason": x.reason} for x in left_out]})
    else:
        n_num = sum(1 for f in cb.features if f.kind == "numeric")
        typer.echo(
            f"wrote {out}: {cb.n_features} features ({cb.n_features - n_num} categorical, {n_num} binned numeric), "
            f"label {cb.label.name!r} with classes {', '.join(cb.label.classes)}; fingerprint {cb.fingerprint[:16]}"
        )
    err(
        "WARNING: this codebook is a DRAFT derived from local data. Its levels and bin edges can disclose "
        "patients (rare levels, extreme values). Replace data-derived edges by public cut points and levels by "
        "the public list of categories, then remove \"draft\": true before sharing it with other sites."
    )


@app.command("export")
def export_cmd(
    data: DataArg,
    schema: SchemaOpt,
    site: Annotated[str, typer.Option("--site", help="This site's name.")],
    out: OutOpt,
    stats: Annotated[str, typer.Option(help="auto: what marg learn's default uses (with DP: first-order and every pair while the pair tables hold at most 250,000 cells; exact: first); first: N[y], N[x_i,y]; pairs: plus N[x_i,x_j,y] for --pairs (all if none); pairs-only: the --pairs tables alone (the default with @REQUEST); all: every pair.")] = "auto",
    pairs: Annotated[Optional[str], typer.Option(help='Pairs for --stats pairs: "a:b,c:d", or @REQUEST.json from the learner (round 2: releases those pair tables alone).')] = None,
    epsilon: Annotated[Optional[float], typer.Option("--epsilon", help="Differential privacy: total ε of this export; (ε, δ)-DP with the Gaussian mechanism (default), pure ε-DP with --mechanism laplace.")] = None,
    rho: Annotated[Optional[float], typer.Option("--rho", help="Differential privacy: total ρ of this export (Gaussian, zCDP).")] = None,
    delta: Annotated[float, typer.Option(help="δ of a Gaussian release: --epsilon is met at (ε, δ); --rho is also reported as (ε, δ). The ledger composes releases in zCDP and converts the total at the cap's δ.")] = DEFAULT_DELTA,
    allow_large_delta: Annotated[bool, typer.Option("--allow-large-delta", help="Accept a --delta above 1e-3 (refused otherwise: the guarantee fails outright with probability δ); δ ≥ 1/n is always refused.")] = False,
    mechanism: Annotated[Optional[str], typer.Option(help="gaussian (zCDP; noise grows with the square root of the number of tables; the default for tables) or laplace (pure DP; the default for --evaluate's single small table, where it is less noisy).")] = None,
    allocation: Annotated[str, typer.Option(help="How the DP budget is split across tables: half (first-order tables share half) or least-squares (see the README).")] = "half",
    first_order_share: Annotated[Optional[float], typer.Option(help="Fraction of the DP budget for first-order tables (overrides --allocation).")] = None,
    round_: Annotated[Optional[str], typer.Option("--round", help="The learner's round (ROUND.json or its id): signed into the bundle, so it cannot be replayed in another round.")] = None,
    trust: Annotated[Optional[Path], typer.Option("--trust", help="Trust store holding the learner's key (role learner): the signature of the --round file and of the --evaluate model is checked against it.")] = None,
    holdout: Annotated[Optional[str], typer.Option(help="Leave this fraction of the rows out of every table, for a later --evaluate (chosen by a keyed hash of each row, the key kept in the ledger folder; the same from every source); auto: the fraction and the ε split of `marg plan` for --plan-rows (--epsilon is then the site's total, tables + evaluation).")] = None,
    holdout_id: Annotated[Optional[str], typer.Option("--holdout-id", help="With --holdout: split by this id column instead of each row's content (rows sharing an id stay together).")] = None,
    privacy_unit: Annotated[Optional[str], typer.Option("--privacy-unit", help="The column naming each patient (the unit DP protects; default the codebook's privacy_unit), or 'row' when every row is a different person. Required under DP when an id column repeats.")] = None,
    max_rows_per_unit: Annotated[Optional[int], typer.Option("--max-rows-per-unit", help="With --privacy-unit: count at most K rows of each patient (the K of smallest keyed priority, the same from every source); every table's sensitivity, so its noise, scales with K.")] = None,
    plan_rows: Annotated[Optional[str], typer.Option("--plan-rows", help="With --holdout auto, or round 1 of the DP default (select, then measure): the rows per site as stated publicly (one count with --plan-sites, or one per site); the plan never reads the data.")] = None,
    plan_sites: Annotated[Optional[int], typer.Option("--plan-sites", help="With --plan-rows: the number of sites when it gives one count.")] = None,
    expected_error: Annotated[float, typer.Option("--expected-error", help="With --holdout auto: the error rate the model is expected to reach.")] = 0.2,
    evaluate: Annotated[Optional[Path], typer.Option("--evaluate", help="Release instead MODEL's error count (--evaluate-content) on the rows held out of the bundles it learned from here (for marg certify); the model is verified first (--trust, --schema).")] = None,
    allow_unsigned: Annotated[bool, typer.Option("--allow-unsigned", help="With --evaluate: accept an unsigned model (for experiments: nobody vouches for it).")] = False,
    evaluate_content: Annotated[str, typer.Option("--evaluate-content", help="With --evaluate: errors (the error and correct counts, 2 cells: what the certificate needs), classes (the same per true class, for class-wise bounds) or confusion (the K×K matrix).")] = "errors",
    site_certificate: Annotated[bool, typer.Option("--site-certificate", help="With --evaluate: ask marg certify for this site's own certificate (its held-out population) beside the pooled one.")] = False,
    min_cell: Annotated[int, typer.Option("--min-cell", help="Exact exports: smallest allowed nonzero cell (1 disables).")] = 3,
    min_cell_policy: Annotated[str, typer.Option(help="Exact exports: refuse the export, or suppress (zero) small cells.")] = "refuse",
    key: Annotated[Optional[Path], typer.Option("--key", help="The site's signing key (SITE.sign.key) to sign the bundle and ledger entry.")] = None,
    passphrase_file: Annotated[Optional[Path], typer.Option(help="File holding the signing key's passphrase.")] = None,
    to: Annotated[Optional[Path], typer.Option("--to", help="The learner's sealing public key (LEARNER.seal.pub): encrypt the bundle to it.")] = None,
    ledger: Annotated[Optional[Path], typer.Option("--ledger", help="The site's ledger folder (default: the one `marg audit init` configured, else ./marg-ledger).")] = None,
    no_ledger: Annotated[bool, typer.Option("--no-ledger", help="Do not record this export (refused once the site is configured).")] = False,
    engine: EngineOpt = None,
    spark_master: SparkMasterOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show exactly what would leave (tables, cells, noise, cost against the cap, exact counts) and write nothing.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing --out (refused otherwise, before anything is counted or charged).")] = False,
    keep_copy: Annotated[bool, typer.Option("--keep-copy/--no-keep-copy", help="Keep the plain signed bundle of a sealed export beside the ledger, so `marg inspect` can show this site what it sent.")] = True,
    max_levels: Annotated[int, typer.Option("--max-levels", help="Level cap: a feature with more levels is refused (it identifies patients).")] = MAX_LEVELS,
    rounds: Annotated[Optional[int], typer.Option("--rounds", help="Under DP with --epsilon: 2 (the default) = select, then measure — --epsilon is this site's TOTAL for the study; round 1 releases the label table and a private selection, marg request decides round 2 (--request). 1: one release of the --stats tables.")] = None,
    request: Annotated[Optional[Path], typer.Option("--request", help="Round 2 of select-then-measure: the learner's signed request (marg request); measures only what it asks with the rest of this site's study total (--trust: the learner's key).")] = None,
    allow_draft: Annotated[bool, typer.Option("--allow-draft", help="Release under a codebook still marked draft (refused otherwise: run `marg schema check` at every site first).")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Compute this site's marginal tables, protect them, sign, record in the ledger and write a bundle."""
    from marg.marginals.codebook import Codebook
    from marg.marginals.request import read_request
    from marg.marginals.tables import parse_pairs
    from marg.protocols.export import check_out, export_site
    from marg.protocols.keys import load_seal_public_key, load_signing_key, read_passphrase_file

    cb = Codebook.load(schema)
    cb.check_level_cap(max_levels)
    if cb.draft and not (dry_run or allow_draft):
        from marg.errors import RefusedError

        raise RefusedError(f"{schema} is still a draft (levels and edges from one site's data): another site's data "
                           f"may hold levels it lacks, refused there after this site spent; review it, run `marg schema "
                           f"check DATA --schema {schema}` at every site, then remove \"draft\": true "
                           "(--allow-draft releases anyway)")
    pair_list = None
    if pairs:
        if pairs.startswith("@"):
            req = read_request(pairs[1:], fingerprint=cb.fingerprint)
            pair_list = parse_pairs(cb, req.spec)
            if stats in ("first", "auto"):
                stats = "pairs-only"  # round 2: the first-order tables came in round 1
        else:
            pair_list = parse_pairs(cb, pairs)
    from marg.protocols.site import site_ledger

    configured, cfg = site_ledger(ledger)  # a configured site: its key and ledger are the defaults (and the only ones accepted)
    if key is None and cfg is not None:
        key = cfg.sign_key
    ledger = None if no_ledger else configured
    passphrase = read_passphrase_file(passphrase_file) if passphrase_file else None
    sk = load_signing_key(key, passphrase) if key else None
    recipient = load_seal_public_key(to) if to else None
    recipient_name = to.name.split(".")[0] if to else None
    round_id = None
    if round_ is not None:
        from marg.protocols.rounds import read_round

        round_id = read_round(round_, cb.fingerprint, trust)
    holdout_f, holdout_plan, plan_record = None, None, None
    if holdout is not None and holdout.strip().lower() == "auto":
        from .plan import parse_rows, resolve_plan

        if epsilon is None or rho is not None:
            raise InputError("--holdout auto splits a total ε between the tables and the evaluation: give --epsilon")
        if plan_rows is None:
            raise InputError("--holdout auto needs --plan-rows (the rows per site as stated publicly; the data's own count is private)")
        holdout_plan = resolve_plan(parse_rows(plan_rows), plan_sites, epsilon, expected_error, cb.n_features, None, None, delta)
        holdout_f, epsilon = holdout_plan["holdout"], holdout_plan["epsilon_tables"]
        plan_record = {k: holdout_plan[k] for k in ("rows", "epsilon", "expected_error", "holdout", "epsilon_tables",
                                                    "epsilon_evaluate", "expected_certificate", "rule")}
    elif holdout is not None:
        from .plan import parse_auto

        holdout_f = parse_auto(holdout, "--holdout")
    from .study import study_round

    study = study_round(cb, rounds=rounds, request=request, trust=trust, epsilon=epsilon, rho=rho, delta=delta,
                        mechanism=mechanism, stats=stats, pairs=pairs, holdout=holdout, evaluate=evaluate, round_=round_,
                        first_share=first_order_share, allocation=allocation, no_ledger=no_ledger, dry_run=dry_run,
                        plan_rows=plan_rows, plan_sites=plan_sites)
    if study is not None:
        epsilon = None  # the round spends its own share of the site's total
    prog = RowProgress(f"export {site}", quiet=json_out)
    with prog:
        if evaluate is None and allow_unsigned:
            raise InputError("--allow-unsigned accepts an unsigned model of --evaluate MODEL; this export has none")
        if dry_run:
            if evaluate is not None:
                raise InputError("--dry-run shows a table release; for --evaluate see `marg inspect` of the written release")
            from marg.protocols.export_plan import plan_export

            plan = plan_export(data, cb, site, out, recipient_name=recipient_name, stats=stats, pairs=pair_list,
                               epsilon=epsilon, rho=rho, delta=delta, mechanism=mechanism or "gaussian", allocation=allocation,
                               first_share=first_order_share, holdout=holdout_f, holdout_id=holdout_id, round_id=round_id,
                               min_cell=min_cell, min_cell_policy=min_cell_policy, signing_key=sk, recipient=recipient,
                               ledger_dir=None if no_ledger else ledger, progress=prog, engine=engine,
                               spark_master=spark_master, max_levels=max_levels, holdout_plan=plan_record, study=study,
                               privacy_unit=privacy_unit, max_rows_per_unit=max_rows_per_unit,
                               allow_large_delta=allow_large_delta)
            prog.done()
            if json_out:
                emit_json({**plan.to_dict(), **_holdout_plan_json(holdout_plan)})
                return
            for line in plan.notes + _draft_note(cb):
                err(line)
            for line in plan_lines(plan):
                typer.echo(line)
            if study is not None:
                from .study import study_lines

                for line in study_lines(study.record or {}, out, dry_run=True):
                    typer.echo(line)
            if holdout_plan is not None:
                typer.echo(_holdout_plan_line(holdout_plan))
            return
        if evaluate is not None:
            from marg.api import load_verified_model
            from marg.protocols.evaluation import evaluate_site

            if no_ledger:
                raise InputError("--evaluate needs the site's ledger (it remembers the held-out rows and records the release)")
            if holdout is not None or holdout_id is not None or pairs:
                raise InputError("--evaluate releases counts on held-out rows: --holdout, --holdout-id and --pairs do not apply")
            check_out(out, force)
            # read once: the bytes verified are the bytes used and named in the release
            m, signer, digest = load_verified_model(evaluate, schema, trust, allow_unsigned)
            res = evaluate_site(data, m, digest, site, out, epsilon=epsilon, rho=rho, delta=delta,
                                mechanism=mechanism or "laplace", min_cell=min_cell, min_cell_policy=min_cell_policy, signing_key=sk,
                                recipient=recipient, recipient_name=recipient_name, ledger_dir=ledger, progress=prog,
                                signer=signer, engine=engine, spark_master=spark_master, content=evaluate_content,
                                site_certificate=site_certificate, privacy_unit=privacy_unit,
                                max_rows_per_unit=max_rows_per_unit)
            prog.done()
            split = res.bundle.header["evaluation"]["split"]
            if json_out:
                emit_json({"out": str(out), "site": site, "evaluated_model": str(evaluate), "signed_by": signer,
                           "n_rows": res.n_rows, "training_bundles": list(split["bundles"]),
                           "privacy": res.bundle.describe()["privacy"], "digest": res.bundle.digest(),
                           "evaluations_on_split": res.bundle.header["evaluations_on_split"]})
                return
            what = {"errors": "the error count", "classes": "the error counts by true class"}.get(evaluate_content,
                                                                                                  "the confusion matrix")
            typer.echo(f"wrote {out}: site {site!r}, {what} of {evaluate.name} "
                       f"({'signed by ' + signer if signer else 'unsigned'}) on {res.n_rows:,} rows held out of its "
                       f"{len(split['bundles'])} training bundle(s) from this site, "
                       f"privacy: {_privacy_words(res.bundle.describe()['privacy'])}")
            return
        res = export_site(
            data, cb, site, out, stats=stats, pairs=pair_list, epsilon=epsilon, rho=rho, delta=delta, mechanism=mechanism or "gaussian", allocation=allocation,
            first_share=first_order_share, holdout=holdout_f, holdout_id=holdout_id, round_id=round_id, min_cell=min_cell,
            min_cell_policy=min_cell_policy, signing_key=sk, recipient=recipient, recipient_name=recipient_name,
            ledger_dir=None if no_ledger else ledger, progress=prog, engine=engine, spark_master=spark_master,
            force=force, keep_copy=keep_copy, max_levels=max_levels,
            holdout_plan=plan_record, study=study, privacy_unit=privacy_unit, max_rows_per_unit=max_rows_per_unit,
            allow_large_delta=allow_large_delta,
        )
        prog.done()
        d = res.bundle.describe()
        for line in res.notes + _draft_note(cb):  # said after success: a refusal stays one line
            err(line)
        if json_out:
            emit_json({"out": str(out), "site": site, "n_rows": res.n_rows, "n_tables": d["n_statistics"], "cells": d["cells"],
                       "privacy": d["privacy"], "signed": sk is not None, "sealed_to": recipient_name if res.sealed else None,
                       "ledger_entry": None if res.ledger_entry is None else res.ledger_entry["seq"],
                       "ledger": None if res.ledger_entry is None else str(ledger), "suppressed": len(res.suppressed),
                       "digest": d["digest"], "study": res.bundle.header.get("study"), **_holdout_plan_json(holdout_plan)})
            return
        extras = []
        if sk is not None:
            extras.append("signed")
        if res.sealed:
            extras.append(f"sealed to {recipient_name}")
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
        if study is not None:
            from .study import study_lines

            for line in study_lines(res.bundle.header.get("study") or {}, out):
                typer.echo(line)
        if round_ is not None and trust is None:  # said after success: a refusal stays one line
            err(f"warning: the round file's signature was not checked (give --trust with the learner's key): "
                f"anyone could have written {round_}")


def _draft_note(cb) -> list[str]:
    return ["warning: the codebook is still marked as a draft (data-derived levels/edges); review it before sharing"] \
        if cb.draft else []


def _holdout_plan_json(plan: dict | None) -> dict:
    """``--json``'s ``holdout_plan``: what ``--holdout auto`` chose, round 2 included (what the text line says)."""
    if plan is None:
        return {}
    keep = ("rows", "epsilon", "expected_error", "holdout", "epsilon_tables", "epsilon_evaluate", "expected_certificate", "rule")
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
             f"({plan.cells:,} cells, {plan.bundle_bytes:,} bytes), {'signed' if plan.signed else 'unsigned'}, {where}.",
             f"rows counted here: {plan.n_rows:,}; " + (f"released: {plan.released_n_rows:,}" if plan.released_n_rows is not None
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
        noise = ("exact" + (f", {t.suppressed} small cells suppressed" if t.suppressed else "")) if t.mechanism == "none" else \
            f"{t.mechanism} noise, scale {t.scale:.4g}, std {t.std:.4g} per cell"
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
    if p.get("mechanism") == "laplace":
        return f"Laplace noise, ε = {float(p.get('epsilon')):.4g} (pure DP)" + per
    words = f"Gaussian noise, ρ = {float(p.get('rho')):.4g} zCDP (ε = {float(p.get('epsilon')):.3g}, δ = {float(p.get('delta')):g})"
    if p.get("target"):
        words += f" for a target of (ε = {float(p['target']['epsilon']):g}, δ = {float(p['target']['delta']):g})"
    if isinstance(p.get("at_cap_delta"), dict):
        c = p["at_cap_delta"]
        words += f"; ε = {float(c['epsilon']):.3g} at the cap's δ = {float(c['delta']):g}"
    return words + per


@app.command("inspect")
def inspect_cmd(
    bundle: Annotated[Path, typer.Argument(help="A bundle file, or a model file (who signed it, from which bundles).")],
    json_out: JsonOpt = False,
    key: Annotated[Optional[Path], typer.Option("--key", help="The learner's sealing key, to read a sealed bundle.")] = None,
    trust: Annotated[Optional[Path], typer.Option("--trust", help="Trust store: also verify the signature.")] = None,
    ledger: Annotated[Optional[Path], typer.Option("--ledger", help="A site reading its own sealed bundle: the ledger that recorded it (default: the configured one, else ./marg-ledger).")] = None,
    values: Annotated[bool, typer.Option("--values", help="Also print every released value (the counts as they left, noise included).")] = False,
) -> None:
    """Say in plain words what a bundle (or a model file) contains.

    A site reads its own sealed bundle without the learner's key: the ledger records the
    sealed file's digest and export kept the plain signed bundle beside it (--keep-copy)."""
    from marg.protocols.bundle import Bundle, read_bundle_bytes
    from marg.protocols.keys import load_seal_key
    from marg.protocols.sealing import is_sealed, open_sealed, sealed_recipient
    from marg.protocols.signing import verify_bundle

    if bundle.is_file() and bundle.read_bytes()[:1] == b"{":
        from marg.protocols.model_signing import describe_model_file, verify_model_file

        d = describe_model_file(bundle)
        d["verified_signer"] = verify_model_file(bundle, trust) if trust is not None else None
        if json_out:
            emit_json(d)
            return
        # the record's "signer" is not covered by the signature: once verified, name the key as the
        # trust store names it; unverified, say so (as for a bundle)
        verified = d["verified_signer"]
        if not d["signed"]:
            who = "unsigned"
        elif verified:
            claimed = "" if d["signer"] == verified else f", the file claims {d['signer']!r}"
            who = f"signed by {verified!r} (key {str(d['key_id'])[:12]}…{claimed}), signature verified"
        else:
            who = f"signed by {d['signer']!r} (key {str(d['key_id'])[:12]}…), not verified: pass --trust DIR"
        typer.echo(f"Model {bundle}: {d['learner']}, {who}"
                   + f"; codebook {str(d['codebook_fingerprint'])[:16]}…; certificate {d['worst_case_error']}")
        for b in d["bundles"]:
            typer.echo(f"  learned from site {b['site']!r}, bundle {str(b['digest'])[:16]}…")
        return
    raw = read_bundle_bytes(bundle)
    own = None
    if is_sealed(raw):
        if key is not None:
            b = Bundle.from_bytes(open_sealed(raw, load_seal_key(key), name=str(bundle)), source=str(bundle))
        else:
            from marg.protocols.site import site_ledger
            from marg.protocols.site_copies import open_own

            if ledger is None:
                ledger = site_ledger()[0]
            try:
                b, own = open_own(raw, ledger, name=str(bundle))
            except InputError as exc:
                raise InputError(f"{exc} (sealed to key {sealed_recipient(raw)[:16]}…; the learner reads it with "
                                 "--key LEARNER.seal.key)") from None
    else:
        b = Bundle.from_bytes(raw, source=str(bundle))
    verified = verify_bundle(b, trust, source=str(bundle)) if trust is not None else None
    d = b.describe()
    if json_out:
        extra = {"values": {t.name: t.counts for t in b.tables}} if values else {}
        emit_json({**d, "verified_site": verified, "site_copy": None if own is None else {"ledger_entry": own["seq"],
                   "ledger": str(ledger)}, **extra})
        return
    if own is not None:
        typer.echo(f"Sealed file {bundle}: this site's release of ledger entry #{own['seq']} ({own['time']}), read from "
                   f"the copy kept beside {ledger} (its digest matches the ledger's record).")
    lab = d["label"] or {}
    typer.echo(f"Bundle {bundle} from site {d['site']!r}, created {d['created']} by {d['software']}.")
    typer.echo(
        f"Study codebook {d['codebook_fingerprint'][:16]}…: {d['n_features']} features, label {lab.get('name')!r} "
        f"({', '.join(lab.get('classes', []))})."
    )
    typer.echo(f"Rows at the site: {d['n_rows'] if d['n_rows'] is not None else 'not released'}.")
    if d.get("source"):
        src = d["source"]
        where = ", ".join(f"{k} {v}" for k, v in src.items() if k not in ("kind", "engine"))
        typer.echo(f"Counted from: {src.get('kind')} ({where}).")
    typer.echo(f"It releases {d['n_statistics']} statistics, {d['cells']:,} numbers in all:")
    for s in d["statistics"]:
        what = "per-class sum and sum of squares" if s["kind"] == "moments" else "counts"
        noise = "exact" if s["mechanism"] == "none" else f"{s['mechanism']} noise, std {s['noise_std']:.3g}"
        typer.echo(f"  {s['name']:<40} {what} over {' × '.join(map(str, s['shape']))} cells, {noise}")
    typer.echo(f"Privacy: {_privacy_words(d['privacy'])}.")
    sig_words = f"signed by key {str(d['signer'])[:16]}…" if d["signed"] else "unsigned"
    if verified is not None:
        sig_words += f", verified against the trust store as site {verified!r}"
    elif d["signed"]:
        sig_words += " (not verified: pass --trust DIR)"
    typer.echo("Signature: " + sig_words + ".")
    if d["recipient"]:
        typer.echo(f"Sealed for: {d['recipient']}.")
    typer.echo(f"Digest (sha256): {d['digest']}")
    if values:
        import numpy as np

        typer.echo("Released values (flattened in codebook order of the levels):")
        for t in b.tables:
            typer.echo(f"  {t.name}: " + " ".join(f"{v:g}" for v in np.asarray(t.counts, dtype=float).ravel()))


def main() -> None:
    """Console-script entry point."""
    app(prog_name="marg")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
