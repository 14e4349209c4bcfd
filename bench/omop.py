"""Issue 46: counting a 20-feature OMOP codebook in DuckDB, marg's source against the same work hand-written.

A generated CDM (``marginals.synthetic_omop``: PERSONS persons, about 20 events each, over 2 M events
at 100,000) in a DuckDB file; a 20-feature codebook (age, sex, race, conditions, drugs, procedures,
observations in windows, measurements' last/first/max/min); every table of it (``--stats all``: the
20 first-order tables and the 190 pairs, each with the label).

- marg: ``OmopSource.prepare`` (the CDM checks) and ``count`` (its feature-row query under the grouped
  query, and the decoding of the groups), as ``marg export`` runs them;
- hand-written: the feature rows written by hand the way a site's analyst would for DuckDB (one pass
  over each event table with conditional aggregation, ``arg_max`` for last/first), under the same
  grouping-sets text (marg's ``count_query``), run directly on a DuckDB connection.

Both run interleaved, REPEATS times each, on one connection setting; the tables are checked equal.

    python bench/omop.py --persons 100000 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from marg.marginals.data.codebook import Codebook
from marg.marginals.data.omop import DOMAINS
from marg.marginals.sources import open_source
from marg.marginals.sources.grouped import plan_groups, tables_from_groups
from marg.marginals.sources.sql import DUCKDB, count_query
from marg.marginals.synthetic_omop import (HBA1C, HTN, LDL, METFORMIN, MI, OTHER_CONDITIONS, OTHER_OBS, PROCEDURES,
                                           SMOKER, STATIN, T2DM, TARGET, OUTCOME, generate_cdm, write_duckdb)
from marg.marginals.counts.tables import plan_cliques


def presence(name, domain, concepts, window, descendants=False):
    return {"name": name, "omop": {"domain": domain, "concepts": list(concepts), "descendants": descendants,
                                   "window": list(window)}}


def measure(name, concept, window, value, edges):
    return {"name": name, "type": "numeric", "edges": edges, "missing": True,
            "omop": {"domain": "measurement", "concepts": [concept], "window": list(window), "value": value}}


def codebook20() -> Codebook:
    feats = [
        {"name": "age", "type": "numeric", "edges": [45, 55, 65, 75], "omop": {"age_at": "index"}},
        {"name": "sex", "levels": {"8507": "male", "8532": "female"}, "omop": {"person": "gender_concept_id"}},
        {"name": "race", "levels": {"8527": "white", "8516": "black", "8515": "asian"},
         "omop": {"person": "race_concept_id"}},
        presence("t2dm_1y", "condition", [T2DM], (-365, 0), True),
        presence("t2dm_ever", "condition", [T2DM], (-36500, 0), True),
        presence("htn_2y", "condition", [HTN], (-730, 0)),
        presence("mi_prior", "condition", [MI], (-3650, -1), True),
        presence("pharyngitis", "condition", [OTHER_CONDITIONS[0]], (-365, 0)),
        presence("arthritis", "condition", [OTHER_CONDITIONS[1]], (-730, 0)),
        presence("copd", "condition", [OTHER_CONDITIONS[2]], (-1095, 0)),
        presence("metformin_6m", "drug", [METFORMIN], (-180, 0), True),
        presence("metformin_2y", "drug", [METFORMIN], (-730, 0), True),
        presence("statin", "drug", [STATIN], (-365, 0)),
        presence("surgery", "procedure", PROCEDURES, (-365, 0)),
        presence("smoker", "observation", [SMOKER], (-1095, 0)),
        presence("alcohol", "observation", [OTHER_OBS], (-365, 0)),
        measure("hba1c_last", HBA1C, (-365, 0), "last", [5.7, 6.5, 8.0]),
        measure("hba1c_max", HBA1C, (-730, 0), "max", [6.5, 8.0]),
        measure("hba1c_first", HBA1C, (-730, 0), "first", [6.5]),
        measure("ldl_min", LDL, (-730, 0), "min", [100.0, 130.0]),
    ]
    return Codebook.from_dict({"omop": {"target_cohort": TARGET}, "features": feats,
                               "label": {"name": "outcome", "classes": ["no", "yes"],
                                         "omop": {"outcome_cohort": OUTCOME, "time_at_risk": [1, 365]}}})


def hand_rows(cb: Codebook) -> str:
    """The feature rows as an analyst writes them for DuckDB: one scan of each event table (conditional
    aggregation over the person's events up to the index), descendants spelled out, arg_max for last/first."""
    anc = {T2DM: "201826, 443732, 4193704", MI: "4329847, 312327", METFORMIN: "1503297, 40163924, 40164929"}
    by_table: dict[str, list[str]] = {}
    names: list[str] = []
    for f in cb.features:
        d = f.omop
        if "domain" not in d:
            continue
        table, concept, date = DOMAINS[d["domain"]]
        ids = ", ".join(anc.get(c, str(c)) if d["descendants"] else str(c) for c in d["concepts"])
        a, b = d["window"]
        cond = f"e.{concept} IN ({ids}) AND e.{date} BETWEEN i.index_date + {a} AND i.index_date + {b}"
        if d["domain"] == "measurement":
            v = "CAST(e.value_as_number AS DOUBLE)"
            cond += " AND e.value_as_number IS NOT NULL"
            key = f"(date_diff('day', DATE '1970-01-01', e.{date}) * 100000000 + e.measurement_id)"
            agg = {"max": f"MAX(CASE WHEN {cond} THEN {v} END)", "min": f"MIN(CASE WHEN {cond} THEN {v} END)",
                   "last": f"arg_max({v}, {key}) FILTER (WHERE {cond})",
                   "first": f"arg_min({v}, {key}) FILTER (WHERE {cond})"}[d["value"]]
            by_table.setdefault(table, []).append(f"{agg} AS {f.name}")
        else:
            by_table.setdefault(table, []).append(f"BOOL_OR({cond}) AS {f.name}")
        names.append(f.name)
    ctes = ["idx AS (SELECT subject_id AS person_id, cohort_start_date AS index_date, ROW_NUMBER() OVER "
            "(PARTITION BY subject_id ORDER BY cohort_start_date, cohort_end_date) AS entry FROM main.cohort "
            f"WHERE cohort_definition_id = {TARGET} QUALIFY entry <= 1)",
            "lab AS (SELECT DISTINCT i.person_id, i.entry FROM idx i JOIN main.cohort o ON o.subject_id = i.person_id "
            f"AND o.cohort_definition_id = {OUTCOME} AND o.cohort_start_date BETWEEN i.index_date + 1 AND "
            "i.index_date + 365)"]
    joins = []
    for t, aggs in by_table.items():
        date = next(v[2] for v in DOMAINS.values() if v[0] == t)
        ctes.append(f"{t}_f AS (SELECT i.person_id, i.entry, {', '.join(aggs)} FROM idx i JOIN main.{t} e "
                    f"ON e.person_id = i.person_id AND e.{date} <= i.index_date GROUP BY i.person_id, i.entry)")
        joins.append(f"LEFT JOIN {t}_f USING (person_id, entry)")
    cols = ["YEAR(i.index_date) - p.year_of_birth AS age",
            "CASE p.gender_concept_id WHEN 8507 THEN 'male' WHEN 8532 THEN 'female' END AS sex",
            "CASE p.race_concept_id WHEN 8527 THEN 'white' WHEN 8516 THEN 'black' WHEN 8515 THEN 'asian' END AS race"]
    for f in cb.features:
        if f.name in names:
            cols.append(f.name if f.kind == "numeric" else f"CASE WHEN {f.name} THEN 'yes' ELSE 'no' END AS {f.name}")
    cols.append("CASE WHEN lab.person_id IS NULL THEN 'no' ELSE 'yes' END AS outcome")
    return (f"WITH {', '.join(ctes)} SELECT {', '.join(cols)} FROM idx i JOIN main.person p USING (person_id) "
            f"{' '.join(joins)} LEFT JOIN lab USING (person_id, entry)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--persons", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--stats", default="all")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    cb = codebook20()
    cliques = plan_cliques(cb, args.stats)
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        tables = generate_cdm(args.persons, seed=46)
        path = write_duckdb(tables, Path(tmp) / "site.duckdb")
        events = sum(tables[t].num_rows for t in ("visit_occurrence", "condition_occurrence", "drug_exposure",
                                                  "procedure_occurrence", "measurement", "observation"))
        build = time.perf_counter() - t0
        plan = plan_groups(cb, cliques)
        src = open_source(f"omop+duckdb://{path}?cdm=main")
        hand_sql, hand_params = count_query(DUCKDB, cb, plan, hand_rows(cb))
        con = src._connect()  # the same connection settings for both (read-only, NaN-safe optimiser set)
        times = {"marg": [], "hand": []}
        got = want = None
        for _ in range(args.repeats):
            t = time.perf_counter()
            src._key = None  # prepare (the CDM checks) every time, as each export does
            src.prepare(cb)
            got, n = src.count(cb, cliques)
            times["marg"].append(time.perf_counter() - t)
            t = time.perf_counter()
            res = con.sql(hand_sql, params=hand_params).to_arrow_table()
            want, n_hand = tables_from_groups(cb, cliques, plan, res, "hand-written")
            times["hand"].append(time.perf_counter() - t)
        same = n == n_hand and all(np.array_equal(a.counts, b.counts) for a, b in zip(got, want))
        src.close()
    med = {k: statistics.median(v) for k, v in times.items()}
    out = {"persons": args.persons, "events": events, "cohort_rows": n, "features": cb.n_features,
           "tables": len(cliques), "build_s": round(build, 1), "marg_s": [round(x, 2) for x in times["marg"]],
           "hand_s": [round(x, 2) for x in times["hand"]], "ratio_median": round(med["marg"] / med["hand"], 3),
           "tables_equal": same}
    print(json.dumps(out))
    if args.out:
        args.out.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
