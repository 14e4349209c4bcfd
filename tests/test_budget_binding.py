"""The budget cannot be reset: edits, deletions and rewrites of the ledger folder are refused."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from marg.cli.main import app
from marg.marginals.synthetic import SITES, demo_codebook, generate, write_csv

runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture
def site(tmp_path):
    schema = tmp_path / "codebook.json"
    demo_codebook().save(schema)
    write_csv(tmp_path / "rows.csv", generate(600, SITES[0], seed=5))
    for who in ("north", "mallory"):
        assert run("keys", "init", "--site", who, "--dir", tmp_path / "keys").exit_code == 0
    led = tmp_path / "ledger"
    assert run("audit", "budget", "--ledger", led, "--epsilon", "3").exit_code == 0

    def export(name, eps="1", key="north"):
        out = tmp_path / f"{name}.bundle"
        return run("export", tmp_path / "rows.csv", "--schema", schema, "--site", "north", "--out", out, "--stats", "first",
                   "--epsilon", eps, "--mechanism", "laplace", "--ledger", led, "--key", tmp_path / "keys" / f"{key}.sign.key"), out

    r, _ = export("first")
    assert r.exit_code == 0, r.output
    return tmp_path, led, export


def refused(r, out, words):
    assert r.exit_code == 1, r.output
    assert words in r.stderr and r.stderr.count("\n") == 1
    assert not out.exists()


def test_raising_the_cap_in_budget_json_is_refused(site):
    tmp, led, export = site
    (led / "budget.json").write_text((led / "budget.json").read_text().replace("3", "1000"))
    refused(*export("x"), "budget.json was edited or deleted")


def test_deleting_budget_json_is_refused(site):
    tmp, led, export = site
    (led / "budget.json").unlink()
    refused(*export("x"), "budget.json was edited or deleted")


def test_deleting_or_truncating_the_ledger_is_refused(site):
    tmp, led, export = site
    r, _ = export("second")
    assert r.exit_code == 0
    lines = (led / "ledger.jsonl").read_text().splitlines(keepends=True)
    (led / "ledger.jsonl").write_text(lines[0])
    refused(*export("x"), "was truncated")
    (led / "ledger.jsonl").unlink()
    refused(*export("y"), "was deleted")


def test_a_rewritten_ledger_with_lower_costs_is_refused(site):
    tmp, led, export = site
    path = led / "ledger.jsonl"
    e = json.loads(path.read_text())
    e["cost"]["epsilon"] = 0.001
    e["cumulative"]["epsilon"] = 0.001
    e["signature"], e["key_id"] = None, None  # an attacker cannot re-sign with the site's key
    path.write_text(json.dumps(e, separators=(",", ":"), sort_keys=True) + "\n")
    refused(*export("x"), "was rewritten")


def test_a_ledger_re_signed_with_another_key_is_refused(site, tmp_path):
    tmp, led, export = site
    # mallory's key signs an export into the site's ledger: the earlier entries are the site's
    r, out = export("x", key="mallory")
    refused(r, out, "is pinned to key")


def test_the_cap_still_binds_after_all_this(site):
    tmp, led, export = site
    r, _ = export("second", eps="1.5")
    assert r.exit_code == 0
    refused(*export("third", eps="1"), "privacy budget exhausted")
