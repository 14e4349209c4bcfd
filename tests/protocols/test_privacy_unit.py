"""The patient as the privacy unit: each patient's rows bounded to K, every table's sensitivity K.

Reproduced first (issue 35): one id repeated in 51 rows was exported "at ε = 1" without a word —
that patient's guarantee was about 51·ε. Now the export is refused in one line naming the fix;
with ``--privacy-unit patient_id --max-rows-per-unit K`` each patient moves every table by at
most K (checked by adding the patient and differencing the exact tables), the kept rows do not
depend on the row order, the noise is K times a row's and its cost is OpenDP's map at d_in = K,
and the bundle, ledger and dry run state the unit and the bound.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from marg.errors import InputError
from marg.marginals.data.codebook import Codebook
from marg.marginals.privacy import plan_cost, privatize, table_measurement
from marg.marginals.privacy_unit import PrivacyUnit, count_rows, resolve_unit
from marg.marginals.sources import open_source
from marg.marginals.synthetic import demo_codebook, generate, visits, write_csv
from marg.marginals.counts.tables import plan_cliques
from marg.protocols.bundle import load_bundle
from tests.helpers.console import marg

CB = demo_codebook()


def _rows(n: int = 120, seed: int = 1, many: int = 0) -> dict[str, list[str]]:
    """``n`` patients at several visits each; with ``many``, patient 0 gets ``many`` more rows."""
    cols = visits(generate(n, "north", seed=seed), seed=seed + 1)
    for c in cols:
        cols[c] = cols[c] + [cols[c][0]] * many
    return cols


def _counts(path, unit, cliques):
    with open_source(path) as src:
        tables, n, _, bound = count_rows(src, CB, cliques, unit)
    return [t.counts for t in tables], n, bound


def test_the_one_patient_with_51_rows_attack_is_refused_through_the_console_script(tmp_path):
    write_csv(tmp_path / "v.csv", _rows(many=50))
    CB.save(tmp_path / "cb.json")
    args = ("export", "v.csv", "--schema", "cb.json", "--site", "north", "--out", "x.bundle", "--epsilon", "1")
    r = marg(*args, "--ledger", "led", cwd=tmp_path)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "'patient_id' repeats" in r.stderr and "--privacy-unit patient_id --max-rows-per-unit K" in r.stderr
    assert not (tmp_path / "x.bundle").exists() and not (tmp_path / "led" / "ledger.jsonl").exists()
    # declared: the bundle, the ledger and the dry run state the unit and its bound
    r = marg(*args, "--ledger", "led", "--privacy-unit", "patient_id", "--max-rows-per-unit", "3", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "privacy unit: patient_id, at most 3 rows each" in r.stdout
    assert "rows beyond the bound are not counted" in r.stderr  # the site is told what the bound left out
    header = load_bundle(tmp_path / "x.bundle").header
    assert header["privacy"]["unit"] == {"column": "patient_id", "max_rows_per_unit": 3}
    entry = json.loads((tmp_path / "led" / "ledger.jsonl").read_text().splitlines()[-1])
    assert entry["source"]["privacy_unit"] == {"column": "patient_id", "max_rows_per_unit": 3}
    r = marg(*args[:7], "y.bundle", "--epsilon", "1", "--no-ledger", "--privacy-unit", "patient_id",
             "--max-rows-per-unit", "3", "--dry-run", "--json", cwd=tmp_path)
    assert r.returncode == 0 and json.loads(r.stdout)["privacy"]["unit"]["max_rows_per_unit"] == 3


def test_one_patient_moves_every_table_by_at_most_k_rows(tmp_path):
    """The neighbouring datasets (with and without the 51-row patient) give exact tables whose L1
    distance is at most K: the sensitivity the noise is calibrated to. Without the bound: 51."""
    cliques = plan_cliques(CB, "all")
    base, many = _rows(), _rows(many=50)
    pid = base["patient_id"][0]
    without = {c: [v for v, p in zip(base[c], base["patient_id"]) if p != pid] for c in base}
    write_csv(tmp_path / "with.csv", many)
    write_csv(tmp_path / "without.csv", without)
    for K in (1, 3):
        unit = PrivacyUnit("patient_id", K)
        a, n_a, bound = _counts(tmp_path / "with.csv", unit, cliques)
        b, n_b, _ = _counts(tmp_path / "without.csv", unit, cliques)
        assert n_a - n_b == K and bound.largest == many["patient_id"].count(pid)
        assert max(int(np.abs(x.astype(np.int64) - y.astype(np.int64)).sum()) for x, y in zip(a, b)) <= K
    # every unit keeps min(rows, K) rows
    per = {p: many["patient_id"].count(p) for p in set(many["patient_id"])}
    assert _counts(tmp_path / "with.csv", PrivacyUnit("patient_id", 2),
                   cliques)[1] == sum(min(v, 2) for v in per.values())


def test_kept_rows_do_not_depend_on_the_row_order_the_file_format_or_the_engine(tmp_path):
    cols = _rows(many=20)
    write_csv(tmp_path / "a.csv", cols)
    perm = np.random.default_rng(3).permutation(len(cols["patient_id"]))
    write_csv(tmp_path / "b.csv", {c: [v[i] for i in perm] for c, v in cols.items()})
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({c: [v[i] for i in perm] for c, v in cols.items()}), tmp_path / "c.parquet")
    cliques = plan_cliques(CB, "all")
    unit = PrivacyUnit("patient_id", 2)
    ref, n, _ = _counts(tmp_path / "a.csv", unit, cliques)
    others = [tmp_path / "b.csv", tmp_path / "c.parquet"]
    try:
        import duckdb  # noqa: F401  (DuckDB reads the rows itself: the same kept rows)

        others.append(f"duckdb://{tmp_path}/c.parquet")
    except ImportError:
        pass
    for other in others:
        got, m, _ = _counts(other, unit, cliques)
        assert m == n and all(np.array_equal(x, y) for x, y in zip(ref, got))


@pytest.mark.parametrize("mechanism,budget", [("gaussian", {"rho": 0.5}), ("laplace", {"epsilon": 1.0})])
def test_noise_scales_with_the_bound_and_the_cost_is_opendps_map_at_k(mechanism, budget):
    """Every table's scale is K times a row's at the same budget, and OpenDP's map of the
    measurement actually built, at d_in = K, is the recorded share (and exceeds it at K + 1)."""
    from marg.marginals.counts.counting import TableCounter
    from marg.marginals.data.encoding import Encoded

    cliques = plan_cliques(CB, "first")
    counter = TableCounter(CB, cliques)
    rng = np.random.default_rng(0)
    counter.add_encoded(Encoded([rng.integers(0, f.n_levels, 50).astype(np.uint8) for f in CB.features],
                                rng.integers(0, 2, 50), 1))
    exact = counter.tables()
    one, cost1 = privatize(exact, codebook=CB, mechanism=mechanism, max_rows=1, **budget)
    for K in (3, 51):
        noisy, cost = privatize(exact, codebook=CB, mechanism=mechanism, max_rows=K, **budget)
        assert cost == plan_cost(cliques, CB, mechanism=mechanism, max_rows=K, **budget)
        assert (cost.epsilon, cost.rho) == pytest.approx((cost1.epsilon, cost1.rho), rel=1e-12)  # the same budget
        for t, t1 in zip(noisy, one):
            assert t.noise.scale == pytest.approx(K * t1.noise.scale, rel=1e-9)
            meas = table_measurement(mechanism, t.noise.scale, True)
            share = t.noise.epsilon if mechanism == "laplace" else t.noise.rho
            assert float(meas.map(K)) == pytest.approx(share, rel=1e-12) and float(meas.map(K)) <= share
            assert float(meas.map(K + 1)) > share


def test_units_from_the_codebook_and_the_holdout_agree(tmp_path):
    d = CB.to_dict()
    d["privacy_unit"] = {"column": "patient_id", "max_rows_per_unit": 2}
    cb = Codebook.from_dict(d)
    assert resolve_unit(cb) == PrivacyUnit("patient_id", 2)
    assert resolve_unit(cb, max_rows=4) == PrivacyUnit("patient_id", 4)
    with pytest.raises(InputError, match="differs from the codebook's privacy unit"):
        resolve_unit(cb, "visit_id", 2)
    with pytest.raises(InputError, match="needs --privacy-unit"):
        resolve_unit(CB, None, 3)
    assert resolve_unit(CB, "row") == PrivacyUnit(None, 1)
    write_csv(tmp_path / "v.csv", _rows(many=10))
    cb.save(tmp_path / "cb.json")
    base = ("export", "v.csv", "--schema", "cb.json", "--site", "north", "--epsilon", "1", "--ledger", "led")
    r = marg(*base, "--out", "h.bundle", "--holdout", "0.3", "--holdout-id", "age_band", cwd=tmp_path)
    assert r.returncode == 2 and "differs from the privacy unit 'patient_id'" in r.stderr
    r = marg(*base, "--out", "h.bundle", "--holdout", "0.3", cwd=tmp_path)  # the unit from the codebook
    assert r.returncode == 0, r.stderr
    header = load_bundle(tmp_path / "h.bundle").header
    assert header["holdout"]["by"] == "id column patient_id"  # one patient on one side
    assert header["privacy"]["unit"] == {"column": "patient_id", "max_rows_per_unit": 2}


def test_schema_init_names_a_repeating_id_column_the_privacy_unit(tmp_path):
    from marg.marginals.draft import draft_codebook

    write_csv(tmp_path / "v.csv", _rows())
    cb = draft_codebook(tmp_path / "v.csv", "cv_event")
    assert cb.privacy_unit == ("patient_id", None) and "patient_id" not in cb.feature_names
    write_csv(tmp_path / "once.csv", generate(100, "north", seed=1))  # one row per patient: no unit
    assert draft_codebook(tmp_path / "once.csv", "cv_event").privacy_unit is None
