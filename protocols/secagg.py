"""Secure aggregation: masked count vectors whose masks cancel in the sum, recoverable after dropouts.

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
(round, uploads, request, reveals) is :mod:`protocols.secagg_round`.

Limits (by design, documented):

* **A round id is used once.** Two vectors masked under the same round id by the same
  site share masks, so their difference leaks. :func:`secure_sum_tables` draws a fresh
  random round id; callers of :func:`mask_counts` must do the same.
* Peer public keys must be authentic (e.g. distributed with the trust store); secure
  aggregation hides the values, it does not authenticate sites.
* Values are integers: counts exactly; real-valued moment tables are sent in fixed point
  with ``fractional_bits`` bits (rounding error ``≤ 2^-(bits+1)`` per site and cell).
  The true sum must lie in the int64 range.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import x25519
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from marg.errors import InputError
from marg.marginals.summary import sum_tables
from marg.marginals.tables import MarginalTable

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


def _to_int64(values: np.ndarray, what: str) -> np.ndarray:
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
    v = _to_int64(counts_vector, f"site {site_name!r} counts").view(np.uint64)
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


# ---------------------------------------------------------------------------------------
# tables through a round
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MaskedTables:
    """One site's contribution to a secure round over marginal tables.

    Attributes
    ----------
    site : str
    round_id : str
    layout : tuple of (clique, kind, shape, NoiseRecord)
        Public metadata of the tables, in order (the same cliques at every site).
    fractional_bits : int
        Fixed-point bits used for ``kind="moments"`` tables (counts are exact integers).
    vector : ndarray of uint64
        The masked concatenation of all tables' cells (C order).
    """

    site: str
    round_id: str
    layout: tuple
    fractional_bits: int
    vector: np.ndarray


def encode_tables(site: str, tables: Sequence[MarginalTable], fractional_bits: int, n_sites: int) -> np.ndarray:
    """A site's tables as one int64 vector (C order): counts exactly, moments as ``round(c · 2^bits)``."""
    parts = []
    for t in tables:
        if t.kind == "counts":
            parts.append(_to_int64(t.counts, f"site {site!r} table {t.name}"))
        else:
            scaled = np.asarray(t.counts, dtype=np.float64) * float(2**fractional_bits)
            limit = 2.0**62 / max(n_sites, 1)
            if scaled.size and float(np.abs(scaled).max()) > limit:
                raise InputError(
                    f"site {site!r} table {t.name}: value {float(np.abs(t.counts).max())!r} overflows "
                    f"{fractional_bits}-bit fixed point; lower fractional_bits"
                )
            parts.append(np.rint(scaled).astype(np.int64).ravel())
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def mask_tables(
    site_name: str,
    tables: Sequence[MarginalTable],
    my_seal_key: x25519.X25519PrivateKey,
    peer_public_keys: Mapping[str, x25519.X25519PublicKey],
    round_id: str,
    fractional_bits: int = 16,
    self_seed: bytes | None = None,
) -> MaskedTables:
    """Mask a site's tables for a round (flatten, fixed-point the moments, mask).

    Parameters
    ----------
    site_name, my_seal_key, peer_public_keys, round_id
        As in :func:`mask_counts`.
    tables : sequence of MarginalTable
        ``kind="counts"`` tables must hold integer values (exact or integer-noised counts).
    fractional_bits : int, default 16
        Fixed point for moment tables: cell ``c`` is sent as ``round(c · 2^bits)``.
    self_seed : bytes, optional
        The site's self-mask seed ``b`` (dropout-tolerant rounds, :func:`recover_sum`).

    Returns
    -------
    MaskedTables
    """
    if not isinstance(fractional_bits, int) or not 0 <= fractional_bits <= 40:
        raise InputError(f"fractional_bits must be an integer in 0..40, got {fractional_bits!r}")
    if not tables:
        raise InputError(f"site {site_name!r}: no tables to aggregate")
    n_sites = len(set(peer_public_keys) | {site_name})
    vec = encode_tables(site_name, tables, fractional_bits, n_sites)
    masked = mask_counts(site_name, vec, my_seal_key, peer_public_keys, round_id, self_seed)
    layout = tuple((t.clique, t.kind, t.shape, t.noise) for t in tables)
    return MaskedTables(site=site_name, round_id=round_id, layout=layout, fractional_bits=fractional_bits, vector=masked)


def check_layouts(contributions: Sequence[MaskedTables]) -> None:
    """The contributions of one round agree: one per site, one round id, the same tables in
    the same order (cliques, kinds, shapes) and the same fixed point."""
    if not contributions:
        raise InputError("no contributions to a secure round")
    first = contributions[0]
    sites = [c.site for c in contributions]
    if len(set(sites)) != len(sites):
        dup = next(s for s in sites if sites.count(s) > 1)
        raise InputError(f"site {dup!r} contributed twice to round {first.round_id!r}")
    shape_key = tuple((cl, kind, shape) for cl, kind, shape, _ in first.layout)
    if len({(cl, kind) for cl, kind, _ in shape_key}) != len(shape_key):
        raise InputError(f"site {first.site!r} sent the same table twice in round {first.round_id!r}")
    for c in contributions[1:]:
        if c.round_id != first.round_id:
            raise InputError(f"site {c.site!r} masked for round {c.round_id!r}, expected {first.round_id!r}")
        if tuple((cl, kind, shape) for cl, kind, shape, _ in c.layout) != shape_key:
            raise InputError(f"site {c.site!r} tables differ from site {first.site!r} (cliques, kinds or shapes)")
        if c.fractional_bits != first.fractional_bits:
            raise InputError(f"site {c.site!r} used {c.fractional_bits} fractional bits, site {first.site!r} {first.fractional_bits}")


def decode_tables(total: np.ndarray, contributions: Sequence[MaskedTables]) -> list[MarginalTable]:
    """The summed int64 vector of ``contributions`` as tables (layout order).

    Noise records combine as in :func:`marginals.summary.sum_tables` (stds in quadrature,
    largest per-site privacy cost); counts come back exact (int64), moment tables as float64
    with fixed-point rounding error ``≤ n_sites · 2^-(bits+1)`` per cell.
    """
    first = contributions[0]
    zero_parts = [
        [MarginalTable(clique=cl, counts=np.zeros(shape), noise=rec, kind=kind) for cl, kind, shape, rec in c.layout]
        for c in contributions
    ]
    combined, _ = sum_tables(zero_parts)
    out: list[MarginalTable] = []
    pos = 0
    scale = float(2**first.fractional_bits)
    for (cl, kind, shape, _), rec_t in zip(first.layout, combined):
        size = int(np.prod(shape, dtype=np.int64))
        cells = total[pos : pos + size].reshape(shape)
        pos += size
        counts = cells.copy() if kind == "counts" else cells.astype(np.float64) / scale
        out.append(MarginalTable(clique=cl, counts=counts, noise=rec_t.noise, kind=kind))
    return out


def unmask_tables(contributions: Sequence[MaskedTables]) -> list[MarginalTable]:
    """Aggregate all sites' :class:`MaskedTables` of one round (no dropout, no self masks)
    into summed tables (:func:`check_layouts`, then :func:`decode_tables`).

    Returns
    -------
    list of MarginalTable
        In the layout's order.
    """
    check_layouts(contributions)
    return decode_tables(unmask_sum([c.vector for c in contributions]), contributions)


def secure_sum_tables(
    site_tables: Mapping[str, Sequence[MarginalTable]],
    seal_keys: Mapping[str, x25519.X25519PrivateKey],
    round_id: str | None = None,
    fractional_bits: int = 16,
) -> list[MarginalTable]:
    """Run a whole secure round in one process: every site masks, the aggregator sums.

    This is the reference composition of :func:`mask_tables` (run at each site with its
    own key and the others' public keys) and :func:`unmask_tables` (run by the
    aggregator, who sees only masked vectors).

    Parameters
    ----------
    site_tables : dict[str, list of MarginalTable]
        Each site's tables, same cliques in the same order. At least two sites.
    seal_keys : dict[str, X25519PrivateKey]
        Each site's private sealing key.
    round_id : str, optional
        Default: 128 fresh random bits (hex).
    fractional_bits : int, default 16

    Returns
    -------
    list of MarginalTable
        Equal to ``marginals.summary.sum_tables(...)`` of the same tables (exactly for
        counts, to fixed-point precision for moments).
    """
    if len(site_tables) < 2:
        raise InputError(f"secure aggregation needs at least two sites, got {len(site_tables)}")
    missing = sorted(set(site_tables) - set(seal_keys))
    if missing:
        raise InputError(f"no sealing key for site {missing[0]!r}")
    rid = round_id if round_id is not None else os.urandom(16).hex()
    pubs = {s: seal_keys[s].public_key() for s in site_tables}
    contributions = [
        mask_tables(s, site_tables[s], seal_keys[s], {p: k for p, k in pubs.items() if p != s}, rid, fractional_bits)
        for s in sorted(site_tables)
    ]
    return unmask_tables(contributions)
