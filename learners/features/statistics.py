"""The moments a minimax learner needs for its feature map: τ = E[Φ], its sample std and the noise std.

For Φ(x, y) = e_y ⊗ Ψ(x) laid out (K, D) and the released (aggregated) tables of a Summary:

- one-hot node column (i, a): τ[y, ·] = N[x_i = a, y]/n, sample std sqrt(τ(1 − τ));
- raw numeric node column i (public range): τ[y] = Σ_{rows of y} x_i / n from the moment
  table, sample std sqrt(E[x_i² 1{y}] − τ²);
- edge cell (i, j, a, b): τ[y, ·] = N[x_i = a, x_j = b, y]/n, sample std sqrt(τ(1 − τ));
- noise std: the std of the released DP noise on the entry, in τ units (count std / n; a
  cell marginalised from a larger table sums that table's independent cell noises);
- hidden one-hot cells (a class column released as 0 by min-cell suppression): τ is the
  point estimate (the column's hidden rows spread evenly over its m levels) and ``lo``/``hi``
  bound the true count/n (:meth:`marg.marginals.summary.Summary.count_bounds`), which the
  uncertainty box must cover (:func:`marg.learners.features.calibration.confidence_box`).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

# Summary → {map layout → Moments}: a Summary is read-only, so a map's moments are computed
# once per Summary however many learners (or repeated fits) ask for them.
_CACHE: "weakref.WeakKeyDictionary[Any, dict[tuple, Moments]]" = weakref.WeakKeyDictionary()


def released(summary: Any) -> Any:
    """The Summary's tables as released — before any post-processing, so each cell's noise is
    exactly the recorded draws — and their n (``.n_released``): what every learner quantity that
    carries noise (τ, its noise std, the box, the tail bounds) is computed from. The one place
    ``learners/`` reads it; ``summary.n`` (the reported n, post-processed) is the sample size the
    fitted state reports (the two n's: :attr:`marg.marginals.summary.Summary.n_released`)."""
    return summary.released()


@dataclass(frozen=True)
class Moments:
    """τ, its sample std and its noise std for one feature map, each (K, D); n rows behind them
    (the n of the tables as released, ``Summary.n_released``).

    ``draws[j]``: the independent noise draws in one count behind Ψ column j (the same for
    every label; (mechanism, scale, discrete, count) parts, :mod:`marg.marginals.noise_tails`),
    () when exact; ``n_draws`` those of n (the label table's total). ``lo``, ``hi`` (K, D): bounds
    on each entry's true sample value (count/n) where cells are hidden (``lo < hi`` there,
    ``lo = hi = τ`` elsewhere); None when no cell is hidden.
    """

    tau: np.ndarray
    std: np.ndarray
    noise: np.ndarray
    n: float
    draws: tuple = ()
    n_draws: tuple = ()
    lo: np.ndarray | None = None
    hi: np.ndarray | None = None


def map_moments(summary: Any, fmap: Any) -> Moments:
    """The :class:`Moments` of ``fmap`` (a node map or a pairwise map) from ``summary``'s tables
    as released (before any post-processing, so that the noise draws describe them exactly).

    Parameters
    ----------
    summary : marginals.summary.Summary
        Must hold N[x_i, y] for every one-hot node, the moment table of every raw numeric
        node, and N[x_i, x_j, y] (or a table containing it) for every edge.
    fmap : FeatureMap or PairwiseFeatureMap

    Returns
    -------
    Moments
        Shared between calls on the same Summary and layout (do not modify its arrays).
    """
    summary = released(summary)  # the tables as released: their noise is exactly what is recorded
    key = (tuple((b.name, b.kind, b.size) for b in fmap.nodes.blocks), tuple(fmap.edges))
    try:
        per = _CACHE.setdefault(summary, {})
    except TypeError:  # not weak-referenceable: no cache
        per = {}
    if key not in per:
        m = _moments(summary, fmap)
        for a in (m.tau, m.std, m.noise, m.lo, m.hi):
            if a is not None:
                a.setflags(write=False)  # shared: read-only
        per[key] = m
    return per[key]


def _moments(summary: Any, fmap: Any) -> Moments:
    lab = summary.codebook.label.name
    n = float(summary.n_released)
    K = int(summary.n_classes)
    nodes = fmap.nodes
    D = fmap.dim
    tau = np.zeros((K, D))
    second = np.zeros((K, D))
    noise = np.zeros((K, D))
    draws: list[tuple] = [()] * D
    lo: np.ndarray | None = None
    hi: np.ndarray | None = None
    for b in nodes.blocks:
        if b.kind == "onehot":
            N = summary.counts((b.name, lab))  # (m, K)
            tau[:, b.slice] = N.T / n
            bounds = summary.count_bounds((b.name, lab))
            if bounds is not None:
                if lo is None or hi is None:
                    lo, hi = np.full((K, D), np.nan), np.full((K, D), np.nan)
                lo[:, b.slice], hi[:, b.slice] = bounds[0].T / n, bounds[1].T / n
            second[:, b.slice] = N.T / n
            noise[:, b.slice] = summary.count_noise_std((b.name, lab)) / n
            draws[b.slice] = [summary.noise_draws((b.name, lab))] * b.size
        else:
            t = summary.moment_table(b.name)
            tau[:, b.offset] = t.counts[0] / n
            second[:, b.offset] = t.counts[1] / n
            noise[:, b.offset] = t.noise.std / n
            draws[b.offset] = t.noise.draws(False)
    std = np.sqrt(np.clip(second - tau**2, 0.0, None))
    for e, (a, c) in enumerate(fmap.edges):
        fa, fc = nodes.blocks[a].name, nodes.blocks[c].name
        P = summary.joint((fa, fc, lab))  # (m_a, m_c, K)
        cols = fmap.edge_columns(e)
        t = np.transpose(P, (2, 0, 1)).reshape(K, -1)
        tau[:, cols] = t
        std[:, cols] = np.sqrt(np.clip(t * (1.0 - t), 0.0, None))
        noise[:, cols] = summary.count_noise_std((fa, fc, lab)) / n
        d = summary.noise_draws((fa, fc, lab))
        for j in cols:
            draws[j] = d
    n_draws = _n_draws(summary)
    if lo is not None and hi is not None:  # entries without hidden cells: exactly τ
        lo, hi = np.where(np.isnan(lo), tau, lo), np.where(np.isnan(hi), tau, hi)
    return Moments(tau, std, noise, n, tuple(draws), n_draws, lo, hi)


def _n_draws(summary: Any) -> tuple:
    """The noise draws behind n: the label table's K cells summed."""
    nd = summary.noise_draws((summary.codebook.label.name,))
    return tuple((m, b, d, c * int(summary.n_classes)) for m, b, d, c in nd)


def label_moments(summary: Any) -> Moments:
    """The :class:`Moments` of the label table alone: τ (K, 1) the class shares N[y]/n as released.

    The one column is Φ(x, y) = e_y (Ψ ≡ 1): τ[y, 0] = N[y]/n, sample std sqrt(τ(1 − τ)),
    noise std and draws those of one cell of N[y] (:meth:`Summary.noise_draws`), ``n_draws``
    as for every map; ``lo``/``hi`` where the label table hides cells. What a label-only
    rule is certified over (:mod:`marg.learners.classifiers.label_only`)."""
    summary = released(summary)
    lab = summary.codebook.label.name
    n = float(summary.n_released)
    N = np.asarray(summary.counts((lab,)), dtype=np.float64).reshape(-1, 1)
    tau = N / n
    std = np.sqrt(np.clip(tau * (1.0 - tau), 0.0, None))
    noise = np.full_like(tau, float(summary.count_noise_std((lab,))) / n)
    bounds = summary.count_bounds((lab,))
    lo = hi = None
    if bounds is not None:
        lo, hi = (np.asarray(b, dtype=np.float64).reshape(-1, 1) / n for b in bounds)
    return Moments(tau, std, noise, n, (summary.noise_draws((lab,)),), _n_draws(summary), lo, hi)


def cells_moments(summary: Any, names: tuple[str, ...], mask: np.ndarray) -> Moments:
    """The :class:`Moments` of one column that sums cells of one table: τ (K, 1) with
    τ[c] = Σ_{cells a, mask[a]} N[a, c]/n, from the smallest table holding ``names`` as released.

    A boost monomial's column (:func:`marg.learners.boost.columns.monomial_moments`): a Bernoulli
    mean (sample std sqrt(τ(1 − τ))) whose noise sums the independent noise of the cells it adds
    (std √cells times one cell's, ``draws`` one cell's draws with their count times the cells).
    Where the table hides class columns (min-cell suppression) a class's hidden rows may all sit
    in the column's cells or none of them: ``lo`` the sum of the cells' lower bounds, ``hi`` that
    plus the class's hidden rows (``lo = hi`` when the mask holds every cell).

    Parameters
    ----------
    summary : marginals.summary.Summary
    names : tuple of str
        The table's features, then the label (the label alone: the class shares).
    mask : ndarray of bool, shape ``counts(names).shape[:-1]`` (() for the label alone)
        The cells the column sums.

    Returns
    -------
    Moments
        Each array (K, 1); n the tables' as released (``Summary.n_released``).
    """
    summary = released(summary)
    n = float(summary.n_released)
    K = int(summary.n_classes)
    N = np.asarray(summary.counts(names), dtype=np.float64)  # (m_f..., K)
    mask = np.asarray(mask, dtype=bool)
    cells = int(mask.sum())
    tau = N[mask].sum(axis=0) / n
    std = np.sqrt(np.clip(tau * (1.0 - tau), 0.0, None))
    noise = np.full(K, float(summary.count_noise_std(names)) * np.sqrt(cells) / n)
    draws = tuple((m, b, d, c * cells) for m, b, d, c in summary.noise_draws(names))
    lo = hi = None
    bounds = summary.count_bounds(names)
    if bounds is not None:
        spare = (bounds[1] - bounds[0]).reshape(-1, K).max(axis=0)  # per class: the hidden rows
        lo = bounds[0][mask].sum(axis=0)
        hi = lo + spare
        if mask.all():
            lo = hi
        lo, hi = (lo / n)[:, None], (hi / n)[:, None]
    return Moments(tau[:, None], std[:, None], noise[:, None], n, (draws,), _n_draws(summary), lo, hi)
