"""The local administrator's rollback and --no-ledger export (issue 25), detected by the learner and the auditor.

Local state cannot stop a site's own administrator from forking its ledger; every bundle
carries its signed ledger position, ``marg learn`` keeps each site's history and refuses a
fork, and ``marg audit verify --bundles`` names it at the site. All through the installed
console script.
"""

from __future__ import annotations

import shutil

import pytest

from marg.marginals.synthetic import SITES, demo_codebook, generate, write_csv
from tests.helpers.console import marg
from tests.helpers.files import folder_bytes


@pytest.fixture
def north(tmp_path):
    """Site north configured with cap ε = 3, its trust store for the learner, and two releases at ε = 1."""
    home, learner = tmp_path / "home", tmp_path / "learner-home"
    schema = tmp_path / "codebook.json"
    demo_codebook().save(schema)
    r = marg("keys", "init", "--site", "north", "--dir", tmp_path / "keys", cwd=tmp_path, home=home)
    assert r.returncode == 0, r.stderr
    trust = tmp_path / "trust"
    trust.mkdir()
    shutil.copy(tmp_path / "keys" / "north.sign.pub", trust)
    r = marg("audit", "init", "--site", "north", "--key", tmp_path / "keys" / "north.sign.key", "--epsilon", "3",
             cwd=tmp_path, home=home)
    assert r.returncode == 0, r.stderr
    data = tmp_path / "north.csv"
    write_csv(data, generate(600, SITES[0], seed=3))
    s = {"tmp": tmp_path, "home": home, "learner": learner, "schema": schema, "data": data, "trust": trust}
    for name in ("b1", "b2"):
        assert export(s, name).returncode == 0
    return s


def export(s, name, *extra, home=None):
    r = marg("export", s["data"], "--schema", s["schema"], "--site", "north", "--out", s["tmp"] / f"{name}.bundle",
             "--epsilon", "1", "--mechanism", "laplace", "--stats", "first", *extra, cwd=s["tmp"],
             home=home or s["home"])
    assert r.returncode == 0 or name == "refused", r.stderr
    return r


def learn(s, *names, extra=()):
    return marg("learn", *[s["tmp"] / f"{n}.bundle" for n in names], "--out", s["tmp"] / "m.json", "--learner", "nb",
                "--trust", s["trust"], *extra, cwd=s["tmp"], home=s["learner"])


def verify(s, *names):
    args = [a for n in names for a in ("--bundles", s["tmp"] / f"{n}.bundle")]
    return marg("audit", "verify", *args, cwd=s["tmp"], home=s["home"])


def one_line(r, *words):
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1, r.stderr
    for w in words:
        assert w in r.stderr, r.stderr


def rollback(s):
    """Copy site.json and the ledger, export b3, restore them, export b4: four ε = 1 releases under a cap of 3."""
    snap = folder_bytes(s["home"])
    export(s, "b3")
    for p in [p for p in s["home"].rglob("*") if p.is_file()]:
        p.unlink()
    for name, data in snap.items():
        (s["home"] / name).parent.mkdir(parents=True, exist_ok=True)
        (s["home"] / name).write_bytes(data)
    export(s, "b4")
    assert export(s, "refused").returncode == 1  # the restored ledger's cap is spent: the site sees 3, not 4


def test_rollback_is_invisible_to_the_site_ledger_alone(north):
    """The attack of the issue: the restored ledger verifies without the bundles."""
    rollback(north)
    r = marg("audit", "verify", cwd=north["tmp"], home=north["home"])
    assert r.returncode == 0, r.stderr


def test_rollback_refused_by_the_learner_in_one_run(north):
    rollback(north)
    r = learn(north, "b3", "b4")
    one_line(r, "b4.bundle", "fork in site 'north'", "position 4 holds bundle", "b3.bundle")
    assert not (north["tmp"] / "m.json").exists()


def test_rollback_refused_by_the_learner_across_runs(north):
    """One learn per release (each answered another question): b4 at b3's position is a fork;
    the same bundle again is none; a new bundle behind the newest received goes back."""
    rollback(north)
    # b3 first (a site's first bundle is taken at any position; b1 then b3 would leave position 3 unshown:
    # refused since issue 45, tests/protocols/test_fresh_position_fork.py)
    r = learn(north, "b3")
    assert r.returncode == 0, r.stderr
    r = learn(north, "b4")
    one_line(r, "fork in site 'north'", "position 4 holds bundle", "b3.bundle")
    assert learn(north, "b3").returncode == 0  # the same bundle again: no fork
    # issue 35: b2 (position 3, never received) after b3 (position 4) is no rollback: b3 names it as its
    # predecessor — a consistent earlier bundle is accepted, and b1, which b2 names, after it
    for name in ("b2", "b1"):
        r = learn(north, name)
        assert r.returncode == 0, r.stderr


def test_an_earlier_bundle_no_received_bundle_confirms_is_refused(north):
    """b1 (position 2) after only b3 (position 4): nothing received beside it confirms the chain; once b2
    (confirmed by b3 naming it) is in, b1 is confirmed by b2 and accepted."""
    rollback(north)
    assert learn(north, "b3").returncode == 0
    one_line(learn(north, "b1"), "fork in site 'north'", "position 2 goes back behind position 4",
             "no bundle received beside it")
    assert learn(north, "b2").returncode == 0
    assert learn(north, "b1").returncode == 0


def test_rollback_named_by_audit_verify_bundles(north):
    rollback(north)
    assert verify(north, "b1", "b2", "b4").returncode == 0
    r = verify(north, "b1", "b2", "b3", "b4")
    assert r.returncode == 1
    assert ("b3.bundle" in r.stderr + r.stdout and "position 4" in r.stderr + r.stdout
            and "forked" in r.stderr + r.stdout)


def test_no_ledger_export_elsewhere_is_refused_and_named(north, tmp_path):
    """MARG_HOME=/elsewhere marg export ... --no-ledger --key north.sign.key: a valid north signature, recorded
    nowhere."""
    r = export(north, "b5", "--no-ledger", "--key", tmp_path / "keys" / "north.sign.key", home=tmp_path / "elsewhere")
    assert r.returncode == 0, r.stderr
    r = learn(north, "b5")
    one_line(r, "b5.bundle", "without a ledger position", "--allow-unledgered")
    assert learn(north, "b5", extra=("--allow-unledgered",)).returncode == 0
    r = verify(north, "b1", "b5")
    assert r.returncode == 1 and "no ledger position" in r.stderr + r.stdout


def test_fresh_ledger_elsewhere_is_another_origin(north, tmp_path):
    """Another MARG_HOME with a fresh ledger (its own cap entry): bundles descend from another first entry."""
    elsewhere = tmp_path / "elsewhere"
    r = marg("audit", "init", "--site", "north", "--key", tmp_path / "keys" / "north.sign.key", "--epsilon", "3",
             cwd=tmp_path, home=elsewhere)
    assert r.returncode == 0, r.stderr
    export(north, "b6", home=elsewhere)
    assert learn(north, "b1").returncode == 0
    r = learn(north, "b6")  # position 2 again: the same position, another release
    one_line(r, "fork in site 'north'", "position 2")
    export(north, "b7", home=elsewhere)  # position 3 of the other ledger
    r = learn(north, "b7")
    one_line(r, "fork in site 'north'", "another ledger")
