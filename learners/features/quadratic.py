"""The Rényi classifier's second moments: Q and d over the one-hot encoding of the discrete features.

With W ∈ {0,1}^M the one-hot encoding of a summary's discrete features (block i has m_i
entries, M = Σ m_i, codebook order):

- ``Q`` (M, M) = E[WWᵀ]: block (i, j) = P(X_i = a, X_j = b), diagonal block i =
  diag P(X_i = a); singular by construction (each block sums to one: rank Σm_i − d + 1);
- ``d(c)`` (M,) = 2E[C W] with C = ±1/2: d_i(a) = P(X_i = a, Y = c) − P(X_i = a, Y ≠ c)
  (c = 1 for a binary label; one-vs-rest otherwise).

Under differential privacy the tables are post-processed by the Summary and Q is projected
onto the PSD cone (:func:`marg.marginals.postprocess.nearest_psd`), so that zᵀQz ≥ 0.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

import numpy as np

from marg.errors import InputError

from .blocks import Block


def discrete_blocks(codebook: Any) -> list[Block]:
    """One-hot blocks of the codebook's discrete features, offsets into Q and d (codebook order)."""
    out: list[Block] = []
    off = 0
    for col, f in enumerate(codebook.features):
        if f.is_discrete:
            out.append(Block(f.name, "onehot", int(f.n_levels), off, col))
            off += int(f.n_levels)
    return out


PAIRS_HINT = ("export with --stats all, or run the two-round protocol (marg request, then "
              "marg export --pairs @request.json)")


def paired_features(summary: Any) -> list[str]:
    """The features whose pair tables are all present: what Q can be built on by default.

    Every feature when every pair of discrete features has a released table (one-round
    ``--stats all``). Otherwise — round 2 of the two-round protocol released the pairs of
    the requested features only — the discrete features named in the released pair tables,
    in codebook order, which must then be pairwise complete (a request asks for every pair
    of its features). A single discrete feature needs no pair table.

    Returns
    -------
    list of str

    Raises
    ------
    InputError
        One line: no pair table at all (with two or more discrete features), or released
        pairs that leave some pair of their features out (naming it).
    """
    cb = summary.codebook
    lab = cb.label.name
    disc = cb.discrete_names
    inpairs = {a for t in summary.tables if t.kind == "counts" and len(t.clique) >= 3 for a in t.clique if a != lab}
    if not inpairs:
        if len(disc) >= 2:
            raise InputError(f"Q needs pair tables N[x_i, x_j, {lab}] and these summaries hold first-order tables "
                             "only; "
                             + PAIRS_HINT)
        return list(cb.feature_names)
    whole = len(inpairs) == len(disc)
    names = list(cb.feature_names) if whole else [f for f in cb.feature_names if f in inpairs]
    chosen = [f for f in names if cb.feature(f).is_discrete]
    for i, a in enumerate(chosen):
        for b in chosen[i + 1:]:
            if not summary.has_clique((a, b)):
                scope = "" if whole else f" (the {len(chosen)} features of the released pair tables)"
                raise InputError(f"Q needs the pair table of {a!r} and {b!r}{scope}; " + PAIRS_HINT)
    return names


def second_moments(summary: Any) -> np.ndarray:
    """Q (M, M) over ``summary``'s discrete features (see the module docstring).

    Raises
    ------
    InputError
        When a pair of discrete features has no released table holding both.
    """
    db = discrete_blocks(summary.codebook)
    M = sum(b.size for b in db)
    Q = np.zeros((M, M))
    for b in db:
        p = summary.joint((b.name,))
        Q[b.slice, b.slice] = np.diag(p)
    for bi, bj in combinations(db, 2):
        if not summary.has_clique((bi.name, bj.name)):
            raise InputError(f"Q needs the pair table of {bi.name!r} and {bj.name!r}; " + PAIRS_HINT)
        P = summary.joint((bi.name, bj.name))
        Q[bi.slice, bj.slice] = P
        Q[bj.slice, bi.slice] = P.T
    if summary.postprocess and summary.is_noisy:
        from marg.marginals.postprocess import nearest_psd

        Q = nearest_psd(Q)
    return Q


def label_contrast(summary: Any, positive: int | None = None) -> np.ndarray:
    """d (M,): d_i(a) = P(X_i = a, Y = c) − P(X_i = a, Y ≠ c); c = ``positive`` (1 if binary and None)."""
    K = summary.n_classes
    if positive is None:
        if K != 2:
            raise InputError(f"d needs a positive class for a {K}-class label (one-vs-rest)")
        positive = 1
    if not 0 <= positive < K:
        raise InputError(f"positive class index {positive} outside 0..{K - 1}")
    lab = summary.codebook.label.name
    parts = []
    for b in discrete_blocks(summary.codebook):
        P = summary.counts((b.name, lab)) / summary.n  # (m, K)
        parts.append(2 * P[:, positive] - P.sum(axis=1))
    return np.concatenate(parts) if parts else np.zeros(0)
