"""The one place the boosting references touch HiGHS: a growing LP (columns and rows added
in batches, re-solved warm) through ``marg.lp.new_highs``.

Convention (HiGHS's): minimise cᵀx; ``duals`` are the row duals y with reduced costs
c − Aᵀy, so y ≥ 0 on a ≥ row of a minimisation.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from marg.errors import SolverError
from marg.lp import INF, new_highs


def _csr(entries: Sequence[tuple[Sequence[int], Sequence[float]]]):
    starts, idx, val = [], [], []
    k = 0
    for ix, vs in entries:
        starts.append(k)
        idx.append(np.asarray(ix, dtype=np.int32))
        val.append(np.asarray(vs, dtype=np.float64))
        k += len(ix)
    cat = (lambda a, t: np.concatenate(a).astype(t)) if entries else (lambda a, t: np.zeros(0, dtype=t))
    return np.asarray(starts, dtype=np.int32), cat(idx, np.int32), cat(val, np.float64), k


class GrowingLP:
    """min cᵀx over columns and rows added in batches; ``solve`` re-optimises from the last basis."""

    def __init__(self) -> None:
        self.h = new_highs()
        self.n_cols = 0
        self.n_rows = 0

    def add_cols(self, cost: Sequence[float], lower: Sequence[float], upper: Sequence[float],
                 entries: Sequence[tuple[Sequence[int], Sequence[float]]]) -> np.ndarray:
        """Columns with their (row indices, values); returns their indices."""
        n = len(cost)
        starts, idx, val, nnz = _csr(entries)
        self.h.addCols(n, np.asarray(cost, float), np.asarray(lower, float), np.asarray(upper, float), nnz, starts, idx,
                       val)
        out = np.arange(self.n_cols, self.n_cols + n)
        self.n_cols += n
        return out

    def add_rows(self, lower: Sequence[float], upper: Sequence[float],
                 entries: Sequence[tuple[Sequence[int], Sequence[float]]]) -> np.ndarray:
        """Rows with their (column indices, values); returns their indices."""
        n = len(lower)
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        starts, idx, val, nnz = _csr(entries)
        self.h.addRows(n, np.asarray(lower, float), np.asarray(upper, float), nnz, starts, idx, val)
        out = np.arange(self.n_rows, self.n_rows + n)
        self.n_rows += n
        return out

    def solve(self) -> tuple[np.ndarray, np.ndarray, float]:
        """(column values, row duals, objective); SolverError unless optimal."""
        self.h.run()
        status = self.h.getModelStatus()
        if self.h.modelStatusToString(status) != "Optimal":
            raise SolverError(f"HiGHS ended with status {self.h.modelStatusToString(status)!r}")
        sol = self.h.getSolution()
        return np.asarray(sol.col_value), np.asarray(sol.row_dual), float(self.h.getInfo().objective_function_value)


__all__ = ["GrowingLP", "INF"]
