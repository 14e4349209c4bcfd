"""Rounds: a bundle of another round (a replay) is refused, even validly signed."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from marg.cli.main import app
from marg.marginals.synthetic import SITES, demo_codebook, generate, write_csv
from marg.protocols.bundle import Bundle

runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_a_replayed_bundle_of_an_earlier_round_is_refused(tmp_path):
    schema = tmp_path / "codebook.json"
    demo_codebook().save(schema)
    write_csv(tmp_path / "rows.csv", generate(800, SITES[0], seed=3))
    assert run("keys", "init", "--site", "north", "--dir", tmp_path / "keys").exit_code == 0
    trust = tmp_path / "trust"
    trust.mkdir()
    (trust / "north.sign.pub").write_bytes((tmp_path / "keys" / "north.sign.pub").read_bytes())
    rounds = []
    for k in range(2):
        r = run("round", "--schema", schema, "--out", tmp_path / f"round{k}.json")
        assert r.exit_code == 0, r.output
        rounds.append(tmp_path / f"round{k}.json")
    ids = [json.loads(p.read_text())["id"] for p in rounds]
    assert ids[0] != ids[1] and all(len(i) == 32 for i in ids)
    old, new = tmp_path / "old.bundle", tmp_path / "new.bundle"
    for out, rnd in ((old, rounds[0]), (new, rounds[1])):
        r = run("export", tmp_path / "rows.csv", "--schema", schema, "--site", "north", "--out", out, "--min-cell", "1",
                "--key", tmp_path / "keys" / "north.sign.key", "--round", rnd)
        assert r.exit_code == 0, r.output
    assert Bundle.from_bytes(new.read_bytes()).header["round"] == ids[1]
    ok = run("learn", new, "--learner", "mrc", "--out", tmp_path / "m.json", "--trust", trust, "--round", rounds[1])
    assert ok.exit_code == 0, ok.output
    r = run("learn", old, "--learner", "mrc", "--out", tmp_path / "x.json", "--trust", trust, "--round", rounds[1])
    assert r.exit_code == 1 and "old.bundle refused" in r.stderr and "replayed or stale" in r.stderr
    assert not (tmp_path / "x.json").exists()
    # a bundle of no round is refused too when a round is required; the id alone works as well
    none = tmp_path / "none.bundle"
    assert run("export", tmp_path / "rows.csv", "--schema", schema, "--site", "north", "--out", none, "--min-cell", "1",
               "--key", tmp_path / "keys" / "north.sign.key").exit_code == 0
    r = run("learn", none, "--learner", "mrc", "--out", tmp_path / "x.json", "--trust", trust, "--round", ids[1])
    assert r.exit_code == 1 and "carries no round" in r.stderr
    # editing the round in a signed bundle breaks its signature
    b = Bundle.from_bytes(old.read_bytes())
    forged = tmp_path / "forged.bundle"
    forged.write_bytes(b.with_header(round=ids[1]).to_bytes())
    r = run("learn", forged, "--learner", "mrc", "--out", tmp_path / "x.json", "--trust", trust, "--round", ids[1])
    assert r.exit_code == 1 and "forged.bundle" in r.stderr
