"""An OMOP CDM database as a source: ``omop+duckdb://site.duckdb?cdm=main[&results=…]`` and
``omop+postgresql://user@host:port/db?cdm=cdm_schema&results=results_schema``.

The source's rows are the codebook's: one row per entry of the target cohort (at most K per
person, the earliest: the privacy unit is the person, ``person_id``, with K from
``--max-rows-per-unit``, default 1), computed by one query inside the database
(:func:`~marg.marginals.sources.omop_sql.feature_rows_query`) and counted by the usual grouped
query over it, so only the groups leave the database. The DuckDB and PostgreSQL sources' own
safety rules hold (read-only, one statement, no file access from DuckDB; the read-only
PostgreSQL session; credentials never recorded).

Before anything is counted, :meth:`OmopSource.prepare` checks the database against the codebook
and stops at the first problem with one line naming the feature and the table: a CDM table or
column the definitions read is absent, a concept id is absent from ``concept``, a cohort has no
entries, a measurement's rows come in more than one ``unit_concept_id`` (each unit named with
its number of rows; values are never shown). Nothing is spent: the export charges its ledger
only after counting.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from ..data.codebook import Codebook
from ..data.omop import UNIT, concept_sets, kind_of
from .duckdb_source import DuckDBSource
from .omop_sql import CDM, feature_rows_query, literal, required_columns, units_query
from .postgres_source import PostgresSource
from .sqlsource import parse_query_string
from marg.errors import InputError

SCHEMES = ("omop+duckdb", "omop+postgresql", "omop+postgres")
ROW_COLUMNS = ("person_id", "cohort_start_date", "cohort_entry")


class OmopSource:
    """The OMOP part of a CDM source (mixed into the DuckDB or PostgreSQL source).

    Attributes
    ----------
    cdm : CDM
        The schemas of the CDM tables and of ``cohort``.
    """

    cdm: CDM
    _codebook: Codebook | None = None
    _query: str | None = None
    _key: Any = None

    def _omop_name(self, where: str) -> str:
        res = "" if self.cdm.results == self.cdm.cdm else f", cohorts in {self.cdm.results!r}"
        return f"omop cdm {self.cdm.cdm!r}{res} {where}"

    def prepare(self, codebook: Codebook, *, with_label: bool = True, max_rows: int | None = None,
                all_entries: bool = False) -> None:
        """Check the database against ``codebook`` and build the query of its rows.

        Parameters
        ----------
        max_rows : int, optional
            K, the entries counted per person (default: the codebook's unit bound, 1).
        all_entries : bool
            Every entry of the cohort (prediction), not the first K.
        """
        if codebook.omop is None:
            raise InputError(f"{self.name}: an OMOP CDM source needs a codebook whose features are defined by the CDM "
                             "(\"omop\": {\"target_cohort\": N} and an \"omop\" definition on each feature)")
        k = None if all_entries else int(max_rows or codebook.unit_declaration["max_rows_per_unit"])
        key = (codebook.fingerprint, with_label, k)
        if key == self._key:
            return
        self._check(codebook, with_label)
        self._query = feature_rows_query(self.dialect, codebook, self.cdm, max_entries=k, with_label=with_label)
        self._codebook, self._key, self._with_label = codebook, key, with_label

    def bounds_units(self, unit: Any) -> bool:
        """True: the query keeps at most K entries of each person (the unit must be ``person_id``)."""
        if unit is None or unit.column != UNIT:
            raise InputError(f"{self.name}: the privacy unit of an OMOP CDM source is {UNIT!r} (the person), "
                             f"not {getattr(unit, 'column', None) or 'the row'!r}")
        if self._codebook is not None:
            self.prepare(self._codebook, with_label=self._with_label, max_rows=unit.bound)
        return True

    def select(self) -> tuple[str, list[Any]]:
        if self._query is None:
            raise InputError(f"{self.name}: the rows of an OMOP CDM source are the codebook's (give --schema)")
        return self._query, []

    def columns(self) -> list[str]:
        if self._codebook is None:
            return list(ROW_COLUMNS)
        cb = self._codebook
        return list(ROW_COLUMNS) + cb.feature_names + ([cb.label.name] if self._with_label else [])

    def count(self, codebook: Codebook, cliques: Sequence[tuple[str, ...]], progress: Any = None):
        if self._codebook is None or self._codebook.fingerprint != codebook.fingerprint:
            self.prepare(codebook)
        return super().count(codebook, cliques, progress)  # type: ignore[misc]

    def describe(self) -> dict[str, Any]:
        d = super().describe()  # type: ignore[misc]
        d.pop("table", None)
        d.pop("schema", None)
        d.update({"kind": "omop", "cdm": self.cdm.cdm, "results": self.cdm.results})
        return d

    # ------------------------------------------------------------ the checks
    def _check(self, cb: Codebook, with_label: bool) -> None:
        """The module docstring's checks, in order: tables and columns, concepts, cohorts, units."""
        di = self.dialect
        schemas = sorted({self.cdm.cdm.lower(), self.cdm.results.lower()})
        res = self.fetch("SELECT lower(table_schema) AS s, lower(table_name) AS t, lower(column_name) AS c "
                         "FROM information_schema.columns WHERE lower(table_schema) IN "
                         f"({', '.join(literal(di, s) for s in schemas)})")
        have = set(zip(*(res.column(i).to_pylist() for i in range(3)))) if res.num_rows else set()
        tables = {(s, t) for s, t, _c in have}
        for what, table, results, column in required_columns(cb, with_label):
            schema = self.cdm.results if results else self.cdm.cdm
            if (schema.lower(), table) not in tables:
                raise InputError(f"{what}: table {schema}.{table} is absent from {self.name} (an OMOP CDM 5.4 table)")
            if (schema.lower(), table, column) not in have:
                raise InputError(f"{what}: column {column!r} is absent from table {schema}.{table} in {self.name}")
        concept = self.cdm.table(di, "concept")
        sets = [x for x in concept_sets(cb) if with_label or not x[0].startswith("label")]
        wanted = sorted({int(c) for _w, d in sets for c in d["concepts"]})
        got: set[int] = set()
        if wanted:  # one query for every concept the definitions name
            found = self.fetch(f"SELECT concept_id FROM {concept} WHERE concept_id IN ({', '.join(map(str, wanted))})")
            got = {int(v) for v in found.column(0).to_pylist()} if found.num_rows else set()
        for what, d in sets:
            absent = [c for c in d["concepts"] if c not in got]
            if absent:
                raise InputError(f"{what}: concept {absent[0]} is absent from table {self.cdm.cdm}.concept in "
                                 f"{self.name}")
        cohorts = [("codebook population", cb.omop["target_cohort"])]  # type: ignore[index]
        if with_label and "outcome_cohort" in cb.label.omop:  # type: ignore[operator]
            cohorts.append((f"label {cb.label.name!r}", cb.label.omop["outcome_cohort"]))  # type: ignore[index]
        res = self.fetch("SELECT cohort_definition_id AS c, COUNT(*) AS n FROM "
                         f"{self.cdm.table(di, 'cohort', results=True)} WHERE cohort_definition_id IN "
                         f"({', '.join(str(int(c)) for _w, c in cohorts)}) GROUP BY cohort_definition_id")
        entries = dict(zip(res.column(0).to_pylist(), res.column(1).to_pylist())) if res.num_rows else {}
        for what, cid in cohorts:
            if not entries.get(cid):
                raise InputError(f"{what}: cohort {cid} has no entries in table {self.cdm.results}.cohort in "
                                 f"{self.name}")
        checked: dict[tuple, Any] = {}  # one units query per concept set (features sharing one share it)
        for f in cb.features:
            if kind_of(f.omop) != "measurement" or f.omop.get("unit") is not None:  # type: ignore[arg-type]
                continue
            key = (tuple(f.omop["concepts"]), f.omop["descendants"])  # type: ignore[index]
            if key not in checked:
                checked[key] = self.fetch(units_query(di, self.cdm, f.omop))  # type: ignore[arg-type]
            units = checked[key]
            if units.num_rows > 1:
                shown = ", ".join(f"{'none' if u is None else u}: {int(n):,} rows"
                                  for u, n in zip(units.column(0).to_pylist(), units.column(1).to_pylist()))
                raise InputError(f"feature {f.name!r}: table {self.cdm.cdm}.measurement holds its concepts' values in "
                                 f"{units.num_rows} units (unit_concept_id {shown}); keep one with \"unit\": ID in its "
                                 "omop definition, or convert them in the CDM")


class OmopDuckDB(OmopSource, DuckDBSource):
    """An OMOP CDM in a DuckDB database file."""


class OmopPostgres(OmopSource, PostgresSource):
    """An OMOP CDM in a PostgreSQL database."""


def _cdm_options(query: str, kind: str, default_cdm: str) -> CDM:
    opts = parse_query_string(query, ("cdm", "results"), kind)
    cdm = opts.get("cdm") or default_cdm
    return CDM(cdm=cdm, results=opts.get("results") or cdm)


def open_omop(uri: str) -> "OmopSource":
    """The OMOP CDM source of an ``omop+duckdb://`` or ``omop+postgresql://`` URI."""
    scheme = uri.split("://", 1)[0].lower()
    parts = urlsplit(uri)
    if scheme == "omop+duckdb":
        path = unquote(parts.netloc + parts.path)
        if not path:
            raise InputError(f"omop+duckdb URI {uri!r} names no database")
        cdm = _cdm_options(parts.query, "omop+duckdb", "main")

        src = OmopDuckDB(Path(path), table="person", schema=cdm.cdm)
        src.cdm = cdm
        src.name = src._omop_name(f"in {Path(path).name}")
        return src
    if scheme in ("omop+postgresql", "omop+postgres"):
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        cdm = _cdm_options(urlencode([(k, v) for k, v in pairs if k in ("cdm", "results")]), "omop+postgresql",
                           "public")
        rest = [(k, v) for k, v in pairs if k not in ("cdm", "results")]
        if any(k in ("table", "query", "schema") for k, _ in rest):
            raise InputError("an omop+postgresql URI takes cdm= and results=, not table=, schema= or query=")
        base = urlunsplit(("postgresql", parts.netloc, parts.path, urlencode(rest + [("table", "person"),
                                                                                     ("schema", cdm.cdm)]), ""))

        src = OmopPostgres(base)
        src.cdm = cdm
        src.name = src._omop_name(f"on {src.host}:{src.port}/{src.database or ''}")
        return src
    raise InputError(f"unsupported OMOP URI scheme {scheme!r} (omop+duckdb://, omop+postgresql://)")
