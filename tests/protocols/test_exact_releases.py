"""Exact releases through the ledger (issue 18): the one-patient difference, suppression that says
only that it happened, and suppression across releases."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from marg.marginals.synthetic import SITES, demo_codebook
from marg.protocols.bundle import load_bundle
from tests.helpers.console import run
from tests.helpers.study import write_study


@pytest.fixture
def site(tmp_path):
    st = write_study(tmp_path, 3000, seed=11, sites=1)
    schema, data = st.schema, st.data[SITES[0].name]
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
    # (an unconfigured site can use another ledger: see test_budget_attacks for configured ones)
    assert r.exit_code == 0
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
    r = export(tmp, schema, minus, "dp.bundle", "--epsilon", "1", "--rounds", "1")
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


# ---------------------------------------------------------------------------------------
# differencing through a trivially different codebook (issue 25), through the console script
# ---------------------------------------------------------------------------------------
def _variant(schema, path, change):
    d = json.loads(schema.read_text())
    change(d)
    path.write_text(json.dumps(d))
    return path


def _reverse_features(d):
    d["features"].reverse()


def _extra_unused_level(d):
    d["features"][1]["levels"].append("X")


def _extra_level_with_a_space(d):
    d["features"][1]["levels"].append(d["features"][1]["levels"][0] + " ")


def _reverse_classes(d):
    d["label"]["classes"].reverse()


def _reorder_levels(d):
    for f in d["features"]:
        if f["type"] == "categorical":
            f["levels"].reverse()


VARIANTS = [_reverse_features, _extra_unused_level, _extra_level_with_a_space, _reverse_classes, _reorder_levels]


@pytest.fixture
def configured(site, monkeypatch):
    """``site`` configured (``marg audit init``) and one exact first-order export of the site's rows made."""
    from tests.helpers.console import marg

    tmp, schema, data, minus, rows = site
    monkeypatch.setenv("MARG_HOME", str(tmp / "home"))
    assert marg("audit", "init", "--site", "north", "--key", tmp / "keys" / "north.sign.key", cwd=tmp).returncode == 0
    r = marg("export", data, "--schema", schema, "--site", "north", "--out", "a.bundle", "--stats", "first",
             "--min-cell", "1", cwd=tmp)
    assert r.returncode == 0, r.stderr
    return tmp, schema, data, minus, marg


@pytest.mark.parametrize("change", VARIANTS, ids=lambda f: f.__name__.strip("_"))
def test_a_trivially_different_codebook_does_not_open_the_one_patient_difference(configured, change):
    """Threat: whoever writes the codebook varies its form (order of features, levels or classes,
    unused levels, whitespace) so that the guard does not recognise the statistics; the data
    lost one patient in between. Refused in one line, nothing written."""
    tmp, schema, data, minus, marg = configured
    cb2 = _variant(schema, tmp / "cb2.json", change)
    ledger = tmp / "home" / "ledger" / "ledger.jsonl"
    before = ledger.read_bytes()
    r = marg("export", minus, "--schema", cb2, "--site", "north", "--out", "b.bundle", "--stats", "first",
             "--min-cell", "1", cwd=tmp)
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
    assert "differs from the exact release of ledger entry #1" in r.stderr
    assert not (tmp / "b.bundle").exists() and ledger.read_bytes() == before
    # the same data under the varied codebook discloses nothing new: allowed
    r = marg("export", data, "--schema", cb2, "--site", "north", "--out", "c.bundle", "--stats", "first",
             "--min-cell", "1", cwd=tmp)
    assert r.returncode == 0, r.stderr


def test_changing_what_a_level_means_is_refused_even_on_the_same_data(configured):
    """Another missing level (or other bin edges) re-partitions the column: with the first release it
    could isolate the patients in between, so it needs DP."""
    tmp, schema, data, minus, marg = configured

    def other_missing(d):
        f = next(f for f in d["features"] if f.get("missing"))
        f["missing"] = next(lv for lv in f["levels"] if lv != f["missing"])

    cb2 = _variant(schema, tmp / "cb2.json", other_missing)
    r = marg("export", data, "--schema", cb2, "--site", "north", "--out", "b.bundle", "--stats", "first",
             "--min-cell", "1", cwd=tmp)
    assert r.returncode == 1 and "differs from the exact release" in r.stderr and not (tmp / "b.bundle").exists()


def test_exact_digests_of_an_older_marg_keep_their_codebook_scope(tmp_path):
    """Entries written before the canonical digests carry the codebook fingerprint: they verify, and
    a later entry in that old form under the same codebook is still held to them."""
    from cryptography.hazmat.primitives.asymmetric import ed25519

    from marg.errors import RefusedError
    from marg.marginals.accounting import PrivacyCost
    from marg.protocols.ledger import Ledger

    key = ed25519.Ed25519PrivateKey.generate()
    led = Ledger(tmp_path / "L")
    old = {"codebook": "f" * 64, "n": "10", 'm:["a"]': "1" * 32}
    led.append(bundle_digest="0" * 63 + "1", site="s", statistics=[], cost=PrivacyCost.unbounded(), private_key=key,
               exact=old)
    with pytest.raises(RefusedError, match="differs from the exact release of ledger entry #1"):
        led.append(bundle_digest="0" * 63 + "2", site="s", statistics=[], cost=PrivacyCost.unbounded(), private_key=key,
                   exact={**old, "n": "9"})
    # a release in the canonical form is scoped apart (its keys mean other numbers)
    led.append(bundle_digest="0" * 63 + "3", site="s", statistics=[], cost=PrivacyCost.unbounded(), private_key=key,
               exact={"scope": "study", "n": "9"})
    assert led.verify(public_key=key.public_key()).ok
    assert set(led.state().exact) == {"s/" + "f" * 64, "s/#study"}
