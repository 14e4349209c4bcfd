"""Pricing for column generation: the dual violation of features outside the working set.

Algorithm 2 of seed 000 needs, for every feature outside the LP, how far the current dual
(the worst-case distribution over rows) is from matching its expectations within λ;
:class:`SplitPricer` gives a fast upper bound (a good explicit split of the dual's mass over
the feature's levels) and the exact value (a small LP per batch), and
:func:`screening_scores` ranks features for the initial working set.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from numpy.typing import NDArray
import scipy.sparse as sp

from marg.lp import HighsLP, Status, solver_error

from ..features.blocks import FeatureMap


class SplitPricer:
    """Dual violation of features outside the model (Algorithm 2's v, over the whole domain).

    The LP dual is a distribution over rows (x, C). A feature i outside the model has
    μ_i = 0, so every level of x_i is equally tight: the dual may spread each row's mass
    over the vertices of feature i freely. Rows of the same label subset C pool: with W_C
    their per-label mass and u_{C,a} ≥ 0, Σ_a u_{C,a} = W_C the part put on vertex a,

        (Fᵀα)[y, i] = Σ_{C∋y} Σ_a u_{C,a} v_a        (v_a: Ψ_i at vertex a),

    and the violation of feature i is v_i = min_u max_{y, j∈i} |(Fᵀα)[y, j] − τ[y, j]| − λ[y, j].
    Given W the features are independent (splits combine as a product over features), so
    v_i ≤ ε for every outside feature means ONE dual α is ε-feasible for the full problem —
    Theorem 3's condition — and v_i ≤ 0 means the restricted optimum is the full optimum.

    ``heuristic`` gives an upper bound on v_i (vectorized): the pooled-conditional split
    q_C(a) ∝ Σ_{y∈C} τ[y, a] improved by a few multiplicative (IPF-style) sweeps toward the
    box; ``exact`` solves the min-max split LP for a batch of features (HiGHS). The split's
    q_{C,a} = u_{C,a}/W_C are also the coefficients old rows get when the feature enters
    (row-generation formulation).
    """

    def __init__(self, fmap: FeatureMap, tau: np.ndarray, lam: np.ndarray, subsets: Sequence[tuple[int, ...]],
                 ipf_sweeps: int = 30):
        self.fmap = fmap
        self.tau = tau
        self.lam = lam
        self.K, self.D = tau.shape
        self.subsets = list(subsets)
        self.ipf_sweeps = int(ipf_sweeps)
        self.member = np.zeros((len(self.subsets), self.K))
        for k, c in enumerate(self.subsets):
            self.member[k, list(c)] = 1.0
        self.csize = self.member.sum(axis=1)
        groups: dict[tuple[str, int], list[int]] = {}
        for i, b in enumerate(fmap.blocks):
            groups.setdefault((b.kind, b.size), []).append(i)
        self.keys = list(groups)
        self.group_of = np.zeros(fmap.n_blocks, dtype=np.int64)
        self.index_in_group = np.zeros(fmap.n_blocks, dtype=np.int64)
        self._V: list[NDArray[np.float64]] = []
        self._T: list[NDArray[np.float64]] = []
        self._L: list[NDArray[np.float64]] = []
        for g, key in enumerate(self.keys):
            ids = np.asarray(groups[key], dtype=np.int64)
            self.group_of[ids] = g
            self.index_in_group[ids] = np.arange(ids.size)
            kind, size = key
            cols = np.stack([np.arange(fmap.blocks[i].offset, fmap.blocks[i].offset + size) for i in ids])
            if kind == "onehot":
                V = np.broadcast_to(np.eye(size), (ids.size, size, size))
            else:
                lo = np.array([fmap.blocks[i].lo for i in ids])
                hi = np.array([fmap.blocks[i].hi for i in ids])
                V = np.stack([lo, hi], axis=1)[:, :, None]
            self._V.append(np.ascontiguousarray(V))
            self._T.append(np.transpose(tau[:, cols], (1, 0, 2)))  # (nb, K, size)
            self._L.append(np.transpose(lam[:, cols], (1, 0, 2)))

    def _pooled(self, g: int, sel: np.ndarray, W: np.ndarray) -> np.ndarray:
        """Pooled-conditional split q (nb, nC, n_vertices)."""
        kind, size = self.keys[g]
        T = self._T[g][sel]
        if kind == "onehot":
            num = np.einsum("ck,bks->bcs", self.member, T)
            den = num.sum(axis=2, keepdims=True)
            return np.where(den > 0, num / np.where(den > 0, den, 1.0), 1.0 / size)
        V = self._V[g][sel]
        lo, hi = V[:, 0, 0], V[:, 1, 0]
        py = self.member.T @ W  # P_α(y)
        num = np.einsum("ck,bk->bc", self.member, T[:, :, 0])
        den = self.member @ py
        mean = np.where(den[None, :] > 0, num / np.where(den > 0, den, 1.0)[None, :], 0.5 * (lo + hi)[:, None])
        w_hi = np.clip((mean - lo[:, None]) / (hi - lo)[:, None], 0.0, 1.0)
        return np.stack([1.0 - w_hi, w_hi], axis=2)

    def _peeled(self, g: int, sel: np.ndarray, W: np.ndarray) -> np.ndarray:
        """Split built from the largest label subsets down: C takes (up to W_C) mass where all
        its labels still have target left, u_C(a) ∝ min_{y∈C} R[y, a], and R[y, a] −= u_C(a);
        singletons take their residual. Exact (zero violation at λ = 0) whenever every C
        finds enough common mass and the dual's label masses equal τ's."""
        T = self._T[g][sel]  # (nb, K, m)
        R = T.copy()
        nb, _, m = T.shape
        u = np.zeros((nb, len(self.subsets), m))
        for c in sorted(range(len(self.subsets)), key=lambda k: -self.csize[k]):
            if W[c] <= 0:
                continue
            C = list(self.subsets[c])
            cap = np.clip(R[:, C, :].min(axis=1), 0.0, None)  # (nb, m)
            tot = cap.sum(axis=1, keepdims=True)
            share = np.where(tot > 0, cap / np.where(tot > 0, tot, 1.0), 1.0 / m)
            u[:, c, :] = W[c] * share
            R[:, C, :] -= u[:, c, None, :]
        return u

    def _F(self, g: int, sel: np.ndarray, u: np.ndarray) -> np.ndarray:
        """(Fᵀα)[b, y, s] = Σ_{C∋y} Σ_a u[b, C, a]·V[b, a, s]."""
        F: NDArray[np.float64]
        if self.keys[g][0] == "onehot":  # V = identity
            F = np.matmul(self.member.T[None, :, :], u)
        else:
            F = np.einsum("ck,bca,bas->bks", self.member, u, self._V[g][sel])
        return F

    def _viol(self, g: int, sel: np.ndarray, u: np.ndarray) -> np.ndarray:
        v = np.abs(self._F(g, sel, u) - self._T[g][sel]) - self._L[g][sel]
        worst: NDArray[np.float64] = v.reshape(v.shape[0], -1).max(axis=1)
        return worst

    def _heuristic_group(self, g: int, sel: np.ndarray, W: np.ndarray,
                         tol_stop: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """Pooled split, then multiplicative sweeps u_{C,a} ← u_{C,a}·(Π_{y∈C} r_{y,a})^{1/|C|}
        (r: ratio of the box-clipped to the current (Fᵀα)[y, a]) renormalized to Σ_a u_{C,a} = W_C,
        on the features still above ``tol_stop`` (each leaves as soon as it is below).
        Returns the best violation seen per feature and its split u (nb, nC, n_vertices)."""
        q = self._pooled(g, sel, W)
        u_all = W[None, :, None] * q
        v_all = self._viol(g, sel, u_all)
        kind, _ = self.keys[g]
        if kind == "onehot":
            u_p = self._peeled(g, sel, W)
            v_p = self._viol(g, sel, u_p)
            b = v_p < v_all
            u_all[b], v_all[b] = u_p[b], v_p[b]
        todo = np.flatnonzero(v_all > tol_stop)
        if kind != "onehot" or self.ipf_sweeps <= 0 or todo.size == 0:
            return v_all, u_all
        act = W > 0
        Ma = self.member[act]
        sz = Ma.sum(axis=1)
        T_all, L_all = self._T[g][sel], self._L[g][sel]
        lo_all, hi_all = np.maximum(T_all - L_all, 0.0), T_all + L_all
        u = u_all[todo]
        for _ in range(self.ipf_sweeps):
            F = np.matmul(self.member.T[None, :, :], u)  # (nb, K, m)
            target = np.clip(F, lo_all[todo], hi_all[todo])
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(F > 0, target / np.where(F > 0, F, 1.0), 1.0)
            ratio = np.where((F <= 0) & (target > 0), 2.0, ratio)
            logr = np.log(np.clip(ratio, 1e-12, 1e12))
            fac = np.exp(np.einsum("ck,bka->bca", Ma, logr) / sz[None, :, None])  # geometric mean over y ∈ C
            ua = u[:, act, :] * fac
            ua = np.where(ua.sum(axis=2, keepdims=True) > 0, ua, 1.0)
            ua *= (W[act] / ua.sum(axis=2))[:, :, None]
            u[:, act, :] = ua
            F = np.matmul(self.member.T[None, :, :], u)
            v = (np.abs(F - T_all[todo]) - L_all[todo]).reshape(todo.size, -1).max(axis=1)
            better = v < v_all[todo]
            v_all[todo[better]] = v[better]
            u_all[todo[better]] = u[better]
            keep = v > tol_stop
            if not keep.any():
                break
            todo, u = todo[keep], u[keep]
        return v_all, u_all

    def heuristic(self, blocks: np.ndarray, W: np.ndarray, eps: float = 0.0) -> np.ndarray:
        """Upper bound on v_i for ``blocks`` (violation of a good explicit split).

        IPF sweeps run only on features the pooled split leaves above ``eps`` and stop once
        all of them are at or below it (only "≤ eps or not" matters to SELECT).
        """
        blocks = np.asarray(blocks, dtype=np.int64)
        out = np.empty(blocks.size)
        for g in range(len(self.keys)):
            mask = self.group_of[blocks] == g
            if mask.any():
                out[mask] = self._heuristic_group(g, self.index_in_group[blocks[mask]], W, tol_stop=eps)[0]
        return out

    def exact(self, blocks: np.ndarray, W: np.ndarray) -> tuple[np.ndarray, dict[int, np.ndarray]]:
        """min over splits of the max violation, one LP per batch (scipy/HiGHS).

        Returns
        -------
        v : ndarray (len(blocks),)
            The minimal violation, floored at 0 (0: satisfiable within λ).
        splits : dict block -> ndarray (nC, n_vertices)
            q_{C,a} = u_{C,a}/W_C (pooled conditional for subsets with W_C = 0).
        """
        blocks = np.asarray(blocks, dtype=np.int64)
        v_out = np.zeros(blocks.size)
        splits: dict[int, np.ndarray] = {}
        act = np.flatnonzero(W > 1e-15)
        nCa = act.size
        Wa = W[act]
        Ma = self.member[act]
        for g in range(len(self.keys)):
            mask = self.group_of[blocks] == g
            if not mask.any():
                continue
            ids = blocks[mask]
            sel = self.index_in_group[ids]
            nb = ids.size
            V, T, L = self._V[g][sel], self._T[g][sel], self._L[g][sel]
            nv, size = V.shape[1], V.shape[2]
            per = nCa * nv + 1
            nvar = nb * per
            base = np.arange(nb) * per
            uidx = base[:, None, None] + np.arange(nCa)[None, :, None] * nv + np.arange(nv)[None, None, :]
            er = np.repeat(np.arange(nb * nCa), nv)
            Aeq = sp.csr_array((np.ones(er.size), (er, uidx.ravel())), shape=(nb * nCa, nvar))
            beq = np.tile(Wa, nb)
            bb, yy, ss, cc, aa = np.meshgrid(np.arange(nb), np.arange(self.K), np.arange(size), np.arange(nCa),
                                             np.arange(nv), indexing="ij")
            coef = V[bb, aa, ss] * Ma[cc, yy]
            row = (bb * self.K + yy) * size + ss
            col = base[bb] + cc * nv + aa
            keep = coef != 0
            row, col, coef = row[keep], col[keep], coef[keep]
            nrow = nb * self.K * size
            trow = np.arange(nrow)
            tcol = base[trow // (self.K * size)] + per - 1
            A1 = sp.csr_array((np.concatenate([coef, -np.ones(nrow)]),
                               (np.concatenate([row, trow]), np.concatenate([col, tcol]))), shape=(nrow, nvar))
            A2 = sp.csr_array((np.concatenate([-coef, -np.ones(nrow)]),
                               (np.concatenate([row, trow]), np.concatenate([col, tcol]))), shape=(nrow, nvar))
            Aub = sp.vstack([A1, A2]).tocsr()
            bub = np.concatenate([(T + L).ravel(), -(T - L).ravel()])
            c = np.zeros(nvar)
            c[base + per - 1] = 1.0
            r = HighsLP.from_arrays(c, Aub, bub, (0, None), Aeq, beq, solver="choose").solve()
            if r.status is not Status.OPTIMAL:
                raise solver_error("the split-pricing LP", r)
            x = r.x
            v_out[mask] = x[base + per - 1]
            q = self._pooled(g, sel, W)
            q[:, act, :] = x[uidx] / Wa[None, :, None]
            q = np.clip(q, 0.0, None)
            q /= np.maximum(q.sum(axis=2, keepdims=True), 1e-300)
            for k, i in enumerate(ids):
                splits[int(i)] = q[k]
        return v_out, splits

    def vertices(self, block: int) -> np.ndarray:
        """The vertices of feature ``block``'s levels (n_vertices, size): the values its columns take."""
        V: NDArray[np.float64] = self._V[int(self.group_of[block])][int(self.index_in_group[block])]
        return V

    def pooled_split(self, block: int, W: np.ndarray) -> np.ndarray:
        g = int(self.group_of[block])
        q: NDArray[np.float64] = self._pooled(g, np.array([self.index_in_group[block]]), W)[0]
        return q


def screening_scores(fmap: FeatureMap, tau: np.ndarray) -> np.ndarray:
    """Initial-set screening per feature: the largest total-variation distance between two
    classes' conditional distributions of the feature (one-hot), or the largest gap between
    class means relative to the range (numeric; class masses from the one-hot blocks)."""
    K = tau.shape[0]
    out = np.zeros(fmap.n_blocks)
    pairs = [(a, c) for a in range(K) for c in range(a + 1, K)]
    groups: dict[int, list[int]] = {}
    for i, b in enumerate(fmap.blocks):
        if b.kind == "onehot":
            groups.setdefault(b.size, []).append(i)
    prior = np.full(K, 1.0 / K)
    for size, ids in groups.items():
        ids_a = np.asarray(ids, dtype=np.int64)
        cols = np.array([fmap.blocks[i].offset for i in ids])[:, None] + np.arange(size)[None, :]
        T = tau[:, cols]  # (K, nb, size)
        pi = T.sum(axis=2, keepdims=True)
        cond = np.where(pi > 0, T / np.where(pi > 0, pi, 1.0), 0.0)
        out[ids_a] = np.max([0.5 * np.abs(cond[a] - cond[c]).sum(axis=1) for a, c in pairs], axis=0)
        prior = pi[:, 0, 0]
    for i, b in enumerate(fmap.blocks):
        if b.kind == "numeric":
            m = tau[:, b.offset] / np.maximum(prior, 1e-300)
            out[i] = (m.max() - m.min()) / (b.hi - b.lo)
    return out
