"""Maximum monomial agreement by branch and bound: the seed's Algorithm 1 and its extension.

Solves, over the monomials an :class:`~.oracles.AgreementOracle` prices, with order
|J| + |C| ≤ K,

    max  max(f⁺(J, C), f⁻(J, C)) − c(|J| + |C|)

— the MMA problem (2.2) when c = 0 and there are no pair weights, the extended pricing
problem (3.21)/(4.1) of L0-RBoost otherwise (Goldberg 2010, chapters 2 and 4).

A subproblem (J, C, E, F) — literals in the monomial, excluded tests, free tests — is a node
of a best-first queue keyed by its upper bound: the simple bound (2.5) or the tightened
bound (2.7)/(4.5) (:mod:`.points`), minus c(|J| + |C|) (valid because c is nondecreasing),
or its value when it holds one monomial (order K reached or no free test). Branching
(Algorithm 1, lines 12–17) picks tests j_1..j_k of F and creates the child that excludes all
k and, for t = 1..k, the two children where j_t is the first to appear, uncomplemented or
complemented (j_1..j_{t−1} excluded):

- ``branching="strong"`` — k = 1, the seed's lexical strong branching: for each free j
  the bounds of the three children are sorted descending, and the j whose triple is
  lexicographically smallest is used;
- ``"greedy"`` — k = ⌈k_fraction·|F|⌉ tests ordered by the reverse greedy on the
  inseparability φ (:meth:`.points.PointSet.reverse_greedy`);
- ``"static"`` — the first k free tests in index order (k_fraction = 1 with the simple
  bound is the method of Goldberg & Shan [40]).

Pruning: a node whose bound is not above the incumbent is fathomed; a child whose literal
leaves the cover unchanged is dropped (the seed's rule after Algorithm 1), so free tests
constant on a node's cover are moved to E at once; a child that covers nothing is a leaf.
Those dominance rules need c nondecreasing and are applied only at nodes of order ≥
``min_order``. Limits: nodes bounded, queue length, seconds; a stopped search returns the
best monomial found and an upper bound on the optimum (max of the incumbent and the open
nodes' bounds).
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from marg.errors import InputError

from .literals import Literal, Monomial
from .oracles import AgreementOracle, Part
from .points import PointSet

BOUNDS = ("tight", "simple")
BRANCHINGS = ("strong", "greedy", "static")


@dataclass(frozen=True)
class SearchOptions:
    """How the branch and bound searches.

    Attributes
    ----------
    bound : {"tight", "simple"}
        (2.7)/(4.5) or (2.5).
    branching : {"strong", "greedy", "static"}
        k = 1 lexical strong branching, or k tests by reverse greedy / index order.
    k_fraction : float in (0, 1]
        For greedy/static: k = ⌈k_fraction·|F|⌉ (0.5 is the seed's k = ⌈|F|/2⌉).
    node_limit : int or None
        Stop after this many subproblems have been bounded.
    queue_limit : int
        Stop when the queue holds more subproblems (the seed's 500,000).
    time_limit : float or None
        Seconds.
    """

    bound: str = "tight"
    branching: str = "strong"
    k_fraction: float = 0.5
    node_limit: int | None = None
    queue_limit: int = 500_000
    time_limit: float | None = None

    def __post_init__(self) -> None:
        if self.bound not in BOUNDS:
            raise InputError(f"unknown bound {self.bound!r} (expected one of {', '.join(BOUNDS)})")
        if self.branching not in BRANCHINGS:
            raise InputError(f"unknown branching {self.branching!r} (expected one of {', '.join(BRANCHINGS)})")
        if not 0.0 < self.k_fraction <= 1.0:
            raise InputError(f"k_fraction must be in (0, 1], got {self.k_fraction!r}")
        if self.node_limit is not None and self.node_limit < 1:
            raise InputError(f"node_limit must be >= 1, got {self.node_limit!r}")
        if self.queue_limit < 1:
            raise InputError(f"queue_limit must be >= 1, got {self.queue_limit!r}")
        if self.time_limit is not None and not self.time_limit > 0:
            raise InputError(f"time_limit must be > 0 seconds, got {self.time_limit!r}")


@dataclass(frozen=True)
class MMAResult:
    """The best monomial found and what is known about the optimum.

    Attributes
    ----------
    monomial : tuple of Literal or None
        Best monomial with value above ``threshold`` (None if none was found).
    sign : int
        +1 if it is a positive monomial (f⁺ ≥ f⁻), −1 if negative.
    agreement : float
        max(f⁺, f⁻) of the monomial (−inf if none).
    value : float
        agreement − c(order) (−inf if none).
    upper_bound : float
        No priced monomial has a value above this (equals max(value, threshold) when
        ``status == "optimal"``).
    status : {"optimal", "node_limit", "queue_limit", "time_limit"}
    nodes : int
        Subproblems bounded (root and children created).
    expanded : int
        Subproblems branched.
    seconds : float
    """

    monomial: Monomial | None
    sign: int
    agreement: float
    value: float
    upper_bound: float
    status: str
    nodes: int
    expanded: int
    seconds: float

    @property
    def optimal(self) -> bool:
        return self.status == "optimal"


@dataclass
class _State:
    best: float
    monomial: Monomial | None = None
    sign: int = 1
    agreement: float = -math.inf
    nodes: int = 0
    expanded: int = 0
    status: str = "optimal"
    open_bound: float = -math.inf
    counter: int = 0
    start: float = field(default_factory=time.perf_counter)


class _PartSearch:
    """Algorithm 1 on one part (a point set over some of the oracle's tests)."""

    def __init__(self, part: Part, cost: np.ndarray, K: int, min_order: int, opts: SearchOptions, st: _State):
        self.ps: PointSet = part.points
        self.gtest = part.tests
        self.cost = cost
        self.K = K
        self.min_order = min_order
        self.opts = opts
        self.st = st
        self.tight = opts.bound == "tight"
        self.heap: list = []

    # --------------------------------------------------------------- helpers
    def _offer(self, lits: tuple, cover: np.ndarray, fp: float, fn: float) -> None:
        """Consider the monomial ``lits`` (local literals) with rewards (f⁺, f⁻) as incumbent."""
        order = len(lits)
        if order < self.min_order:
            return
        val = max(fp, fn) - self.cost[order]
        if val > self.st.best:
            st = self.st
            st.best = val
            st.monomial = tuple(sorted(Literal(int(self.gtest[t]), pos) for t, pos in lits))
            st.sign = 1 if fp >= fn else -1
            st.agreement = max(fp, fn)

    def _bound(self, cover: np.ndarray, free: np.ndarray) -> float:
        ps = self.ps
        if self.tight:
            bp, bn = ps.classes(cover, free).tight_bound()
        else:
            bp, bn = ps.simple_bound(cover)
        return max(bp, bn)

    def _push(self, bound: float, lits: tuple, cover: np.ndarray, free: np.ndarray) -> None:
        st = self.st
        st.counter += 1
        heapq.heappush(self.heap, (-bound, st.counter, lits, cover, free))

    def _child(self, lits: tuple, cover: np.ndarray, free: np.ndarray) -> None:
        """Bound a new subproblem, offer its monomial, queue it unless fathomed."""
        st = self.st
        st.nodes += 1
        order = len(lits)
        fp, fn = self.ps.value(cover) if cover.size else (0.0, 0.0)
        self._offer(lits, cover, fp, fn)
        if cover.size == 0 and order < self.min_order <= order + free.size:
            # Everything below covers nothing; the cheapest admissible one has order min_order.
            pad = tuple((int(t), True) for t in free[: self.min_order - order])
            self._offer(lits + pad, cover, 0.0, 0.0)
        if order >= self.K or free.size == 0 or cover.size == 0:
            return  # one monomial (or only empty covers below): its value is all there is
        bound = self._bound(cover, free) - self.cost[order]
        if bound > st.best:
            self._push(bound, lits, cover, free)

    # ----------------------------------------------------------------- search
    def run(self) -> None:
        st = self.st
        root = np.arange(self.ps.n, dtype=np.int64)
        free = np.arange(self.ps.n_tests, dtype=np.int64)
        self._child((), root, free)
        opts = self.opts
        while self.heap:
            if opts.node_limit is not None and st.nodes >= opts.node_limit:
                st.status = "node_limit"
                break
            if opts.time_limit is not None and time.perf_counter() - st.start > opts.time_limit:
                st.status = "time_limit"
                break
            if len(self.heap) > opts.queue_limit:
                st.status = "queue_limit"
                break
            negb, _, lits, cover, free = heapq.heappop(self.heap)
            if -negb <= st.best:
                self.heap.clear()  # best-first: every open node is fathomed
                break
            st.expanded += 1
            self._branch(-negb, lits, cover, free)
        if self.heap:
            st.open_bound = max(st.open_bound, max(-h[0] for h in self.heap))

    def _branch(self, bound: float, lits: tuple, cover: np.ndarray, free: np.ndarray) -> None:
        ps = self.ps
        order = len(lits)
        dominance = order >= self.min_order
        if dominance:
            col = ps.B[np.ix_(cover, free)]
            split = col.any(axis=0) & ~col.all(axis=0)
            if not split.all():
                # A test constant on the cover makes a child with the same cover (dropped) and
                # one that covers nothing (value −c(order+1) ≤ this node's): exclude it now.
                free = free[split]
                if free.size == 0:
                    return
        if self.opts.branching == "strong":
            self._branch_strong(lits, cover, free, dominance)
        else:
            self._branch_k(lits, cover, free, dominance)

    def _branch_strong(self, lits: tuple, cover: np.ndarray, free: np.ndarray, dominance: bool) -> None:
        ps = self.ps
        order = len(lits)
        leaf = order + 1 >= self.K or free.size == 1
        cls = ps.classes(cover, free)
        cb = ps.child_bounds(cls, tight=self.tight, leaf=leaf)
        c1 = self.cost[order + 1]
        inc = cb.include - c1
        com = cb.complement - c1
        exc = cb.exclude - self.cost[order] if free.size > 1 else np.full(free.size, -math.inf)
        trip = -np.sort(-np.column_stack([inc, com, exc]), axis=1)  # each row descending
        t = int(np.lexsort((trip[:, 2], trip[:, 1], trip[:, 0]))[0])
        j = int(free[t])
        rest = np.delete(free, t)
        if free.size > 1:
            self.st.nodes += 1
            if exc[t] > self.st.best:
                self._push(float(exc[t]), lits, cover, rest)  # same cover and monomial: nothing new to offer
        for positive, b in ((True, inc[t]), (False, com[t])):
            sub = ps.restrict(cover, j, positive)
            if dominance and sub.size == cover.size:
                continue
            self.st.nodes += 1
            child = lits + ((j, positive),)
            if leaf or sub.size == 0:
                fp, fn = ps.value(sub) if sub.size else (0.0, 0.0)
                self._offer(child, sub, fp, fn)
                continue
            fp, fn = ps.value(sub)
            self._offer(child, sub, fp, fn)
            if b > self.st.best:
                self._push(float(b), child, sub, rest)

    def _branch_k(self, lits: tuple, cover: np.ndarray, free: np.ndarray, dominance: bool) -> None:
        ps = self.ps
        f = free.size
        k = max(1, min(f, math.ceil(self.opts.k_fraction * f - 1e-12)))
        if self.opts.branching == "greedy":
            chosen = free[ps.reverse_greedy(cover, free)[:k]]
        else:
            chosen = free[:k]
        rest = np.setdiff1d(free, chosen, assume_unique=True)
        if rest.size:
            self._child_excluded(lits, cover, rest)
        for t in range(k):
            j = int(chosen[t])
            free_t = np.concatenate([chosen[t + 1:], rest])
            for positive in (True, False):
                sub = ps.restrict(cover, j, positive)
                if dominance and sub.size == cover.size:
                    continue
                self._child(lits + ((j, positive),), sub, free_t)

    def _child_excluded(self, lits: tuple, cover: np.ndarray, rest: np.ndarray) -> None:
        """The child that excludes the chosen tests: same monomial as its parent, fewer free tests."""
        st = self.st
        st.nodes += 1
        bound = self._bound(cover, rest) - self.cost[len(lits)]
        if bound > st.best:
            self._push(bound, lits, cover, rest)

    def root_bound(self) -> float:
        """An upper bound over the whole part (for a part the search never reached)."""
        root = np.arange(self.ps.n, dtype=np.int64)
        fp, fn = self.ps.value(root)
        best = max(fp, fn) - self.cost[0] if self.min_order == 0 else -math.inf
        if self.ps.n_tests and self.K > 0:
            best = max(best, self._bound(root, np.arange(self.ps.n_tests)) - self.cost[0])
        return best


def _cost_array(cost: Sequence[float] | np.ndarray | None, K: int) -> np.ndarray:
    if cost is None:
        return np.zeros(K + 1)
    c = np.asarray(cost, dtype=np.float64).reshape(-1)
    if c.size < K + 1:
        raise InputError(f"cost needs an entry for every order 0..{K}, got {c.size}")
    c = c[: K + 1]
    if not np.all(np.isfinite(c)):
        raise InputError("cost must be finite")
    if (np.diff(c) < 0).any():
        k = int(np.flatnonzero(np.diff(c) < 0)[0])
        raise InputError(f"cost must be nondecreasing in the order, got c({k})={c[k]:g} > c({k + 1})={c[k + 1]:g}")
    return c


def maximize_agreement(oracle: AgreementOracle, *, max_order: int | None = None,
                       cost: Sequence[float] | np.ndarray | None = None, min_order: int = 0,
                       threshold: float = -math.inf, options: SearchOptions | None = None) -> MMAResult:
    """The monomial of largest max(f⁺, f⁻) − c(order) that the oracle prices.

    Parameters
    ----------
    oracle : AgreementOracle
    max_order : int, optional
        K, the order cap (default: no cap, i.e. the number of tests).
    cost : array (≥ K + 1,), optional
        c(k) for k = 0..K, nondecreasing (e.g. :func:`.cost.code_length_cost`); default 0.
    min_order : int
        Smallest order offered (0 admits the constant monomial ``()``).
    threshold : float
        Only monomials with a value above it are of interest (a column-generation master
        passes the value a column must beat); the search starts with it as incumbent.
    options : SearchOptions

    Returns
    -------
    MMAResult
    """
    opts = options or SearchOptions()
    N = oracle.n_tests
    K = N if max_order is None else int(max_order)
    if max_order is not None and (int(max_order) != max_order or max_order < 0):
        raise InputError(f"max_order must be a non-negative integer, got {max_order!r}")
    K = min(K, N)
    if int(min_order) != min_order or not 0 <= min_order <= K:
        raise InputError(f"min_order must be an integer in 0..{K}, got {min_order!r}")
    if math.isnan(threshold):
        raise InputError("threshold must be a number, got nan")
    c = _cost_array(cost, K)
    st = _State(best=float(threshold))
    searches = [_PartSearch(p, c, K, int(min_order), opts, st) for p in oracle.parts()]
    for k, s in enumerate(searches):
        s.run()
        if st.status != "optimal":
            for other in searches[k + 1:]:
                st.open_bound = max(st.open_bound, other.root_bound())
            break
    upper = max(st.best, st.open_bound) if st.status != "optimal" else st.best
    found = st.monomial is not None
    return MMAResult(
        monomial=st.monomial,
        sign=st.sign if found else 1,
        agreement=st.agreement if found else -math.inf,
        value=st.best if found else -math.inf,
        upper_bound=float(upper),
        status=st.status,
        nodes=st.nodes,
        expanded=st.expanded,
        seconds=time.perf_counter() - st.start,
    )
