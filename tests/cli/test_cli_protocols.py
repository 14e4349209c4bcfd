"""The signed/sealed/ledgered workflow through the CLI, with its refusals."""

import json

import pytest

from tests.helpers.console import run
from tests.helpers.study import write_study


@pytest.fixture
def world(tmp_path):
    study = write_study(tmp_path, 2500, seed=50, sites=2)  # north and south
    schema = study.schema
    for site in ("north", "south", "learner"):
        r = run("keys", "init", "--site", site, "--role", "learner" if site == "learner" else "site", "--dir",
                tmp_path / "keys")
        assert r.exit_code == 0, r.output
    trust = tmp_path / "trust"
    trust.mkdir()
    for site in ("north", "south"):
        (trust / f"{site}.sign.pub").write_bytes((tmp_path / "keys" / f"{site}.sign.pub").read_bytes())
    return tmp_path, schema, trust, study.data


def export(world, site, *extra, out=None):
    tmp, schema, trust, data = world
    out = out or tmp / f"{site}.bundle"
    return run("export", data[site], "--schema", schema, "--site", site, "--out", out,
               "--key", tmp / "keys" / f"{site}.sign.key", "--to", tmp / "keys" / "learner.seal.pub",
               "--ledger", tmp / f"{site}-ledger", *extra, home=tmp / f"{site}-home"), out


def test_signed_sealed_dp_round_trip(world):
    tmp, schema, trust, data = world
    bundles = []
    for site in ("north", "south"):
        r = run("audit", "init", "--site", site, "--key", tmp / "keys" / f"{site}.sign.key", "--ledger",
                tmp / f"{site}-ledger",
                "--epsilon", "3", "--delta", "0", home=tmp / f"{site}-home")  # a pure ε-DP cap
        assert r.exit_code == 0, r.output
        r, out = export(world, site, "--stats", "all", "--epsilon", "1", "--mechanism", "laplace")
        assert r.exit_code == 0, r.output
        # after the cap entry
        assert "signed" in r.stdout and "sealed to learner" in r.stdout and "ledger entry #2" in r.stdout
        bundles.append(out)
    # Sealed: inspect needs the learner key.
    r = run("inspect", bundles[0])
    assert r.exit_code == 2 and "sealed" in r.stderr
    r = run("inspect", bundles[0], "--key", tmp / "keys" / "learner.seal.key", "--trust", trust, "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["verified_site"] == "north" and d["statistics"][0]["mechanism"] == "laplace" and d["n_rows"] is None
    r = run("learn", *bundles, "--learner", "renyi", "--out", tmp / "m.json", "--trust", trust,
            "--key", tmp / "keys" / "learner.seal.key", "--json")
    assert r.exit_code == 0, r.output
    assert sorted(json.loads(r.stdout)["sites"]) == ["north", "south"]
    # The ledger verifies against the bundle and shows the spend.
    r = run("audit", "verify", "--ledger", tmp / "north-ledger", "--bundles", bundles[0],
            "--key", tmp / "keys" / "north.sign.pub", home=tmp / "north-home")
    assert r.exit_code == 0, r.output
    r = run("audit", "show", "--ledger", tmp / "north-ledger", "--json", home=tmp / "north-home")
    assert r.exit_code == 0
    # A second export at ε = 2.5 would exceed the cap of 3: refused, nothing written.
    r, out = export(world, "north", "--stats", "first", "--epsilon", "2.5", "--mechanism", "laplace",
                    out=tmp / "again.bundle")
    assert r.exit_code == 1 and "privacy budget exhausted" in r.stderr and r.stderr.count("\n") == 1
    assert not out.exists()
    lines = (tmp / "north-ledger" / "ledger.jsonl").read_text().splitlines()
    assert len(lines) == 2  # the cap entry and the one release
    # The default (Gaussian, (ε, δ)-DP) release does not fit a pure-DP cap: refused, and said why.
    r, out = export(world, "north", "--stats", "first", "--epsilon", "0.1", out=tmp / "gauss.bundle")
    assert r.exit_code == 1 and "refuses an (ε, δ) release" in r.stderr and not out.exists()
    # Exact counts are refused outright once a budget exists.
    r, out = export(world, "north", "--stats", "first", out=tmp / "exact.bundle")
    assert r.exit_code == 1 and "an exact release (no noise) has no differential-privacy guarantee" in r.stderr
    assert "admits only DP releases: give --epsilon or --rho" in r.stderr and "inf" not in r.stderr and not out.exists()


def test_learn_refusals(world):
    tmp, schema, trust, data = world
    r, signed = export(world, "north", "--min-cell", "1")
    assert r.exit_code == 0, r.output
    key = ["--key", tmp / "keys" / "learner.seal.key"]
    # Without a trust store a signed bundle cannot be verified.
    r = run("learn", signed, "--learner", "mrc", "--out", tmp / "m.json", *key)
    assert r.exit_code == 1 and "north.bundle" in r.stderr
    # An altered byte is refused, naming the bundle.
    raw = bytearray(signed.read_bytes())
    raw[len(raw) // 2] ^= 0x10
    bad = tmp / "bad.bundle"
    bad.write_bytes(bytes(raw))
    r = run("learn", bad, "--learner", "mrc", "--out", tmp / "m.json", "--trust", trust, *key)
    assert r.exit_code == 1 and "bad.bundle" in r.stderr and r.stderr.count("\n") == 1
    # Unsigned bundles need --allow-unsigned.
    r = run("export", data["south"], "--schema", schema, "--site", "south", "--out", tmp / "u.bundle",
            "--min-cell", "1", "--ledger", tmp / "south-ledger")
    assert r.exit_code == 0, r.output
    r = run("learn", tmp / "u.bundle", "--learner", "mrc", "--out", tmp / "m.json", "--trust", trust)
    assert r.exit_code == 1 and "unsigned" in r.stderr
    assert run("learn", tmp / "u.bundle", "--learner", "mrc", "--out", tmp / "m.json", "--trust", trust,
               "--allow-unsigned").exit_code == 0
    # A key that is not in the trust store.
    assert run("keys", "init", "--site", "rogue", "--dir", tmp / "rk").exit_code == 0
    r = run("export", data["south"], "--schema", schema, "--site", "south", "--out", tmp / "r.bundle", "--min-cell",
            "1",
            "--key", tmp / "rk" / "rogue.sign.key", "--ledger", tmp / "rogue-ledger")
    assert r.exit_code == 0, r.output
    r = run("learn", tmp / "r.bundle", "--learner", "mrc", "--out", tmp / "m.json", "--trust", trust)
    assert r.exit_code == 1 and "r.bundle" in r.stderr


def test_two_round_protocol(world):
    tmp, schema, trust, data = world
    r, b1 = export(world, "north", "--stats", "first", "--epsilon", "0.5")
    assert r.exit_code == 0, r.output
    req = tmp / "request.json"
    r = run("request", b1, "--top", "4", "--out", req, "--trust", trust, "--key", tmp / "keys" / "learner.seal.key",
            "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert len(d["features"]) == 4 and len(d["pairs"]) == 6
    r, b2 = export(world, "north", "--pairs", f"@{req}", "--allow-unsigned", "--epsilon", "0.5",
                   out=tmp / "round2.bundle")
    assert r.exit_code == 0, r.output
    r = run("inspect", b2, "--key", tmp / "keys" / "learner.seal.key", "--json")
    names = [s["name"] for s in json.loads(r.stdout)["statistics"]]
    assert sum(1 for n in names if n.count(",") == 2) == 6
    r = run("audit", "show", "--ledger", tmp / "north-ledger", "--json")
    assert r.exit_code == 0
