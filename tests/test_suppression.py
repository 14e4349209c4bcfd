"""Complementary suppression (issue 18): a suppressed cell cannot be recomputed from the released margins."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from marg.errors import RefusedError
from marg.marginals.codebook import CategoricalFeature, Codebook, Label
from marg.marginals.disclosure import apply_min_cell
from marg.marginals.suppression import complementary_suppression, is_acyclic, protection
from marg.marginals.tables import count_tables, plan_cliques


def first_order(counts_ay, counts_by):
    """N[y], N[a,y], N[b,y] consistent on y."""
    ay, by = np.asarray(counts_ay), np.asarray(counts_by)
    assert np.array_equal(ay.sum(0), by.sum(0))
    return [("y",), ("a", "y"), ("b", "y")], [ay.sum(0), ay, by]


def brute_force(cliques, counts, hidden, target, n_max):
    """Every integer value of ``target`` over all completions of the ``hidden`` cells (0..n_max)
    whose tables agree pairwise on their common margins — the attacker's exact knowledge for an
    acyclic release."""
    seen = set()
    for vals in itertools.product(range(n_max + 1), repeat=len(hidden)):
        arrs = [np.array(c, dtype=np.int64) for c in counts]
        for (t, ix), v in zip(hidden, vals):
            arrs[t][ix] = v
        ok = True
        for i, j in itertools.combinations(range(len(cliques)), 2):
            common = [a for a in cliques[i] if a in cliques[j]]
            if not common:
                continue
            mi = arrs[i].sum(axis=tuple(k for k, a in enumerate(cliques[i]) if a not in common))
            mj = arrs[j].sum(axis=tuple(k for k, a in enumerate(cliques[j]) if a not in common))
            if not np.array_equal(mi, mj):
                ok = False
                break
        if ok:
            seen.add(vals[hidden.index(target)])
    return seen


def test_primary_suppression_alone_is_recomputed_exactly():
    """The attack of issue 18: N[y] minus the rest of the column gives the zeroed cell back."""
    cliques, counts = first_order([[1, 7], [9, 5], [6, 8]], [[8, 10], [8, 10]])
    primary = [(1, (0, 0))]  # N[a=0, y=0] = 1
    lo, hi = protection(cliques, counts, primary, primary)[primary[0]]
    assert lo == pytest.approx(1) and hi == pytest.approx(1)
    assert brute_force(cliques, counts, primary, primary[0], 16) == {1}


def test_complementary_suppression_protects_every_small_cell():
    cliques, counts = first_order([[1, 7], [9, 5], [6, 8]], [[8, 10], [8, 10]])
    primary = [(1, (0, 0))]
    hidden = complementary_suppression(cliques, counts, primary, k=3)
    assert hidden[0] == primary[0] and len(hidden) >= 2
    lo, hi = protection(cliques, counts, hidden, primary)[primary[0]]
    assert lo <= 1e-9 and hi >= 3
    # the exact integer knowledge of an attacker agrees with the LP and covers 0..k
    values = brute_force(cliques, counts, hidden, primary[0], 16)
    assert {0, 1, 2, 3} <= values and min(values) == round(lo) and max(values) == round(hi)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 5))
def test_random_first_order_releases_are_protected(seed, k):
    """Random data, N[y] and every N[x_i, y]: after suppression every small cell's LP interval
    reaches 0 and k, and the zeroed cells are exactly the ones returned."""
    rng = np.random.default_rng(seed)
    n_feat = int(rng.integers(1, 4))
    cb = Codebook(features=tuple(CategoricalFeature(f"f{i}", tuple(str(v) for v in range(int(rng.integers(2, 5)))))
                                 for i in range(n_feat)), label=Label("y", ("n", "p")))
    n = int(rng.integers(5, 60))
    X = np.column_stack([rng.integers(0, f.n_levels, n) for f in cb.features]).astype(float)
    y = rng.integers(0, 2, n)
    tables = count_tables(cb, X, y, plan_cliques(cb, "first"))
    small = [(i, tuple(int(v) for v in ix)) for i, t in enumerate(tables)
             for ix in np.argwhere((t.counts > 0) & (t.counts < k))]
    try:
        out, sup = apply_min_cell(tables, k=k, policy="suppress", label="y")
    except RefusedError as exc:  # e.g. a class below k in N[y] with no cell left to hide it
        assert "cannot be protected" in str(exc)
        return
    hidden = [(next(i for i, t in enumerate(tables) if t.name == s.table), s.cell) for s in sup]
    assert set(small) <= set(hidden)
    for (i, ix) in hidden:
        assert out[i].counts[ix] == 0
    for i, t in enumerate(tables):  # every other cell untouched
        mask = np.ones(t.counts.shape, bool)
        for (j, ix) in hidden:
            if j == i:
                mask[ix] = False
        assert np.array_equal(out[i].counts[mask], t.counts[mask])
    if small:
        b = protection([t.clique for t in tables], [t.counts for t in tables], hidden, small)
        for cell, (lo, hi) in b.items():
            assert lo <= 1e-7 and hi >= k - 1e-7, (cell, lo, hi)


def test_cyclic_releases_are_refused_for_suppression():
    assert is_acyclic([("y",), ("a", "y"), ("b", "y")])
    assert is_acyclic([("a", "b", "y"), ("b", "c", "y"), ("a", "y")])
    assert not is_acyclic([("a", "b", "y"), ("b", "c", "y"), ("a", "c", "y")])
    cb = Codebook(features=tuple(CategoricalFeature(n, ("0", "1")) for n in "abc"), label=Label("y", ("n", "p")))
    rng = np.random.default_rng(1)
    X = rng.integers(0, 2, (40, 3)).astype(float)
    X[0] = [1, 1, 1]
    tables = count_tables(cb, X, rng.integers(0, 2, 40), plan_cliques(cb, "all"))
    if not any(((t.counts > 0) & (t.counts < 3)).any() for t in tables):
        pytest.skip("no small cell drawn")
    with pytest.raises(RefusedError, match="form no cycle"):
        apply_min_cell(tables, k=3, policy="suppress", label="y")
