"""Sealing to the learner's X25519 key (protocols.sealing): round trip, wrong key, tamper."""

from __future__ import annotations

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric import x25519

from marg.errors import RefusedError
from marg.protocols import keys as K
from marg.protocols.sealing import HEADER_SIZE, TAG_SIZE, is_sealed, open_sealed, seal, sealed_recipient


@pytest.fixture(scope="module")
def learner():
    return x25519.X25519PrivateKey.generate()


@pytest.mark.parametrize("size", [0, 1, 100, 70_000])
def test_round_trip(learner, size):
    data = np.random.default_rng(size).bytes(size)
    s = seal(data, learner.public_key())
    assert is_sealed(s) and not is_sealed(data[:8] if size >= 8 else data)
    assert len(s) == size + HEADER_SIZE + TAG_SIZE
    assert open_sealed(s, learner) == data
    assert sealed_recipient(s) == K.key_id(learner)
    if size >= 32:
        # ciphertext hides the plaintext: it does not occur verbatim
        assert data[:32] not in s


def test_each_seal_is_fresh(learner):
    a, b = seal(b"same", learner.public_key()), seal(b"same", learner.public_key())
    assert a != b  # fresh ephemeral key and nonce
    assert open_sealed(a, learner) == open_sealed(b, learner) == b"same"


def test_wrong_key_refused(learner):
    s = seal(b"counts", learner.public_key())
    other = x25519.X25519PrivateKey.generate()
    with pytest.raises(RefusedError, match="not to the given key") as ei:
        open_sealed(s, other, name="b1.bundle")
    assert "b1.bundle" in str(ei.value) and "\n" not in str(ei.value)


def test_every_single_byte_flip_is_refused(learner):
    data = b"a small plaintext of some length"
    s = seal(data, learner.public_key())
    rng = np.random.default_rng(0)
    for i in range(len(s)):
        bad = bytearray(s)
        bad[i] ^= int(rng.integers(1, 256))
        with pytest.raises(RefusedError) as ei:
            open_sealed(bytes(bad), learner)
        assert "\n" not in str(ei.value)


def test_truncation_and_extension_refused(learner):
    s = seal(b"payload", learner.public_key())
    for cut in (0, 5, 8, HEADER_SIZE, HEADER_SIZE + TAG_SIZE - 1, len(s) - 1):
        with pytest.raises(RefusedError):
            open_sealed(s[:cut], learner)
    with pytest.raises(RefusedError):
        open_sealed(s + b"\x00", learner)


def test_header_swapped_to_other_recipient_refused(learner):
    """Re-addressing a sealed file (editing the recipient id) is refused."""
    other = x25519.X25519PrivateKey.generate()
    s = bytearray(seal(b"x" * 50, learner.public_key()))
    s[9:41] = bytes.fromhex(K.key_id(other))
    with pytest.raises(RefusedError):
        open_sealed(bytes(s), other)
