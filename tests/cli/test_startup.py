"""What every ``marg`` start pays for: typer builds every command's options from its signature
at each start, and a postponed (string) annotation is compiled and evaluated there each time
(``from __future__ import annotations`` in a command module: 0.03 s of CPU for marg's
commands, a fifth of ``marg --version``). The command modules annotate with objects."""

from __future__ import annotations

import inspect


def _commands(app):
    for info in app.registered_commands:
        yield info.callback
    for group in app.registered_groups:
        yield from _commands(group.typer_instance)


def test_command_annotations_are_objects_not_strings():
    from marg.cli.main import app

    seen = 0
    for fn in _commands(app):
        fn = inspect.unwrap(fn)
        strings = [name for name, a in fn.__annotations__.items() if isinstance(a, str)]
        assert not strings, f"{fn.__module__}.{fn.__name__}: postponed annotations {strings}"
        seen += 1
    assert seen >= 20  # every command was looked at
