"""``marg schema check``: does this site's data fit the study codebook? Read, compared, nothing spent."""


from pathlib import Path
from typing import Annotated, Optional

import typer

from .app import schema_app
from .common import JsonOpt, SchemaOpt, emit_json


@schema_app.command("check")
def schema_check(
    data: Annotated[str, typer.Argument(help="The site's data, as `marg export` takes it: a file, duckdb:///…, "
                                             "postgresql://…, or with --engine spark a path or a table.")],
    schema: SchemaOpt,
    engine: Annotated[Optional[str], typer.Option("--engine", help="Who reads a file: local, duckdb or spark.")] = None,
    spark_master: Annotated[Optional[str], typer.Option("--spark-master",
                                                        help="Spark master URL for --engine spark.")] = None,
    json_out: JsonOpt = False,
    show_values: Annotated[bool, typer.Option("--show-values",
                                              help="Also print the unknown values themselves (this terminal only, "
                                                   "never in --json): a rare value can be a patient's.")] = False,
) -> int:
    """Check that DATA fits the codebook before any site spends: prints whether it fits and, if not, which
    columns hold values the codebook lacks, and how many distinct ones (the values only with --show-values,
    never in --json) — never a count of rows. Exit 0 when
    it fits, 2 when it does not. Run it at every site before the first export."""
    from marg.marginals.data.codebook import Codebook
    from marg.marginals.schema_check import check_schema
    from marg.marginals.sources import open_source

    cb = Codebook.load(schema)
    with open_source(data, engine=engine, spark_master=spark_master) as src:
        res = check_schema(src, cb)
    if json_out:
        emit_json(res.to_dict())
        return 0 if res.fits else 2
    name = Path(str(schema)).name
    if res.fits:
        typer.echo(f"fits: every value of {res.source} is in {name} (fingerprint {cb.fingerprint[:16]}); nothing was "
                   "counted or spent")
        return 0
    typer.echo(f"does not fit: {res.source} holds values {name} lacks (fingerprint {cb.fingerprint[:16]}); an "
               "export would be refused. Add them to the codebook (every site checks again), or map them:")
    for m in res.misfits:
        typer.echo(f"  {m.describe(show_values)}")
    if not show_values:
        typer.echo("(the values are not shown: a rare value can be a patient's; --show-values prints them here)")
    return 2
