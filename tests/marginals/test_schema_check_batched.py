"""A file's schema check through the export's batch encoder (every column of a chunk at once) finds
what the one-column-at-a-time rules find: the same unknown values (as canonical text), the same
missing flags, on CSV and Parquet, with stray spaces, number spellings, non-numbers in numeric
columns, missing values with and without a missing level, an unknown class, and clean columns."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label, NumericFeature
from marg.marginals.schema_check import _look_up, _sorted, check_schema
from marg.marginals.sources.files import FileSource


def codebook() -> Codebook:
    return Codebook(features=(
        CategoricalFeature("color", ("red", "green", "blue")),
        CategoricalFeature("smoke", ("no", "yes", "unknown"), missing="unknown"),
        CategoricalFeature("code", ("0", "1", "2")),
        NumericFeature("age", edges=(30.0, 60.0)),
        NumericFeature("bp", lo=80.0, hi=200.0),
        CategoricalFeature("clean", ("a", "b")),
    ), label=Label("y", ("neg", "pos")))


def table(rng, n: int) -> pa.Table:
    def pick(values):
        return [None if v == "<null>" else v for v in rng.choice(values, n)]
    return pa.table({
        "color": pick(["red", " red", "green ", "blue", "purple", "Red", "<null>"]),
        "smoke": pick(["no", "yes", "<null>", ""]),
        "code": pick(["0", "1", "2", "1.0", "3", " 2"]),
        "age": pick(["12", "45.5", "70", "old", "<null>", "1e2"]),
        "bp": pick(["120", "300", "-5", "n/a", "<null>"]),
        "clean": pick(["a", "b"]),
        "y": pick(["neg", "pos", "maybe"]),
    })


def one_column_at_a_time(path, cb) -> dict:
    """The rule the check had for every source: each column's text values looked up on their own."""
    src = FileSource(path)
    wanted = cb.feature_names + [cb.label.name]
    unknown = {c: set() for c in wanted}
    missing = {c: False for c in wanted}
    for batch, _rows in src.draft_batches(wanted):
        for c, arr in batch.items():
            _look_up(cb, c, arr, unknown, missing)
    return {c: (_sorted(unknown[c]), missing[c]) for c in wanted if unknown[c] or missing[c]}


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize("seed", range(3))
def test_the_batched_check_finds_what_the_column_rule_finds(tmp_path, fmt, seed):
    rng = np.random.default_rng(seed)
    t = table(rng, int(rng.choice([40, 5000])))
    if fmt == "parquet":  # numbers as numbers: the raw and binned columns take the encoder's direct path
        t = t.set_column(4, "bp", pa.array(rng.uniform(0, 300, len(t)))).set_column(
            3, "age", pa.array(np.where(rng.random(len(t)) < 0.1, np.nan, rng.uniform(0, 90, len(t)))))
    path = tmp_path / f"d.{fmt}"
    (pcsv.write_csv if fmt == "csv" else pq.write_table)(t, path)
    cb = codebook()
    got = check_schema(FileSource(path), cb)
    want = one_column_at_a_time(path, cb)
    assert {m.column: (m.unknown, m.missing) for m in got.misfits} == want
    assert "color" in want and "y" in want  # the data do hold misfits
    assert "clean" not in want
