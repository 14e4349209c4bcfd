"""A Parquet file's footer is parsed once per version of the file (:func:`marg.marginals.data.io.parquet_footer`):
the header and the reader of one pass share it, a rewritten file is read again, and the names and batches are
what the file holds."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq

from marg.marginals.data import io


def test_the_footer_is_read_once_per_version(tmp_path, monkeypatch):
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"a": ["x", "y", None], "b": [1.0, 2.0, 3.0]}), path)
    calls = []
    real = pq.read_metadata
    monkeypatch.setattr(pq, "read_metadata", lambda *a, **k: calls.append(a) or real(*a, **k))
    assert io.column_names(path) == ["a", "b"]
    batches = list(io.iter_typed_batches(path, ["a", "b"]))
    assert len(calls) == 1
    assert pa.types.is_dictionary(batches[0]["a"].type)  # text read from its dictionary pages, as before
    assert batches[0]["a"].dictionary_decode().to_pylist() == ["x", "y", None]
    assert batches[0]["b"].to_pylist() == [1.0, 2.0, 3.0]
    pq.write_table(pa.table({"c": [1, 2], "a": ["z", "z"], "d": [True, False]}), path)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # a new version even on a coarse clock
    assert io.column_names(path) == ["c", "a", "d"]
    assert len(calls) == 2
    assert [b["a"].dictionary_decode().to_pylist() for b in io.iter_typed_batches(path, ["a"])] == [["z", "z"]]
