"""A study straight from an OMOP CDM database (issue 46): the codebook's CDM definitions, the rows marg computes in
DuckDB and PostgreSQL against a pandas reference on the generator's own rows, look-ahead planted and ignored, exports
equal to the reference's counts with the person as the unit, and bad input refused in one line with nothing spent."""

from __future__ import annotations

import copy
import re
import shutil

import numpy as np
import pandas as pd
import pytest

from marg.errors import InputError
from marg.marginals.data.codebook import Codebook
from marg.marginals.synthetic_omop import HBA1C, MI, T2DM, example_codebook, generate_cdm
from tests.helpers.console import marg, run
from tests.helpers.omop import duckdb_site, marg_rows, plant_lookahead, reference_rows, write_postgres

pytest.importorskip("duckdb")


def codebook(**change) -> Codebook:
    """The example codebook, plus a measurement's maximum and (``label_concepts``) a label by concept set."""
    d = copy.deepcopy(example_codebook())
    d["features"].append({"name": "hba1c_max", "type": "numeric", "edges": [6.0, 7.0], "missing": True,
                          "omop": {"domain": "measurement", "concepts": [HBA1C], "window": [-730, -30],
                                   "value": "max"}})
    d["features"].append({"name": "hba1c_first", "type": "numeric", "edges": [6.0], "missing": True,
                          "omop": {"domain": "measurement", "concepts": [HBA1C], "window": [-730, 0], "value": "first",
                                   "unit": 8554}})
    d["features"].append({"name": "race", "levels": {"8527": "white", "8516": "black", "8515": "asian"},
                          "omop": {"person": "race_concept_id"}})
    if change.pop("label_concepts", False):
        d["label"]["omop"] = {"domain": "condition", "concepts": [MI], "descendants": True, "time_at_risk": [0, 365]}
    for k, v in change.items():
        d[k] = v
    return Codebook.from_dict(d)


# ------------------------------------------------------------------------------------------- the codebook
def _with(path: str, value):
    d = copy.deepcopy(example_codebook())
    where, key = path.split(":")
    obj = d["label"] if where == "label" else (d if where == "codebook" else d["features"][int(where)])
    obj["omop"][key] = value
    return d


@pytest.mark.parametrize("path,value,pattern", [
    ("2:window", [0, -365], r"feature 't2dm' \(table condition_occurrence\): window \[0, -365\] starts after it ends"),
    ("2:window", [-365, 30], r"feature 't2dm' \(table condition_occurrence\): window \[-365, 30\] ends 30 days after "
                             r"the index"),
    ("2:windw", [-1, 0], r"feature 't2dm': unknown omop key 'windw'"),
    ("2:domain", "device", r"feature 't2dm': 'domain' must be one of"),
    ("2:concepts", ["201826"], r"feature 't2dm': a concept must be a whole number"),
    ("7:value", "mean", r"feature 'hba1c': a measurement feature needs 'value'"),
    ("label:time_at_risk", [-30, 365], r"label 'outcome': time_at_risk \[-30, 365\] starts before the index date"),
    ("label:time_at_risk", [365, 1], r"label 'outcome': time_at_risk \[365, 1\] starts after it ends"),
    ("codebook:target", 3, r"codebook population: unknown omop key 'target'"),
    ("1:person", "year_of_birth", r"feature 'sex': 'person' must name one of"),
])
def test_bad_definitions_are_one_line_errors(path, value, pattern):
    with pytest.raises(InputError, match=pattern) as exc:
        Codebook.from_dict(_with(path, value))
    assert "\n" not in str(exc.value)


def test_the_fingerprint_covers_the_definitions():
    base = Codebook.from_dict(example_codebook())
    assert Codebook.from_dict(base.to_dict()).fingerprint == base.fingerprint  # round trip
    for path, value in (("2:window", [-364, 0]), ("2:descendants", False), ("2:concepts", [T2DM, 4193704]),
                        ("7:value", "first"), ("label:time_at_risk", [1, 366]), ("label:outcome_cohort", 13),
                        ("codebook:target_cohort", 12)):
        assert Codebook.from_dict(_with(path, value)).fingerprint != base.fingerprint, path
    d = copy.deepcopy(example_codebook())
    d["features"][1]["levels"] = {"8507": "female", "8532": "male"}  # the same level names, another map
    assert Codebook.from_dict(d).fingerprint != base.fingerprint
    d = copy.deepcopy(example_codebook())
    d["features"].append({"name": "bmi", "type": "numeric", "edges": [25]})  # a column, not a CDM definition
    with pytest.raises(InputError, match="feature 'bmi': an OMOP codebook defines every feature by the CDM"):
        Codebook.from_dict(d)


# ----------------------------------------------------------------------------------------- DuckDB sites
@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("omop")
    tables = generate_cdm(700, seed=5)
    uri = duckdb_site(tables, tmp / "site.duckdb")
    planted = plant_lookahead(tables, codebook(), seed=1)
    planted_uri = duckdb_site(planted, tmp / "planted.duckdb", cdm="cdm54", results="res")
    return {"tmp": tmp, "tables": tables, "uri": uri, "planted": planted, "planted_uri": planted_uri}


def _rows(uri, cb, k=1, with_label=True):
    from marg.marginals.sources import open_source

    with open_source(uri) as src:
        return marg_rows(src, cb, k, with_label)


def _assert_same(got: pd.DataFrame, want: pd.DataFrame) -> None:
    assert list(got.columns) == list(want.columns) and len(got) == len(want)
    for c in want.columns:
        g, w = got[c].to_numpy(), want[c].to_numpy()
        if want[c].dtype.kind == "f":
            assert np.array_equal(np.isnan(g.astype(float)), np.isnan(w.astype(float))), c
            assert np.allclose(g[~np.isnan(w)].astype(float), w[~np.isnan(w)], rtol=0, atol=1e-9), c
        else:
            assert [None if pd.isna(x) else x for x in g] == [None if pd.isna(x) else x for x in w], c


@pytest.mark.parametrize("k", [1, 2, None])
@pytest.mark.parametrize("label_concepts", [False, True])
def test_duckdb_rows_equal_the_pandas_reference(site, k, label_concepts):
    cb = codebook(label_concepts=label_concepts)
    want = reference_rows(site["tables"], cb, k)
    got = _rows(site["uri"], cb, k)
    _assert_same(got, want)
    # the data are what the tests claim: several entries a person, missing measurements, both classes
    assert (want.cohort_entry > 1).any() if k != 1 else want.person_id.is_unique
    assert want["hba1c"].isna().any() and want["hba1c"].notna().any()
    assert set(want["t2dm"]) == {"no", "yes"} and set(want["outcome"]) == {"no", "yes"}


def test_planted_lookahead_changes_no_row(site):
    """Events 1..30 days after each index (every feature's concepts; HbA1c 99) and outcomes 1..30 days before it
    are in the planted database: marg's rows are the clean database's rows; a window that reached past the index
    would have seen them (the reference computed so differs)."""
    cb = codebook()
    clean = _rows(site["uri"], cb, 2)
    planted = _rows(site["planted_uri"], cb, 2)
    _assert_same(planted, clean)
    _assert_same(planted, reference_rows(site["tables"], cb, 2))
    leaky = reference_rows(site["planted"], _leaky(cb, 30), 2)
    assert (leaky["t2dm"] != clean["t2dm"]).any() and (leaky["hba1c"] != clean["hba1c"]).any()
    assert (leaky["outcome"] != clean["outcome"]).any()


def _leaky(cb: Codebook, days: int):
    """``cb`` with every window reaching ``days`` past the index and the time at risk starting ``days`` before it
    (built around the codebook's checks, which refuse it): what a leaking query would compute."""
    import dataclasses

    feats = []
    for f in cb.features:
        o = copy.deepcopy(f.omop)
        if "window" in o:
            o["window"] = [o["window"][0], days]
        feats.append(dataclasses.replace(f, omop=o))
    lab = copy.deepcopy(cb.label.omop)
    lab["time_at_risk"] = [-days, lab["time_at_risk"][1]]
    obj = copy.copy(cb)
    object.__setattr__(obj, "features", tuple(feats))
    object.__setattr__(obj, "label", dataclasses.replace(cb.label, omop=lab))
    return obj


def _export(tmp, data, schema, out, *extra, script=False):
    ledger = [] if "--no-ledger" in extra else ["--ledger", tmp / "ledger"]
    args = ["export", data, "--schema", schema, "--site", "north", "--out", out, "--stats", "all", "--min-cell", "1",
            *ledger, *extra]
    return marg(*args, cwd=tmp) if script else run(*args)


def _bundle_tables(path):
    from marg.protocols.bundle import load_bundle

    b = load_bundle(path)
    return b, {t.clique: t.counts for t in b.tables}


def _reference_tables(tmp, ref: pd.DataFrame, cb: Codebook, cliques):
    """The reference rows counted by marg's file path (a CSV of the pandas rows)."""
    from marg.marginals.sources import open_source

    csv = tmp / "reference.csv"
    ref.to_csv(csv, index=False)
    with open_source(csv) as src:
        tables, n = src.count(cb, cliques)
    return {t.clique: t.counts for t in tables}, n


def test_exact_export_equals_the_reference_and_names_the_person(site, tmp_path):
    cb = codebook()
    schema = tmp_path / "codebook.json"
    cb.save(schema)
    out = tmp_path / "site.bundle"
    r = _export(tmp_path, site["uri"], schema, out, script=True)
    assert r.returncode == 0, r.stderr
    b, got = _bundle_tables(out)
    want, n = _reference_tables(tmp_path, reference_rows(site["tables"], cb, 1), cb, list(got))
    assert got.keys() == want.keys() and all(np.array_equal(got[k], want[k]) for k in want)
    assert b.header["n_rows"] == n == 700
    assert b.header["privacy"]["unit"] == {"column": "person_id", "max_rows_per_unit": 1}
    assert b.header["source"] == {"kind": "omop", "engine": "duckdb", "database": "site.duckdb", "cdm": "main",
                                  "results": "main"}
    # two entries a person: the bound is K = 2 and the tables count each person's first two entries
    out2 = tmp_path / "k2.bundle"
    r = _export(tmp_path, site["uri"], schema, out2, "--max-rows-per-unit", "2", "--no-ledger", script=True)
    assert r.returncode == 0, r.stderr
    b2, got2 = _bundle_tables(out2)
    want2, n2 = _reference_tables(tmp_path, reference_rows(site["tables"], cb, 2), cb, list(got2))
    assert all(np.array_equal(got2[k], want2[k]) for k in want2) and b2.header["n_rows"] == n2 > n
    assert b2.header["privacy"]["unit"] == {"column": "person_id", "max_rows_per_unit": 2}


def test_schema_check_and_predict_on_the_cdm(site, tmp_path):
    cb = codebook()
    schema = tmp_path / "codebook.json"
    cb.save(schema)
    r = marg("schema", "check", site["planted_uri"], "--schema", schema, cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("fits:"), r.stdout + r.stderr
    out = tmp_path / "site.bundle"
    assert _export(tmp_path, site["uri"], schema, out, "--no-ledger").exit_code == 0
    model = tmp_path / "model.json"
    r = marg("learn", out, "--out", model, "--learner", "mrc", "--no-sign", "--allow-unsigned", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    pred = tmp_path / "pred.csv"
    r = marg("predict", model, site["uri"], "--out", pred, "--allow-unsigned", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    p = pd.read_csv(pred)
    assert list(p.columns) == ["person_id", "cohort_start_date", "p_no", "p_yes", "label"]
    ref = reference_rows(site["tables"], cb, None, with_label=False)  # every entry of the cohort
    assert len(p) == len(ref) > 700
    assert sorted(zip(p.person_id, p.cohort_start_date)) == sorted(
        zip(ref.person_id, ref.cohort_start_date.dt.strftime("%Y-%m-%d")))
    r = marg("evaluate", model, site["uri"], "--allow-unsigned", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    import json

    assert json.loads(r.stdout)["n"] == 700


# ---------------------------------------------------------------------------------------------- bad input
def _broken_site(site, tmp, sql: str | None = None, **generate):
    path = tmp / "broken.duckdb"
    if generate:
        return duckdb_site(generate_cdm(300, seed=2, **generate), path)
    shutil.copy(site["tmp"] / "site.duckdb", path)
    import duckdb

    con = duckdb.connect(str(path))
    con.execute(sql)
    con.close()
    return f"omop+duckdb://{path}?cdm=main"


@pytest.mark.parametrize("case,pattern", [
    ("concept", r"feature 't2dm': concept 999999 is absent from table main\.concept in omop cdm 'main' in "
                r"broken\.duckdb"),
    ("cohort", r"codebook population: cohort 77 has no entries in table main\.cohort"),
    ("outcome", r"label 'outcome': cohort 78 has no entries in table main\.cohort"),
    ("table", r"feature 'smoker': table main\.observation is absent from omop cdm 'main' in broken\.duckdb"),
    ("column", r"feature 'hba1c': column 'value_as_number' is absent from table main\.measurement"),
    ("units", r"feature 'hba1c': table main\.measurement holds its concepts' values in 2 units \(unit_concept_id "
              r"8554: [\d,]+ rows, 8840: [\d,]+ rows\)"),
    ("window", r"feature 't2dm' \(table condition_occurrence\): window \[0, -365\] starts after it ends"),
])
def test_bad_input_is_one_line_naming_the_feature_and_the_table_and_spends_nothing(site, tmp_path, case, pattern):
    d = copy.deepcopy(example_codebook())
    uri = site["uri"]
    if case == "concept":
        d["features"][2]["omop"]["concepts"] = [999999]
        uri = _broken_site(site, tmp_path, "SELECT 1")
    elif case == "cohort":
        d["omop"]["target_cohort"] = 77
        uri = _broken_site(site, tmp_path, "SELECT 1")
    elif case == "outcome":
        d["label"]["omop"]["outcome_cohort"] = 78
        uri = _broken_site(site, tmp_path, "SELECT 1")
    elif case == "table":
        uri = _broken_site(site, tmp_path, "DROP TABLE observation")
    elif case == "column":
        uri = _broken_site(site, tmp_path, "ALTER TABLE measurement DROP COLUMN value_as_number")
    elif case == "units":
        uri = _broken_site(site, tmp_path, mixed_units=True)
    elif case == "window":
        d["features"][2]["omop"]["window"] = [0, -365]
    schema = tmp_path / "codebook.json"
    import json

    schema.write_text(json.dumps(d))
    out = tmp_path / "site.bundle"
    r = _export(tmp_path, uri, schema, out, "--epsilon", "1", script=True)
    assert r.returncode == 2, r.stdout + r.stderr
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("marg: error:"), r.stderr
    assert re.search(pattern, err[0]), err[0]
    if case == "units":
        assert not re.search(r"\d\.\d", err[0])  # counts of each unit, no measured value
    assert not out.exists() and not list((tmp_path / "ledger").rglob("ledger.jsonl"))
    if case != "window":  # the same line from the schema check, before anyone spends
        r = marg("schema", "check", uri, "--schema", schema, cwd=tmp_path)
        assert r.returncode == 2 and re.search(pattern, r.stderr), r.stderr


# -------------------------------------------------------------------------------------------- PostgreSQL
@pytest.fixture(scope="module")
def pg():
    from tests.helpers.services import local_postgres

    yield from local_postgres()


def test_postgres_sites_with_other_schema_names_equal_the_reference(pg, site, tmp_path):
    import uuid

    import psycopg

    db = "omop_" + uuid.uuid4().hex[:10]
    with psycopg.connect(pg.uri(), autocommit=True) as con:
        con.execute(f'CREATE DATABASE "{db}"')
    try:
        other = generate_cdm(400, seed=9, first_id=5000)
        write_postgres(site["tables"], pg.uri(db), "cdm_north", "results_north")
        write_postgres(other, pg.uri(db), "South CDM", "south results")
        cb = codebook()
        schema = tmp_path / "codebook.json"
        cb.save(schema)
        for tables, cdm, res in ((site["tables"], "cdm_north", "results_north"), (other, "South CDM", "south results")):
            from urllib.parse import quote

            uri = pg.uri(db).replace("postgresql://", "omop+postgresql://") + f"?cdm={quote(cdm)}&results={quote(res)}"
            for k in (1, 2):
                _assert_same(_rows(uri, cb, k), reference_rows(tables, cb, k))
            r = marg("schema", "check", uri, "--schema", schema, cwd=tmp_path)
            assert r.returncode == 0 and r.stdout.startswith("fits:"), r.stdout + r.stderr
            out = tmp_path / f"{cdm}.bundle"
            r = _export(tmp_path, uri, schema, out, "--no-ledger", script=True)
            assert r.returncode == 0, r.stderr
            b, got = _bundle_tables(out)
            want, _ = _reference_tables(tmp_path, reference_rows(tables, cb, 1), cb, list(got))
            assert all(np.array_equal(got[k], want[k]) for k in want)
            assert b.header["source"]["kind"] == "omop" and b.header["source"]["cdm"] == cdm
            assert pg.password not in out.read_bytes().decode("latin-1")
        with psycopg.connect(pg.uri(db), autocommit=True) as con:
            con.execute('ALTER TABLE cdm_north.drug_exposure DROP COLUMN drug_concept_id')
        uri = pg.uri(db).replace("postgresql://", "omop+postgresql://") + "?cdm=cdm_north&results=results_north"
        with pytest.raises(InputError, match=r"feature 'metformin': column 'drug_concept_id' is absent from table "
                                             r"cdm_north\.drug_exposure"):
            _rows(uri, cb)
    finally:
        with psycopg.connect(pg.uri(), autocommit=True) as con:
            con.execute(f'DROP DATABASE "{db}" WITH (FORCE)')


def test_schema_init_from_omop_drafts_edges_and_levels_from_the_site(site, tmp_path):
    """The drafted edges are the quantiles of the reference's values and the levels the concepts seen; loudly a
    draft."""
    import json

    spec = {"omop": {"target_cohort": 11}, "features": [
        {"name": "age", "omop": {"age_at": "index"}},
        {"name": "race", "omop": {"person": "race_concept_id"}},
        {"name": "t2dm", "omop": {"domain": "condition", "concepts": [T2DM], "descendants": True, "window": [-365, 0]}},
        {"name": "hba1c", "omop": {"domain": "measurement", "concepts": [HBA1C], "window": [-365, 0],
                                   "value": "last"}}],
        "label": {"name": "outcome", "omop": {"outcome_cohort": 12, "time_at_risk": [1, 365]}}}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    out = tmp_path / "drafted.json"
    r = marg("schema", "init", site["uri"], "--from-omop", tmp_path / "spec.json", "--out", out, "--bins", "3",
             cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "DRAFT" in r.stderr
    cb = Codebook.load(out)
    assert cb.draft and cb.label.classes == ("no", "yes") and cb.unit_declaration["column"] == "person_id"
    ref = reference_rows(site["tables"], codebook(), 1)
    age = ref["age"].to_numpy(float)
    assert cb.feature("age").edges == tuple(sorted({float(np.round(q, 3)) for q in np.quantile(age, [1 / 3, 2 / 3])}))
    assert cb.feature("race").levels == ("8515", "8516", "8527")  # the concept ids seen, no missing value
    h = cb.feature("hba1c")
    assert h.missing and len(h.edges) >= 1 and ref["hba1c"].min() <= h.edges[0] <= h.edges[-1] <= ref["hba1c"].max()
    assert cb.feature("t2dm").levels == ("no", "yes")
    r = marg("schema", "check", site["uri"], "--schema", out, cwd=tmp_path)  # the draft fits the data it came from
    assert r.returncode == 0, r.stdout + r.stderr


def test_marg_demo_omop_writes_three_cdms_and_the_codebook(tmp_path):
    import json

    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "mine.txt").write_text("not a demo")
    r = marg("demo", "--omop", tmp_path / "taken", cwd=tmp_path)
    assert r.returncode == 2 and "is not a marg demo folder" in r.stderr and (tmp_path / "taken" / "mine.txt").exists()
    r = marg("demo", "--omop", tmp_path / "cdm", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    d = tmp_path / "cdm"
    assert {p.name for p in d.iterdir()} >= {"codebook.json", "spec.json", "north.duckdb", "south.duckdb",
                                             "east.duckdb"}
    assert Codebook.load(d / "codebook.json").fingerprint == Codebook.from_dict(example_codebook()).fingerprint
    spec = json.loads((d / "spec.json").read_text())
    assert "edges" not in spec["features"][0] and "levels" not in spec["features"][1]  # left for --from-omop
    r = marg("schema", "check", f"omop+duckdb://{d}/east.duckdb?cdm=main", "--schema", d / "codebook.json",
             cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("fits:"), r.stdout + r.stderr
