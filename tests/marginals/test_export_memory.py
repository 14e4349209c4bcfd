"""Counting a Parquet file holds a few batches and a row group's encoded column chunks, whatever its
length: the Arrow pool's peak and the Python/numpy peak (tracemalloc) of ``count_file`` on 1.5 M rows stay
within 1.5 × those on 150,000 rows (each more than the three batches alive at once — read ahead, queued,
counted — at 2^19 cells a batch, 47,662 rows of these 11 columns; row groups of 100,000 rows)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label

ROWS = (150_000, 1_500_000)

CHILD = """
import json, sys, tracemalloc
import pyarrow as pa
from marg.marginals.data.codebook import Codebook
from marg.marginals.counts.tables import plan_cliques
from marg.protocols.export import count_file
cb = Codebook.load(sys.argv[2])
tracemalloc.start()
tables, n = count_file(sys.argv[1], cb, plan_cliques(cb, "first"))
print(json.dumps({"rows": n, "arrow": pa.default_memory_pool().max_memory(),
                  "python": tracemalloc.get_traced_memory()[1], "total": int(sum(t.counts.sum() for t in tables[1:]))}))
"""


def peaks(path, cb_path) -> dict:
    r = subprocess.run([sys.executable, "-c", CHILD, str(path), str(cb_path)], capture_output=True, text=True,
                       env={"ARROW_DEFAULT_MEMORY_POOL": "jemalloc", "PATH": ""}, check=True)
    return json.loads(r.stdout)


def test_counting_memory_does_not_grow_with_rows(tmp_path):
    cb = Codebook(features=tuple(CategoricalFeature(f"f{k}", tuple(f"v{j}" for j in range(2 + k)))
                                 for k in range(10)), label=Label("y", ("neg", "pos")))
    cb.save(tmp_path / "cb.json")
    rng = np.random.default_rng(0)
    got = {}
    for rows in ROWS:
        cols = {f.name: pa.DictionaryArray.from_arrays(pa.array(rng.integers(0, f.n_levels, rows).astype(np.int32)),
                                                       pa.array(list(f.levels))).dictionary_decode()
                for f in cb.features}
        cols["y"] = pa.array(np.where(rng.random(rows) < 0.5, "neg", "pos"))
        path = tmp_path / f"d{rows}.parquet"
        pq.write_table(pa.table(cols), path, row_group_size=100_000)  # row groups of 100,000 rows: 2 and 15
        got[rows] = peaks(path, tmp_path / "cb.json")
        assert got[rows]["rows"] == rows and got[rows]["total"] == 10 * rows
    small, large = got[ROWS[0]], got[ROWS[1]]
    assert large["arrow"] <= 1.5 * small["arrow"], (small, large)
    assert large["python"] <= 1.5 * small["python"], (small, large)
