"""The two-round protocol through the installed console script: round 1 first-order tables, the
learner's request, round 2 the requested pair tables alone, and Rényi on all the bundles."""

from __future__ import annotations

import json

import numpy as np
import pytest

from marg.learners.model import Model
from marg.marginals.encoding import encode_file
from marg.marginals.synthetic import SITES, demo_codebook, generate, write_csv
from marg.protocols.load import load_summary
from tests.test_console_script import marg


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tworound")
    schema = tmp / "codebook.json"
    demo_codebook().save(schema)
    data = {}
    for k, prof in enumerate(SITES):
        cols = generate(2000, prof, seed=700 + k)
        write_csv(tmp / f"{prof.name}.csv", cols, slice(0, 1600))
        write_csv(tmp / f"{prof.name}_test.csv", cols, slice(1600, 2000))
        data[prof.name] = tmp / f"{prof.name}.csv"
    return tmp, schema, data


@pytest.mark.parametrize("dp", [True, False])
def test_two_round_renyi_through_the_console_script(study, dp):
    tmp, schema, data = study
    tag = "dp" if dp else "exact"
    priv = ["--epsilon", "1"] if dp else ["--min-cell", "1"]
    r1, r2 = [], []
    for site, f in data.items():
        out = tmp / f"{site}-{tag}-r1.bundle"
        p = marg("export", f, "--schema", schema, "--site", site, "--out", out, "--stats", "first",
                 "--ledger", tmp / f"{site}-{tag}-ledger", *priv, cwd=tmp)
        assert p.returncode == 0, p.stderr
        r1.append(out)
    req = tmp / f"request-{tag}.json"
    p = marg("request", *r1, "--top", "4", "--out", req, "--allow-unsigned", "--json", cwd=tmp)
    assert p.returncode == 0, p.stderr
    features = json.loads(p.stdout)["features"]
    for site, f in data.items():
        out = tmp / f"{site}-{tag}-r2.bundle"
        p = marg("export", f, "--schema", schema, "--site", site, "--out", out, "--pairs", f"@{req}",
                 "--ledger", tmp / f"{site}-{tag}-ledger", *priv, cwd=tmp)
        assert p.returncode == 0, p.stderr
        r2.append(out)
        inspect = json.loads(marg("inspect", out, "--json", cwd=tmp).stdout)
        names = [s["name"] for s in inspect["statistics"]]
        assert len(names) == 6 and all(n.count(",") == 2 for n in names)  # round 2 pays for the pairs only
    model = tmp / f"renyi-{tag}.json"
    p = marg("learn", *r1, *r2, "--learner", "renyi", "--out", model, "--allow-unsigned", "--json", cwd=tmp)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert sorted(d["features"]) == sorted(features)
    m = Model.load(model)
    assert d["certificate"]["kind"] == "W(h)" and 0 < m.worst_case_error <= 1
    enc = encode_file(tmp / "north_test.csv", m.codebook)
    err = float(np.mean(m.predict(enc.X) != enc.y))
    majority = min(np.mean(enc.y), 1 - np.mean(enc.y))
    assert err <= majority + 0.02
    # the default learner accepts the rounds too, and says what it chose
    p = marg("learn", *r1, *r2, "--out", tmp / f"auto-{tag}.json", "--allow-unsigned", "--json", cwd=tmp)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["auto_rule"]
    if not dp:  # exact: round 1 + round 2 is the one-round release of the same tables
        combined = load_summary(r1 + r2, allow_unsigned=True)
        one = []
        for site, f in data.items():
            out = tmp / f"{site}-one.bundle"
            pairs = ",".join(f"{a}:{b}" for a, b in json.loads(req.read_text())["pairs"])
            p = marg("export", f, "--schema", schema, "--site", site, "--out", out, "--stats", "pairs", "--pairs", pairs,
                     "--no-ledger", "--min-cell", "1", cwd=tmp)
            assert p.returncode == 0, p.stderr
            one.append(out)
        single = load_summary(one, allow_unsigned=True)
        a = {(t.clique, t.kind): t.counts for t in combined.tables}
        b = {(t.clique, t.kind): t.counts for t in single.tables}
        assert a.keys() == b.keys()
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])
        # a site sending round 2 twice is refused: its patients would count twice
        p = marg("learn", *r1, *r2, r2[0], "--out", tmp / "x.json", "--allow-unsigned", cwd=tmp)
        assert p.returncode == 2 and "already released" in p.stderr
