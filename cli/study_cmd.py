"""``marg study``: a study declared once (``init``), run by each party (``run``), watched by anyone (``status``).

Thin commands over :mod:`marg.study_runner` (the drop box's state machine), :mod:`marg.study_site`
and :mod:`marg.study_learner`: they parse, call the library and print.
"""

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from .app import sub_app
from .common import JsonOpt, OutOpt, SchemaOpt, emit_json, err

app = sub_app("A DP study declared once and run by one command per party: init, run, status.")

StudyArg = Annotated[Path, typer.Argument(metavar="STUDY", help="The signed study file (marg study init).")]


@app.command("init")
def init_cmd(
    schema: SchemaOpt,
    roster: Annotated[Path, typer.Option("--roster", help="Folder of NAME.sign.pub and NAME.seal.pub: every site's "
                                                          "and the learner's.")],
    epsilon: Annotated[float, typer.Option("--epsilon", help="Each site's total ε for the whole study.")],
    delta: Annotated[float, typer.Option("--delta", help="Each site's total δ for the whole study.")],
    drop: Annotated[str, typer.Option("--drop", help="The drop box: a folder, sftp://user@host/path or "
                                                     "s3://bucket/prefix.")],
    sign_key: Annotated[Path, typer.Option("--sign-key",
                                           help="The learner's signing key (LEARNER.sign.key): signs the study file.")],
    out: OutOpt,
    threshold: Annotated[Optional[int], typer.Option("--threshold", help="Secure aggregation's t (default: more than "
                                                                         "half the sites).")] = None,
    noise: Annotated[Optional[str], typer.Option("--noise", help="shared (default with 3+ sites) or per-site.")] = None,
    rows: Annotated[Optional[str], typer.Option("--rows",
                                                help="Rows per site as stated publicly, comma-separated (the budget "
                                                     "rule reads them; default 300 each).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Learner: declare the study (codebook, roster keys, each site's budget, threshold, drop box), signed."""
    from marg.errors import InputError
    from marg.study_runner import init_study

    try:
        stated = [int(x) for x in rows.split(",")] if rows else None
    except ValueError:
        raise InputError(f"--rows must be whole numbers separated by commas, got {rows!r}") from None
    doc = init_study(schema, roster, epsilon, delta, drop, sign_key, out, threshold, noise, stated)
    summary = {"out": str(out), "study_id": doc["study_id"], "sites": [s["name"] for s in doc["sites"]],
               "learner": doc["learner"]["name"], "threshold": doc["threshold"], "noise": doc["noise"],
               "holdout": doc["holdout"], "rho": doc["plan"]["rho"], "drop": doc["drop"]}
    plan = doc["plan"]
    if plan.get("selection") == "private":
        err(f"note: for this many features against the budget, round 1 is each site's private top-{plan.get('k')} "
            "(OpenDP's noisy top-k, its cost not growing with the features) and the label table through the secure sum")
    if doc["noise"] == "per-site":
        err(f"note: noise per-site: each site adds its own full noise to its tables before the secure sum (the sum "
            f"carries {len(summary['sites'])} sites' noise, as the per-site path does); shared noise needs 3 sites or "
            "more")
    if json_out:
        emit_json(summary)
        return
    n = len(summary["sites"])
    typer.echo(f"wrote {out}: study {doc['study_id']} of {n} sites ({', '.join(summary['sites'])}), learner "
               f"{summary['learner']!r}, ε = {doc['epsilon']:g}, δ = {doc['delta']:g} per site, threshold "
               f"{doc['threshold']}, noise {doc['noise']}, {doc['holdout']:.0%} held out; drop box {doc['drop']}")
    typer.echo("next: the learner runs  marg study run STUDY --learner ; each site  marg study run STUDY --site NAME "
               "--data DATA")


def _said(res: dict[str, Any]) -> None:
    for d in res["did"]:
        typer.echo(d["did"] + (f" (spent ρ = {d['spent']['rho']:.4g})" if "spent" in d else ""))
    if not res["did"]:
        typer.echo("nothing to do now")
    for note in res.get("notes", []):
        typer.echo(f"note: {note}", err=True)
    if "spent_rho" in res:
        typer.echo(f"spent in this study: ρ = {res['spent_rho']:.4g} of {res['total_rho']:.4g} "
                   f"(ε = {res['epsilon']:g}, δ = {res['delta']:g})")
    if res.get("model"):
        typer.echo(f"model: {res['model']}")
    typer.echo(f"next: {res['next']}")


@app.command("run")
def run_cmd(
    study: StudyArg,
    site: Annotated[Optional[str], typer.Option("--site", help="This site's name (with --data).")] = None,
    data: Annotated[Optional[str], typer.Option("--data", help="This site's data (as for marg export).")] = None,
    learner: Annotated[bool, typer.Option("--learner", help="Run the learner's part.")] = False,
    close: Annotated[bool, typer.Option("--close", help="Learner: close the open round with the sites that answered "
                                                        "(at least t); the others are dropped.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Site: show what would be spent; nothing is read, spent "
                                                            "or uploaded.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Do whatever is pending for this party, once: re-run until marg study status says done."""
    from marg.errors import InputError

    if learner == (site is not None):
        raise InputError("give --site NAME --data DATA (a site) or --learner, one of them")
    if learner:
        from marg.study_learner import run_learner

        res = run_learner(study, close=close)
    else:
        if data is None:
            raise InputError("a site gives its data: --data DATA")
        from marg.study_site import run_site

        res = run_site(study, site, data, dry_run=dry_run)
    if json_out:
        emit_json(res)
        return
    _said(res)


@app.command("status")
def status_cmd(study: StudyArg, json_out: JsonOpt = False) -> None:
    """Anyone: each site's state and spend, each round's state, what is pending, the model when done."""
    from marg.study_runner import status

    st = status(study)
    if json_out:
        emit_json(st)
        return
    typer.echo(f"study {st['study_id']}  drop box {st['drop']}  threshold {st['threshold']}  noise {st['noise']}")
    for r, info in st["rounds"].items():
        extra = f", dropped {', '.join(info['dropped'])}" if info.get("dropped") else ""
        typer.echo(f"  round {r}: {info['state']}{extra}")
    for s, v in st["sites"].items():
        typer.echo(f"  site {s}: {v['state']}, spent ρ = {v['rho']:.4g}")
    typer.echo("done: " + (st["model"] or "") if st["done"] else f"pending: {st['pending']}")
