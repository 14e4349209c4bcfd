"""The distinct row contents a holdout by content hashes (``distinct_contents``) are ``np.unique`` of
``content_rows``' 8-byte-a-column matrix — the same bytes in the same order, the same index of every row
and the same counts — kept as each column's low bytes; and the split of a wide chunk holds no matrix of
8 bytes a cell (tracemalloc's peak)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from marg.marginals.data.column_codes import Encoded
from marg.marginals.holdout import Holdout, Splitter, content_rows, distinct_contents


def chunk(rng, n: int, kinds: str, repeats: int) -> Encoded:
    """n rows drawn from ``repeats`` distinct ones (many equal rows); columns by kind: u codes (uint8),
    w wide codes (uint16), b booleans, f floats (NaN, −0.0, negatives), i signed ints (negatives)."""
    base = rng.integers(0, repeats, n)
    parts = []
    for k in kinds:
        if k == "u":
            v = rng.integers(0, 256, repeats).astype(np.uint8)
        elif k == "w":
            v = rng.integers(0, 70_000, repeats).astype(np.uint32).astype(np.uint16)
        elif k == "b":
            v = rng.random(repeats) < 0.5
        elif k == "f":
            v = rng.choice([np.nan, -0.0, 0.0, 1.5, -2.25, 1e300], repeats)
        else:
            v = rng.integers(-5, 5, repeats).astype(np.int64)
        parts.append(v[base])
    y = rng.integers(0, 3, repeats).astype(np.int64)[base]
    return Encoded(parts, y, 1)


def old_rule(enc, extra=None):
    uniq, inv, counts = np.unique(content_rows(enc, extra), return_inverse=True, return_counts=True)
    return [u.tobytes() for u in uniq], inv.ravel(), counts


@pytest.mark.parametrize("kinds", ["u", "uuub", "uwbu", "ufu", "uiwbf", "ff", "b" * 40 + "u" * 300])
@pytest.mark.parametrize("seed", range(3))
def test_the_distinct_contents_are_content_rows_unique(kinds, seed):
    rng = np.random.default_rng(seed)
    enc = chunk(rng, 500, kinds, repeats=int(rng.choice([3, 60, 500])))
    for extra in (None, rng.integers(0, 2**64, 500, dtype=np.uint64)):
        contents, inv, counts = distinct_contents(enc, extra)
        want = old_rule(enc, extra)
        assert list(contents) == want[0]
        assert np.array_equal(inv, want[1]) and np.array_equal(counts, want[2])


def test_an_empty_chunk_has_no_contents():
    enc = Encoded([np.zeros(0, np.uint8), np.zeros(0, bool)], np.zeros(0, np.int64), 1)
    contents, inv, counts = distinct_contents(enc)
    assert list(contents) == [] and inv.size == 0 and counts.size == 0


def test_many_distinct_wide_rows_come_in_order_across_the_write_out_steps():
    """More distinct rows than one write-out step holds (4 MiB of 8-byte rows: 26 rows at 20,001 columns)."""
    rng = np.random.default_rng(7)
    enc = chunk(rng, 120, "u" * 20_000, repeats=100)
    contents, inv, counts = distinct_contents(enc)
    want = old_rule(enc)
    assert list(contents) == want[0]
    assert np.array_equal(inv, want[1]) and np.array_equal(counts, want[2])


def test_a_wide_chunk_splits_without_a_matrix_of_8_bytes_a_cell():
    """1,000 distinct rows × 5,000 byte codes: content_rows' matrix alone is 40 MB (and np.unique held three
    copies of it beside); the split's peak stays under three quarters of it (the codes' low bytes, 5 MB,
    np.unique's three copies of those and a 4 MiB step of distinct rows written out)."""
    rng = np.random.default_rng(3)
    n, p = 1000, 5000
    enc = Encoded([rng.integers(0, 3, n).astype(np.uint8) for _ in range(p)], rng.integers(0, 2, n), 1)
    for i in range(p):
        enc.column(i)
    split = Splitter(Holdout(0.2), key=bytes(32))
    tracemalloc.start()
    try:
        held = split.mask(enc)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert 100 < held.sum() < 300
    assert peak < 0.75 * n * (p + 1) * 8, peak
