"""Weighted points over binary tests: the agreement, the bounds (2.5), (2.7)/(4.5), and the
quantities the branching rules read.

Both oracles reduce their data to a :class:`PointSet`: n points with their values on N
binary tests (``B``, n × N bool), a positive weight and a negative weight each (rows of
Ω⁺ / Ω⁻ weighted by w, or table cells weighted by signed cell weights), and optionally the
seed's pair weights v (chapter 4) summed over points: ``pair_pos[a, b]`` = Σ v_{ii'} over
positive rows i in point a and negative rows i' in point b (``pair_neg`` the reverse).
Identical rows merged into one point change nothing below (they are never separated).

For a cover c ⊆ points (the points a monomial covers), the rewards of the seed's (3.21) are

    f⁺(c) = pos(c) − neg(c) + Σ_{a∈c, b∉c} pair_pos[a, b]
    f⁻(c) = neg(c) − pos(c) + Σ_{a∈c, b∉c} pair_neg[a, b]

(without pairs f⁺ = −f⁻ and max(f⁺, f⁻) = |w(c ∩ Ω⁺) − w(c ∩ Ω⁻)|, the MMA objective (2.2)).
Every monomial below a search node (J, C, E, F) covers a union of the node's
*inseparability classes* (covered points grouped by their values on the free tests F), so

    simple bound (2.5):  b⁺ = pos(c) + reach⁺(c),                reach⁺(a) = Σ_b pair_pos[a, b]
    tight bound (2.7)/(4.5):  b⁺ = Σ_η (g⁺_η)₊,  g⁺_η = pos_η − neg_η + reach⁺_η − pair_pos(η × η)

(and the same with − for b⁻) bound f⁺ and f⁻ of every monomial of the node; with v = 0 they
are the seed's (2.5) and (2.7). ``tight ≤ simple`` always.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from marg.errors import InputError


def _row_keys(bits: np.ndarray) -> np.ndarray:
    """(n,) keys of the rows of a bool matrix (n, t): equal keys ⇔ equal rows; keys sort as the
    packed bytes do (byte order). Up to 64 tests the key is an unsigned integer (the packed
    bytes read big-endian: the same order, and numpy sorts and searches integers far faster
    than void records); beyond, the void record of the packed bytes."""
    packed = np.packbits(bits, axis=1)
    if packed.shape[1] == 0:
        packed = np.zeros((bits.shape[0], 1), dtype=np.uint8)
    if packed.shape[1] <= 8:
        wide = np.zeros((packed.shape[0], 8), dtype=np.uint8)
        wide[:, : packed.shape[1]] = packed
        return wide.view(">u8").ravel().astype(np.uint64)
    packed = np.ascontiguousarray(packed)
    return packed.view(np.dtype((np.void, packed.shape[1]))).ravel()


def _with_test_set(keys: np.ndarray, bits: np.ndarray, rows: np.ndarray, tests: np.ndarray) -> np.ndarray:
    """The keys (:func:`_row_keys` of ``bits``) of rows ``rows`` with test ``tests`` set to true."""
    if keys.dtype == np.uint64:
        return keys[rows] | (np.uint64(1) << (np.uint64(63) - tests.astype(np.uint64)))
    packed = np.packbits(bits, axis=1)
    tgt = packed[rows].copy()
    tgt[np.arange(rows.size), tests // 8] |= (np.uint8(0x80) >> (tests % 8).astype(np.uint8))
    return np.ascontiguousarray(tgt).view(np.dtype((np.void, packed.shape[1]))).ravel()


def group_rows(bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Group equal rows of a bool matrix (n, t).

    Returns
    -------
    members : (n,) int64, the group of each row (0..q−1)
    first : (q,) int64, the first row of each group
    """
    n = bits.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if bits.shape[1] == 0:
        return np.zeros(n, dtype=np.int64), np.zeros(1, dtype=np.int64)
    _, first, members = np.unique(_row_keys(bits), return_index=True, return_inverse=True)
    return members.ravel().astype(np.int64), first.astype(np.int64)


def _block_sums(A: np.ndarray, members: np.ndarray, q: int) -> np.ndarray:
    """(q, q): Σ of A[a, b] over points a in class η and b in class η' (A: (n_c, n_c))."""
    if q == 0:
        return np.zeros((0, 0))
    order = np.argsort(members, kind="stable")
    counts = np.bincount(members, minlength=q)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    S = A[np.ix_(order, order)]
    return np.add.reduceat(np.add.reduceat(S, starts, axis=0), starts, axis=1)


@dataclass(frozen=True)
class Classes:
    """The inseparability classes of a node: its covered points grouped by the free tests.

    Attributes
    ----------
    members : (n_c,) int64
        Class of each covered point.
    patterns : (q, f) bool
        Each class's values on the f free tests.
    pos, neg : (q,)
        Positive / negative weight of each class.
    reach_pos, reach_neg : (q,)
        Σ over the class's points of the pair weights to every point (zeros without pairs).
    pair_pos, pair_neg : (q, q) or None
        Pair weights summed class × class (None without pairs).
    """

    members: np.ndarray
    patterns: np.ndarray
    pos: np.ndarray
    neg: np.ndarray
    reach_pos: np.ndarray
    reach_neg: np.ndarray
    pair_pos: np.ndarray | None
    pair_neg: np.ndarray | None

    @property
    def q(self) -> int:
        return int(self.pos.shape[0])

    @property
    def g_pos(self) -> np.ndarray:
        """(q,) g⁺_η of (4.5): the most a monomial gains on f⁺ by covering class η."""
        g = self.pos - self.neg + self.reach_pos
        return g - np.diag(self.pair_pos) if self.pair_pos is not None else g

    @property
    def g_neg(self) -> np.ndarray:
        g = self.neg - self.pos + self.reach_neg
        return g - np.diag(self.pair_neg) if self.pair_neg is not None else g

    def tight_bound(self) -> tuple[float, float]:
        """(b⁺, b⁻) of (2.7)/(4.5): Σ_η (g_η)₊ for each polarity."""
        return float(np.maximum(self.g_pos, 0.0).sum()), float(np.maximum(self.g_neg, 0.0).sum())


@dataclass(frozen=True)
class ChildBounds:
    """Bounds (or, for leaves, values) of the three children of ternary branching on each free test.

    Each array has one entry per free test t (in the order of the node's free list), and holds
    max(b⁺, b⁻) of the child: ``include`` covers ``cover ∧ test``, ``complement``
    ``cover ∧ ¬test``, ``exclude`` keeps the cover and drops t from the free tests.
    Costs are not subtracted here.
    """

    include: np.ndarray
    complement: np.ndarray
    exclude: np.ndarray


class PointSet:
    """n weighted points over N binary tests (see the module docstring for the formulas).

    Parameters
    ----------
    B : (n, N) bool
        Test values of each point.
    pos, neg : (n,) float, ≥ 0
        Positive and negative weight of each point.
    pair_pos, pair_neg : (n, n) float ≥ 0, optional
        Pair weights (both or neither): ``pair_pos[a, b]`` is earned by f⁺ when a is covered
        and b is not.
    """

    def __init__(self, B: np.ndarray, pos: np.ndarray, neg: np.ndarray,
                 pair_pos: np.ndarray | None = None, pair_neg: np.ndarray | None = None):
        B = np.asarray(B, dtype=bool)
        if B.ndim != 2:
            raise InputError(f"test matrix must be 2-d (points, tests), got shape {B.shape}")
        n = B.shape[0]
        pos = np.asarray(pos, dtype=np.float64).reshape(-1)
        neg = np.asarray(neg, dtype=np.float64).reshape(-1)
        for nm, v in (("positive", pos), ("negative", neg)):
            if v.shape != (n,):
                raise InputError(f"{nm} weights must have shape ({n},), got {v.shape}")
            if not np.all(np.isfinite(v)) or (v < 0).any():
                raise InputError(f"{nm} weights must be finite and >= 0, got minimum {v.min() if v.size else 0:g}")
        if (pair_pos is None) != (pair_neg is None):
            raise InputError("pair weights need both directions (pair_pos and pair_neg) or neither")
        if pair_pos is not None:
            pair_pos = np.asarray(pair_pos, dtype=np.float64)
            pair_neg = np.asarray(pair_neg, dtype=np.float64)
            for nm, P in (("pair_pos", pair_pos), ("pair_neg", pair_neg)):
                if P.shape != (n, n):
                    raise InputError(f"{nm} must have shape ({n}, {n}), got {P.shape}")
                if not np.all(np.isfinite(P)) or (P < 0).any():
                    raise InputError(f"{nm} must be finite and >= 0")
            if not pair_pos.any() and not pair_neg.any():
                pair_pos = pair_neg = None
        self.B = B
        self.pos = pos
        self.neg = neg
        self.pair_pos = pair_pos
        self.pair_neg = pair_neg
        if pair_pos is not None:
            self.reach_pos = pair_pos.sum(axis=1)
            self.reach_neg = pair_neg.sum(axis=1)
        else:
            self.reach_pos = np.zeros(n)
            self.reach_neg = np.zeros(n)

    @property
    def n(self) -> int:
        return int(self.B.shape[0])

    @property
    def n_tests(self) -> int:
        return int(self.B.shape[1])

    @property
    def has_pairs(self) -> bool:
        return self.pair_pos is not None

    @property
    def total(self) -> float:
        """Total weight (positive + negative + pairs): the scale of every value and bound."""
        return float(self.pos.sum() + self.neg.sum() + self.reach_pos.sum() + self.reach_neg.sum())

    # ------------------------------------------------------------------ covers
    def restrict(self, cover: np.ndarray, test: int, positive: bool) -> np.ndarray:
        """The points of ``cover`` (index array) where ``test`` is ``positive``."""
        col = self.B[cover, test]
        return cover[col] if positive else cover[~col]

    def value(self, cover: np.ndarray) -> tuple[float, float]:
        """(f⁺, f⁻) of a monomial covering the points ``cover`` (index array)."""
        p = float(self.pos[cover].sum())
        m = float(self.neg[cover].sum())
        if self.pair_pos is None:
            return p - m, m - p
        sub = np.ix_(cover, cover)
        fp = p - m + float(self.reach_pos[cover].sum()) - float(self.pair_pos[sub].sum())
        fn = m - p + float(self.reach_neg[cover].sum()) - float(self.pair_neg[sub].sum())
        return fp, fn

    def simple_bound(self, cover: np.ndarray) -> tuple[float, float]:
        """(b⁺, b⁻) of (2.5) (with pairs: each polarity's weight plus its pairs' reach)."""
        return (float(self.pos[cover].sum() + self.reach_pos[cover].sum()),
                float(self.neg[cover].sum() + self.reach_neg[cover].sum()))

    def classes(self, cover: np.ndarray, free: np.ndarray) -> Classes:
        """The inseparability classes of ``cover`` with respect to the free tests ``free``."""
        sub = self.B[np.ix_(cover, free)]
        members, first = group_rows(sub)
        q = int(first.shape[0])
        pos = np.bincount(members, weights=self.pos[cover], minlength=q)
        neg = np.bincount(members, weights=self.neg[cover], minlength=q)
        if self.pair_pos is None:
            z = np.zeros(q)
            return Classes(members, sub[first], pos, neg, z, z, None, None)
        rp = np.bincount(members, weights=self.reach_pos[cover], minlength=q)
        rn = np.bincount(members, weights=self.reach_neg[cover], minlength=q)
        sub_ix = np.ix_(cover, cover)
        Pp = _block_sums(self.pair_pos[sub_ix], members, q)
        Pn = _block_sums(self.pair_neg[sub_ix], members, q)
        return Classes(members, sub[first], pos, neg, rp, rn, Pp, Pn)

    # --------------------------------------------------------------- branching
    def child_bounds(self, cls: Classes, *, tight: bool, leaf: bool) -> ChildBounds:
        """max(b⁺, b⁻) of the children of ternary branching on each free test (k = 1).

        ``leaf`` means the include/complement children cannot be branched further (order
        cap reached, or no other free test): their entry is then the child's value
        max(f⁺, f⁻), not a bound. The exclude child is never a leaf here.
        """
        pat = cls.patterns.astype(np.float64)
        inv = 1.0 - pat
        pairs = cls.pair_pos is not None
        if leaf:
            dp = cls.pos - cls.neg + cls.reach_pos
            dn = cls.neg - cls.pos + cls.reach_neg
            inc_p, inc_n = pat.T @ dp, pat.T @ dn
            com_p, com_n = inv.T @ dp, inv.T @ dn
            if pairs:
                inc_p -= ((cls.pair_pos @ pat) * pat).sum(axis=0)
                inc_n -= ((cls.pair_neg @ pat) * pat).sum(axis=0)
                com_p -= ((cls.pair_pos @ inv) * inv).sum(axis=0)
                com_n -= ((cls.pair_neg @ inv) * inv).sum(axis=0)
        elif tight:
            gp = np.maximum(cls.g_pos, 0.0)
            gn = np.maximum(cls.g_neg, 0.0)
            inc_p, inc_n = pat.T @ gp, pat.T @ gn
            com_p, com_n = inv.T @ gp, inv.T @ gn
        else:
            sp = cls.pos + cls.reach_pos
            sn = cls.neg + cls.reach_neg
            inc_p, inc_n = pat.T @ sp, pat.T @ sn
            com_p, com_n = inv.T @ sp, inv.T @ sn
        if tight:
            exc_p, exc_n = self._exclude_tight(cls)
        else:
            f = cls.patterns.shape[1]
            sp = float((cls.pos + cls.reach_pos).sum())
            sn = float((cls.neg + cls.reach_neg).sum())
            exc_p, exc_n = np.full(f, sp), np.full(f, sn)
        return ChildBounds(np.maximum(inc_p, inc_n), np.maximum(com_p, com_n), np.maximum(exc_p, exc_n))

    @staticmethod
    def _exclude_tight(cls: Classes) -> tuple[np.ndarray, np.ndarray]:
        """Tight bounds of the exclude children: classes that differ only in test t merge."""
        q, f = cls.patterns.shape
        gp, gn = cls.g_pos, cls.g_neg
        base_p = float(np.maximum(gp, 0.0).sum())
        base_n = float(np.maximum(gn, 0.0).sum())
        out_p, out_n = np.full(f, base_p), np.full(f, base_n)
        if q < 2 or f == 0:
            return out_p, out_n
        keys = _row_keys(cls.patterns)
        order = np.argsort(keys)
        skeys = keys[order]
        a_idx, t_idx = np.nonzero(~cls.patterns)  # class a has test t false: its partner has it true
        if a_idx.size == 0:
            return out_p, out_n
        tkeys = _with_test_set(keys, cls.patterns, a_idx, t_idx)
        loc = np.minimum(np.searchsorted(skeys, tkeys), q - 1)
        hit = skeys[loc] == tkeys
        a = a_idx[hit]
        t = t_idx[hit]
        b = order[loc[hit]]
        mp = gp[a] + gp[b]
        mn = gn[a] + gn[b]
        if cls.pair_pos is not None:
            mp = mp - cls.pair_pos[a, b] - cls.pair_pos[b, a]
            mn = mn - cls.pair_neg[a, b] - cls.pair_neg[b, a]
        dp = np.maximum(mp, 0.0) - np.maximum(gp[a], 0.0) - np.maximum(gp[b], 0.0)
        dn = np.maximum(mn, 0.0) - np.maximum(gn[a], 0.0) - np.maximum(gn[b], 0.0)
        out_p += np.bincount(t, weights=dp, minlength=f)
        out_n += np.bincount(t, weights=dn, minlength=f)
        return out_p, out_n

    def reverse_greedy(self, cover: np.ndarray, free: np.ndarray) -> np.ndarray:
        """The free tests ordered j_1, j_2, … by the seed's reverse (worst-out) greedy.

        Start with every free test excluded (E' = F) and re-admit them one at a time, each
        time the one that keeps the inseparability φ(J, C, E ∪ E') = Σ_η min(w⁺_η, w⁻_η)
        largest; the last re-admitted is j_1. So every prefix {j_1..j_t} is the greedy
        t-set of tests to exclude, as the children of k-branching need. Returns positions
        into ``free``. (The ordering reads w only, not the pair weights: it is a heuristic;
        the bounds stay exact.)
        """
        sub = self.B[np.ix_(cover, free)]
        p = self.pos[cover]
        m = self.neg[cover]
        f = sub.shape[1]
        remaining = list(range(f))
        removed: list[int] = []
        members = np.zeros(sub.shape[0], dtype=np.int64)
        q = 1
        while remaining:
            if len(remaining) == 1:
                removed.append(remaining.pop())
                break
            order = np.argsort(members, kind="stable")
            counts = np.bincount(members, minlength=q)
            starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
            S = sub[np.ix_(order, remaining)].astype(np.float64)
            po, mo = p[order], m[order]
            P1 = np.add.reduceat(po[:, None] * S, starts, axis=0)
            N1 = np.add.reduceat(mo[:, None] * S, starts, axis=0)
            Pt = np.add.reduceat(po, starts)[:, None]
            Nt = np.add.reduceat(mo, starts)[:, None]
            phi = (np.minimum(P1, N1) + np.minimum(Pt - P1, Nt - N1)).sum(axis=0)
            best = int(np.argmax(phi))
            t = remaining.pop(best)
            removed.append(t)
            _, members = np.unique(members * 2 + sub[:, t], return_inverse=True)
            members = members.ravel()
            q = int(members.max()) + 1 if members.size else 1
        return np.asarray(removed[::-1], dtype=np.int64)
