"""One library function decides a release's kind (issue 44): the library and the console script write the same bundle.

What is checked: :func:`marg.protocols.release_kind.release_kind` names the kind of each request
(one round, round 1, round 2, an evaluation) and refuses contradictions in one line; and
``export_site(data, codebook, site, out, ReleaseRequest(epsilon=1.0), Delivery(ledger_dir=...))``
writes the bundle ``marg export --epsilon 1`` writes (the installed script, a subprocess) — round 1
(the label table and the private selection, not the one-round tables), then round 2 from the same
signed request — the same tables, noise records, privacy record, study record and ledger costs,
everything but the noise draws and the features the noisy selection drew.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from marg.errors import InputError
from marg.marginals.synthetic import SITES, demo_codebook, generate, write_csv
from marg.protocols.bundle import Bundle
from marg.protocols.export import export_site
from marg.protocols.release_kind import release_kind
from marg.protocols.release_request import Delivery, ReleaseRequest
from tests.helpers.console import marg

ROWS = 300


def test_the_kind_of_each_request():
    cb, led = demo_codebook(), Delivery(ledger_dir="L")
    assert release_kind(ReleaseRequest(epsilon=1.0), cb, led).kind == "round-1"
    r1 = release_kind(ReleaseRequest(epsilon=1.0, plan_rows=[300], plan_sites=3), cb, led).request
    assert r1.epsilon is None and r1.study.plan.rows == (300, 300, 300)
    assert release_kind(r1, cb, led).request is r1  # decided once: a request that is a round stays it
    for one in (ReleaseRequest(epsilon=1.0, rounds=1), ReleaseRequest(epsilon=1.0, stats="all"),
                ReleaseRequest(epsilon=1.0, mechanism="laplace"), ReleaseRequest(epsilon=1.0, holdout=0.2),
                ReleaseRequest(rho=0.1), ReleaseRequest(), ReleaseRequest(epsilon=1.0, allocation="least-squares")):
        k = release_kind(one, cb, led)
        assert k.kind == "one-round" and k.request is one and not k.study
    assert release_kind(ReleaseRequest(epsilon=1.0), cb, Delivery()).kind == "one-round"  # no ledger: one round
    assert release_kind(ReleaseRequest(epsilon=1.0), cb, led, evaluation=True).kind == "evaluation"
    for bad, words in ((ReleaseRequest(epsilon=1.0, rounds=2, stats="all"), "rounds=2"),
                       (ReleaseRequest(rounds=2), "needs epsilon"), (ReleaseRequest(epsilon=1.0, rounds=3), "1 or 2"),
                       (ReleaseRequest(epsilon=1.0, rounds=2), None),
                       (ReleaseRequest(study_request="req.json", epsilon=1.0), "drop epsilon"),
                       (ReleaseRequest(study_request="req.json", stats="first"), "stats"),
                       (ReleaseRequest(epsilon=1.0, plan_rows=[1, 2], plan_sites=3), "plan_sites=3")):
        if words is None:
            assert release_kind(bad, cb, led).kind == "round-1"
            with pytest.raises(InputError, match="evaluate"):
                release_kind(bad, cb, led, evaluation=True)
            continue
        with pytest.raises(InputError, match=words):
            release_kind(bad, cb, led)


def _site(tmp: Path) -> tuple[Path, Path]:
    cb_path = tmp / "codebook.json"
    demo_codebook().save(cb_path)
    data = tmp / "north.csv"
    write_csv(data, generate(ROWS, SITES[0], seed=5), slice(0, ROWS))
    return cb_path, data


def _content(path: Path) -> dict:
    """What a bundle releases apart from the noise drawn: each table's clique, shape, kind and noise record (the
    counts carry the draws), and the header without its creation time, its ledger position (where, not what), the
    digest of the noisy counts and the features the noisy selection drew (round 1: the same k of the same
    candidates, drawn again)."""
    b = Bundle.from_bytes(path.read_bytes())
    header = {k: v for k, v in b.header.items() if k not in ("created", "ledger", "payload_sha256")}
    study = dict(header.get("study") or {})
    if "selection" in study:
        study["selection"] = {k: v for k, v in study["selection"].items() if k != "features"}
        header["study"] = study
    return {"tables": [(t.clique, t.counts.shape, t.kind, t.noise.to_dict()) for t in b.tables], "header": header}


def _costs(ledger: Path) -> list[dict]:
    entries = [json.loads(x) for x in sorted(ledger.rglob("ledger.jsonl"))[0].read_text().splitlines()]
    return [e["cost"] for e in entries if "cost" in e]


def test_the_library_and_the_console_script_write_the_same_rounds(tmp_path):
    cb_path, data = _site(tmp_path)
    cb = demo_codebook()
    lib = export_site(data, cb, "north", tmp_path / "lib.r1",
                      ReleaseRequest(epsilon=1.0, plan_rows=[ROWS], plan_sites=3),
                      Delivery(ledger_dir=tmp_path / "lib-ledger"))
    r = marg("export", data, "--schema", cb_path, "--site", "north", "--out", tmp_path / "cli.r1", "--epsilon", "1",
             "--plan-rows", str(ROWS), "--plan-sites", "3", "--ledger", tmp_path / "cli-ledger", cwd=tmp_path,
             home=tmp_path / "home")
    assert r.returncode == 0, r.stderr
    assert "round 1 of select-then-measure" in r.stdout
    # round 1, not the one-round release: the label table alone, and the private selection in the header
    assert [t.clique for t in lib.tables] == [(cb.label.name,)] and lib.bundle.header["study"]["round"] == 1
    a, b = _content(tmp_path / "lib.r1"), _content(tmp_path / "cli.r1")
    assert a == b
    sel = [Bundle.from_bytes((tmp_path / f).read_bytes()).header["study"]["selection"] for f in ("lib.r1", "cli.r1")]
    assert len(sel[0]["features"]) == len(sel[1]["features"]) == sel[0]["k"]  # the same top-k, drawn twice
    assert (_costs(tmp_path / "lib-ledger") == _costs(tmp_path / "cli-ledger")
            and len(_costs(tmp_path / "lib-ledger")) == 1)
    # round 2 from one signed request: the library (study_request, trust) and the script (--request, --trust)
    keys, trust = tmp_path / "keys", tmp_path / "trust"
    assert marg("keys", "init", "--site", "learner", "--dir", keys, "--role", "learner", cwd=tmp_path).returncode == 0
    trust.mkdir()
    (trust / "learner.sign.pub").write_bytes((keys / "learner.sign.pub").read_bytes())
    req = tmp_path / "req.json"
    r = marg("request", tmp_path / "lib.r1", "--out", req, "--allow-unsigned", "--sign-key", keys / "learner.sign.key",
             cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lib2 = export_site(data, cb, "north", tmp_path / "lib.r2", ReleaseRequest(study_request=req, trust=trust),
                       Delivery(ledger_dir=tmp_path / "lib-ledger"))
    r = marg("export", data, "--schema", cb_path, "--site", "north", "--out", tmp_path / "cli.r2", "--request", req,
             "--trust", trust, "--ledger", tmp_path / "cli-ledger", cwd=tmp_path, home=tmp_path / "home")
    assert r.returncode == 0, r.stderr
    assert "round 2 of select-then-measure" in r.stdout
    asked = {frozenset(c) for c in json.loads(req.read_text())["tables"]}
    assert {frozenset(t.clique[:-1]) for t in lib2.tables} == asked and lib2.bundle.header["study"]["round"] == 2
    assert _content(tmp_path / "lib.r2") == _content(tmp_path / "cli.r2")
    assert (_costs(tmp_path / "lib-ledger") == _costs(tmp_path / "cli-ledger")
            and len(_costs(tmp_path / "lib-ledger")) == 2)
    # a one-round release stays one: the same request with rounds=1 is the --stats tables
    one = export_site(data, cb, "north", tmp_path / "one.bundle", ReleaseRequest(epsilon=1.0, rounds=1),
                      Delivery(ledger_dir=tmp_path / "one-ledger"))
    assert len(one.tables) > 1 and "study" not in one.bundle.header
