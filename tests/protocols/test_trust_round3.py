"""Issue 35's smaller attacks, each reproduced through the installed console script, then refused.

- the min-cell refusal (also under ``--dry-run``) named a cell held by one or two patients;
- ``--delta 0.5`` was accepted and the bundle showed the learner "ε = 0.975";
- a non-number (or unknown level) was echoed in the error (``value 'SECRET_AGE_77' at row 69``);
- a 13 MB codebook cost 487 MB and 12.8 s before its one-line error;
- a key's role was whatever its own ``.pub`` said, and ``predict``/``evaluate`` did not name the signer.
"""

from __future__ import annotations

import json

import pytest

from marg.marginals.synthetic import SITES, demo_codebook, generate, write_csv
from marg.protocols.bundle import load_bundle
from tests.helpers.console import marg, run


@pytest.fixture
def site(tmp_path, monkeypatch):
    demo_codebook().save(tmp_path / "cb.json")
    cols = generate(300, SITES[0], seed=11)
    write_csv(tmp_path / "d.csv", cols)
    monkeypatch.chdir(tmp_path)
    return tmp_path, cols


def test_min_cell_refusals_name_no_cell_also_in_a_dry_run(site):
    tmp, cols = site
    args = ("export", "d.csv", "--schema", "cb.json", "--site", "north", "--out", "x.bundle", "--stats", "all",
            "--no-ledger")
    for extra in ((), ("--dry-run",)):
        r = marg(*args, *extra, cwd=tmp)
        line = r.stderr.strip()
        assert r.returncode == 1 and "min-cell rule: table N[" in line and "\n" not in line, r.stderr
        assert "=" not in line.split("table", 1)[1].split("has", 1)[1]  # no [feature=level] cell
        levels = {v for c in cols if c not in ("patient_id",) for v in cols[c] if v}
        assert not any(f"={v}" in line or f"'{v}'" in line for v in levels)
        assert not (tmp / "x.bundle").exists()


def test_delta_is_bounded_and_the_bundle_shows_epsilon_at_the_caps_delta(site):
    tmp, _ = site
    base = ("export", "d.csv", "--schema", "cb.json", "--site", "north", "--epsilon", "1", "--no-ledger")
    r = marg(*base, "--out", "a.bundle", "--delta", "0.5", cwd=tmp)  # was: accepted, "ε = 0.975"
    assert r.returncode == 2 and "above 0.001" in r.stderr and "--allow-large-delta" in r.stderr
    r = run(*base, "--out", "a.bundle", "--delta", "0.5", "--allow-large-delta")
    assert r.exit_code == 2 and "at least 1/n for this site's 300 patients" in r.stderr
    assert not (tmp / "a.bundle").exists()
    r = run(*base, "--out", "a.bundle", "--delta", "2e-3", "--allow-large-delta")  # below 1/300, forced
    assert r.exit_code == 0, r.output
    # a site whose cap is at δ = 1e-5: the bundle states ε at that δ too (OpenDP's conversion of its ρ)
    from marg.marginals.counts.dp_conversions import rho_to_epsilon

    assert run("keys", "init", "--site", "north", "--dir", "keys").exit_code == 0
    assert run("audit", "init", "--site", "north", "--key", "keys/north.sign.key", "--ledger", "led", "--epsilon", "4",
               "--delta", "1e-5", home=tmp / "home").exit_code == 0
    r = run(*base[:-1], "--out", "b.bundle", "--ledger", "led", home=tmp / "home")
    assert r.exit_code == 0, r.output
    p = load_bundle(tmp / "b.bundle").header["privacy"]
    assert p["at_cap_delta"] == {"epsilon": rho_to_epsilon(p["rho"], 1e-5), "delta": 1e-5}
    assert "at the cap's δ = 1e-05" in r.stdout


def test_no_patient_value_in_an_error(site):
    tmp, cols = site
    lines = (tmp / "d.csv").read_text().splitlines()
    header = lines[0].split(",")
    row = lines[69].split(",")
    row[header.index("age_band")] = "SECRET_AGE_77"
    lines[69] = ",".join(row)
    (tmp / "s.csv").write_text("\n".join(lines) + "\n")
    r = marg("export", "s.csv", "--schema", "cb.json", "--site", "north", "--out", "x.bundle", "--no-ledger",
             "--epsilon", "1", cwd=tmp)
    assert r.returncode == 2 and "column 'age_band'" in r.stderr and "row 69" in r.stderr, r.stderr
    assert "SECRET_AGE_77" not in r.stderr + r.stdout


def test_a_huge_codebook_is_refused_before_it_is_parsed(site):
    tmp, _ = site
    from marg.marginals.data.codebook import MAX_CODEBOOK_BYTES

    (tmp / "big.json").write_bytes(b" " * (MAX_CODEBOOK_BYTES + 1) + b"{")  # parsed, it would be 'not valid JSON'
    r = run("export", "d.csv", "--schema", "big.json", "--site", "north", "--out", "x.bundle", "--no-ledger")
    assert r.exit_code == 2 and f"larger than {MAX_CODEBOOK_BYTES >> 20} MiB: refused before parsing" in r.stderr


def test_a_key_role_is_said_by_whoever_trusts_it(site):
    """A site makes its own key a 'learner' one (its .pub's line) and gets it trusted as a roster member:
    before, the trust store took the file's word and the site could sign models."""
    tmp, _ = site
    assert run("keys", "init", "--site", "north", "--dir", "keys", "--role", "learner").exit_code == 0
    r = marg("keys", "trust", "keys/north.sign.pub", "--trust", "members", cwd=tmp)
    assert r.returncode == 1 and "declares itself a learner's key" in r.stderr and "--role learner" in r.stderr
    assert not (tmp / "members" / "north.sign.pub").exists()
    assert run("keys", "trust", "keys/north.sign.pub", "--trust", "members", "--role", "site").exit_code == 0
    assert run("export", "d.csv", "--schema", "cb.json", "--site", "north", "--out", "a.bundle", "--no-ledger",
               "--epsilon", "2").exit_code == 0
    assert run("learn", "a.bundle", "--learner", "nb", "--out", "m.json", "--allow-unsigned",
               "--sign-key", "keys/north.sign.key").exit_code == 0
    r = marg("predict", "m.json", "d.csv", "--out", "p.csv", "--trust", "members", "--schema", "cb.json", cwd=tmp)
    assert r.returncode == 1 and "a site's key: a learner's signature is needed" in r.stderr
    # trusted as the learner's by the person who says so: predict and evaluate name the signer
    assert run("keys", "trust", "keys/north.sign.pub", "--trust", "learners", "--role", "learner").exit_code == 0
    r = marg("predict", "m.json", "d.csv", "--out", "p.csv", "--trust", "learners", "--schema", "cb.json", cwd=tmp)
    assert r.returncode == 0 and "signed by 'north'" in r.stdout, r.stderr
    r = run("evaluate", "m.json", "d.csv", "--trust", "learners", "--schema", "cb.json", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["signed_by"] == "north"
