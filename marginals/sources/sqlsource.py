"""A table in a SQL database, counted by the database: the part DuckDB and PostgreSQL share.

The database runs the one grouped query of :func:`~marg.marginals.sources.sql.count_query`;
marg receives only the groups (distinct value combinations and their counts) and encodes
their values with the local path's rules (:mod:`~marg.marginals.sources.grouped`). A value
that the database cannot read as a number stops the query; marg then looks up which
column and which value, from that column's distinct values, and says so in one line.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, Iterator, Sequence

import pyarrow as pa

from ..data.codebook import Codebook
from ..data.encoding import check_codes, distinct, value_codes
from .grouped import GroupPlan, GroupedSource
from .sql import Dialect, columns_query, count_query, distinct_query, sample_query
from marg.errors import InputError

DRAFT_DISTINCT = 10_001  # more distinct values than this: an identifier or a continuous column
DRAFT_SAMPLE = 200_000  # rows sampled for drafting bin edges
ROW_BATCH = 65_536  # rows per batch when the rows themselves are needed (the held-out split)


class NotANumber(Exception):
    """The database could not read some value as a number (its message attached)."""


class SQLSource(GroupedSource):
    """A source that is a SQL SELECT (a quoted table or the site's own query).

    Subclasses give the dialect, the SELECT (:meth:`select`) and how to run a query
    (:meth:`fetch`, which raises InputError for connection and SQL failures and
    :class:`NotANumber` for a failed cast to a number).
    """

    dialect: Dialect

    def _with_relation(self, d: dict[str, Any]) -> dict[str, Any]:
        """``d`` (a :meth:`describe` record) with what names the rows read: the ``schema`` and ``table``
        given, and a ``?query=``'s digest (:func:`query_record`), never its text."""
        for k in ("schema", "table"):
            if getattr(self, k) is not None:
                d[k] = getattr(self, k)
        if self.query is not None:
            d.update(query_record(self.query))
        return d

    @abstractmethod
    def select(self) -> tuple[str, list[Any]]:
        """The source's rows as SQL text (quoted, driver-escaped) and its parameters."""

    @abstractmethod
    def fetch(self, sql: str, params: Sequence[Any] = ()) -> pa.Table:
        """Run ``sql`` and return its whole (small) result as an Arrow table."""

    @abstractmethod
    def fetch_batches(self, sql: str, params: Sequence[Any] = ()) -> Iterator[pa.Table]:
        """Run ``sql`` and return its result in batches of at most :data:`ROW_BATCH` rows."""

    def row_batches(self, columns: list[str]) -> Iterator[dict[str, pa.Array]]:
        self.check_columns(columns)
        src, params = self.select()
        sql = f"SELECT {', '.join(self.dialect.ident(c) for c in columns)} FROM ({src}) AS src"
        for t in self.fetch_batches(sql, params):
            if t.num_rows:
                yield {c: t.column(i).combine_chunks() for i, c in enumerate(columns)}

    def columns(self) -> list[str]:
        src, params = self.select()
        return list(self.fetch(columns_query(src), params).column_names)

    def grouped(self, codebook: Codebook, plan: GroupPlan) -> pa.Table:
        src, src_params = self.select()
        sql, params = count_query(self.dialect, codebook, plan, src, src_params)
        try:
            return self.fetch(sql, params)
        except NotANumber as exc:
            self._diagnose_numbers(codebook)
            raise InputError(f"{self.name}: a numeric column holds a value that is not a number ({exc})") from None

    def _diagnose_numbers(self, codebook: Codebook) -> None:
        """Find the numeric column and value the database refused; raise its one-line error."""
        src, params = self.select()
        for f in codebook.features:
            if f.kind != "numeric":
                continue
            res = self.fetch(distinct_query(self.dialect, f.name, src), params)
            values, index, _ = distinct(res.column("v"))
            codes, text = value_codes(f, values)
            check_codes(f, codes, text, index, 1, lambda _k: f"in {self.name}")

    def draft_batches(self, columns: list[str]) -> Iterator[tuple[dict[str, pa.Array], bool]]:
        from ..data.io import as_text

        src, params = self.select()
        self.check_columns(columns)
        for c in columns:
            res = self.fetch(distinct_query(self.dialect, c, src, DRAFT_DISTINCT), params)
            yield {c: as_text(res.column("v").combine_chunks(), c)}, False
        res = self.fetch(sample_query(self.dialect, columns, src, DRAFT_SAMPLE), params)
        yield {c: as_text(res.column(i).combine_chunks(), c) for i, c in enumerate(columns)}, True


def parse_query_string(query: str, allowed: Sequence[str], uri_kind: str) -> dict[str, str]:
    """``table=…&schema=…&query=…`` of a source URI: each at most once, nothing unknown."""
    from urllib.parse import parse_qs

    out: dict[str, str] = {}
    for k, vs in parse_qs(query, keep_blank_values=True, strict_parsing=False).items():
        if k not in allowed:
            raise InputError(f"unknown {uri_kind} URI parameter {k!r} (allowed: {', '.join(allowed)})")
        if len(vs) != 1:
            raise InputError(f"{uri_kind} URI parameter {k!r} is given {len(vs)} times")
        out[k] = vs[0]
    if "table" in out and "query" in out:
        raise InputError(f"a {uri_kind} URI takes table= or query=, not both")
    if "query" in out and "schema" in out:
        raise InputError(f"a {uri_kind} URI's schema= goes with table=, not with query=")
    return out


def query_record(query: str) -> dict[str, str]:
    """What the bundle records of a ``?query=``: its SHA-256, never its text (which may name
    tables, columns, patients or paths the learner has no business seeing)."""
    import hashlib

    return {"query_sha256": hashlib.sha256(query.encode("utf-8")).hexdigest()}
