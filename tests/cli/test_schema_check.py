"""Check before anyone spends (issue 37, item 2): ``marg schema check`` and the export's draft rule.

breast-w split over three sites the way the issue met it: the codebook drafted at the first site
lacks levels ``9`` and ``10`` of Clump_Thickness that the third site holds. ``schema check`` at the
third site names them (and nothing counted) before any export; an export under the unreviewed draft
spends nothing, refused in one line; the reviewed codebook is refused at the third site before
noise, its ledger untouched. On the old marg there is no ``schema check`` and the draft export at
the first site spends.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pytest

from tests.helpers.console import marg
from tests.helpers.files import folder_bytes


@pytest.fixture
def sites(tmp_path, datasets):
    src = datasets / "breast-w" / "breast-w.tsv.gz"
    names = pcsv.read_csv(src, parse_options=pcsv.ParseOptions(delimiter="\t")).column_names
    t = pcsv.read_csv(src, parse_options=pcsv.ParseOptions(delimiter="\t"),
                      convert_options=pcsv.ConvertOptions(column_types={c: pa.string() for c in names}))
    thick = pc.cast(t.column("Clump_Thickness"), pa.float64())
    low = t.filter(pc.less(thick, 9))
    paths = {}
    for k, part in enumerate((low.slice(0, 250), low.slice(250), t.filter(pc.greater_equal(thick, 9)))):
        paths[k] = tmp_path / f"site{k}.csv"
        pcsv.write_csv(part, paths[k])  # text as the TSV writes it: 5.0, 1.0, …
    env = {"MARG_HOME": str(tmp_path / "home")}
    r = marg("schema", "init", paths[0], "--label", "target", "--out", tmp_path / "draft.json", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    return tmp_path, paths, env


def test_schema_check_names_missing_levels_and_counts_nothing(sites):
    tmp, paths, env = sites
    r = marg("schema", "check", paths[0], "--schema", tmp / "draft.json", cwd=tmp, env=env)
    assert r.returncode == 0 and r.stdout.startswith("fits:"), r.stdout + r.stderr
    r = marg("schema", "check", paths[2], "--schema", tmp / "draft.json", cwd=tmp, env=env)
    assert r.returncode == 2 and r.stdout.startswith("does not fit:"), r.stdout + r.stderr
    # the column and how many distinct unknown values; the values only with --show-values (issue 45: a rare
    # value can be a patient's), never in --json
    assert "column 'Clump_Thickness': 2 distinct levels missing from the codebook" in r.stdout
    assert "'9'" not in r.stdout and "'10'" not in r.stdout
    shown = marg("schema", "check", paths[2], "--schema", tmp / "draft.json", "--show-values", cwd=tmp, env=env)
    assert "column 'Clump_Thickness': 2 distinct levels missing from the codebook: '9', '10'" in shown.stdout
    raw = marg("schema", "check", paths[2], "--schema", tmp / "draft.json", "--json", "--show-values", cwd=tmp,
               env=env).stdout
    j = json.loads(raw)
    assert j["fits"] is False and "'9'" not in raw and '"9"' not in raw and '"10"' not in raw
    thick = next(c for c in j["columns"] if c["column"] == "Clump_Thickness")
    assert thick == {"column": "Clump_Thickness", "kind": "feature", "absent": False, "unknown": 2,
                     "missing_without_level": False, "not_numbers": False}
    # only which values: no count anywhere in what it prints
    n2 = sum(1 for _ in open(paths[2])) - 1
    assert str(n2) not in r.stdout.replace("fingerprint", "")
    assert not (tmp / "home").exists() and not (tmp / "marg-ledger").exists()  # nothing recorded, nothing spent


def test_export_under_a_draft_spends_nothing_and_errors_are_one_line(sites):
    tmp, paths, env = sites
    for who in ("site0", "site2"):
        r = marg("keys", "init", "--site", who, "--dir", tmp / "keys", cwd=tmp, env=env)
        assert r.returncode == 0, r.stderr
    ledger = tmp / "ledger0"
    before = folder_bytes(tmp)
    r = marg("export", paths[0], "--schema", tmp / "draft.json", "--site", "site0", "--out", tmp / "s0.bundle",
             "--epsilon", "1", "--key", tmp / "keys" / "site0.sign.key", "--ledger", ledger, cwd=tmp, env=env)
    assert r.returncode == 1 and "is still a draft" in r.stderr and "marg schema check" in r.stderr
    assert r.stderr.count("\n") == 1  # one line, no draft warning beside it
    assert folder_bytes(tmp) == before  # no bundle, no ledger
    # --allow-draft: an error is still one line (the draft warning is said only after a success)
    r = marg("export", paths[2], "--schema", tmp / "draft.json", "--site", "site2", "--out", tmp / "s2.bundle",
             "--epsilon", "1", "--key", tmp / "keys" / "site2.sign.key", "--ledger", tmp / "ledger2", "--allow-draft",
             cwd=tmp, env=env)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "unknown level at row" in r.stderr, r.stderr
    assert "'10'" not in r.stderr  # a patient's value is never echoed (issue 35)
    assert not (tmp / "s2.bundle").exists()
    # reviewed (draft removed): the third site is refused before noise, its ledger holds no release
    d = json.loads((tmp / "draft.json").read_text())
    d.pop("draft")
    (tmp / "reviewed.json").write_text(json.dumps(d))
    r = marg("export", paths[2], "--schema", tmp / "reviewed.json", "--site", "site2", "--out", tmp / "s2.bundle",
             "--epsilon", "1", "--key", tmp / "keys" / "site2.sign.key", "--ledger", tmp / "ledger2", cwd=tmp, env=env)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "unknown level" in r.stderr
    entries = (tmp / "ledger2" / "ledger.jsonl")
    assert not entries.exists() or all('"release"' not in line for line in entries.read_text().splitlines())
    # a success under --allow-draft says the warning after it
    r = marg("export", paths[0], "--schema", tmp / "draft.json", "--site", "site0", "--out", tmp / "s0.bundle",
             "--epsilon", "1", "--key", tmp / "keys" / "site0.sign.key", "--ledger", ledger, "--allow-draft", cwd=tmp,
             env=env)
    assert r.returncode == 0 and "still marked as a draft" in r.stderr and (tmp / "s0.bundle").exists(), r.stderr
