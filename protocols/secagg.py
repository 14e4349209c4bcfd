"""Secure aggregation's masks: integer vectors masked so the masks cancel in the sum, recoverable after dropouts.

Every pair of sites ``a < b`` (names in lexicographic order) derives a shared secret
from their X25519 sealing keys, ``s_ab = X25519(sk_a, pk_b) = X25519(sk_b, pk_a)``, and
from it, for one round, a pseudo-random mask vector::

    k_ab = HKDF-SHA256(s_ab, salt = b"marg-secagg-v1", info = round_id || 0 || a || 0 || b)
    m_ab = ChaCha20(k_ab, nonce = 0) keystream, read as little-endian uint64, length L

Site ``i`` uploads ``v_i + Σ_{j > i} m_ij − Σ_{j < i} m_ji  (mod 2^64)``. Each mask is
added by one site of its pair and subtracted by the other, so

    Σ_i masked_i = Σ_i v_i  (mod 2^64),

which the aggregator reads back as int64 (:func:`unmask_sum`). A single masked vector is
uniformly distributed given the others' keys are unknown: the aggregator learns the sum
and nothing else, as long as at least two sites do not collude with it.

**Dropouts** (SecAgg, Bonawitz et al. 2017). A site that masks only pairwise cannot drop
out: its partners' masks would not cancel. So each site also adds a **self mask**
``PRG(b_i)`` from a fresh random seed, and secret-shares (:mod:`protocols.shamir`, threshold
``t``) both ``b_i`` and every pairwise seed ``k_ij`` among the round's sites. Once the learner
knows which sites uploaded (the survivors ``U``), each surviving site reveals its shares of
``b_i`` for ``i ∈ U`` and of ``k_ij`` for ``i ∈ U``, ``j ∉ U`` — never both kinds for one site.
:func:`recover_sum` then removes the self masks and the masks shared with dropped sites:
``Σ_{i∈U} masked_i − Σ_{i∈U} PRG(b_i) − Σ_{i∈U, j∉U} ±m_ij = Σ_{i∈U} v_i``. One site's
vector stays hidden by its masks with the other survivors. The file protocol around this
(round, uploads, request, reveals) is :mod:`protocols.secagg_round`; marginal tables as one
masked vector (flattening, fixed point, layouts) are :mod:`protocols.secagg_tables`.

Limits (by design, documented):

* **A round id is used once.** Two vectors masked under the same round id by the same
  site share masks, so their difference leaks. :func:`protocols.secagg_tables.secure_sum_tables`
  draws a fresh random round id; callers of :func:`mask_counts` must do the same.
* Peer public keys must be authentic (e.g. distributed with the trust store); secure
  aggregation hides the values, it does not authenticate sites.
* Values are integers: counts exactly; real-valued moment tables are sent in fixed point
  with ``fractional_bits`` bits (rounding error ``≤ 2^-(bits+1)`` per site and cell).
  The true sum must lie in the int64 range.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import x25519
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from marg.errors import InputError

from .keys import public_bytes, validate_site_name

_SALT = b"marg-secagg-v1"
_INT64_MAX = 2**63 - 1


def _check_round_id(round_id: str) -> bytes:
    if not isinstance(round_id, str) or not round_id or "\x00" in round_id:
        raise InputError(f"round id must be a non-empty string without NUL, got {round_id!r}")
    return round_id.encode("utf-8")


def pair_seed(
    my_key: x25519.X25519PrivateKey,
    peer_key: x25519.X25519PublicKey,
    first: str,
    second: str,
    round_id: str,
) -> bytes:
    """The 32-byte seed ``k_ab`` of sites ``first < second`` for one round (either site computes it)."""
    if not first < second:
        raise InputError(f"pair mask needs first < second, got {first!r}, {second!r}")
    rid = _check_round_id(round_id)
    try:
        shared = my_key.exchange(peer_key)
    except ValueError:
        raise InputError(f"X25519 agreement between {first!r} and {second!r} failed (invalid peer key)") from None
    info = rid + b"\x00" + first.encode("utf-8") + b"\x00" + second.encode("utf-8")
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=_SALT, info=info).derive(shared)


def expand(seed: bytes, length: int) -> np.ndarray:
    """The ChaCha20 keystream of a 32-byte ``seed`` (nonce 0) as ``length`` little-endian uint64."""
    if length < 0:
        raise InputError(f"mask length must be >= 0, got {length}")
    enc = Cipher(algorithms.ChaCha20(bytes(seed), b"\x00" * 16), mode=None).encryptor()
    return np.frombuffer(enc.update(b"\x00" * (8 * length)), dtype="<u8").astype(np.uint64)


def pair_mask(
    my_key: x25519.X25519PrivateKey,
    peer_key: x25519.X25519PublicKey,
    first: str,
    second: str,
    round_id: str,
    length: int,
) -> np.ndarray:
    """The mask ``m_ab = expand(k_ab)`` shared by sites ``first < second`` for one round.

    Parameters
    ----------
    my_key : X25519PrivateKey
        Private sealing key of one of the two sites.
    peer_key : X25519PublicKey
        Public sealing key of the other.
    first, second : str
        The two site names, ``first < second``.
    round_id : str
    length : int
        Number of uint64 entries L.

    Returns
    -------
    ndarray of uint64, shape (L,)
        Both sites compute the same array (X25519 agreement is symmetric).
    """
    if length < 0:
        raise InputError(f"mask length must be >= 0, got {length}")
    return expand(pair_seed(my_key, peer_key, first, second, round_id), length)


def to_int64(values: np.ndarray, what: str) -> np.ndarray:
    v = np.asarray(values)
    if v.dtype.kind in "iu":
        if v.dtype.kind == "u" and v.size and int(v.max()) > _INT64_MAX:
            raise InputError(f"{what}: value {int(v.max())} exceeds the int64 range")
        return v.astype(np.int64).ravel()
    if v.dtype.kind == "f":
        if not np.all(np.isfinite(v)):
            raise InputError(f"{what}: values contain NaN or infinity")
        r = np.rint(v)
        bad = np.flatnonzero(r != v)
        if bad.size:
            raise InputError(f"{what}: secure aggregation needs integer values, got {v.ravel()[bad[0]]!r}")
        if r.size and float(np.abs(r).max()) > 2.0**62:
            raise InputError(f"{what}: value {float(np.abs(r).max())!r} too large for 64-bit aggregation")
        return r.astype(np.int64).ravel()
    raise InputError(f"{what}: expected a numeric vector, got dtype {v.dtype}")


def mask_counts(
    site_name: str,
    counts_vector: np.ndarray,
    my_seal_key: x25519.X25519PrivateKey,
    peer_public_keys: Mapping[str, x25519.X25519PublicKey],
    round_id: str,
    self_seed: bytes | None = None,
) -> np.ndarray:
    """Mask one site's integer vector for a secure-aggregation round.

    ``masked = v + expand(b) + Σ_{peer > me} m_(me,peer) − Σ_{peer < me} m_(peer,me)  (mod 2^64)``,
    the self mask ``expand(b)`` only with ``self_seed = b`` (dropout-tolerant rounds).

    Parameters
    ----------
    site_name : str
        This site's name; the site order is lexicographic order of names.
    counts_vector : array_like of int (or integer-valued float), shape (L,) or any
        Flattened in C order. Negative integers are allowed (two's complement).
    my_seal_key : X25519PrivateKey
        This site's private sealing key.
    peer_public_keys : dict[str, X25519PublicKey]
        Every *other* site of the round (an entry for ``site_name`` itself is allowed if it
        is this site's own public key). At least one peer.
    round_id : str
        Fresh per masked vector; never reuse (see module notes).

    Returns
    -------
    ndarray of uint64, shape (L,)
    """
    validate_site_name(site_name)
    if not isinstance(my_seal_key, x25519.X25519PrivateKey):
        raise InputError(f"site {site_name!r}: masking needs an X25519 private key, got {type(my_seal_key).__name__}")
    v = to_int64(counts_vector, f"site {site_name!r} counts").view(np.uint64)
    peers = dict(peer_public_keys)
    if site_name in peers:
        own = peers.pop(site_name)
        if not isinstance(own, x25519.X25519PublicKey) or public_bytes(own) != public_bytes(my_seal_key):
            raise InputError(f"peer list gives site {site_name!r} a public key that is not this site's own")
    if not peers:
        raise InputError(f"site {site_name!r}: a secure-aggregation round needs at least one peer")
    out = v.copy()
    if self_seed is not None:
        out += expand(self_seed, out.size)
    for peer in sorted(peers):
        validate_site_name(peer)
        pk = peers[peer]
        if not isinstance(pk, x25519.X25519PublicKey):
            raise InputError(f"peer {peer!r}: expected an X25519 public key, got {type(pk).__name__}")
        if site_name < peer:
            out += pair_mask(my_seal_key, pk, site_name, peer, round_id, out.size)
        else:
            out -= pair_mask(my_seal_key, pk, peer, site_name, round_id, out.size)
    return out


def unmask_sum(masked_vectors: Sequence[np.ndarray]) -> np.ndarray:
    """Sum the masked vectors of *all* sites of a round: the plain sum, as int64.

    Parameters
    ----------
    masked_vectors : sequence of uint64 arrays, each shape (L,)

    Returns
    -------
    ndarray of int64, shape (L,)
        ``Σ_i masked_i mod 2^64`` read as two's complement; equals ``Σ_i v_i`` when every
        site of the round contributed exactly once.
    """
    vs = [np.asarray(m) for m in masked_vectors]
    if not vs:
        raise InputError("unmask_sum needs at least one masked vector")
    shapes = {v.shape for v in vs}
    if len(shapes) != 1:
        raise InputError(f"masked vectors have different shapes: {sorted(shapes)}")
    for v in vs:
        if v.dtype != np.uint64:
            raise InputError(f"masked vectors must be uint64, got {v.dtype}")
    total = np.zeros(vs[0].shape, dtype=np.uint64)
    for v in vs:
        total += v  # wraps mod 2^64
    return total.view(np.int64)


def recover_sum(
    masked: Mapping[str, np.ndarray],
    self_seeds: Mapping[str, bytes],
    dangling: Mapping[tuple[str, str], bytes],
) -> np.ndarray:
    """The survivors' plain sum from their masked vectors and the recovered seeds.

    Parameters
    ----------
    masked : {site: uint64 vector} of the survivors U
    self_seeds : {site: b_site} for every site of U
    dangling : {(survivor, dropped): k} the pairwise seeds between U and the dropped sites

    Returns
    -------
    ndarray of int64
        ``Σ_{i∈U} masked_i − Σ_{i∈U} expand(b_i) − Σ ±expand(k_ij)`` read as two's complement:
        ``Σ_{i∈U} v_i``.
    """
    if not masked:
        raise InputError("no masked vectors to recover a sum from")
    missing = sorted(set(masked) - set(self_seeds))
    if missing:
        raise InputError(f"no self-mask seed for surviving site {missing[0]!r}")
    total = unmask_sum(list(masked.values())).view(np.uint64).copy()
    size = total.size
    for site in masked:
        total -= expand(self_seeds[site], size)
    for (i, j), seed in dangling.items():
        if i not in masked or j in masked:
            raise InputError(f"pair ({i!r}, {j!r}) is not a survivor with a dropped site")
        m = expand(seed, size)
        if i < j:
            total -= m  # i added m_ij
        else:
            total += m  # i subtracted m_ji
    return total.view(np.int64)
