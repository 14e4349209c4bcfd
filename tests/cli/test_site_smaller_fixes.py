"""Smaller things that tripped a new site (issue 37, item 10), each failing on the old marg:
``audit init`` with a higher cap refused before site.json or the ledger is touched (the old one
re-saved them, then refused); ``export --holdout auto --json`` carries the round-2 plan the text
prints; ``audit verify --bundles A B`` takes several files after one flag."""

from __future__ import annotations

import json
import os

from marg.marginals.synthetic import SITES, demo_codebook, generate, write_csv
from tests.helpers.console import marg
from tests.helpers.files import folder_bytes


def configured(tmp_path):
    env = {"MARG_HOME": str(tmp_path / "home")}
    demo_codebook().save(tmp_path / "cb.json")
    write_csv(tmp_path / "north.csv", generate(500, SITES[0], seed=7), slice(0, 500))
    assert marg("keys", "init", "--site", "north", "--dir", tmp_path / "keys", cwd=tmp_path, env=env).returncode == 0
    r = marg("audit", "init", "--site", "north", "--key", tmp_path / "keys" / "north.sign.key", "--epsilon", "1",
             "--delta", "1e-5", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    return env


def test_audit_init_with_a_higher_cap_writes_nothing(tmp_path):
    env = configured(tmp_path)
    home = tmp_path / "home"
    before = folder_bytes(home)
    times = {p: os.stat(p).st_mtime_ns for p in home.rglob("*") if p.is_file()}
    r = marg("audit", "init", "--site", "north", "--key", tmp_path / "keys" / "north.sign.key", "--epsilon", "2",
             cwd=tmp_path, env=env)
    assert r.returncode == 1 and r.stdout == "" and r.stderr.count("\n") == 1, r.stdout + r.stderr
    assert "raises the privacy cap from ε=1 at δ=1e-05 (ρ not capped) to ε=2 at δ=1e-05" in r.stderr
    assert folder_bytes(home) == before
    assert {p: os.stat(p).st_mtime_ns for p in home.rglob("*") if p.is_file()} == times  # not even re-saved
    r = marg("audit", "init", "--site", "north", "--key", tmp_path / "keys" / "north.sign.key", "--epsilon", "0.8",
             cwd=tmp_path, env=env)
    assert r.returncode == 0 and "ε=0.8 at δ=1e-05" in r.stdout  # lowering is fine (δ in force kept)


def test_holdout_auto_json_has_the_round_2_plan_and_verify_takes_several_bundles(tmp_path):
    env = configured(tmp_path)
    args = ["export", tmp_path / "north.csv", "--schema", tmp_path / "cb.json", "--site", "north", "--epsilon", "1",
            "--holdout", "auto", "--plan-rows", "500", "--plan-sites", "3", "--stats", "first"]
    text = marg(*args, "--out", tmp_path / "a.bundle", "--dry-run", cwd=tmp_path, env=env).stdout
    assert "evaluate later with --evaluate MODEL --epsilon" in text
    for extra in (["--dry-run"], []):
        r = marg(*args, "--out", tmp_path / "a.bundle", "--json", *extra, cwd=tmp_path, env=env)
        assert r.returncode == 0, r.stderr
        plan = json.loads(r.stdout)["holdout_plan"]
        assert plan["round_2"]["epsilon"] == plan["epsilon_evaluate"] > 0
        assert plan["epsilon_tables"] + plan["epsilon_evaluate"] == 1.0
        assert f"--epsilon {plan['epsilon_evaluate']:.4g}" in text and f"{plan['expected_certificate']:.3f}" in text
    r = marg("export", tmp_path / "north.csv", "--schema", tmp_path / "cb.json", "--site", "north", "--epsilon", "0.1",
             "--stats", "first", "--out", tmp_path / "b.bundle", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    r = marg("audit", "verify", "--bundles", tmp_path / "a.bundle", tmp_path / "b.bundle", cwd=tmp_path, env=env)
    assert r.returncode == 0 and ("2 bundle file(s) matched their entries: a.bundle→#2, "
                                  "b.bundle→#3") in r.stdout, r.stderr
