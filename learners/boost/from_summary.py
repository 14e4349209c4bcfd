"""Boosting's minimax problem from a Summary: :func:`problem_from` of the monomial shape.

The twin of :func:`marg.learners.minimax.from_summary.problem_from` for a map that grows: the
columns enter one by one, so the problem carries a function giving each monomial's τ and λ as it
enters, and both come through the same :class:`~marg.learners.minimax.from_summary.TableReader`
as every minimax learner's — the monomial's moments from the tables as released
(:func:`.columns.monomial_moments`, n = ``Summary.n_released``) and its box from
:func:`marg.learners.features.calibration.confidence_box`, at a Bonferroni count of every candidate column
(:func:`count_candidates`, K per monomial), plus the code-length price c(k)/n of its order
((3.22) of the boosting seed, n the problem's n, the reported ``Summary.n``). The pricing search
reads the same tables' cells (``clique_tau``); the completion of free features the class-pooled
first-order tables of the reported Summary (a product distribution: any completion gives an
equally tight row).
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Sequence

import numpy as np

from ..features.statistics import released
from ..minimax.from_summary import TableReader
from .columns import MonomialMap, monomial_moments
from .cost import code_length_cost
from .literals import BinaryTest, Monomial
from .minimax_cg import ColumnSource, MonomialProblem


def count_candidates(tests: Sequence[Any], cliques: Sequence[tuple[str, ...]], max_order: int) -> int:
    """An upper bound on the monomials of order ≤ max_order the released cliques price: the
    Bonferroni count per class.

    Order ≤ 2 is counted exactly (the constant, 2 literals per test, 4 sign patterns per pair
    of tests on one feature or on a released pair); order k ≥ 3 adds C(T_Q, k)·2^k for every
    released clique Q of at least 3 features (T_Q its tests) — an over-count where cliques
    overlap, which only widens λ.
    """
    n = 1 + 2 * len(tests)
    if max_order >= 2:
        pairs = {frozenset(p) for c in cliques if len(c) >= 2 for p in itertools.combinations(c, 2)}
        for a in range(len(tests)):
            for b in range(a + 1, len(tests)):
                fa, fb = tests[a].feature, tests[b].feature
                if fa == fb or frozenset((fa, fb)) in pairs:
                    n += 4
    for c in cliques:  # order ≥ 3: any k of the clique's tests (also within one or two features)
        t_q = sum(1 for t in tests if t.feature in c)
        n += sum(math.comb(t_q, k) * 2 ** k for k in range(3, int(max_order) + 1))
    return n


def problem_from(summary: Any, tests: Sequence[BinaryTest], cliques: Sequence[tuple[str, ...]], max_order: int,
                 s: float | None = None, coverage: float = 0.95, kappa: float = 1.5,
                 penalty: float = 1.0) -> MonomialProblem:
    """Boosting's problem on ``summary``: monomials over ``tests`` of order ≤ ``max_order`` priced on ``cliques``.

    Parameters
    ----------
    summary : marginals.summary.Summary
    tests : sequence of BinaryTest
        The literals' tests (:func:`.literals.codebook_tests`).
    cliques : sequence of tuple of str
        The released feature cliques monomials may be priced on (singletons, then larger ones).
    max_order : int
    s, coverage : the box (:func:`marg.learners.features.calibration.confidence_box`).
    kappa, penalty : the price ``penalty``·c(k)/n (:func:`.cost.code_length_cost`).

    Returns
    -------
    MonomialProblem
        Its source's ``moments(monomial)`` gives (τ (K,), λ (K,) price included), computed once a monomial.
    """
    cb = summary.codebook
    lab = cb.label.name
    K = int(summary.n_classes)
    read = TableReader(summary, s, coverage, n_intervals=K * count_candidates(tests, cliques, int(max_order)))
    n = read.n
    order_cost = penalty * code_length_cost(len(tests), max(n, 2.0), min(int(max_order), len(tests)), kappa) / n
    binary = np.ones(1, dtype=bool)  # a monomial's column is a Bernoulli mean
    cache: dict[Monomial, tuple[np.ndarray, np.ndarray]] = {}

    def moments(mono: Monomial) -> tuple[np.ndarray, np.ndarray]:
        if mono not in cache:
            tau, box = read.box(monomial_moments(summary, tests, mono), binary)
            cache[mono] = (tau[:, 0], box.lam[:, 0] + order_cost[len(mono)])
        return cache[mono]

    rel = released(summary)
    sizes = np.array([cb.attribute_size(f.name) if f.is_discrete else 1 for f in cb.features], dtype=np.int64)
    src = ColumnSource(
        codebook=cb, fmap=MonomialMap(tests), sizes=sizes, cliques=list(cliques),
        clique_tau={c: rel.joint((*c, lab)) for c in cliques},
        pooled=[summary.joint((f.name, lab)).T if f.is_discrete else np.ones((K, 1)) for f in cb.features],
        moments=moments, order_cost=order_cost, max_order=int(max_order),
    )
    return MonomialProblem(src, K)


def prices_exactly(summary: Any, cliques: Sequence[tuple[str, ...]]) -> bool:
    """Whether an exact search proves no monomial violated: every table agrees on the cells two share.

    The search prices a monomial on the cells of one clique and its column reads the smallest
    table holding its features; exact tables (and one table per feature, no larger clique) agree.
    Noisy tables as released do not (post-processing, which would make them agree, mixes their
    noise): a single-feature monomial priced on a pair table's cells is then a ranking, not a proof.
    """
    return not summary.is_noisy or all(len(c) == 1 for c in cliques)
