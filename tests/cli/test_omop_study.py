"""Issue 46's acceptance: a study of three OMOP CDM sites (two PostgreSQL schemas with different names, one DuckDB
file) through the installed console script. The schema check passes at every site; exact exports hold the pandas
reference's counts; the DP two-round study (round 1 at ε = 1, the learner's request, round 2, learn) ends in a
certified model whose error on a fourth generated site is within 0.02 of the same learner fitted on the exact
summaries; every bundle names the unit person_id."""

from __future__ import annotations

import json
import uuid

import numpy as np
import pytest

from marg.marginals.data.codebook import Codebook
from marg.marginals.synthetic_omop import example_codebook, generate_cdm
from tests.helpers.console import marg
from tests.helpers.omop import duckdb_site, reference_rows, write_postgres

pytest.importorskip("duckdb")
pytest.importorskip("psycopg")

N = 4000  # persons a site


@pytest.fixture(scope="module")
def pg():
    from tests.helpers.services import local_postgres

    yield from local_postgres()


@pytest.fixture(scope="module")
def sites(pg, tmp_path_factory):
    import psycopg

    tmp = tmp_path_factory.mktemp("omop-study")
    db = "study_" + uuid.uuid4().hex[:8]
    with psycopg.connect(pg.uri(), autocommit=True) as con:
        con.execute(f'CREATE DATABASE "{db}"')
    tables = {name: generate_cdm(N, seed=460 + k) for k, name in enumerate(("north", "south", "east", "test"))}
    base = pg.uri(db).replace("postgresql://", "omop+postgresql://")
    write_postgres(tables["north"], pg.uri(db), "cdm_north", "results_north")
    write_postgres(tables["south"], pg.uri(db), "omop54", "atlas_results")
    uris = {"north": f"{base}?cdm=cdm_north&results=results_north", "south": f"{base}?cdm=omop54&results=atlas_results",
            "east": duckdb_site(tables["east"], tmp / "east.duckdb"),
            "test": duckdb_site(tables["test"], tmp / "test.duckdb")}
    schema = tmp / "codebook.json"
    Codebook.from_dict(example_codebook()).save(schema)
    yield {"tmp": tmp, "tables": tables, "uris": uris, "schema": schema}
    with psycopg.connect(pg.uri(), autocommit=True) as con:
        con.execute(f'DROP DATABASE "{db}" WITH (FORCE)')


def _ok(r):
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def test_three_cdm_sites_exact_and_dp_two_rounds(sites):
    from marg.marginals.sources import open_source
    from marg.protocols.bundle import load_bundle

    tmp, uris, schema = sites["tmp"], sites["uris"], sites["schema"]
    cb = Codebook.load(schema)
    names = ("north", "south", "east")
    for s in names:
        r = _ok(marg("schema", "check", uris[s], "--schema", schema, cwd=tmp))
        assert r.stdout.startswith("fits:")
    exact = []
    for s in names:  # exact exports: the reference's tables
        out = tmp / f"{s}.exact"
        _ok(marg("export", uris[s], "--schema", schema, "--site", s, "--out", out, "--stats", "all", "--min-cell", "1",
                 "--no-ledger", cwd=tmp))
        b = load_bundle(out)
        ref = reference_rows(sites["tables"][s], cb, 1)
        csv = tmp / f"{s}.reference.csv"
        ref.to_csv(csv, index=False)
        with open_source(csv) as src:
            want, n = src.count(cb, [t.clique for t in b.tables])
        assert b.header["n_rows"] == n == N
        assert all(np.array_equal(t.counts, w.counts) for t, w in zip(b.tables, want))
        assert b.header["privacy"]["unit"] == {"column": "person_id", "max_rows_per_unit": 1}
        exact.append(out)
    # the DP study: round 1, the learner's signed request, round 2, learn
    _ok(marg("keys", "init", "--site", "learner", "--dir", tmp / "keys", "--role", "learner", cwd=tmp))
    (tmp / "learner-keys").mkdir()
    (tmp / "learner-keys" / "learner.sign.pub").write_bytes((tmp / "keys" / "learner.sign.pub").read_bytes())
    r1, r2 = [], []
    for s in names:
        out = tmp / f"{s}.r1"
        r = _ok(marg("export", uris[s], "--schema", schema, "--site", s, "--out", out, "--epsilon", "1",
                     "--plan-rows", str(N), "--plan-sites", "3", "--ledger", tmp / f"{s}-ledger", cwd=tmp))
        assert "round 1 of select-then-measure" in r.stdout
        r1.append(out)
    req = tmp / "request.json"
    _ok(marg("request", *r1, "--out", req, "--sign-key", tmp / "keys" / "learner.sign.key", "--allow-unsigned",
             cwd=tmp))
    for s in names:
        out = tmp / f"{s}.r2"
        _ok(marg("export", uris[s], "--schema", schema, "--site", s, "--out", out, "--request", req, "--trust",
                 tmp / "learner-keys", "--ledger", tmp / f"{s}-ledger", cwd=tmp))
        r2.append(out)
    for b in r1 + r2:
        assert load_bundle(b).header["privacy"]["unit"] == {"column": "person_id", "max_rows_per_unit": 1}
    dp_model = tmp / "dp.model.json"
    _ok(marg("learn", *r1, *r2, "--out", dp_model, "--no-sign", "--allow-unsigned", cwd=tmp))
    learner = json.loads(dp_model.read_text())["learner"]
    exact_model = tmp / "exact.model.json"
    _ok(marg("learn", *exact, "--learner", learner, "--out", exact_model, "--no-sign", "--allow-unsigned", cwd=tmp))
    errs = {}
    for name, model in (("dp", dp_model), ("exact", exact_model)):
        r = _ok(marg("evaluate", model, uris["test"], "--allow-unsigned", "--json", cwd=tmp))
        rep = json.loads(r.stdout)
        assert rep["n"] == N and rep["worst_case_error"] is not None and rep["worst_case_error"] < 1
        errs[name] = rep["error"]
    prior = 1 - max(np.mean(reference_rows(sites["tables"]["test"], cb, 1)["outcome"] == c) for c in ("no", "yes"))
    assert abs(errs["dp"] - errs["exact"]) <= 0.02, (learner, errs)
    print(json.dumps({"learner": learner, "errors": errs, "prior_error": prior}))
