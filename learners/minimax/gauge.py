"""The gauge of the minimax LP: coordinates of μ along which R(μ) does not change, fixed before the solve.

With λ = 0 the LP's optimal μ is far from unique: one-hot blocks and edge blocks can trade
functions of x_i, and a constant added to every label's score changes nothing. Solving in a
reference coding with the same score functions (:func:`reference_mask`) and without the
common constant (:func:`common_constant`) gives the same R* without directions along which
μ drifts freely.
"""

from __future__ import annotations

import numpy as np

from ..features.pairwise import PairwiseFeatureMap


def reference_mask(pmap: PairwiseFeatureMap, tau: np.ndarray) -> np.ndarray:
    """Ψ columns of a reference coding that spans the same score functions per label.

    Per label, the scores Σ_i θ_i(x_i) + Σ_(i,j) θ_ij(x_i, x_j) are unchanged when a function
    of x_i moves between a node block and an edge block, or a constant between blocks: the
    one-hot parametrisation has a large null space. Keeping, for each one-hot node, every
    level but a reference level r_i (its most frequent one), all levels of the first one-hot
    node (the constant), every edge cell (a, b) with a ≠ r_i and b ≠ r_j, and every raw
    numeric column spans exactly the same functions (h(a,b) = h(a,r_j) + h(r_i,b) − h(r_i,r_j)
    + a term vanishing on the reference row and column). With λ = 0 the MRC objective
    depends on μ only through these functions (τᵀμ = E_p[score] for any p matching τ), so
    the LP restricted to these columns has the same value R* — without directions along
    which μ drifts freely to the box.

    Parameters
    ----------
    pmap : PairwiseFeatureMap
    tau : ndarray (K, D)

    Returns
    -------
    ndarray of bool (D,)
    """
    keep = np.ones(pmap.dim, dtype=bool)
    ref = {}
    first = True
    for i, b in enumerate(pmap.blocks):
        if b.kind != "onehot":
            continue
        r = int(np.argmax(tau[:, b.slice].sum(axis=0)))
        ref[i] = r
        if not first:
            keep[b.offset + r] = False
        first = False
    for e, (i, j) in enumerate(pmap.edges):
        mi, mj = pmap.edge_shape[e]
        cells = np.zeros((mi, mj), dtype=bool)
        cells[ref[i], :] = True
        cells[:, ref[j]] = True
        keep[pmap.edge_columns(e)[cells.ravel()]] = False
    return keep


def common_constant(pmap: PairwiseFeatureMap, tau: np.ndarray, empty: np.ndarray) -> np.ndarray:
    """The one entry to drop so that no constant can be added to every label's score.

    R(μ) is unchanged when the same constant c is added to every label's score (τᵀμ and
    φ(μ) both grow by c, since Σ_y P(y) = 1), and so are both rules; dropping label 0's
    most frequent non-empty level of the first one-hot node removes that direction.

    Returns
    -------
    ndarray of bool (K, D)
        True at the dropped entry (none if there is no one-hot node or label 0 is empty).
    """
    out = np.zeros(tau.shape, dtype=bool)
    for b in pmap.blocks:
        if b.kind == "onehot":
            t = np.where(empty[0, b.slice], -np.inf, tau[0, b.slice])
            if np.isfinite(t).any():
                out[0, b.offset + int(np.argmax(t))] = True
            break
    return out
