"""Screening: rank features by their dependence on the label, computed from first-order tables, valid under DP noise.

The score of a discrete feature X_j is its **L1 dependence** on the label::

    D_j = Σ_{a, y} | p(x_j = a, y) − p(x_j = a) p(y) |        (0 ≤ D_j ≤ 2, D_j = 0 iff X_j ⊥ Y),

twice the total variation between the table N[x_j, y]/n and the product of its margins;
by Pinsker's inequality I(X_j; Y) ≥ D_j² / 2 (nats), so a lower bound on D_j is one on the
mutual information. It needs only the first-order tables N[x_j, y] and the label's N[y].

**Under DP noise** each released count is the sample's count plus noise, and the recorded
draws bound that noise exactly (:func:`marg.marginals.noise_tails.halfwidth`, the tails the
calibration of :mod:`marg.learners.features.calibration` uses): with α = (1 − coverage)/m, m the
number of cells of every feature's table plus the label's, P(|noise| > q) ≤ α per cell, so
with probability ≥ ``coverage`` every cell of every table is within its q together (the
event E). On E, interval arithmetic gives, for every cell, an interval that holds the
sample's d(a, y) = N(a, y) − N(a)N(y)/n (N(a) = Σ_y N(a, y), N(y) and n = Σ_y N(y) each in
its interval); the **lower bound** of D_j is Σ_{a,y} dist(0, interval)/n_hi and the upper
bound Σ max |interval| / n_lo. Both hold on E for every feature at once — whichever
features the ranking then keeps, so the selection is covered. Exact tables: q = 0 and both
bounds are the plug-in D_j.

**Per class.** D_j = Σ_y D_jy / 2 with D_jy = 2 Σ_a |p(x_j = a, y) − p(x_j = a) p(y)|, the
L1 dependence of X_j on the one-vs-rest label [Y = y]; its bounds are the same cells'
intervals summed over the column y (so they hold on the same event E, and D_jy's lower
bound is positive for some y iff D_j's is). With two classes D_j0 = D_j1 = D_j.

**The ranking** (:func:`rank`) keeps the features whose lower bound is positive: on E, a
feature independent of the label in the sample (D_j = 0) is never kept, and one with
D_j > upper − lower always is. With two classes it orders them by the lower bound (ties:
the plug-in score, then codebook order). With K > 2 classes the classes take turns: class
0, 1, …, K−1, 0, … each takes its best remaining feature by the lower bound of D_jy (ties:
plug-in D_jy, then codebook order) among those whose lower bound for y is positive, so the
top M holds about M/K features for each class that has any. D_j alone would spend the top
M on the class that differs most (on TOX_171, almost all of the top genes separate the same
one of four classes: BENCHMARKS.md, "Screen, then learn on the gene sets"). The number of features
kept is chosen elsewhere (:mod:`marg.learners.choice.screened`). The same order ranks the features whose pair tables
``marg request --top K`` asks for (:meth:`Scores.order`, the top K whether or not their bound
is positive: the request says how many are above the noise).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from marg.errors import InputError

from ..estimator.base import features_param
from ..core.params import check_number


@dataclass
class Scores:
    """The screening scores of a summary's discrete features (codebook order).

    Attributes
    ----------
    names : list of str
        The features scored.
    score : ndarray (p,)
        The plug-in L1 dependence D_j of the tables as released (negative counts clipped to 0).
    lower, upper : ndarray (p,)
        Bounds on the sample's D_j, holding together for every feature with probability
        ≥ ``coverage`` over the DP noise (equal to ``score`` for exact tables).
    coverage : float
    noisy : bool
        Whether any table carries DP noise.
    class_score, class_lower : ndarray (p, K)
        The plug-in one-vs-rest dependence D_jy and its lower bound (same event).
    """

    names: list[str]
    score: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    coverage: float
    noisy: bool
    class_score: np.ndarray
    class_lower: np.ndarray

    def order(self) -> list[str]:
        """Every feature scored, best first: the ranking (:func:`rank`), then the features whose lower bound
        is 0 by plug-in score (then codebook order)."""
        kept = rank(self)
        seen = set(kept)
        rest = sorted((j for j, nm in enumerate(self.names) if nm not in seen),
                      key=lambda j: (-self.lower[j], -self.score[j], j))
        return kept + [self.names[j] for j in rest]

    def rank(self) -> list[str]:
        """The features with a positive lower bound, best first (see :func:`rank`)."""
        return rank(self)

    def lower_of(self, names: Sequence[str]) -> list[float]:
        """The lower bounds of ``names``, in their order."""
        idx = {nm: j for j, nm in enumerate(self.names)}
        return [float(self.lower[idx[nm]]) for nm in names]


def dependence(counts: np.ndarray) -> float:
    """The plug-in L1 dependence Σ |N(a, y)/n − N(a)N(y)/n²| of a count table (m, K), negative counts clipped."""
    N = np.clip(np.asarray(counts, dtype=np.float64), 0.0, None)
    n = float(N.sum())
    if n <= 0:
        return 0.0
    return float(np.abs(N / n - np.outer(N.sum(axis=1), N.sum(axis=0)) / n ** 2).sum())


def dependence_bounds(counts: np.ndarray, q: float, label_counts: np.ndarray, q_label: float) -> tuple[float, float]:
    """Bounds on the sample's L1 dependence when each released count is within ``q`` of it.

    Parameters
    ----------
    counts : ndarray (m, K)
        The released N̂[x_j = a, y].
    q : float
        Half-width of every cell's noise (counts).
    label_counts : ndarray (K,)
        The released N̂[y] and ``q_label`` its cells' half-width; n = Σ_y N(y).

    Returns
    -------
    (lower, upper) : float
        On the event that every cell is within its half-width, lower ≤ D ≤ upper.
    """
    lower, upper, _ = _bounds(counts, q, label_counts, q_label)
    return lower, upper


def class_dependence(counts: np.ndarray) -> np.ndarray:
    """The plug-in one-vs-rest dependences D_y = 2 Σ_a |N(a, y)/n − N(a)N(y)/n²| of a count table (m, K), shape (K,)."""
    N = np.clip(np.asarray(counts, dtype=np.float64), 0.0, None)
    n = float(N.sum())
    if n <= 0:
        return np.zeros(N.shape[1])
    return 2.0 * np.abs(N / n - np.outer(N.sum(axis=1), N.sum(axis=0)) / n ** 2).sum(axis=0)


def _bounds(counts: np.ndarray, q: float, label_counts: np.ndarray, q_label: float) -> tuple[float, float, np.ndarray]:
    """(lower, upper) of D and the lower bounds (K,) of the one-vs-rest D_y, all on the same event."""
    N = np.asarray(counts, dtype=np.float64)
    Ny = np.asarray(label_counts, dtype=np.float64)
    if q == 0 and q_label == 0:
        d = dependence(N)
        return d, d, class_dependence(N)
    K = Ny.size
    a_lo = np.clip(N.sum(axis=1) - K * q, 0.0, None)
    a_hi = np.clip(N.sum(axis=1) + K * q, 0.0, None)
    y_lo = np.clip(Ny - q_label, 0.0, None)
    y_hi = np.clip(Ny + q_label, 0.0, None)
    n_lo = max(float(Ny.sum()) - K * q_label, 0.0)
    n_hi = float(Ny.sum()) + K * q_label
    if n_hi <= 0:
        return 0.0, 2.0, np.zeros(K)
    # u = N(a) N(y) / n: increasing in N(a), N(y), decreasing in n (N(a), N(y) ≤ n caps it at min(N(a), N(y)))
    u_lo = np.outer(a_lo, y_lo) / n_hi
    u_hi = (np.minimum(np.outer(a_hi, y_hi) / n_lo, np.minimum.outer(a_hi, y_hi)) if n_lo > 0
            else np.minimum.outer(a_hi, y_hi))
    lo = N - q - u_hi
    hi = N + q - u_lo
    dist = np.clip(np.maximum(lo, -hi), 0.0, None)
    lower = float(dist.sum()) / n_hi
    upper = 2.0 if n_lo <= 0 else min(2.0, float(np.maximum(np.abs(lo), np.abs(hi)).sum()) / n_lo)
    return lower, upper, 2.0 * dist.sum(axis=0) / n_hi


def screen_scores(summary: Any, features: Sequence[str] | None = None, coverage: float = 0.95) -> Scores:
    """The screening scores and their bounds for ``summary``'s discrete features (module docstring).

    Parameters
    ----------
    summary : Summary
        Needs the first-order tables N[x_j, y] (any release has them).
    features : sequence of str or None
        The features scored (None: every discrete feature).
    coverage : float in (0, 1)
        Probability that every bound holds together under the DP noise.

    Raises
    ------
    InputError
        No discrete feature, or an unknown feature name.
    """
    from marg.marginals.noise_tails import halfwidth

    check_number("coverage", coverage, low=0, high=1, open_low=True, open_high=True)
    cb = summary.codebook
    names = [nm for nm in (features_param(features) or cb.feature_names) if cb.feature(nm).is_discrete]
    if not names:
        raise InputError("screening needs at least one discrete feature")
    lab = cb.label.name
    K = int(summary.n_classes)
    sizes = [int(cb.feature(nm).n_levels) for nm in names]
    m = K * (sum(sizes) + 1)  # every feature's cells and the label's
    alpha = (1.0 - coverage) / m
    Ny = summary.counts((lab,))
    noisy = bool(summary.is_noisy)
    q_label = halfwidth(summary.noise_draws((lab,)), alpha) if noisy else 0.0
    score = np.zeros(len(names))
    lower = np.zeros(len(names))
    upper = np.zeros(len(names))
    class_score = np.zeros((len(names), K))
    class_lower = np.zeros((len(names), K))
    cache: dict[tuple, float] = {}
    for j, nm in enumerate(names):
        N = summary.counts((nm, lab))
        score[j] = dependence(N)
        class_score[j] = class_dependence(N)
        q = 0.0
        if noisy:
            draws = summary.noise_draws((nm, lab))
            if draws not in cache:
                cache[draws] = halfwidth(draws, alpha)
            q = cache[draws]
        lower[j], upper[j], class_lower[j] = _bounds(N, q, Ny, q_label)
    return Scores(names, score, lower, upper, float(coverage), noisy, class_score, class_lower)


def rank(scores: Scores) -> list[str]:
    """The features with a positive lower bound, best first (module docstring): two classes by lower bound
    (ties: plug-in score, then codebook order); K > 2 classes taking turns, each by its one-vs-rest lower bound."""
    p, K = scores.class_lower.shape
    if K <= 2:
        order = sorted(range(p), key=lambda j: (-scores.lower[j], -scores.score[j], j))
        return [scores.names[j] for j in order if scores.lower[j] > 0]
    queues = [[j for j in sorted(range(p), key=lambda j: (-scores.class_lower[j, y], -scores.class_score[j, y], j))
               if scores.class_lower[j, y] > 0] for y in range(K)]
    heads = [0] * K
    taken: set[int] = set()
    out: list[str] = []
    while True:
        moved = False
        for y in range(K):
            q = queues[y]
            while heads[y] < len(q) and q[heads[y]] in taken:
                heads[y] += 1
            if heads[y] < len(q):
                taken.add(q[heads[y]])
                out.append(scores.names[q[heads[y]]])
                moved = True
        if not moved:
            return out
