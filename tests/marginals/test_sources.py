"""Every source and engine counts exactly what the in-memory path counts on the same data.

The same rows — categorical text with stray whitespace and missing values, integer codes,
a binned numeric column with NaN and nulls, a raw numeric column, a text label — are
written as CSV and Parquet, loaded into DuckDB and PostgreSQL with native column types,
and read by Spark. Each source's tables must equal, as integers, the tables of
``count_tables`` over ``encode_file`` of the CSV; values the codebook refuses give the
same one-line error in every source.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

from marg.errors import InputError
from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label, NumericFeature
from marg.marginals.data.encoding import encode_file
from marg.marginals.sources import open_source
from marg.marginals.counts.counting import count_tables
from marg.marginals.counts.tables import plan_cliques

CB = Codebook(
    features=(
        CategoricalFeature("color", ("red", "green", "blue")),
        CategoricalFeature("smoke", ("no", "yes", "unknown"), missing="unknown"),
        CategoricalFeature("code", ("0", "1", "2", "3")),
        NumericFeature("age", edges=(30, 60), missing=True),
        NumericFeature("bp", lo=80, hi=200),
    ),
    label=Label("y", ("neg", "pos")),
)
N = 3000


def make_table(seed: int = 0, n: int = N) -> pa.Table:
    rng = np.random.default_rng(seed)
    age = rng.integers(0, 90, n).astype(float)
    age[rng.random(n) < 0.05] = np.nan
    return pa.table({
        "color": pa.array(rng.choice(["red", "green", "blue", " red", "blue "], n)),
        "smoke": pa.array([None if r < 0.1 else v for r, v in zip(rng.random(n), rng.choice(["no", "yes"], n))]),
        "code": pa.array(rng.integers(0, 4, n)),
        "age": pa.array([None if r < 0.03 else v for r, v in zip(rng.random(n), age)], type=pa.float64()),
        "bp": pa.array(np.round(rng.uniform(50, 250, n), 3)),
        "y": pa.array(rng.choice(["neg", "pos"], n)),
    })


def reference(tmp_path, table: pa.Table, stats: str = "all"):
    """The in-memory path: encode the CSV, count_tables over X and y."""
    csv = tmp_path / "ref.csv"
    pcsv.write_csv(table, csv)
    enc = encode_file(csv, CB)
    cliques = plan_cliques(CB, stats)
    return cliques, count_tables(CB, enc.X, enc.y, cliques), enc.n


def assert_same(ref, got):
    assert [t.clique for t in got] == [t.clique for t in ref]
    for a, b in zip(ref, got):
        assert a.kind == b.kind, a.name
        if a.kind == "counts":
            assert b.counts.dtype.kind == "i" and np.array_equal(a.counts, b.counts), a.name
        else:  # sums of clipped floats: the summation order differs between engines
            np.testing.assert_allclose(a.counts, b.counts, rtol=1e-9, err_msg=a.name)


def count(spec, cliques, **kw):
    with open_source(spec, **kw) as src:
        return src.count(CB, cliques)


# ----------------------------------------------------------------------- files and DuckDB
@pytest.fixture
def data(tmp_path):
    table = make_table()
    pcsv.write_csv(table, tmp_path / "d.csv")
    pq.write_table(table, tmp_path / "d.parquet")
    return tmp_path, table


def duckdb_db(path, table: pa.Table, name: str = "visits"):
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect(str(path))
    con.register("frame", table)
    con.execute(f'CREATE TABLE "{name.replace(chr(34), chr(34) * 2)}" AS SELECT * FROM frame')
    con.close()


@pytest.mark.parametrize("stats", ["first", "all"])
def test_files_and_duckdb_equal_in_memory(data, stats):
    tmp, table = data
    cliques, ref, n = reference(tmp, table, stats)
    duckdb_db(tmp / "site.db", table)
    specs = [
        tmp / "d.csv", tmp / "d.parquet",
        f"duckdb://{tmp}/d.parquet", f"duckdb://{tmp}/d.csv",
        f"duckdb://{tmp}/site.db?table=visits",
        f"duckdb://{tmp}/site.db?query=SELECT * FROM visits WHERE bp IS NOT NULL",
    ]
    for spec in specs:
        got, m = count(spec, cliques)
        assert m == n, spec
        assert_same(ref, got)
    got, m = count(tmp / "d.parquet", cliques, engine="duckdb")
    assert m == n
    assert_same(ref, got)


BAD = [
    ("color", "purple", r"column 'color': unknown level .*not shown"),
    ("color", None, r"column 'color': missing value .*no missing level"),
    ("y", "maybe", r"column 'y': unknown class .*not shown"),
    ("y", None, r"column 'y': missing label"),
    ("code", 7, r"column 'code': unknown level .*not shown"),
]


def with_bad(table: pa.Table, column: str, value) -> pa.Table:
    vals = table.column(column).to_pylist()
    vals[17] = value
    return table.set_column(table.schema.get_field_index(column), column,
                            pa.array(vals, type=table.schema.field(column).type))


@pytest.mark.parametrize("column, value, pattern", BAD)
def test_refused_values_same_error_in_files_and_duckdb(tmp_path, column, value, pattern):
    table = with_bad(make_table(n=200), column, value)
    pq.write_table(table, tmp_path / "d.parquet")
    pcsv.write_csv(table, tmp_path / "d.csv")
    duckdb_db(tmp_path / "site.db", table)
    for spec in (tmp_path / "d.csv", tmp_path / "d.parquet", f"duckdb://{tmp_path}/site.db?table=visits",
                 f"duckdb://{tmp_path}/d.csv"):
        with pytest.raises(InputError, match=pattern) as exc:
            count(spec, plan_cliques(CB, "all"))
        assert "\n" not in str(exc.value)
    with pytest.raises(InputError, match=pattern) as exc:
        count(tmp_path / "d.csv", plan_cliques(CB))
    assert "at row 18" in str(exc.value)  # a file has row numbers; a database says which table


def test_not_a_number_in_a_text_column_names_the_value(tmp_path):
    table = make_table(n=200)
    age = [None if v is None else str(v) for v in table.column("age").to_pylist()]
    age[5] = "abc"
    table = table.set_column(table.schema.get_field_index("age"), "age", pa.array(age))
    duckdb_db(tmp_path / "site.db", table)
    pcsv.write_csv(table, tmp_path / "d.csv")
    with pytest.raises(InputError, match=r"column 'age': the value at row 6 is not a number"):
        count(tmp_path / "d.csv", plan_cliques(CB))
    with pytest.raises(InputError, match=r"column 'age': the value in duckdb table 'visits' .* is not a number"):
        count(f"duckdb://{tmp_path}/site.db?table=visits", plan_cliques(CB))


def test_raw_numeric_needs_a_value(tmp_path):
    table = with_bad(make_table(n=100), "bp", None)
    duckdb_db(tmp_path / "site.db", table)
    with pytest.raises(InputError, match=r"column 'bp': missing or NaN value in duckdb table"):
        count(f"duckdb://{tmp_path}/site.db?table=visits", plan_cliques(CB))


HOSTILE = ['a"b; DROP TABLE visits; --', "sp ace.dot", "semi;colon'quote", "ümlaut%s%%"]


def hostile_codebook() -> Codebook:
    return Codebook(
        features=(CategoricalFeature(HOSTILE[0], ("x", "y")), CategoricalFeature(HOSTILE[1], ("x", "y")),
                  NumericFeature(HOSTILE[3], edges=(0.5,))),
        label=Label(HOSTILE[2], ("0", "1")),
    )


def hostile_table(n: int = 500, seed: int = 3) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({HOSTILE[0]: rng.choice(["x", "y"], n), HOSTILE[1]: rng.choice(["x", "y"], n),
                     HOSTILE[3]: rng.random(n), HOSTILE[2]: rng.choice(["0", "1"], n)})


def hostile_reference(tmp_path, table):
    cb = hostile_codebook()
    pq.write_table(table, tmp_path / "h.parquet")
    enc = encode_file(tmp_path / "h.parquet", cb)
    cliques = plan_cliques(cb, "all")
    return cb, cliques, count_tables(cb, enc.X, enc.y, cliques)


def test_hostile_names_are_quoted_in_duckdb(tmp_path):
    table = hostile_table()
    cb, cliques, ref = hostile_reference(tmp_path, table)
    name = 'visits"; DROP TABLE visits; --'
    duckdb_db(tmp_path / "site.db", table, name=name)
    from urllib.parse import quote

    with open_source(f"duckdb://{tmp_path}/site.db?table={quote(name)}") as src:
        got, n = src.count(cb, cliques)
    assert n == 500
    for a, b in zip(ref, got):
        assert np.array_equal(a.counts, b.counts)
    with pytest.raises(InputError, match="NUL byte"):
        open_source(f"duckdb://{tmp_path}/site.db?table=a%00b").count(cb, cliques)


def test_duckdb_missing_table_and_database(tmp_path):
    duckdb_db(tmp_path / "site.db", make_table(n=10))
    with pytest.raises(InputError, match=r"duckdb table 'nope' .*nope.* does not exist") as exc:
        count(f"duckdb://{tmp_path}/site.db?table=nope", plan_cliques(CB))
    assert "\n" not in str(exc.value)
    with pytest.raises(InputError, match="DuckDB database not found"):
        open_source(f"duckdb://{tmp_path}/none.db?table=t")
    with pytest.raises(InputError, match="table= or query=, not both"):
        open_source(f"duckdb://{tmp_path}/site.db?table=t&query=SELECT 1")
    with pytest.raises(InputError, match="unknown duckdb URI parameter 'tabel'"):
        open_source(f"duckdb://{tmp_path}/site.db?tabel=t")


# ----------------------------------------------------------------------------- PostgreSQL
@pytest.fixture(scope="session")
def pg():
    from tests.helpers.services import local_postgres

    yield from local_postgres()


@pytest.fixture
def pgdb(pg):
    """A fresh database for one test, dropped afterwards."""
    import uuid

    import psycopg

    name = "marg_" + uuid.uuid4().hex[:12]
    with psycopg.connect(pg.uri(), autocommit=True) as con:
        con.execute(f'CREATE DATABASE "{name}"')
    yield name
    with psycopg.connect(pg.uri(), autocommit=True) as con:
        con.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


PG_TYPES = {pa.string(): "text", pa.float64(): "double precision", pa.int64(): "bigint"}


def pg_load(pg, db: str, table: pa.Table, name: str = "visits") -> None:
    import psycopg
    from psycopg import sql

    cols = sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(f.name), sql.SQL(PG_TYPES[f.type]))
                              for f in table.schema)
    with psycopg.connect(pg.uri(db), autocommit=True) as con:
        con.execute(sql.SQL("CREATE TABLE {} ({})").format(sql.Identifier(name), cols))
        ph = sql.SQL(", ").join(sql.Placeholder() * table.num_columns)
        with con.cursor() as cur:
            cur.executemany(sql.SQL("INSERT INTO {} VALUES ({})").format(sql.Identifier(name), ph),
                            list(zip(*[table.column(i).to_pylist() for i in range(table.num_columns)])))


def test_postgres_equals_in_memory(tmp_path, pg, pgdb):
    table = make_table(seed=1)
    pg_load(pg, pgdb, table)
    for stats in ("first", "all"):
        cliques, ref, n = reference(tmp_path, table, stats)
        for spec in (pg.uri(pgdb, table="visits"), pg.uri(pgdb, schema="public", table="visits"),
                     pg.uri(pgdb, query="SELECT * FROM visits WHERE color LIKE '%' OR color IS NULL")):
            got, m = count(spec, cliques)
            assert m == n
            assert_same(ref, got)


@pytest.mark.parametrize("column, value, pattern", BAD)
def test_postgres_refused_values(tmp_path, pg, pgdb, column, value, pattern):
    pg_load(pg, pgdb, with_bad(make_table(n=100), column, value))
    with pytest.raises(InputError, match=pattern) as exc:
        count(pg.uri(pgdb, table="visits"), plan_cliques(CB, "all"))
    assert "\n" not in str(exc.value)


def test_postgres_not_a_number(pg, pgdb):
    table = make_table(n=100)
    age = [None if v is None else str(v) for v in table.column("age").to_pylist()]
    age[3] = "n/a?"
    pg_load(pg, pgdb, table.set_column(table.schema.get_field_index("age"), "age", pa.array(age)))
    with pytest.raises(InputError, match=r"column 'age': the value in postgresql table 'visits'.* is not a number"):
        count(pg.uri(pgdb, table="visits"), plan_cliques(CB))


def test_postgres_hostile_names(tmp_path, pg, pgdb):
    table = hostile_table()
    cb, cliques, ref = hostile_reference(tmp_path, table)
    name = 'visits"; DROP TABLE visits; --'
    pg_load(pg, pgdb, table, name=name)
    pg_load(pg, pgdb, table.slice(0, 1), name="visits")  # what an injection would drop
    with open_source(pg.uri(pgdb, table=name)) as src:
        got, n = src.count(cb, cliques)
    assert n == 500
    for a, b in zip(ref, got):
        assert np.array_equal(a.counts, b.counts)
    with open_source(pg.uri(pgdb, table="visits")) as src:
        assert src.count(cb, cliques)[1] == 1  # still there
    with pytest.raises(InputError, match="63-byte identifier limit"):
        open_source(pg.uri(pgdb, table="t" * 64))


def test_postgres_source_recorded_without_credentials(pg, pgdb):
    with open_source(pg.uri(pgdb, table="visits")) as src:
        d = src.describe()
    assert d == {"kind": "postgresql", "engine": "postgresql", "host": "127.0.0.1", "port": pg.port,
                 "database": pgdb, "table": "visits"}
    assert pg.password not in repr(d) and pg.user not in repr(d)


# ----------------------------------------------------------------------------- Spark
@pytest.fixture(scope="module")
def spark():
    from tests.helpers.services import local_spark

    yield from local_spark()


def test_spark_equals_in_memory(data, spark):
    tmp, table = data
    cliques, ref, n = reference(tmp, table, "all")
    spark.read.parquet(str(tmp / "d.parquet")).createOrReplaceTempView("visits")
    for spec in (tmp / "d.parquet", tmp / "d.csv", "visits"):
        got, m = count(spec, cliques, engine="spark")
        assert m == n, spec
        assert_same(ref, got)
    with open_source("visits", engine="spark") as src:
        assert src.describe()["table"] == "visits"


@pytest.mark.parametrize("column, value, pattern", BAD[:3])
def test_spark_refused_values(tmp_path, spark, column, value, pattern):
    pq.write_table(with_bad(make_table(n=100), column, value), tmp_path / "d.parquet")
    with pytest.raises(InputError, match=pattern):
        count(tmp_path / "d.parquet", plan_cliques(CB), engine="spark")


def test_spark_not_a_number_and_missing_table(tmp_path, spark):
    table = make_table(n=100)
    age = [None if v is None else str(v) for v in table.column("age").to_pylist()]
    age[3] = "abc"
    pcsv.write_csv(table.set_column(table.schema.get_field_index("age"), "age", pa.array(age)), tmp_path / "d.csv")
    with pytest.raises(InputError, match=r"column 'age': the value in d.csv \(read by spark\) is not a number"):
        count(tmp_path / "d.csv", plan_cliques(CB), engine="spark")
    with pytest.raises(InputError, match=r"spark cannot read table 'no_such_table'") as exc:
        count("no_such_table", plan_cliques(CB), engine="spark")
    assert "\n" not in str(exc.value)


# ------------------------------------------------------------------ marg export, end to end
def marg_export(tmp_path, data: str, *extra: str):
    from typer.testing import CliRunner

    from marg.cli.main import app

    schema = tmp_path / "codebook.json"
    if not schema.exists():
        CB.save(schema)
    out = tmp_path / "site.bundle"
    args = ["export", data, "--schema", str(schema), "--site", "north", "--out", str(out), "--stats", "all",
            "--min-cell", "1", "--ledger", str(tmp_path / "ledger"), *extra]
    return CliRunner().invoke(app, args), out


def assert_failed_cleanly(tmp_path, result, out, pattern: str) -> None:
    assert result.exit_code == 2, result.output
    err = result.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("marg: error:"), result.stderr
    import re

    assert re.search(pattern, err[0]), err[0]
    assert not out.exists()
    assert not (tmp_path / "ledger" / "ledger.jsonl").exists()


def bundle_counts(path):
    from marg.protocols.bundle import load_bundle

    b = load_bundle(path)
    return b, {t.clique: t.counts for t in b.tables}


def test_export_from_postgres_records_the_source(tmp_path, pg, pgdb):
    table = make_table(seed=4, n=500)
    pg_load(pg, pgdb, table)
    pcsv.write_csv(table, tmp_path / "d.csv")
    r, out = marg_export(tmp_path, str(tmp_path / "d.csv"), "--no-ledger")
    assert r.exit_code == 0, r.output
    _, want = bundle_counts(out)
    out.unlink()
    r, out = marg_export(tmp_path, pg.uri(pgdb, table="visits"))
    assert r.exit_code == 0, r.output
    b, got = bundle_counts(out)
    assert got.keys() == want.keys() and all(np.array_equal(got[k], want[k]) for k in want)
    assert b.header["source"] == {"kind": "postgresql", "engine": "postgresql", "host": "127.0.0.1", "port": pg.port,
                                  "database": pgdb, "table": "visits"}
    raw = out.read_bytes() + (tmp_path / "ledger" / "ledger.jsonl").read_bytes()
    assert pg.password.encode() not in raw and pg.user.encode() not in raw


def test_postgres_failures_leave_no_bundle_and_no_ledger_entry(tmp_path, pg, pgdb):
    pg_load(pg, pgdb, make_table(n=50))
    r, out = marg_export(tmp_path, pg.uri(pgdb, password="wrong-password", table="visits"))
    assert_failed_cleanly(tmp_path, r, out, r"password authentication failed")
    assert "wrong-password" not in r.stderr
    r, out = marg_export(tmp_path, pg.uri(pgdb, table="no_such_table"))
    assert_failed_cleanly(tmp_path, r, out, r"relation \"no_such_table\" does not exist")
    # The server ends the session in the middle of the counting query: a dropped connection. (A ?query= calling
    # pg_terminate_backend itself is refused before it runs: issue 35; a function declared stable that does it
    # is the database's own administrator's doing.)
    import psycopg

    with psycopg.connect(pg.uri(pgdb), autocommit=True) as con:
        con.execute("CREATE FUNCTION marg_die() RETURNS int LANGUAGE plpgsql STABLE AS "
                    "$$ BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); RETURN 1; END $$")
    r, out = marg_export(tmp_path, pg.uri(pgdb, query="SELECT * FROM visits WHERE marg_die() = 1"))
    assert_failed_cleanly(tmp_path, r, out, r"terminating connection|server closed the connection|connection")
    r, out = marg_export(tmp_path, f"postgresql://{pg.user}@127.0.0.1:1/{pgdb}?table=visits")
    assert_failed_cleanly(tmp_path, r, out, r"127.0.0.1:1/")


def test_export_duckdb_and_spark_bundles_hold_the_local_counts(tmp_path, data, spark):
    tmp, table = data
    duckdb_db(tmp / "site.db", table)
    r, out = marg_export(tmp, str(tmp / "d.parquet"), "--no-ledger")
    assert r.exit_code == 0, r.output
    _, want = bundle_counts(out)
    for spec, extra, kind in ((f"duckdb://{tmp}/site.db?table=visits", (), "duckdb"),
                              (str(tmp / "d.parquet"), ("--engine", "duckdb"), "duckdb"),
                              (str(tmp / "d.parquet"), ("--engine", "spark"), "spark")):
        out.unlink()
        r, out = marg_export(tmp, spec, "--no-ledger", *extra)
        assert r.exit_code == 0, r.output
        b, got = bundle_counts(out)
        assert b.header["source"]["kind"] == kind
        assert got.keys() == want.keys()
        for k in want:  # bit-identical: the same int64 bytes
            assert got[k].tobytes() == want[k].tobytes(), k


def test_schema_init_from_databases_drafts_the_local_codebook(tmp_path, data, pg, pgdb):
    from marg.marginals.draft import draft_codebook

    tmp, table = data
    table = table.drop_columns(["age", "bp"])  # categorical only: a draft's quantile edges come from a sample
    pq.write_table(table, tmp / "c.parquet")
    duckdb_db(tmp / "c.db", table)
    pg_load(pg, pgdb, table)
    want = draft_codebook(tmp / "c.parquet", "y")
    for spec in (f"duckdb://{tmp}/c.db?table=visits", pg.uri(pgdb, table="visits")):
        with open_source(spec) as src:
            assert draft_codebook(src, "y").to_dict() == want.to_dict()


# ------------------------------------------------------------------ the held-out split, from every source
KEY = bytes(range(32))


def held_out(spec, fraction: float = 0.3, id_column: str | None = None, **kw):
    """The split of ``spec``'s rows under KEY: (rows, held, fingerprint) and the held-out rows' tables."""
    from marg.marginals.holdout import Holdout, Splitter, iter_split, select
    from marg.marginals.counts.counting import TableCounter

    split = Splitter(Holdout(fraction, id_column), KEY)
    counter = TableCounter(CB, plan_cliques(CB, "all"))
    with open_source(spec, **kw) as src:
        for enc, held in iter_split(src, CB, split):
            counter.add_encoded(select(enc, held))
    return (split.rows, split.held, split.fingerprint), counter.tables()


def with_ids(table: pa.Table) -> pa.Table:
    """An integer patient id (int64 in typed sources, text in a CSV); every id on two or three rows."""
    rng = np.random.default_rng(7)
    return table.append_column("pid", pa.array(rng.integers(0, table.num_rows // 2.5, table.num_rows)))


def shuffled(table: pa.Table, seed: int = 1) -> pa.Table:
    return table.take(np.random.default_rng(seed).permutation(table.num_rows))


def test_holdout_split_is_the_same_from_files_and_duckdb(tmp_path):
    """The same rows — as CSV text, as typed Parquet, in a DuckDB table in another order — hold out the
    same rows: equal counts, equal order-free fingerprint, equal tables of the held-out rows."""
    table = with_ids(make_table())
    pcsv.write_csv(table, tmp_path / "d.csv")
    pq.write_table(table, tmp_path / "d.parquet")
    pcsv.write_csv(shuffled(table), tmp_path / "shuffled.csv")
    duckdb_db(tmp_path / "site.db", shuffled(table, 2))
    specs = [(tmp_path / "d.csv", {}), (tmp_path / "d.parquet", {}), (tmp_path / "shuffled.csv", {}),
             (f"duckdb://{tmp_path}/site.db?table=visits", {}), (tmp_path / "d.parquet", {"engine": "duckdb"})]
    for id_column in (None, "pid"):
        (tally, want), *rest = [held_out(s, id_column=id_column, **kw) for s, kw in specs]
        assert tally[0] == N and abs(tally[1] - 0.3 * N) < 5 * (0.3 * 0.7 * N) ** 0.5 * (2 if id_column else 1)
        for (t, got), (s, _) in zip(rest, specs[1:]):
            assert t == tally, (s, id_column)
            assert_same(want, got)
    # another key, another split; a smaller fraction holds out a subset of the rows
    from marg.marginals.holdout import Holdout, Splitter, iter_split

    masks = {}
    for f, key in ((0.3, KEY), (0.1, KEY), (0.3, bytes(32))):
        split = Splitter(Holdout(f), key)
        with open_source(tmp_path / "d.csv") as src:
            masks[f, key] = np.concatenate([h for _, h in iter_split(src, CB, split)])
    assert not np.array_equal(masks[0.3, KEY], masks[0.3, bytes(32)])
    assert masks[0.1, KEY].sum() > 0 and not np.any(masks[0.1, KEY] & ~masks[0.3, KEY])


def test_holdout_split_is_the_same_from_postgres(tmp_path, pg, pgdb):
    table = with_ids(make_table(seed=5, n=800))
    pcsv.write_csv(table, tmp_path / "d.csv")
    pg_load(pg, pgdb, shuffled(table))
    for id_column in (None, "pid"):
        tally, want = held_out(tmp_path / "d.csv", id_column=id_column)
        t, got = held_out(pg.uri(pgdb, table="visits"), id_column=id_column)
        assert t == tally and tally[1] > 0
        assert_same(want, got)


def test_holdout_split_is_the_same_from_spark(tmp_path, spark):
    table = with_ids(make_table(seed=6, n=800))
    pcsv.write_csv(table, tmp_path / "d.csv")
    pq.write_table(shuffled(table), tmp_path / "d.parquet")
    for id_column in (None, "pid"):
        tally, want = held_out(tmp_path / "d.csv", id_column=id_column)
        for spec in (tmp_path / "d.parquet", tmp_path / "d.csv"):
            t, got = held_out(spec, id_column=id_column, engine="spark")
            assert t == tally and tally[1] > 0, spec
            assert_same(want, got)


def test_export_holdout_from_duckdb_releases_the_files_tables(tmp_path, data):
    """``marg export --holdout`` from a DuckDB table and from the CSV (one site, one key): the same tables
    (bit for bit, moments included: so the ledger's guard against differencing exact releases accepts the
    second release; rows in another order are compared above, where float sums may differ in the last bit)."""
    tmp, table = data
    duckdb_db(tmp / "site.db", table)
    got = []
    for spec in (str(tmp / "d.csv"), f"duckdb://{tmp}/site.db?table=visits"):
        r, out = marg_export(tmp, spec, "--holdout", "0.25")
        assert r.exit_code == 0, r.output
        b, counts = bundle_counts(out)
        assert b.header["holdout"] == {"fraction": 0.25, "by": "rows"}
        got.append((b.header["n_rows"], counts))
        out.unlink()
    (n0, a), (n1, b) = got
    assert n0 == n1 and 0.7 * N < n0 < 0.8 * N
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_evaluate_from_duckdb_counts_the_files_held_out_rows(tmp_path, data):
    """Round 1 from a DuckDB table, round 2 from the CSV of the same rows and from DuckDB: the
    same held-out rows, so the same confusion matrix (exact releases, compared cell by cell)."""
    from typer.testing import CliRunner

    from marg.cli.main import app

    tmp, table = data
    duckdb_db(tmp / "site.db", table)
    uri = f"duckdb://{tmp}/site.db?table=visits"
    r, out = marg_export(tmp, uri, "--holdout", "0.3")
    assert r.exit_code == 0, r.output
    model = tmp / "model.json"
    r = CliRunner().invoke(app, ["learn", str(out), "--out", str(model), "--allow-unsigned", "--learner", "nb"])
    assert r.exit_code == 0, r.output
    got = []
    import shutil

    for k in (0, 1):  # one exact evaluation per held-out set: each source evaluates from a copy of the site's ledger
        shutil.copytree(tmp / "ledger", tmp / f"ledger{k}")
    for k, spec in enumerate((str(tmp / "d.csv"), uri)):
        ev = tmp / f"e{k}.eval"
        r = CliRunner().invoke(app, ["export", spec, "--schema", str(tmp / "codebook.json"), "--site", "north",
                                     "--out", str(ev), "--evaluate", str(model), "--allow-unsigned", "--min-cell", "1",
                                     "--ledger", str(tmp / f"ledger{k}")])
        assert r.exit_code == 0, r.output
        b, counts = bundle_counts(ev)
        got.append((b.header["n_rows"], next(iter(counts.values()))))
    (n0, a), (n1, b) = got
    assert n0 == n1 == int(a.sum()) and 0.25 * N < n0 < 0.35 * N and np.array_equal(a, b)


# ------------------------------------------------------- a query= that escapes its subquery (issue 25)
def test_duckdb_stacked_query_refused(tmp_path):
    """``SELECT … ) AS src; COPY visits TO 'leak.csv'; SELECT * FROM (SELECT 1`` wrote every patient row to a
    file while marg printed a syntax error: one SELECT only, checked by DuckDB's parser; nothing written."""
    duckdb_db(tmp_path / "site.db", make_table(n=50))
    leak = tmp_path / "leak.csv"
    for q in (f"SELECT * FROM visits) AS src; COPY visits TO '{leak}'; SELECT * FROM (SELECT * FROM visits",
              f"COPY visits TO '{leak}'", "SELECT 1; SELECT 2"):
        r, out = marg_export(tmp_path, f"duckdb://{tmp_path}/site.db?query={q}")
        assert r.exit_code == 2, r.output
        assert "one SELECT" in r.output or "does not parse" in r.output, r.output
        assert not leak.exists() and not out.exists()


def test_duckdb_query_cannot_read_other_files(tmp_path):
    """A single SELECT reading another file (read_csv of the site's other data) is refused: external access is off."""
    duckdb_db(tmp_path / "site.db", make_table(n=50))
    pcsv.write_csv(make_table(seed=5, n=50), tmp_path / "other.csv")
    with pytest.raises(InputError, match="external|disabled|Permission"):
        count(f"duckdb://{tmp_path}/site.db?query=SELECT * FROM read_csv('{tmp_path}/other.csv')",
              plan_cliques(CB, "first"))


def test_postgres_stacked_query_refused(tmp_path, pg, pgdb):
    """``COMMIT; DROP TABLE visits`` inside ?query= ran despite the read-only transaction: now the
    extended protocol refuses more than one command and the table survives."""
    import psycopg

    pg_load(pg, pgdb, make_table(n=50))
    q = "SELECT * FROM visits) AS src; COMMIT; DROP TABLE visits; SELECT * FROM (SELECT * FROM visits"
    r, out = marg_export(tmp_path, pg.uri(pgdb, query=q))
    assert r.exit_code == 2 and "multiple commands" in r.output, r.output
    assert not out.exists()
    with psycopg.connect(pg.uri(pgdb)) as con:
        assert con.execute("SELECT count(*) FROM visits").fetchone()[0] == 50


def test_postgres_session_is_read_only(tmp_path, pg, pgdb):
    """A single SELECT that writes (nextval advances a sequence) is refused by the read-only transaction."""
    import psycopg

    pg_load(pg, pgdb, make_table(n=50))
    with psycopg.connect(pg.uri(pgdb), autocommit=True) as con:
        con.execute("CREATE SEQUENCE seq")
    r, out = marg_export(tmp_path, pg.uri(pgdb, query="SELECT *, nextval('seq') AS k FROM visits"))
    assert r.exit_code == 2 and "calls nextval (a volatile function" in r.output, r.output
    with psycopg.connect(pg.uri(pgdb), autocommit=True) as con:
        assert con.execute("SELECT nextval('seq')").fetchone()[0] == 1


def test_postgres_query_cannot_call_side_effect_functions_and_travels_as_a_digest(tmp_path, pg, pgdb):
    """Issue 35: ``pg_read_file`` and ``pg_terminate_backend`` ran inside the read-only statement, and the
    query's text travelled to the learner in the bundle. Both are refused before anything runs (a view
    hiding the call too); an ordinary query's bundle records its SHA-256, not its text."""
    import hashlib

    import psycopg

    from marg.protocols.bundle import load_bundle

    pg_load(pg, pgdb, make_table(n=50))
    with psycopg.connect(pg.uri(pgdb), autocommit=True) as con:
        con.execute("CREATE VIEW sneaky AS SELECT v.*, pg_terminate_backend(0) AS t FROM visits v")
    for q, fn in (("SELECT v.*, length(pg_read_file('PG_VERSION')) AS n FROM visits v", "pg_read_file"),
                  ("SELECT * FROM visits WHERE pg_terminate_backend(pg_backend_pid() + 1) IS NOT NULL",
                   "pg_terminate_backend"),
                  ("SELECT * FROM sneaky", "pg_terminate_backend")):
        r, out = marg_export(tmp_path, pg.uri(pgdb, query=q))
        assert r.exit_code == 2 and f"calls {fn}" in r.output and "volatile" in r.output, r.output
        assert not out.exists()
    q = "SELECT * FROM visits WHERE bp IS NOT NULL AND lower(color) <> 'secret-word'"
    r, out = marg_export(tmp_path, pg.uri(pgdb, query=q))
    assert r.exit_code == 0, r.output
    src = load_bundle(out).header["source"]
    assert src["query_sha256"] == hashlib.sha256(q.encode()).hexdigest() and "query" not in src
    assert b"secret-word" not in out.read_bytes()
