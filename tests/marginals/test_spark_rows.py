"""Spark never streams rows to this process (issue 48): ``--evaluate``'s confusion matrix and the repeat check
of id-like columns run on the executors, and equal the local path's to the count.

The Spark source's :meth:`row_batches` (the one way rows reach the driver) is made to fail in every test
here, so a path that still reads the rows in this process fails instead of passing slowly. The comparisons
are against the file source over the same rows (a CSV, read by the local path): the evaluation bundle's
exact table equal as integers, the repeat check's answer and its largest repeat equal.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from marg.marginals.holdout import Holdout, Splitter
from marg.marginals.privacy_unit import PrivacyUnit, repeat_counts, repeating_column
from marg.marginals.sources import open_source
from marg.marginals.sources.spark_source import SparkSource
from tests.helpers.visits import CB, evaluate_both, rows, write

KEY = bytes(range(32))


@pytest.fixture(scope="module")
def spark():
    from tests.helpers.services import local_spark

    yield from local_spark()


@pytest.fixture(autouse=True)
def no_rows_to_the_driver(monkeypatch):
    def refuse(self, columns):
        raise AssertionError(f"rows of {columns} streamed to the driver")

    monkeypatch.setattr(SparkSource, "row_batches", refuse)


@pytest.mark.parametrize("split, unit, content", [
    (["--holdout", "0.3"], [], "confusion"),                                  # by content: a shuffle by content
    (["--holdout", "0.3", "--holdout-id", "pid"], [], "errors"),               # by id: no shuffle
    (["--holdout", "0.3"], ["--privacy-unit", "pid", "--max-rows-per-unit", "2"], "classes"),  # the unit's bound
])
def test_evaluate_counts_its_errors_on_the_executors(tmp_path, spark, split, unit, content):
    """In this process (the active session) and, for the unit's bound, through the console script (local[2])."""
    local, spark_eval, (csv, led) = evaluate_both(tmp_path, split, unit, content, console=bool(unit))
    assert spark_eval == local
    if split != ["--holdout", "0.3"] or unit:
        return  # by id / within the bound: count_rows's tests check the split; here the two engines agree
    # by content: the local matrix is the model's on the held-out rows, recomputed here from the site's key
    import numpy as np

    from marg.learners.estimator.model import Model
    from marg.marginals.data.encoding import encode_file
    from marg.marginals.holdout import site_key

    m = Model.load(tmp_path / "m.json")
    enc = encode_file(csv, CB)
    mask = Splitter(Holdout(0.3), site_key(led)).mask(enc)
    conf = np.zeros((2, 2), dtype=np.int64)
    np.add.at(conf, (m.predict(enc.X[mask]), enc.y[mask]), 1)
    assert local[0][1] == conf.tolist() and conf.sum() > 100


def test_held_confusion_tallies_equal_the_local_path(tmp_path, spark):
    """The split's and the bound's tallies summed over partitions are the one pass's."""
    from marg.learners.estimator.model import Model
    from marg.marginals.held_confusion import held_confusion

    evaluate_both(tmp_path, ["--holdout", "0.25"], ["--privacy-unit", "pid", "--max-rows-per-unit", "1"], "errors")
    m = Model.load(tmp_path / "m.json")
    csv, parts = str(tmp_path / "d.csv"), str(tmp_path / "parts")
    unit, spec = PrivacyUnit("pid", 1), Holdout(0.25, "pid")
    out = []
    for s in (csv, parts):
        split = Splitter(spec, KEY)
        with open_source(s, **({"engine": "spark"} if s == parts else {})) as src:
            conf, bound = held_confusion(src, CB, m.predict, split, unit)
        out.append((conf.tolist(), split.rows, split.held, split.fingerprint,
                    (bound.units, bound.over, bound.dropped, bound.largest)))
    assert out[0] == out[1]
    assert out[0][2] > 0 and out[0][4][2] > 0  # rows held out, rows beyond the bound left out


def test_the_repeat_check_runs_on_the_executors(tmp_path, spark):
    """Id-like columns (by name, by distinctness) with padding, empty and missing values, spellings that
    normalise to one id, floats that repeat by chance and numbers written with fractions: every column's
    largest repeat and id-likeness equal the local path's."""
    table = rows(seed=9, n=1200)
    n = table.num_rows
    pads = ["", " ", "\t", "  "]
    pid = [None if i % 17 == 0 else "" if i % 19 == 0 else pads[i % 4] + f"P-{v}" + pads[(i // 4) % 4]
           for i, v in enumerate(table.column("pid").to_pylist())]
    table = table.append_column("visit_id", pa.array([f" v{i} " if i % 50 else f"V-{i - 1}" for i in range(n)]))
    table = table.append_column("patient_id", pa.array(pid))
    table = table.append_column("weight", pa.array([float(i % 300) / 4 for i in range(n)]))  # float: repeats by chance
    table = table.append_column("dose", pa.array([f"{i % 700}.5" for i in range(n)]))  # text numbers with fractions
    table = table.append_column("ward", pa.array([str(i) for i in range(n)]))  # distinct numbers: id-like
    csv, parts = write(tmp_path, table)
    with open_source(csv) as src:
        want = repeat_counts(src, CB, also=["color"])
        first = repeating_column(src, CB)
    with open_source(parts, engine="spark") as src:
        got = repeat_counts(src, CB, also=["color"])
        assert repeating_column(src, CB) == first
    assert got == want
    assert want["visit_id"] == (2, True)  # "V-49" and " v49 " are one id
    assert want["weight"][1] is False and want["weight"][0] > 1 and want["dose"][1] is False
    assert want["ward"] == (1, True) and want["color"][1] is True and want["color"][0] > 300
    assert first[0] in ("pid", "patient_id")
