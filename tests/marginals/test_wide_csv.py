"""A wide site file (thousands of full-precision values a row, as a gene-expression export has)
reads like any other: its rows are longer than a small read block, which Arrow calls malformed."""

import numpy as np

from marg.marginals.io import column_names, iter_batches


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
