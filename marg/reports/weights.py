"""A fitted model's per-class weights, one per named column of its feature map.

Every rule marg emits scores class y at x as ``s_y(x) = Σ_j W[y, j] Ψ_j(x) + b_y`` and
predicts ``argmax_y s_y(x)``: minimax models (MRC, DCC) with ``W = μ`` over their node map
or their node-and-pair map, Rényi and naive Bayes through
:func:`marg.learners.certify.linear_rule`. Adding one vector to every row of W changes no
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
    """

    names: list[str]
    weights: np.ndarray
    titles: list[str]
    impossible: list[tuple[str, str]]


def column_names(fmap: Any, codebook: Any) -> list[str]:
    """Names of the columns of a feature map (node blocks, then edge cells if it has edges).

    Parameters
    ----------
    fmap : FeatureMap or PairwiseFeatureMap
    codebook : marginals.codebook.Codebook
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


def _levels(codebook: Any, name: str, size: int) -> list[str]:
    try:
        lv = list(codebook.feature(name).level_names)
    except Exception:  # noqa: BLE001 - a name the codebook lacks is shown by code
        lv = []
    return [str(x) for x in lv[:size]] + [str(k) for k in range(len(lv), size)]


def raw_weights(model: Any) -> tuple[Any, np.ndarray] | None:
    """(feature map, W (K, D)) of the model's deterministic rule; None for a rule without one."""
    from marg.errors import InputError
    from marg.learners.certify import linear_rule

    est = model.estimator
    fmap = getattr(est, "map_", None)
    mu = getattr(est, "mu_", None)
    if fmap is not None and mu is not None:  # minimax models, with or without pair columns
        return fmap, np.asarray(mu, dtype=float)[:, : fmap.dim]
    try:
        rule = linear_rule(est)
    except (InputError, AttributeError):
        return None
    return rule.fmap, np.asarray(rule.weights, dtype=float)


def class_weights(model: Any) -> ClassWeights | None:
    """The interpretable weights of ``model`` (a :class:`marg.learners.model.Model`); None if its
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
    rec = getattr(model.estimator, "impossible_", None)
    if rec is not None and np.shape(rec)[0] == W.shape[0]:
        imp = np.asarray(rec, dtype=bool)[:, : W.shape[1]]
    W = np.where(imp, 0.0, W)
    cells = [(classes[k], names[j]) for k, j in zip(*np.nonzero(imp))]
    if W.shape[0] == 2:
        diff = np.where(imp.any(axis=0), 0.0, W[1] - W[0])
        return ClassWeights(names, diff[None, :], [f"score({classes[1]}) − score({classes[0]})"], cells)
    centred = np.where(imp.any(axis=0), 0.0, W - W.mean(axis=0, keepdims=True))
    return ClassWeights(names, centred, [f"score({c}) − mean score" for c in classes], cells)


def largest(w: np.ndarray, top: int) -> np.ndarray:
    """Indices of the ``top`` largest nonzero |w| (ties: lower index first), largest first."""
    w = np.asarray(w, dtype=float)
    order = np.lexsort((np.arange(len(w)), -np.abs(w)))
    return order[np.abs(w[order]) > 0][: int(top)]


__all__ = ["ClassWeights", "class_weights", "column_names", "raw_weights", "largest"]
