"""Marginal tables through a secure-aggregation round: one masked vector per site, summed back into tables.

A site's tables become one int64 vector (:func:`encode_tables`: counts exactly, moment tables
in fixed point with ``fractional_bits`` bits, rounding error ``≤ 2^-(bits+1)`` per site and
cell), masked by :func:`protocols.secagg.mask_counts` (:func:`mask_tables`); the aggregator
checks that every site sent the same tables (:func:`check_layouts`) and turns the summed
vector back into tables (:func:`decode_tables`), their noise records combined as
:func:`marginals.summary.sum_tables` combines them. :func:`secure_sum_tables` is the whole
round in one process, the reference the file protocol (:mod:`protocols.secagg_round`) follows.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
from cryptography.hazmat.primitives.asymmetric import x25519

from marg.errors import InputError
from marg.marginals.summary import sum_tables
from marg.marginals.counts.tables import MarginalTable

from .secagg import mask_counts, to_int64, unmask_sum


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
            parts.append(to_int64(t.counts, f"site {site!r} table {t.name}"))
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
    return MaskedTables(site=site_name, round_id=round_id, layout=layout, fractional_bits=fractional_bits,
                        vector=masked)


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
            raise InputError(f"site {c.site!r} used {c.fractional_bits} fractional bits, site {first.site!r} "
                             f"{first.fractional_bits}")


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
