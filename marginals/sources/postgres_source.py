"""PostgreSQL as a source: ``postgresql://[user[:password]@]host[:port]/database?table=visits``
(``&schema=``; or ``?query=SELECT…``), counted by the server.

The session is read-only (``default_transaction_read_only``, and every transaction READ ONLY),
and every statement goes through the extended query protocol as a prepared statement, which
the server refuses to hold more than one command: ``?query=SELECT 1) t; COMMIT; DROP TABLE
visits; SELECT * FROM (SELECT 1`` is one refused statement, not three. Any other URI
parameter (``sslmode``, ``host`` for a socket folder, …) goes to libpq unchanged; the password may also come from
``PGPASSWORD`` or ``~/.pgpass``. A ``?query=`` calling a volatile function (``pg_read_file``, ``pg_terminate_backend``…:
side effects a read-only transaction does not stop) is refused before it runs (its plan names it).
The bundle records host, port, database and table or the query's SHA-256 — never the query's
text, the user or password,
and no error message repeats the password. Needs the optional extra ``postgres``
(psycopg 3).
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import pyarrow as pa

from .sql import POSTGRES, table_sql
from .sqlsource import ROW_BATCH, NotANumber, SQLSource, parse_query_string
from marg.errors import InputError

MARG_PARAMS = ("table", "schema", "query")
CONNECT_TIMEOUT = 10


def _psycopg():
    try:
        import psycopg
    except ImportError:
        raise InputError("PostgreSQL sources need psycopg 3: pip install 'marg[postgres]'") from None
    return psycopg


class PostgresSource(SQLSource):
    """A table or query in a PostgreSQL database."""

    dialect = POSTGRES

    def __init__(self, uri: str):
        parts = urlsplit(uri)
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        ours = urlencode([(k, v) for k, v in pairs if k in MARG_PARAMS])
        opts = parse_query_string(ours, MARG_PARAMS, "postgresql")
        if "table" not in opts and "query" not in opts:
            raise InputError("a postgresql URI needs ?table=NAME or ?query=SELECT…")
        libpq = [(k, v) for k, v in pairs if k not in MARG_PARAMS]
        self._conninfo = urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(libpq), ""))
        self._password = unquote(parts.password) if parts.password else None
        self.table, self.schema, self.query = opts.get("table"), opts.get("schema"), opts.get("query")
        if self.table is not None:  # refuse a name the server could not hold before connecting
            table_sql(self.dialect, self.table, self.schema)
        lib = dict(libpq)
        try:
            port = parts.port
        except ValueError:
            raise InputError(f"postgresql URI has a bad port: {parts.netloc.rsplit(':', 1)[-1]!r}") from None
        self.host = parts.hostname or lib.get("host") or "localhost"
        self.port = port or (int(lib["port"]) if lib.get("port", "").isdigit() else 5432)
        self.database = unquote(parts.path.lstrip("/")) or lib.get("dbname") or None
        what = f"table {self.table!r}" if self.table is not None else "query"
        self.name = f"postgresql {what} on {self.host}:{self.port}/{self.database or ''}"
        self._con = None
        self._functions_checked = False

    def describe(self) -> dict[str, Any]:
        return self._with_relation({"kind": "postgresql", "engine": "postgresql", "host": self.host,
                                    "port": self.port, "database": self.database})

    def _redact(self, text: str) -> str:
        return text.replace(self._password, "***") if self._password else text

    def _error(self, exc: BaseException) -> InputError:
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        msg = "; ".join(lines[:3]) if lines else type(exc).__name__
        return InputError(self._redact(f"{self.name}: {msg}"))

    def _connect(self):
        if self._con is None:
            psycopg = _psycopg()
            try:
                con = psycopg.connect(self._conninfo, connect_timeout=CONNECT_TIMEOUT, autocommit=True)
                con.execute("SET default_transaction_read_only = on")
                con.autocommit = False
                con.read_only = True
            except psycopg.Error as exc:
                raise self._error(exc) from None
            self._con = con
        return self._con

    def select(self) -> tuple[str, list[Any]]:
        if self.query is not None:
            self._check_functions()
            return self.dialect.text(self.query), []
        return table_sql(self.dialect, self.table, self.schema), []  # type: ignore[arg-type]

    def _check_functions(self) -> None:
        """Refuse a ``?query=`` that calls a volatile function (``pg_read_file``, ``pg_terminate_backend``,
        ``nextval``, ``set_config``, ``dblink``…), before it runs: the read-only transaction does not stop
        a function's side effects. The server plans the query without running it (``EXPLAIN VERBOSE``,
        views expanded); every function its plan names is looked up in ``pg_proc``."""
        import json
        import re

        if self._functions_checked:
            return
        # planned, not run; wrapped as the counting query wraps it (a stacked query is one refused statement)
        plan = self.fetch(f"EXPLAIN (VERBOSE, FORMAT JSON) SELECT * FROM ({self.dialect.text(self.query)}) AS src")
        texts: list[str] = []

        def walk(x: Any) -> None:
            if isinstance(x, str):
                texts.append(x)
            elif isinstance(x, dict):
                for v in x.values():
                    walk(v)
            elif isinstance(x, list):
                for v in x:
                    walk(v)

        for cell in plan.column(0).to_pylist() if plan.num_columns else []:
            walk(json.loads(cell) if isinstance(cell, str) else cell)
        names = sorted({m.lower() for t in texts for m in re.findall(r'([A-Za-z_][A-Za-z0-9_$]*)"?\s*\(', t)})
        if names:
            found = self.fetch("SELECT DISTINCT proname::text FROM pg_catalog.pg_proc WHERE provolatile = 'v' "
                               "AND proname::text = ANY(%s) ORDER BY 1", [names])
            bad = found.column(0).to_pylist() if found.num_rows else []
            if bad:
                raise InputError(f"{self.name}: the query calls {', '.join(bad)} (a volatile function, which can act "
                                 "on the server even in a read-only transaction): a ?query= may only read; give "
                                 "?table= or a query without it")
        self._functions_checked = True

    def fetch(self, sql: str, params: Sequence[Any] = ()) -> pa.Table:
        psycopg = _psycopg()
        con = self._connect()
        try:
            with con.cursor() as cur:
                cur.execute(sql, list(params), prepare=True)  # extended protocol: one statement only
                names = [d.name for d in cur.description]
                rows = cur.fetchall()
            con.rollback()  # read-only: end the transaction, keep the connection
        except psycopg.DataError as exc:  # e.g. a text value that is not a number
            self._rollback()
            raise NotANumber(self._redact(str(exc).strip().splitlines()[0])) from None
        except psycopg.Error as exc:
            self._rollback()
            raise self._error(exc) from None
        cols = list(zip(*rows)) if rows else [()] * len(names)
        try:
            return pa.table({n: pa.array(list(c)) for n, c in zip(names, cols)}) if names else pa.table({})
        except (pa.ArrowException, TypeError, ValueError) as exc:
            raise InputError(f"{self.name}: cannot read the result: {exc}") from None

    def fetch_batches(self, sql: str, params: Sequence[Any] = ()) -> Iterator[pa.Table]:
        """A server-side cursor, :data:`ROW_BATCH` rows at a time (the rows never sit in memory at once)."""
        psycopg = _psycopg()
        con = self._connect()
        try:
            with con.cursor(name="marg_rows") as cur:
                cur.execute(sql, list(params))
                while True:
                    rows = cur.fetchmany(ROW_BATCH)
                    if not rows:
                        break
                    cols = list(zip(*rows))
                    try:
                        yield pa.table({f"c{i}": pa.array(list(c)) for i, c in enumerate(cols)})
                    except (pa.ArrowException, TypeError, ValueError) as exc:
                        raise InputError(f"{self.name}: cannot read the result: {exc}") from None
            con.rollback()
        except psycopg.Error as exc:
            self._rollback()
            raise self._error(exc) from None

    def _rollback(self) -> None:
        try:
            if self._con is not None and not self._con.closed:
                self._con.rollback()
        except Exception:  # noqa: BLE001 - the connection is gone; close() cleans up
            pass

    def close(self) -> None:
        if self._con is not None:
            try:
                self._con.close()
            finally:
                self._con = None
