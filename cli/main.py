"""The ``marg`` command line: one thin command per step of the site/learner workflow.

Sub-apps per noun (``schema``, ``keys``, ``audit``) and top-level verbs (``export``,
``inspect``, ``learn``, ``predict``, ``evaluate``, ``demo``). Commands parse options, call
the library and print; every command is guarded in one place (:class:`marg.cli.app.MargTyper`).
Library modules are imported inside the commands that use them, so ``marg --help`` starts
without numpy, scipy or highspy (``python -X importtime -m marg.cli.main --help`` shows
what remains).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from marg.errors import InputError

from . import audit as audit_cli
from . import demo as _demo  # noqa: F401  (registers `marg demo`)
from . import keys as keys_cli
from . import secagg as secagg_cli
from . import learn as _learn  # noqa: F401  (registers learn / request / predict / evaluate)
from . import report as _report  # noqa: F401  (registers `marg report`)
from .app import app, schema_app
from .common import JsonOpt, OutOpt, Progress, SchemaOpt, emit_json, err, split_list

app.add_typer(keys_cli.app, name="keys")
app.add_typer(audit_cli.app, name="audit")
app.add_typer(secagg_cli.app, name="secagg")


DataArg = Annotated[str, typer.Argument(
    metavar="DATA",
    help="The data: a CSV/TSV/.gz/Parquet file, duckdb:///site.db?table=T (or any file DuckDB reads), "
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
    exclude: Annotated[Optional[str], typer.Option(help="Comma-separated columns to leave out (identifiers).")] = None,
    engine: EngineOpt = None,
    spark_master: SparkMasterOpt = None,
) -> None:
    """Draft a codebook from local data. Review it before sharing: levels and edges come from the data."""
    from marg.marginals.draft import draft_codebook
    from marg.marginals.sources import open_source

    with open_source(data, engine=engine, spark_master=spark_master) as src:
        cb = draft_codebook(
            src, label, max_levels=max_levels, bins=bins,
            categorical=split_list(categorical), numeric=split_list(numeric), exclude=split_list(exclude),
        )
    cb.save(out)
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
    delta: Annotated[float, typer.Option(help="δ of a Gaussian release: --epsilon is met at (ε, δ); --rho is also reported as (ε, δ).")] = 1e-6,
    mechanism: Annotated[Optional[str], typer.Option(help="gaussian (zCDP; noise grows with the square root of the number of tables; the default for tables) or laplace (pure DP; the default for --evaluate's single small table, where it is less noisy).")] = None,
    allocation: Annotated[str, typer.Option(help="How the DP budget is split across tables: half (first-order tables share half) or least-squares (see the README).")] = "half",
    first_order_share: Annotated[Optional[float], typer.Option(help="Fraction of the DP budget for first-order tables (overrides --allocation).")] = None,
    round_: Annotated[Optional[str], typer.Option("--round", help="The learner's round (ROUND.json or its id): signed into the bundle, so it cannot be replayed in another round.")] = None,
    trust: Annotated[Optional[Path], typer.Option("--trust", help="Trust store holding the learner's key (role learner): the --round file's signature is checked against it.")] = None,
    holdout: Annotated[Optional[float], typer.Option(help="Leave this fraction of the rows out of every table, for a later --evaluate (a data file and a ledger needed).")] = None,
    evaluate: Annotated[Optional[Path], typer.Option("--evaluate", help="Release instead MODEL's confusion matrix on the rows held out by this site's --holdout export (for marg certify).")] = None,
    min_cell: Annotated[int, typer.Option("--min-cell", help="Exact exports: smallest allowed nonzero cell (1 disables).")] = 3,
    min_cell_policy: Annotated[str, typer.Option(help="Exact exports: refuse the export, or suppress (zero) small cells.")] = "refuse",
    key: Annotated[Optional[Path], typer.Option("--key", help="The site's signing key (SITE.sign.key) to sign the bundle and ledger entry.")] = None,
    passphrase_file: Annotated[Optional[Path], typer.Option(help="File holding the signing key's passphrase.")] = None,
    to: Annotated[Optional[Path], typer.Option("--to", help="The learner's sealing public key (LEARNER.seal.pub): encrypt the bundle to it.")] = None,
    ledger: Annotated[Optional[Path], typer.Option("--ledger", help="The site's ledger folder (default: the one `marg audit init` configured, else ./marg-ledger).")] = None,
    no_ledger: Annotated[bool, typer.Option("--no-ledger", help="Do not record this export (refused once the site is configured).")] = False,
    engine: EngineOpt = None,
    spark_master: SparkMasterOpt = None,
) -> None:
    """Compute this site's marginal tables, protect them, sign, record in the ledger and write a bundle."""
    from marg.marginals.codebook import Codebook
    from marg.marginals.request import read_request
    from marg.marginals.tables import parse_pairs
    from marg.protocols.export import export_site
    from marg.protocols.keys import load_seal_public_key, load_signing_key, read_passphrase_file

    cb = Codebook.load(schema)
    if cb.draft:
        err("warning: the codebook is still marked as a draft (data-derived levels/edges); review it before sharing")
    pair_list = None
    if pairs:
        if pairs.startswith("@"):
            req = read_request(pairs[1:], fingerprint=cb.fingerprint)
            pair_list = parse_pairs(cb, req.spec)
            if stats in ("first", "auto"):
                stats = "pairs-only"  # round 2: the first-order tables came in round 1
        else:
            pair_list = parse_pairs(cb, pairs)
    from marg.protocols.site import SiteConfig

    cfg = SiteConfig.load()  # a configured site: its key and ledger are the defaults (and the only ones accepted)
    if key is None and cfg is not None:
        key = cfg.sign_key
    if ledger is None and not no_ledger:
        ledger = cfg.ledger if cfg is not None else Path("marg-ledger")
    passphrase = read_passphrase_file(passphrase_file) if passphrase_file else None
    sk = load_signing_key(key, passphrase) if key else None
    recipient = load_seal_public_key(to) if to else None
    recipient_name = to.name.split(".")[0] if to else None
    round_id = None
    if round_ is not None:
        from marg.protocols.rounds import read_round

        round_id = read_round(round_, cb.fingerprint, trust)
    prog = Progress(f"export {site}")
    if evaluate is not None:
        from marg.api import load_model
        from marg.errors import InputError
        from marg.protocols.evaluation import evaluate_site, model_digest

        if no_ledger:
            raise InputError("--evaluate needs the site's ledger (it remembers the held-out rows and records the release)")
        if holdout is not None or pairs:
            raise InputError("--evaluate releases a confusion matrix: --holdout and --pairs do not apply")
        import hashlib

        raw = evaluate.read_bytes() if evaluate.is_file() else None  # read once: the digest names the bytes used
        m = load_model(evaluate, schema, data=raw)
        res = evaluate_site(data, m, hashlib.sha256(raw).hexdigest() if raw is not None else model_digest(evaluate), site, out, epsilon=epsilon, rho=rho, delta=delta,
                            mechanism=mechanism or "laplace", min_cell=min_cell, min_cell_policy=min_cell_policy, signing_key=sk,
                            recipient=recipient, recipient_name=recipient_name, ledger_dir=ledger, progress=prog)
        prog.done()
        typer.echo(f"wrote {out}: site {site!r}, the confusion matrix of {evaluate.name} on {res.n_rows:,} held-out rows, "
                   f"privacy: {_privacy_words(res.bundle.describe()['privacy'])}")
        return
    res = export_site(
        data, cb, site, out, stats=stats, pairs=pair_list, epsilon=epsilon, rho=rho, delta=delta, mechanism=mechanism or "gaussian", allocation=allocation,
        first_share=first_order_share, holdout=holdout, round_id=round_id, min_cell=min_cell, min_cell_policy=min_cell_policy,
        signing_key=sk, recipient=recipient, recipient_name=recipient_name,
        ledger_dir=None if no_ledger else ledger, progress=prog, engine=engine, spark_master=spark_master,
    )
    prog.done()
    d = res.bundle.describe()
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
    if round_ is not None and trust is None:  # said after success: a refusal stays one line
        err(f"warning: the round file's signature was not checked (give --trust with the learner's key): "
            f"anyone could have written {round_}")


def _privacy_words(p: dict | None) -> str:
    if not p or p.get("mechanism", "none") == "none":
        return "exact counts (no differential privacy)"
    if p.get("mechanism") == "laplace":
        return f"Laplace noise, ε = {float(p.get('epsilon')):.4g} (pure DP)"
    words = f"Gaussian noise, ρ = {float(p.get('rho')):.4g} zCDP (ε = {float(p.get('epsilon')):.3g}, δ = {float(p.get('delta')):g})"
    if p.get("target"):
        words += f" for a target of (ε = {float(p['target']['epsilon']):g}, δ = {float(p['target']['delta']):g})"
    return words


@app.command("inspect")
def inspect_cmd(
    bundle: Annotated[Path, typer.Argument(help="A bundle file, or a model file (who signed it, from which bundles).")],
    json_out: JsonOpt = False,
    key: Annotated[Optional[Path], typer.Option("--key", help="The learner's sealing key, to read a sealed bundle.")] = None,
    trust: Annotated[Optional[Path], typer.Option("--trust", help="Trust store: also verify the signature.")] = None,
) -> None:
    """Say in plain words what a bundle (or a model file) contains."""
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
    if is_sealed(raw):
        if key is None:
            raise InputError(
                f"{bundle} is sealed to key {sealed_recipient(raw)[:16]}…; pass --key LEARNER.seal.key to read it"
            )
        raw = open_sealed(raw, load_seal_key(key), name=str(bundle))
    b = Bundle.from_bytes(raw, source=str(bundle))
    verified = verify_bundle(b, trust, source=str(bundle)) if trust is not None else None
    d = b.describe()
    if json_out:
        emit_json({**d, "verified_site": verified})
        return
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


def main() -> None:
    """Console-script entry point."""
    app(prog_name="marg")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
