"""Spark on a real standalone cluster (a master and two workers on 127.0.0.1, started from pyspark's
own ``spark-class``): the partitions are counted in the workers' Python processes, and the tables,
the holdout split and the privacy unit's row bound equal the local path's (the file source)."""

from __future__ import annotations

import pytest

from marg.marginals.holdout import Holdout
from marg.marginals.privacy_unit import PrivacyUnit, count_rows
from marg.marginals.sources import open_source
from marg.marginals.counts.tables import plan_cliques
from tests.helpers.visits import CB, assert_same, rows, write

KEY = bytes(range(7, 39))


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    from tests.helpers.services import standalone_spark

    yield from standalone_spark(workers=2, tmp=tmp_path_factory.mktemp("cluster"))


def test_the_cluster_counts_what_the_local_path_counts(tmp_path, spark):
    csv, parts = write(tmp_path, rows(seed=21, n=1200))
    cliques = plan_cliques(CB, "all")
    with open_source(parts, engine="spark") as src:
        got, m = src.count(CB, cliques)
        assert src.describe()["master"].startswith("spark://127.0.0.1:")
    with open_source(csv) as src:
        want, n = src.count(CB, cliques)
    assert m == n
    assert_same(want, got)
    assert spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() == 3  # the driver and the 2 workers' executors


@pytest.mark.parametrize("unit, holdout", [(None, Holdout(0.2)), (PrivacyUnit("pid", 2), Holdout(0.2, "pid"))])
def test_the_cluster_splits_and_bounds_as_the_local_path(tmp_path, spark, unit, holdout):
    csv, parts = write(tmp_path, rows(seed=22, n=1200))
    cliques = plan_cliques(CB, "first")
    with open_source(csv) as src:
        want, n, split, bound = count_rows(src, CB, cliques, unit, holdout, KEY)
    with open_source(parts, engine="spark") as src:
        got, m, s2, b2 = count_rows(src, CB, cliques, unit, holdout, KEY)
    assert m == n
    assert_same(want, got)
    assert (s2.rows, s2.held, s2.fingerprint) == (split.rows, split.held, split.fingerprint) and split.held > 0
    if unit is not None:
        assert (b2.units, b2.over, b2.dropped, b2.largest) == (bound.units, bound.over, bound.dropped, bound.largest)
        assert bound.dropped > 0


def test_the_cluster_evaluates_and_checks_repeats_as_the_local_path(tmp_path, spark):
    """``--evaluate`` within the unit's bound (a shuffle by the unit, the model on the workers) and the repeat
    check's tallies, on the cluster: the evaluation bundle's table and every column's answer are the local path's."""
    import pyarrow as pa

    from marg.marginals.privacy_unit import repeat_counts
    from tests.helpers.visits import evaluate_both

    local, got, (csv, _) = evaluate_both(tmp_path, ["--holdout", "0.3"],
                                         ["--privacy-unit", "pid", "--max-rows-per-unit", "2"],
                                         "confusion")
    assert got == local and sum(map(sum, local[0][1])) > 100
    table = rows(seed=23, n=900)
    table = table.append_column("visit_id", pa.array([f" V-{i // 2} " for i in range(table.num_rows)]))
    other = tmp_path / "repeats"
    other.mkdir()
    csv, parts = write(other, table)
    with open_source(csv) as src:
        want = repeat_counts(src, CB)
    with open_source(parts, engine="spark") as src:
        assert repeat_counts(src, CB) == want
    assert want["visit_id"] == (2, True) and want["pid"][0] >= 2
