"""Synthetic OMOP CDM 5.4 databases with a known outcome model (tests, ``marg demo --omop``, bench).

Each person has an observation period, one to three entries in the target cohort (id
:data:`TARGET`), visits and events in the condition, drug, procedure, observation and
measurement tables before *and after* the entries, and a concept hierarchy to use
(``concept_ancestor``: type 2 diabetes and its descendants, metformin's clinical drugs…).
A latent state drives the events and the outcome:

- type 2 diabetes from an onset date (some before the first entry, some after it: a feature
  that looked past the index date would see them); metformin after the onset; HbA1c values
  (``value_as_number`` in percent, unit 8554; some rows without a value, some persons never
  measured) that rise after the onset;
- smoking (an observation), hypertension (a condition), sex and year of birth;
- the outcome, an entry in cohort :data:`OUTCOME` (and a myocardial infarction in
  ``condition_occurrence``) within 1..365 days after the first entry with probability
  ``sigmoid(-1.9 + 0.05 (age − 60) + 2.2 diabetic + 1.5 smoker + 0.4 male + 0.6 hypertensive)``;
  distractors: outcome entries before the index and after the time at risk.

Every table has the CDM 5.4 columns and types (:data:`DDL`), returned as Arrow tables;
:func:`write_duckdb` writes them into a DuckDB schema. Same seed, same database.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

TARGET, OUTCOME = 11, 12
MALE, FEMALE = 8507, 8532
RACES = (8527, 8516, 8515)
T2DM, T2DM_DESC = 201826, (443732, 4193704)
HTN, MI, MI_DESC = 320128, 4329847, (312327,)
METFORMIN, METFORMIN_DESC = 1503297, (40163924, 40164929)
STATIN = 1539403
PROCEDURES = (4336464, 4301351)
SMOKER, OTHER_OBS = 4005823, 4275495
HBA1C, LDL = 3004410, 3028437
PERCENT, MG_DL = 8554, 8840
OTHER_CONDITIONS = (4112343, 80180, 255573)
EPOCH = np.datetime64("1970-01-01", "D")

CONCEPTS = [  # concept_id, name, domain, vocabulary, class, standard
    (MALE, "MALE", "Gender", "Gender", "Gender", "S"), (FEMALE, "FEMALE", "Gender", "Gender", "Gender", "S"),
    (8527, "White", "Race", "Race", "Race", "S"), (8516, "Black or African American", "Race", "Race", "Race", "S"),
    (8515, "Asian", "Race", "Race", "Race", "S"),
    (T2DM, "Type 2 diabetes mellitus", "Condition", "SNOMED", "Clinical Finding", "S"),
    (443732, "Disorder due to type 2 diabetes mellitus", "Condition", "SNOMED", "Clinical Finding", "S"),
    (4193704, "Type 2 diabetes mellitus without complication", "Condition", "SNOMED", "Clinical Finding", "S"),
    (HTN, "Essential hypertension", "Condition", "SNOMED", "Clinical Finding", "S"),
    (MI, "Myocardial infarction", "Condition", "SNOMED", "Clinical Finding", "S"),
    (312327, "Acute myocardial infarction", "Condition", "SNOMED", "Clinical Finding", "S"),
    (4112343, "Acute viral pharyngitis", "Condition", "SNOMED", "Clinical Finding", "S"),
    (80180, "Osteoarthritis", "Condition", "SNOMED", "Clinical Finding", "S"),
    (255573, "Chronic obstructive lung disease", "Condition", "SNOMED", "Clinical Finding", "S"),
    (METFORMIN, "metformin", "Drug", "RxNorm", "Ingredient", "S"),
    (40163924, "metformin 500 MG Oral Tablet", "Drug", "RxNorm", "Clinical Drug", "S"),
    (40164929, "metformin 850 MG Oral Tablet", "Drug", "RxNorm", "Clinical Drug", "S"),
    (STATIN, "simvastatin", "Drug", "RxNorm", "Ingredient", "S"),
    (4336464, "Coronary artery bypass graft", "Procedure", "SNOMED", "Procedure", "S"),
    (4301351, "Surgical procedure", "Procedure", "SNOMED", "Procedure", "S"),
    (SMOKER, "Tobacco user", "Observation", "SNOMED", "Clinical Finding", "S"),
    (OTHER_OBS, "Alcohol intake", "Observation", "SNOMED", "Observable Entity", "S"),
    (HBA1C, "Hemoglobin A1c/Hemoglobin.total in Blood", "Measurement", "LOINC", "Lab Test", "S"),
    (LDL, "Cholesterol in LDL [Mass/volume] in Serum or Plasma", "Measurement", "LOINC", "Lab Test", "S"),
    (PERCENT, "percent", "Unit", "UCUM", "Unit", "S"), (MG_DL, "milligram per deciliter", "Unit", "UCUM", "Unit", "S"),
    (9201, "Inpatient Visit", "Visit", "Visit", "Visit", "S"),
    (9202, "Outpatient Visit", "Visit", "Visit", "Visit", "S"),
    (32817, "EHR", "Type Concept", "Type Concept", "Type Concept", "S"),
]
ANCESTRY = [(T2DM, d) for d in T2DM_DESC] + [(MI, d) for d in MI_DESC] + [(METFORMIN, d) for d in METFORMIN_DESC]

I, D, T, N, V = "integer", "date", "timestamp", "numeric", "varchar(50)"
DDL: dict[str, list[tuple[str, str]]] = {  # the CDM 5.4 columns (and types) of the tables generated
    "person": [("person_id", I), ("gender_concept_id", I), ("year_of_birth", I), ("month_of_birth", I),
               ("day_of_birth", I), ("birth_datetime", T), ("race_concept_id", I), ("ethnicity_concept_id", I),
               ("location_id", I), ("provider_id", I), ("care_site_id", I), ("person_source_value", V),
               ("gender_source_value", V), ("gender_source_concept_id", I), ("race_source_value", V),
               ("race_source_concept_id", I), ("ethnicity_source_value", V), ("ethnicity_source_concept_id", I)],
    "observation_period": [("observation_period_id", I), ("person_id", I), ("observation_period_start_date", D),
                           ("observation_period_end_date", D), ("period_type_concept_id", I)],
    "visit_occurrence": [("visit_occurrence_id", I), ("person_id", I), ("visit_concept_id", I), ("visit_start_date", D),
                         ("visit_start_datetime", T), ("visit_end_date", D), ("visit_end_datetime", T),
                         ("visit_type_concept_id", I), ("provider_id", I), ("care_site_id", I),
                         ("visit_source_value", V), ("visit_source_concept_id", I), ("admitted_from_concept_id", I),
                         ("admitted_from_source_value", V), ("discharged_to_concept_id", I),
                         ("discharged_to_source_value", V), ("preceding_visit_occurrence_id", I)],
    "condition_occurrence": [("condition_occurrence_id", I), ("person_id", I), ("condition_concept_id", I),
                             ("condition_start_date", D), ("condition_start_datetime", T), ("condition_end_date", D),
                             ("condition_end_datetime", T), ("condition_type_concept_id", I),
                             ("condition_status_concept_id", I), ("stop_reason", "varchar(20)"), ("provider_id", I),
                             ("visit_occurrence_id", I), ("visit_detail_id", I), ("condition_source_value", V),
                             ("condition_source_concept_id", I), ("condition_status_source_value", V)],
    "drug_exposure": [("drug_exposure_id", I), ("person_id", I), ("drug_concept_id", I),
                      ("drug_exposure_start_date", D),
                      ("drug_exposure_start_datetime", T), ("drug_exposure_end_date", D),
                      ("drug_exposure_end_datetime", T), ("verbatim_end_date", D), ("drug_type_concept_id", I),
                      ("stop_reason", "varchar(20)"), ("refills", I), ("quantity", N), ("days_supply", I),
                      ("sig", "text"), ("route_concept_id", I), ("lot_number", V), ("provider_id", I),
                      ("visit_occurrence_id", I), ("visit_detail_id", I), ("drug_source_value", V),
                      ("drug_source_concept_id", I), ("route_source_value", V), ("dose_unit_source_value", V)],
    "procedure_occurrence": [("procedure_occurrence_id", I), ("person_id", I), ("procedure_concept_id", I),
                             ("procedure_date", D), ("procedure_datetime", T), ("procedure_end_date", D),
                             ("procedure_end_datetime", T), ("procedure_type_concept_id", I),
                             ("modifier_concept_id", I), ("quantity", I), ("provider_id", I),
                             ("visit_occurrence_id", I), ("visit_detail_id", I), ("procedure_source_value", V),
                             ("procedure_source_concept_id", I), ("modifier_source_value", V)],
    "measurement": [("measurement_id", I), ("person_id", I), ("measurement_concept_id", I), ("measurement_date", D),
                    ("measurement_datetime", T), ("measurement_time", "varchar(10)"),
                    ("measurement_type_concept_id", I),
                    ("operator_concept_id", I), ("value_as_number", N), ("value_as_concept_id", I),
                    ("unit_concept_id", I), ("range_low", N), ("range_high", N), ("provider_id", I),
                    ("visit_occurrence_id", I), ("visit_detail_id", I), ("measurement_source_value", V),
                    ("measurement_source_concept_id", I), ("unit_source_value", V), ("unit_source_concept_id", I),
                    ("value_source_value", V), ("measurement_event_id", I), ("meas_event_field_concept_id", I)],
    "observation": [("observation_id", I), ("person_id", I), ("observation_concept_id", I), ("observation_date", D),
                    ("observation_datetime", T), ("observation_type_concept_id", I), ("value_as_number", N),
                    ("value_as_string", "varchar(60)"), ("value_as_concept_id", I), ("qualifier_concept_id", I),
                    ("unit_concept_id", I), ("provider_id", I), ("visit_occurrence_id", I), ("visit_detail_id", I),
                    ("observation_source_value", V), ("observation_source_concept_id", I), ("unit_source_value", V),
                    ("qualifier_source_value", V), ("value_source_value", V), ("observation_event_id", I),
                    ("obs_event_field_concept_id", I)],
    "concept": [("concept_id", I), ("concept_name", "varchar(255)"), ("domain_id", "varchar(20)"),
                ("vocabulary_id", "varchar(20)"), ("concept_class_id", "varchar(20)"),
                ("standard_concept", "varchar(1)"),
                ("concept_code", V), ("valid_start_date", D), ("valid_end_date", D), ("invalid_reason", "varchar(1)")],
    "concept_ancestor": [("ancestor_concept_id", I), ("descendant_concept_id", I), ("min_levels_of_separation", I),
                         ("max_levels_of_separation", I)],
    "cohort": [("cohort_definition_id", I), ("subject_id", I), ("cohort_start_date", D), ("cohort_end_date", D)],
}
RESULTS_TABLES = ("cohort",)  # in the results schema; the rest in the CDM schema
_ARROW = {I: pa.int32(), D: pa.date32(), T: pa.timestamp("us"), N: pa.float64(), "text": pa.string()}


def _arrow_type(sql: str) -> pa.DataType:
    return _ARROW.get(sql, pa.string())


def _table(name: str, cols: dict[str, Any]) -> pa.Table:
    """An Arrow table with every CDM column of ``name`` (those not given: all null)."""
    n = len(next(iter(cols.values())))
    out = {}
    for c, typ in DDL[name]:
        t = _arrow_type(typ)
        v = cols.get(c)
        if v is None:
            out[c] = pa.nulls(n, t)
        elif t == pa.date32():
            out[c] = pa.array(np.asarray(v, dtype=np.int64).astype(np.int32), pa.int32()).cast(pa.date32())
        else:
            out[c] = pa.array(v, t) if not isinstance(v, pa.Array) else v.cast(t)
    return pa.table(out)


def _poisson_rows(rng, lam: np.ndarray) -> np.ndarray:
    """Person index of each event: person p repeated Poisson(lam[p]) times."""
    k = rng.poisson(lam)
    return np.repeat(np.arange(lam.size), k)


def _dates_between(rng, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    span = np.maximum(hi - lo, 0)
    return lo + np.floor(rng.random(lo.size) * (span + 1)).astype(np.int64)


def generate_cdm(n: int = 1000, seed: int = 0, *, first_id: int = 1, events_scale: float = 1.0,
                 mixed_units: bool = False) -> dict[str, pa.Table]:
    """A synthetic CDM of ``n`` persons (module docstring): ``{table: Arrow table}``.

    Parameters
    ----------
    first_id : int
        The first ``person_id`` (sites of one study may use overlapping ids: they are local).
    events_scale : float
        Multiplies every person's expected number of events (about 20 at 1).
    mixed_units : bool
        Record some HbA1c rows in another unit (mg/dL): the unit check must refuse it.
    """
    rng = np.random.default_rng(seed)
    pid = np.arange(first_id, first_id + n, dtype=np.int64)
    male = rng.random(n) < 0.48
    yob = rng.integers(1935, 1990, n)
    race = np.array(RACES)[rng.choice(3, n, p=[0.7, 0.2, 0.1])]
    obs_start = (np.datetime64("2008-01-01") - EPOCH).astype(np.int64) + rng.integers(0, 1000, n)
    obs_end = obs_start + rng.integers(6 * 365, 11 * 365, n)
    # cohort entries: 1-3 per person, the first 1-4 years into observation
    n_entries = 1 + rng.binomial(2, 0.35, n)
    ent_p = np.repeat(np.arange(n), n_entries)
    first = obs_start + rng.integers(365, 4 * 365, n)
    order = np.concatenate([np.arange(k) for k in n_entries])
    gaps = np.where(order == 0, 0, rng.integers(60, 700, ent_p.size))
    ent_start = first[ent_p] + np.cumsum(gaps) - np.repeat(np.cumsum(gaps)[np.cumsum(n_entries) - n_entries], n_entries)
    ent_end = ent_start + rng.integers(0, 60, ent_p.size)
    # latent state
    diabetic = rng.random(n) < 0.35
    onset = first + rng.normal(-300, 500, n).astype(np.int64)
    smoker = rng.random(n) < 0.25
    htn = rng.random(n) < 0.35
    age1 = ((first + EPOCH).astype("datetime64[Y]").astype(np.int64) + 1970) - yob
    dm_at_index = diabetic & (onset <= first)
    logit = -1.9 + 0.05 * (age1 - 60) + 2.2 * dm_at_index + 1.5 * smoker + 0.4 * male + 0.6 * htn
    outcome = rng.random(n) < 1 / (1 + np.exp(-logit))
    s = events_scale
    counter = [1]

    def serial(k: int) -> np.ndarray:  # event ids, unique across the tables
        start = counter[0]
        counter[0] += k
        return np.arange(start, start + k, dtype=np.int64)

    # conditions: diabetes (its descendants) from the onset, hypertension, background, the outcome's MI
    parts = []
    p = _poisson_rows(rng, np.where(diabetic, 10.0 * s, 0.0))
    parts.append((p, _dates_between(rng, np.maximum(onset[p], obs_start[p]), obs_end[p]),
                  np.array((T2DM,) + T2DM_DESC)[rng.integers(0, 3, p.size)]))
    p = _poisson_rows(rng, np.where(htn, 2.0 * s, 0.0))
    parts.append((p, _dates_between(rng, obs_start[p], obs_end[p]), np.full(p.size, HTN)))
    p = _poisson_rows(rng, np.full(n, 2.0 * s))
    parts.append((p, _dates_between(rng, obs_start[p], obs_end[p]),
                  np.array(OTHER_CONDITIONS)[rng.integers(0, 3, p.size)]))
    # outcome: within the time at risk of the first entry; distractors before the index and after the time at risk
    o_in = np.flatnonzero(outcome)
    o_before = np.flatnonzero(rng.random(n) < 0.08)
    o_after = np.flatnonzero(rng.random(n) < 0.08)
    out_p = np.concatenate([o_in, o_before, o_after])
    out_d = np.concatenate([first[o_in] + rng.integers(1, 366, o_in.size),
                            first[o_before] - rng.integers(1, 700, o_before.size),
                            first[o_after] + rng.integers(400, 900, o_after.size)])
    parts.append((out_p, out_d, np.array((MI,) + MI_DESC)[rng.integers(0, 2, out_p.size)]))
    cp = np.concatenate([x[0] for x in parts])
    cd = np.concatenate([x[1] for x in parts])
    cc = np.concatenate([x[2] for x in parts])
    # drugs: metformin (a clinical drug) after the onset, statins for hypertension
    dp_ = _poisson_rows(rng, np.where(diabetic, 2.5 * s, 0.0))
    dd = _dates_between(rng, np.maximum(onset[dp_], obs_start[dp_]), obs_end[dp_])
    dc = np.array(METFORMIN_DESC)[rng.integers(0, 2, dp_.size)]
    sp = _poisson_rows(rng, np.where(htn, 1.5 * s, 0.3 * s))
    dp_, dd, dc = (np.concatenate([dp_, sp]), np.concatenate([dd, _dates_between(rng, obs_start[sp], obs_end[sp])]),
                   np.concatenate([dc, np.full(sp.size, STATIN)]))
    # procedures, observations (smoking)
    pp = _poisson_rows(rng, np.full(n, 1.0 * s))
    pd_ = _dates_between(rng, obs_start[pp], obs_end[pp])
    pc = np.array(PROCEDURES)[rng.integers(0, 2, pp.size)]
    op = _poisson_rows(rng, np.where(smoker, 4.0 * s, 0.0))
    op2 = _poisson_rows(rng, np.full(n, 0.5 * s))
    op_all = np.concatenate([op, op2])
    od = _dates_between(rng, obs_start[op_all], obs_end[op_all])
    oc = np.concatenate([np.full(op.size, SMOKER), np.full(op2.size, OTHER_OBS)])
    # measurements: HbA1c (rises after the onset; some rows without a value), LDL
    mp = _poisson_rows(rng, np.full(n, 5.0 * s) * (rng.random(n) < 0.8))
    md = _dates_between(rng, obs_start[mp], obs_end[mp])
    mv = 5.3 + 0.35 * rng.standard_normal(mp.size) + np.where(diabetic[mp] & (md >= onset[mp]), 1.9, 0.0)
    mv = np.round(mv, 1)
    mvals = pa.array(mv, mask=rng.random(mp.size) < 0.05)
    munit = np.full(mp.size, PERCENT)
    if mixed_units:
        munit[rng.random(mp.size) < 0.1] = MG_DL
    lp = _poisson_rows(rng, np.full(n, 1.0 * s))
    ld = _dates_between(rng, obs_start[lp], obs_end[lp])
    lv = np.round(100 + 30 * rng.standard_normal(lp.size), 0)
    # visits: one per condition date, plus outpatient visits
    vp_ = _poisson_rows(rng, np.full(n, 1.0 * s))
    vd = _dates_between(rng, obs_start[vp_], obs_end[vp_])
    vp_all, vd_all = np.concatenate([cp, vp_]), np.concatenate([cd, vd])
    vc = np.where(rng.random(vp_all.size) < 0.15, 9201, 9202)
    ehr = 32817
    tables = {
        "person": _table("person", {"person_id": pid, "gender_concept_id": np.where(male, MALE, FEMALE),
                                    "year_of_birth": yob, "race_concept_id": race,
                                    "ethnicity_concept_id": np.zeros(n, int),
                                    "gender_source_value": np.where(male, "M", "F")}),
        "observation_period": _table("observation_period", {
            "observation_period_id": pid, "person_id": pid, "observation_period_start_date": obs_start,
            "observation_period_end_date": obs_end, "period_type_concept_id": np.full(n, ehr)}),
        "visit_occurrence": _table("visit_occurrence", {
            "visit_occurrence_id": serial(vp_all.size), "person_id": pid[vp_all], "visit_concept_id": vc,
            "visit_start_date": vd_all, "visit_end_date": vd_all, "visit_type_concept_id": np.full(vp_all.size, ehr)}),
        "condition_occurrence": _table("condition_occurrence", {
            "condition_occurrence_id": serial(cp.size), "person_id": pid[cp], "condition_concept_id": cc,
            "condition_start_date": cd, "condition_type_concept_id": np.full(cp.size, ehr)}),
        "drug_exposure": _table("drug_exposure", {
            "drug_exposure_id": serial(dp_.size), "person_id": pid[dp_], "drug_concept_id": dc,
            "drug_exposure_start_date": dd, "drug_exposure_end_date": dd + 30,
            "drug_type_concept_id": np.full(dp_.size, ehr),
            "days_supply": np.full(dp_.size, 30)}),
        "procedure_occurrence": _table("procedure_occurrence", {
            "procedure_occurrence_id": serial(pp.size), "person_id": pid[pp], "procedure_concept_id": pc,
            "procedure_date": pd_, "procedure_type_concept_id": np.full(pp.size, ehr)}),
        "observation": _table("observation", {
            "observation_id": serial(op_all.size), "person_id": pid[op_all], "observation_concept_id": oc,
            "observation_date": od, "observation_type_concept_id": np.full(op_all.size, ehr)}),
        "measurement": _table("measurement", {
            "measurement_id": serial(mp.size + lp.size), "person_id": pid[np.concatenate([mp, lp])],
            "measurement_concept_id": np.concatenate([np.full(mp.size, HBA1C), np.full(lp.size, LDL)]),
            "measurement_date": np.concatenate([md, ld]),
            "measurement_type_concept_id": np.full(mp.size + lp.size, ehr),
            "value_as_number": pa.concat_arrays([mvals, pa.array(lv)]),
            "unit_concept_id": np.concatenate([munit, np.full(lp.size, MG_DL)])}),
        "concept": _table("concept", {
            "concept_id": [c[0] for c in CONCEPTS], "concept_name": [c[1] for c in CONCEPTS],
            "domain_id": [c[2] for c in CONCEPTS], "vocabulary_id": [c[3] for c in CONCEPTS],
            "concept_class_id": [c[4] for c in CONCEPTS], "standard_concept": [c[5] for c in CONCEPTS],
            "concept_code": [str(c[0]) for c in CONCEPTS],
            "valid_start_date": np.full(len(CONCEPTS), 0), "valid_end_date": np.full(len(CONCEPTS), 47846)}),
        "concept_ancestor": _table("concept_ancestor", {
            "ancestor_concept_id": [a for a, _ in ANCESTRY] + [c[0] for c in CONCEPTS],
            "descendant_concept_id": [d for _, d in ANCESTRY] + [c[0] for c in CONCEPTS],
            "min_levels_of_separation": [1] * len(ANCESTRY) + [0] * len(CONCEPTS),
            "max_levels_of_separation": [1] * len(ANCESTRY) + [0] * len(CONCEPTS)}),
        "cohort": _table("cohort", {
            "cohort_definition_id": np.concatenate([np.full(ent_p.size, TARGET), np.full(out_p.size, OUTCOME)]),
            "subject_id": np.concatenate([pid[ent_p], pid[out_p]]),
            "cohort_start_date": np.concatenate([ent_start, out_d]),
            "cohort_end_date": np.concatenate([ent_end, out_d])}),
    }
    return tables


def example_codebook() -> dict[str, Any]:
    """The codebook of the README's example (and the demo's) over a generated CDM."""
    return {
        "format": "marg-codebook", "version": 1, "omop": {"target_cohort": TARGET},
        "features": [
            {"name": "age", "type": "numeric", "edges": [45, 55, 65, 75], "omop": {"age_at": "index"}},
            {"name": "sex", "levels": {str(MALE): "male", str(FEMALE): "female"},
             "omop": {"person": "gender_concept_id"}},
            {"name": "t2dm", "omop": {"domain": "condition", "concepts": [T2DM], "descendants": True,
                                      "window": [-365, 0]}},
            {"name": "hypertension", "omop": {"domain": "condition", "concepts": [HTN], "window": [-730, 0]}},
            {"name": "metformin", "omop": {"domain": "drug", "concepts": [METFORMIN], "descendants": True,
                                           "window": [-180, 0]}},
            {"name": "smoker", "omop": {"domain": "observation", "concepts": [SMOKER], "window": [-1095, 0]}},
            {"name": "surgery", "omop": {"domain": "procedure", "concepts": list(PROCEDURES), "window": [-365, 0]}},
            {"name": "hba1c", "type": "numeric", "edges": [5.7, 6.5, 8.0], "missing": True,
             "omop": {"domain": "measurement", "concepts": [HBA1C], "window": [-365, 0], "value": "last"}},
        ],
        "label": {"name": "outcome", "classes": ["no", "yes"],
                  "omop": {"outcome_cohort": OUTCOME, "time_at_risk": [1, 365]}},
    }


def write_duckdb(tables: dict[str, pa.Table], path: str | Path, cdm: str = "main", results: str | None = None) -> Path:
    """Create the CDM tables (CDM 5.4 types) in a DuckDB file and fill them; returns the path."""
    import duckdb

    results = results or cdm
    path = Path(path)
    con = duckdb.connect(str(path))
    try:
        for schema in {cdm, results}:
            con.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        for name, t in tables.items():
            schema = results if name in RESULTS_TABLES else cdm
            cols = ", ".join(f'"{c}" {typ}' for c, typ in DDL[name])
            con.execute(f'CREATE TABLE "{schema}"."{name}" ({cols})')
            con.register("_incoming", t)
            con.execute(f'INSERT INTO "{schema}"."{name}" SELECT * FROM _incoming')
            con.unregister("_incoming")
    finally:
        con.close()
    return path
