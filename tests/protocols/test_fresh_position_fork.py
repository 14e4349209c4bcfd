"""A re-signed fork at a fresh ledger position (issue 45), through the installed console script.

The site's administrator (whoever holds north's signing key and a copy of its ``MARG_HOME``) exports
from a copy of the ledger: the copy's releases stand at positions the real ledger has not reached, so
no bundle the learner held was at the same position, and before this issue the learner accepted the
fork "until the real release at that position arrives" — which may be never. The learner now expects
each known site's next position and refuses a bundle beyond it unless the releases in between are shown
(their bundles, or the site's signed ledger lines, ``--site-ledger``); ``marg audit verify`` at the
site names the fork.
"""

from __future__ import annotations

import shutil

import pytest

from marg.marginals.synthetic import SITES, demo_codebook, generate, write_csv
from tests.helpers.console import marg, run
from tests.helpers.files import folder_bytes


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """north (cap ε = 10) with releases b1, b2 (positions 2, 3) that the learner has learned, a fork
    made from a copy of its home (f4, f5 at positions 4, 5) and the real release b3 at position 4."""
    tmp = tmp_path_factory.mktemp("fresh-fork")
    home, copy, learner = tmp / "home", tmp / "fork-ledger.jsonl", tmp / "learner"
    schema = tmp / "codebook.json"
    demo_codebook().save(schema)
    # the site's side in this process (the console script runs what the attack and its detection use)
    assert run("keys", "init", "--site", "north", "--dir", tmp / "keys", home=home).exit_code == 0
    trust = tmp / "trust"
    trust.mkdir()
    shutil.copy(tmp / "keys" / "north.sign.pub", trust)
    r = run("audit", "init", "--site", "north", "--key", tmp / "keys" / "north.sign.key", "--epsilon", "10", home=home)
    assert r.exit_code == 0, r.output
    data = tmp / "north.csv"
    write_csv(data, generate(300, SITES[0], seed=4))
    s = {"tmp": tmp, "home": home, "learner": learner, "schema": schema, "data": data, "trust": trust}
    for name in ("b1", "b2"):  # one learn each: a site's tables are summed once a run
        export(s, name)
        assert learn(s, name, console=False).exit_code == 0
    snap = folder_bytes(home)  # the administrator's copy of the site's state (site.json, ledger)
    for name in ("f4", "f5"):  # the fork's releases: positions 4 and 5, beyond the head 3 the site keeps
        export(s, name)
    shutil.copy(home / "ledger" / "ledger.jsonl", copy)  # the fork's ledger, kept by the forker
    for p in [p for p in home.rglob("*") if p.is_file()]:
        p.unlink()
    for name, blob in snap.items():  # restored: the site's ledger never held f4, f5
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_bytes(blob)
    export(s, "b3")  # the real release at position 4
    s["copy"] = copy
    return s


def export(s, name):
    r = run("export", s["data"], "--schema", s["schema"], "--site", "north", "--out", s["tmp"] / f"{name}.bundle",
            "--epsilon", "1", "--mechanism", "laplace", "--stats", "first", home=s["home"])
    assert r.exit_code == 0, r.output


def learn(s, *names, extra=(), history=None, console=True):
    h = history or s["tmp"] / "history.json"
    args = ("learn", *[s["tmp"] / f"{n}.bundle" for n in names], "--out", s["tmp"] / "m.json", "--learner", "prior",
            "--no-sign", "--trust", s["trust"], "--history", h, *extra)
    return marg(*args, cwd=s["tmp"], home=s["learner"]) if console else run(*args, home=s["learner"])


def one_line(r, *words):
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1, r.stderr
    for w in words:
        assert w in r.stderr, r.stderr


def fresh(s, name):
    """A copy of the learner's history after b1, b2 (each test starts from there)."""
    h = s["tmp"] / f"history-{name}.json"
    shutil.copy(s["tmp"] / "history.json", h)
    return h


def test_a_fork_at_a_fresh_position_is_refused_by_the_learner(site):
    """The attack: f5 (position 5, from the copy) after positions 2 and 3. Accepted before this issue
    (no bundle held at 4 or 5 to contradict it); now refused, naming the missing position."""
    h = fresh(site, "attack")
    r = learn(site, "f5", history=h)
    one_line(r, "f5.bundle", "site 'north'", "position 5", "next expected position 4", "--site-ledger")
    assert h.read_bytes() == (site["tmp"] / "history.json").read_bytes()  # nothing recorded
    # the forker shows its copy's ledger (its lines are north's, signed): accepted, and the real b3 at 4
    # is then the fork found (the learner holds the copy's line at 4)
    r = learn(site, "f5", extra=("--site-ledger", site["copy"]), history=h)
    assert r.returncode == 0, r.stderr
    one_line(learn(site, "b3", history=h), "fork in site 'north'", "position 4")


def test_audit_verify_at_the_site_names_the_fork(site):
    r = marg("audit", "verify", "--bundles", site["tmp"] / "f5.bundle", cwd=site["tmp"], home=site["home"])
    assert r.returncode == 1, r.stdout
    out = r.stdout + r.stderr
    assert "f5.bundle" in out and "a fork at a fresh position" in out and "position 5" in out, out
    assert "has 4 entries" in out, out


def test_the_sites_signed_ledger_shows_the_positions_in_between(site):
    """b3 went elsewhere; the learner gets the site's next release at 5 with the site's ledger lines."""
    h = fresh(site, "ledger")
    export(site, "b4")  # position 5 of the real ledger
    one_line(learn(site, "b4", history=h), "position 5", "next expected position 4")
    real = site["home"] / "ledger" / "ledger.jsonl"
    r = learn(site, "b4", extra=("--site-ledger", real), history=h)
    assert r.returncode == 0, r.stderr
    # the fork's f5 is now at a position the real ledger's signed line holds: refused
    one_line(learn(site, "f5", history=h), "fork in site 'north'", "position 5")
    # a ledger whose lines are re-signed by another key, or edited, shows nothing
    bad = site["tmp"] / "edited.jsonl"
    bad.write_bytes(real.read_bytes().replace(b'"recipient":null', b'"recipient":nul', 1))
    r = learn(site, "b4", extra=("--site-ledger", bad), history=fresh(site, "bad"))
    one_line(r, "edited.jsonl", "line")
