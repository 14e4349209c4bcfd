"""The study's evaluation round evaluates the automatic choice's top K candidates (issue 44/49): every model
evaluated is counted in each site's ledger against its held-out set (the count grows by K), the certificate is the
holdout bound of the one chosen on the held-out counts at its own ordinal's share, and the next model evaluated
on those patients comes after the K."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.helpers.console import run
from tests.helpers.study import declare_study

SITES = ("north", "south", "city")


def _ok(r):
    assert r.exit_code == 0, r.output
    return r


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """A study large enough in ε for round 2 to carry pair tables (no first-order mode), run in this process."""
    st = declare_study(tmp_path_factory.mktemp("evalk"), 300, 44, "--epsilon", "8", script=False)
    assert json.loads(st.study.read_text())["plan"]["selection"] != "first-order"
    for _ in range(8):
        _ok(run("study", "run", st.study, "--learner", home=st.home["learner"]))
        if (st.drop / "final" / "result.json").exists():
            return st
        for s in SITES:
            _ok(run("study", "run", st.study, "--site", s, "--data", st.data[s], home=st.home[s]))
    raise AssertionError("the study did not finish")


def _entries(home):
    p = home / "ledger" / "ledger.jsonl"
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()]


def test_the_ledger_counts_every_model_evaluated(study, monkeypatch):
    from marg.protocols import evaluation_ledger as evl

    block = json.loads((study.drop / "evaluate" / "round.json").read_text())["study"]
    K = len(block["models"])
    assert K >= 2 and len(set(block["models"])) == K and len(block["cliques"]) == K
    for s in SITES:
        entries = _entries(study.home[s])
        evs = evl.evaluations(entries)
        assert [ev["evaluations_on_split"] for _, ev in evs] == list(range(1, K + 1))  # the count grew by K
        assert [ev["model"] for _, ev in evs] == block["models"] and len({ev["split"] for _, ev in evs}) == 1
        assert sum(1 for e in entries if e.get("kind") == "release" and "evaluation" in (e.get("source") or {})) == 1
        # the next model evaluated on these patients is the (K+1)-th; one of the K evaluated again keeps its rank
        monkeypatch.setattr(evl, "held_set_id", lambda split, sid=evs[0][1]["split"]: sid)
        assert evl.ordinals(entries, None, ["another-model", block["models"][1]]) == [K + 1, 2]
        assert evl.ordinal(entries, None, "another-model") == K + 1


def test_the_certificate_is_the_chosen_models_at_its_ordinals_share(study):
    from marg.learners.certification.holdout_certificate import evaluation_share
    from marg.protocols.bundle import Bundle
    from marg.study_evaluated import evaluation_ordinals

    res = json.loads((study.drop / "final" / "result.json").read_text())
    ev = res["evaluation"]
    K = len(ev["evaluated"])
    summed = Bundle.from_bytes((study.drop / "evaluate" / "sum.bundle").read_bytes())
    assert evaluation_ordinals(summed, K) == list(range(1, K + 1))
    assert [e["ordinal"] for e in ev["evaluated"]] == list(range(1, K + 1))
    j = ev["model_index"]
    chosen = ev["evaluated"][j]
    # the fewest held-out errors per held-out patient among the K
    rates = [e["errors"] / e["rows"] for e in ev["evaluated"]]
    assert rates[j] == pytest.approx(min(rates))
    if ev["kept"] == "model":
        assert res["certificate"] == pytest.approx(chosen["bound"]) and ev["alpha_share"] == pytest.approx(
            evaluation_share(j + 1))
    else:
        assert res["certificate"] == pytest.approx(ev["prior_bound"]["value"])
    assert res["certificate"] == min(ev["model_bound"]["value"], ev["prior_bound"]["value"])
    assert np.isfinite(res["certificate"]) and 0 < res["certificate"] <= 1
