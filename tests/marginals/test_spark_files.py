"""Spark's executors reading a Parquet input's row groups themselves (marginals/sources/spark_files.py):
the work list covers every row group once, the tables equal the local path's to the count without
Spark's reader (the source's ``partitions`` made to fail), a refused value is one line, and an input
that reader does not take (a hive-style partition column, in no file) is counted through Spark's reader
with the same tables."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

from marg.errors import InputError
from marg.marginals.holdout import Holdout
from marg.marginals.privacy_unit import PrivacyUnit, count_rows
from marg.marginals.sources import open_source
from marg.marginals.sources.spark_files import FOOTERS, SLICES_PER_CORE, local_parquet, work_slices
from marg.marginals.sources.spark_source import SparkSource
from marg.marginals.counts.tables import plan_cliques
from tests.helpers.visits import CB, assert_same, rows, shuffled, write

KEY = bytes(range(3, 35))


@pytest.fixture(scope="module")
def spark():
    from tests.helpers.services import local_spark

    yield from local_spark()


def _local(csv: str, cliques):
    with open_source(csv) as src:
        return src.count(CB, cliques)


def test_the_work_list_holds_every_row_group_once(tmp_path):
    files = []
    for i, groups in enumerate((7, 1, 3)):
        pq.write_table(rows(n=100 * groups).slice(0, 100 * groups), tmp_path / f"p{i}.parquet", row_group_size=100)
        files.append((tmp_path / f"p{i}.parquet").as_uri())
    for cores in (1, 2, 5):
        slices = work_slices(files, cores)
        got = Counter((f, g) for s in slices for f, gs in s for g in gs)
        assert got == Counter((f, g) for f, k in zip(files, (7, 1, 3)) for g in range(k))
        assert len(slices) == min(SLICES_PER_CORE * cores, 11)
    many = [f"file:///nowhere/p{i}.parquet" for i in range(FOOTERS + 1)]  # many files: split by file, no footer read
    slices = work_slices(many, 2)
    assert sorted(f for s in slices for f, gs in s if gs is None) == sorted(many)


def test_the_executors_read_the_parquet_files_and_count_what_the_local_path_counts(tmp_path, spark, monkeypatch):
    def refuse(self, *a, **k):
        raise AssertionError("counted through Spark's reader")

    monkeypatch.setattr(SparkSource, "partitions", refuse)
    monkeypatch.setattr(SparkSource, "_frame", refuse)  # a path on this machine: listed here, no footer job
    csv, parts = write(tmp_path, rows())
    one = tmp_path / "one.parquet"  # one file of many row groups: split among the tasks by row group
    pq.write_table(shuffled(rows(), seed=5), one, row_group_size=64)
    for stats in ("first", "all"):
        cliques = plan_cliques(CB, stats)
        want, n = _local(csv, cliques)
        for spec in (parts, str(one)):
            with open_source(spec, engine="spark") as src:
                got, m = src.count(CB, cliques)
            assert m == n
            assert_same(want, got)


def test_a_refused_value_in_a_file_is_one_line(tmp_path, spark):
    table = rows()
    code = table.column("code").to_pylist()
    code[-1] = 7
    _, parts = write(tmp_path, table.set_column(2, "code", pa.array(code)))
    with open_source(parts, engine="spark") as src, pytest.raises(InputError, match="'code'") as exc:
        src.count(CB, plan_cliques(CB, "first"))
    assert "\n" not in str(exc.value) and "(read by spark)" in str(exc.value)


def test_a_column_in_no_file_is_counted_through_sparks_reader(tmp_path, spark, monkeypatch):
    """``color`` as a hive-style partition folder (``color=red/``): in no file, so Spark's reader counts."""
    table = rows()
    table = table.set_column(0, "color", pc.utf8_trim_whitespace(table.column("color")))
    pcsv.write_csv(table, tmp_path / "d.csv")
    folder = tmp_path / "by_color"
    for color in ("red", "green", "blue"):
        (folder / f"color={color}").mkdir(parents=True)
        part = table.filter(pc.equal(table.column("color"), color)).drop_columns(["color"])
        pq.write_table(part, folder / f"color={color}" / "part-0.parquet")
    calls = []
    real = SparkSource.partitions
    monkeypatch.setattr(SparkSource, "partitions", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    cliques = plan_cliques(CB, "all")
    want, n = _local(str(tmp_path / "d.csv"), cliques)
    with open_source(str(folder), engine="spark") as src:
        got, m = src.count(CB, cliques)
    assert calls and m == n
    assert_same(want, got)


def test_a_local_path_is_listed_as_spark_lists_it(tmp_path, spark):
    """The files of a Parquet path on this machine, read here without a Spark job, are Spark's own listing
    (hidden and ``_`` files skipped, hive-style partition folders walked); where Spark's listing decides (a
    plain sub-folder, a URI, CSV) there is no local listing."""
    _, parts = write(tmp_path, rows())
    folder = Path(parts)
    (folder / "_SUCCESS").write_bytes(b"")
    (folder / ".part-0.parquet.crc").write_bytes(b"x")
    (folder / "_temporary").mkdir()
    (folder / "_temporary" / "junk").write_bytes(b"x")
    hive = tmp_path / "hive"
    for k in (1, 2):
        (hive / f"k={k}").mkdir(parents=True)
        pq.write_table(rows(n=30), hive / f"k={k}" / "part-0.parquet")
    one = folder / "part-0.parquet"
    for spec, files in ((folder, 3), (hive, 2), (one, 1)):
        want = sorted(Path(unquote(urlparse(u).path)) for u in spark.read.parquet(str(spec)).inputFiles())
        got = local_parquet(str(spec))
        assert got is not None and sorted(Path(unquote(urlparse(u).path)) for u in got) == want and len(want) == files
    (folder / "plain").mkdir()
    assert local_parquet(str(folder)) is None
    assert local_parquet(str(tmp_path / "d.csv")) is None and local_parquet(one.as_uri()) is None


def test_a_refused_value_on_a_row_path_is_one_line(tmp_path, spark):
    table = rows()
    code = table.column("code").to_pylist()
    code[3] = 7
    _, parts = write(tmp_path, table.set_column(2, "code", pa.array(code)))
    for unit, holdout in ((None, Holdout(0.2)), (PrivacyUnit("pid", 2), None)):
        with open_source(parts, engine="spark") as src, pytest.raises(InputError, match="'code'") as exc:
            count_rows(src, CB, plan_cliques(CB, "first"), unit, holdout, KEY)
        assert "\n" not in str(exc.value)
