"""The one SQL query that turns an OMOP CDM database into a codebook's rows: one row per cohort entry.

For a codebook with OMOP definitions (:mod:`marg.marginals.data.omop`) the query selects the target
cohort's entries — at most ``max_entries`` per person, the earliest first (``ROW_NUMBER() OVER
(PARTITION BY subject_id ORDER BY cohort_start_date, cohort_end_date)``) — and gives each entry
``person_id``, ``cohort_start_date``, ``cohort_entry`` and one column per feature and the label::

    WITH idx AS (entries of the target cohort, numbered per person, at most K),
         cs0 AS (concept set 0: its concepts ∪ their descendants in concept_ancestor), …,
         ev_condition AS (each entry's events of the domain's concept sets within the union of the
                          domain's windows: read once per table; every window ends at day 0 at the latest),
         f1 AS (entries with an event of cs0 in [index + a, index + b]), …   -- b <= 0: no look-ahead
         lab AS (entries with the outcome in [index + a, index + b])        -- a >= 0: nothing before
    SELECT i.person_id, i.index_date AS cohort_start_date, i.entry AS cohort_entry,
           year(index) - year_of_birth AS "age", CASE p.gender_concept_id WHEN 8507 THEN 'male' … AS "sex",
           CASE WHEN f1.person_id IS NULL THEN 'no' ELSE 'yes' END AS "t2dm", f2.v AS "hba1c", … AS "outcome"
    FROM idx i JOIN person p … LEFT JOIN f1 … LEFT JOIN f2 …

The counts are then the usual grouped query over it (:func:`marg.marginals.sources.sql.count_query`):
the rows never leave the database. Every name is a quoted identifier (:meth:`Dialect.ident`); every
number in the text is a concept id, cohort id or day offset the codebook checked to be an integer,
written by ``int()``; level names are SQL string literals with their quotes doubled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..data.codebook import Codebook
from ..data.omop import DOMAINS, kind_of
from .sql import Dialect

MEASUREMENT_TIE = "measurement_id"  # first/last: the latest date, then the largest id (deterministic)


@dataclass(frozen=True)
class CDM:
    """Where the CDM lives: the schema of its tables and the schema of ``cohort`` (results)."""

    cdm: str
    results: str

    def table(self, dialect: Dialect, name: str, results: bool = False) -> str:
        return dialect.ident(self.results if results else self.cdm, "schema") + "." + dialect.ident(name, "table")


def literal(dialect: Dialect, text: str) -> str:
    """A SQL string literal (quotes doubled; NUL refused by the codebook's level rules)."""
    return dialect.text("'" + str(text).replace("'", "''") + "'")


def _ids(ids: list[int]) -> str:
    return ", ".join(str(int(c)) for c in ids)


def concept_set_sql(dialect: Dialect, cdm: CDM, d: dict[str, Any]) -> str:
    """The concepts of definition ``d`` (and their descendants when it asks): one column ``concept_id``."""
    ids = _ids(d["concepts"])
    sql = f"SELECT concept_id FROM {cdm.table(dialect, 'concept')} WHERE concept_id IN ({ids})"
    if d.get("descendants"):
        sql += (f" UNION SELECT descendant_concept_id AS concept_id FROM {cdm.table(dialect, 'concept_ancestor')} "
                f"WHERE ancestor_concept_id IN ({ids})")
    return sql


def _events(dialect: Dialect, cdm: CDM, d: dict[str, Any], cs: str, lo: int, hi: int) -> tuple[str, str, str]:
    """FROM/WHERE of the events of ``d``'s domain in concept set ``cs`` within [index + lo, index + hi]."""
    table, concept, date = DOMAINS[d["domain"]]
    e = f"e.{dialect.ident(date)}"
    frm = f"idx i JOIN {cdm.table(dialect, table)} e ON e.person_id = i.person_id"
    where = (f"e.{dialect.ident(concept)} IN (SELECT concept_id FROM {cs}) "
             f"AND {e} >= i.index_date + {int(lo)} AND {e} <= i.index_date + {int(hi)}")
    return frm, where, e


def feature_rows_query(dialect: Dialect, codebook: Codebook, cdm: CDM, *, max_entries: int | None = 1,
                       with_label: bool = True) -> str:
    """The query giving each cohort entry's row (module docstring).

    Parameters
    ----------
    max_entries : int or None
        K: at most this many entries per person (the earliest); None: every entry (prediction).
    with_label : bool
        Compute the label column (False for prediction, when the outcome is in the future).

    Returns
    -------
    str
        SQL text for the driver (no parameters).
    """
    pop = codebook.omop
    assert pop is not None, "feature_rows_query needs an OMOP codebook"
    ctes = [
        "idx AS (SELECT person_id, entry, index_date FROM (SELECT c.subject_id AS person_id, c.cohort_start_date AS "
        "index_date, ROW_NUMBER() OVER (PARTITION BY c.subject_id ORDER BY c.cohort_start_date, c.cohort_end_date) "
        f"AS entry FROM {cdm.table(dialect, 'cohort', results=True)} c WHERE c.cohort_definition_id = "
        f"{int(pop['target_cohort'])}) t" + (f" WHERE entry <= {int(max_entries)})" if max_entries is not None else ")")
    ]
    sets: dict[str, str] = {}  # concept-set SQL -> its CTE name (shared by definitions naming the same set)

    def concept_cte(d: dict[str, Any]) -> str:
        sql = concept_set_sql(dialect, cdm, d)
        if sql not in sets:
            sets[sql] = f"cs{len(sets)}"
            ctes.append(f"{sets[sql]} AS ({sql})")
        return sets[sql]

    events: dict[str, str] = {}  # domain -> its CTE of the entries' events within the features' windows

    def domain_events(domain: str) -> str:
        """``ev_<domain>``: each entry's events of the domain's features' concepts within the union of their
        windows (every window ends at day 0 at the latest), read once for all of the domain's features."""
        if domain in events:
            return events[domain]
        defs = [f.omop for f in codebook.features if (f.omop or {}).get("domain") == domain]
        table, concept, date = DOMAINS[domain]
        lo = min(int(x["window"][0]) for x in defs)
        hi = max(int(x["window"][1]) for x in defs)
        union = " UNION ".join(f"SELECT concept_id FROM {concept_cte(x)}" for x in defs)
        e = f"e.{dialect.ident(date)}"
        extra = (f", CAST(e.value_as_number AS {dialect.double}) AS v, e.{MEASUREMENT_TIE} AS id, e.unit_concept_id "
                 "AS u"
                 if domain == "measurement" else "")
        events[domain] = f"ev_{domain}"
        ctes.append(f"ev_{domain} AS (SELECT i.person_id, i.entry, i.index_date, e.{dialect.ident(concept)} AS c, "
                    f"{e} AS d{extra} FROM idx i JOIN {cdm.table(dialect, table)} e ON e.person_id = i.person_id "
                    f"WHERE e.{dialect.ident(concept)} IN ({union}) AND {e} >= i.index_date + {lo} "
                    f"AND {e} <= i.index_date + {hi})")
        return events[domain]

    cols = ["i.person_id AS person_id", "i.index_date AS cohort_start_date", "i.entry AS cohort_entry"]
    joins = [f"JOIN {cdm.table(dialect, 'person')} p ON p.person_id = i.person_id"]
    for k, f in enumerate(codebook.features):
        d, name = f.omop, dialect.ident(f.name)
        kind = kind_of(d)
        if kind == "age":
            cols.append(f"CAST(EXTRACT(YEAR FROM i.index_date) AS INTEGER) - p.year_of_birth AS {name}")
        elif kind == "person":
            col = f"p.{dialect.ident(d['person'])}"
            whens = " ".join(f"WHEN {col} = {int(cid)} THEN {literal(dialect, lv)}"
                             for cid, lv in d.get("map", {}).items())
            cols.append(f"CASE WHEN {col} IS NULL OR {col} = 0 THEN NULL {whens} "
                        f"ELSE CAST({col} AS VARCHAR) END AS {name}")
        else:
            cs = concept_cte(d)
            ev = domain_events(d["domain"])
            a, b = d["window"]
            frm = f"{ev} e"
            where = (f"e.c IN (SELECT concept_id FROM {cs}) AND e.d >= e.index_date + {int(a)} "
                     f"AND e.d <= e.index_date + {int(b)}")
            fk = f"f{k}"
            if kind == "presence":
                ctes.append(f"{fk} AS (SELECT DISTINCT e.person_id, e.entry FROM {frm} WHERE {where})")
                no, yes = (literal(dialect, lv) for lv in f.levels)
                cols.append(f"CASE WHEN {fk}.person_id IS NULL THEN {no} ELSE {yes} END AS {name}")
            else:
                where += " AND e.v IS NOT NULL"
                if d.get("unit") is not None:
                    where += f" AND e.u = {int(d['unit'])}"
                if d["value"] in ("max", "min"):
                    agg = d["value"].upper()
                    ctes.append(f"{fk} AS (SELECT e.person_id, e.entry, {agg}(e.v) AS v FROM {frm} WHERE {where} "
                                "GROUP BY e.person_id, e.entry)")
                else:
                    order = "DESC" if d["value"] == "last" else "ASC"
                    ctes.append(f"{fk} AS (SELECT person_id, entry, v FROM (SELECT e.person_id, e.entry, e.v, "
                                f"ROW_NUMBER() OVER (PARTITION BY e.person_id, e.entry ORDER BY e.d {order}, "
                                f"e.id {order}) AS rn FROM {frm} WHERE {where}) t WHERE rn = 1)")
                cols.append(f"{fk}.v AS {name}")
            joins.append(f"LEFT JOIN {fk} ON {fk}.person_id = i.person_id AND {fk}.entry = i.entry")
    if with_label:
        lab = codebook.label
        d = lab.omop
        a, b = d["time_at_risk"]
        if "outcome_cohort" in d:
            o = "o.cohort_start_date"
            ctes.append(f"lab AS (SELECT DISTINCT i.person_id, i.entry FROM idx i JOIN "
                        f"{cdm.table(dialect, 'cohort', results=True)} o ON o.subject_id = i.person_id "
                        f"WHERE o.cohort_definition_id = {int(d['outcome_cohort'])} "
                        f"AND {o} >= i.index_date + {int(a)} AND {o} <= i.index_date + {int(b)})")
        else:
            frm, where, _e = _events(dialect, cdm, d, concept_cte(d), a, b)
            ctes.append(f"lab AS (SELECT DISTINCT i.person_id, i.entry FROM {frm} WHERE {where})")
        neg, pos = (literal(dialect, c) for c in lab.classes)
        cols.append(f"CASE WHEN lab.person_id IS NULL THEN {neg} ELSE {pos} END AS {dialect.ident(lab.name)}")
        joins.append("LEFT JOIN lab ON lab.person_id = i.person_id AND lab.entry = i.entry")
    return f"WITH {', '.join(ctes)} SELECT {', '.join(cols)} FROM idx i {' '.join(joins)}"


def required_columns(codebook: Codebook, with_label: bool = True) -> list[tuple[str, str, bool, str]]:
    """``(what, table, in results schema, column)`` for every CDM column the query reads."""
    out: list[tuple[str, str, bool, str]] = []
    pop = "codebook population"
    for c in ("cohort_definition_id", "subject_id", "cohort_start_date", "cohort_end_date"):
        out.append((pop, "cohort", True, c))
    out += [(pop, "person", False, "person_id"), (pop, "person", False, "year_of_birth")]
    defs = [(f"feature {f.name!r}", f.omop) for f in codebook.features]
    if with_label:
        defs.append((f"label {codebook.label.name!r}", codebook.label.omop))
    for what, d in defs:
        kind = kind_of(d) if "time_at_risk" not in d else ("cohort" if "outcome_cohort" in d else "presence")
        if kind == "person":
            out.append((what, "person", False, d["person"]))
        if "concepts" in d:
            table, concept, date = DOMAINS[d["domain"]]
            out += [(what, "concept", False, "concept_id"), (what, table, False, "person_id"),
                    (what, table, False, concept), (what, table, False, date)]
            if d.get("descendants"):
                out += [(what, "concept_ancestor", False, "ancestor_concept_id"),
                        (what, "concept_ancestor", False, "descendant_concept_id")]
            if d["domain"] == "measurement" and "time_at_risk" not in d:
                out += [(what, table, False, "value_as_number"), (what, table, False, "unit_concept_id"),
                        (what, table, False, MEASUREMENT_TIE)]
    return out


def units_query(dialect: Dialect, cdm: CDM, d: dict[str, Any]) -> str:
    """The ``unit_concept_id`` of a measurement definition's rows with a value, and how many rows each."""
    cs = concept_set_sql(dialect, cdm, d)
    return (f"SELECT unit_concept_id AS unit, COUNT(*) AS n FROM {cdm.table(dialect, 'measurement')} "
            f"WHERE measurement_concept_id IN ({cs}) AND value_as_number IS NOT NULL "
            "GROUP BY unit_concept_id ORDER BY COUNT(*) DESC, unit_concept_id")
