"""DuckDB URIs mean what the README says (issue 37, item 6): ``duckdb://site.db`` is relative to the
working folder, ``duckdb:///abs/site.db`` absolute, and ``duckdb:///site.db`` with only ``./site.db``
there is refused naming the relative form; a refused value is located in the table — in the count and
in the rows read for ``--holdout`` (the old message said ``at row 2``)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from marg.errors import InputError
from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label
from marg.marginals.sources import open_source
from marg.marginals.counts.tables import plan_cliques
from tests.helpers.console import run

CB = Codebook(features=(CategoricalFeature("grade", ("1", "2", "3")),), label=Label("y", ("0", "1")))


def make_db(path, grades):
    duckdb = pytest.importorskip("duckdb")
    t = pa.table({"grade": pa.array(grades, pa.float64()), "y": pa.array([k % 2 for k in range(len(grades))])})
    con = duckdb.connect(str(path))
    con.register("t", t)
    con.execute("CREATE TABLE visits AS SELECT * FROM t")
    con.close()


def test_relative_and_absolute_duckdb_uris(tmp_path, monkeypatch):
    make_db(tmp_path / "site.db", [1.0, 2.0, 3.0, 1.0] * 10)
    monkeypatch.chdir(tmp_path)
    for uri in ("duckdb://site.db?table=visits", f"duckdb://{tmp_path}/site.db?table=visits"):
        with open_source(uri) as src:
            tables, n = src.count(CB, plan_cliques(CB, "first"))
        assert n == 40 and tables[1].counts.sum() == 40  # DOUBLE 1 is level "1"
    with pytest.raises(InputError, match=r"DuckDB database not found: /site.db \(duckdb:///PATH is absolute; for "
                                         r"site.db in this folder write duckdb://site.db\)"):
        open_source("duckdb:///site.db?table=visits")


def test_refused_value_named_in_the_table_for_holdout_too(tmp_path, monkeypatch):
    make_db(tmp_path / "site.db", [1.0, 2.0, 9.0, 1.0] * 10)
    monkeypatch.chdir(tmp_path)
    CB.save(tmp_path / "cb.json")
    for extra in ([], ["--holdout", "0.2"]):
        r = run("export", "duckdb://site.db?table=visits", "--schema", "cb.json", "--site", "s", "--out", "s.bundle",
                "--ledger", "led", "--min-cell", "1", *extra)
        assert r.exit_code == 2, r.output
        assert "unknown level in duckdb table 'visits' in site.db" in r.stderr and "at row" not in r.stderr
        assert "'9'" not in r.stderr  # a patient's value is never echoed (issue 35)
        assert not (tmp_path / "s.bundle").exists()
