"""Bad input files (issue 25): one line naming the line and column, never a patient's values; no internal error.

Through the installed console script: a short row and an unterminated quote (Arrow's own
message repeats the whole row, identifier included), a header name that is not UTF-8, a
duplicate header name; an empty text cell in Parquet is missing as in CSV; ``predict --id``
keeps ids and rows aligned whatever the Parquet batches.
"""

from __future__ import annotations

import csv

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

from marg.marginals.synthetic import SITES
from tests.helpers.console import marg
from tests.helpers.study import write_study

SECRET = "N999-424242"


@pytest.fixture
def study(tmp_path):
    st = write_study(tmp_path, 3000, seed=5, sites=1)
    return tmp_path, st.schema, st.data[SITES[0].name]


def export(tmp, schema, data, out="x.bundle"):
    return marg("export", data, "--schema", schema, "--site", "north", "--out", tmp / out, "--no-ledger",
                "--min-cell", "1", "--stats", "first", cwd=tmp)


def header_and_rows(data):
    head, *rows = data.read_text().splitlines()
    return head, rows


@pytest.mark.parametrize("where", [5, 2500])  # in the first block, and far into the file (other threads' blocks)
@pytest.mark.parametrize("kind", ["short", "quote"])
def test_a_malformed_row_is_named_by_line_and_column_never_by_its_values(study, kind, where):
    tmp, schema, data = study
    head, rows = header_and_rows(data)
    fields = rows[where].split(",")
    fields[0] = SECRET
    if kind == "short":  # the row stops after the sex column
        rows[where] = ",".join(fields[:3])
    else:  # an opening quote never closed: the rest of the file becomes one cell
        fields[2] = '"' + fields[2]
        rows[where] = ",".join(fields)
    bad = tmp / f"{kind}.csv"
    bad.write_text("\n".join([head] + rows) + "\n")
    r = export(tmp, schema, bad)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
    line = where + 2  # the header is line 1
    assert f"line {line} has" in r.stderr, r.stderr
    assert "first missing: column" in r.stderr and "values are not shown" in r.stderr, r.stderr
    for v in [SECRET] + fields[1:]:  # not the id, and no other value of the row either
        assert v.strip('"') not in r.stderr.split("first missing")[0].split(str(bad))[-1], (v, r.stderr)
    assert SECRET not in r.stderr and not (tmp / "x.bundle").exists()


def test_a_non_utf8_header_name_is_one_line(study):
    tmp, schema, data = study
    raw = data.read_bytes().replace(b"patient_id", b"patient_\xe9id", 1)
    bad = tmp / "latin1.csv"
    bad.write_bytes(raw)
    r = export(tmp, schema, bad)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "header is not UTF-8" in r.stderr and "column 1" in r.stderr and "internal error" not in r.stderr


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_duplicate_header_name_is_named(study, fmt):
    """'sex' twice: the identifier column was read as 'sex' and a patient id printed as an unknown level."""
    tmp, schema, data = study
    table = pcsv.read_csv(data, convert_options=pcsv.ConvertOptions(column_types={"patient_id": pa.string()}))
    names = ["sex" if n == "patient_id" else n for n in table.column_names]
    bad = tmp / f"dup.{fmt}"
    if fmt == "csv":
        pcsv.write_csv(table.rename_columns(names), bad)
    else:
        pq.write_table(table.rename_columns(names), bad)
    r = export(tmp, schema, bad)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "names column 'sex' 2 times (columns 1, 3)" in r.stderr, r.stderr
    assert "N00" not in r.stderr  # no patient id


def test_parquet_empty_text_is_missing_as_in_csv(study):
    """smoking has a missing level ('unknown'): '' in CSV is missing; in Parquet it was refused as an
    unknown level. Both now give the same tables, with '' and ' ' counted as missing."""
    tmp, schema, data = study
    names = pcsv.read_csv(data).column_names
    table = pcsv.read_csv(data, convert_options=pcsv.ConvertOptions(column_types={c: pa.string() for c in names}))
    orig = table.column("smoking").to_pylist()
    smoking = ["" if k % 7 == 0 else (" " if k % 11 == 0 else v) for k, v in enumerate(orig)]
    table = table.set_column(names.index("smoking"), "smoking", pa.array(smoking, pa.string()))
    pcsv.write_csv(table, tmp / "e.csv")
    pq.write_table(table, tmp / "e.parquet")
    from marg.protocols.bundle import load_bundle

    got = {}
    for fmt in ("csv", "parquet"):
        r = export(tmp, schema, tmp / f"e.{fmt}", out=f"{fmt}.bundle")
        assert r.returncode == 0, r.stderr
        got[fmt] = {t.name: t.counts for t in load_bundle(tmp / f"{fmt}.bundle").tables}
    assert got["csv"].keys() == got["parquet"].keys()
    for k in got["csv"]:
        assert np.array_equal(got["csv"][k], got["parquet"][k]), k
    smoke = next(v for k, v in got["csv"].items() if "smoking" in k)
    want = sum(1 for k, v in enumerate(orig) if k % 7 == 0 or k % 11 == 0 or v in (None, "", "unknown"))
    assert smoke[3].sum() == want  # 'unknown' is level 3


def test_predict_id_is_aligned_when_id_and_feature_batches_differ(study, tmp_path, monkeypatch):
    """Issue 25: predict --id read the id column in batches of its own size; with a Parquet row group
    larger than the feature batches (≈2.1 M rows for 8 features) the ids ran out (StopIteration) or
    shifted. The same code path with a smaller batch budget: every id stays with its row."""
    from typer.testing import CliRunner

    import marg.marginals.data.io as mio
    from marg.cli.main import app

    tmp, schema, data = study
    model = tmp / "m.json"
    r = export(tmp, schema, data)
    assert r.returncode == 0, r.stderr
    r = marg("learn", tmp / "x.bundle", "--learner", "nb", "--out", model, "--allow-unsigned", cwd=tmp)
    assert r.returncode == 0, r.stderr
    one = pcsv.read_csv(data)
    table = pa.concat_tables([one, one, one])
    pq.write_table(table, tmp / "rows.parquet", row_group_size=len(table))  # one row group of 9000 rows
    monkeypatch.setattr(mio, "PARQUET_BATCH_CELLS", 4096 * 5)  # the id alone: one batch; 9 columns: 4096 rows a batch
    args = ["--allow-unsigned", "--schema", str(schema)]
    runner = CliRunner()
    r = runner.invoke(app, ["predict", str(model), str(tmp / "rows.parquet"), "--out", str(tmp / "with.csv"), "--id",
                            "patient_id", *args])
    assert r.exit_code == 0, r.output
    assert runner.invoke(app, ["predict", str(model), str(data), "--out", str(tmp / "plain.csv"), *args]).exit_code == 0
    with open(tmp / "with.csv") as fh:
        rows = list(csv.DictReader(fh))
    with open(tmp / "plain.csv") as fh:
        plain = list(csv.DictReader(fh))
    assert [r["patient_id"] for r in rows] == table.column("patient_id").to_pylist()
    assert [r["predicted"] for r in rows] == [p["predicted"] for p in plain] * 3
