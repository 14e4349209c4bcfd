"""``marg demo``: the whole story on generated hospital data (:func:`marg.demo.run_demo`)."""


from pathlib import Path
from typing import Annotated

import typer

from .app import app


@app.command("demo")
def demo(
    workdir: Annotated[Path, typer.Option("--dir", help="Where to write the demo's files (replaced if it holds an earlier demo).")] = Path("marg-demo"),
    seed: Annotated[int, typer.Option(help="Seed of the data generator.")] = 7,
) -> None:
    """Generate hospital data, export at three sites, learn, evaluate and audit."""
    from marg.demo import run_demo

    run_demo(workdir, echo=typer.echo, seed=seed)
