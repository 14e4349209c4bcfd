"""A fitted model's per-class weights, one per named column of its feature map.

Every rule marg emits scores class y at x as ``s_y(x) = Σ_j W[y, j] Ψ_j(x) + b_y`` and
predicts ``argmax_y s_y(x)``: minimax models (MRC, DCC) with ``W = μ`` over their node map
or their node-and-pair map, Rényi and naive Bayes through
:meth:`marg.learners.estimator.base.MarginalEstimator.score_weights`. Adding one vector to every row of W changes no
prediction, so what a reader can interpret is

- K = 2: the difference ``W[1] − W[0]`` (positive pushes towards the second class);
- K > 2: each class's weights centred over the classes, ``W[y] − mean_c W[c]``.

:func:`class_weights` returns those, with a readable name per column
("feature = level", "feature (per unit)" for a raw numeric feature, "a = u & b = v" for a
pair indicator of a DCC edge).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class ClassWeights:
    """Interpretable weights of a model's rule.

    Attributes
    ----------
    names : list of str (D,)
        Column names.
    weights : ndarray (R, D)
        R = 1 for a binary label (the difference of the two classes' weights), else R = K
        (each class's weights centred over the classes).
    titles : list of str (R,)
        What each row of ``weights`` is, e.g. ``"score(yes) − score(no)"``.
    impossible : list of (str, str)
        (class, column name) cells the rule rules out: an MRC or DCC fixes their weight at
        −bound because no distribution of the uncertainty set puts mass there (an empty cell
        of an exact release); they are left out of ``weights`` (set to 0) and listed here.
    levels : list (D,) of tuples of (feature, level index)
        What each column reads (:func:`column_levels`).
    """

    names: list[str]
    weights: np.ndarray
    titles: list[str]
    impossible: list[tuple[str, str]]
    levels: list[tuple[tuple[str, int], ...]]


def column_names(fmap: Any, codebook: Any) -> list[str]:
    """Names of the columns of a feature map (node blocks, then edge cells if it has edges).

    Parameters
    ----------
    fmap : FeatureMap or PairwiseFeatureMap
    codebook : marginals.data.codebook.Codebook
        The model's codebook (its level names).
    """
    levels = {b.name: _levels(codebook, b.name, b.size) for b in fmap.blocks}
    names: list[str] = []
    for b in fmap.blocks:
        if b.kind == "onehot":
            names.extend(f"{b.name} = {lv}" for lv in levels[b.name])
        else:
            names.append(f"{b.name} (per unit)")
    for a, c in getattr(fmap, "edges", []) or []:
        ba, bc = fmap.blocks[a], fmap.blocks[c]
        names.extend(f"{ba.name} = {u} & {bc.name} = {v}" for u in levels[ba.name] for v in levels[bc.name])
    return names


def column_levels(fmap: Any) -> list[tuple[tuple[str, int], ...]]:
    """The (feature, level index) pairs each column of ``fmap`` reads, in :func:`column_names`'
    order: one for a node level, two for a pair cell, none for a raw numeric column."""
    out: list[tuple[tuple[str, int], ...]] = []
    for b in fmap.blocks:
        if b.kind == "onehot":
            out.extend(((b.name, k),) for k in range(b.size))
        else:
            out.append(())
    for a, c in getattr(fmap, "edges", []) or []:
        ba, bc = fmap.blocks[a], fmap.blocks[c]
        out.extend(((ba.name, u), (bc.name, v)) for u in range(ba.size) for v in range(bc.size))
    return out


def _levels(codebook: Any, name: str, size: int) -> list[str]:
    try:
        lv = list(codebook.feature(name).level_names)
    except Exception:  # noqa: BLE001 - a name the codebook lacks is shown by code
        lv = []
    return [str(x) for x in lv[:size]] + [str(k) for k in range(len(lv), size)]


def raw_weights(model: Any) -> tuple[Any, np.ndarray] | None:
    """(feature map, W (K, D)) of the model's deterministic rule; None for a rule without one
    (the estimator's ``score_weights()``)."""
    return model.estimator.score_weights()


def class_weights(model: Any) -> ClassWeights | None:
    """The interpretable weights of ``model`` (a :class:`marg.learners.estimator.model.Model`); None if its
    rule is not a sum of column weights."""
    got = raw_weights(model)
    if got is None:
        return None
    fmap, W = got
    classes = list(model.classes)
    names = column_names(fmap, model.codebook)
    if len(names) != W.shape[1]:
        return None
    imp = np.zeros(W.shape, dtype=bool)
    rec = model.estimator.impossible_cells()
    if rec is not None and np.shape(rec)[0] == W.shape[0]:
        imp = np.asarray(rec, dtype=bool)[:, : W.shape[1]]
    W = np.where(imp, 0.0, W)
    cells = [(classes[k], names[j]) for k, j in zip(*np.nonzero(imp))]
    if W.shape[0] == 2:
        diff = np.where(imp.any(axis=0), 0.0, W[1] - W[0])
        return ClassWeights(names, diff[None, :], [f"score({classes[1]}) − score({classes[0]})"], cells,
                            column_levels(fmap))
    centred = np.where(imp.any(axis=0), 0.0, W - W.mean(axis=0, keepdims=True))
    return ClassWeights(names, centred, [f"score({c}) − mean score" for c in classes], cells, column_levels(fmap))


RTOL = 1e-6
"""A weight counts as nonzero when its magnitude exceeds this fraction of the largest weight."""


def features_with_weight(cw: ClassWeights, features: list[str], rtol: float = RTOL) -> list[str]:
    """The features (in ``features``' order) the rule's prediction depends on.

    A feature carries weight when its level weights differ (one-hot levels sum to 1, so
    adding a constant to all of a feature's levels moves every score alike and changes no
    prediction), when a pair cell it is part of has a nonzero weight, or, raw numeric, when
    its per-unit weight is nonzero — "differ" and "nonzero" meaning by more than
    ``rtol`` × the largest |weight| (any class).
    """
    W = np.asarray(cw.weights, dtype=float)
    scale = float(np.max(np.abs(W))) if W.size else 0.0
    tol = rtol * scale
    used: set[str] = set()
    if scale == 0.0:
        return []
    node: dict[str, list[int]] = {}
    for j, lv in enumerate(cw.levels):
        if len(lv) == 1:
            node.setdefault(lv[0][0], []).append(j)
        elif len(lv) == 2 and np.max(np.abs(W[:, j])) > tol:
            used.update(f for f, _ in lv)
        elif not lv and np.max(np.abs(W[:, j])) > tol:
            used.add(cw.names[j].removesuffix(" (per unit)"))
    for f, cols in node.items():
        block = W[:, cols]
        if np.max(block.max(axis=1) - block.min(axis=1)) > tol:
            used.add(f)
    return [f for f in features if f in used]


@dataclass(frozen=True)
class NoiseCaveat:
    """A weighted column whose level's released count for some class is within the noise of 0."""

    column: int
    name: str
    feature: str
    level: str
    cls: str
    count: float
    halfwidth: float


def noise_caveats(cw: ClassWeights, level_record: dict[str, Any] | None, codebook: Any,
                  rtol: float = RTOL) -> list[NoiseCaveat]:
    """Every column with a nonzero weight that reads a level whose released count N[x = v, y]
    for some class y is at most the noise half-width q (``|N| ≤ q``: the data cannot tell that
    count from 0, so the weight may be the noise's). ``level_record`` is
    :func:`marg.marginals.level_counts.level_counts` output (None: nothing recorded, no caveats)."""
    if not level_record:
        return []
    feats = level_record.get("features") or {}
    classes = list(codebook.label.classes)
    W = np.asarray(cw.weights, dtype=float)
    tol = rtol * (float(np.max(np.abs(W))) if W.size else 0.0)
    out: list[NoiseCaveat] = []
    for j, lv in enumerate(cw.levels):
        if not lv or np.max(np.abs(W[:, j])) <= tol:
            continue
        for f, k in lv:
            rec = feats.get(f)
            if rec is None or k >= len(rec["counts"]):
                continue
            q = float(rec["halfwidth"])
            counts = rec["counts"][k]
            y = int(np.argmin(np.abs(counts)))
            if q > 0 and abs(float(counts[y])) <= q:
                out.append(NoiseCaveat(j, cw.names[j], f, _levels(codebook, f, k + 1)[k], classes[y], float(counts[y]),
                                       q))
                break
    return out


def largest(w: np.ndarray, top: int) -> np.ndarray:
    """Indices of the ``top`` largest nonzero |w| (ties: lower index first), largest first."""
    w = np.asarray(w, dtype=float)
    order = np.lexsort((np.arange(len(w)), -np.abs(w)))
    return order[np.abs(w[order]) > 0][: int(top)]


__all__ = ["ClassWeights", "NoiseCaveat", "RTOL", "class_weights", "column_levels", "column_names",
           "features_with_weight",
           "largest", "noise_caveats", "raw_weights"]
