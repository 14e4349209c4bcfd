"""The uncertainty box of a feature map as per-table cell bounds: what a model file records.

A certificate is a worst case over U = {p : |E_pΦ − τ| ≤ λ}. For the maps whose entries
are table cells — a node map's one-hot columns (cells of N[x_i, y]/n) and a pairwise map's
edge columns (cells of N[x_i, x_j, y]/n) — the box τ ± λ is, entry for entry, a bound on a
joint probability of one released table. :func:`box_tables` writes it that way:

    {"features": [x_i, (x_j,) y], "lower": [...], "upper": [...]}

one record per table, cells in C order over the levels as the codebook lists them (the
label last), each clipped to [0, 1] (a probability lies there anyway, so U is unchanged).
A raw numeric node column (τ = E[x_i·1{y = k}], x_i clipped to its public range) gives a
record with ``"statistic": "sum"`` and its K bounds, unclipped. A monomial of boost's vote
(``x_a ∈ S_a AND x_b ∈ S_b …``, times 1{y = k}) is a sum of cells of the table over its
features: its record names the rule (``"rule"``), lists ``"cells"`` (1 where the rule
holds, C order over the features' levels) and bounds Σ_{cells} p(cell, y = k) by its K
``lower``/``upper`` values (the label's levels).

From the records anyone can rebuild U over the codebook's domain (a distribution over
every (x, y), each record's cell sums between its bounds) and recompute a certificate.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def box_tables(fmap: Any, tau: np.ndarray, lam: np.ndarray, label: str) -> tuple[dict[str, Any], ...]:
    """The box τ ± λ of ``fmap`` as per-table records (see the module docstring).

    Parameters
    ----------
    fmap : FeatureMap, PairwiseFeatureMap or boost's MonomialMap
        Any other map gives ().
    tau, lam : ndarray, shape (K, D)
    label : str
        The label's name (last in every record's ``features``).

    Returns
    -------
    tuple of dict
        Node records in map order, then one per edge.
    """
    if tau is None or lam is None:
        return ()
    tau = np.asarray(tau, dtype=np.float64)
    lam = np.asarray(lam, dtype=np.float64)
    K = tau.shape[0]
    lo, hi = tau - lam, tau + lam
    if hasattr(fmap, "cell_mask"):  # monomials: each a set of cells of the table over its features
        out = []
        for u in range(fmap.dim):
            feats, mask = fmap.cell_mask(u)
            out.append({"features": [*feats, label], "rule": fmap.describe(u),
                        "cells": mask.ravel().astype(int).tolist(),
                        "lower": np.clip(lo[:, u], 0.0, 1.0).tolist(), "upper": np.clip(hi[:, u], 0.0, 1.0).tolist()})
        return tuple(out)
    nodes = getattr(fmap, "nodes", None)
    if nodes is None or not hasattr(nodes, "blocks"):
        return ()
    out: list[dict[str, Any]] = []
    for b in nodes.blocks:
        if b.kind == "onehot":  # Φ[y, a] = 1{x_i = a, y}: the table (x_i, y) is its transpose
            out.append({"features": [b.name, label],
                        "lower": np.clip(lo[:, b.slice].T, 0.0, 1.0).ravel().tolist(),
                        "upper": np.clip(hi[:, b.slice].T, 0.0, 1.0).ravel().tolist()})
        else:
            out.append({"features": [b.name, label], "statistic": "sum",
                        "lower": lo[:, b.offset].tolist(), "upper": hi[:, b.offset].tolist()})
    for e, (a, c) in enumerate(getattr(fmap, "edges", [])):
        cols = fmap.edge_columns(e)
        ma, mc = nodes.blocks[a].size, nodes.blocks[c].size

        def cells(v: np.ndarray) -> list[float]:  # Φ[y, a·m_c + b] → table (x_a, x_c, y) in C order
            return np.clip(v[:, cols].reshape(K, ma, mc).transpose(1, 2, 0), 0.0, 1.0).ravel().tolist()

        out.append({"features": [nodes.blocks[a].name, nodes.blocks[c].name, label],
                    "lower": cells(lo), "upper": cells(hi)})
    return tuple(out)
