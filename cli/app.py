"""The ``marg`` Typer application and its sub-apps; every command is guarded in one place.

:class:`MargTyper` wraps each command it registers with :func:`marg.cli.common.guarded`, so a
library error becomes one line on stderr and its exit code (2 bad input or inconsistent
statistics, 1 refused, 3 solver or internal failure) wherever the command lives. Command
modules import :data:`app` (or a sub-app) and decorate module-level functions.
"""

from __future__ import annotations

from typing import Any, Callable

import typer

from .common import guarded

EXIT_CODES = (
    "Exit codes: 0 success; 1 refused (budget exhausted, bad or missing signature, unknown signer); "
    "2 bad input (malformed file, unknown level, schema mismatch, inconsistent statistics); "
    "3 solver or internal failure; 130 interrupted."
)


class MargTyper(typer.Typer):
    """A Typer app whose commands are all wrapped by :func:`guarded`."""

    def command(self, *args: Any, **kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        register = super().command(*args, **kwargs)

        def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
            register(guarded(fn))
            return fn

        return decorator


def sub_app(help: str) -> MargTyper:
    return MargTyper(help=help, no_args_is_help=True, rich_markup_mode=None)  # plain help: rich costs ~0.1 s of start-up


app = MargTyper(
    name="marg",
    help="Marginals-only learning: export summaries at each site, learn certified classifiers centrally.\n\n" + EXIT_CODES,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
schema_app = sub_app("Study codebooks (the shared schema).")
app.add_typer(schema_app, name="schema")
