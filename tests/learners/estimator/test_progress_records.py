"""Every learner that can work for long says what it is doing while it works: the records
arrive during the fit (auto: one per candidate as it is fitted, before any error estimate;
naive Bayes: its LP bound before the exact refinement; boost: its iterations, and a stop at
the time limit), and the command line's progress line turns each into words."""

from __future__ import annotations

import numpy as np

from cli.progress import LearnProgress
from marg.learners.auto import AutoLearner, candidate_name
from marg.learners.boost.vote import BoostVote
from marg.learners.classifiers.naive_bayes import NaiveBayes
from tests.helpers.tan import three_sites as _three_sites


def test_auto_reports_each_candidate_as_it_is_fitted():
    cb, S, _ = _three_sites(np.random.default_rng(0), (300, 250, 200))
    records = []
    est = AutoLearner(callback=records.append).fit(S)
    rows = est.candidates_
    first = records[: len(rows)]  # during fitting: every candidate in order, its certificate, no error yet
    assert [r["learner"] for r in first] == [candidate_name(r.learner, r.params) for r in rows]
    assert all(r["error"] is None for r in first)
    assert [r["certificate"] for r in first] == [r.certificate for r in rows]
    assert records[len(rows)]["stage"] == "note"
    assert [r["error"] for r in records[len(rows) + 1: 2 * len(rows) + 1]] == [r.error for r in rows]  # the estimates
    last = records[-1]  # then the choice, last: the progress line ends on what was chosen (issue 38)
    k = next(i for i, r in enumerate(rows) if r.chosen)
    assert last["chosen"] is True and len(records) == 2 * len(rows) + 2
    assert last["learner"] == candidate_name(rows[k].learner, rows[k].params) and last["error"] == rows[k].error


def test_the_last_progress_line_and_the_summary_name_the_chosen_candidate(tmp_path):
    """Through the console script (``MARG_PROGRESS=lines``): the last ``auto:`` line and the summary line name the
    candidate chosen (with its options), not the last one tried (the old line said ``learn auto: auto: prior …``)."""
    from tests.helpers.console import marg
    from tests.helpers.study import export_study, write_study

    bundles = export_study(write_study(tmp_path, 300, 5)).bundles
    r = marg("learn", *bundles, "--allow-unsigned", "--out", tmp_path / "m.json", cwd=tmp_path,
             env={"MARG_PROGRESS": "lines", "MARG_PROGRESS_AFTER": "0"})
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip().startswith("auto:")]
    summary = next(ln for ln in r.stderr.splitlines() if ln.startswith("learn auto:"))
    chosen = next(ln.strip()[2:].split("  ")[0] for ln in r.stdout.splitlines() if ln.lstrip().startswith("* "))
    assert lines[-1].strip().startswith(f"auto: chose {chosen}"), (lines[-1], chosen)
    assert summary.startswith(f"learn auto: auto chose {chosen};"), summary


def test_naive_bayes_says_its_lp_bound_before_refining():
    cb, S, _ = _three_sites(np.random.default_rng(1), (300, 250, 200))
    records = []
    nb = NaiveBayes(callback=records.append, time_limit=5.0).fit(S)
    assert records[0]["stage"] == "note" and "W_L" in records[0]["text"] and "5 s" in records[0]["text"]
    w_l = float(records[0]["text"].split("W_L = ")[1].split(";")[0])
    assert nb.certificate_.value <= w_l + 5e-5  # the certificate is never above the LP bound it announced


def test_progress_lines_for_the_stop_and_the_note(capsys, monkeypatch):
    monkeypatch.setenv("MARG_PROGRESS", "lines")
    prog = LearnProgress("learn boost")
    prog({"stage": "note", "text": "LP bound W_L = 0.8000; refining W(h) by row generation for at most 10 s"})
    prog({"stage": "cg", "k": 1, "R": 0.5, "size": "2 candidate rules in the LP"})
    prog({"stage": "time_limit", "k": 1, "R": 0.5, "seconds": 90.0})
    prog.finish()
    err = capsys.readouterr().err
    assert "refining W(h)" in err and "iteration 1: R = 0.500000" in err
    assert "stopped at the time limit (90 s) after 1 iterations" in err and "valid at any stop" in err


def test_boost_reports_the_time_limit_stop(monkeypatch):
    from marg.learners.boost import minimax_cg
    from marg.marginals.summary import Summary
    from tests.helpers.boost import Clock, sample, tiny_codebook

    cb = tiny_codebook((3, 3, 2, 2))
    X, y = sample(cb, 300, np.random.default_rng(2))
    S = Summary.from_rows(cb, X, y, stats="all")
    clock = Clock()
    original = minimax_cg.maximize_agreement

    def ticking(oracle, **kw):  # each pricing search takes a second of the driver's clock
        clock.skew += 1.0
        return original(oracle, **kw)

    monkeypatch.setattr(minimax_cg, "time", clock)
    monkeypatch.setattr(minimax_cg, "maximize_agreement", ticking)
    records = []
    est = BoostVote(s=0.0, time_limit=2.0, callback=records.append).fit(S)
    assert est.stopped_ == "time_limit" and records[-1]["stage"] == "time_limit" and records[-1]["seconds"] == 2.0
    assert any(r["stage"] == "cg" for r in records)  # the iterations before it
