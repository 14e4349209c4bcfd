"""OMOP CDM sites for the tests: the generator's tables in DuckDB and PostgreSQL, and the pandas reference.

``reference_rows`` computes a codebook's rows from the generator's own Arrow tables with pandas,
independently of marg's SQL (merges and date differences instead of one query), so the rows marg
computes in a database can be compared with it. ``plant_lookahead`` adds events a feature must not
read (after the index date) and outcomes the label must not read (before the index date).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from marg.marginals.data.omop import DOMAINS, kind_of
from marg.marginals.synthetic_omop import DDL, RESULTS_TABLES


def frames(tables: dict[str, pa.Table]) -> dict[str, pd.DataFrame]:
    """The tables as pandas frames, dates as datetime64."""
    out = {}
    for name, t in tables.items():
        df = t.to_pandas()
        for c, typ in DDL[name]:
            if typ == "date":
                df[c] = pd.to_datetime(df[c])
        out[name] = df
    return out


def _concept_set(f: dict[str, pd.DataFrame], d: dict[str, Any]) -> set[int]:
    ids = set(d["concepts"])
    if d.get("descendants"):
        ca = f["concept_ancestor"]
        ids |= set(ca.loc[ca.ancestor_concept_id.isin(d["concepts"]), "descendant_concept_id"].astype(int))
    return ids


def _hits(f: dict[str, pd.DataFrame], idx: pd.DataFrame, d: dict[str, Any], lo: int, hi: int) -> pd.DataFrame:
    """The (person, entry) pairs' events of ``d``'s concept set with date − index in [lo, hi] days."""
    table, concept, date = DOMAINS[d["domain"]]
    ev = f[table]
    ev = ev[ev[concept].isin(_concept_set(f, d))]
    m = idx.merge(ev, on="person_id")
    delta = (m[date] - m["index_date"]).dt.days
    return m[(delta >= lo) & (delta <= hi)]


def reference_rows(tables: dict[str, pa.Table], codebook: Any, max_entries: int | None = 1,
                   with_label: bool = True) -> pd.DataFrame:
    """The codebook's rows (person_id, cohort_entry, cohort_start_date, features, label) by pandas."""
    f = frames(tables)
    co = f["cohort"]
    idx = co[co.cohort_definition_id == codebook.omop["target_cohort"]].rename(
        columns={"subject_id": "person_id", "cohort_start_date": "index_date"})
    idx = idx.sort_values(["person_id", "index_date", "cohort_end_date"], kind="stable")
    idx["cohort_entry"] = idx.groupby("person_id").cumcount() + 1
    if max_entries is not None:
        idx = idx[idx.cohort_entry <= max_entries]
    idx = idx[["person_id", "cohort_entry", "index_date"]].reset_index(drop=True)
    out = idx.merge(f["person"], on="person_id", how="inner")
    key = ["person_id", "cohort_entry"]
    for feat in codebook.features:
        d = feat.omop
        kind = kind_of(d)
        if kind == "age":
            out[feat.name] = out["index_date"].dt.year - out["year_of_birth"]
        elif kind == "person":
            raw = out[d["person"]]
            mp = {int(k): v for k, v in d.get("map", {}).items()}
            out[feat.name] = [None if (pd.isna(v) or v == 0) else mp.get(int(v), str(int(v))) for v in raw]
        elif kind == "presence":
            h = _hits(f, idx, d, *d["window"])[key].drop_duplicates()
            h["_hit"] = True
            m = out[key].merge(h, on=key, how="left")
            out[feat.name] = np.where(m["_hit"].fillna(False).astype(bool), feat.levels[1], feat.levels[0])
        else:
            h = _hits(f, idx, d, *d["window"])
            h = h[h.value_as_number.notna()]
            if d.get("unit") is not None:
                h = h[h.unit_concept_id == d["unit"]]
            if d["value"] in ("max", "min"):
                v = h.groupby(key)["value_as_number"].agg(d["value"]).rename("_v").reset_index()
            else:
                h = h.sort_values(key + ["measurement_date", "measurement_id"])
                v = (h.groupby(key).tail(1) if d["value"] == "last" else h.groupby(key).head(1))
                v = v[key + ["value_as_number"]].rename(columns={"value_as_number": "_v"})
            out[feat.name] = out[key].merge(v, on=key, how="left")["_v"].astype(float).to_numpy()
    if with_label:
        lab = codebook.label
        d = lab.omop
        a, b = d["time_at_risk"]
        if "outcome_cohort" in d:
            o = co[co.cohort_definition_id == d["outcome_cohort"]]
            m = idx.merge(o.rename(columns={"subject_id": "person_id"}), on="person_id")
            delta = (m["cohort_start_date"] - m["index_date"]).dt.days
            h = m[(delta >= a) & (delta <= b)][key].drop_duplicates()
        else:
            h = _hits(f, idx, d, a, b)[key].drop_duplicates()
        h["_hit"] = True
        m = out[key].merge(h, on=key, how="left")
        out[lab.name] = np.where(m["_hit"].fillna(False).astype(bool), lab.classes[1], lab.classes[0])
    out = out.rename(columns={"index_date": "cohort_start_date"})
    cols = (["person_id", "cohort_entry", "cohort_start_date"] + codebook.feature_names
            + ([codebook.label.name] if with_label else []))
    return out[cols].sort_values(["person_id", "cohort_entry"]).reset_index(drop=True)


def marg_rows(source: Any, codebook: Any, max_entries: int | None = 1, with_label: bool = True) -> pd.DataFrame:
    """The rows marg's source computes (its query run as is), in the reference's order and columns."""
    source.prepare(codebook, with_label=with_label, max_rows=max_entries, all_entries=max_entries is None)
    df = source.fetch(source.select()[0]).to_pandas()
    df["cohort_start_date"] = pd.to_datetime(df["cohort_start_date"])
    for feat in codebook.features:
        if feat.kind == "numeric":
            df[feat.name] = df[feat.name].astype(float)
    cols = (["person_id", "cohort_entry", "cohort_start_date"] + codebook.feature_names
            + ([codebook.label.name] if with_label else []))
    df["person_id"] = df["person_id"].astype(np.int64)
    df["cohort_entry"] = df["cohort_entry"].astype(np.int64)
    return df[cols].sort_values(["person_id", "cohort_entry"]).reset_index(drop=True)


def write_postgres(tables: dict[str, pa.Table], uri: str, cdm: str, results: str) -> None:
    """Create the CDM tables (CDM 5.4 types) in schemas ``cdm`` and ``results`` of a PostgreSQL database and fill
    them (COPY)."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(uri, autocommit=True) as con:
        for schema in {cdm, results}:
            con.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        for name, t in tables.items():
            schema = results if name in RESULTS_TABLES else cdm
            cols = sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(c), sql.SQL(typ)) for c, typ in DDL[name])
            ref = sql.Identifier(schema, name)
            con.execute(sql.SQL("CREATE TABLE {} ({})").format(ref, cols))
            names = sql.SQL(", ").join(sql.Identifier(c) for c, _ in DDL[name])
            with con.cursor() as cur, cur.copy(sql.SQL("COPY {} ({}) FROM STDIN").format(ref, names)) as cp:
                columns = [t.column(c).to_pylist() for c, _ in DDL[name]]
                for row in zip(*columns):
                    cp.write_row(row)


def plant_lookahead(tables: dict[str, pa.Table], codebook: Any, seed: int = 0) -> dict[str, pa.Table]:
    """The tables plus, for every person of the target cohort: an event of every feature's concepts 1..30 days after
    the last entry's index (a measurement with an extreme value) and an outcome 1..30 days before the first entry's.
    None may change a row (of any entry: each is after, or before, every index of the person)."""
    rng = np.random.default_rng(seed)
    co = tables["cohort"].to_pandas()
    idx = co[co.cohort_definition_id == codebook.omop["target_cohort"]].copy()
    idx["day"] = pd.to_datetime(idx.cohort_start_date).to_numpy("datetime64[D]").astype(np.int64)
    span = idx.groupby("subject_id")["day"].agg(["min", "max"])
    pid = span.index.to_numpy(np.int64)
    after = span["max"].to_numpy() + rng.integers(1, 31, pid.size)  # after the person's last entry: after every index
    before = span["min"].to_numpy() - rng.integers(1, 31, pid.size)  # before the first: before every index
    out = dict(tables)
    next_id = 10 ** 9
    for feat in codebook.features:
        d = feat.omop
        if "concepts" not in d:
            continue
        table, concept, date = DOMAINS[d["domain"]]
        id_col = next(c for c, _ in DDL[table] if c.endswith("_id"))
        cols: dict[str, Any] = {id_col: np.arange(next_id, next_id + pid.size), "person_id": pid,
                                concept: np.full(pid.size, d["concepts"][0]),
                date: after}
        next_id += pid.size
        if table == "measurement":
            cols["value_as_number"] = np.full(pid.size, 99.0)
            cols["unit_concept_id"] = np.full(pid.size, d.get("unit") or 8554)
        out[table] = pa.concat_tables([out[table], _rows(table, cols, out[table].schema)])
    lab = codebook.label.omop
    if "outcome_cohort" in lab:
        extra = {"cohort_definition_id": np.full(pid.size, lab["outcome_cohort"]), "subject_id": pid,
                 "cohort_start_date": before, "cohort_end_date": before}
        out["cohort"] = pa.concat_tables([out["cohort"], _rows("cohort", extra, out["cohort"].schema)])
    return out


def _rows(table: str, cols: dict[str, Any], schema: pa.Schema) -> pa.Table:
    n = len(next(iter(cols.values())))
    arrays = []
    for fld in schema:
        v = cols.get(fld.name)
        if v is None:
            arrays.append(pa.nulls(n, fld.type))
        elif fld.type == pa.date32():
            arrays.append(pa.array(np.asarray(v, np.int32), pa.int32()).cast(pa.date32()))
        else:
            arrays.append(pa.array(v).cast(fld.type))
    return pa.table(arrays, schema=schema)


def duckdb_site(tables: dict[str, pa.Table], path: Path, cdm: str = "main", results: str | None = None) -> str:
    """The tables in a DuckDB file; its omop+duckdb URI."""
    from marg.marginals.synthetic_omop import write_duckdb

    write_duckdb(tables, path, cdm, results)
    return f"omop+duckdb://{path}?cdm={cdm}" + (f"&results={results}" if results else "")
