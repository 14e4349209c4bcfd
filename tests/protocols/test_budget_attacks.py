"""The privacy budget cannot be reset (issue 18): each attack of the issue, refused with one line, nothing written."""

from __future__ import annotations

import json
import shutil

import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519

from marg._util import canonical_json
from marg.marginals.synthetic import SITES, demo_codebook, generate, write_csv
from marg.protocols.ledger_format import entry_signing_bytes, line_hash, parse_entry
from marg.protocols.ledger_state import LedgerState, apply_entry, checkpoint_bytes
from marg.protocols.keys import key_id
from marg.protocols.signing import b64
from tests.helpers.files import folder_bytes
from tests.helpers.console import run


@pytest.fixture
def site(tmp_path):
    """A configured site 'north' (cap ε = 10) that has exported twice at ε = 2.5 (true spend 5)."""
    home = tmp_path / "home"
    schema = tmp_path / "codebook.json"
    demo_codebook().save(schema)
    assert run("keys", "init", "--site", "north", "--dir", tmp_path / "keys", home=home).exit_code == 0
    r = run("audit", "init", "--site", "north", "--key", tmp_path / "keys" / "north.sign.key", "--epsilon", "10",
            home=home)
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
    """One line on stderr naming the problem, exit 1, no bundle."""
    assert r.exit_code == 1, r.output
    assert r.stderr.count("\n") == 1 and r.stderr.endswith("\n"), r.stderr
    assert any(w in r.stderr for w in words.split("|")), r.stderr
    assert not (s["tmp"] / name).exists()


def snapshot(s):
    """Every file of the site's home, byte for byte: the ledger folder (ledger, checkpoint,
    lock, round markers, a stray budget.json) and the site configuration (site.json)."""
    snap = folder_bytes(s["home"])
    assert "site.json" in snap
    return snap


def restore(s, snap):
    """Put the site's home back as ``snap`` recorded it (files written back, files since added removed)."""
    for p in [p for p in s["home"].rglob("*") if p.is_file() and str(p.relative_to(s["home"])) not in snap]:
        p.unlink()
    for name, data in snap.items():
        (s["home"] / name).parent.mkdir(parents=True, exist_ok=True)
        (s["home"] / name).write_bytes(data)
    assert snapshot(s) == snap


def refused_export(s, eps, words, *extra, name="x.bundle"):
    """An export of ``eps`` after an attack: refused in one line, no bundle, and nothing of the
    ledger folder or the site configuration written (every file byte-identical, none added)."""
    before = snapshot(s)
    refused(s, export(s, eps, name, *extra), words, name)
    assert snapshot(s) == before, "a refused export changed the ledger folder or the site configuration"


def test_the_cap_holds_and_verify_passes(site):
    s = site
    refused_export(s, 6, "privacy budget exhausted")
    r = run("audit", "verify", home=s["home"])
    assert r.exit_code == 0 and "OK: 3 entries" in r.stdout and "site configuration" in r.stdout


def test_edited_cap_entry_or_checkpoint_or_budget_json(site):
    s = site
    ls = lines(s)
    cap = json.loads(ls[0])
    assert cap["kind"] == "cap"
    cap["cap"]["epsilon"] = 1000.0
    write(s, [canonical_json(cap)] + ls[1:])
    refused_export(s, 6, "does not match its checkpoint|bad signature")
    r = run("audit", "verify", home=s["home"])
    assert r.exit_code == 1 and "entry seq 1" in r.stderr and "bad signature" in r.stderr
    # the cap entry deleted: the chain breaks there
    write(s, ls[1:])
    refused_export(s, 6, "truncated or edited|does not match its checkpoint")
    (s["ledger"] / "checkpoint.json").rename(s["tmp"] / "cp.json")
    refused_export(s, 6, "expected seq 1")
    (s["tmp"] / "cp.json").rename(s["ledger"] / "checkpoint.json")
    write(s, ls)
    # the checkpoint edited (its cumulative spend lowered): its signature breaks
    cp = json.loads((s["ledger"] / "checkpoint.json").read_text())
    cp["state"]["cumulative"]["epsilon"] = 0.0
    (s["ledger"] / "checkpoint.json").write_bytes(canonical_json(cp))
    refused_export(s, 6, "bad checkpoint signature")
    # a budget.json beside the chain (the old way to set a cap) changes nothing
    (s["ledger"] / "checkpoint.json").unlink()  # the full check rebuilds the state from the chain
    (s["ledger"] / "budget.json").write_text('{"format": "marg-budget", "version": 1, "epsilon": 1000, "delta": 0, '
                                             '"rho": 0}')
    refused_export(s, 6, "privacy budget exhausted")
    assert export(s, 5, "ok.bundle").exit_code == 0  # exactly up to the cap


def test_deleted_or_truncated_ledger(site):
    s = site
    backup = snapshot(s)
    (s["ledger"] / "ledger.jsonl").unlink()
    refused_export(s, 6, "missing")
    r = run("audit", "verify", home=s["home"])
    assert r.exit_code == 1 and "truncated" in r.stderr
    # the ledger AND its checkpoint deleted: the site configuration still knows the head
    (s["ledger"] / "checkpoint.json").unlink()
    refused_export(s, 6, "truncated, deleted or rolled back")
    # the last entry cut off
    restore(s, backup)
    write(s, lines(s)[:-1])
    refused_export(s, 6, "shorter than its checkpoint records")
    (s["ledger"] / "checkpoint.json").unlink()
    refused_export(s, 6, "truncated, deleted or rolled back")
    r = run("audit", "verify", home=s["home"])
    assert r.exit_code == 1 and "rolled back" in r.stderr
    # the last entry cut mid-line: the unterminated rest looks like the torn tail of a crashed
    # append, which the writer would drop; it must not pass for one
    restore(s, backup)
    full = (s["ledger"] / "ledger.jsonl").read_bytes()
    last = lines(s)[-1]
    assert len(last) > 100
    (s["ledger"] / "ledger.jsonl").write_bytes(full[: len(full) - 1 - len(last) // 2])
    refused_export(s, 6, "shorter than its checkpoint records")
    assert not (s["ledger"] / "ledger.jsonl").read_bytes().endswith(b"\n")  # the torn tail was not dropped
    r = run("audit", "verify", home=s["home"])
    assert r.exit_code == 1 and r.stderr.count("\n") == 1 and "truncated" in r.stderr, r.stderr
    (s["ledger"] / "checkpoint.json").unlink()
    refused_export(s, 6, "truncated, deleted or rolled back")
    # ... or cut mid-line and closed with a newline: a malformed last entry
    restore(s, backup)
    (s["ledger"] / "ledger.jsonl").write_bytes(full[: len(full) - 1 - len(last) // 2] + b"\n")
    refused_export(s, 6, "shorter than its checkpoint records")
    (s["ledger"] / "checkpoint.json").unlink()
    refused_export(s, 6, "not valid JSON (truncated or corrupted)")


def test_rolled_back_ledger_folder(site):
    s = site
    old = s["tmp"] / "old-ledger"
    shutil.copytree(s["ledger"], old)
    assert export(s, 1, "b2.bundle").exit_code == 0
    shutil.rmtree(s["ledger"])
    shutil.copytree(old, s["ledger"])  # the folder as it was one export ago: a valid, shorter chain
    refused_export(s, 6, "rolled back")
    r = run("audit", "verify", home=s["home"])
    assert r.exit_code == 1 and "rolled back" in r.stderr


def forged_state(ls):
    """The state the forged lines fold to (so a checkpoint for them is self-consistent)."""
    state = LedgerState()
    for ln in ls:
        state = apply_entry(state, parse_entry(ln), ln)
    return state


def test_re_signed_ledger_with_lowered_costs(site):
    """Rewrite the whole ledger (costs lowered to 0.1 each) and re-sign it and its checkpoint
    with another key: refused, since the site pins its key."""
    s = site
    backup = snapshot(s)
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
    # a checkpoint of the forged chain, signed by the other key with the library's own writer:
    # the forgery is self-consistent (ε = 9 fits its cap of 10), only the key gives it away
    forged = forged_state(out)
    assert forged.n == 3 and abs(forged.cumulative.epsilon - 0.2) < 1e-9 and forged.cap.epsilon == 10.0
    assert forged.key_id == key_id(other)
    (s["ledger"] / "checkpoint.json").write_bytes(checkpoint_bytes(forged, other, "2030-01-01T00:00:00Z"))
    refused_export(s, 9, "not the site's pinned key (re-signed)")
    r = run("audit", "verify", home=s["home"])
    assert r.exit_code == 1 and r.stderr.count("\n") == 1 and "re-signed" in r.stderr, r.stderr
    # the re-signed checkpoint deleted: the chain itself is signed by the wrong key
    (s["ledger"] / "checkpoint.json").unlink()
    refused_export(s, 9, "not the site's key")
    r = run("audit", "verify", home=s["home"])
    assert r.exit_code == 1 and "not the site's key" in r.stderr
    # the control: the untouched ledger takes ε = 5 (true spend 5 + 5 = the cap), so the refusals
    # above came from the forgery, not from the budget
    restore(s, backup)
    assert export(s, 5, "ok.bundle").exit_code == 0


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
    refused_export(s, 9, "does not match its checkpoint|shorter than its checkpoint records")
    # the checkpoint deleted too: the full check of the chain finds the edited entry
    (s["ledger"] / "checkpoint.json").unlink()
    refused_export(s, 9, "entry 2: bad signature")
    r = run("audit", "verify", home=s["home"])
    assert r.exit_code == 1 and "entry seq 2" in r.stderr and "bad signature" in r.stderr


def test_no_ledger_other_ledger_other_directory(site, tmp_path, monkeypatch):
    s = site
    refused_export(s, 1, "--no-ledger refused", "--no-ledger")
    refused_export(s, 1, "not site 'north'", "--ledger", tmp_path / "fresh")
    assert not (tmp_path / "fresh").exists()
    other_key = tmp_path / "k2"
    assert run("keys", "init", "--site", "north", "--dir", other_key, home=s["home"]).exit_code == 0
    refused_export(s, 1, "not site 'north''s pinned key", "--key", other_key / "north.sign.key")
    refused(s, run("export", s["data"], "--schema", s["schema"], "--site", "south", "--out", s["tmp"] / "x.bundle",
                   "--epsilon", 1, "--mechanism", "laplace", home=s["home"]), "configured as site 'north'")
    # another working directory: the export is still recorded in (and capped by) the site's ledger
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    refused_export(s, 6, "privacy budget exhausted")
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
    assert run("keys", "init", "--site", "learner", "--dir", s["tmp"] / "lk", "--role", "learner",
               home=s["home"]).exit_code == 0
    r = run("round", "--schema", s["schema"], "--out", s["tmp"] / "round.json", "--sign-key",
            s["tmp"] / "lk" / "learner.sign.key",
            home=s["home"])
    assert r.exit_code == 0, r.output
    r = export(s, 1, "r1.bundle", "--round", s["tmp"] / "round.json")
    assert r.exit_code == 0, r.output
    rid = json.loads((s["tmp"] / "round.json").read_text())["id"]
    assert json.loads(lines(s)[-1])["round"] == rid
    refused_export(s, 1, "already answered", "--round", s["tmp"] / "round.json")
