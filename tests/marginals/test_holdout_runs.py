"""The holdout splitter's tally of contents seen (sorted runs merged geometrically) counts each content's
earlier occurrences exactly as one sorted array grown by insertion does: the same ``base`` for every
chunk, whatever the chunk sizes, repeats across chunks and 64-bit digest collisions within a chunk."""

from __future__ import annotations

import numpy as np
import pytest

from marg.marginals.holdout import Holdout, Splitter


def by_insertion(chunks):
    """The reference: one sorted array of digests and counts, np.insert of each chunk's new digests."""
    digests, tally, out = np.empty(0, np.uint64), np.empty(0, np.uint64), []
    for digest, counts in chunks:
        pos = np.searchsorted(digests, digest)
        found = pos < digests.size
        found[found] = digests[pos[found]] == digest[found]
        base = np.zeros(digest.size, dtype=np.uint64)
        base[found] = tally[pos[found]]
        tally[pos[found]] += counts[found]
        new = ~found
        if new.any():
            order = np.argsort(digest[new], kind="stable")
            at = pos[new][order]
            digests = np.insert(digests, at, digest[new][order])
            tally = np.insert(tally, at, counts[new][order])
        out.append(base)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_runs_count_earlier_occurrences_as_one_sorted_array(seed):
    rng = np.random.default_rng(seed)
    universe = rng.integers(0, 2**64, 3000, dtype=np.uint64)
    chunks = []
    for _ in range(60):
        size = int(rng.choice([1, 5, 50, 400]))
        digest = rng.choice(universe, size, replace=False)  # distinct contents of the chunk ...
        if size > 1 and rng.random() < 0.3:
            digest[-1] = digest[0]  # ... unless two collide in 64 bits
        chunks.append((digest, rng.integers(1, 5, size).astype(np.uint64)))
    sp = Splitter(Holdout(0.2), b"k" * 32)
    got = [sp._occurrences(d.copy(), c.copy()) for d, c in chunks]
    for a, b in zip(got, by_insertion(chunks)):
        assert np.array_equal(a, b)
    sizes = [r[0].size for r in sp._runs]
    assert all(x > 2 * y for x, y in zip(sizes, sizes[1:]))  # geometric: O(log n) runs
