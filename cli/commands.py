"""Which command-line modules a command needs: the table of ``marg.cli``'s modules and the commands each registers.

``marg export …`` uses the root, ``export`` and what ``cli/main.py`` defines; importing the other
command modules (audit, secagg, learn, the study's…) only to register commands that do not run is a
fixed cost at every start. The console script (:mod:`marg.cli.entry`) sets :data:`named` from the
first argument before :mod:`marg.cli.main` is imported; ``main`` then imports the modules whose
commands :data:`COMMAND_MODULES` lists under that name. Anything else — no argument, an option first
(the root's help, ``--version``), a name that is no command (click's "no such command" suggests
another), shell completion, or an import of :mod:`marg.cli.main` by other code (tests, a notebook)
— imports every module, in :data:`COMMAND_MODULES`'s order, which is the order of ``marg --help``.
"""

COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "keys": ("keys",),
    "audit": ("audit",),
    "secagg": ("secagg",),
    "study_cmd": ("study",),
    "demo": ("demo",),
    "learn": ("learn", "request", "round", "predict", "certify", "evaluate"),
    "report": ("report",),
    "plan": ("plan",),
    "schema_check": ("schema",),
}
"""Each module of ``marg.cli`` that registers commands (in registration order), and the first words of
the command lines that run them (a command's name, or its sub-app's: a module with a sub-app of its own,
its ``app``, registers it under its one name). ``tests/cli/test_commands.py``
checks it against what the modules register."""

OWN_COMMANDS: tuple[str, ...] = ("schema", "export", "inspect")
"""The first words of the command lines that :mod:`marg.cli.main` itself registers."""

named: str | None = None
"""The console script's first argument, set by :func:`marg.cli.entry.main` (None: every module)."""


def modules_needed() -> list[str]:
    """The modules of :data:`COMMAND_MODULES` to import: those of the command :data:`named`, else all."""
    mods = [m for m, names in COMMAND_MODULES.items() if named in names]
    if named is None or not (mods or named in OWN_COMMANDS):
        return list(COMMAND_MODULES)
    return mods
