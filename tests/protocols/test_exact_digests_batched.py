"""The exact-release digests made in batches (:func:`marg.protocols.exact_releases.release_digests`
through ``_margins_digests``) are, key for key and in the same order, the per-table rule's:
``_digest(_canonical_counts(t.marginal(sub), meanings))`` over every new margin of every table (issue 48:
a release of thousands of first-order tables is digested in a few numpy calls, not per table)."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest

from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label, NumericFeature
from marg.marginals.counts.noise import NoiseRecord
from marg.marginals.counts.tables import MarginalTable
from marg.protocols.exact_releases import _canonical_counts, _digest, _key, level_meanings, release_digests


def reference(tables, n_rows, hidden, codebook, scope="study"):
    """The per-table rule (the code before batching), written out."""
    exact = [t for t in tables if t.noise.is_exact]
    if not exact:
        return None
    out = {"scope": scope}
    if n_rows is not None:
        out["n"] = str(int(n_rows))
    for t in exact:
        names = sorted(t.clique)
        if t.kind == "moments":
            f, lab = codebook.feature(t.clique[0]), t.clique[1]
            sums = {c: [float(t.counts[0, k]), float(t.counts[1, k])]
                    for k, c in enumerate(level_meanings(codebook, lab))}
            out[_key("s:", names)] = _digest([[f.lo, f.hi], sorted([c, v] for c, v in sums.items() if v != [0.0, 0.0])])
            continue
        means = {a: level_meanings(codebook, a) for a in t.clique}
        if t.name in hidden:
            out[_key("t:", names)] = _digest(_canonical_counts(t.marginal(names), [means[a] for a in names]))
            continue
        for r in range(1, len(names) + 1):
            for sub in combinations(names, r):
                key = _key("m:", sub)
                if key not in out:
                    out[key] = _digest(_canonical_counts(t.marginal(sub), [means[a] for a in sub]))
    return out


CB = Codebook(
    features=(
        *(CategoricalFeature(f"g{k:03d}", ("0", "1", "NA"), missing="NA") for k in range(40)),
        CategoricalFeature("zz", ("b", "a", "c")),  # sorts after the label: (y, zz) margins
        CategoricalFeature("dup", ("x", " x", "w")),  # two levels of one meaning (trimmed text): cells merge
        CategoricalFeature("ünï", ("é", "\"q\"", "\\")),  # JSON escapes and non-ASCII text
        NumericFeature("age", edges=(30.0, 50.0), missing=True),
        NumericFeature("bmi", lo=15.0, hi=40.0),
    ),
    label=Label("y", ("pos", "neg ")),
)


def tables(rng, *, sparse: bool):
    out = []
    for f in CB.features:
        if f.name == "bmi":
            out.append(MarginalTable(("bmi", "y"), rng.uniform(0, 9, (2, 2)), kind="moments"))
            continue
        c = rng.integers(0, 6, (f.n_levels, 2))
        if sparse:
            c[rng.random(c.shape) < 0.5] = 0
        out.append(MarginalTable((f.name, "y"), c))
    out.append(MarginalTable(("g001", "g002", "y"), rng.integers(0, 4, (3, 3, 2))))
    out.append(MarginalTable(("zz", "dup", "y"), rng.integers(0, 4, (3, 3, 2))))
    out.append(MarginalTable(("g003", "age", "y"), rng.integers(0, 4, (3, 4, 2))))
    # float counts: general path
    out.append(MarginalTable(("g004", "y"), rng.integers(0, 4, (3, 2)).astype(np.float64)))
    out.append(MarginalTable(("g005", "y"), np.zeros((3, 2), dtype=np.int64)))  # nothing to show
    out.append(MarginalTable(("g006", "y"), rng.integers(0, 4, (3, 2)),
                             noise=NoiseRecord("gaussian", 1.0, 1.0, rho=0.1)))
    out.append(MarginalTable(("y",), rng.integers(0, 9, 2)))
    return out


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("hidden", [(), ("N[g007,y]", "N[zz,dup,y]")])
def test_batched_digests_equal_the_per_table_rule_key_for_key_in_order(sparse, hidden):
    rng = np.random.default_rng(7 + sparse)
    ts = tables(rng, sparse=sparse)
    new = release_digests(ts, 1234, hidden, CB, "evaluation")
    ref = reference(ts, 1234, set(hidden), CB, "evaluation")
    # the same keys, digests and order (the first refusal names the first key)
    assert list(new.items()) == list(ref.items())
    assert all(len(v) == 32 for k, v in new.items() if k not in ("n", "scope"))


def test_a_changed_count_changes_its_margins_digests_only():
    rng = np.random.default_rng(1)
    ts = tables(rng, sparse=False)
    a = release_digests(ts, None, (), CB)
    bumped = ts[3].counts.copy()
    # one patient more in g003 = 1, y = pos: its own margins and N[y] (here counted first by g000) keep theirs
    bumped[1, 0] += 1
    ts[3] = MarginalTable(ts[3].clique, bumped)
    b = release_digests(ts, None, (), CB)
    changed = sorted(k for k in a if a[k] != b[k])
    assert changed == ['m:["g003","y"]', 'm:["g003"]']
    assert b == reference(ts, None, set(), CB)


def test_no_exact_table_no_digests():
    t = MarginalTable(("g000", "y"), np.ones((3, 2)), noise=NoiseRecord("gaussian", 1.0, 1.0, rho=0.1))
    assert release_digests([t], 5, (), CB) is None
