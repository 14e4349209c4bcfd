"""The ``marg`` Typer application and its sub-apps; every command is guarded in one place.

:class:`MargTyper` wraps each command it registers with :func:`marg.cli.common.guarded`, so a
library error becomes one line on stderr and its exit code (2 bad input or inconsistent
statistics, 1 refused, 3 solver or internal failure) wherever the command lives. Command
modules import :data:`app` (or a sub-app) and decorate module-level functions.
"""


import os
import sys
from typing import Annotated, Any, Callable, Optional

import typer

from .common import err, guarded
from .remote import staged

EXIT_CODES = (
    "Exit codes: 0 success; 1 refused (budget exhausted, bad or missing signature, unknown signer); "
    "2 bad input (malformed file, unknown level, schema mismatch, inconsistent statistics); "
    "3 solver or internal failure; 130 interrupted."
)


def lean_arrow_memory() -> None:
    """Arrow's jemalloc pool for this command, where Linux wheels ship it: it gives freed pages back
    to the system, where Arrow's default (mimalloc) keeps them, so a wide CSV export's peak memory is
    the reader's block and the codes, not every block's high-water mark (1,000 × 20,000 binary CSV:
    604 → ≈ 520 MiB; 3,000 × 3,000 Parquet 398 → 348 MiB; same CPU). Set through
    ``ARROW_DEFAULT_MEMORY_POOL`` before pyarrow is imported (nothing to import for ``--help``); a
    value the user set is kept, and other systems keep Arrow's default."""
    if sys.platform.startswith("linux") and "pyarrow" not in sys.modules:
        os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "jemalloc")


class MargTyper(typer.Typer):
    """A Typer app whose commands are all wrapped by :func:`guarded`, and whose usage errors
    (a missing option, an unknown option, a value of the wrong type) are one line
    ``marg: error: COMMAND: …`` on stderr with exit code 2, as library errors are."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # Typer vendors click: its exceptions live in typer._click (no public alias in typer 0.29).
        from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError

        kwargs["standalone_mode"] = False
        lean_arrow_memory()
        try:
            rv = super().__call__(*args, **kwargs)
        except NoArgsIsHelpError as exc:
            exc.show()  # `marg` or `marg keys` alone: the help, as before
            sys.exit(exc.exit_code)
        except UsageError as exc:
            where = exc.ctx.command_path.split(" ", 1)[1] + ": " if exc.ctx is not None and " " in exc.ctx.command_path else ""
            hint = f" (see {exc.ctx.command_path} --help)" if exc.ctx is not None else ""
            err(f"marg: error: {where}{_sentence(exc.format_message())}{hint}")
            sys.exit(2)
        except ClickException as exc:
            err(f"marg: error: {_sentence(exc.format_message())}")
            sys.exit(exc.exit_code)
        except typer.Abort:
            err("marg: interrupted")
            sys.exit(130)
        sys.exit(rv if isinstance(rv, int) else 0)

    def command(self, *args: Any, **kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        register = super().command(*args, **kwargs)

        def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
            register(guarded(staged(fn)))  # paths that are URLs (sftp://, s3://): cli/remote.py
            return fn

        return decorator


def _sentence(msg: str) -> str:
    """One line, lower-case start, no final full stop (it is followed by a hint)."""
    line = " ".join(msg.split())
    return (line[:1].lower() + line[1:]).rstrip(".")


def _conventional_metavars() -> None:
    """Show option values as TEXT, PATH, FLOAT, INTEGER and a required argument as DATA.

    Typer 0.29 writes ``--site <str>`` and ``marg export {DATA}``; a command line reads
    better with click's long-standing convention (``--site TEXT``, ``marg export DATA``).
    An explicit ``metavar=`` still wins.
    """
    from typer import core

    names = {"str": "TEXT", "int": "INTEGER", "float": "FLOAT", "path": "PATH", "bool": "BOOLEAN"}
    typed = core._TyperParameter.display_type

    def display_type(self: Any, ctx: Any) -> str:
        inner = typed(self, ctx).strip("<>")
        if inner.startswith("list[") and inner.endswith("]"):
            inner = inner[5:-1]
        if "|" in inner:
            return f"[{inner}]"
        return names.get(inner.lower(), names.get(inner.lower().split("[")[0], inner.upper()))

    def usage_name(self: Any) -> str:
        name = self.display_name_raw.upper() if self.metavar is None else self.metavar
        name = name if self.required else f"[{name}]"
        return name + ("..." if self.nargs != 1 else "")

    core._TyperParameter.display_type = display_type
    core.TyperArgument._usage_display_name = usage_name
    core.TyperArgument.display_type_rich = lambda self, ctx: None  # the argument's name says what it is
    core.TyperArgument._rich_display_name = lambda self: usage_name(self).replace("[", "").replace("]", "")


def _option_panels() -> None:
    """Plain help (no rich, for start-up time) that still groups options by their
    ``rich_help_panel``: ``marg learn --help`` shows the common options, then one section per learner."""
    from typer import core

    def format_options(self: Any, *, ctx: Any, formatter: Any) -> None:
        args, sections = [], {}
        for param in self.get_params(ctx):
            rv = param.get_help_record(ctx)
            if rv is None:
                continue
            if param.param_type_name == "argument":
                args.append(rv)
            else:
                sections.setdefault(getattr(param, "rich_help_panel", None) or "Options", []).append(rv)
        if args:
            with formatter.section("Arguments"):
                formatter.write_dl(args)
        for title, rows in sorted(sections.items(), key=lambda kv: kv[0] != "Options"):  # stable: panels in order of appearance
            with formatter.section(title):
                formatter.write_dl(rows)

    core._typer_format_options = format_options


_conventional_metavars()
_option_panels()


def _version(value: bool) -> None:
    if value:
        from marg import __version__

        typer.echo(f"marg {__version__}")
        raise typer.Exit()


def sub_app(help: str) -> MargTyper:
    return MargTyper(help=help, no_args_is_help=True, rich_markup_mode=None)  # plain help: rich costs ~0.1 s of start-up


app = MargTyper(
    name="marg",
    help="Marginals-only learning: export summaries at each site, learn certified classifiers centrally.\n\n" + EXIT_CODES,
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion (bash, zsh, fish, PowerShell)
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


@app.callback()
def _root(
    version: Annotated[Optional[bool], typer.Option("--version", is_eager=True, callback=_version,
                                                    help="Print marg's version and exit.")] = None,
) -> None:
    pass
schema_app = sub_app("Study codebooks (the shared schema).")
app.add_typer(schema_app, name="schema")
