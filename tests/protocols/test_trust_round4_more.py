"""Trust, round four (issue 45), the rest: one ε for one spend, requests signed in every format, a
remote bundle's source recorded as its URL, ``export_site`` on frames without a row in an error.

Each test reproduces what the issue found (through the installed ``marg`` where it used the CLI),
then checks the fix."""

from __future__ import annotations

import csv
import json

import pytest

from marg.marginals.synthetic import SITES, demo_codebook, generate, write_csv
from tests.helpers.console import marg, run


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny site (40 patients, 3 rows each: its label table goes by Laplace) whose cap's δ (1e-5)
    is not the release's (1e-6), with its keys."""
    tmp = tmp_path_factory.mktemp("tiny")
    demo_codebook().save(tmp / "cb.json")
    write_csv(tmp / "one.csv", generate(40, SITES[0], seed=1))
    rows = list(csv.reader(open(tmp / "one.csv", newline="")))
    with open(tmp / "d.csv", "w", newline="") as fh:
        csv.writer(fh).writerows([rows[0]] + [r for r in rows[1:] for _ in range(3)])
    assert run("keys", "init", "--site", "north", "--dir", tmp / "keys", "--role", "site").exit_code == 0
    assert run("keys", "init", "--site", "learner", "--dir", tmp / "keys", "--role", "learner").exit_code == 0
    return tmp


def test_a_laplace_round_one_states_the_epsilon_the_ledger_charges(tiny, tmp_path):
    """The issue: the bundle said ε = 4.06 at the cap's δ (the ρ of its Laplace part and its zCDP
    part converted together) where the ledger charged 0.948 (the pure ε composed with the ρ)."""
    from marg.protocols.aggregate import composed_privacy

    home = tmp_path / "home"
    r = run("audit", "init", "--site", "north", "--key", tiny / "keys" / "north.sign.key", "--epsilon", "10",
            "--delta", "1e-5", home=home)
    assert r.exit_code == 0, r.output
    r = marg("export", tiny / "d.csv", "--schema", tiny / "cb.json", "--site", "north", "--out", tmp_path / "r1.bundle",
             "--epsilon", "1", "--plan-rows", "40", "--plan-sites", "3", "--privacy-unit", "patient_id",
             "--max-rows-per-unit", "3", "--json", cwd=tmp_path, home=home)
    assert r.returncode == 0, r.stderr
    p = json.loads(r.stdout)["privacy"]
    assert p["mechanism"] == "laplace+noisy-top-k" and p["pure_epsilon"] > 0  # the case of the issue
    said = p["at_cap_delta"]["epsilon"]
    r = run("audit", "budget", "--json", home=home)
    assert r.exit_code == 0, r.output
    charged = json.loads(r.stdout)["spent"]
    assert charged["delta"] == 1e-5 and said == pytest.approx(charged["epsilon"], rel=1e-12)
    # the model card's number: the site's rounds composed as its ledger composes them
    assert composed_privacy([p])["epsilon"] == pytest.approx(said, rel=1e-12)
    assert said < p["epsilon"] <= 1.0  # at the larger δ, less than the release's own ε at its δ
