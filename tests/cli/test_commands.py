"""The console script imports only the command modules of the command named (``cli/commands.py``): its table of
modules and command names is what the modules register, and a command run alone works as in the whole group."""

from __future__ import annotations

import inspect

import pytest

from marg.cli import commands
from tests.helpers.console import marg


def _registered() -> dict[str, set[str]]:
    """First words of command lines, by the ``marg.cli`` module that registers them (every module imported)."""
    from marg.cli.main import app

    out: dict[str, set[str]] = {}
    for c in app.registered_commands:
        module = inspect.unwrap(c.callback).__module__.rsplit(".", 1)[-1]
        out.setdefault(module, set()).add(c.name)
    for g in app.registered_groups:
        owners = {m for m in commands.COMMAND_MODULES if getattr(__import__(f"marg.cli.{m}", fromlist=["app"]), "app",
                                                             None) is g.typer_instance}
        for c in g.typer_instance.registered_commands:  # a group's commands may come from several modules
            owners.add(inspect.unwrap(c.callback).__module__.rsplit(".", 1)[-1])
        for m in owners:
            out.setdefault(m, set()).add(g.name)
    return out


def test_the_table_names_what_each_module_registers():
    reg = _registered()
    own = set().union(*(reg.pop(m) for m in set(reg) - set(commands.COMMAND_MODULES)))  # main's (export's callback
    assert own == set(commands.OWN_COMMANDS)  # lives in cli/export.py; cli/main.py registers it)
    assert {m: set(v) for m, v in commands.COMMAND_MODULES.items()} == reg


def test_an_import_of_the_module_registers_every_command():
    assert commands.named is None  # no console script in this process
    assert commands.modules_needed() == list(commands.COMMAND_MODULES)


@pytest.mark.parametrize("name,expected", [("learn", ["learn"]), ("certify", ["learn"]), ("export", []),
                                           ("schema", ["schema_check"]), ("audit", ["audit"]),
                                           ("lern", None), (None, None)])
def test_the_modules_a_command_needs(monkeypatch, name, expected):
    monkeypatch.setattr(commands, "named", name)
    assert commands.modules_needed() == (list(commands.COMMAND_MODULES) if expected is None else expected)


def test_a_misspelt_command_is_still_told_the_right_one(tmp_path):
    res = marg("lern", cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.strip() == "marg: error: no such command 'lern'. Did you mean 'learn'? (see marg --help)"


@pytest.mark.parametrize("argv", [["audit", "--help"], ["schema", "--help"], ["keys", "show", "--help"],
                                  ["certify", "--help"]])
def test_a_command_alone_has_its_help(tmp_path, argv):
    res = marg(*argv, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-800:]
    assert "Usage: marg " + " ".join(a for a in argv if a != "--help") in res.stdout
