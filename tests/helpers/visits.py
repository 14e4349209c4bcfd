"""Visits for the Spark engine's tests: a codebook, hospital-like rows with patients on several rows,
and the same rows as a CSV (the local path) and as a folder of Parquet files in another order."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from marg.marginals.codebook import CategoricalFeature, Codebook, Label, NumericFeature

CB = Codebook(
    features=(
        CategoricalFeature("color", ("red", "green", "blue")),
        CategoricalFeature("smoke", ("no", "yes", "unknown"), missing="unknown"),
        CategoricalFeature("code", ("0", "1", "2", "3")),
        NumericFeature("age", edges=(30, 60), missing=True),
        NumericFeature("bp", lo=80, hi=200),
    ),
    label=Label("y", ("neg", "pos")),
)


def make_table(seed: int, n: int) -> pa.Table:
    """Hospital-like rows: text with stray spaces, missing categories and ages (NaN too), float blood pressures
    (clipped as raw moments), integer codes, and a patient id ``pid`` on two or three rows each."""
    rng = np.random.default_rng(seed)
    age = rng.integers(0, 90, n).astype(float)
    age[rng.random(n) < 0.05] = np.nan
    return pa.table({
        "color": pa.array(rng.choice(["red", "green", "blue", " red", "blue "], n)),
        "smoke": pa.array([None if r < 0.1 else v for r, v in zip(rng.random(n), rng.choice(["no", "yes"], n))]),
        "code": pa.array(rng.integers(0, 4, n)),
        "age": pa.array([None if r < 0.03 else v for r, v in zip(rng.random(n), age)], type=pa.float64()),
        "bp": pa.array(np.round(rng.uniform(50, 250, n), 3)),
        "y": pa.array(rng.choice(["neg", "pos"], n)),
        "pid": pa.array(rng.integers(0, n // 2.5, n)),
    })


def shuffled(table: pa.Table, seed: int) -> pa.Table:
    return table.take(np.random.default_rng(seed).permutation(table.num_rows))


def assert_same(want, got):
    """Count tables equal as integers; moment tables (float sums, added in another order) to rounding."""
    assert [t.clique for t in got] == [t.clique for t in want]
    for a, b in zip(want, got):
        assert a.kind == b.kind, a.name
        if a.kind == "counts":
            assert b.counts.dtype == np.int64 and np.array_equal(a.counts, b.counts), a.name
        else:
            np.testing.assert_allclose(b.counts, a.counts, rtol=1e-12, err_msg=a.name)


def rows(seed: int = 11, n: int = 900) -> pa.Table:
    """Visits with a patient id on two or three rows, and a tenth of the rows repeated (identical content)."""
    t = make_table(seed, n)
    return pa.concat_tables([t, t.slice(0, n // 10)])


def write(tmp_path, table: pa.Table) -> tuple[str, str]:
    """The rows as a CSV (local path) and, shuffled, as a folder of three Parquet files (three partitions)."""
    pcsv.write_csv(table, tmp_path / "d.csv")
    folder = tmp_path / "parts"
    folder.mkdir()
    t = shuffled(table, seed=3)
    for i, s in enumerate(range(0, t.num_rows, -(-t.num_rows // 3))):
        pq.write_table(t.slice(s, -(-t.num_rows // 3)), folder / f"part-{i}.parquet")
    return str(tmp_path / "d.csv"), str(folder)
