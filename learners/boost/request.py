"""Which higher-order tables could let a longer rule enter: the bound behind ``marg request --learner boost``.

After a fit on the released tables (order ≤ k−1), a monomial m of order k over a clique Q of
k features (one literal per feature) can enter the vote only if its dual violation

    |E[c, m] − τ[c, m]| − λ[c, m] > eps,

E[c, m] = Σ_r y_r 1{c ∈ C_r} m(x_r) the expectation under the final row duals (known: the rows
are points of the domain), τ[c, m] = P(m(x) = 1, y = c) unknown until N[Q, y] is released.
Every (k−1)-subset S_j = Q ∖ {j} is released, and for its sub-monomial m_j (m without the
literal on feature j), m ≤ m_j gives τ ≤ hi = min_j τ[c, m_j]; for two features j ≠ l,
m = m_j ∧ m_l and m_j ∨ m_l ≤ m_{jl} give the Fréchet bound τ ≥ lo = max(0, τ[c, m_j] +
τ[c, m_l] − τ[c, m_{jl}]). With λ ≥ the price c(k)/n of order k,

    violation ≤ B[c, m] = max(E[c, m] − lo, hi − E[c, m]) − c(k)/n,

so a clique whose B stays ≤ eps for every class and monomial cannot bring a rule in and is
not worth its privacy cost. :func:`rank_cliques` computes max B per candidate clique
(every k-subset of the rule features whose (k−1)-subsets are all released and which is not
itself released) by projecting the cell arrays onto literal axes (one tensor contraction per
feature). On noisy tables the released τ stand in for the true ones: B is then a ranking, not
a proof.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from marg.errors import InputError

from .literals import Literal, describe


@dataclass(frozen=True)
class CliqueBound:
    """A candidate table: its features, the largest bound B over classes and monomials, and where.

    Attributes
    ----------
    clique : tuple of str
        k features (codebook order); the table to request is ``N[clique, y]``.
    bound : float
        max_{c, m} B[c, m] (see the module docstring).
    cls : str
        The class of the best monomial.
    rule : str
        The best monomial in words.
    """

    clique: tuple[str, ...]
    bound: float
    cls: str
    rule: str


def _literal_matrices(tests: Sequence[Any], feature: str, size: int) -> tuple[np.ndarray, list[Literal]]:
    """(2T, m) 0/1 matrix of a feature's literals (each test and its complement) over its codes."""
    rows, lits = [], []
    for t_idx, t in enumerate(tests):
        if t.feature != feature:
            continue
        look = t.lookup()
        if look.size != size:
            raise InputError(f"test {t.text!r} has {look.size} codes, feature {feature!r} {size}")
        rows += [look, ~look]
        lits += [Literal(t_idx, True), Literal(t_idx, False)]
    return np.asarray(rows, dtype=np.float64).reshape(len(rows), size), lits


def _project(cells: np.ndarray, mats: Sequence[np.ndarray]) -> np.ndarray:
    """Σ over cells of ``cells`` (axes = features) into literal axes: out[i_1..i_k] = Σ_a Π L_j[i_j, a_j] cells[a]."""
    out = cells
    for j, L in enumerate(mats):
        out = np.moveaxis(np.tensordot(L, out, axes=([1], [j])), 0, j)
    return out


class _BoundContext:
    """The pieces of B for one fit: released τ projected onto literal axes (cached), the duals."""

    def __init__(self, summary: Any, mm: Any, duals: np.ndarray, mats: dict[str, tuple[np.ndarray, list]],
                 price: float):
        self.summary, self.mm, self.mats, self.price = summary, mm, mats, float(price)
        self.lab = summary.codebook.label.name
        self.wcs = [mm.class_weights(duals, c) for c in range(int(summary.n_classes))]
        self._tau: dict[tuple[str, ...], np.ndarray] = {}

    def tau_literals(self, feats: tuple[str, ...]) -> np.ndarray:
        """τ over the literal axes of ``feats``, classes last: shape (2T_f…, K)."""
        if feats not in self._tau:
            J = self.summary.joint((*feats, self.lab))
            self._tau[feats] = _project(J, [self.mats[f][0] for f in feats])
        return self._tau[feats]

    def bounds(self, Q: tuple[str, ...], c: int) -> tuple[np.ndarray, np.ndarray]:
        """(B, E) over the literal axes of clique ``Q`` for class ``c`` (see the module docstring)."""
        k = len(Q)
        subs = [np.expand_dims(self.tau_literals(Q[:j] + Q[j + 1:])[..., c], j) for j in range(k)]
        hi = functools.reduce(np.minimum, subs)
        lo = np.zeros_like(hi)
        for j, l_ in itertools.combinations(range(k), 2):
            R = tuple(f for i, f in enumerate(Q) if i not in (j, l_))
            lo = np.maximum(lo, subs[j] + subs[l_] - np.expand_dims(self.tau_literals(R)[..., c], (j, l_)))
        E = _project(self.mm.cell_expectations(self.wcs[c], Q), [self.mats[f][0] for f in Q])
        return np.maximum(E - lo, hi - E) - self.price, E


def rank_cliques(est: Any, summary: Any, order: int | None = None, eps: float | None = None) -> list[CliqueBound]:
    """Candidate tables of ``order`` features ranked by their bound B, those with B > eps only.

    Parameters
    ----------
    est : BoostVote
        Its parameters define the fit on ``summary`` (the fit is run here).
    summary : Summary
        The released tables so far (first-order and pairs; earlier requested tables too).
    order : int, optional
        Table size k of the request; default one more than the largest released clique of
        the rule features. Must be 3..``est.max_order``.
    eps : float, optional
        Default ``est.eps``.

    Returns
    -------
    list of CliqueBound, largest bound first.
    """
    est.check_params()
    cb = summary.codebook
    lab = cb.label.name
    have = summary.feature_cliques(min_size=2)
    largest = max((len(c) for c in have), default=1)
    if largest < 2:
        raise InputError("a boost request needs the pair tables first (export round 1 with --stats all)")
    k = largest + 1 if order is None else int(order)
    if not 3 <= k <= int(est.max_order):
        raise InputError(f"a boost request asks for tables of 3..{est.max_order} features (--max-order), not {k}"
                         + (" (the tables up to that order are already released)" if order is None else ""))
    src, mm, _ = est._solve(summary)
    tests = src.fmap.tests
    used = sorted({t.feature for t in tests}, key=cb.index)
    eps = float(est.eps if eps is None else eps)
    _, _, _, duals = mm.solve_rows(None, [], [])
    sizes = {f: int(cb.attribute_size(f)) for f in used}
    mats = {f: _literal_matrices(tests, f, sizes[f]) for f in used}
    price = float(src.order_cost[min(k, len(src.order_cost) - 1)])

    def released(feats: tuple[str, ...]) -> bool:
        return summary.has_clique((*feats, lab))

    ctx = _BoundContext(summary, mm, duals, mats, price)
    out: list[CliqueBound] = []
    for Q in itertools.combinations(used, k):
        if released(Q) or not all(released(S) for S in itertools.combinations(Q, k - 1)):
            continue
        if any(mats[f][0].shape[0] == 0 for f in Q):
            continue
        best = (-np.inf, 0, None)
        for c in range(int(summary.n_classes)):
            B = ctx.bounds(Q, c)[0]
            i = int(np.argmax(B))
            if B.flat[i] > best[0]:
                best = (float(B.flat[i]), c, np.unravel_index(i, B.shape))
        if best[0] > eps:
            lits = tuple(sorted(mats[f][1][a] for f, a in zip(Q, best[2])))
            out.append(CliqueBound(Q, best[0], str(summary.classes[best[1]]), describe(lits, tests)))
    out.sort(key=lambda b: (-b.bound, tuple(cb.index(f) for f in b.clique)))
    return out
