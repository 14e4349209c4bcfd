"""``marg export`` imports only what an export uses (issue 48, item 2): not pandas (pyarrow loads it when
handed a Python value), not scikit-learn (``opendp.prelude`` loads it, and pandas and scipy.stats
with it, when installed), not scipy.stats, not the learners — exact or under DP, installed or not;
an exact export no scipy and no ``numpy.polynomial`` (round 1's split rule's quadrature) at all; an unsigned
export no key serialization (``cryptography.hazmat.primitives.serialization``: only keys read or written need it);
an exact export, from CSV or Parquet, no ``pyarrow.compute`` (the encoder calls Arrow's kernels by name:
``marginals/data/kernels.py``); no other command's module of the command line (``cli/commands.py``).
Read from the console script's own import log (``PYTHONPROFILEIMPORTTIME``)."""

from __future__ import annotations

import pytest

from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label
from tests.helpers.console import marg

NOT_FOR_AN_EXPORT = ("pandas", "sklearn", "scipy.stats", "polars", "marg.learners",
                     "cryptography.hazmat.primitives.serialization",
                     "marg.cli.audit", "marg.cli.learn", "marg.cli.secagg", "marg.cli.study_cmd")  # cli/commands.py


def imported(stderr: str) -> set[str]:
    """Module names in a ``-X importtime`` log."""
    return {line.split("|")[-1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


@pytest.mark.parametrize("dp,fmt", [(False, "csv"), (False, "parquet"), (True, "csv")])
def test_an_export_imports_no_pandas_sklearn_scipy_stats_or_learners(tmp_path, dp, fmt):
    cb = Codebook(features=tuple(CategoricalFeature(f"f{k}", ("a", "b", "c")) for k in range(30)),
                  label=Label("y", ("neg", "pos")))
    cb.save(tmp_path / "cb.json")
    with open(tmp_path / "site.csv", "w") as fh:
        fh.write(",".join(f.name for f in cb.features) + ",y\n")
        for r in range(200):
            fh.write(",".join("abc"[(r * (k + 1)) % 3] for k in range(30)) + f",{'neg' if r % 3 else 'pos'}\n")
    if fmt == "parquet":
        import pyarrow.csv as pcsv
        import pyarrow.parquet as pq

        pq.write_table(pcsv.read_csv(tmp_path / "site.csv"), tmp_path / "site.parquet")
    extra = ["--epsilon", "1"] if dp else ["--stats", "first"]
    res = marg("export", f"site.{fmt}", "--schema", "cb.json", "--site", "s1", "--out", "s1.bundle",
               "--ledger", "ledger",
               *extra, cwd=tmp_path, env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert res.returncode == 0, res.stderr[-2000:]
    mods = imported(res.stderr)
    assert "marg.protocols.export" in mods  # the log is there
    # an exact export imports no scipy at all (round 1's split rule, the only user on its path, loads it when called)
    banned = NOT_FOR_AN_EXPORT + (() if dp else ("scipy", "numpy.polynomial", "pyarrow.compute"))
    bad = sorted(m for m in mods if any(m == b or m.startswith(b + ".") for b in banned))
    assert not bad, f"an export imported {bad[:8]}"
