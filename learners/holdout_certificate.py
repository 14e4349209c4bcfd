"""A certificate from held-out rows: an upper confidence bound on a model's error from released confusion matrices.

The sites' evaluation releases (:mod:`marg.protocols.evaluation`) sum to N[ŷ, y] over the
held-out rows of every site, each cell with its recorded noise. With e = Σ_{ŷ≠y} N (errors)
and n = Σ N (held-out rows) as released, and α = 1 − coverage split three ways,

    e⁺ = ⌈e + q_e⌉,  n⁻ = ⌊n − q_n⌋,  bound = CP⁺(e⁺, n⁻; α/2),

where q_e (q_n) is a half-width with P(|noise of e| > q) ≤ α/4 for the draws actually
added to those K(K−1) (K²) cells (:func:`marg.marginals.noise_tails.halfwidth`: exact for
the discrete mechanisms, never a normal approximation), and CP⁺ the exact one-sided
Clopper–Pearson upper limit Beta⁻¹(1 − α/2; e⁺ + 1, n⁻ − e⁺). By the union bound, with
probability ≥ coverage over the held-out sample **and** the noise, the model's error rate
on the population the held-out rows were drawn from is at most the bound. The held-out rows
never entered the tables the model was fitted on, so no uniform bound over models is needed:
this is why it is far tighter than a worst case over the uncertainty set. It assumes what
every certificate here assumes: the rows are a random sample of the population of interest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from marg.errors import InputError
from marg.marginals.noise_tails import halfwidth


@dataclass(frozen=True)
class HoldoutBound:
    """The bound and what it rests on (released sums, noise half-widths, coverage)."""

    value: float
    errors: float
    rows: float
    q_errors: float
    q_rows: float
    coverage: float

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "errors": self.errors, "rows": self.rows, "q_errors": self.q_errors,
                "q_rows": self.q_rows, "coverage": self.coverage}


def holdout_bound(summary: Any, predicted: str, coverage: float = 0.95) -> HoldoutBound:
    """The bound of the module docstring from a Summary of evaluation releases.

    Parameters
    ----------
    summary : Summary
        Over the evaluation codebook: the table N[``predicted``, y] summed over sites.
    predicted : str
        The name of the prediction attribute.
    coverage : float in (0, 1)
    """
    from scipy.stats import beta

    if not 0.0 < coverage < 1.0:
        raise InputError(f"coverage must be in (0, 1), got {coverage!r}")
    raw = summary.released()
    lab = summary.codebook.label.name
    N = raw.counts((predicted, lab))
    K = N.shape[0]
    off = ~np.eye(K, dtype=bool)
    e, n = float(N[off].sum()), float(N.sum())
    cell = raw.noise_draws((predicted, lab))  # draws in one cell of the released table
    alpha = 1.0 - coverage

    def parts(k: int) -> list:
        return [(m, b, d, c * k) for m, b, d, c in cell]

    q_e = halfwidth(parts(K * (K - 1)), alpha / 4.0)
    q_n = halfwidth(parts(K * K), alpha / 4.0)
    e_up = max(0.0, math.ceil(e + q_e - 1e-9))
    n_low = math.floor(n - q_n + 1e-9)
    if n_low <= 0 or e_up >= n_low:
        value = 1.0
    else:
        value = float(beta.ppf(1.0 - alpha / 2.0, e_up + 1.0, n_low - e_up))
    return HoldoutBound(min(1.0, value), e, n, q_e, q_n, coverage)
