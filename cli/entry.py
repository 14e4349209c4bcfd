"""The console script's entry point (``marg = "marg.cli.entry:main"``): the command named, then the command line.

It records the first argument (:data:`marg.cli.commands.named`) before :mod:`marg.cli.main` is
imported, so that only the command modules the command needs are imported (:mod:`marg.cli.commands`).
"""

import os
import sys

from . import commands


def main() -> None:
    """The ``marg`` console script: note the command named, then run :func:`marg.cli.main.main`."""
    args = sys.argv[1:]
    completing = any(k.startswith("_") and k.endswith("_COMPLETE") for k in os.environ)
    commands.named = args[0] if args and not args[0].startswith("-") and not completing else None
    from .main import main as run

    run()
