"""One number for a spend everywhere (issue 37, items 8 and 9): the ledger's composed spend at the
cap's δ is what ``marg audit show``, the next export's dry run and the model card give (the card
used to show the release's own ε = 0.75 at δ = 10⁻⁶ beside the ledger's 0.66 at 10⁻⁵), with each
release's own figure beside it; a cap that leaves ρ uncapped is not printed as ``ρ=0``; an exact
export at a DP-capped site is refused saying why, not as "requested ε=inf"."""

from __future__ import annotations

import json

import pytest

from marg.marginals.synthetic import SITES, demo_codebook, generate, write_csv
from tests.helpers.console import marg
from tests.helpers.reports import parse, values


@pytest.fixture
def site(tmp_path):
    env = {"MARG_HOME": str(tmp_path / "home")}
    demo_codebook().save(tmp_path / "cb.json")
    write_csv(tmp_path / "north.csv", generate(600, SITES[0], seed=5), slice(0, 600))
    for who, role in (("north", "site"), ("learner", "learner")):
        assert marg("keys", "init", "--site", who, "--role", role, "--dir", tmp_path / "keys", cwd=tmp_path,
                    env=env).returncode == 0
    r = marg("audit", "init", "--site", "north", "--key", tmp_path / "keys" / "north.sign.key", "--epsilon", "1",
             "--delta", "1e-5", cwd=tmp_path, env=env)
    assert r.returncode == 0 and "ρ=0" not in r.stdout and "(ρ not capped)" in r.stdout, r.stdout
    return tmp_path, env


def export(tmp, env, out, *extra):
    return marg("export", tmp / "north.csv", "--schema", tmp / "cb.json", "--site", "north", "--out", tmp / out,
                "--stats", "first", *extra, cwd=tmp, env=env)


def test_the_ledgers_number_everywhere(site):
    tmp, env = site
    r = export(tmp, env, "exact.bundle")
    assert r.returncode == 1 and "an exact release (no noise) has no differential-privacy guarantee" in r.stderr
    assert "ε=1 at δ=1e-05 (ρ not capped), admits only DP releases: give --epsilon or --rho" in r.stderr
    assert "inf" not in r.stderr and r.stderr.count("\n") == 1
    r = export(tmp, env, "north.bundle", "--epsilon", "0.75")
    assert r.returncode == 0, r.stderr
    shown = json.loads(marg("audit", "show", "--json", cwd=tmp, env=env).stdout)
    ledger_eps = shown["spent"]["epsilon"]
    assert shown["spent"]["delta"] == 1e-5 and ledger_eps < 0.75  # ρ converted once, at the cap's δ
    text = marg("audit", "show", cwd=tmp, env=env).stdout
    assert "ρ=0," not in text and "ρ=0\n" not in text and "Budget cap: ε=1 at δ=1e-05 (ρ not capped)" in text
    plan = json.loads(export(tmp, env, "next.bundle", "--epsilon", "0.1", "--dry-run", "--json").stdout)
    assert plan["spent"]["epsilon"] == pytest.approx(ledger_eps, rel=1e-12) and plan["spent"]["delta"] == 1e-5
    dry = export(tmp, env, "next.bundle", "--epsilon", "0.1", "--dry-run").stdout
    assert f"spent ε={ledger_eps:.6g}, δ=1e-05" in dry and "cap ε=1 at δ=1e-05 (ρ not capped)" in dry
    # the learner: the model card's privacy table gives the ledger's number, the release's own beside it
    (tmp / "trust").mkdir()
    (tmp / "trust" / "north.sign.pub").write_bytes((tmp / "keys" / "north.sign.pub").read_bytes())
    r = marg("learn", tmp / "north.bundle", "--learner", "mrc", "--out", tmp / "model.json", "--trust", tmp / "trust",
             "--sign-key", tmp / "keys" / "learner.sign.key", cwd=tmp, env=env)
    assert r.returncode == 0, r.stderr
    r = marg("report", tmp / "model.json", "--out", tmp / "card.html", "--trust", tmp / "keys", cwd=tmp, env=env)
    assert r.returncode == 0, r.stderr
    root = parse(tmp / "card.html")
    v = values(root)
    assert float(v["site_epsilon:north"]) == pytest.approx(ledger_eps, rel=1e-9)
    assert float(v["site_delta:north"]) == 1e-5
    assert "0.75 (δ=1e-06)" in (tmp / "card.html").read_text()
