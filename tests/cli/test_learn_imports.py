"""``marg learn`` imports only what a learn uses (issue 48, start-up): not pydantic (Typer builds a pydantic
adapter for an option with a range, ``min=``, and imports pydantic at every command that declares one), not
pandas, scikit-learn or scipy.stats, nor other commands' modules of the command line (``cli/commands.py``).
Read from the console script's own import log (``PYTHONPROFILEIMPORTTIME``)."""

from __future__ import annotations

from tests.helpers.console import demo_bundles, marg

NOT_FOR_A_LEARN = ("pydantic", "pandas", "sklearn", "scipy.stats",
                   "marg.cli.audit", "marg.cli.secagg", "marg.cli.study_cmd", "marg.cli.demo")  # cli/commands.py


def imported(stderr: str) -> set[str]:
    """Module names in a ``-X importtime`` log."""
    return {line.split("|")[-1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


def test_a_learn_imports_no_pydantic_pandas_sklearn_or_scipy_stats(tmp_path):
    bundles = demo_bundles(tmp_path, seed=3, n=200)
    res = marg("learn", *bundles, "--learner", "nb", "--allow-unsigned", "--no-sign", "--out", "m.model", "--json",
               cwd=tmp_path, env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert res.returncode == 0, res.stderr[-2000:]
    mods = imported(res.stderr)
    assert "marg.learners.learn" in mods  # the log is there
    bad = sorted(m for m in mods if any(m == b or m.startswith(b + ".") for b in NOT_FOR_A_LEARN))
    assert not bad, f"a learn imported {bad[:8]}"


def test_a_negative_pricing_budget_is_refused_in_typers_words(tmp_path):
    """The range Typer checked (``min=0``) is checked by the command: the same message, exit status 2."""
    res = marg("learn", "a.bundle", "--pricing-nodes", "-1", "--allow-unsigned", "--no-sign", "--out", "m.model",
               cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.strip() == ("marg: error: learn: invalid value for '--pricing-nodes': Input should be greater "
                                  "than or equal to 0 (see marg learn --help)")
