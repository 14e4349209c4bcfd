"""The layout of μ: where an entry (label y, Ψ column j) sits in the flat vector, which entries are LP columns, the box
per column.

Every minimax LP works on μ flattened label-major, μ[y, j] at ``y·D + j`` (:func:`flat_index`,
the one place that product is written). A :class:`MuLayout` adds what a problem decides about
the entries: the cells left out of the LP as −∞ (``excluded``: empty cells τ + λ = 0 a
formulation does not write) and the entries that are LP columns (``lp_mask``: not excluded, and
gauge-fixed when λ = 0); :func:`column_bounds` is the box B_j on |μ_j| per flat column.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from numpy.typing import NDArray


def flat_index(D: int, y: Any, cols: Any) -> Any:
    """Flat μ index y·D + j of label(s) ``y`` and Ψ column(s) ``cols`` (numpy broadcasting)."""
    return y * D + cols


def every_label(K: int, D: int, psi_cols: Sequence[int] | NDArray[np.integer[Any]]) -> NDArray[np.int64]:
    """Flat μ indices of the Ψ columns ``psi_cols`` for every label, label-major, (K·len(psi_cols),)."""
    cols = np.asarray(psi_cols, dtype=np.int64)
    flat: NDArray[np.int64] = flat_index(D, np.arange(K)[:, None], cols[None, :])
    return flat.ravel()


def column_bounds(fmap: Any, n_classes: int, bound: float) -> NDArray[np.float64]:
    """Box B_j per flat μ column, (K·D,): ``bound`` for indicator columns, bound/max(|lo|, |hi|) for a raw
    numeric column (it moves the score by up to max(|lo|, |hi|)·μ)."""
    per = np.full(fmap.dim, float(bound))
    for b in fmap.blocks:
        if b.kind == "numeric":
            per[b.offset] = float(bound) / max(abs(b.lo), abs(b.hi), 1e-12)
    return np.tile(per, n_classes)


@dataclass(frozen=True)
class MuLayout:
    """μ's entries of one problem: shape, the cells out of the LP and the LP columns.

    Attributes
    ----------
    excluded : ndarray of bool (K, D)
        Cells that are −∞ in the LP (empty cells τ + λ = 0 a formulation leaves out).
    lp_mask : ndarray of bool (K, D)
        Entries of μ that are LP columns; μ is 0 elsewhere until empty cells are fixed.
    """

    excluded: NDArray[np.bool_]
    lp_mask: NDArray[np.bool_]

    @classmethod
    def full(cls, K: int, D: int) -> "MuLayout":
        """Every entry an LP column, nothing excluded (the first-order MRC: empty cells are fixed after the solve)."""
        return cls(np.zeros((K, D), dtype=bool), np.ones((K, D), dtype=bool))

    @property
    def K(self) -> int:
        return int(self.excluded.shape[0])

    @property
    def D(self) -> int:
        return int(self.excluded.shape[1])

    def flat(self, y: Any, cols: Any) -> Any:
        """Flat index of (y, j) (:func:`flat_index`)."""
        return flat_index(self.D, y, cols)

    def every_label(self, psi_cols: Sequence[int] | NDArray[np.integer[Any]]) -> NDArray[np.int64]:
        """Flat indices of ``psi_cols`` for every label (:func:`every_label`)."""
        return every_label(self.K, self.D, psi_cols)

    def lp_columns(self, psi_cols: Sequence[int] | NDArray[np.integer[Any]]) -> NDArray[np.int64]:
        """Flat LP columns: every label's entries of the Ψ columns ``psi_cols`` that are LP columns."""
        flat = self.every_label(psi_cols)
        return flat[self.lp_mask.ravel()[flat]]

    def restrict(self, keep: NDArray[np.integer[Any]] | NDArray[np.bool_]) -> "MuLayout":
        """The layout on the Ψ columns ``keep`` (a sub-map)."""
        return MuLayout(self.excluded[:, keep], self.lp_mask[:, keep])
