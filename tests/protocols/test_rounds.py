"""Rounds: a bundle of another round (a replay) is refused, even validly signed."""

from __future__ import annotations

import json


from marg.marginals.synthetic import SITES, demo_codebook, generate, write_csv
from marg.protocols.bundle import Bundle
from tests.helpers.console import run


def test_a_replayed_bundle_of_an_earlier_round_is_refused(tmp_path):
    schema = tmp_path / "codebook.json"
    demo_codebook().save(schema)
    write_csv(tmp_path / "rows.csv", generate(800, SITES[0], seed=3))
    assert run("keys", "init", "--site", "north", "--dir", tmp_path / "keys").exit_code == 0
    assert run("keys", "init", "--site", "learner", "--dir", tmp_path / "keys", "--role", "learner").exit_code == 0
    trust = tmp_path / "trust"
    trust.mkdir()
    (trust / "north.sign.pub").write_bytes((tmp_path / "keys" / "north.sign.pub").read_bytes())
    rounds = []
    for k in range(2):
        r = run("round", "--schema", schema, "--out", tmp_path / f"round{k}.json", "--sign-key",
                tmp_path / "keys" / "learner.sign.key")
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


def test_the_round_file_is_signed_by_the_learner_and_learn_warns_without_rounds(tmp_path):
    """Issue 25: the round file was unsigned, and marg learn without --round accepted round-less,
    stale bundles silently. Sites check the round file against the learner's key (role learner);
    marg learn without --round says in one line how many bundles carry no round."""
    schema = tmp_path / "codebook.json"
    demo_codebook().save(schema)
    write_csv(tmp_path / "rows.csv", generate(500, SITES[0], seed=4))
    for who, role in (("north", "site"), ("learner", "learner")):
        assert run("keys", "init", "--site", who, "--dir", tmp_path / "keys", "--role", role).exit_code == 0
    learner_keys, site_trust = tmp_path / "learner-keys", tmp_path / "trust"
    assert run("keys", "trust", tmp_path / "keys" / "learner.sign.pub", "--trust", learner_keys, "--role",
               "learner").exit_code == 0
    assert run("keys", "trust", tmp_path / "keys" / "north.sign.pub", "--trust", site_trust).exit_code == 0
    rnd = tmp_path / "round.json"
    assert run("round", "--schema", schema, "--out", rnd, "--sign-key",
               tmp_path / "keys" / "learner.sign.key").exit_code == 0
    assert run("round", "--schema", schema, "--out", tmp_path / "r.json").exit_code == 2  # --sign-key is required

    def export(name, round_file, *extra):
        return run("export", tmp_path / "rows.csv", "--schema", schema, "--site", "north", "--out", tmp_path / name,
                   "--min-cell", "1", "--stats", "first", "--key", tmp_path / "keys" / "north.sign.key",
                   *(["--round", round_file] if round_file else []), *extra)

    r = export("ok.bundle", rnd, "--trust", learner_keys)
    assert r.exit_code == 0, r.output
    # an edited round file, an unsigned one (another id, written by anyone), one signed by a site key
    d = json.loads(rnd.read_text())
    for name, doc in (("edited", {**d, "id": "f" * 32}),
                      ("unsigned", {k: v for k, v in d.items() if k not in ("key_id", "signature")})):
        (tmp_path / f"{name}.json").write_text(json.dumps(doc))
        r = export(f"{name}.bundle", tmp_path / f"{name}.json", "--trust", learner_keys)
        assert r.exit_code == 1 and r.stderr.count("\n") == 1, r.output
        assert ("bad signature" if name == "edited" else "unsigned round file") in r.stderr
        assert not (tmp_path / f"{name}.bundle").exists()
    both = tmp_path / "both"
    for who in ("learner", "north"):
        assert run("keys", "trust", tmp_path / "keys" / f"{who}.sign.pub", "--trust", both,
                   "--role", "learner" if who == "learner" else "site").exit_code == 0
    assert run("round", "--schema", schema, "--out", tmp_path / "site-round.json",
               "--sign-key", tmp_path / "keys" / "north.sign.key").exit_code == 0
    r = export("site.bundle", tmp_path / "site-round.json", "--trust", both)
    assert r.exit_code == 1 and "a site's key: a learner's signature is needed" in r.stderr
    # without --trust the export goes ahead, saying the signature was not checked
    rnd2 = tmp_path / "round2.json"
    assert run("round", "--schema", schema, "--out", rnd2, "--sign-key",
               tmp_path / "keys" / "learner.sign.key").exit_code == 0
    r = export("unchecked.bundle", rnd2)
    assert r.exit_code == 0 and "signature was not checked" in r.stderr
    # marg learn without --round: one line when bundles carry no round, a note when they do
    r = run("learn", tmp_path / "ok.bundle", "--learner", "nb", "--out", tmp_path / "m2.json", "--trust", site_trust)
    assert r.exit_code == 0 and "give --round" in r.stderr and "no round id" not in r.stderr
    assert export("none.bundle", None).exit_code == 0
    # (another learner's history: this one holds north up to position 1, and none.bundle stands at 3)
    r = run("learn", tmp_path / "none.bundle", "--learner", "nb", "--out", tmp_path / "m.json", "--trust", site_trust,
            "--history", tmp_path / "other-history.json")
    assert r.exit_code == 0, r.output
    assert "warning: 1 of 1 bundles carry no round id" in r.stderr
