"""Boolean tests and monomials over a codebook: the seed's binary attributes, in words.

The seed (Goldberg 2010, ch. 2) works on a 0/1 matrix whose columns are binary attributes;
a monomial is a conjunction of attributes and complemented attributes, (2.1)
``m_{J,C}(x) = Π_{j∈J} x_j Π_{c∈C} (1 − x_c)``. Here the binary attributes are
:class:`BinaryTest` objects drawn from the codebook, each a set of codes of one feature:

- a categorical feature with levels a_1..a_m gives the level indicators ``x = a``
  (complement ``x ≠ a``); with two levels one indicator suffices (its complement is the
  other level);
- a numeric feature with public bin edges e_1 < … < e_k gives the threshold tests
  ``x ≤ e_j`` (complement ``x > e_j``), since its codes are ordered bins
  ``(-inf, e_1], (e_1, e_2], …, (e_k, inf)``; with a missing level also the test
  ``x missing``, and the complement of a threshold reads ``x > e_j or missing``;
- raw numeric features (a public range, no edges) give no tests.

A :class:`Literal` is a test with a polarity (``positive=True`` is the test, ``False`` its
complement); a monomial is a tuple of literals sorted by test index (``()`` is the
constant monomial, true everywhere). Its order is the number of literals, ``|J| + |C|``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from marg.errors import InputError
from marg.marginals.data.codebook import CategoricalFeature, Codebook, NumericFeature


@dataclass(frozen=True)
class BinaryTest:
    """A binary attribute: ``codes[feature] ∈ true_codes``.

    Attributes
    ----------
    feature : str
        Feature name.
    index : int
        The feature's position in the codebook (column of the code matrix X).
    truth : tuple of bool, length m (the feature's number of codes)
        ``truth[a]`` is the test's value on code a.
    text : str
        The test in words (``"cp = 4"``, ``"age <= 55"``).
    negation : str
        Its complement in words (``"cp != 4"``, ``"age > 55"``).
    """

    feature: str
    index: int
    truth: tuple[bool, ...]
    text: str
    negation: str

    def __post_init__(self) -> None:
        t = tuple(bool(v) for v in self.truth)
        if not any(t) or all(t):
            raise InputError(f"test {self.text!r} is constant over the levels of {self.feature!r}")
        object.__setattr__(self, "truth", t)

    def lookup(self) -> np.ndarray:
        """(m,) bool: the test's value on each code."""
        return np.asarray(self.truth, dtype=bool)

    def evaluate(self, codes: np.ndarray) -> np.ndarray:
        """(n,) bool: the test on a column of integer codes of this feature."""
        return self.lookup()[np.asarray(codes, dtype=np.int64)]


@dataclass(frozen=True, order=True)
class Literal:
    """Test number ``test`` (an index into the test tuple) or, if not ``positive``, its complement."""

    test: int
    positive: bool = True


Monomial = tuple[Literal, ...]


def _fmt(v: float) -> str:
    return f"{v:g}"


def _categorical_tests(i: int, f: CategoricalFeature) -> list[BinaryTest]:
    m = f.n_levels
    levels = f.levels
    if m == 2:
        return [BinaryTest(f.name, i, (False, True), f"{f.name} = {levels[1]}", f"{f.name} = {levels[0]}")]
    out = []
    for a, lv in enumerate(levels):
        truth = tuple(k == a for k in range(m))
        out.append(BinaryTest(f.name, i, truth, f"{f.name} = {lv}", f"{f.name} != {lv}"))
    return out


def _numeric_tests(i: int, f: NumericFeature) -> list[BinaryTest]:
    if f.edges is None:
        return []
    m = f.n_levels
    k = len(f.edges)
    miss = " or missing" if f.missing else ""
    out = []
    for j, e in enumerate(f.edges, start=1):  # x <= e_j  <=>  code < j (the missing code is last)
        truth = tuple(c < j for c in range(m))
        out.append(BinaryTest(f.name, i, truth, f"{f.name} <= {_fmt(e)}", f"{f.name} > {_fmt(e)}{miss}"))
    if f.missing:
        truth = tuple(c == k + 1 for c in range(m))
        out.append(BinaryTest(f.name, i, truth, f"{f.name} missing", f"{f.name} not missing"))
    return out


def codebook_tests(codebook: Codebook, features: Iterable[str] | None = None) -> tuple[BinaryTest, ...]:
    """The tests of the discrete features (all, or those named), codebook order.

    Tests with the same truth set as an earlier test of the same feature, or its
    complement, are dropped (they would be the same binary attribute twice).
    """
    names = None if features is None else set(features)
    if names is not None:
        for nm in names:
            codebook.index(nm)
    out: list[BinaryTest] = []
    for i, f in enumerate(codebook.features):
        if names is not None and f.name not in names:
            continue
        cand = _categorical_tests(i, f) if isinstance(f, CategoricalFeature) else _numeric_tests(i, f)
        seen: set[tuple[bool, ...]] = set()
        for t in cand:
            comp = tuple(not v for v in t.truth)
            if t.truth in seen or comp in seen:
                continue
            seen.add(t.truth)
            out.append(t)
    return tuple(out)


def evaluate_tests(tests: Sequence[BinaryTest], X: np.ndarray) -> np.ndarray:
    """(n, N) bool: every test on every row of the code matrix X (n, p), codebook columns."""
    X = np.asarray(X)
    if X.ndim != 2:
        raise InputError(f"codes must be a 2-d array (rows, features), got shape {X.shape}")
    B = np.empty((X.shape[0], len(tests)), dtype=bool)
    for t, test in enumerate(tests):
        if test.index >= X.shape[1]:
            raise InputError(f"test {test.text!r} needs column {test.index}, codes have {X.shape[1]}")
        col = X[:, test.index]
        m = len(test.truth)
        codes = col.astype(np.int64)
        bad = (codes != col) | (codes < 0) | (codes >= m)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise InputError(f"feature {test.feature!r}: code {col[k]!r} at row {k + 1} is outside 0..{m - 1}")
        B[:, t] = test.lookup()[codes]
    return B


def canonical(monomial: Iterable[Literal]) -> Monomial:
    """The monomial as a tuple of distinct literals sorted by test; InputError if a test appears twice."""
    lits = tuple(sorted(set(monomial)))
    tests = [lit.test for lit in lits]
    if len(set(tests)) != len(tests):
        raise InputError(f"monomial uses a test and its complement: {lits!r}")
    return lits


def cover(monomial: Iterable[Literal], B: np.ndarray) -> np.ndarray:
    """(n,) bool: the rows of the test matrix B (n, N) the monomial covers (m(x) = 1)."""
    out = np.ones(B.shape[0], dtype=bool)
    for lit in monomial:
        out &= B[:, lit.test] if lit.positive else ~B[:, lit.test]
    return out


def features_of(monomial: Iterable[Literal], tests: Sequence[BinaryTest]) -> tuple[str, ...]:
    """The distinct feature names a monomial reads, in codebook order."""
    idx = sorted({(tests[lit.test].index, tests[lit.test].feature) for lit in monomial})
    return tuple(nm for _, nm in idx)


def describe(monomial: Iterable[Literal], tests: Sequence[BinaryTest]) -> str:
    """The monomial in words: ``"cp = 4 AND oldpeak > 0.95"``; ``"TRUE"`` for the constant."""
    parts = [tests[lit.test].text if lit.positive else tests[lit.test].negation for lit in sorted(monomial)]
    return " AND ".join(parts) if parts else "TRUE"
