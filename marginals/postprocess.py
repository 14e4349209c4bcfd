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
2. **non-negative** — the consistent margins are fixed one shared set at a time, by
   increasing size: the common ``S``-margin from step 1 has its negative cells clipped
   and is then fitted by iterative proportional fitting (IPF) to the already fixed
   margins of its subsets (for ``S = ∅``: ``n̂ = max(common total, 1)``). Finally every
   noisy table is clipped at 0 and fitted by IPF to the fixed margins of its shared
   subsets (exact tables are left as they are and fix the margins they contain). IPF
   multiplies cells by ratios, so it keeps them non-negative, and it converges to the
   table of the given margins closest to the start in Kullback–Leibler divergence; the
   start gets a floor of ``1e-5·n̂/|T|`` per cell (``FLOOR``; under DP noise of std ≫ 1
   a negligible bias) so that every margin can be met and IPF does not stall on the
   boundary. IPF can still converge slowly when the margins force cells to 0; its last
   residual is removed by additive least-squares corrections alternated with clipping
   (a few rounds on numbers of the order of the tolerance). The
   output is non-negative and consistent to a relative tolerance ``tol`` (reported by
   :func:`consistency_gap`); alternating L2 projections (clip, re-project) converge far
   too slowly once pair tables have many near-empty cells.

The estimated n is ``n̂``, the inverse-variance pooled total of all tables (each table's
total is an unbiased estimate of n), which every output table sums to (plain clipping
would add the clipped mass and bias n upwards). Noise records are kept: the
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

from marg.errors import InputError

FLOOR = 1e-5  # IPF start floor per table, as a fraction of n̂ spread over its cells
_SUM, _MAX = np.add.reduce, np.maximum.reduce  # what ndarray.sum and .max call (IPF's inner loop: thousands of calls)


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


def ipf(start: np.ndarray, clique: Sequence[str], targets: dict[frozenset[str], np.ndarray],
        tol: float = 1e-10, max_iter: int = 2000) -> np.ndarray:
    """Iterative proportional fitting of a non-negative array to given margins.

    Parameters
    ----------
    start : ndarray
        Non-negative array, axes in ``clique`` order.
    clique : sequence of str
    targets : dict
        ``S → margin``: each margin over the attributes of ``S`` with axes in sorted-name
        order (the empty set maps to a scalar total). The margins must agree with each
        other on shared subsets.
    tol : float
        Stop when every margin is met to ``tol · max(1, total)``.
    max_iter : int
        Maximum number of full cycles over the targets.

    Returns
    -------
    ndarray
        ``start`` rescaled cycle after cycle, ``T ← T · N̂[S] / T[S]`` (0/0 := 0), which
        converges to the KL-nearest array with the target margins.
    """
    clique = tuple(clique)
    T = np.array(start, dtype=np.float64, copy=True)
    if not targets:
        return T
    tot = max(1.0, float(next(iter(targets.values())).sum()))
    plan = []
    for S, m in targets.items():
        kept = [a for a in clique if a in S]
        order = sorted(S)
        drop = tuple(j for j, a in enumerate(clique) if a not in S)
        shape = [T.shape[j] if a in S else 1 for j, a in enumerate(clique)]
        tgt = np.transpose(np.asarray(m, dtype=np.float64), [order.index(a) for a in kept]).reshape(shape) if kept \
            else np.asarray(m, dtype=np.float64).reshape(shape)
        plan.append((drop, tgt))
    with np.errstate(divide="ignore", invalid="ignore"):  # 0/0 := 0 below
        for _ in range(max(1, int(max_iter))):
            worst = 0.0
            for drop, tgt in plan:
                cur = _SUM(T, axis=drop, keepdims=True) if drop else T  # T.sum, without its wrapper
                worst = max(worst, float(_MAX(np.abs(cur - tgt), axis=None)))
                T *= np.where(cur > 0, tgt / cur, 0.0)
            if worst <= tol * tot:
                break
    return T


def _margin(arr: np.ndarray, clique: Sequence[str], S: frozenset[str]) -> np.ndarray:
    """Margin of ``arr`` on ``S``, axes in sorted-name order."""
    kept = [a for a in clique if a in S]
    drop = tuple(j for j, a in enumerate(clique) if a not in S)
    m = arr.sum(axis=drop) if drop else arr
    return np.transpose(m, [kept.index(a) for a in sorted(S)])


def _polish(T: np.ndarray, clique: Sequence[str], targets: dict[frozenset[str], np.ndarray],
            rounds: int = 100) -> np.ndarray:
    """Remove IPF's last residual: additive (least-squares) correction onto the margins,
    clip at 0, repeat until no cell is negative (a few rounds; the residual is tiny).

    One sweep of additive corrections over the maximal margins meets all of them exactly
    (their intersections already agree), so the result is exactly consistent whenever the
    last sweep leaves no negative cell."""
    clique = tuple(clique)
    plan = []  # per margin, by size: the axes summed out, _margin's order, the target, the way back
    for S in sorted(targets, key=len):
        kept = [a for a in clique if a in S]
        order = sorted(S)
        plan.append((tuple(j for j, a in enumerate(clique) if a not in S), [kept.index(a) for a in order],
                     np.asarray(targets[S], dtype=np.float64), [order.index(a) for a in kept] if kept else None,
                     [T.shape[j] if a in S else 1 for j, a in enumerate(clique)]))
    for _ in range(max(1, rounds)):
        for drop, to_sorted, target, back, shape in plan:
            cur = (_SUM(T, axis=drop) if drop else T).transpose(to_sorted)  # _margin(T, clique, S)
            diff = target - cur
            d = (diff.transpose(back) if back is not None else diff).reshape(shape)
            T = T + d / (T.size / max(1, diff.size))
        if T.min() >= 0.0:
            break
        T = np.maximum(T, 0.0)
    return T


def _maximal(sets: Sequence[frozenset[str]]) -> list[frozenset[str]]:
    return [S for S in sets if not any(S < R for R in sets)]


def postprocess_tables(tables: Sequence[Any], max_iter: int = 2000, tol: float = 1e-10) -> list[Any]:
    """Consistent, non-negative count tables from noisy ones (see the module docstring).

    Parameters
    ----------
    tables : sequence of MarginalTable
        One release (or the aggregate of several sites' releases). A set of exact tables
        is returned as is; exact tables among noisy ones anchor the shared margins.
    max_iter : int
        Maximum IPF cycles per fit.
    tol : float
        Relative tolerance of the IPF fits (``tol · n̂`` in counts).

    Returns
    -------
    list of MarginalTable
        Same order, cliques, kinds and noise records; count tables as float arrays.
    """
    tables = list(tables)
    pos = [k for k, t in enumerate(tables) if t.kind == "counts"]
    if not pos or all(t.noise.is_exact for t in tables):
        return tables
    cliques = [tables[k].clique for k in pos]
    counts = [np.array(tables[k].counts, dtype=np.float64, copy=True) for k in pos]
    var = np.array([tables[k].noise.std ** 2 for k in pos])
    # Step 1: least-squares, inverse-variance consistency (may leave negative cells).
    make_consistent(counts, cliques, var)
    # Step 2: fix non-negative margins level by level, then fit every table to them.
    shared = _shared_sets(cliques)
    n_hat = max(1.0, float(counts[0].sum()))  # noise can drive the pooled total below 1
    fixed: dict[frozenset[str], np.ndarray] = {}
    for S in shared:
        if not S:
            fixed[S] = np.asarray(n_hat)
            continue
        exact = [j for j, c in enumerate(cliques) if S.issubset(c) and var[j] == 0.0]
        if exact:  # an exact table's margin is the truth: keep it
            fixed[S] = _margin(counts[exact[0]], cliques[exact[0]], S)
            continue
        k = next(j for j, c in enumerate(cliques) if S.issubset(c))
        m = np.maximum(_margin(counts[k], cliques[k], S), 0.0)
        m = m + FLOOR * n_hat / m.size
        subs = {R: fixed[R] for R in _maximal([R for R in fixed if R < S])}
        fixed[S] = ipf(m, sorted(S), subs, tol=tol, max_iter=max_iter)
    for k, c in enumerate(cliques):
        if var[k] == 0.0:
            continue  # exact tables are consistent with the fixed margins already
        own = _maximal([S for S in fixed if S.issubset(c)])
        start = np.maximum(counts[k], 0.0) + FLOOR * n_hat / counts[k].size
        tg = {S: fixed[S] for S in own}
        counts[k] = _polish(ipf(start, c, tg, tol=tol, max_iter=max_iter), c, tg)
    out = list(tables)
    for k, c in zip(pos, counts):
        out[k] = replace(tables[k], counts=c)
    return out


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
