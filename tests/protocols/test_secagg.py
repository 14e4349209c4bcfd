"""Secure aggregation (protocols.secagg): masks cancel exactly; single vectors are hidden."""

from __future__ import annotations

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric import x25519

from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label, NumericFeature
from marg.errors import InputError
from marg.marginals.counts.noise import NoiseRecord
from marg.marginals.summary import Summary, sum_tables
from marg.marginals.counts.counting import count_tables
from marg.marginals.counts.tables import MarginalTable, plan_cliques
from marg.protocols.aggregate import summary_from_bundles
from marg.protocols.bundle import Bundle
from marg.protocols.secagg import mask_counts, pair_mask, unmask_sum
from marg.protocols.secagg_tables import mask_tables, secure_sum_tables, unmask_tables
from tests.helpers.quantities import tau_of, tau_std_of, Q_of, d_of


def _keys(names):
    return {s: x25519.X25519PrivateKey.generate() for s in names}


def _round(vectors, keys, rid):
    pubs = {s: k.public_key() for s, k in keys.items()}
    return {s: mask_counts(s, v, keys[s], {p: pk for p, pk in pubs.items() if p != s}, rid) for s, v in vectors.items()}


@pytest.mark.parametrize("n_sites", [2, 3, 5])
def test_sum_equals_plain_sum_and_no_masked_vector_equals_its_plain_one(n_sites):
    rng = np.random.default_rng(n_sites)
    names = [f"site{i}" for i in rng.permutation(n_sites)]
    keys = _keys(names)
    vectors = {s: rng.integers(-5, 10_000, size=257) for s in names}
    masked = _round(vectors, keys, "round-1")
    total = unmask_sum(list(masked.values()))
    assert total.dtype == np.int64
    np.testing.assert_array_equal(total, sum(vectors.values()))
    for s in names:
        plain = vectors[s].astype(np.int64).view(np.uint64)
        assert not np.array_equal(masked[s], plain)
        # a masked vector looks uniform: almost no cell coincides with its plain value
        assert np.mean(masked[s] == plain) < 0.01
        # and its top bits are spread (uniform uint64 has mean ~2^63)
        assert 0.3 < float(np.mean(masked[s] >> np.uint64(63))) < 0.7


def test_order_of_upload_does_not_matter_and_partial_sums_do_not_reveal():
    rng = np.random.default_rng(1)
    names = ["a", "b", "c"]
    keys = _keys(names)
    vectors = {s: rng.integers(0, 100, size=64) for s in names}
    masked = _round(vectors, keys, "r")
    plain = sum(vectors.values())
    np.testing.assert_array_equal(unmask_sum([masked["c"], masked["a"], masked["b"]]), plain)
    # with one site missing (dropout) the masks do not cancel: no recovery (documented)
    partial = unmask_sum([masked["a"], masked["b"]])
    assert not np.array_equal(partial, vectors["a"] + vectors["b"])


def test_pair_masks_are_symmetric_and_round_specific():
    ka, kb = x25519.X25519PrivateKey.generate(), x25519.X25519PrivateKey.generate()
    m_ab = pair_mask(ka, kb.public_key(), "a", "b", "r1", 100)
    m_ba = pair_mask(kb, ka.public_key(), "a", "b", "r1", 100)
    np.testing.assert_array_equal(m_ab, m_ba)
    assert not np.array_equal(m_ab, pair_mask(ka, kb.public_key(), "a", "b", "r2", 100))
    # prefix property: a longer stream extends a shorter one
    np.testing.assert_array_equal(pair_mask(ka, kb.public_key(), "a", "b", "r1", 10), m_ab[:10])
    with pytest.raises(InputError):
        pair_mask(ka, kb.public_key(), "b", "a", "r1", 10)


def test_wrong_round_or_key_breaks_the_sum():
    rng = np.random.default_rng(2)
    names = ["x", "y", "z"]
    keys = _keys(names)
    vectors = {s: rng.integers(0, 50, size=32) for s in names}
    pubs = {s: k.public_key() for s, k in keys.items()}
    m = _round(vectors, keys, "r")
    m_other = mask_counts("z", vectors["z"], keys["z"], {p: pubs[p] for p in ("x", "y")}, "r-other")
    assert not np.array_equal(unmask_sum([m["x"], m["y"], m_other]), sum(vectors.values()))


def test_input_validation():
    keys = _keys(["a", "b"])
    pub_b = {"b": keys["b"].public_key()}
    with pytest.raises(InputError, match="integer"):
        mask_counts("a", np.array([1.5, 2.0]), keys["a"], pub_b, "r")
    with pytest.raises(InputError, match="NaN"):
        mask_counts("a", np.array([np.nan]), keys["a"], pub_b, "r")
    with pytest.raises(InputError, match="at least one peer"):
        mask_counts("a", np.array([1]), keys["a"], {}, "r")
    with pytest.raises(InputError, match="own"):
        mask_counts("a", np.array([1]), keys["a"], {"a": keys["b"].public_key(), **pub_b}, "r")
    with pytest.raises(InputError, match="round id"):
        mask_counts("a", np.array([1]), keys["a"], pub_b, "")
    with pytest.raises(InputError, match="shapes"):
        unmask_sum([np.zeros(3, np.uint64), np.zeros(4, np.uint64)])
    with pytest.raises(InputError, match="uint64"):
        unmask_sum([np.zeros(3, np.int64)])
    # integer-valued floats are fine
    m = mask_counts("a", np.array([3.0, 4.0]), keys["a"], pub_b, "r")
    m2 = mask_counts("b", np.array([1, 1]), keys["b"], {"a": keys["a"].public_key()}, "r")
    np.testing.assert_array_equal(unmask_sum([m, m2]), [4, 5])


def _site_tables(rng, n_noisy=False):
    lab = "y"
    t1 = MarginalTable(("y",), rng.integers(0, 50, size=2))
    t2 = MarginalTable(("a", "y"), rng.integers(0, 50, size=(3, 2)))
    t3 = MarginalTable(("a", "b", "y"), rng.integers(0, 20, size=(3, 4, 2)))
    mom = MarginalTable(("age", lab), np.vstack([rng.uniform(0, 500, 2), rng.uniform(0, 9000, 2)]), kind="moments")
    if n_noisy:
        rec = NoiseRecord("laplace", scale=2.0, std=2.0 * np.sqrt(2), epsilon=0.5)
        t2 = MarginalTable(t2.clique, t2.counts - 3, noise=rec)  # integer noise may go negative
    return [t1, t2, t3, mom]


def test_tables_through_a_secure_round_equal_the_plain_aggregate():
    rng = np.random.default_rng(3)
    names = ["h-north", "h-south", "h-east"]
    keys = _keys(names)
    site_tables = {s: _site_tables(rng, n_noisy=(s == "h-east")) for s in names}
    bits = 16
    secure = secure_sum_tables(site_tables, keys, fractional_bits=bits)
    plain, dropped = sum_tables([site_tables[s] for s in sorted(names)])
    assert not dropped
    assert [t.clique for t in secure] == [t.clique for t in plain]
    for ts, tp in zip(secure, plain):
        assert ts.kind == tp.kind and ts.shape == tp.shape
        assert ts.noise == tp.noise
        if ts.kind == "counts":
            np.testing.assert_array_equal(ts.counts, tp.counts)
        else:
            np.testing.assert_allclose(ts.counts, tp.counts, rtol=0, atol=len(names) * 2.0 ** -(bits + 1))


def test_masked_tables_hide_each_site_and_layout_mismatch_is_refused():
    rng = np.random.default_rng(4)
    keys = _keys(["a", "b"])
    ta, tb = _site_tables(rng), _site_tables(rng)
    ma = mask_tables("a", ta, keys["a"], {"b": keys["b"].public_key()}, "r")
    plain = np.concatenate([t.counts.ravel() for t in ta[:3]]).astype(np.int64).view(np.uint64)
    assert not np.any(ma.vector[: plain.size] == plain)
    tb_bad = tb[:2] + [MarginalTable(("a", "c", "y"), tb[2].counts)] + tb[3:]
    mb = mask_tables("b", tb_bad, keys["b"], {"a": keys["a"].public_key()}, "r")
    with pytest.raises(InputError, match="differ"):
        unmask_tables([ma, mb])
    with pytest.raises(InputError, match="twice"):
        unmask_tables([ma, ma])
    with pytest.raises(InputError, match="at least two sites"):
        secure_sum_tables({"a": ta}, keys)
    with pytest.raises(InputError, match="overflows"):
        big = [MarginalTable(("age", "y"), np.full((2, 2), 1e15), kind="moments")]
        mask_tables("a", big, keys["a"], {"b": keys["b"].public_key()}, "r", fractional_bits=16)


def test_summary_from_a_secure_round_equals_the_plain_aggregate_of_bundles():
    """Three sites' bundles: the learner's Summary (τ, its std, Q, d) from the masked round
    equals the one from plain aggregation of the same bundles."""
    cb = Codebook(
        features=(CategoricalFeature("a", ("0", "1", "2")), CategoricalFeature("b", ("u", "v")),
                  NumericFeature("age", lo=0.0, hi=100.0)),
        label=Label("y", ("neg", "pos")),
    )
    rng = np.random.default_rng(7)
    bundles = []
    for s, n in (("s1", 50), ("s2", 80), ("s3", 35)):
        X = np.column_stack([rng.integers(0, 3, n), rng.integers(0, 2, n), rng.uniform(0, 100, n)])
        tabs = count_tables(cb, X, rng.integers(0, 2, n), plan_cliques(cb, "all"))
        bundles.append(Bundle.from_bytes(Bundle.build(cb, tabs, site=s, n_rows=n).to_bytes()))
    plain = summary_from_bundles(bundles)
    keys = _keys([b.site for b in bundles])
    secure = Summary.from_tables(cb, secure_sum_tables({b.site: b.tables for b in bundles}, keys, fractional_bits=20))
    assert secure.n == plain.n
    np.testing.assert_array_equal(Q_of(secure), Q_of(plain))
    np.testing.assert_array_equal(d_of(secure), d_of(plain))
    np.testing.assert_allclose(tau_of(secure), tau_of(plain), rtol=0, atol=3 * 2.0**-21 / plain.n)
    np.testing.assert_allclose(tau_std_of(secure), tau_std_of(plain), rtol=1e-6, atol=1e-9)
