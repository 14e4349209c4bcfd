"""The console script's entry point leaves the process's objects to the collector's permanent generation when
its command ends (``gc.freeze``, :func:`marg.cli.main.main`), so the interpreter's exit runs no full collection
over them — whether the command succeeds or exits with an error."""

from __future__ import annotations

import gc

import pytest

from marg.cli.main import main


@pytest.mark.parametrize("argv", [["marg", "--help"], ["marg", "export", "--no-such-option"]])
def test_main_freezes_the_objects_when_the_command_ends(monkeypatch, capsys, argv):
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    monkeypatch.setattr("sys.argv", argv)
    try:
        with pytest.raises(SystemExit):
            main()
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()  # this test process goes on: give its objects back to the collector
