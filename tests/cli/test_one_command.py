"""``marg COMMAND …`` builds only that command, and the root's help each command from its name and
docstring alone (cli/app.MargTyper._only_the_command): every help page and usage error is the whole
group's, for every top-level command and sub-app and the root."""

from __future__ import annotations

import pytest
import typer

from marg.cli.main import app


def names() -> list[str]:
    cmds = [c.name or typer.main.get_command_name(c.callback.__name__) for c in app.registered_commands]
    return cmds + [g.name for g in app.registered_groups]


def run(argv, capsys, whole: bool) -> tuple[int, str, str]:
    if whole:  # the whole group, as Typer builds it
        try:
            typer.main.get_command(app).main(argv, prog_name="marg", standalone_mode=False)
            code = 0
        except SystemExit as exc:
            code = exc.code
    else:
        try:
            app(argv, prog_name="marg")
            code = 0
        except SystemExit as exc:
            code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_every_command_is_found():
    assert {"export", "learn", "keys", "audit", "schema"} <= set(names())


@pytest.mark.parametrize("name", names())
def test_a_commands_help_is_the_whole_groups(name, capsys):
    alone = run([name, "--help"], capsys, whole=False)
    whole = run([name, "--help"], capsys, whole=True)
    assert alone[1] == whole[1] and alone[1].startswith(f"Usage: marg {name} ")


def test_a_usage_error_names_the_command(capsys):
    code, _, err = run(["export", "data.csv", "--min-cell", "x"], capsys, whole=False)
    assert code == 2 and err.startswith("marg: error: export: invalid value for '--min-cell'")
    code, _, err = run(["expor"], capsys, whole=False)  # not a command: the whole group's suggestion
    assert code == 2 and "Did you mean 'export'" in err


@pytest.mark.parametrize("argv", [["--help"], []])
def test_the_roots_help_is_the_whole_groups(argv, capsys):
    alone = run(argv, capsys, whole=False)
    whole = run(argv or ["--help"], capsys, whole=True)
    shown = alone[1] or alone[2]  # `marg` alone shows the help as click's no-arguments error does
    assert shown.rstrip() == whole[1].rstrip()
    assert "export" in whole[1] and "learn" in whole[1]
