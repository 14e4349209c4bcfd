"""The README's DP study quick start (issue 44): the study commands, on one screen, every option real.

The section holds one shell block whose commands are ``marg keys init``, ``marg study init``, ``marg study run``
(a site, the learner) and ``marg study status``; the section fits on one screen (at most 45 lines with its
prose); every option the block names is one its command's ``--help`` lists (the installed console script), so
the quick start cannot drift from the CLI; the per-site commands stay documented after it.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.helpers.console import marg

ROOT = Path(__file__).resolve().parents[2]


def _section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("## DP study quick start")
    end = text.index("\n## ", start + 3)
    return text[start:end]


def test_the_study_quick_start_is_the_study_commands_on_one_screen(tmp_path):
    sec = _section()
    assert len(sec.strip().splitlines()) <= 45
    block = re.findall(r"```\n(.*?)```", sec, re.S)
    assert len(block) == 1
    lines, cont = [], ""
    for raw in block[0].splitlines():
        line = (cont + raw.split("#", 1)[0]).strip()
        cont = line[:-1] + " " if line.endswith("\\") else ""
        if not cont and line.startswith("marg "):
            lines.append(line)
    commands = {" ".join(w for w in ln.split()[1:3] if not w.startswith("-") and "." not in w) for ln in lines}
    assert {"keys init", "study init", "study run", "study status"} <= commands, commands
    runs = [ln for ln in lines if ln.startswith("marg study run")]
    assert any("--learner" in ln for ln in runs) and any("--site" in ln and "--data" in ln for ln in runs)
    for ln in lines:
        sub = ln.split()[1:3]
        helped = marg(*sub, "--help", cwd=tmp_path, env={"COLUMNS": "200"})
        assert helped.returncode == 0, helped.stderr
        for opt in re.findall(r"(?<![\w-])--[a-z][a-z-]*", ln):
            assert opt in helped.stdout, (ln, opt)
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    after = text[text.index("## DP study quick start"):]
    assert "marg export DATA" in after and "marg request" in after  # the per-site commands, below it
