import struct

import numpy as np
import pytest

from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label
from marg.errors import InputError
from marg.marginals.counts.counting import count_tables
from marg.marginals.counts.tables import plan_cliques
from marg.protocols.aggregate import summary_from_bundles
from marg.protocols.bundle import Bundle, load_bundle
from tests.conftest import random_codebook, random_rows


def make_bundle(rng, cb=None, site="alpha", n=200, stats="all"):
    cb = cb or random_codebook(rng, n_features=3, numeric=1)
    X, y = random_rows(rng, cb, n)
    return Bundle.build(cb, count_tables(cb, X, y, plan_cliques(cb, stats)), site=site, n_rows=n), cb


def test_round_trip_is_byte_exact(tmp_path, rng):
    b, cb = make_bundle(rng)
    raw = b.to_bytes()
    b2 = Bundle.from_bytes(raw)
    assert b2.to_bytes() == raw
    b.save(tmp_path / "x.bundle")
    assert (tmp_path / "x.bundle").read_bytes() == raw
    b3 = load_bundle(tmp_path / "x.bundle")
    assert b3.codebook == cb
    for t, u in zip(b3.tables, b.tables):
        assert t.clique == u.clique and t.kind == u.kind
        np.testing.assert_array_equal(t.counts, u.counts)
    assert b3.digest() == b.digest()
    assert b.signing_bytes() == b.with_signature({"alg": "x"}).signing_bytes()


def test_every_payload_byte_is_covered(rng):
    b, _ = make_bundle(rng, n=50)
    raw = bytearray(b.to_bytes())
    (hlen,) = struct.unpack(">I", raw[8:12])
    for pos in range(12 + hlen, len(raw), max(1, (len(raw) - 12 - hlen) // 40)):
        bad = bytearray(raw)
        bad[pos] ^= 0x01
        with pytest.raises(InputError, match="checksum"):
            Bundle.from_bytes(bytes(bad))


@pytest.mark.parametrize(
    "mutate, needle",
    [
        (lambda r: b"NOTMARG!" + r[8:], "bad magic"),
        (lambda r: r[:10], "not a marg bundle|truncated"),
        (lambda r: r[:8] + struct.pack(">I", 10**7) + r[12:], "truncated or corrupt header"),
        (lambda r: r + b"\x00", "checksum"),
        (lambda r: r[:12] + r[12:40].replace(b'"', b"'", 1) + r[40:], "corrupt header"),
    ],
)
def test_malformed_bundles(rng, mutate, needle):
    b, _ = make_bundle(rng, n=30)
    with pytest.raises(InputError, match=needle):
        Bundle.from_bytes(mutate(b.to_bytes()))


def test_different_fingerprint_refused_at_aggregation(rng):
    b1, cb = make_bundle(rng, site="a")
    other = Codebook(features=cb.features[:-1] + (CategoricalFeature("zz", ("0", "1")),), label=cb.label)
    b2, _ = make_bundle(rng, cb=other, site="b")
    with pytest.raises(InputError, match="codebook fingerprint .* differs"):
        summary_from_bundles([b1, b2], ["a.bundle", "b.bundle"])
    b3, _ = make_bundle(rng, cb=cb, site="a")
    with pytest.raises(InputError, match=r"site 'a' already released N\[y\] in bundle #1"):
        summary_from_bundles([b1, b3])


def test_aggregation_keeps_only_common_tables(rng):
    cb = random_codebook(rng, n_features=3)
    b1, _ = make_bundle(rng, cb=cb, site="a", stats="all")
    b2, _ = make_bundle(rng, cb=cb, site="b", stats="first")
    s = summary_from_bundles([b1, b2])
    assert s.n == 400
    assert s.pairs == []
    assert len(s.provenance["dropped_tables"]) == 3
    assert [p["site"] for p in s.provenance["sites"]] == ["a", "b"]


def test_describe(rng):
    cb = Codebook(features=(CategoricalFeature("a", ("x", "y")),), label=Label("t", ("0", "1")))
    b, _ = make_bundle(rng, cb=cb, n=10, stats="first")
    d = b.describe()
    assert d["n_statistics"] == 2 and d["cells"] == 2 + 4 and d["signed"] is False and d["n_rows"] == 10
