"""Spark counts where the rows are (marginals/sources/spark_source.py): the same tables, splits,
row bounds and repeat checks as the local path, on several partitions of the same rows in another order.

Every comparison is against the file source over the same rows (a CSV, streamed by the local
encoder and counter): counts equal as integers, moments to float rounding (partition sums
are added in another order), and the holdout's and the row bound's tallies equal — the
held-out fingerprint is an order-free sum, so equal fingerprints mean the same held-out rows.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from marg.errors import InputError
from marg.marginals.holdout import Holdout
from marg.marginals.privacy_unit import PrivacyUnit, count_rows, repeating_column
from marg.marginals.sources import open_source
from marg.marginals.sources.spark_source import SparkSource
from marg.marginals.counts.tables import plan_cliques
from tests.helpers.visits import CB, assert_same, rows, write

KEY = bytes(range(32))


@pytest.fixture(scope="module")
def spark():
    from tests.helpers.services import local_spark

    yield from local_spark()


def test_partition_counts_equal_the_file_source(tmp_path, spark):
    """First-order and pair tables (missing levels, numeric bins, raw moments) from three partitions."""
    csv, parts = write(tmp_path, rows())
    for stats in ("first", "all"):
        cliques = plan_cliques(CB, stats)
        with open_source(csv) as src:
            want, n = src.count(CB, cliques)
        for spec in (parts, csv):
            with open_source(spec, engine="spark") as src:
                got, m = src.count(CB, cliques)
            assert m == n
            assert_same(want, got)


@pytest.mark.parametrize("unit, holdout", [
    (None, Holdout(0.3)),                       # by content: identical rows' occurrences meet in one partition
    (None, Holdout(0.3, "pid")),                # by id
    (PrivacyUnit("pid", 1), None),              # the row bound alone
    (PrivacyUnit("pid", 2), Holdout(0.25, "pid")),  # both, split by the unit
])
def test_split_and_row_bound_equal_the_local_path(tmp_path, spark, monkeypatch, unit, holdout):
    """The Parquet folder read on the executors (a shuffle of Arrow pieces; Spark's reader made to fail), and the
    CSV through Spark's reader (a shuffle of Spark's rows): both the local path's tables, split and bound."""
    def refuse(self, *a, **k):
        raise AssertionError("read through Spark's reader")

    csv, parts = write(tmp_path, rows())
    cliques = plan_cliques(CB, "all")
    with open_source(csv) as src:
        want, n, split, bound = count_rows(src, CB, cliques, unit, holdout, KEY)
    for spec in (parts, csv):
        with monkeypatch.context() as mp:
            if spec == parts:
                mp.setattr(SparkSource, "_frame", refuse)
            with open_source(spec, engine="spark") as src:
                got, m, s2, b2 = count_rows(src, CB, cliques, unit, holdout, KEY)
        assert m == n
        assert_same(want, got)
        if holdout is not None:
            assert (s2.rows, s2.held, s2.fingerprint) == (split.rows, split.held, split.fingerprint)
            assert 0 < split.held < split.rows
        if unit is not None:
            assert (b2.units, b2.over, b2.dropped, b2.largest) == (bound.units, bound.over, bound.dropped,
                                                                   bound.largest)
            assert bound.dropped > 0 and b2.note() == bound.note()


def test_repeat_check_is_the_local_paths(tmp_path, spark):
    """The id-like column's largest repeat, tallied by Spark's executors (trimmed text, empty and missing
    ignored), is the local path's; an id-like column without repeats passes."""
    table = rows()
    n = table.num_rows
    pads = ["", " ", "\t", "  "]
    pid = [None if i % 17 == 0 else "" if i % 19 == 0 else pads[i % 4] + str(v) + pads[(i // 4) % 4]
           for i, v in enumerate(table.column("pid").to_pylist())]
    table = table.append_column("visit_id", pa.array([f" v{i} " for i in range(n)]))
    table = table.append_column("patient_id", pa.array(pid))
    csv, parts = write(tmp_path, table)
    with open_source(csv) as src:
        want = repeating_column(src, CB)
        assert want is not None and want[0] in ("pid", "patient_id") and want[1] >= 2  # pid: an id name too (issue 45)
        also = repeating_column(src, CB, also=["pid"])
        assert also[0] == "pid"
    with open_source(parts, engine="spark") as src:
        assert repeating_column(src, CB) == want
        assert repeating_column(src, CB, also=["pid"]) == also


def test_a_refused_value_in_one_partition_is_one_line(tmp_path, spark):
    table = rows()
    color = table.column("color").to_pylist()
    color[-1] = "purple"
    csv, parts = write(tmp_path, table.set_column(0, "color", pa.array(color)))
    for unit in (None, PrivacyUnit("pid", 2)):
        with open_source(parts, engine="spark") as src, pytest.raises(InputError, match="'color'") as exc:
            count_rows(src, CB, plan_cliques(CB, "first"), unit, Holdout(0.2) if unit is None else None, KEY)
        assert "\n" not in str(exc.value) and "(read by spark)" in str(exc.value)
