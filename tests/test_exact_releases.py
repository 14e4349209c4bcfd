"""Exact releases through the ledger (issue 18): the one-patient difference, suppression that says
only that it happened, and suppression across releases."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from typer.testing import CliRunner

from marg.cli.main import app
from marg.marginals.synthetic import SITES, demo_codebook, generate, write_csv
from marg.protocols.bundle import load_bundle

runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture
def site(tmp_path):
    schema = tmp_path / "codebook.json"
    demo_codebook().save(schema)
    data = tmp_path / "all.csv"
    write_csv(data, generate(3000, SITES[0], seed=11))
    rows = list(csv.reader(open(data)))
    minus = tmp_path / "minus_one.csv"
    with open(minus, "w", newline="") as fh:
        csv.writer(fh).writerows(rows[:-1])  # the same data without its last patient
    assert run("keys", "init", "--site", "north", "--dir", tmp_path / "keys").exit_code == 0
    return tmp_path, schema, data, minus, rows


def export(tmp, schema, data, name, *extra):
    return run("export", data, "--schema", schema, "--site", "north", "--out", tmp / name, "--stats", "first",
               "--key", tmp / "keys" / "north.sign.key", "--ledger", tmp / "ledger", *extra)


def test_the_one_patient_difference_is_refused(site):
    tmp, schema, data, minus, rows = site
    r = export(tmp, schema, data, "a.bundle", "--min-cell", "1")
    assert r.exit_code == 0, r.output
    # the attack: a second exact export without the last patient; the two bundles' difference is that patient
    r = export(tmp, schema, minus, "b.bundle", "--min-cell", "1", "--ledger", tmp / "other-ledger")
    assert r.exit_code == 0  # (an unconfigured site can use another ledger: see test_budget_attacks for configured ones)
    a, b = load_bundle(tmp / "a.bundle"), load_bundle(tmp / "b.bundle")
    diff = {t.name: t.counts - u.counts for t, u in zip(a.tables, b.tables)}
    cb = demo_codebook()
    for f in cb.features:
        d = diff[f"N[{f.name},{cb.label.name}]"]
        assert d.sum() == 1  # exactly one cell moved: that patient's level and label
    # through the site's own ledger the second release is refused, nothing written
    before = (tmp / "ledger" / "ledger.jsonl").read_bytes()
    r = export(tmp, schema, minus, "c.bundle", "--min-cell", "1")
    assert r.exit_code == 1 and r.stderr.count("\n") == 1
    assert "differs from the exact release of ledger entry #1" in r.stderr and "DP" in r.stderr
    assert not (tmp / "c.bundle").exists() and (tmp / "ledger" / "ledger.jsonl").read_bytes() == before
    # the same numbers again disclose nothing new: allowed; the changed data with DP: allowed
    assert export(tmp, schema, data, "again.bundle", "--min-cell", "1").exit_code == 0
    r = export(tmp, schema, minus, "dp.bundle", "--epsilon", "1")
    assert r.exit_code == 0, r.output


def test_suppression_is_said_not_located_and_counted_in_the_ledger(site):
    tmp, schema, data, minus, rows = site
    data = tmp / "small.csv"  # few rows: small cells in the first-order tables
    with open(data, "w", newline="") as fh:
        csv.writer(fh).writerows(rows[:81])
    r = export(tmp, schema, data, "s.bundle", "--min-cell", "5", "--min-cell-policy", "suppress")
    assert r.exit_code == 0, r.output
    b = load_bundle(tmp / "s.bundle")
    assert b.header["min_cell"] == {"k": 5, "policy": "suppress", "suppressed": True}
    per_table = b.header["suppressed_cells"]  # how many per table, never where
    assert all(isinstance(v, int) and v > 0 for v in per_table.values())
    assert "cell" not in json.dumps(per_table)
    entry = json.loads((tmp / "ledger" / "ledger.jsonl").read_text().splitlines()[-1])
    assert entry["suppressed"] == sum(per_table.values()) >= 2  # a primary cell and a complementary one
    # every small cell of the release is either zero or hidden; none between 0 and k remains
    for t in b.tables:
        c = np.asarray(t.counts)
        assert not np.any((c > 0) & (c < 5))
    # the same release again discloses nothing new: allowed
    assert export(tmp, schema, data, "again.bundle", "--min-cell", "5", "--min-cell-policy", "suppress").exit_code == 0
    # a later exact release overlapping it with other numbers could recompute the hidden cells: refused
    r = export(tmp, schema, data, "t.bundle", "--min-cell", "1")
    assert r.exit_code == 1 and "suppressed cells" in r.stderr and not (tmp / "t.bundle").exists()
