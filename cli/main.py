"""The ``marg`` command line: one thin command per step of the site/learner workflow.

Sub-apps per noun (``schema``, ``keys``, ``audit``) and top-level verbs (``export``,
``inspect``, ``learn``, ``predict``, ``evaluate``, ``demo``). Commands parse options, call
the library and print; every command is guarded in one place (:class:`marg.cli.app.MargTyper`).
Library modules are imported inside the commands that use them, so ``marg --help`` starts
without numpy, scipy or highspy (``python -X importtime -m marg.cli.main --help`` shows
what remains).
"""


import gc
import importlib
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from marg.errors import InputError
from marg.marginals.data.codebook import MAX_LEVELS

from .app import app, schema_app
from .common import DataArg, EngineOpt, JsonOpt, OutOpt, SparkMasterOpt, emit_json, err, split_list
from .commands import COMMAND_MODULES, modules_needed
from .export import _privacy_words, export_cmd

# the command modules register their commands as they are imported (only those the command line needs: cli/commands.py)
for _module in modules_needed():
    _sub = getattr(importlib.import_module(f".{_module}", __package__), "app", app)
    if _sub is not app:  # a sub-app of its own (keys, audit, secagg, study), under its name
        app.add_typer(_sub, name=COMMAND_MODULES[_module][0])


@schema_app.command("init")
def schema_init(
    data: DataArg,
    out: OutOpt,
    label: Annotated[Optional[str], typer.Option("--label", help="The label column (not with --from-omop).")] = None,
    max_levels: Annotated[int, typer.Option(help="Numeric columns with more distinct values are binned.")] = 20,
    bins: Annotated[int, typer.Option(help="Quantile bins for numeric columns.")] = 4,
    categorical: Annotated[Optional[str], typer.Option(help="Comma-separated columns to force categorical.")] = None,
    numeric: Annotated[Optional[str], typer.Option(help="Comma-separated columns to force numeric.")] = None,
    exclude: Annotated[Optional[str], typer.Option(help="Comma-separated columns to leave out.")] = None,
    level_cap: Annotated[int, typer.Option("--level-cap", help="Text columns with more levels are left out (export's "
                                                               "--max-levels refuses them).")] = MAX_LEVELS,
    engine: EngineOpt = None,
    spark_master: SparkMasterOpt = None,
    json_out: JsonOpt = False,
    from_omop: Annotated[Optional[Path], typer.Option("--from-omop",
                                                      help="DATA is an OMOP CDM (omop+duckdb://…, "
                                                           "omop+postgresql://…): draft the missing edges and levels "
                                                           "of this codebook of OMOP definitions from the site's own "
                                                           "cohort.")] = None,
) -> None:
    """Draft a codebook from local data. Review it before sharing: levels and edges come from the data.

    Columns that identify rows are left out, each named with its reason: id-like names (id, mrn,
    ssn, name, email, phone, date of birth…), text nearly unique per row, a whole number unique
    per row, more levels than --level-cap. --categorical/--numeric keep a column regardless."""
    from marg.marginals.draft import draft_codebook
    from marg.marginals.sources import open_source

    if from_omop is not None:
        return _schema_init_omop(data, from_omop, out, bins, level_cap, label, json_out)
    if label is None:
        raise InputError("schema init: missing option '--label' (the label column; or --from-omop SPEC for an OMOP "
                         "CDM)")
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
        emit_json({"out": str(out), "features": cb.feature_names, "label": cb.label.name,
                   "classes": list(cb.label.classes),
                   "fingerprint": cb.fingerprint, "draft": True, "privacy_unit": cb.unit_declaration or None,
                   "left_out": [{"column": x.column, "reason": x.reason} for x in left_out]})
    else:
        n_num = sum(1 for f in cb.features if f.kind == "numeric")
        typer.echo(
            f"wrote {out}: {cb.n_features} features ({cb.n_features - n_num} categorical, {n_num} binned numeric), "
            f"label {cb.label.name!r} with classes {', '.join(cb.label.classes)}; fingerprint {cb.fingerprint[:16]}"
        )
    err(DRAFT_WARNING)


DRAFT_WARNING = (
    "WARNING: this codebook is a DRAFT derived from local data. Its levels and bin edges can disclose "
    "patients (rare levels, extreme values). Replace data-derived edges by public cut points and levels by "
    "the public list of categories, then remove \"draft\": true before sharing it with other sites.")


def _schema_init_omop(data: str, spec_path: Path, out: Path, bins: int, level_cap: int, label: Optional[str],
                      json_out: bool) -> None:
    """``marg schema init DATA --from-omop SPEC``: the OMOP definitions' missing edges and levels drafted."""
    import json

    from marg.marginals.omop_draft import draft_omop
    from marg.marginals.sources import open_source

    if label is not None:
        raise InputError("--label goes with a table; with --from-omop the label is the specification's")
    try:
        spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"--from-omop: specification not found: {spec_path}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"--from-omop: cannot read {spec_path}: {exc}") from None
    with open_source(data) as src:
        cb = draft_omop(src, spec, bins=bins, level_cap=level_cap)
    cb.save(out)
    if json_out:
        emit_json({"out": str(out), "features": cb.feature_names, "label": cb.label.name,
                   "classes": list(cb.label.classes), "fingerprint": cb.fingerprint, "draft": True,
                   "privacy_unit": cb.unit_declaration})
    else:
        typer.echo(f"wrote {out}: {cb.n_features} OMOP features, label {cb.label.name!r} with classes "
                   f"{', '.join(cb.label.classes)}; fingerprint {cb.fingerprint[:16]}; privacy unit person_id")
    err(DRAFT_WARNING)


app.command("export")(export_cmd)  # here: `marg --help` lists the commands in this order


@app.command("inspect")
def inspect_cmd(
    bundle: Annotated[Path, typer.Argument(help="A bundle file, or a model file (who signed it, from which bundles).")],
    json_out: JsonOpt = False,
    key: Annotated[Optional[Path], typer.Option("--key",
                                                help="The learner's sealing key, to read a sealed bundle.")] = None,
    trust: Annotated[Optional[Path], typer.Option("--trust", help="Trust store: also verify the signature.")] = None,
    ledger: Annotated[Optional[Path], typer.Option("--ledger",
                                                   help="A site reading its own sealed bundle: the ledger that "
                                                        "recorded it (default: the configured one, else "
                                                        "./marg-ledger).")] = None,
    values: Annotated[bool, typer.Option("--values", help="Also print every released value (the counts as they left, "
                                                          "noise included).")] = False,
) -> None:
    """Say in plain words what a bundle (or a model file) contains.

    A site reads its own sealed bundle without the learner's key: the ledger records the
    sealed file's digest and export kept the plain signed bundle beside it (--keep-copy)."""
    from marg.protocols.bundle import Bundle, read_bundle_bytes
    from marg.protocols.keys import load_seal_key
    from marg.protocols.sealing import is_sealed, open_sealed, sealed_recipient
    from marg.protocols.signing import verify_bundle

    from .common import printable

    def say(text: str) -> None:  # names come from someone else's file: no escape sequence reaches the terminal
        typer.echo(printable(text))

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
        say(f"Model {bundle}: {d['learner']}, {who}"
                   + f"; codebook {str(d['codebook_fingerprint'])[:16]}…; certificate {d['worst_case_error']}")
        for b in d["bundles"]:
            say(f"  learned from site {b['site']!r}, bundle {str(b['digest'])[:16]}…")
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
        say(f"Sealed file {bundle}: this site's release of ledger entry #{own['seq']} ({own['time']}), read from "
                   f"the copy kept beside {ledger} (its digest matches the ledger's record).")
    lab = d["label"] or {}
    say(f"Bundle {bundle} from site {d['site']!r}, created {d['created']} by {d['software']}.")
    say(
        f"Study codebook {d['codebook_fingerprint'][:16]}…: {d['n_features']} features, label {lab.get('name')!r} "
        f"({', '.join(lab.get('classes', []))})."
    )
    say(f"Rows at the site: {d['n_rows'] if d['n_rows'] is not None else 'not released'}.")
    if d.get("source"):
        src = d["source"]
        where = ", ".join(f"{k} {v}" for k, v in src.items() if k not in ("kind", "engine"))
        say(f"Counted from: {src.get('kind')} ({where}).")
    say(f"It releases {d['n_statistics']} statistics, {d['cells']:,} numbers in all:")
    for s in d["statistics"]:
        what = "per-class sum and sum of squares" if s["kind"] == "moments" else "counts"
        noise = "exact" if s["mechanism"] == "none" else f"{s['mechanism']} noise, std {s['noise_std']:.3g}"
        say(f"  {s['name']:<40} {what} over {' × '.join(map(str, s['shape']))} cells, {noise}")
    say(f"Privacy: {_privacy_words(d['privacy'])}.")
    sig_words = f"signed by key {str(d['signer'])[:16]}…" if d["signed"] else "unsigned"
    if verified is not None:
        sig_words += f", verified against the trust store as site {verified!r}"
    elif d["signed"]:
        sig_words += " (not verified: pass --trust DIR)"
    say("Signature: " + sig_words + ".")
    if d["recipient"]:
        say(f"Sealed for: {d['recipient']}.")
    say(f"Digest (sha256): {d['digest']}")
    if values:
        import numpy as np

        say("Released values (flattened in codebook order of the levels):")
        for t in b.tables:
            say(f"  {t.name}: " + " ".join(f"{v:g}" for v in np.asarray(t.counts, dtype=float).ravel()))


BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
"""Set to 1 at start-up unless given: marg's dense algebra is on matrices of a few hundred rows, where
BLAS' worker threads cost more than they compute — on a shared 2-core machine, many times more CPU for
Rényi's eigendecompositions on two threads than on one (BENCHMARKS.md, "Issue 48 (autospeed)").
(Not OMP_NUM_THREADS: Arrow's CSV reader sizes its thread pool from it.)"""


FULL_COLLECTION_EVERY = 100
"""Collections of the middle generation between two full collections in a ``marg`` process (Python's default
is 10): a 3,000-feature export's two full collections rescanned its tens of thousands of live objects for nothing
(BENCHMARKS.md, "Issue 48 (startup, fifth session)")."""


def main() -> None:
    """Console-script entry point (BLAS on one thread unless the environment says otherwise: :data:`BLAS_THREADS`).

    The objects the command-line modules made at import live as long as the process: they are moved to the
    collector's permanent generation (``gc.freeze``) before the command runs, so its collections do not scan
    them again; and when the command ends, so are the command's, so the interpreter's exit skips the full
    collections it would run over every object (a cost at every command that grows with what was imported,
    BENCHMARKS.md, "Issue 48 (startup, fifth session)"). Objects are still freed by their reference counts
    and the exit handlers (``atexit``) still run; only cycles left at exit are not collected, which the exit
    does not need. The command's own long-lived objects (a wide codebook's features, its thousands of tables)
    are scanned by a full collection once per :data:`FULL_COLLECTION_EVERY` younger collections, not ten:
    cycles that die young are collected as before."""
    for var in BLAS_THREADS:
        os.environ.setdefault(var, "1")
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_COLLECTION_EVERY)
    try:
        app(prog_name="marg")
    finally:
        gc.freeze()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
