"""Select-then-measure releases through the one release plan (issue 36): round 1's label table and round 2's asked
tables carry exactly the noise and cost of a :class:`ReleasePlan` made before any data is read; the ledger charges
it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from marg.marginals.accounting import PrivacyCost, release_cost
from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label
from marg.marginals.study import label_plan, study_plan, study_record
from marg.protocols.bundle import Bundle
from marg.protocols.export import export_site
from marg.protocols.study import Round1, Round2


def _sites(tmp, n_sites=2, n=300, p=6, seed=3):
    rng = np.random.default_rng(seed)
    cb = Codebook(features=tuple(CategoricalFeature(f"f{j}", ("0", "1", "2")) for j in range(p)),
                  label=Label("y", ("a", "b")))
    files = []
    for s in range(n_sites):
        y = rng.integers(0, 2, n)
        X = rng.integers(0, 3, (n, p))
        X[:, 0] = np.where(rng.random(n) < 0.9, y, 2)
        f = tmp / f"site{s}.csv"
        f.write_text("\n".join([",".join([f"f{j}" for j in range(p)] + ["y"])] +
                               [",".join([str(v) for v in X[i]] + ["ab"[y[i]]]) for i in range(n)]) + "\n")
        files.append(f)
    return cb, files


def test_both_rounds_release_the_noise_and_cost_their_plans_state(tmp_path):
    from marg.learners.study.two_round import plan_request, site_round1

    cb, files = _sites(tmp_path)
    r1_bundles, recs = [], []
    for s, f in enumerate(files):
        round1 = Round1(study_plan(cb, 1.0, 1e-6, rows=(300, 300)))
        out = tmp_path / f"s{s}.r1"
        res = export_site(f, cb, f"s{s}", out, study=round1, ledger_dir=tmp_path / f"ledger{s}")
        b = Bundle.from_bytes(out.read_bytes())
        lp = label_plan(cb, round1.plan)  # made from the codebook and the plan alone
        (label,) = b.tables
        assert (label.noise.scale == lp.scales[0] and label.noise.std == lp.stds[0]
                and label.noise.rho == lp.tables[0].cost)
        sel = b.header["study"]["selection"]
        assert res.cost == release_cost([*lp.parts, ("noisy-top-k", 0.0, sel["rho"], 1e-6)])
        assert PrivacyCost.from_dict(b.header["privacy"]) == res.cost
        r1_bundles.append(b)
        recs.append(site_round1(b.site, study_record(b.header), label.counts))
    req = plan_request(recs, cb)
    for s, f in enumerate(files):
        round2 = Round2(req, "0" * 64, None)
        round2.max_rows = 1
        round2.check(tmp_path / f"ledger{s}", cb, f"s{s}")  # refusals and the plan: before any data is read
        plan = round2.release_plan
        assert plan is not None and [t.spec.clique for t in plan.tables] == round2.cliques(cb)
        assert plan.cost.rho <= round2.rho * (1 + 1e-12) and plan.cost.rho == pytest.approx(round2.rho, rel=1e-9)
        out = tmp_path / f"s{s}.r2"
        res = export_site(f, cb, f"s{s}", out, study=Round2(req, "0" * 64, None), ledger_dir=tmp_path / f"ledger{s}")
        b = Bundle.from_bytes(out.read_bytes())
        assert res.cost == plan.cost == PrivacyCost.from_dict(b.header["privacy"])
        assert [t.noise.scale for t in b.tables] == plan.scales and [t.noise.std for t in b.tables] == plan.stds
        entry = json.loads((tmp_path / f"ledger{s}" / "ledger.jsonl").read_text().splitlines()[-1])
        assert PrivacyCost.from_dict(entry["cost"]) == plan.cost


def test_a_request_naming_a_pair_out_of_the_codebooks_order_is_planned_for_the_table_counted(tmp_path):
    """A learner's request may name a pair as (f3, f0) (its noisy ranking's order); the site counts N[f0,f3,y]:
    the plan made before the count is for that table, in the request's table order, at the request's weights."""
    from marg.marginals.request import StudyRequest

    cb, files = _sites(tmp_path, n_sites=1)
    round1 = Round1(study_plan(cb, 1.0, 1e-6, rows=(300,)))
    export_site(files[0], cb, "s0", tmp_path / "s0.r1", study=round1, ledger_dir=tmp_path / "ledger")
    req = StudyRequest(cb.fingerprint, (("f3", "f0"), ("f2",)), (0.7, 0.3), {"s0": round1.plan.rho_rest}, {})
    out = tmp_path / "s0.r2"
    res = export_site(files[0], cb, "s0", out, study=Round2(req, "0" * 64, None), ledger_dir=tmp_path / "ledger")
    b = Bundle.from_bytes(out.read_bytes())
    assert [t.clique for t in b.tables] == [("f0", "f3", "y"), ("f2", "y")]
    assert [t.noise.rho for t in b.tables] == pytest.approx([0.7 * round1.plan.rho_rest, 0.3 * round1.plan.rho_rest],
                                                            rel=1e-9)
    assert res.cost.rho == pytest.approx(round1.plan.rho_rest, rel=1e-9)
