"""The code-length cost c(k) of a Boolean monomial of order k, the seed's (3.22).

A two-part code (Goldberg 2010, §3.1) names a monomial of order k by its table (one of K
code tables, ⌈log K⌉ bits) and its entry in the table of the 2^k·C(N, k) monomials of
order k; normalised by the log M bits that identifying a misclassified observation costs,
and plus κ for the bits of the weight λ:

    c(k) = (k + log₂ C(N, k) + log₂ K) / log₂ M + κ,      κ ∈ [1 + 1/M, 2] (the seed uses 1.5)

with N binary attributes (tests), M training observations and K the largest order. It is
the price L0-RBoost puts on μ_u in (3.13a), and the amount the extended MMA (4.4)/(4.5)
subtracts from a monomial's agreement. c is nondecreasing in k for k ≤ (2N − 1)/3.
"""

from __future__ import annotations

import math

import numpy as np

from marg.errors import InputError


def code_length_cost(n_tests: int, n_train: float, max_order: int, kappa: float = 1.5) -> np.ndarray:
    """c(0), …, c(K) of (3.22).

    Parameters
    ----------
    n_tests : int
        N, the number of binary attributes monomials are built from.
    n_train : float
        M, the number of training observations (from the tables' total on marginals).
    max_order : int
        K, the largest monomial order (the number of code tables).
    kappa : float
        κ, the bits of λ in units of log M (1.5 in the seed's experiments).

    Returns
    -------
    (K + 1,) float: entry k is c(k).
    """
    if int(n_tests) != n_tests or n_tests < 1:
        raise InputError(f"number of tests must be a positive integer, got {n_tests!r}")
    if not (n_train > 1):
        raise InputError(f"number of training observations must exceed 1, got {n_train!r}")
    if int(max_order) != max_order or not 1 <= max_order <= n_tests:
        raise InputError(f"max order must be an integer in 1..{n_tests}, got {max_order!r}")
    if not math.isfinite(kappa):
        raise InputError(f"kappa must be finite, got {kappa!r}")
    K = int(max_order)
    lm = math.log2(n_train)
    return np.array([(k + math.log2(math.comb(int(n_tests), k)) + math.log2(K)) / lm + kappa for k in range(K + 1)])
