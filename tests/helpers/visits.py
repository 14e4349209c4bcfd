"""Visits for the Spark engine's tests: a codebook, hospital-like rows with patients on several rows,
the same rows as a CSV (the local path) and as a folder of Parquet files in another order, and one
``--evaluate`` of a model learned from them by both engines (:func:`evaluate_both`)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label, NumericFeature

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


def evaluation_counts(bundle) -> list:
    from marg.protocols.bundle import Bundle

    b = Bundle.from_bytes(bundle.read_bytes())
    return [(t.clique, t.counts.tolist()) for t in b.tables]


def evaluate_both(tmp_path, split: list[str], unit: list[str], content: str, console: bool = False,
                  master: str = "local[2]") -> tuple[list, list, tuple]:
    """Export with the holdout ``split`` (local), learn, then ``--evaluate`` (both with the privacy ``unit``) on
    the CSV locally and on the Parquet parts with Spark — in this process (its active session), or with
    ``console`` through the installed console script on ``master``: the two evaluation bundles' tables, the
    CSV, the ledger."""
    import shutil

    from tests.helpers.console import marg, run

    csv, parts = write(tmp_path, rows(seed=5, n=1500))
    schema = tmp_path / "cb.json"
    CB.save(schema)
    led = tmp_path / "ledger"
    common = ["--schema", schema, "--site", "north", "--ledger", led, "--min-cell", "1", *unit]
    r = run("export", csv, "--out", tmp_path / "train.bundle", "--stats", "all", *split, *common)
    assert r.exit_code == 0, r.output
    r = run("learn", tmp_path / "train.bundle", "--out", tmp_path / "m.json", "--allow-unsigned", "--learner", "nb")
    assert r.exit_code == 0, r.output
    ev = ["--evaluate", tmp_path / "m.json", "--allow-unsigned", "--evaluate-content", content]
    shutil.copytree(led, tmp_path / "ledger2")  # the site's one exact evaluation, once from each engine
    r = run("export", csv, "--out", tmp_path / "local.eval", *ev, *common)
    assert r.exit_code == 0, r.output
    common[common.index(led)] = tmp_path / "ledger2"
    if console:
        r = marg("export", parts, "--out", tmp_path / "spark.eval", "--engine", "spark", "--spark-master", master,
                 *ev, *common, cwd=tmp_path)
        assert r.returncode == 0, r.stderr[-2000:]
    else:
        r = run("export", parts, "--out", tmp_path / "spark.eval", "--engine", "spark", *ev, *common)
        assert r.exit_code == 0, r.output
    return evaluation_counts(tmp_path / "local.eval"), evaluation_counts(tmp_path / "spark.eval"), (csv, led)
