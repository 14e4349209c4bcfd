"""Learner-side post-processing of noisy tables: consistency, non-negativity, a PSD Q.

Post-processing touches only released numbers, so it is free under differential privacy.
:func:`postprocess_tables` turns a set of noisy count tables into tables that are

1. **mutually consistent** — every set of attributes ``S`` shared by two or more tables
   (the empty set, i.e. the total n; the label; a feature; ``(x_i, y)``; …) gets one
   estimate ``N̂[S]``, the inverse-variance weighted mean of the tables' marginals on
   ``S``: table T with per-cell noise std ``σ_T`` and ``|T|`` cells sums ``|T|/|S|``
   cells into each cell of its S-marginal, so ``Var = σ_T² |T|/|S|`` and its weight is
   ``w_T ∝ 1/(σ_T² |T|)``. Exact tables (σ = 0) take all the weight. Each table is then
   moved to agree: ``T ← T + (N̂[S] − T[S]) / (|T|/|S|)`` broadcast over T's other
   attributes — the least-squares (L2-nearest) change of T with the new S-marginal.
   Sets are processed by increasing size, so when ``S`` is processed the tables already
   agree on every smaller shared set, and the updates for different sets of the same
   size do not disturb each other (they commute once the marginals on their intersection
   agree: the PriView consistency step of Qardaji, Yang & Li 2014);
2. **non-negative** — each table is projected onto ``{T ≥ 0, Σ T = n̂}`` (Euclidean
   projection onto the scaled simplex, :func:`project_simplex`: negative cells go to 0
   and the excess is taken evenly off the positive ones), where ``n̂`` is the pooled total
   from step 1. Plain clipping would add the clipped mass to every table and bias n
   upwards; the projection keeps it. Steps 1 and 2 alternate until the consistent tables
   have no cell below ``−tol·n̂`` (at most ``max_iter`` rounds; a final projection makes the
   output exactly non-negative, consistent to within that last small change, which
   :func:`consistency_gap` reports).

The estimated n is ``n̂``, the inverse-variance pooled total of all tables (each table's
total is an unbiased estimate of n), which every output table sums to. Noise records are kept: the
recorded std is that of the raw released noise, an upper bound for the post-processed
error of a table's marginals in the pooled directions (so the noise-aware λ stays
conservative). Moment tables pass through unchanged.

:func:`nearest_psd` projects a (noisy) second-moment matrix Q onto the PSD cone.
"""

from __future__ import annotations

from dataclasses import replace
from itertools import combinations
from typing import Any, Sequence

import numpy as np

from .errors import InputError


# ---------------------------------------------------------------------------------------
# Consistency
# ---------------------------------------------------------------------------------------
def _shared_sets(cliques: Sequence[tuple[str, ...]]) -> list[frozenset[str]]:
    """Attribute sets (incl. the empty set) contained in two or more cliques, by size."""
    seen: dict[frozenset[str], int] = {}
    for c in cliques:
        subs = set()
        for r in range(len(c) + 1):
            for s in combinations(c, r):
                subs.add(frozenset(s))
        for s in subs:
            seen[s] = seen.get(s, 0) + 1
    return sorted((s for s, m in seen.items() if m >= 2), key=lambda s: (len(s), sorted(s)))


def make_consistent(counts: list[np.ndarray], cliques: list[tuple[str, ...]], var: np.ndarray) -> list[np.ndarray]:
    """One pass of the level-wise inverse-variance consistency step (in place, returned).

    Parameters
    ----------
    counts : list of ndarray
        Float count arrays, axes in clique order.
    cliques : list of tuple of str
    var : ndarray, shape (k,)
        Per-cell noise variance ``σ_T²`` of each table (0 for exact tables).

    Returns
    -------
    list of ndarray
        The same arrays, now agreeing on every attribute set shared by ≥ 2 tables.
    """
    for S in _shared_sets(cliques):
        idx = [k for k, c in enumerate(cliques) if S.issubset(c)]
        # Marginals with S's axes in a common order (sorted names), broadcast shape of table.
        order = sorted(S)
        margs = []
        for k in idx:
            kept = [a for a in cliques[k] if a in S]
            drop = tuple(j for j, a in enumerate(cliques[k]) if a not in S)
            m = counts[k].sum(axis=drop) if drop else counts[k]
            margs.append(np.transpose(m, [kept.index(a) for a in order]))
        sizes = np.array([counts[k].size for k in idx], dtype=np.float64)
        v = np.array([var[k] for k in idx], dtype=np.float64) * sizes  # ∝ Var of S-marginal cells
        exact = v == 0.0
        if exact.any():
            w = exact.astype(np.float64)
        else:
            w = 1.0 / v
        w = w / w.sum()
        target = sum(wi * m for wi, m in zip(w, margs))
        for k, m in zip(idx, margs):
            diff = target - m
            if not np.any(diff):
                continue
            kept = [a for a in cliques[k] if a in S]
            # back to the table's axis order, then keepdims shape for broadcasting
            d = np.transpose(diff, [order.index(a) for a in kept])
            shape = [counts[k].shape[j] if a in S else 1 for j, a in enumerate(cliques[k])]
            spread = counts[k].size / max(1, d.size)
            counts[k] += d.reshape(shape) / spread
    return counts


def consistency_gap(tables: Sequence[Any]) -> float:
    """Largest disagreement between two count tables' marginals on a shared attribute set
    (including the totals), in counts; 0 for a consistent set."""
    cts = [t for t in tables if t.kind == "counts"]
    gap = 0.0
    for S in _shared_sets([t.clique for t in cts]):
        order = sorted(S)
        ms = [np.asarray(t.marginal(order), dtype=np.float64) if order else np.asarray(t.counts.sum(), dtype=np.float64)
              for t in cts if S.issubset(t.clique)]
        for m in ms[1:]:
            gap = max(gap, float(np.max(np.abs(m - ms[0]))))
    return gap


def postprocess_tables(tables: Sequence[Any], max_iter: int = 200, tol: float = 1e-9) -> list[Any]:
    """Consistent, non-negative count tables from noisy ones (see the module docstring).

    Parameters
    ----------
    tables : sequence of MarginalTable
        One release (or the aggregate of several sites' releases). Exact tables are
        never changed unless they disagree with each other.
    max_iter : int
        Maximum number of (consistency, clip) rounds.
    tol : float
        Relative tolerance: stop when no cell is below ``−tol · max(1, n̂)``.

    Returns
    -------
    list of MarginalTable
        Same order, cliques, kinds and noise records; count tables as float arrays.
    """
    tables = list(tables)
    pos = [k for k, t in enumerate(tables) if t.kind == "counts"]
    if not pos:
        return tables
    if all(t.noise.is_exact for t in tables):
        return tables
    cliques = [tables[k].clique for k in pos]
    counts = [np.array(tables[k].counts, dtype=np.float64, copy=True) for k in pos]
    var = np.array([tables[k].noise.std ** 2 for k in pos])
    make_consistent(counts, cliques, var)
    n_hat = max(0.0, float(counts[0].sum()))
    for _ in range(max(1, int(max_iter))):
        worst = min(float(c.min()) for c in counts)
        if worst >= -tol * max(1.0, n_hat):
            break
        for k, c in enumerate(counts):
            counts[k] = project_simplex(c, n_hat)
        make_consistent(counts, cliques, var)
    for k, c in enumerate(counts):
        if c.min() < 0.0:
            counts[k] = project_simplex(c, n_hat)
    out = list(tables)
    for k, c in zip(pos, counts):
        out[k] = replace(tables[k], counts=c)
    return out


def project_simplex(x: np.ndarray, total: float) -> np.ndarray:
    """Euclidean projection of ``x`` onto ``{v ≥ 0, Σ v = total}`` (same shape).

    ``v = max(x − θ, 0)`` with θ chosen so that ``Σ v = total`` (sort-based, Duchi et al.
    2008). Keeps the total, so clipping negatives does not inflate n.
    """
    flat = np.asarray(x, dtype=np.float64).ravel()
    if total <= 0.0:
        return np.zeros_like(np.asarray(x, dtype=np.float64))
    u = np.sort(flat)[::-1]
    css = np.cumsum(u) - total
    ind = np.arange(1, flat.size + 1)
    rho = int(np.nonzero(u - css / ind > 0)[0][-1])
    theta = css[rho] / (rho + 1.0)
    return np.maximum(flat - theta, 0.0).reshape(np.shape(x))


# ---------------------------------------------------------------------------------------
# PSD projection
# ---------------------------------------------------------------------------------------
def nearest_psd(Q: np.ndarray, min_eig: float = 0.0) -> np.ndarray:
    """Nearest symmetric positive semidefinite matrix in Frobenius norm.

    ``Q_s = (Q + Qᵀ)/2 = V diag(λ) Vᵀ``; the projection is ``V diag(max(λ, min_eig)) Vᵀ``
    (Higham 1988). It is characterised by: X ⪰ 0, ``Q_s − X ⪯ 0`` and
    ``(Q_s − X) X = 0``. A PSD input is returned unchanged (up to rounding).

    Parameters
    ----------
    Q : ndarray, shape (M, M)
    min_eig : float
        Eigenvalue floor (0: the projection onto the PSD cone).

    Returns
    -------
    ndarray, shape (M, M), symmetric.
    """
    Q = np.asarray(Q, dtype=np.float64)
    if Q.ndim != 2 or Q.shape[0] != Q.shape[1]:
        raise InputError(f"nearest_psd needs a square matrix, got shape {Q.shape}")
    if not np.all(np.isfinite(Q)):
        raise InputError("nearest_psd: matrix contains NaN or infinity")
    if min_eig < 0:
        raise InputError(f"nearest_psd: min_eig must be >= 0, got {min_eig!r}")
    S = (Q + Q.T) / 2.0
    lam, V = np.linalg.eigh(S)
    if lam.min() >= min_eig:
        return S
    X = (V * np.maximum(lam, min_eig)) @ V.T
    return (X + X.T) / 2.0
