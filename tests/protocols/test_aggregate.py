"""Streaming aggregation equals summing every site at once, whatever the sites released."""

from __future__ import annotations

import numpy as np
import pytest

from marg.errors import InputError
from marg.marginals.counts.noise import NoiseRecord
from marg.marginals.summary import Summary, sum_tables
from marg.marginals.counts.counting import count_tables
from marg.marginals.counts.tables import MarginalTable, plan_cliques
from marg.protocols.aggregate import summary_from_bundles, summary_from_files
from marg.protocols.bundle import Bundle, load_bundle
from tests.conftest import random_codebook, random_rows


def site_bundles(rng, cb, k: int):
    out = []
    for s in range(k):
        X, y = random_rows(rng, cb, int(rng.integers(20, 200)))
        stats = "all" if s % 3 else "first"  # some sites release fewer tables: those are dropped
        tables = count_tables(cb, X, y, plan_cliques(cb, stats))
        if s % 4 == 1:  # a noisy site: the combined noise record must fold the same way
            tables = [MarginalTable(t.clique, t.counts + 0.5, NoiseRecord("laplace", 2.0, 2.0 * 2**0.5, epsilon=0.5),
                                    t.kind)
                      for t in tables]
        out.append(Bundle.build(cb, tables, site=f"site{s}", n_rows=len(y)))
    return out


@pytest.mark.parametrize("seed", range(3))
def test_streamed_equals_all_at_once(tmp_path, seed):
    rng = np.random.default_rng(seed)
    cb = random_codebook(rng, n_features=4, numeric=1)
    bundles = site_bundles(rng, cb, 7)
    summed, dropped = sum_tables([b.tables for b in bundles])
    want = Summary(cb, summed).tables  # the same post-processing of noisy tables
    paths = []
    for b in bundles:
        paths.append(tmp_path / f"{b.site}.bundle")
        b.save(paths[-1])
    seen = []
    s1 = summary_from_files(paths, load_bundle, progress=lambda k, n: seen.append((k, n)))
    s2 = summary_from_bundles(load_bundle(p) for p in paths)  # a generator: one bundle at a time
    assert seen == [(k + 1, 7) for k in range(7)]
    for s in (s1, s2):
        assert s.provenance["dropped_tables"] == dropped
        assert [t.clique for t in s.tables] == [t.clique for t in want]
        for a, b in zip(want, s.tables):
            np.testing.assert_array_equal(a.counts, b.counts)
            assert a.noise == b.noise and a.kind == b.kind
    assert [d["site"] for d in s1.provenance["sites"]] == [b.site for b in bundles]


def test_refusals_name_the_bundle(rng):
    cb = random_codebook(rng, n_features=3)
    other = random_codebook(np.random.default_rng(99), n_features=4)
    a, b = site_bundles(rng, cb, 2)
    c = site_bundles(rng, other, 1)[0]
    with pytest.raises(InputError, match=r"^b.bundle: the same bundle as a.bundle \(given twice\)"):
        summary_from_bundles([a, a], ["a.bundle", "b.bundle"])
    again = Bundle.build(cb, a.tables[:2], site=a.site, n_rows=a.header["n_rows"], created="2000-01-01T00:00:00+00:00")
    with pytest.raises(InputError, match=r"^b.bundle: site 'site0' already released N\[.*\] in a.bundle"):
        summary_from_bundles([a, again], ["a.bundle", "b.bundle"])
    with pytest.raises(InputError, match=r"^c.bundle: codebook fingerprint .* differs from a.bundle's"):
        summary_from_bundles([a, b, c], ["a.bundle", "b.bundle", "c.bundle"])
    with pytest.raises(InputError, match="no bundles to aggregate"):
        summary_from_bundles([])


def test_rounds_of_one_site_combine_and_equal_the_one_round_release(rng):
    """Round 1 (first-order tables) and round 2 (pair tables) of each site, summed, equal the
    sum of one release of the same tables; a site's second copy of a table is refused."""
    from marg.protocols.bundle import Bundle

    cb = random_codebook(rng, n_features=4)
    lab = cb.label.name
    first = plan_cliques(cb, "first")
    pairs = [c for c in plan_cliques(cb, "all") if len(c) == 3][:3]
    one, rounds = [], []
    for k in range(3):
        X, y = random_rows(rng, cb, 80 + 20 * k)
        whole = count_tables(cb, X, y, first + pairs)
        one.append(Bundle.build(cb, whole, site=f"s{k}", n_rows=len(y)))
        rounds.append(Bundle.build(cb, whole[: len(first)], site=f"s{k}", n_rows=len(y)))
        rounds.append(Bundle.build(cb, whole[len(first):], site=f"s{k}", n_rows=len(y)))
    a = summary_from_bundles(one)
    b = summary_from_bundles(rounds)
    assert [t.clique for t in a.tables] == [t.clique for t in b.tables]
    for x, z in zip(a.tables, b.tables):
        np.testing.assert_array_equal(x.counts, z.counts)
    assert [s["site"] for s in b.provenance["sites"]] == ["s0", "s1", "s2"]
    assert [len(s["rounds"]) for s in b.provenance["sites"]] == [2, 2, 2]
    with pytest.raises(InputError, match=r"site 's0' already released N\[.*" + lab):
        summary_from_bundles([one[0], rounds[0]])
    # a site missing from round 2 (or 1) is refused, named; one-round studies still drop what some site lacks
    with pytest.raises(InputError, match=r"^site 's2' is missing from round 2 \(pair tables\): 3 table\(s\) released "
                                         r"by 's0', 's1'"):
        summary_from_bundles(rounds[:5])
    with pytest.raises(InputError, match=r"^site 's2' is missing from round 1 \(first-order tables\)"):
        summary_from_bundles(rounds[:4] + rounds[5:])
    c = summary_from_bundles(one[:2] + [rounds[4]])
    assert not any(len(t.clique) == 3 for t in c.tables)
    assert sorted(c.provenance["missing_by_site"]) == ["s2"]
    # a site's data changed between rounds (exact row counts differ): its tables would not fit together
    other_n = Bundle.build(cb, rounds[1].tables, site="s0", n_rows=rounds[0].header["n_rows"] + 1)
    with pytest.raises(InputError, match=r"site 's0' released .* rows here and .* \(its data changed between rounds"):
        summary_from_bundles([rounds[0], other_n])


def test_a_sites_rounds_compose_their_privacy_costs(rng):
    """The provenance of a site that sent two DP rounds carries the sum of their costs (what its
    ledger shows: basic composition), and each round's own record."""
    from marg.protocols.bundle import Bundle

    cb = random_codebook(rng, n_features=3)
    first = plan_cliques(cb, "first")
    pairs = [c for c in plan_cliques(cb, "all") if len(c) == 3]
    bundles = []
    for k in range(2):
        X, y = random_rows(rng, cb, 60)
        t = count_tables(cb, X, y, first + pairs)
        for tables, cost in ((t[: len(first)], (0.5, 0.0, 0.125)), (t[len(first):], (0.75, 1e-6, 0.02))):
            priv = {"mechanism": "laplace" if cost[1] == 0 else "gaussian", "epsilon": cost[0], "delta": cost[1],
                    "rho": cost[2]}
            bundles.append(Bundle.build(cb, tables, site=f"s{k}", n_rows=None, privacy=priv))
    s = summary_from_bundles(bundles)
    for rec in s.provenance["sites"]:
        assert rec["privacy"] == {"mechanism": "laplace+gaussian", "epsilon": 1.25, "delta": 1e-6, "rho": 0.145,
                                  "rounds": 2,
                                  "releases": [{"epsilon": 0.5, "delta": 0.0}, {"epsilon": 0.75, "delta": 1e-6}],
                                  "ledger_delta": None}
        assert [r["privacy"]["epsilon"] for r in rec["rounds"]] == [0.5, 0.75]
