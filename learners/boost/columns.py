"""Monomial feature columns on the minimax engine: Ψ(x) = (m_1(x), …, m_D(x)) and their moments.

A Boolean monomial m over the codebook's binary tests (:mod:`.literals`) is a feature of x;
in class c it is the feature m(x)·1{y = c} of Φ(x, y) = e_y ⊗ Ψ(x) (the engine's (K, D)
layout: μ[c, u] is the weight of monomial u in class c). Its expectation is a sum of cells of
a released table over the monomial's features and the label::

    τ[c, u] = P(m_u(x) = 1, y = c) = Σ_{cells a of clique S ⊇ feat(u), m_u(a) = 1} N[a, c] / n,

read from the smallest released table holding the features (first-order tables for order
≤ 1, pair tables for two features). Its sample std is sqrt(τ(1 − τ)) (a Bernoulli mean) and
its DP noise sums the noise of the cells it adds (:func:`monomial_moments`, from the tables as
released, as every minimax learner reads them).

:class:`MonomialMap` is the map the minimax rules read (``psi``, ``scores``, ``dim``,
``names``, ``blocks``, ``to_dict``); it grows as column generation adds monomials.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from marg.errors import InputError

from ..features.statistics import Moments, cells_moments
from .literals import BinaryTest, Literal, Monomial, canonical, cover, describe, evaluate_tests, features_of


class MonomialMap:
    """Ψ(x) = (m_u(x))_u over a fixed test list; monomials are appended in place.

    Parameters
    ----------
    tests : sequence of BinaryTest
        The binary attributes literals index (from :func:`.literals.codebook_tests`).
    monomials : sequence of monomials, optional
        Initial columns (tuples of :class:`.literals.Literal`).
    """

    blocks: tuple = ()  # no one-hot blocks: the naive-Bayes tie-break reads none

    def __init__(self, tests: Sequence[BinaryTest], monomials: Sequence[Monomial] = ()):
        self.tests = tuple(tests)
        self.monomials: list[Monomial] = []
        self._index: dict[Monomial, int] = {}
        for m in monomials:
            self.add(m)

    # ----------------------------------------------------------------- columns
    def add(self, monomial: Sequence[Literal]) -> int:
        """Column index of ``monomial`` (appended if new)."""
        m = canonical(monomial)
        for lit in m:
            if not 0 <= lit.test < len(self.tests):
                raise InputError(f"literal {lit!r} names test {lit.test}, the map has {len(self.tests)}")
        if m not in self._index:
            self._index[m] = len(self.monomials)
            self.monomials.append(m)
        return self._index[m]

    def index(self, monomial: Monomial) -> int | None:
        return self._index.get(canonical(monomial))

    @property
    def dim(self) -> int:
        return len(self.monomials)

    @property
    def names(self) -> list[str]:
        """The features the tests read (the candidates monomials were chosen from), codebook order."""
        idx = sorted({(t.index, t.feature) for t in self.tests})
        return [nm for _, nm in idx]

    def describe(self, u: int) -> str:
        """Monomial u in words (``"cp = 4 AND oldpeak > 0.9"``)."""
        return describe(self.monomials[u], self.tests)

    def features(self, u: int) -> tuple[str, ...]:
        return features_of(self.monomials[u], self.tests)

    def indicator_columns(self) -> np.ndarray:
        """(D,) bool: every column is a Bernoulli mean."""
        return np.ones(self.dim, dtype=bool)

    def cell_mask(self, u: int) -> tuple[tuple[str, ...], np.ndarray]:
        """Monomial u as cells of a table: (its features in codebook order, the bool mask over
        their codes, shape (m_f1, m_f2, …), true where every literal holds); () and a scalar
        True for the constant monomial."""
        feats = self.features(u)
        per = {f: None for f in feats}
        for lit in self.monomials[u]:
            t = self.tests[lit.test]
            v = t.lookup() if lit.positive else ~t.lookup()
            per[t.feature] = v if per[t.feature] is None else per[t.feature] & v
        mask = np.ones((), dtype=bool)
        for f in feats:
            mask = np.multiply.outer(mask, per[f])
        return feats, mask.astype(bool)

    # ----------------------------------------------------------------- evaluate
    def psi(self, X: np.ndarray) -> np.ndarray:
        """Ψ(X), shape (n, D): m_u(x) ∈ {0, 1} for every row (codes in codebook feature order)."""
        X = np.asarray(X)
        if X.ndim != 2:
            raise InputError(f"X must be a 2-d array (n, p), got shape {X.shape}")
        used = sorted({lit.test for m in self.monomials for lit in m})
        B = np.zeros((X.shape[0], len(self.tests)), dtype=bool)
        if used:
            B[:, used] = evaluate_tests([self.tests[t] for t in used], X)
        out = np.zeros((X.shape[0], self.dim))
        for u, m in enumerate(self.monomials):
            out[:, u] = cover(m, B)
        return out

    def psi_column(self, X: np.ndarray, u: int) -> np.ndarray:
        """(n,) float: m_u on every row of X."""
        m = self.monomials[u]
        B = np.zeros((np.asarray(X).shape[0], len(self.tests)), dtype=bool)
        used = sorted({lit.test for lit in m})
        if used:
            B[:, used] = evaluate_tests([self.tests[t] for t in used], X)
        return cover(m, B).astype(np.float64)

    def scores(self, X: np.ndarray, mu: np.ndarray) -> np.ndarray:
        """Φ(x, y)ᵀμ = Σ_u μ[y, u] m_u(x), shape (n, K)."""
        mu = np.asarray(mu, dtype=np.float64)
        if mu.ndim != 2 or mu.shape[1] != self.dim:
            raise InputError(f"mu must have shape (K, {self.dim}), got {mu.shape}")
        return self.psi(X) @ mu.T

    # ---------------------------------------------------------------- persistence
    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "monomials",
            "tests": [{"feature": t.feature, "index": t.index, "truth": [int(v) for v in t.truth],
                       "text": t.text, "negation": t.negation} for t in self.tests],
            "monomials": [[[lit.test, int(lit.positive)] for lit in m] for m in self.monomials],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "MonomialMap":
        """The map from :meth:`to_dict` output; a malformed one is an InputError."""
        try:
            if d.get("kind") != "monomials":
                raise InputError(f"feature map kind {d.get('kind')!r} is not 'monomials'")
            tests = [BinaryTest(str(t["feature"]), int(t["index"]), tuple(bool(v) for v in t["truth"]),
                                str(t["text"]), str(t["negation"])) for t in d["tests"]]
            monos = [tuple(Literal(int(a), bool(b)) for a, b in m) for m in d["monomials"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"malformed monomial map: {exc}") from None
        return cls(tests, monos)


def clique_mask(monomial: Monomial, tests: Sequence[BinaryTest], clique: Sequence[str],
                shape: Sequence[int]) -> np.ndarray:
    """Bool array over the cells of ``clique`` (features only): where the monomial is true."""
    mask = np.ones(tuple(shape), dtype=bool)
    pos = {f: k for k, f in enumerate(clique)}
    for lit in monomial:
        t = tests[lit.test]
        if t.feature not in pos:
            raise InputError(f"monomial reads {t.feature!r}, not in the clique {tuple(clique)!r}")
        truth = t.lookup() if lit.positive else ~t.lookup()
        sh = [1] * len(shape)
        sh[pos[t.feature]] = -1
        mask &= truth.reshape(sh)
    return mask


def monomial_moments(summary: Any, tests: Sequence[BinaryTest], monomial: Monomial) -> Moments:
    """The :class:`~marg.learners.features.statistics.Moments` (each (K, 1)) of one monomial column,
    read from the Summary's tables as released (:func:`marg.learners.features.statistics.cells_moments`:
    the cells of the smallest table holding the monomial's features and the label where it holds).

    The constant monomial reads the label table (τ = class proportions). InputError when no
    released table holds the monomial's features with the label.
    """
    lab = summary.codebook.label.name
    feats = features_of(monomial, tests)
    names = (*feats, lab)
    if feats and not summary.has_clique(names):
        raise InputError(f"no released table holds {list(names)!r} (monomial {describe(monomial, tests)!r})")
    shape = tuple(summary.codebook.attribute_size(f) for f in feats)
    return cells_moments(summary, names, clique_mask(monomial, tests, feats, shape))
