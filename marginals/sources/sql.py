"""The GROUP BY a SQL database runs for marg: identifiers quoted, values parameterised.

One query computes every table of a release plan inside the database, in one pass over
the data (see :mod:`marg.marginals.sources.grouped` for its result)::

    SELECT k0, k1, …, GROUPING(k0) AS g0, …, COUNT(*) AS n, [SUM(m0) AS s0, …]
    FROM (SELECT "label" AS k0, "smoker" AS k1, CASE … END AS k2, … FROM (<source>) AS src) AS enc
    GROUP BY GROUPING SETS ((k0), (k1, k0), (k1, k2, k0), …)

Column names come from the codebook and table names from the DATA argument: every one is
a quoted identifier (:meth:`Dialect.ident`: embedded quotes doubled; NUL bytes, empty
names and names the database would silently truncate are refused). Bin edges and public
ranges are bound parameters. The only SQL text a user supplies is a ``query=`` source,
which is the site's own query over its own database and runs as a subquery.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..data.codebook import Codebook, NumericFeature
from ..data.encoding import MISSING
from .grouped import GroupPlan
from marg.errors import InputError


@dataclass(frozen=True)
class Dialect:
    """What differs between the SQL engines marg talks to.

    Attributes
    ----------
    name : str
    placeholder : str
        A positional parameter (``?`` or ``%s``).
    double : str
        The 64-bit float type.
    nan_test : str
        Format string testing a double expression ``{}`` for NaN.
    max_ident_bytes : int or None
        Longest identifier the engine keeps (PostgreSQL truncates longer ones silently,
        which could turn one column name into another).
    percent_escape : bool
        The driver reads ``%`` as the start of a placeholder (psycopg): literal ``%`` in
        the SQL text is doubled.
    """

    name: str
    placeholder: str
    double: str
    nan_test: str
    max_ident_bytes: int | None = None
    percent_escape: bool = False

    def ident(self, name: str, what: str = "column") -> str:
        """``name`` as a quoted identifier; InputError if no engine could hold it safely."""
        if not isinstance(name, str) or not name:
            raise InputError(f"{what} name must be a non-empty string, got {name!r}")
        if "\x00" in name:
            raise InputError(f"{what} name {name!r} contains a NUL byte")
        if self.max_ident_bytes is not None and len(name.encode("utf-8")) > self.max_ident_bytes:
            raise InputError(
                f"{what} name {name[:20]!r}… is longer than {self.name}'s {self.max_ident_bytes}-byte identifier limit"
            )
        return self.text('"' + name.replace('"', '""') + '"')

    def text(self, sql: str) -> str:
        """SQL text as the driver must receive it."""
        return sql.replace("%", "%%") if self.percent_escape else sql


DUCKDB = Dialect("duckdb", "?", "DOUBLE", "isnan({})")
POSTGRES = Dialect("postgresql", "%s", "double precision", "({} = 'NaN'::double precision)", max_ident_bytes=63,
                   percent_escape=True)


def table_sql(dialect: Dialect, table: str, schema: str | None = None) -> str:
    """``SELECT * FROM "schema"."table"`` with both names quoted."""
    ref = dialect.ident(table, "table")
    if schema:
        ref = dialect.ident(schema, "schema") + "." + ref
    return f"SELECT * FROM {ref}"


def _number(dialect: Dialect, column: str) -> str:
    return f"CAST({dialect.ident(column)} AS {dialect.double})"


def bin_expr(dialect: Dialect, f: NumericFeature, params: list[Any]) -> str:
    """The bin code of a binned numeric feature: ``#{edges < v}``; missing/NaN → missing bin or MISSING."""
    v = _number(dialect, f.name)
    miss = f.n_levels - 1 if f.missing else MISSING
    parts = [f"CASE WHEN {v} IS NULL OR {dialect.nan_test.format(v)} THEN {miss}"]
    for k, e in enumerate(f.edges or ()):
        parts.append(f"WHEN {v} <= CAST({dialect.placeholder} AS {dialect.double}) THEN {k}")
        params.append(float(e))
    parts.append(f"ELSE {len(f.edges or ())} END")
    return " ".join(parts)


def clipped_expr(dialect: Dialect, f: NumericFeature, params: list[Any]) -> str:
    """A raw numeric value clipped to its public range (NULL when missing or NaN)."""
    v = _number(dialect, f.name)
    p = dialect.placeholder
    params.extend([float(f.lo), float(f.hi)])  # type: ignore[arg-type]
    return (f"CASE WHEN {v} IS NULL OR {dialect.nan_test.format(v)} THEN NULL "
            f"ELSE LEAST(GREATEST({v}, CAST({p} AS {dialect.double})), CAST({p} AS {dialect.double})) END")


def count_query(dialect: Dialect, codebook: Codebook, plan: GroupPlan, source: str,
                source_params: list[Any] | None = None) -> tuple[str, list[Any]]:
    """The one grouped query of ``plan`` over ``source`` (a SELECT), and its parameters.

    ``source`` is already valid SQL text for the driver (quoted and escaped by the caller).
    """
    params: list[Any] = []
    inner = []
    for q, key in enumerate(plan.keys):
        if key.binned:
            inner.append(f"{bin_expr(dialect, codebook.feature(key.attr), params)} AS k{q}")  # type: ignore[arg-type]
        else:
            inner.append(f"{dialect.ident(key.column)} AS k{q}")
    for r, name in enumerate(plan.moments):
        inner.append(f"{clipped_expr(dialect, codebook.feature(name), params)} AS m{r}")  # type: ignore[arg-type]
    outer = [f"k{q}" for q in range(len(plan.keys))] + [f"GROUPING(k{q}) AS g{q}" for q in range(len(plan.keys))]
    outer.append("COUNT(*) AS n")
    for r in range(len(plan.moments)):
        outer += [f"SUM(m{r}) AS s{r}", f"SUM(m{r} * m{r}) AS ss{r}",
                  f"SUM(CASE WHEN m{r} IS NULL THEN 1 ELSE 0 END) AS z{r}"]
    sets = ", ".join("(" + ", ".join(f"k{q}" for q in s) + ")" for s in plan.sets)
    sql = (f"SELECT {', '.join(outer)} FROM (SELECT {', '.join(inner)} FROM ({source}) AS src) AS enc "
           f"GROUP BY GROUPING SETS ({sets})")
    return sql, params + list(source_params or [])  # the source comes last in the text


def distinct_query(dialect: Dialect, column: str, source: str, limit: int | None = None) -> str:
    """Distinct values of one column with their counts (for drafting and diagnosing)."""
    c = dialect.ident(column)
    lim = f" LIMIT {int(limit)}" if limit is not None else ""
    return f"SELECT {c} AS v, COUNT(*) AS n FROM ({source}) AS src GROUP BY {c}{lim}"


def sample_query(dialect: Dialect, columns: list[str], source: str, rows: int) -> str:
    """A random sample of rows of ``columns`` (for drafting numeric bin edges)."""
    cols = ", ".join(dialect.ident(c) for c in columns)
    return f"SELECT {cols} FROM ({source}) AS src ORDER BY random() LIMIT {int(rows)}"


def columns_query(source: str) -> str:
    """No rows, only the columns of ``source``."""
    return f"SELECT * FROM ({source}) AS src LIMIT 0"
