"""A bundle's canonical bytes, digest and codebook are made once per bundle (:class:`marg.protocols.bundle.Bundle`):
what the memo gives equals what a fresh bundle of the same header and arrays computes, the codebook a built bundle
keeps is the one its header parses to, and a copy with another codebook parses its own."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from marg.marginals.counts.counting import count_tables
from marg.marginals.counts.tables import plan_cliques
from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label, NumericFeature
from marg.protocols.bundle import Bundle
from tests.helpers.data import random_codebook, random_rows

CODEBOOKS = {
    "random": lambda rng: random_codebook(rng, n_features=3, numeric=1),
    "missing levels and bins": lambda rng: Codebook(
        features=(CategoricalFeature("a", (" x", "y ", "?"), missing="?"),
                  NumericFeature("b", edges=(0.5, 2.0), missing=True), NumericFeature("c", lo=-1.0, hi=3.0)),
        label=Label("y", ("neg", "pos"))),
    "privacy unit": lambda rng: Codebook(features=(CategoricalFeature("a", ("0", "1")),),
                                         label=Label("y", ("no", "yes")), privacy_unit=("pid", 3)),
    "draft": lambda rng: Codebook(features=(CategoricalFeature("a", ("0", "1")),), label=Label("y", ("no", "yes")),
                                  draft=True),
}


def fresh(b: Bundle) -> Bundle:
    return Bundle(header=dict(b.header), arrays=b.arrays)


@pytest.mark.parametrize("kind", sorted(CODEBOOKS))
def test_the_memo_gives_what_a_fresh_bundle_computes(rng, kind):
    cb = CODEBOOKS[kind](rng)
    X, y = random_rows(rng, cb, 60)
    b = Bundle.build(cb, count_tables(cb, X, y, plan_cliques(cb, "first")), site="s1", n_rows=60)
    parsed = Codebook.from_dict(b.header["codebook"])
    assert b.codebook == parsed and b.codebook.fingerprint == b.fingerprint
    for c in (b, b.with_signature({"alg": "x"}), b.with_header(recipient="r", n_rows=None)):
        f = fresh(c)
        assert c.to_bytes() == f.to_bytes() and c.to_bytes() == c.to_bytes()
        assert c.digest() == hashlib.sha256(f.to_bytes()).hexdigest() == f.digest()
        assert c.codebook == Codebook.from_dict(c.header["codebook"]) == f.codebook
    assert b.with_signature({"alg": "x"}).to_bytes() != b.to_bytes()
    assert Bundle.from_bytes(b.to_bytes()).to_bytes() == b.to_bytes()


def test_a_copy_with_another_codebook_parses_its_own(rng):
    cb = random_codebook(rng, n_features=2)
    X, y = random_rows(rng, cb, 40)
    b = Bundle.build(cb, count_tables(cb, X, y, plan_cliques(cb, "first")), site="s1", n_rows=40)
    assert b.codebook == cb
    other = dict(b.header["codebook"])
    other["label"] = {"name": "y", "classes": ["u", "v"]}
    c = b.with_header(codebook=other)
    with pytest.raises(Exception, match="fingerprint"):
        c.codebook  # noqa: B018 - the property parses and checks
    assert Codebook.from_dict(other) != cb
    np.testing.assert_array_equal(c.arrays[0], b.arrays[0])
