"""Sealing: public-key encryption of a bundle to the learner's X25519 key.

A sealed file is::

    header (85 bytes, authenticated as AES-GCM associated data)
        magic          b"MARGSEAL"                       8 bytes
        version        1                                  1 byte
        recipient id   sha256(recipient raw public key)  32 bytes
        ephemeral pub  X25519 raw public key             32 bytes
        nonce          random                            12 bytes
    ciphertext || tag  AES-256-GCM(key, nonce, plaintext, aad=header)

with ``key = HKDF-SHA256(ikm = X25519(ephemeral, recipient), salt = ephemeral_pub ||
recipient_pub, info = b"marg-seal-v1", length = 32)``. A fresh ephemeral key per file
gives forward secrecy for the sender: only the recipient's private key opens it.

Sealing gives confidentiality (only the learner reads the counts) and integrity of the
ciphertext, but not sender authentication: anyone may seal to the learner. Sender identity
comes from the Ed25519 signature *inside* (sign, then seal; see
:mod:`protocols.signing`).

Every failure to open (not a sealed file, truncated, unknown version, wrong key, any
altered byte) is a one-line :class:`~marginals.errors.RefusedError`.
"""

from __future__ import annotations

import os
import struct

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import x25519
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from marg.errors import InputError, RefusedError

from .keys import key_id, public_bytes, short_id

SEAL_MAGIC = b"MARGSEAL"
SEAL_VERSION = 1
_HKDF_INFO = b"marg-seal-v1"
_HEADER = struct.Struct(">8sB32s32s12s")
HEADER_SIZE = _HEADER.size  # 85
TAG_SIZE = 16


def is_sealed(data: bytes) -> bool:
    """Whether ``data`` starts with the sealed-file magic ``b"MARGSEAL"``."""
    return bytes(data[: len(SEAL_MAGIC)]) == SEAL_MAGIC


def _derive(shared: bytes, eph_pub: bytes, rcpt_pub: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=eph_pub + rcpt_pub, info=_HKDF_INFO).derive(shared)


def seal(data: bytes, recipient: x25519.X25519PublicKey) -> bytes:
    """Encrypt ``data`` so that only the holder of ``recipient``'s private key can read it.

    Parameters
    ----------
    data : bytes
        Plaintext (typically a signed bundle's bytes).
    recipient : X25519PublicKey
        The learner's ``*.seal.pub``.

    Returns
    -------
    bytes
        ``header (85 bytes) || AES-256-GCM ciphertext || 16-byte tag``; length
        ``len(data) + 101``.
    """
    if not isinstance(recipient, x25519.X25519PublicKey):
        raise InputError(f"seal recipient must be an X25519 public key, got {type(recipient).__name__}")
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InputError(f"can only seal bytes, got {type(data).__name__}")
    eph = x25519.X25519PrivateKey.generate()
    eph_pub = public_bytes(eph.public_key())
    rcpt_pub = public_bytes(recipient)
    key = _derive(eph.exchange(recipient), eph_pub, rcpt_pub)
    nonce = os.urandom(12)
    header = _HEADER.pack(SEAL_MAGIC, SEAL_VERSION, bytes.fromhex(key_id(recipient)), eph_pub, nonce)
    return header + AESGCM(key).encrypt(nonce, bytes(data), header)


def sealed_recipient(data: bytes) -> str:
    """Key id (hex) of the X25519 key a sealed file is addressed to.

    Raises :class:`RefusedError` if ``data`` is not a (complete) sealed file header.
    """
    if not is_sealed(data):
        raise RefusedError("not a sealed marg file (magic is not MARGSEAL)")
    if len(data) < HEADER_SIZE + TAG_SIZE:
        raise RefusedError(f"sealed file truncated ({len(data)} bytes, at least {HEADER_SIZE + TAG_SIZE} needed)")
    return _HEADER.unpack_from(data)[2].hex()


def open_sealed(data: bytes, private_key: x25519.X25519PrivateKey, name: str = "sealed file") -> bytes:
    """Decrypt a sealed file with the recipient's X25519 private key.

    Parameters
    ----------
    data : bytes
        Output of :func:`seal`.
    private_key : X25519PrivateKey
        The recipient's ``*.seal.key``.
    name : str
        How to name the file in error messages.

    Returns
    -------
    bytes
        The plaintext.

    Raises
    ------
    RefusedError
        Not sealed, truncated, unknown version, sealed to another key, or any altered
        byte (the AES-GCM tag covers header and ciphertext).
    """
    if not isinstance(private_key, x25519.X25519PrivateKey):
        raise InputError(f"opening a sealed file needs an X25519 private key, got {type(private_key).__name__}")
    data = bytes(data)
    if not is_sealed(data):
        raise RefusedError(f"{name}: not a sealed marg file (magic is not MARGSEAL)")
    if len(data) < HEADER_SIZE + TAG_SIZE:
        raise RefusedError(f"{name}: sealed file truncated ({len(data)} bytes, at least {HEADER_SIZE + TAG_SIZE} "
                           "needed)")
    magic, version, rcpt_id, eph_pub, nonce = _HEADER.unpack_from(data)
    if version != SEAL_VERSION:
        raise RefusedError(f"{name}: unsupported sealed-file version {version} (expected {SEAL_VERSION}; altered?)")
    mine = key_id(private_key)
    if rcpt_id.hex() != mine:
        raise RefusedError(
            f"{name}: sealed to key {short_id(rcpt_id.hex())}, not to the given key {short_id(mine)} (wrong key or "
            "altered)"
        )
    try:
        shared = private_key.exchange(x25519.X25519PublicKey.from_public_bytes(eph_pub))
    except ValueError:  # low-order point: all-zero shared secret
        raise RefusedError(f"{name}: invalid ephemeral key in sealed header (altered)") from None
    key = _derive(shared, eph_pub, public_bytes(private_key.public_key()))
    try:
        return AESGCM(key).decrypt(nonce, data[HEADER_SIZE:], data[:HEADER_SIZE])
    except InvalidTag:
        raise RefusedError(f"{name}: decryption failed (altered bytes or wrong key)") from None

