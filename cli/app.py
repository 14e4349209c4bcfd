"""The ``marg`` Typer application and its sub-apps; every command is guarded in one place.

:class:`MargTyper` wraps each command it registers with :func:`marg.cli.common.guarded`, so a
library error becomes one line on stderr and its exit code (2 bad input or inconsistent
statistics, 1 refused, 3 solver or internal failure) wherever the command lives. Command
modules import :data:`app` (or a sub-app) and decorate module-level functions.
"""


import contextlib
import copy
import dataclasses
import os
import re
import sys
from pathlib import Path
from typing import Annotated, Any, Callable, Iterator, Optional

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
    the reader's block and the codes, not every block's high-water mark, at the same CPU (BENCHMARKS.md,
    "Issue 48 (bytes)" and BENCHMARKS.md, "Issue 47: numbers moved out of docstrings"). Set through
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
        argv = kwargs.get("args", args[0] if args else None)
        try:
            with self._only_the_command(sys.argv[1:] if argv is None else list(argv)):
                rv = super().__call__(*args, **kwargs)
        except NoArgsIsHelpError as exc:
            exc.show()  # `marg` or `marg keys` alone: the help, as before
            sys.exit(exc.exit_code)
        except UsageError as exc:
            where = (exc.ctx.command_path.split(" ", 1)[1] + ": " if exc.ctx is not None and " " in exc.ctx.command_path
                     else "")
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

    @contextlib.contextmanager
    def _only_the_command(self, argv: list[str]) -> Iterator[None]:
        """Build only the command (or sub-app) that ``argv`` names, not all 28 commands' 335 options.

        Typer builds the whole click group at every start; ``marg export …`` needs the root (its
        ``--version`` and completion options) and ``export``. Anything else — the root's own help,
        an option first, a name that is not a command (click's "No such command" lists the
        others), shell completion — gets the whole group as before."""
        name = argv[0] if argv else ""
        cmds = [c for c in self.registered_commands
                if (c.name or typer.main.get_command_name(c.callback.__name__)) == name]
        groups = [g for g in self.registered_groups if g.name == name]
        complete = any(k.startswith("_") and k.endswith("_COMPLETE") for k in os.environ)
        if complete:
            yield
            return
        if argv in ([], ["--help"]):
            with _listed_only():
                yield
            return
        if name.startswith("-") or len(cmds) + len(groups) != 1:
            yield
            return
        kept = self.registered_commands, self.registered_groups
        self.registered_commands, self.registered_groups = cmds, groups
        try:
            yield
        finally:
            self.registered_commands, self.registered_groups = kept

    def command(self, *args: Any, **kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        register = super().command(*args, **kwargs)

        def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
            register(guarded(staged(fn)))  # paths that are URLs (sftp://, s3://): cli/remote.py
            return fn

        return decorator


@contextlib.contextmanager
def _listed_only() -> Iterator[None]:
    """The root's help (``marg``, ``marg --help``) lists the commands by name and short help: while it
    is built, each command is built from a stand-in callback with the command's name and docstring and
    no parameters (the root's own options are kept), not from its signature's options."""
    from typer import main as tmain

    build = getattr(tmain, "get_command_from_info", None)
    if build is None:  # another Typer release: the whole help as it builds it
        yield
        return

    def listed(command_info: Any, **kwargs: Any) -> Any:
        def stand_in() -> None:
            pass

        stand_in.__name__, stand_in.__doc__ = command_info.callback.__name__, command_info.callback.__doc__
        other = copy.copy(command_info)
        other.callback = stand_in
        return build(command_info=other, **kwargs)

    tmain.get_command_from_info = listed
    try:
        yield
    finally:
        tmain.get_command_from_info = build


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
        # stable: panels in order of appearance
        for title, rows in sorted(sections.items(), key=lambda kv: kv[0] != "Options"):
            with formatter.section(title):
                formatter.write_dl(rows)

    core._typer_format_options = format_options


_INT_TEXT = re.compile(r"-?(0|[1-9][0-9]{0,17})")
_FLOAT_TEXT = re.compile(r"-?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]{1,2})?")


def _plain_value(annotation: Any, value: Any) -> tuple[bool, Any]:
    """``(True, v)`` when ``value`` is a plain text or value of a plain ``annotation`` (str, int,
    float, bool, Path, a list of those) whose coercion is certain, ``v`` what Typer's pydantic adapter
    returns for it; ``(False, None)`` otherwise (then the adapter decides, errors included)."""
    if isinstance(value, (list, tuple)) and getattr(annotation, "__origin__", None) is list:
        (item,) = annotation.__args__
        out = [_plain_value(item, v) for v in value]
        return (all(ok for ok, _ in out), [v for _, v in out])
    kind = type(value)
    if annotation is bool:
        return (kind is bool, value)
    if annotation is str:
        return (kind is str, value)
    if annotation is int:
        if kind is int:
            return (True, value)
        return (True, int(value)) if kind is str and _INT_TEXT.fullmatch(value) else (False, None)
    if annotation is float:
        if kind is float:
            return (True, value)
        return (True, float(value)) if kind is str and _FLOAT_TEXT.fullmatch(value) else (False, None)
    if annotation is Path:
        if isinstance(value, Path):
            return (True, value)
        return (True, Path(value)) if kind is str and value and "\x00" not in value else (False, None)
    return (False, None)


def _lean_coercion() -> None:
    """Option values coerced without pydantic where the result is certain.

    Typer 0.29 builds a pydantic ``TypeAdapter`` for every parameter of the command that runs
    (pydantic's import and an adapter a parameter for ``marg export``: BENCHMARKS.md, "Issue 48 (bytes2)").
    marg's options are plain (str, int, float, bool, Path, lists of those, no ranges, parsers or
    path checks but Typer's own): a text in canonical form (``12``, ``-0.5``, ``1e-3``, a non-empty
    path) is converted here as the adapter would; anything else (``+1``, `` 3``, ``1_000``,
    ``nan``, ranges, choices, files) goes to Typer's adapter, so values and error messages are
    Typer's (tests/cli/test_lean_coercion.py compares both on a battery of texts)."""
    try:  # Typer's internals: another release without them keeps its own coercion
        from typer import _coercion, core

        built = core._TyperParameter.get_runtime_param
        _coercion.RuntimeParam
    except (ImportError, AttributeError):
        return
    plain = (str, int, float, bool, Path)

    @dataclasses.dataclass(frozen=True)
    class LeanRuntimeParam(_coercion.RuntimeParam):
        owner: Any = None

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            ok, out = _plain_value(self.annotation, value)
            if ok:
                if self.annotation is Path or getattr(self.annotation, "__args__", (None,))[0] is Path:
                    # Typer's own path rule (its checks, its messages) on the ready Path
                    from typer._param_types import coerce_cli_path

                    conv = [coerce_cli_path(p, self.parameter_info, path_type=Path, param=param, ctx=ctx)
                            for p in (out if isinstance(out, list) else [out])]
                    return conv if isinstance(out, list) else conv[0]
                return out
            return built(self.owner)._coerce_value(value, param=param, ctx=ctx)

    def get_runtime_param(self: Any) -> Any:
        if self._runtime_param is None:
            d = self.type_descriptor
            pi = d.parameter_info
            ann = d.annotation
            item = ann.__args__[0] if getattr(ann, "__origin__", None) is list and len(ann.__args__) == 1 else ann
            if (item in plain and d.file_annotation is None and pi.parser is None and pi.min is None
                    and pi.max is None and not d.is_choice and not pi.resolve_path and not pi.allow_dash
                    and pi.path_type is None):
                return LeanRuntimeParam(parameter_info=pi, annotation=ann, owner=self)
        return built(self)

    core._TyperParameter.get_runtime_param = get_runtime_param


_conventional_metavars()
_option_panels()
_lean_coercion()


def _version(value: bool) -> None:
    if value:
        from marg import __version__

        typer.echo(f"marg {__version__}")
        raise typer.Exit()


def sub_app(help: str) -> MargTyper:
    # plain help: rich's renderer costs start-up time (BENCHMARKS.md, "Counting at database speed")
    return MargTyper(help=help, no_args_is_help=True, rich_markup_mode=None)


app = MargTyper(
    name="marg",
    help="Marginals-only learning: export summaries at each site, learn certified classifiers centrally.\n\n"
    + EXIT_CODES,
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
