"""The privacy budget cannot be reset (issue 18): each attack of the issue, refused with one line, nothing written."""

from __future__ import annotations

import json
import shutil

import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519
from typer.testing import CliRunner

from marg._util import canonical_json
from marg.cli.main import app
from marg.marginals.synthetic import SITES, demo_codebook, generate, write_csv
from marg.protocols.ledger_format import entry_signing_bytes, line_hash
from marg.protocols.keys import key_id
from marg.protocols.signing import b64

runner = CliRunner()


def run(*args, home):
    return runner.invoke(app, [str(a) for a in args], env={"MARG_HOME": str(home)})


@pytest.fixture
def site(tmp_path):
    """A configured site 'north' (cap ε = 10) that has exported twice at ε = 2.5 (true spend 5)."""
    home = tmp_path / "home"
    schema = tmp_path / "codebook.json"
    demo_codebook().save(schema)
    assert run("keys", "init", "--site", "north", "--dir", tmp_path / "keys", home=home).exit_code == 0
    r = run("audit", "init", "--site", "north", "--key", tmp_path / "keys" / "north.sign.key", "--epsilon", "10", home=home)
    assert r.exit_code == 0, r.output
    data = tmp_path / "north.csv"
    write_csv(data, generate(800, SITES[0], seed=1))
    s = {"tmp": tmp_path, "home": home, "schema": schema, "data": data, "ledger": home / "ledger"}
    for i in range(2):
        r = export(s, 2.5, f"b{i}.bundle")
        assert r.exit_code == 0, r.output
    return s


def export(s, eps, name, *extra, home=None):
    return run("export", s["data"], "--schema", s["schema"], "--site", "north", "--out", s["tmp"] / name,
               "--epsilon", eps, "--mechanism", "laplace", "--stats", "first", *extra, home=home or s["home"])


def lines(s):
    return (s["ledger"] / "ledger.jsonl").read_bytes().split(b"\n")[:-1]


def write(s, ls):
    (s["ledger"] / "ledger.jsonl").write_bytes(b"".join(ln + b"\n" for ln in ls))


def refused(s, r, words, name="x.bundle"):
    """One line on stderr naming the problem, exit 1, no bundle, the ledger unchanged."""
    assert r.exit_code == 1, r.output
    assert r.stderr.count("\n") == 1 and any(w in r.stderr for w in words.split("|")), r.stderr
    assert not (s["tmp"] / name).exists()


def snapshot(s):
    return {p.name: p.read_bytes() for p in s["ledger"].iterdir() if p.is_file()}


def test_the_cap_holds_and_verify_passes(site):
    s = site
    before = snapshot(s)
    refused(s, export(s, 6, "x.bundle"), "privacy budget exhausted")
    assert snapshot(s) == before
    r = run("audit", "verify", home=s["home"])
    assert r.exit_code == 0 and "OK: 3 entries" in r.stdout and "site configuration" in r.stdout


def test_edited_cap_entry_or_checkpoint_or_budget_json(site):
    s = site
    ls = lines(s)
    cap = json.loads(ls[0])
    assert cap["kind"] == "cap"
    cap["cap"]["epsilon"] = 1000.0
    write(s, [canonical_json(cap)] + ls[1:])
    refused(s, export(s, 6, "x.bundle"), "does not match its checkpoint|bad signature")
    r = run("audit", "verify", home=s["home"])
    assert r.exit_code == 1 and "entry seq 1" in r.stderr and "bad signature" in r.stderr
    # the cap entry deleted: the chain breaks there
    write(s, ls[1:])
    refused(s, export(s, 6, "x.bundle"), "truncated or edited|does not match its checkpoint")
    (s["ledger"] / "checkpoint.json").rename(s["tmp"] / "cp.json")
    refused(s, export(s, 6, "x.bundle"), "expected seq 1")
    (s["tmp"] / "cp.json").rename(s["ledger"] / "checkpoint.json")
    write(s, ls)
    # the checkpoint edited (its cumulative spend lowered): its signature breaks
    cp = json.loads((s["ledger"] / "checkpoint.json").read_text())
    cp["state"]["cumulative"]["epsilon"] = 0.0
    (s["ledger"] / "checkpoint.json").write_bytes(canonical_json(cp))
    refused(s, export(s, 6, "x.bundle"), "bad checkpoint signature")
    # a budget.json beside the chain (the old way to set a cap) changes nothing
    (s["ledger"] / "checkpoint.json").unlink()  # the full check rebuilds the state from the chain
    (s["ledger"] / "budget.json").write_text('{"format": "marg-budget", "version": 1, "epsilon": 1000, "delta": 0, "rho": 0}')
    refused(s, export(s, 6, "x.bundle"), "privacy budget exhausted")
    assert export(s, 5, "ok.bundle").exit_code == 0  # exactly up to the cap


def test_deleted_or_truncated_ledger(site):
    s = site
    backup = snapshot(s)
    (s["ledger"] / "ledger.jsonl").unlink()
    refused(s, export(s, 6, "x.bundle"), "missing")
    r = run("audit", "verify", home=s["home"])
    assert r.exit_code == 1 and "truncated" in r.stderr
    # the ledger AND its checkpoint deleted: the site configuration still knows the head
    (s["ledger"] / "checkpoint.json").unlink()
    refused(s, export(s, 6, "x.bundle"), "truncated, deleted or rolled back")
    # the last entry cut off
    for name, data in backup.items():
        (s["ledger"] / name).write_bytes(data)
    write(s, lines(s)[:-1])
    refused(s, export(s, 6, "x.bundle"), "truncated")
    (s["ledger"] / "checkpoint.json").unlink()
    refused(s, export(s, 6, "x.bundle"), "truncated, deleted or rolled back")
    r = run("audit", "verify", home=s["home"])
    assert r.exit_code == 1 and "rolled back" in r.stderr


def test_rolled_back_ledger_folder(site):
    s = site
    old = s["tmp"] / "old-ledger"
    shutil.copytree(s["ledger"], old)
    assert export(s, 1, "b2.bundle").exit_code == 0
    shutil.rmtree(s["ledger"])
    shutil.copytree(old, s["ledger"])  # the folder as it was one export ago: a valid, shorter chain
    refused(s, export(s, 6, "x.bundle"), "rolled back")
    r = run("audit", "verify", home=s["home"])
    assert r.exit_code == 1 and "rolled back" in r.stderr


def test_re_signed_ledger_with_lowered_costs(site):
    """Rewrite the whole ledger (costs lowered to 0.1 each) and re-sign it and its checkpoint
    with another key: refused, since the site pins its key."""
    s = site
    other = ed25519.Ed25519PrivateKey.generate()
    prev, out = "0" * 64, []
    total = 0.0
    for ln in lines(s):
        e = json.loads(ln)
        if e["kind"] == "release":
            e["cost"]["epsilon"] = 0.1
            total += 0.1
            e["cumulative"]["epsilon"] = total
        e["prev"], e["key_id"], e["signature"] = prev, key_id(other), None
        e["signature"] = b64(other.sign(entry_signing_bytes(e)))
        out.append(canonical_json(e))
        prev = line_hash(out[-1])
    write(s, out)
    (s["ledger"] / "checkpoint.json").unlink()
    refused(s, export(s, 9, "x.bundle"), "not the site's key")
    r = run("audit", "verify", home=s["home"])
    assert r.exit_code == 1 and "not the site's key" in r.stderr


def test_lowered_recorded_costs_cannot_buy_budget(site):
    """The issue's attack: costs of earlier entries edited down, then ε = 9 asked on a cap of 10
    (true total 14). The spend comes from the signed checkpoint: refused; audit names the entry."""
    s = site
    ls = lines(s)
    edited = []
    for ln in ls:
        e = json.loads(ln)
        if e["kind"] == "release":
            e["cost"]["epsilon"] = 0.1
            e["cumulative"]["epsilon"] = 0.1 * (e["seq"] - 1)
        edited.append(canonical_json(e))
    write(s, edited)
    r = export(s, 9, "x.bundle")
    refused(s, r, "privacy budget exhausted|does not match its checkpoint|truncated or edited")
    r = run("audit", "verify", home=s["home"])
    assert r.exit_code == 1 and "entry seq 2" in r.stderr and "bad signature" in r.stderr


def test_no_ledger_other_ledger_other_directory(site, tmp_path, monkeypatch):
    s = site
    refused(s, export(s, 1, "x.bundle", "--no-ledger"), "--no-ledger refused")
    refused(s, export(s, 1, "x.bundle", "--ledger", tmp_path / "fresh"), "not site 'north'")
    assert not (tmp_path / "fresh").exists()
    other_key = tmp_path / "k2"
    assert run("keys", "init", "--site", "north", "--dir", other_key, home=s["home"]).exit_code == 0
    refused(s, export(s, 1, "x.bundle", "--key", other_key / "north.sign.key"), "not site 'north''s pinned key")
    refused(s, run("export", s["data"], "--schema", s["schema"], "--site", "south", "--out", s["tmp"] / "x.bundle",
                   "--epsilon", 1, "--mechanism", "laplace", home=s["home"]), "configured as site 'north'")
    # another working directory: the export is still recorded in (and capped by) the site's ledger
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    refused(s, export(s, 6, "x.bundle"), "privacy budget exhausted")
    assert not (elsewhere / "marg-ledger").exists()


def test_edited_site_configuration(site):
    s = site
    cfg = json.loads((s["home"] / "site.json").read_text())
    cfg["ledger"] = str(s["tmp"] / "fresh")
    cfg["head"] = None
    (s["home"] / "site.json").write_bytes(canonical_json(cfg))
    refused(s, export(s, 1, "x.bundle"), "site configuration")
    r = run("audit", "init", "--site", "north", "--key", s["tmp"] / "keys" / "north.sign.key", home=s["home"])
    assert r.exit_code == 1 and "bad signature" in r.stderr


def test_a_site_is_configured_once(site):
    s = site
    r = run("audit", "init", "--site", "north", "--key", s["tmp"] / "keys" / "north.sign.key", "--ledger",
            s["tmp"] / "fresh", home=s["home"])
    assert r.exit_code == 1 and "already names ledger" in r.stderr
    r = run("audit", "budget", "--epsilon", "100", home=s["home"])
    assert r.exit_code == 1 and "raises the privacy cap" in r.stderr
    r = run("audit", "budget", "--json", home=s["home"])
    assert json.loads(r.stdout)["cap"]["epsilon"] == 10.0


def test_a_site_answers_a_round_once(site):
    """A learner that sends the same round twice gets one answer: the second is refused before any
    data is read (for secure aggregation a second masked vector under one round would leak)."""
    s = site
    r = run("round", "--schema", s["schema"], "--out", s["tmp"] / "round.json", home=s["home"])
    assert r.exit_code == 0, r.output
    r = export(s, 1, "r1.bundle", "--round", s["tmp"] / "round.json")
    assert r.exit_code == 0, r.output
    rid = json.loads((s["tmp"] / "round.json").read_text())["id"]
    assert json.loads(lines(s)[-1])["round"] == rid
    before = snapshot(s)
    refused(s, export(s, 1, "x.bundle", "--round", s["tmp"] / "round.json"), "already answered")
    assert snapshot(s) == before
