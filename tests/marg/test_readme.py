"""Every ```python block of README.md runs, in a folder laid out the way its examples assume.

The folder is a study seen from the learner's and a site's desk: the three sites' sealed,
signed bundles (``north.bundle`` …), the learner's trust store of site keys (``trust/``) and
its keys (``learner.seal.key``, ``learner.sign.key``), the sites' store of the learner's model
key (``learner-keys/``), north's held-out rows (``holdout.csv``), the codebook and a signed
model (``model.json``). Two studies: ``marg demo``'s (text columns), and breast-w split over
three sites as its file writes it — float columns (``5.0``) read by ``pd.read_csv`` as floats —
exported and learned through the command line, so the notebook path meets typed floats. A block that raises fails the
test with the block's first line; the blocks run in order in one namespace, as a reader would paste them.
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


@pytest.fixture(scope="module", params=["demo", "breast-w"])
def study(request, tmp_path_factory):
    """The README's folder (see the module docstring)."""
    if request.param == "breast-w":
        return breast_w_study(tmp_path_factory.mktemp("readme-bw"))
    res = request.getfixturevalue("demo")
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


def breast_w_study(here: Path) -> Path:
    """breast-w (float columns) over north, south and city: the README's folder, made by the CLI."""
    import contextlib
    import json

    import pyarrow as pa
    import pyarrow.csv as pcsv

    from tests.helpers.console import run
    from tests.helpers.data import datasets_dir

    src = datasets_dir() / "breast-w" / "breast-w.tsv.gz"
    if not src.is_file():
        pytest.skip(f"shared datasets not found at {src.parent}")
    names = pcsv.read_csv(src, parse_options=pcsv.ParseOptions(delimiter="\t")).column_names
    t = pcsv.read_csv(src, parse_options=pcsv.ParseOptions(delimiter="\t"),
                      convert_options=pcsv.ConvertOptions(column_types={c: pa.string() for c in names}))
    pcsv.write_csv(t, here / "all.csv")
    parts = {"north": t.slice(0, 250), "south": t.slice(250, 250), "city": t.slice(500)}
    for name, part in parts.items():
        pcsv.write_csv(part, here / f"{name}.csv")
    pcsv.write_csv(t.slice(0, 120), here / "holdout.csv")
    pcsv.write_csv(t.slice(120, 130), here / "patients.csv")

    def ok(*args):
        r = run(*args, home=here / "home")
        assert r.exit_code == 0, r.output

    with contextlib.chdir(here):
        ok("schema", "init", "all.csv", "--label", "target", "--out", "codebook.json")
        d = json.loads((here / "codebook.json").read_text())
        d.pop("draft")  # reviewed: breast-w's levels are the public 1..10 scale
        (here / "codebook.json").write_text(json.dumps(d))
        for name in parts:
            ok("keys", "init", "--site", name, "--dir", "keys")
        ok("keys", "init", "--site", "learner", "--role", "learner", "--dir", ".")
        (here / "trust").mkdir()
        (here / "learner-keys").mkdir()
        shutil.copy(here / "learner.sign.pub", here / "learner-keys" / "learner.sign.pub")
        for name in parts:
            shutil.copy(here / "keys" / f"{name}.sign.pub", here / "trust" / f"{name}.sign.pub")
            ok("export", f"{name}.csv", "--schema", "codebook.json", "--site", name, "--out", f"{name}.bundle",
               "--stats", "all", "--min-cell", "1", "--key", f"keys/{name}.sign.key", "--to", "learner.seal.pub",
               "--ledger", f"ledger-{name}")
        ok("learn", "north.bundle", "south.bundle", "city.bundle", "--learner", "mrc", "--out", "model.json",
           "--trust", "trust", "--key", "learner.seal.key", "--sign-key", "learner.sign.key")
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
