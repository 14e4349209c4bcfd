"""An empty boost vote is never written as a model without ``--allow-empty`` (issue 37, item 3), and
the learner says early — on its own line, as soon as the first rules entered the LP without a weight —
that the vote is empty so far and why. The old ``marg learn`` wrote the empty vote (a model predicting
one class for every row) after a warning."""

from __future__ import annotations

import contextlib

from tests.helpers.console import marg, run


def test_empty_vote_refused_unless_allowed(tmp_path, datasets):
    data = datasets / "breast-w" / "breast-w.tsv.gz"
    with contextlib.chdir(tmp_path):
        assert run("schema", "init", data, "--label", "target", "--out", "cb.json").exit_code == 0
        r = run("export", data, "--schema", "cb.json", "--site", "a", "--out", "a.bundle", "--stats", "all",
                "--min-cell", "1", "--allow-draft", "--no-ledger")
        assert r.exit_code == 0, r.output
    args = ["learn", "a.bundle", "--learner", "boost", "--kappa", "200", "--allow-unsigned", "--no-sign",
            "--allow-unledgered"]
    r = marg(*args, "--out", "boost.json", cwd=tmp_path, env={"MARG_PROGRESS": "lines"})
    assert r.returncode == 1 and not (tmp_path / "boost.json").exists(), r.stderr
    lines = r.stderr.splitlines()
    first = next(k for k, ln in enumerate(lines) if ln.startswith("warning: boost: no rule has a weight so far"))
    last_iteration = max(k for k, ln in enumerate(lines) if "iteration" in ln)
    assert first < last_iteration  # said while the learner works, not after
    assert "half-width λ" in lines[first] and "--allow-empty" in lines[first]
    assert lines[-1].startswith("marg: error: the boost vote is empty:") and "Not written: --allow-empty" in lines[-1]
    r = marg(*args, "--out", "boost.json", "--allow-empty", cwd=tmp_path)
    assert r.returncode == 0 and (tmp_path / "boost.json").exists(), r.stderr
    assert "warning: the boost vote is empty" in r.stderr


def test_pricing_nodes_reach_boost_and_only_boost(tmp_path, datasets):
    """``--pricing-nodes N`` is boost's pricing work budget (0: none, every search to optimality): the fitted
    vote's ``pricing_nodes`` is what was given, and another learner refuses it."""
    import json

    data = datasets / "breast-w" / "breast-w.tsv.gz"
    with contextlib.chdir(tmp_path):
        assert run("schema", "init", data, "--label", "target", "--out", "cb.json").exit_code == 0
        assert run("export", data, "--schema", "cb.json", "--site", "a", "--out", "a.bundle", "--min-cell", "1",
                   "--allow-draft", "--no-ledger").exit_code == 0
        base = ["learn", "a.bundle", "--allow-unsigned", "--no-sign", "--allow-unledgered", "--allow-empty", "--json"]
        for given, expect in (("7", 7), ("0", None)):
            r = run(*base, "--learner", "boost", "--pricing-nodes", given, "--out", f"b{given}.json")
            assert r.exit_code == 0, r.output
            model = json.loads(open(f"b{given}.json").read())
            assert model["estimator"]["params"]["pricing_nodes"] == expect, model["estimator"]["params"]
    r = marg("learn", "a.bundle", "--learner", "nb", "--pricing-nodes", "7", "--allow-unsigned", "--no-sign",
             "--allow-unledgered", "--out", "nb.json", cwd=tmp_path)
    assert r.returncode == 2 and "--pricing-nodes does not apply to learner 'nb'" in r.stderr, r.stderr
    assert not (tmp_path / "nb.json").exists()
