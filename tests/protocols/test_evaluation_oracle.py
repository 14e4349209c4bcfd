"""The evaluation round is no oracle (issue 35), through the installed console script.

The attack: on a site without a cap the learner signs a probe model and asks for exact
evaluations on the held-out patients, one after another; whether an evaluation is released or
refused ("the data changed"), and the min-cell refusal of ``--evaluate-content classes``
naming a class, told it whether a held-out patient had given values, and refused probes left
no ledger entry. Now: one exact evaluation per held-out set (refused before any row is read
after it), refusals recorded in the ledger like releases, naming no cell or class; every
evaluation states its ordinal among the models evaluated on the set (``evaluations_on_split``).
"""

from __future__ import annotations

import json

from marg.marginals.synthetic import SITES, demo_codebook, generate, write_csv
from marg.protocols.bundle import load_bundle
from tests.helpers.console import marg, run

GENERIC = "a count of this evaluation is below the min-cell threshold (which one is not said)"


def _ledger(tmp):
    return [json.loads(x) for x in (tmp / "led" / "ledger.jsonl").read_text().splitlines()]


def test_exact_evaluations_once_per_held_out_set_and_refusals_recorded(tmp_path, monkeypatch):
    demo_codebook().save(tmp_path / "cb.json")
    write_csv(tmp_path / "d.csv", generate(400, SITES[0], seed=3))
    site = ("--schema", "cb.json", "--site", "north", "--ledger", "led")
    monkeypatch.chdir(tmp_path)
    r = run("export", "d.csv", *site, "--out", "t.bundle", "--holdout", "0.3", "--min-cell", "1")
    assert r.exit_code == 0, r.output
    r = run("learn", "t.bundle", "--out", "m.json", "--learner", "nb", "--no-sign", "--allow-unsigned")
    assert r.exit_code == 0, r.output
    (tmp_path / "probe.json").write_bytes((tmp_path / "m.json").read_bytes() + b"\n")  # another model file
    ev = ("--allow-unsigned",)
    n0 = len(_ledger(tmp_path))
    # 1. the min-cell refusal of a class-wise evaluation names no class and no count, and is recorded
    r = marg("export", "d.csv", *site, "--out", "e1.eval", "--evaluate", "m.json", *ev, "--evaluate-content",
             "classes", "--min-cell", "1000", cwd=tmp_path)
    assert r.returncode == 1 and GENERIC in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "'yes'" not in r.stderr and "'no'" not in r.stderr and "truth" not in r.stderr
    assert not (tmp_path / "e1.eval").exists()
    last = _ledger(tmp_path)[-1]
    assert len(_ledger(tmp_path)) == n0 + 1 and last["statistics"] == [] and last["cost"]["epsilon"] == 0.0
    assert last["source"]["evaluation"]["refused"] == "min-cell" and last["source"]["evaluation"]["exact"] is True
    # 2. it was the held-out set's one exact evaluation: the next is refused before any row is read
    for data in ("d.csv", "no-such-file.csv"):
        r = marg("export", data, *site, "--out", "e2.eval", "--evaluate", "probe.json", *ev, "--min-cell", "1",
                 cwd=tmp_path)
        assert r.returncode == 1 and "had their one exact evaluation" in r.stderr, r.stderr
    assert not (tmp_path / "e2.eval").exists() and len(_ledger(tmp_path)) == n0 + 1
    # 3. under DP evaluations go on, each with its ordinal among the models evaluated on the set; this site has
    # no cap, so after the first only with --allow-repeated-evaluations, which the ledger records (issue 45)
    for model, out, rank in (("probe.json", "p.eval", 2), ("m.json", "m.eval", 1), ("probe.json", "p2.eval", 2)):
        again = () if out == "p.eval" else ("--allow-repeated-evaluations",)
        if again:
            n = len(_ledger(tmp_path))
            r = run("export", "d.csv", *site, "--out", out, "--evaluate", model, *ev, "--epsilon", "1")
            assert r.exit_code == 1 and "no cap: repeated evaluations" in r.output, r.output
            assert len(_ledger(tmp_path)) == n and not (tmp_path / out).exists()
        r = run("export", "d.csv", *site, "--out", out, "--evaluate", model, *ev, "--epsilon", "1", *again)
        assert r.exit_code == 0, r.output
        assert load_bundle(tmp_path / out).header["evaluations_on_split"] == rank
        assert _ledger(tmp_path)[-1]["source"]["evaluation"]["evaluations_on_split"] == rank
        assert _ledger(tmp_path)[-1]["source"]["evaluation"].get("repeated_without_cap", False) == bool(again)
    r = run("audit", "verify", "--ledger", "led", "--allow-unsigned")  # the refusal entry keeps the chain valid
    assert r.exit_code == 0, r.output
    assert "refused evaluation (min-cell, exact)" in run("audit", "show", "--ledger", "led").stdout


def test_an_older_marg_exact_evaluation_counts_and_sets_of_one_key_share_it():
    """A ledger entry of an exact evaluation recorded before issue 35 (its digests scoped to held-out rows,
    no record of the set) spends the one exact evaluation too; splits of one key by rows or by an id
    column overlap, so they share it; ordinals count distinct models per set."""
    from types import SimpleNamespace

    import pytest

    from marg.errors import RefusedError
    from marg.marginals.holdout import Holdout
    from marg.protocols import evaluation_ledger as evl

    def split(fraction, by=None, key=b"k" * 32, fp="ab"):
        return SimpleNamespace(spec=Holdout(fraction, by), key=key, n_held=10, held_fingerprint=fp)

    a, b = split(0.3), split(0.2, "patient_id")
    evl.check_exact([], a)
    with pytest.raises(RefusedError, match="entry #3"):
        evl.check_exact([{"seq": 3, "exact": {"scope": "evaluation", "n": "x"}}], a)
    evl.check_exact([{"seq": 3, "exact": {"scope": "study", "n": "x"}}], a)  # a training release: no evaluation
    entry = {"seq": 5, "source": {"evaluation": evl.record_of(a, "m1", True, 1)}}
    with pytest.raises(RefusedError, match="entry #5"):
        evl.check_exact([entry], b)
    evl.check_exact([entry], split(0.3, key=b"o" * 32))  # another site key: other patients
    entries = [entry, {"seq": 6, "source": {"evaluation": evl.record_of(a, "m2", False, 2)}}]
    assert [evl.ordinal(entries, a, m) for m in ("m1", "m2", "m3")] == [1, 2, 3]
    assert evl.ordinal(entries, b, "m2") == 1  # another held-out set
