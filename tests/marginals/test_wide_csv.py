"""A wide site file (thousands of full-precision values a row, as a gene-expression export has)
reads like any other: its rows are longer than a small read block, which Arrow calls malformed."""

import numpy as np

from marg.marginals.data.io import column_names, iter_batches


def test_a_wide_csv_with_long_rows_reads_its_names_and_rows(tmp_path):
    rng = np.random.default_rng(0)
    p = 7129  # ALLAML's genes: a row of ~140 KB, above the 64 KiB block that refused it
    values = rng.normal(size=(5, p))
    path = tmp_path / "site.csv"
    with open(path, "w") as fh:
        fh.write(",".join(f"gene_{i}" for i in range(p)) + ",y\n")
        for r in range(5):
            fh.write(",".join(repr(float(x)) for x in values[r]) + f",{'ab'[r % 2]}\n")
    names = column_names(path)
    assert names == [f"gene_{i}" for i in range(p)] + ["y"]
    cols = ["gene_0", f"gene_{p - 1}", "y"]
    got = {c: [] for c in cols}
    for batch in iter_batches(path, cols):
        for c in cols:
            got[c] += batch[c].to_pylist()
    assert [float(v) for v in got["gene_0"]] == list(values[:, 0])
    assert [float(v) for v in got[f"gene_{p - 1}"]] == list(values[:, p - 1])
    assert got["y"] == ["a", "b", "a", "b", "a"]


def _wide_rows(path, values, labels, short_first=0):
    """A gene-study CSV: ``values`` (n × p) at full ``repr`` precision, the first ``short_first`` rows
    written as one-digit values (short rows first, so a long row comes after batches were yielded)."""
    n, p = values.shape
    with open(path, "w") as fh:
        fh.write(",".join(f"gene_{i}" for i in range(p)) + ",y\n")
        for r in range(n):
            cells = (f"{x:.0f}" for x in values[r]) if r < short_first else (repr(float(x)) for x in values[r])
            fh.write(",".join(cells) + f",{labels[r]}\n")


def test_a_row_longer_than_the_read_block_grows_the_block_and_every_row_comes_once(tmp_path):
    """Short rows fill several blocks, then rows longer than the block: the reader starts again with a
    larger block and skips what it yielded (each row exactly once, in order)."""
    from marg.marginals.data.io import iter_typed_batches

    rng = np.random.default_rng(1)
    p, n = 7129, 40
    values = rng.normal(size=(n, p))
    labels = [f"c{r}" for r in range(n)]
    path = tmp_path / "mixed.csv"
    _wide_rows(path, values, labels, short_first=25)  # short rows ~14 KB, long rows ~135 KB
    got = []
    batches = 0
    for batch in iter_typed_batches(path, ["y", "gene_3"], chunk_bytes=1 << 16, dictionary=False):
        got += batch["y"].to_pylist()
        batches += 1
    assert got == labels
    assert batches > 1  # the short rows came in several blocks before the first long row


def test_a_cell_longer_than_the_default_block_reads(tmp_path):
    """One row above the default 8 MiB block (a 9 MB cell): names and rows read at the default chunk size."""
    path = tmp_path / "long.csv"
    long = "x" * (9 << 20)
    path.write_text(f"a,note,y\n1,short,p\n2,{long},q\n3,short,p\n")
    assert column_names(path) == ["a", "note", "y"]
    got = [v for b in iter_batches(path, ["a", "y"]) for v in b["y"].to_pylist()]
    assert got == ["p", "q", "p"]
    path.write_text(f"a,{long},y\n1,2,p\n")  # a header above the block
    assert column_names(path) == ["a", long, "y"]


def test_a_row_above_the_largest_block_is_refused_in_one_line(tmp_path, monkeypatch):
    import pytest

    from marg.errors import InputError
    from marg.marginals.data import io

    monkeypatch.setattr(io, "MAX_BLOCK_BYTES", 1 << 18)
    path = tmp_path / "too_long.csv"
    secret = "N999-424242"
    path.write_text("a,note,y\n" + f"1,{secret}{'x' * (1 << 19)},p\n")
    with pytest.raises(InputError) as err:
        list(io.iter_batches(path, ["a", "y"], chunk_bytes=1 << 16))
    msg = str(err.value)
    assert "\n" not in msg and "longer than 0.25 MiB" in msg and "Parquet" in msg, msg
    assert secret not in msg


def test_schema_init_and_export_of_a_gene_study_through_the_console_script(tmp_path):
    """17 patients × 7,129 genes at full precision (~135 KB a row; i34b's ALLAML site file, once refused as
    'straddling object straddles two block boundaries'): ``marg schema init`` then ``marg export``."""
    import json

    from tests.helpers.console import marg

    rng = np.random.default_rng(2)
    p, n = 7129, 17
    values = rng.normal(size=(n, p))
    labels = ["ALL" if r % 3 else "AML" for r in range(n)]
    data = tmp_path / "rows.csv"
    _wide_rows(data, values, labels)
    assert max(len(line) for line in data.read_text().splitlines()) > 130_000
    r = marg("schema", "init", data, "--label", "y", "--out", tmp_path / "codebook.json", "--bins", "3", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    cb = json.loads((tmp_path / "codebook.json").read_text())
    assert len(cb["features"]) == p
    r = marg("export", data, "--schema", tmp_path / "codebook.json", "--site", "north", "--out", tmp_path / "x.bundle",
             "--no-ledger", "--min-cell", "1", "--stats", "first", "--allow-draft", cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "x.bundle").exists()
