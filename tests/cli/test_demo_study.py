"""``marg demo`` tells its story as a DP study (issue 44), through the installed console script.

What is checked: the study ends done, every party's part is printed (the learner opens, collects, sums each round
and certifies; each site answers and reveals each round), each site's ledger composes to exactly the study's
total ρ and verifies, the certified model is signed by the study's learner and its certificate is the one the
result names; the demo replaces its own folder and refuses any other; ``--per-site`` runs the per-site path.
"""

from __future__ import annotations

import json

from tests.helpers.console import marg

SITES = ("north", "south", "city")
ROUNDS = ("select", "measure", "evaluate")


def test_marg_demo_runs_a_study_and_says_what_each_party_did(tmp_path):
    r = marg("demo", "--dir", tmp_path / "demo", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "marg study init → study.json" in out and "marg study status study.json: done" in out
    for rnd in ROUNDS:
        for what in ("opened", "collected", "summed"):
            assert f"learner {what} round '{rnd}'" in out, (what, rnd)
        for s in SITES:
            assert f"{s:<7} answered round '{rnd}'" in out and f"{s:<7} revealed its shares for round '{rnd}'" in out
    assert out.count("learner certified the model") == 1
    assert out.count("chain and signatures verified") == 3 and out.count("3 releases to the study") == 3
    d = tmp_path / "demo"
    study = json.loads((d / "study.json").read_text())
    result = json.loads((d / "drop" / "final" / "result.json").read_text())
    assert 0.0 < result["certificate"] < 1.0 and f"holdout certificate {result['certificate']:.3f}" in out
    model = json.loads((d / "drop" / "final" / "model.json").read_text())
    assert abs(model["info"]["holdout_certificate"]["value"] - result["certificate"]) < 1e-12
    for s in SITES:  # each site's ledger: three releases whose ρ add to exactly the study's total
        entries = [json.loads(x) for x in (d / s / "ledger" / "ledger.jsonl").read_text().splitlines() if x.strip()]
        rho = [e["cost"]["rho"] for e in entries if e.get("kind") == "release"]
        assert len(rho) == 3 and abs(sum(rho) - study["plan"]["rho_total"]) < 1e-9 * study["plan"]["rho_total"]
    st = marg("study", "status", d / "study.json", "--json", cwd=tmp_path)
    assert st.returncode == 0 and json.loads(st.stdout)["done"]
    assert all(v["state"] == "done" for v in json.loads(st.stdout)["sites"].values())
    assert (d / "learner" / "model-card.html").exists() and (d / "north" / "ledger.html").exists()
    # its own folder is replaced; any other is refused, one line, nothing touched
    other = tmp_path / "mine"
    other.mkdir()
    (other / "precious.txt").write_text("x")
    r = marg("demo", "--dir", other, cwd=tmp_path)
    assert r.returncode == 2 and "not a marg demo folder" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in other.iterdir()) == ["precious.txt"]


def test_marg_demo_per_site_still_runs_the_per_site_path(tmp_path):
    r = marg("demo", "--per-site", "--dir", tmp_path / "demo", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "opens and verifies 3 bundles" in r.stdout and r.stdout.count("chain and signatures verified") == 3
