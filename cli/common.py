"""Shared CLI plumbing: option aliases, output helpers and the one place errors become exits.

Every command is wrapped by :func:`guarded`: a :class:`~marg.errors.MargError` becomes
one line on stderr (``marg: error: …``) and its exit code (2 bad input, 1 refused); any
other exception becomes a one-line internal error (exit 3). ``MARG_DEBUG=1`` re-raises so
the traceback shows.
"""


import functools
import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any, Callable, Optional, TypeVar

import typer

from marg.errors import MargError

F = TypeVar("F", bound=Callable[..., Any])

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout instead of text.")]
SchemaOpt = Annotated[Path, typer.Option("--schema", help="The study codebook (JSON).")]
OutOpt = Annotated[Path, typer.Option("--out", help="Where to write the result.")]
SiteOpt = Annotated[str, typer.Option("--site", help="This site's name.")]
DataArg = Annotated[str, typer.Argument(
    metavar="DATA",
    help="The data: a CSV/TSV/.gz/Parquet file, duckdb://site.db?table=T (relative; duckdb:///abs/site.db absolute; "
         "or any file DuckDB reads), postgresql://host/db?table=T (or ?query=SELECT…), or with --engine spark a path "
         "or a Spark table.")]
EngineOpt = Annotated[Optional[str], typer.Option(
    "--engine", help="Who counts a file: local (this process, every core), duckdb, or spark. Databases count their "
                     "own tables.")]
SparkMasterOpt = Annotated[Optional[str], typer.Option(
    "--spark-master", help="Spark master URL for --engine spark (default: $MARG_SPARK_MASTER or local[*]).")]


def debug() -> bool:
    return os.environ.get("MARG_DEBUG", "") not in ("", "0")


def err(msg: str) -> None:
    typer.echo(msg, err=True)


def guarded(fn: F) -> F:
    """Turn library errors into one line on stderr and an exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except MargError as exc:
            if debug():
                raise
            err(f"marg: error: {_one_line(exc)}")
            raise typer.Exit(code=exc.exit_code) from None
        except BrokenPipeError:
            # The reader went away (e.g. `marg inspect B | head`): stop quietly.
            try:
                sys.stdout = open(os.devnull, "w")
            except OSError:
                pass
            raise typer.Exit(code=0) from None
        except KeyboardInterrupt:
            err("marg: interrupted")
            raise typer.Exit(code=130) from None
        except OSError as exc:
            if debug():
                raise
            where = f": {exc.filename}" if getattr(exc, "filename", None) else ""
            err(f"marg: error: {exc.strerror or exc}{where}")
            raise typer.Exit(code=2) from None
        except Exception as exc:  # noqa: BLE001 - the CLI boundary
            if debug():
                raise
            err(f"marg: internal error: {type(exc).__name__}: {_one_line(exc)} (set MARG_DEBUG=1 for a traceback)")
            raise typer.Exit(code=3) from None

    return wrapper  # type: ignore[return-value]


def _one_line(exc: BaseException) -> str:
    text = (exc.cli_message() if isinstance(exc, MargError) else str(exc)).strip()  # settings named as flags
    return text.splitlines()[0] if text else type(exc).__name__


def emit_json(obj: Any) -> None:
    typer.echo(json.dumps(obj, sort_keys=True, default=_json_default))


def _json_default(o: Any) -> Any:
    import numpy as np

    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def split_list(s: str | None) -> list[str]:
    return [x.strip() for x in (s or "").split(",") if x.strip()]


def printable(text: str) -> str:
    """``text`` with every character a terminal could act on (escape sequences, other controls, bidi
    overrides: Unicode categories C*) shown as ``\\xNN``/``\\uNNNN``: names from a codebook or a bundle are
    someone else's text (issue 45)."""
    out = []
    for ch in str(text):
        if ch.isprintable() or ch == " ":
            out.append(ch)
        else:
            o = ord(ch)
            out.append(f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}")
    return "".join(out)
