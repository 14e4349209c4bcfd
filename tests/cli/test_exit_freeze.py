"""The console script's entry point (:func:`marg.cli.main.main`) moves the objects its imports made to the
collector's permanent generation before the command runs (``gc.freeze``), and the command's own objects when
it ends, so the interpreter's exit runs no full collection over them — whether the command succeeds or exits
with an error; and while it runs, full collections are rarer (:data:`marg.cli.main.FULL_COLLECTION_EVERY`)."""

from __future__ import annotations

import gc

import pytest

import marg.cli.main as cli_main


@pytest.fixture
def unfrozen():
    gc.unfreeze()
    kept = gc.get_threshold()
    yield
    gc.unfreeze()  # this test process goes on: give its objects back to the collector, and its thresholds
    gc.set_threshold(*kept)


@pytest.mark.parametrize("argv", [["marg", "--help"], ["marg", "export", "--no-such-option"]])
def test_main_freezes_the_objects_when_the_command_ends(monkeypatch, capsys, unfrozen, argv):
    assert gc.get_freeze_count() == 0
    monkeypatch.setattr("sys.argv", argv)
    with pytest.raises(SystemExit):
        cli_main.main()
    assert gc.get_freeze_count() > 0


@pytest.mark.parametrize("code", [0, 2])
def test_the_imports_are_frozen_before_and_the_commands_objects_after(monkeypatch, unfrozen, code):
    seen = {}
    made = []

    def command(prog_name):
        seen["before"] = gc.get_freeze_count()  # the imports' objects, frozen before the command runs
        seen["threshold"] = gc.get_threshold()
        made.extend([k] for k in range(5000))  # the command's own containers
        raise SystemExit(code)

    monkeypatch.setattr(cli_main, "app", command)
    with pytest.raises(SystemExit):
        cli_main.main()
    assert seen["before"] > 0
    assert seen["threshold"][2] == cli_main.FULL_COLLECTION_EVERY  # full collections 10 × rarer than by default
    assert gc.get_freeze_count() > seen["before"]
    # a frozen object is in no generation the collector scans (gc.get_objects lists those)
    assert not any(o is made[0] for o in gc.get_objects())
    gc.unfreeze()
    assert any(o is made[0] for o in gc.get_objects())
