"""DuckDB as a source: a DuckDB database (``duckdb://site.db?table=visits`` relative to the
working folder, ``duckdb:///data/site.db?table=visits`` absolute) or any file DuckDB reads
(``duckdb:///data/visits.parquet``, ``.csv``, ``.tsv``, ``.gz``), counted by DuckDB.

A database file is opened read-only, without access to other files (``enable_external_access``
off, configuration locked), and ``?query=`` must be exactly one ``SELECT`` statement as
DuckDB's own parser splits it (:func:`single_select`): ``SELECT 1) t; COPY visits TO 'x.csv';
SELECT * FROM (SELECT 1`` would otherwise escape the subquery marg wraps around it.
A CSV file is read the way marg reads it (every cell as text, the same missing-value
markers, header row), so DuckDB's counts equal the local path's. Needs the optional extra ``duckdb``. Statistics
propagation is switched off on marg's connections (:data:`NAN_SAFE`), because it mis-tests NaN.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, Sequence
from urllib.parse import unquote, urlsplit

import pyarrow as pa

from ..data.io import NULL_VALUES, _delimiter, _is_parquet
from .base import first_line
from .sql import DUCKDB, table_sql
from .sqlsource import ROW_BATCH, NotANumber, SQLSource, parse_query_string
from marg.errors import InputError

# DuckDB 2.0 decides isnan(x) (and x > 'inf') from Parquet/column statistics, which leave
# NaN out: NaN rows would then land in the top bin instead of the missing one. Without the
# statistics-propagation optimiser the test is evaluated on every value.
NAN_SAFE = "statistics_propagation"
DATA_SUFFIXES = (".parquet", ".pq", ".csv", ".tsv", ".tab", ".gz", ".json", ".jsonl", ".ndjson")


def _duckdb():
    try:
        import duckdb
    except ImportError:
        raise InputError("DuckDB sources need the duckdb package: pip install 'marg[duckdb]'") from None
    return duckdb


def single_select(duckdb: Any, sql: str, name: str) -> None:
    """Refuse ``sql`` unless DuckDB's parser reads exactly one SELECT statement in it."""
    try:
        stmts = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise InputError(f"{name}: the query does not parse: {first_line(exc)}") from None
    if len(stmts) != 1:
        raise InputError(f"{name}: the query holds {len(stmts)} statements; give exactly one SELECT")
    kind = getattr(stmts[0].type, "name", str(stmts[0].type))
    if kind != "SELECT":
        raise InputError(f"{name}: the query is a {kind} statement; give exactly one SELECT")


class DuckDBSource(SQLSource):
    """A table or query in a DuckDB database, or a data file read by DuckDB."""

    dialect = DUCKDB

    def __init__(self, path: Path, *, table: str | None = None, schema: str | None = None, query: str | None = None,
                 file: bool = False):
        self.path, self.table, self.schema, self.query, self.file = Path(path), table, schema, query, file
        if not file and table is None and query is None:
            raise InputError(f"duckdb source {self.path.name}: give ?table=NAME or ?query=SELECT… (or a data file)")
        if file and not self.path.exists():
            raise InputError(f"data file not found: {self.path}")
        if not file and not self.path.exists():
            raise InputError(f"DuckDB database not found: {self.path}")
        what = f"table {table!r}" if table is not None else ("query" if query is not None else "file")
        self.name = f"duckdb {what} in {self.path.name}" if not file else f"{self.path.name} (read by duckdb)"
        self._con = None
        if query is not None:
            single_select(_duckdb(), query, self.name)

    @classmethod
    def from_uri(cls, uri: str) -> "DuckDBSource":
        """``duckdb:///abs/path.db?table=t`` — three slashes: an absolute path — or ``duckdb://rel/path.db?…``
        (two slashes: relative to the working folder). A missing absolute path whose relative reading
        exists is refused naming both forms (``duckdb:///site.db`` is ``/site.db``, not ``./site.db``)."""
        parts = urlsplit(uri)
        path = unquote(parts.netloc + parts.path)
        if not path:
            raise InputError(f"duckdb URI {uri!r} names no database or file")
        if not parts.netloc and not Path(path).exists() and Path(path.lstrip("/")).exists():
            rel = path.lstrip("/")
            raise InputError(f"DuckDB database not found: {path} (duckdb:///PATH is absolute; for {rel} in this folder "
                             f"write duckdb://{rel})")
        opts = parse_query_string(parts.query, ("table", "schema", "query"), "duckdb")
        p = Path(path)
        if not opts and (p.suffix.lower() in DATA_SUFFIXES or _is_parquet(p)):
            return cls.for_file(p)
        return cls(p, table=opts.get("table"), schema=opts.get("schema"), query=opts.get("query"))

    @classmethod
    def for_file(cls, path: Path) -> "DuckDBSource":
        return cls(Path(path), file=True)

    def describe(self) -> dict[str, Any]:
        return self._with_relation({"kind": "duckdb", "engine": "duckdb",
                                    "database" if not self.file else "file": self.path.name})

    def _connect(self):
        if self._con is None:
            duckdb = _duckdb()
            try:
                con = duckdb.connect(":memory:" if self.file else str(self.path), read_only=not self.file)
                con.execute(f"SET disabled_optimizers = '{NAN_SAFE}'")
                if not self.file:  # the database's own tables only: no COPY TO, no read_csv('/etc/…')
                    con.execute("SET enable_external_access = false")
                    con.execute("SET lock_configuration = true")
                self._con = con
            except duckdb.Error as exc:
                raise InputError(f"cannot open DuckDB database {self.path}: {first_line(exc)}") from None
        return self._con

    def select(self) -> tuple[str, list[Any]]:
        if self.query is not None:
            return self.query, []
        if self.table is not None:
            return table_sql(self.dialect, self.table, self.schema), []
        p = str(self.path)
        if _is_parquet(self.path):
            return "SELECT * FROM read_parquet(?)", [p]
        if self.path.suffix.lower() in (".json", ".jsonl", ".ndjson"):
            return "SELECT * FROM read_json_auto(?)", [p]
        return ("SELECT * FROM read_csv(?, header = true, all_varchar = true, nullstr = ?, delim = ?, quote = '\"')",
                [p, list(NULL_VALUES), _delimiter(self.path)])

    def fetch(self, sql: str, params: Sequence[Any] = ()) -> pa.Table:
        duckdb = _duckdb()
        con = self._connect()
        single_select(duckdb, sql, self.name)  # what marg composed around the query is one SELECT too
        try:
            rel = con.sql(sql, params=list(params))
            return rel.to_arrow_table() if hasattr(rel, "to_arrow_table") else rel.fetch_arrow_table()  # DuckDB < 1.4
        except duckdb.ConversionException as exc:
            raise NotANumber(first_line(exc)) from None
        except duckdb.Error as exc:
            raise InputError(f"{self.name}: {first_line(exc)}") from None

    def fetch_batches(self, sql: str, params: Sequence[Any] = ()) -> Iterator[pa.Table]:
        duckdb = _duckdb()
        con = self._connect()
        try:
            rel = con.sql(sql, params=list(params))
            reader = (rel.to_arrow_reader(ROW_BATCH) if hasattr(rel, "to_arrow_reader")
                      else rel.fetch_record_batch(ROW_BATCH))
            for batch in reader:
                yield pa.Table.from_batches([batch])
        except duckdb.ConversionException as exc:
            raise InputError(f"{self.name}: a numeric column holds a value that is not a number "
                             f"({first_line(exc)})") from None
        except duckdb.Error as exc:
            raise InputError(f"{self.name}: {first_line(exc)}") from None

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None
