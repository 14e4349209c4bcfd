"""What the progress line says is true (issue 37, item 5): the summary line of the automatic choice
names the learner chosen, not the last candidate tried; naive Bayes' live bounds are bounds of an
error rate, inside [0, 1] (the old records carried the LP's raw values, ``between -1965.9 and 4035.1``)."""

from __future__ import annotations

from cli.progress import LearnProgress
from marg.learners.classifiers.naive_bayes import NaiveBayes
from marg.marginals.draft import draft_codebook
from marg.marginals.sources import open_source
from marg.marginals.summary import Summary
from marg.marginals.counts.tables import plan_cliques


def test_auto_summary_line_names_the_chosen_learner(capsys, monkeypatch):
    monkeypatch.setenv("MARG_PROGRESS_AFTER", "0")
    prog = LearnProgress("learn auto", quiet=True)
    for name, cert in (("nb", 0.31), ("mrc", 0.42), ("renyi", 1.0)):  # the candidates in the order they were tried
        prog({"stage": "auto", "learner": name, "params": {}, "error": None, "certificate": cert})
    prog.finish(chosen="nb")
    err = capsys.readouterr().err
    assert "auto chose nb" in err and "renyi" not in err


def test_naive_bayes_live_bounds_are_an_error_rates(datasets):
    path = datasets / "breast-w" / "breast-w.tsv.gz"
    cb = draft_codebook(path, "target")
    with open_source(path) as src:
        tables, _ = src.count(cb, plan_cliques(cb, "first"))
    records: list[dict] = []
    nb = NaiveBayes(callback=records.append).fit(Summary(cb, tables))  # the work budget: the same rounds on any machine
    bounds = [(r["lower"], r["upper"]) for r in records if r.get("stage") == "certify"]
    assert len(bounds) >= 3
    assert all(0.0 <= lo <= up <= 1.0 for lo, up in bounds), bounds[:5]
    ups = [up for _, up in bounds]
    assert ups == sorted(ups, reverse=True)  # the best so far: never worse
    assert bounds[-1][1] >= nb.certificate_.value - 1e-9
