"""A site sees what it sends (issue 26), through the installed ``marg`` console script.

- ``marg export --dry-run`` shows exactly what the export then releases (tables, noise, cost
  against the cap, exact counts) and writes nothing: folders byte-identical;
- an existing ``--out`` is refused before anything is counted or charged, unless ``--force``;
- ``marg inspect`` opens the site's own sealed bundle from the copy its ledger vouches for;
- ``marg schema init`` leaves out columns that identify rows; export refuses a feature above
  the level cap; a pair table left out for size is named.
"""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import numpy as np
import pytest

from marg.marginals.synthetic import SITES, demo_codebook, generate, write_csv
from tests.helpers.console import marg
from tests.helpers.files import folder_bytes


@pytest.fixture()
def site(tmp_path) -> dict:
    """A configured site 'north' (ledger with cap ε = 3), its data, the study codebook and the learner's keys."""
    home = tmp_path / "home"
    env = {"MARG_HOME": str(home), "MARG_PROGRESS": "auto"}
    schema = tmp_path / "codebook.json"
    demo_codebook().save(schema)
    data = tmp_path / "north.csv"
    write_csv(data, generate(400, SITES[0], seed=3), slice(0, 400))
    for who, role in (("north", "site"), ("learner", "learner")):
        r = marg("keys", "init", "--site", who, "--role", role, "--dir", tmp_path / "keys", cwd=tmp_path, env=env)
        assert r.returncode == 0, r.stderr
    r = marg("audit", "init", "--site", "north", "--key", tmp_path / "keys" / "north.sign.key", "--epsilon", "3",
             "--delta", "1e-5", "--json", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    said = json.loads(r.stdout)  # --json: the whole of stdout is one object
    assert (said["site"] == "north" and said["cap"]["epsilon"] == 3 and said["cap"]["delta"] == 1e-5
            and said["entries"] == 1)
    return {"dir": tmp_path, "env": env, "home": home, "schema": schema, "data": data, "keys": tmp_path / "keys"}


def _export(s: dict, out: Path, *extra: object) -> list:
    return ["export", s["data"], "--schema", s["schema"], "--site", "north", "--out", out,
            "--key", s["keys"] / "north.sign.key", "--to", s["keys"] / "learner.seal.pub", *extra]


def test_dp_dry_run_writes_nothing_and_is_what_the_export_releases(site):
    s = site
    out = s["dir"] / "north.bundle"
    before = folder_bytes(s["dir"])
    r = marg(*_export(s, out, "--epsilon", "1", "--rounds", "1", "--dry-run", "--json"), cwd=s["dir"], env=s["env"])
    assert r.returncode == 0, r.stderr
    assert folder_bytes(s["dir"]) == before  # no bundle, no ledger entry, no site copy, no checkpoint change
    plan = json.loads(r.stdout)
    assert plan["dry_run"] and plan["sealed_to"] == "learner" and plan["signed"]
    assert plan["cap"]["epsilon"] == pytest.approx(3.0) and plan["spent"]["epsilon"] == 0.0
    text = marg(*_export(s, out, "--epsilon", "1", "--rounds", "1", "--dry-run"), cwd=s["dir"], env=s["env"])
    assert text.returncode == 0 and folder_bytes(s["dir"]) == before
    assert "dry run: nothing written" in text.stdout and "cap ε=3" in text.stdout
    for t in plan["tables"]:  # every table named with its noise on the text page
        assert t["name"] in text.stdout and t["mechanism"] == "gaussian" and t["counts"] is None

    # the export itself: the same tables, the same noise, the same cost as the plan said
    r = marg(*_export(s, out, "--epsilon", "1", "--rounds", "1"), cwd=s["dir"], env=s["env"])
    assert r.returncode == 0, r.stderr
    got = json.loads(marg("inspect", out, "--json", "--key", s["keys"] / "learner.seal.key", cwd=s["dir"]).stdout)
    assert [t["name"] for t in plan["tables"]] == [t["name"] for t in got["statistics"]]
    for p, g in zip(plan["tables"], got["statistics"]):
        assert p["cells"] == g["cells"] and p["std"] == pytest.approx(g["noise_std"], rel=1e-12)
        assert p["rho"] == pytest.approx(g["rho"], rel=1e-12)
    entry = json.loads((s["home"] / "ledger" / "ledger.jsonl").read_text().splitlines()[-1])
    assert entry["cost"]["rho"] == pytest.approx(plan["cost"]["rho"], rel=1e-12)
    assert plan["bundle_bytes"] == out.stat().st_size


def test_exact_dry_run_shows_the_counts_that_leave(site, tmp_path):
    """An exact release's dry run prints the counts; they are the rows' own counts (an
    independent count of the CSV) and the counts of the bundle the export then writes."""
    s = site
    out = tmp_path / "exact.bundle"
    args = ["export", s["data"], "--schema", s["schema"], "--site", "x", "--out", out, "--stats", "first",
            "--min-cell", "1", "--ledger", tmp_path / "led"]
    env = {"MARG_HOME": str(tmp_path / "elsewhere")}  # not the configured site: a plain ledger folder
    before = folder_bytes(tmp_path)
    r = marg(*args, "--dry-run", "--json", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert folder_bytes(tmp_path) == before
    plan = json.loads(r.stdout)
    with open(s["data"], newline="") as fh:
        rows = list(csv.DictReader(fh))
    cb = demo_codebook()
    lab = cb.label
    assert plan["released_n_rows"] == len(rows) == plan["n_rows"]
    by_name = {t["name"]: t for t in plan["tables"]}
    assert by_name[f"N[{lab.name}]"]["counts"] == [sum(r_[lab.name] == c for r_ in rows) for c in lab.classes]
    f = cb.features[1]
    want = [[sum(r_[f.name] == lv and r_[lab.name] == c for r_ in rows) for c in lab.classes] for lv in f.levels]
    assert by_name[f"N[{f.name},{lab.name}]"]["counts"] == want
    text = marg(*args, "--dry-run", cwd=tmp_path, env=env).stdout
    assert "the exact counts that would leave" in text and "exact" in text
    assert marg(*args, cwd=tmp_path, env=env).returncode == 0
    got = json.loads(marg("inspect", out, "--json", "--values", cwd=tmp_path).stdout)["values"]
    assert {k: np.asarray(v).tolist() for k, v in got.items()} == {t["name"]: t["counts"] for t in plan["tables"]}


def test_dry_run_refuses_what_the_export_would_refuse(site, tmp_path):
    """Over the cap, or an exact release differing from an earlier one (differencing): the dry run
    refuses in one line, exit 1, and writes nothing."""
    s = site
    before = folder_bytes(s["dir"])
    r = marg(*_export(s, s["dir"] / "big.bundle", "--epsilon", "5", "--rounds", "1", "--dry-run"), cwd=s["dir"],
             env=s["env"])
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "budget" in r.stderr, r.stderr
    assert folder_bytes(s["dir"]) == before
    # exact releases on a plain ledger: release once, change one row, dry-run again → refused
    led, env = tmp_path / "led", {"MARG_HOME": str(tmp_path / "elsewhere")}
    data = tmp_path / "d.csv"
    data.write_bytes(s["data"].read_bytes())
    args = ["export", data, "--schema", s["schema"], "--site", "x", "--stats", "first", "--min-cell", "1", "--ledger",
            led]
    assert marg(*args, "--out", tmp_path / "a.bundle", cwd=tmp_path, env=env).returncode == 0
    lines = data.read_text().splitlines()
    cells = lines[1].split(",")
    lab_col = lines[0].split(",").index(demo_codebook().label.name)
    cells[lab_col] = "yes" if cells[lab_col] == "no" else "no"
    data.write_text("\n".join([lines[0], ",".join(cells), *lines[2:]]) + "\n")
    before = folder_bytes(tmp_path)
    r = marg(*args, "--out", tmp_path / "b.bundle", "--dry-run", cwd=tmp_path, env=env)
    assert r.returncode == 1 and "exact release refused" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert folder_bytes(tmp_path) == before


def test_an_existing_out_is_refused_without_charge_unless_force(site):
    s = site
    out = s["dir"] / "north.bundle"
    assert marg(*_export(s, out, "--epsilon", "1", "--rounds", "1"), cwd=s["dir"], env=s["env"]).returncode == 0
    before = folder_bytes(s["dir"])
    r = marg(*_export(s, out, "--epsilon", "1", "--rounds", "1"), cwd=s["dir"], env=s["env"])
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0
    assert r.stderr.startswith(f"marg: error: {out.name} exists") or f"{out} exists" in r.stderr, r.stderr
    assert "--force" in r.stderr and folder_bytes(s["dir"]) == before  # not counted, not charged
    r = marg(*_export(s, out, "--epsilon", "1", "--rounds", "1", "--force"), cwd=s["dir"], env=s["env"])
    assert r.returncode == 0, r.stderr
    entries = (s["home"] / "ledger" / "ledger.jsonl").read_text().splitlines()
    spent = json.loads(entries[-1])["cumulative"]["epsilon"]
    assert json.loads(entries[-1])["seq"] == json.loads(entries[-2])["seq"] + 1 and spent > 1.0  # charged twice


def test_a_site_inspects_its_own_sealed_bundle(site):
    s = site
    out = s["dir"] / "north.bundle"
    assert marg(*_export(s, out, "--epsilon", "1", "--rounds", "1"), cwd=s["dir"], env=s["env"]).returncode == 0
    mine = marg("inspect", out, "--values", "--json", cwd=s["dir"], env=s["env"])  # no learner key: the ledger's copy
    assert mine.returncode == 0, mine.stderr
    learner = marg("inspect", out, "--values", "--json", "--key", s["keys"] / "learner.seal.key", cwd=s["dir"])
    a, b = json.loads(mine.stdout), json.loads(learner.stdout)
    assert a["digest"] == b["digest"] and a["values"] == b["values"]  # what the site sees is what the learner opens
    assert a["site_copy"]["ledger_entry"] == 2  # entry 1 is the cap
    text = marg("inspect", out, "--values", cwd=s["dir"], env=s["env"]).stdout
    assert "this site's release of ledger entry #2" in text and "Released values" in text
    # a copy altered after the fact is refused, not shown
    copy = next((s["home"] / "ledger" / "released").iterdir())
    raw = bytearray(copy.read_bytes())
    raw[-1] ^= 1
    copy.write_bytes(bytes(raw))
    r = marg("inspect", out, cwd=s["dir"], env=s["env"])
    assert r.returncode == 1 and "does not match ledger entry #2" in r.stderr and r.stderr.count("\n") == 1
    # without a kept copy: one line saying so
    out2 = s["dir"] / "second.bundle"
    assert marg(*_export(s, out2, "--epsilon", "0.5", "--rounds", "1", "--no-keep-copy"), cwd=s["dir"],
                env=s["env"]).returncode == 0
    r = marg("inspect", out2, cwd=s["dir"], env=s["env"])
    assert r.returncode == 2 and "--no-keep-copy" in r.stderr and r.stderr.count("\n") == 1, r.stderr


def _identifier_table(path: Path, n: int = 600) -> None:
    rnd = random.Random(1)
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["MRN", "ref", "visit_no", "ward", "code", "age", "outcome"])
        for i in range(n):
            w.writerow([f"M{100000 + i}", f"r{rnd.randrange(10**9):09d}", 5000 + i, rnd.choice("ABC"),
                        f"c{i % 150}", rnd.randrange(20, 90), rnd.choice(["y", "n"])])


def test_schema_init_leaves_out_identifying_columns_and_says_why(tmp_path):
    data, out = tmp_path / "rows.csv", tmp_path / "cb.json"
    _identifier_table(data)
    r = marg("schema", "init", data, "--label", "outcome", "--out", out, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    cb = json.loads(out.read_text())
    assert [f["name"] for f in cb["features"]] == ["ward", "age"]
    said = {ln.split("'")[1]: ln for ln in r.stderr.splitlines() if ln.startswith("left out ")}
    assert set(said) == {"MRN", "ref", "visit_no", "code"}
    assert "name says it identifies patients ('mrn')" in said["MRN"]
    assert "600 distinct values in 600 rows" in said["ref"]
    assert "every one of the 600 rows" in said["visit_no"]
    assert "150 levels, above the level cap 100" in said["code"]
    j = json.loads(marg("schema", "init", data, "--label", "outcome", "--out", out, "--json", cwd=tmp_path).stdout)
    assert {x["column"] for x in j["left_out"]} == set(said) and j["features"] == ["ward", "age"]
    # forced categorical: kept in the draft; export then refuses it above the level cap, nothing written
    r = marg("schema", "init", data, "--label", "outcome", "--out", out, "--categorical", "code", cwd=tmp_path)
    assert r.returncode == 0 and "code" in [f["name"] for f in json.loads(out.read_text())["features"]]
    before = folder_bytes(tmp_path)
    args = ["export", data, "--schema", out, "--site", "s", "--out", tmp_path / "b.bundle", "--no-ledger", "--min-cell",
            "1"]
    r = marg(*args, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "feature 'code' has 150 levels, above the level cap 100 (--max-levels)" in r.stderr
    assert folder_bytes(tmp_path) == before
    assert marg(*args, "--max-levels", "200", "--allow-draft", cwd=tmp_path).returncode == 0


def test_pair_tables_left_out_for_size_are_named(tmp_path):
    """--stats auto under DP drops every pair table when they would exceed 250,000 cells: a warning
    line names the count of cells and the largest table."""
    from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label

    levels = tuple(f"v{k}" for k in range(90))
    cb = Codebook(features=tuple(CategoricalFeature(f"f{i}", levels) for i in range(10)), label=Label("y", ("0", "1")))
    schema = tmp_path / "cb.json"
    cb.save(schema)
    rng = np.random.default_rng(0)
    data = tmp_path / "rows.csv"
    with open(data, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow([f"f{i}" for i in range(10)] + ["y"])
        for _ in range(50):
            w.writerow([f"v{k}" for k in rng.integers(0, 90, 10)] + [str(rng.integers(0, 2))])
    r = marg("export", data, "--schema", schema, "--site", "s", "--out", tmp_path / "b.bundle", "--epsilon", "1",
             "--rounds", "1",
             "--no-ledger", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    warn = [ln for ln in r.stderr.splitlines() if ln.startswith("warning: the 45 pair tables are left out")]
    assert len(warn) == 1 and "729,000 cells, above 250,000" in warn[0] and "N[f0,f1,y], 16,200 cells" in warn[0]
    assert "10 tables" in r.stdout or "11 tables" in r.stdout  # first-order tables only
