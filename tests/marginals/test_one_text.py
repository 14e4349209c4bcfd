"""One value, one text, whatever the source (issue 37, item 1).

adult and breast-w, as PMLB ships them (float columns written ``39.0``), go through every way a
site or a notebook holds rows: the CSV as written, a typed Parquet file, a DuckDB table of
DOUBLEs, PostgreSQL double precision, Spark, a pandas frame from ``pd.read_csv`` and an Arrow
table. Each must draft the same codebook, count the same integer tables and code the same rows
for prediction; a codebook drafted before the canonical text (levels ``13.0``) must read them all
the same. These fail on the old encoder: a typed source's 13.0 read ``"13"``, the CSV's ``"13.0"``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

from marg.errors import InputError
from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label
from marg.marginals.draft import draft_codebook
from marg.marginals.data.encoding import encode_file
from marg.marginals.data.frames import encode_rows, label_codes_of
from marg.marginals.sources import open_source
from marg.marginals.counts.tables import plan_cliques
from marg.marginals.data.value_text import canonical, canonical_value, typed_text

ROWS = {"adult": 4000, "breast-w": None}  # adult's first 4,000 rows (every source reads the same ones)


@pytest.fixture(scope="module")
def pg():
    """A throw-away PostgreSQL cluster (tests/helpers/services.py)."""
    from tests.helpers.services import local_postgres

    yield from local_postgres()


@pytest.fixture(scope="module")
def spark():
    """Spark in local mode (tests/helpers/services.py)."""
    from tests.helpers.services import local_spark

    yield from local_spark()


def text_table(datasets, name: str) -> pa.Table:
    """The dataset's rows as the file writes them: every cell text."""
    path = datasets / name / f"{name}.tsv.gz"
    names = pcsv.read_csv(path, parse_options=pcsv.ParseOptions(delimiter="\t"),
                          read_options=pcsv.ReadOptions(block_size=1 << 16)).column_names
    t = pcsv.read_csv(path, parse_options=pcsv.ParseOptions(delimiter="\t"),
                      convert_options=pcsv.ConvertOptions(column_types={c: pa.string() for c in names}))
    return t.slice(0, ROWS[name]) if ROWS[name] else t


@pytest.fixture(params=["adult", "breast-w"])
def study(request, datasets, tmp_path):
    """The dataset as a CSV (text, ``39.0``), a typed Parquet file (doubles, as pandas reads the CSV)
    and a DuckDB table of the same doubles."""
    pd = pytest.importorskip("pandas")
    text = text_table(datasets, request.param)
    csv = tmp_path / "site.csv"
    pcsv.write_csv(text, csv)
    frame = pd.read_csv(csv)
    assert any(frame[c].dtype == np.float64 for c in frame.columns)  # the typed copy holds floats
    typed = pa.Table.from_pandas(frame, preserve_index=False)
    parquet = tmp_path / "site.parquet"
    pq.write_table(typed, parquet)
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect(str(tmp_path / "site.db"))
    con.register("t", typed)
    con.execute("CREATE TABLE visits AS SELECT * FROM t")
    con.close()
    return {"name": request.param, "csv": csv, "parquet": parquet,
            "duckdb": f"duckdb://{tmp_path}/site.db?table=visits",
            "frame": frame, "arrow": typed, "text": text}


def old_draft(cb: Codebook) -> Codebook:
    """The codebook the old drafting wrote from the CSV: whole-number levels as the file wrote them (``13.0``)."""
    def old(levels):
        return tuple(lv + ".0" if lv.lstrip("-").isdigit() else lv for lv in levels)

    feats = tuple(CategoricalFeature(f.name, old(f.levels), None if f.missing is None else f.missing)
                  if f.kind == "categorical" else f for f in cb.features)
    return Codebook(features=feats, label=cb.label, draft=cb.draft)


def tables(spec, cb: Codebook):
    with open_source(spec) as src:
        return src.count(cb, plan_cliques(cb, "all"))


def assert_same_tables(a, b):
    (ta, na), (tb, nb) = a, b
    assert na == nb
    for x, y in zip(ta, tb, strict=True):
        assert x.clique == y.clique and np.array_equal(x.counts, y.counts), x.name


def test_every_source_drafts_counts_and_codes_the_same(study):
    drafts = {k: draft_codebook(study[k], "target") for k in ("csv", "parquet", "duckdb")}
    assert drafts["csv"].to_dict() == drafts["parquet"].to_dict() == drafts["duckdb"].to_dict()
    cb = drafts["csv"]
    cats = [f for f in cb.features if f.kind == "categorical"]
    assert cats and all(".0" not in lv for f in cats for lv in f.levels)  # the CSV's 13.0 drafted as 13
    ref = tables(study["csv"], cb)
    for cbk in (cb, old_draft(cb)):  # the old draft (levels 13.0) reads every source too
        for k in ("csv", "parquet", "duckdb"):
            assert_same_tables(ref, tables(study[k], cbk))
    # the notebook path: pd.read_csv, an Arrow table, the file itself — the same codes
    want = encode_file(study["csv"], cb)
    for rows in (study["frame"], study["arrow"], study["parquet"], study["text"]):
        got = encode_rows(rows, old_draft(cb), with_label=True)
        assert np.array_equal(got.X, want.X) and np.array_equal(got.y, want.y)
    assert np.array_equal(label_codes_of(study["frame"]["target"], cb), want.y)
    assert np.array_equal(label_codes_of(study["frame"]["target"].astype(float).tolist(), cb), want.y)


def test_notebook_predicts_from_pd_read_csv_and_arrow(study):
    """The README's notebook snippet on float columns: ``pd.read_csv`` then ``model.predict_labels``."""
    import marg
    from marg.marginals.summary import Summary

    cb = draft_codebook(study["csv"], "target")
    tabs, _ = tables(study["parquet"], cb)
    model = marg.learn(Summary(cb, tabs), "mrc")
    for cbk in (cb, old_draft(cb)):
        model_rows = [study["frame"], study["arrow"], study["csv"]]
        want = model.predict_labels(str(study["csv"]))
        for rows in model_rows:
            assert np.array_equal(model.predict_labels(rows), want)
    assert model.score(study["frame"]) == model.score(str(study["csv"]))


def test_postgres_double_precision_reads_the_csvs_levels(study, pg):
    """PostgreSQL's double precision and bigint columns give the CSV's tables (old codebook too)."""
    import psycopg
    from psycopg import sql

    cb = draft_codebook(study["csv"], "target")
    ref = tables(study["csv"], cb)
    typed = study["arrow"]
    kinds = {pa.float64(): "double precision", pa.int64(): "bigint"}
    name = "t_" + study["name"].replace("-", "_")
    cols = sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(f.name), sql.SQL(kinds[f.type]))
                              for f in typed.schema)
    with psycopg.connect(pg.uri(), autocommit=True) as con:
        con.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(name)))
        con.execute(sql.SQL("CREATE TABLE {} ({})").format(sql.Identifier(name), cols))
        with con.cursor() as cur, cur.copy(sql.SQL("COPY {} FROM STDIN").format(sql.Identifier(name))) as copy:
            for row in zip(*[typed.column(i).to_pylist() for i in range(typed.num_columns)]):
                copy.write_row(row)
    for cbk in (cb, old_draft(cb)):
        assert_same_tables(ref, tables(pg.uri(table=name), cbk))
    assert draft_codebook(pg.uri(table=name), "target").to_dict()["features"] == cb.to_dict()["features"]


def test_spark_reads_the_csvs_levels(study, spark):
    """Spark counting the typed Parquet file gives the CSV's tables (old codebook too)."""
    cb = draft_codebook(study["csv"], "target")
    ref = tables(study["csv"], cb)
    for cbk in (cb, old_draft(cb)):
        with open_source(str(study["parquet"]), engine="spark") as src:
            assert_same_tables(ref, src.count(cbk, plan_cliques(cbk, "all")))


def test_canonical_text_rules():
    got = canonical(pa.array(["10.0", "1.50", ".5", "1e3", "01", "-0.0", "E11.0", "2020-01-01T00:00:00",
                              "2020-01-01 10:30:00.500", "True", "FALSE", None])).to_pylist()
    assert got == ["10", "1.5", "0.5", "1000", "01", "0", "E11.0", "2020-01-01", "2020-01-01 10:30:00.5",
                   "true", "false", None]
    import datetime

    assert typed_text(pa.array([10.0, float("nan"), None, 0.1, 1e15])).to_pylist() == ["10", None, None, "0.1",
                                                                                      "1000000000000000"]
    assert typed_text(pa.array([datetime.date(2020, 1, 2)])).to_pylist() == ["2020-01-02"]
    ts = pa.array([datetime.datetime(2020, 1, 2), datetime.datetime(2020, 1, 2, 3, 4, 5)], pa.timestamp("ns"))
    assert typed_text(ts).to_pylist() == ["2020-01-02", "2020-01-02 03:04:05"]
    assert [canonical_value(v) for v in (10.0, 3, "4.0", True, None, float("nan"))] == ["10", "3", "4", "true", None,
                                                                                        None]


def test_codebook_with_two_texts_of_one_value_is_refused_in_one_line(tmp_path):
    cb = Codebook(features=(CategoricalFeature("x", ("10", "10.0")),), label=Label("y", ("0", "1")))
    p = tmp_path / "d.csv"
    p.write_text("x,y\n10,0\n")
    with pytest.raises(InputError, match=r"feature 'x': levels '10' and '10.0' are one value \('10'") as e:
        encode_file(p, cb)
    assert "\n" not in str(e.value)
