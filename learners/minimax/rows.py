"""The rows of the one minimax LP model: what each row is, in flat μ space, and its place on HiGHS.

With Φ(x, y) ∈ R^m (flattened μ space), rows indexed by pairs (x, C), x in the whole
domain and C a non-empty label subset, g_{x,C} = Σ_{y∈C} Φ(x, y)/|C| and
b_C = 1/|C| − 1, the problem is::

    R* = min_{μ⁺, μ⁻ ≥ 0, ν}  −(τ − λ)ᵀμ⁺ + (τ + λ)ᵀμ⁻ + ν
         s.t.  g_{x,C}ᵀ(μ⁺ − μ⁻) − ν ≤ b_C     for all (x, C),

with μ = μ⁺ − μ⁻, ν = φ(μ) + 1. Its dual (17) is max −bᵀα over distributions α on rows
with τ − λ ≤ Fᵀα ≤ τ + λ: α is the worst-case distribution p(x, y) = Σ_C α_{x,C} 1{y∈C}/|C|.

:class:`ModelRows` is the rows half of :class:`.lp_model.MinimaxModel` (the model inherits it;
one object owns the columns and the rows, nothing is forwarded). Every row of the model has
an owner tag (:meth:`ModelRows.delete_tagged`); a row written in flat μ space
(:meth:`ModelRows.add_cuts`, :meth:`ModelRows.add_flat_rows`) is also recorded there — its
coefficients (``row_matrix``), its label subset (``labels``), the domain point it was
generated at (``points``, where the separator gives one) and its dedup key — so that a μ
column entering later gets its coefficients in every recorded row, and a row a separator
reports twice is written once. Rows over a formulation's auxiliary columns (:meth:`add_rows`:
epigraph, message, score rows) are owned by tag only. Deleting rows removes them from HiGHS
and from the record together (their keys are forgotten: such a row may be added again).

Row generation — the rows a separation oracle (:class:`.separation.SeparationOracle`)
reports as violated, added until none is — is the engine's one driver,
:func:`.generation.generate_rows`; :func:`.generation.solve_boxed` checks the box |μ| ≤ B
is slack at the end.
"""

from __future__ import annotations

from itertools import compress
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
from numpy.typing import NDArray
import scipy.sparse as sp

from marg.errors import InputError
from marg.lp import INF

from .separation import as_sparse_row

if TYPE_CHECKING:
    from marg.lp import HighsLP


def cut_key(idx: np.ndarray, val: np.ndarray, b: float) -> int:
    """The dedup key of a row gᵀμ − ν ≤ b (g as sorted (indices, values); values to 12 decimals)."""
    return hash((idx.tobytes(), np.round(val, 12).tobytes(), round(b, 12)))


class ModelRows:
    """The rows of a :class:`.lp_model.MinimaxModel` (the model's ``lp``, ``m``, ``mu_entries`` and
    ``row_dual`` are its own).

    Attributes
    ----------
    row_tag : ndarray of int (n_rows,)
        The formulation's owner of each row (−1 shared).
    row_lower, row_upper : ndarray (n_rows,)
        Each row's bounds (lower ≤ aᵀx ≤ upper; a cut gᵀμ − ν ≤ b has upper b).
    row_nu : ndarray (n_rows,)
        ν's coefficient in each flat row (−1 for a cut; NaN for a row over auxiliary columns).
    labels : list (n_rows,)
        The label subset C of each flat row (None for a row over auxiliary columns).
    points : list (n_rows,)
        The domain point a flat row was generated at, where its separator gives one (else None).
    dedup : bool
        :meth:`add_cuts` skips a row whose key (:func:`cut_key`) a kept row has.
    """

    # the host model's own (:class:`.lp_model.MinimaxModel`'s), declared for the type checker
    lp: HighsLP
    tau: NDArray[np.float64]
    lam: NDArray[np.float64]
    tag: NDArray[np.int64]
    row_dual: NDArray[np.float64]
    if TYPE_CHECKING:
        @property
        def m(self) -> int: ...

        def mu_entries(self, flat: Any, vals: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...

        def delete_cols(self, cols: Any) -> None: ...

    def _init_rows(self, dedup: bool) -> None:
        self.dedup = bool(dedup)
        self.row_tag = np.zeros(0, dtype=np.int64)
        self.row_lower = self.row_upper = self.row_nu = np.zeros(0)
        self.labels: list[Any] = []
        self.points: list[Any] = []
        self._keys: list[int | None] = []
        self._seen: set[int] = set()
        self._coo_r: list[np.ndarray] = []
        self._coo_c: list[np.ndarray] = []
        self._coo_v: list[np.ndarray] = []
        self._F: sp.csc_array | None = None
        self._touched = np.zeros(self.m, dtype=bool)  # flat columns some recorded row has an entry in

    @property
    def n_rows(self) -> int:
        return int(self.row_tag.size)

    def row_matrix(self) -> sp.csc_array:
        """The recorded rows' μ coefficients in flat space, shape (n_rows, m) (CSC; zero rows for
        rows over auxiliary columns)."""
        if self._F is None or self._F.shape != (self.n_rows, self.m):
            if self._coo_r:
                r, c, v = np.concatenate(self._coo_r), np.concatenate(self._coo_c), np.concatenate(self._coo_v)
            else:
                r = c = np.zeros(0, np.int64)
                v = np.zeros(0)
            self._F = sp.csc_array((v, (r, c)), shape=(self.n_rows, self.m))
        return self._F

    def _record(self, r: int, idx: np.ndarray, val: np.ndarray) -> None:
        self._coo_r.append(np.full(idx.size, r, dtype=np.int64))
        self._coo_c.append(idx)
        self._coo_v.append(val)
        self._touched[idx] = True
        self._F = None

    def _register(self, k: int, tag: Any, lower: Any, upper: Any, nu: Any, labels: Sequence[Any], points: Sequence[Any],
                  keys: Sequence[int | None]) -> None:
        def grow(a: np.ndarray, v: Any, dtype: Any = np.float64) -> np.ndarray:
            return np.concatenate([a, np.broadcast_to(np.asarray(v, dtype=dtype), (k,))])

        self.row_tag = grow(self.row_tag, tag, np.int64)
        self.row_lower, self.row_upper, self.row_nu = grow(self.row_lower,
                                                           lower), grow(self.row_upper, upper), grow(self.row_nu, nu)
        self.labels += list(labels)
        self.points += list(points)
        self._keys += list(keys)

    # ------------------------------------------------------------------- rows
    def add_rows(self, lower: Any, upper: Any, starts: Any, index: Any, value: Any, tag: Any = -1) -> np.ndarray:
        """Rows lower ≤ Ax ≤ upper in CSR form over LP columns (a formulation's rows over its auxiliary
        columns; :meth:`marg.lp.HighsLP.add_rows`); owned by ``tag``, not recorded in flat space."""
        rows = self.lp.add_rows(lower, upper, starts, index, value)
        none = [None] * rows.size
        self._register(rows.size, tag, lower, upper, np.nan, none, none, none)
        return rows

    def add_rows_matrix(self, A: Any, upper: Any, tag: Any = -1) -> np.ndarray:
        """Rows A x ≤ upper, A sparse (n_new, n_cols) over LP columns."""
        R = sp.csr_array(A)
        R.sort_indices()
        upper = np.asarray(upper, dtype=np.float64).ravel()
        return self.add_rows(np.full(upper.size, -INF), upper, R.indptr[:-1], R.indices, R.data, tag)

    def add_flat_rows(self, g: Sequence[tuple[np.ndarray, np.ndarray]], nu: Any, lower: Any, upper: Any,
                      labels: Sequence[Any] | None = None, points: Sequence[Any] | None = None,
                      keys: Sequence[int | None] | None = None, tag: Any = -1) -> int:
        """Rows lower ≤ Σ_t g_val[t]·μ[g_idx[t]] + nu·ν ≤ upper, recorded in flat μ space, written on HiGHS
        as [ν, the μ⁺ entries, the μ⁻ entries] (terms of columns not in the model recorded, not written).

        Parameters
        ----------
        g : list of (indices, values)
            Each row's flat μ terms.
        nu, lower, upper : float or ndarray (n,)
            ν's coefficient and the row bounds.
        labels, points, keys : list (n,), optional
            Each row's label subset, domain point and dedup key.
        tag : int
            Owner tag.
        """
        n = len(g)
        if n == 0:
            return 0
        nu = np.broadcast_to(np.asarray(nu, dtype=np.float64), (n,))
        starts, idxs, vals = [], [], []
        nnz = 0
        for t, (idx, val) in enumerate(g):
            self._record(self.n_rows + t, idx, val)
            _, cols, vs = self.mu_entries(idx, val)
            starts.append(nnz)
            idxs.append(np.concatenate([[0], cols]).astype(np.int32))
            vals.append(np.concatenate([[nu[t]], vs]))
            nnz += 1 + cols.size
        lower = np.broadcast_to(np.asarray(lower, dtype=np.float64), (n,))
        upper = np.broadcast_to(np.asarray(upper, dtype=np.float64), (n,))
        self.lp.add_rows(lower, upper, starts, np.concatenate(idxs), np.concatenate(vals))
        none = [None] * n
        self._register(n, tag, lower, upper, nu, none if labels is None else labels, none if points is None else points,
                       none if keys is None else keys)
        return n

    def add_cuts(self, cuts: Sequence[Any]) -> int:
        """Rows gᵀμ − ν ≤ b from a separator (:class:`.separation.Cut` or (g, b, …) tuples), skipping
        a row already in the model (when ``dedup``); returns the count added."""
        g, b, labels, keys = [], [], [], []
        for c in cuts:
            idx, val = as_sparse_row(c[0], self.m)
            key = cut_key(idx, val, float(c[1])) if self.dedup else None
            if key is not None:
                if key in self._seen:
                    continue
                self._seen.add(key)
            lab = getattr(c, "labels", None)
            g.append((idx, val))
            b.append(float(c[1]))
            labels.append(tuple(lab) if lab is not None else None)
            keys.append(key)
        return self.add_flat_rows(g, -1.0, -INF, np.asarray(b, dtype=np.float64), labels, None, keys)

    def delete_rows(self, rows: Any) -> np.ndarray:
        """Delete rows from HiGHS and from the record (coefficients, labels, points, keys, the last duals);
        returns the mask (n_rows before,) of the rows kept."""
        rows = np.unique(np.asarray(rows, dtype=np.int64))
        keep = np.ones(self.n_rows, dtype=bool)
        keep[rows] = False
        if rows.size == 0:
            return keep
        self.lp.delete_rows(rows)
        if self._coo_r:
            coo = self.row_matrix().tocsr()[keep].tocoo()
            self._coo_r, self._coo_c, self._coo_v = [coo.row.astype(np.int64)], [coo.col.astype(np.int64)], [
                coo.data.astype(np.float64)]
        self.row_tag, self.row_lower, self.row_upper, self.row_nu = (self.row_tag[keep], self.row_lower[keep],
                                                                     self.row_upper[keep], self.row_nu[keep])
        self.labels = list(compress(self.labels, keep))
        self.points = list(compress(self.points, keep))
        self._keys = list(compress(self._keys, keep))
        self._seen = {k for k in self._keys if k is not None}
        self._F = None
        if self.row_dual.size == keep.size:
            self.row_dual = self.row_dual[keep]
        return keep

    def delete_tagged(self, tags: Any) -> None:
        """Delete the rows, then the columns, owned by ``tags``."""
        tags = np.asarray(tags, dtype=np.int64)
        self.delete_rows(np.flatnonzero(np.isin(self.row_tag, tags)))
        self.delete_cols(np.flatnonzero(np.isin(self.tag, tags)))

    def _column_entries(self, cols: np.ndarray, fill: Any) -> sp.csc_array | None:
        """μ_j's coefficients (n_rows, n) in the recorded rows for entering flat columns ``cols``, after
        recording ``fill`` (entries of rows that have none in these columns yet)."""
        n = cols.size
        untouched = not self._touched[cols].any()
        A = None
        if fill is not None:
            A = sp.csc_array(fill)
            if A.shape != (self.n_rows, n):
                raise InputError(f"add_mu: fill must have shape {(self.n_rows, n)}, got {A.shape}")
            coo = A.tocoo()
            nz = coo.data != 0.0
            if nz.any():
                self._coo_r.append(coo.row[nz].astype(np.int64))
                self._coo_c.append(cols[coo.col[nz]])
                self._coo_v.append(coo.data[nz].astype(np.float64))
                self._touched[cols[coo.col[nz]]] = True
                self._F = None
            A.eliminate_zeros()
        if untouched:  # nothing recorded in these columns before: the fill is the whole column
            return A
        return self.row_matrix()[:, cols]

    # ------------------------------------------------------------- duals
    def dual_features(self, cols: np.ndarray | None = None) -> np.ndarray:
        """Fᵀα at flat columns ``cols`` (all m if None), α = −(row duals) of the last optimal solve."""
        F = self.row_matrix()
        if cols is not None:
            F = F[:, np.asarray(cols, dtype=np.int64)]
        a = -self.row_dual if self.row_dual.size == self.n_rows else np.zeros(self.n_rows)
        return np.asarray(F.T @ a).ravel()

    def dual_violation(self, cols: np.ndarray | None = None) -> np.ndarray:
        """v = |Fᵀα − τ| − λ at ``cols`` (Algorithm 2, line 1): > 0 where α breaks the box."""
        cols_ = np.arange(self.m) if cols is None else np.asarray(cols, dtype=np.int64)
        fa = self.dual_features(cols_)
        lo, hi = (self.tau - self.lam)[cols_], (self.tau + self.lam)[cols_]
        tau, lam = 0.5 * (lo + hi), 0.5 * (hi - lo)
        return np.abs(fa - tau) - lam
