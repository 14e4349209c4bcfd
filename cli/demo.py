"""``marg demo``: the whole story on generated hospital data, told as a DP study
(:func:`marg.demo_study.run_study_demo`; ``--per-site``: the per-site export path, :func:`marg.demo.run_demo`)."""


from pathlib import Path
from typing import Annotated, Optional

import typer

from .app import app


@app.command("demo")
def demo(
    workdir: Annotated[Path, typer.Option("--dir", help="Where to write the demo's files (replaced if it holds an "
                                                        "earlier demo).")] = Path("marg-demo"),
    seed: Annotated[int, typer.Option(help="Seed of the data generator.")] = 7,
    omop: Annotated[Optional[Path], typer.Option("--omop", metavar="DIR",
                                                 help="Only write three generated OMOP CDM 5.4 databases (DuckDB "
                                                      "files) and an OMOP codebook into DIR, for the README's 'From "
                                                      "an OMOP CDM database'.")] = None,
    per_site: Annotated[bool, typer.Option("--per-site",
                                           help="The per-site path instead of a study: each site exports its own DP "
                                                "bundle, the learner learns from the bundles.")] = False,
) -> None:
    """Generate hospital data and run a DP study of three hospitals and a learner (marg study init, run, status), then
    check the certified model and audit each site's ledger."""

    if omop is not None:
        from marg.demo import write_omop_demo

        files = write_omop_demo(omop, seed=seed)
        sites = [k for k in files if k != "codebook"]
        typer.echo(f"wrote {omop}: OMOP CDM 5.4 databases {', '.join(files[s].name for s in sites)} (target cohort 11, "
                   f"outcome cohort 12) and {files['codebook'].name}; next: marg schema check "
                   f"'omop+duckdb://{files[sites[0]]}?cdm=main' --schema {files['codebook']}")
        return

    if per_site:
        from marg.demo import run_demo

        run_demo(workdir, echo=typer.echo, seed=seed)
        return
    from marg.demo_study import run_study_demo

    run_study_demo(workdir, echo=typer.echo, seed=seed)
