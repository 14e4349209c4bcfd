"""Every ```python block of README.md runs, in a folder laid out the way its examples assume.

The folder is a ``marg demo`` study seen from the learner's and a site's desk: the three
sites' sealed, signed bundles (``north.bundle`` …), the learner's trust store of site keys
(``trust/``) and its keys (``learner.seal.key``, ``learner.sign.key``), the sites' store of
the learner's model key (``learner-keys/``), north's held-out rows (``holdout.csv``), the
codebook and a signed model (``model.json``). A block that raises fails the test with the
block's first line; the blocks run in order in one namespace, as a reader would paste them.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks(text: str) -> list[str]:
    return BLOCK.findall(text)


@pytest.fixture(scope="module")
def study(tmp_path_factory, demo):
    """The README's folder (see the module docstring), from the session's ``marg demo`` run."""
    res = demo
    w = res["workdir"]
    here = tmp_path_factory.mktemp("readme")
    for b in res["bundles"]:
        shutil.copy(b, here / Path(b).name)
    shutil.copytree(w / "learner" / "trust", here / "trust")
    for k in ("learner.seal.key", "learner.sign.key"):
        shutil.copy(w / "learner" / k, here / k)
    (here / "learner-keys").mkdir()
    shutil.copy(w / "learner" / "learner.sign.pub", here / "learner-keys" / "learner.sign.pub")
    shutil.copy(res["files"]["north"]["test"], here / "holdout.csv")
    shutil.copy(res["files"]["north"]["train"], here / "patients.csv")
    shutil.copy(w / "codebook.json", here / "codebook.json")
    shutil.copy(w / "learner" / "auto.model.json", here / "model.json")
    return here


def test_the_readme_has_python_examples():
    blocks = python_blocks((ROOT / "README.md").read_text(encoding="utf-8"))
    assert len(blocks) >= 2, "the README's python examples were not found (```python fences)"
    assert any("marg.load_model" in b for b in blocks) and any("marg.load_summary" in b for b in blocks)


def test_every_readme_python_block_runs(study, monkeypatch, capsys):
    monkeypatch.chdir(study)
    namespace: dict = {"__name__": "__readme__"}
    for k, code in enumerate(python_blocks((ROOT / "README.md").read_text(encoding="utf-8"))):
        try:
            exec(compile(code, f"README.md python block {k + 1}", "exec"), namespace)
        except Exception as exc:  # noqa: BLE001 - reported with the block
            pytest.fail(f"README python block {k + 1} ({code.splitlines()[0]!r}) raised {type(exc).__name__}: {exc}")
    out = capsys.readouterr().out
    # what the blocks print is what they claim: a summary of three sites, a signed model, equal scores
    assert "<marg Summary: 3 sites (north, south, city)" in out
    assert "signed by learner" in repr(namespace["model"])
    assert "True" in out.splitlines()
    assert (study / "mrc-card.html").is_file()
