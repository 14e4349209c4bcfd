"""The label-only rule: one class for every row, the class whose share is surely the largest, and its certificate.

When no feature carries signal above the noise (a DP release of thousands of genes where no
gene's screening lower bound is positive, :mod:`marg.learners.choice.screened`), the best a rule can
promise is the label table's: predict for every row the class c whose share p(c) has the
largest lower confidence bound, and certify its error P(Y ≠ c) = 1 − p(c).

**The bound (closed form).** The rule needs, for every class c at once, a lower confidence
bound L_c on the true share p(c) — one-sided, and nothing else: its error P(Y ≠ c) = 1 − p(c)
depends on the label marginal alone. The label table as released holds Ñ_k = N_k + E_k, N the
sample's counts (N | n ~ Multinomial(n, p)) and E_k the recorded noise draws of one cell (the
sum over sites; :func:`marg.marginals.noise_tails.halfwidth`, exact for the integer lattice:
Laplace and Gaussian alike, never a normal approximation). With α = 1 − ``coverage`` split
α_n + α_s (α_n = α_s = α/2 under noise; α_n = 0 for an exact table)::

    q   = halfwidth(one cell's draws, α_n/K)                  P(|E_k| > q) ≤ α_n/K, each k
    a_k = max(0, Ñ_k − q),   b_k = max(0, Ñ_k + q)            so N_k ∈ [a_k, b_k] for every k
    L_c = Beta⁻¹(α_s/K; a_c, Σ_{k≠c} b_k + 1)                 (0 when a_c = 0)

L_c is the one-sided Clopper–Pearson lower bound at level 1 − α_s/K at the count box's least
favourable corner: Beta⁻¹(α; N_c, n − N_c + 1) increases with N_c and decreases with the other
classes' rows n − N_c, so on the noise event it is ≥ L_c, and P(p(c) < Beta⁻¹(α_s/K; N_c, n − N_c
+ 1)) ≤ α_s/K for every c. Both events together fail with probability ≤ α_n + α_s = α. The
total n needs no interval of its own: n = Σ_k N_k is bounded by the same cells (a box over
the shares Ñ_k/ñ with ñ's noise as one more interval counts that noise twice, and takes each
share's sampling width two-sided at the noise band's worst point — issue 34: at three tiny
sites that box's certificate was well above this one's, BENCHMARKS.md, "Issue 34: the prior's
certificate at tiny sites (i34j)"). Cells
hidden by min-cell suppression (exact releases) enter by their bounds: a_k = lo_k,
b_k = hi_k (:meth:`marg.marginals.summary.Summary.count_bounds`). Without recorded draws the
noise half-width is the normal z·std (:attr:`Certificate.approximate`). The largest share of
class c on the same event is u_c = 1 − Σ_{k≠c} L_k.

**What is left of the width** is the union bound between the sampling and the noise: their
half-widths add where the deviation of their sum is closer to the root of their squares. A test
inverting the exact distribution of the binomial count plus the noise (their convolution, the
total n a nuisance bounded at a small share of α) would be tighter — a prototype's was, at ALLAML's
shares and sites (BENCHMARKS.md, "Issue 34: the prior's certificate at tiny sites (i34j)") — but it needs a
search over p and n whose validity rests on monotonicity a grid must not miss; not done.

**The rule and its certificate.** The rule predicts h ≡ c* = argmax_c L_c and its certificate
is W(h) = 1 − L_{c*}.

**Valid for the data-dependent choice of c*.** The event above holds all K lower bounds
*simultaneously* with probability ≥ ``coverage`` (over the sample and the noise). On that event
1 − p*(c) ≤ 1 − L_c for *every* c at once — in particular for c*, whichever class the data
chose. No correction for the choice is needed: the event does not depend on it.
:func:`share_bounds` (the extremes of a symmetric box τ ± λ on the simplex) is what the
earlier two-sided box gave; the tests keep it as the too-wide reference.

When the tables as released count n ≤ 0 rows, the rule
predicts the largest released share and the certificate is the trivial 1, saying why — as
:func:`marg.learners.certification.certify.certify` does for every other rule.

:class:`LabelOnly` is registered as ``prior`` (``marg learn --learner prior``: the baseline
every feature-reading learner must beat, in a second) and is what
:class:`marg.learners.auto.AutoLearner` falls back to when the screen keeps no feature.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from marg.errors import InputError

from ..estimator.base import Certificate, MarginalEstimator
from ..features.statistics import label_moments
from ..core.params import COVERAGE


def _lower_bounds(summary: Any, coverage: float) -> tuple[np.ndarray, bool, str | None]:
    """(each class's lower confidence bound L_c at ``coverage``, whether it is approximate, why there is none or
    None) from ``summary``'s label counts (:func:`share_lower_bounds`); NaN bounds and the reason when the label
    table as released admits no interval."""
    K = int(summary.n_classes)
    try:
        bad = summary.released_invalid if summary.is_noisy else None
    except InputError as exc:
        if not summary.is_noisy:
            raise
        bad = str(exc)
    if bad:
        return np.full(K, np.nan), False, bad
    m = label_moments(summary)
    n = float(m.n)
    lower, approximate = share_lower_bounds(
        m.tau[:, 0] * n, m.draws[0] if m.draws else (), coverage, float(m.noise[0, 0]) * n,
        None if m.lo is None else m.lo[:, 0] * n, None if m.hi is None else m.hi[:, 0] * n)
    return lower, approximate, None


def share_bounds(tau: np.ndarray, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The smallest and largest share of each class over U = box ∩ simplex (module docstring).

    Parameters
    ----------
    tau, lam : ndarray, shape (K,)
        The released shares and their half-widths.

    Returns
    -------
    (lower, upper) : ndarrays, shape (K,), or None when U is empty
        lower(c) = max(l_c, 1 − Σ_{k≠c} u_k), upper(c) = min(u_c, 1 − Σ_{k≠c} l_k).
    """
    tau = np.asarray(tau, dtype=np.float64)
    lam = np.asarray(lam, dtype=np.float64)
    lo = np.maximum(tau - lam, 0.0)
    hi = np.minimum(tau + lam, 1.0)
    if np.any(lo > hi) or lo.sum() > 1.0 + 1e-12 or hi.sum() < 1.0 - 1e-12:
        return None
    lower = np.maximum(lo, 1.0 - (hi.sum() - hi))
    upper = np.minimum(hi, 1.0 - (lo.sum() - lo))
    return np.clip(lower, 0.0, 1.0), np.clip(upper, 0.0, 1.0)


def share_lower_bounds(counts: np.ndarray, draws: tuple, coverage: float, noise_std: float = 0.0,
                       lo: np.ndarray | None = None, hi: np.ndarray | None = None) -> tuple[np.ndarray, bool]:
    """L_c, each class's lower confidence bound on its share, all K together at ``coverage`` (module docstring).

    Parameters
    ----------
    counts : ndarray, shape (K,)
        The label table as released, Ñ_k (raw: before post-processing, so its noise is the recorded draws).
    draws : tuple
        One cell's noise draws, (mechanism, scale, discrete, count) parts; () when exact.
    coverage : float in (0, 1)
    noise_std : float
        One cell's noise std, used (normal z·std) only when noise has no recorded draws.
    lo, hi : ndarray (K,), optional
        Bounds on each true count where min-cell suppression hides cells.

    Returns
    -------
    (lower, approximate) : ndarray (K,), bool
        L_c = Beta⁻¹(α_s/K; a_c, Σ_{k≠c} b_k + 1), a = max(0, lo − q), b = max(0, hi + q), q the noise
        half-width at α_n/K; ``approximate`` when the noise had no recorded draws.
    """
    from scipy.special import betaincinv, ndtri  # scipy.stats' beta.ppf and -norm.isf, without its import

    from marg.marginals.noise_tails import halfwidth

    N = np.asarray(counts, dtype=np.float64)
    K, alpha = N.size, 1.0 - float(coverage)
    noisy = bool(draws) or noise_std > 0
    a_noise = alpha / 2.0 if noisy else 0.0
    if draws:
        q = halfwidth(tuple(draws), a_noise / K)
    else:
        q = float(-ndtri(a_noise / (2.0 * K))) * float(noise_std) if noisy else 0.0
    a = np.maximum(0.0, (N if lo is None else np.asarray(lo, dtype=np.float64)) - q)
    b = np.maximum(0.0, (N if hi is None else np.asarray(hi, dtype=np.float64)) + q)
    others = b.sum() - b
    with np.errstate(invalid="ignore", divide="ignore"):
        lower = np.where(a > 0, betaincinv(np.maximum(a, 1e-300), others + 1.0, (alpha - a_noise) / K), 0.0)
    return np.clip(lower, 0.0, 1.0), noisy and not draws


class LabelOnly(MarginalEstimator):
    """Predict one class for every row: the class whose share's lower confidence bound is largest.

    Parameters
    ----------
    coverage : float
        Simultaneous coverage of the label table's box behind the certificate.

    Attributes
    ----------
    class_ : int
        The class code predicted for every row.
    shares_ : ndarray (K,)
        The class shares as released (post-processed, clipped to [0, 1] and normalised):
        ``predict_proba`` of every row.
    share_lower_, share_upper_ : ndarray (K,)
        Each class's lower confidence bound L_c (:func:`share_lower_bounds`) and its largest share on the
        same event, 1 − Σ_{k≠c} L_k; NaN when the label table as released admits no interval.
    certificate_ : Certificate
        W(h) = 1 − ``share_lower_[class_]`` (kind ``"W(h)"``), its box the label table's.
    classes_, feature_names_in_ ([]: it reads no feature), n_, fingerprint_
    """

    learner = "prior"
    display_name = "a label-only"
    learn_options = ("coverage",)
    remedies = ("the label table alone bounds this rule: more patients, or under DP a larger ε per site",)

    def __init__(self, coverage: float = 0.95):
        self.coverage = coverage

    _parameter_constraints = {"coverage": COVERAGE}

    def fit(self, summary: Any) -> "LabelOnly":
        """Compute the label table's box, choose the class and certify it. Returns self.

        On a summary whose features were selected from the same patients (``summary.selection``), the
        label counts are those of :func:`marg.learners.certification.selection_certificate.label_source` (the least
        noisy source, drawn after the selection) at 1 − α/3, so that the certificate holds at ``coverage`` whichever
        of the study's two models is returned (:mod:`marg.learners.certification.selection_certificate`)."""
        self.check_params()
        K = int(summary.n_classes)
        src, cov = summary, float(self.coverage)
        if summary.selection is not None:
            from ..certification.selection_certificate import label_source, prior_coverage

            src, cov = label_source(summary), prior_coverage(self.coverage)
        prior = np.clip(np.asarray(src.prior, dtype=np.float64), 0.0, None)
        shares = prior / prior.sum() if prior.sum() > 0 else np.full(K, 1.0 / K)
        lower, approximate, bad = _lower_bounds(src, cov)
        if not bad:
            upper = np.clip(1.0 - (lower.sum() - lower), 0.0, 1.0)
            # the largest lower bound; ties: the larger released share, then the first class
            c = int(np.lexsort((-np.arange(K), shares, lower))[-1])
            value = float(1.0 - lower[c])
            box = ({"features": [summary.codebook.label.name], "lower": lower.tolist(), "upper": upper.tolist()},)
            self.certificate_ = Certificate(value, "W(h)", float(self.coverage), approximate, K, box=box)
        else:
            upper = lower
            c = int(np.argmax(shares))
            self.certificate_ = Certificate(1.0, "W(h)", float(self.coverage), False, K,
                                            note=f"the label table as released admits no interval ({bad}); "
                                                 "the certificate is the trivial 1")
        self.class_ = c
        self.shares_ = shares
        self.share_lower_, self.share_upper_ = lower, upper
        self.classes_ = tuple(summary.classes)
        self.feature_names_in_: list[str] = []
        self.n_ = float(src.n)
        self.fingerprint_ = str(src.fingerprint)
        return self

    def selection_certificate(self, summary: Any, coverage: float) -> Certificate:
        """W(h) = 1 − L of the fitted class on :func:`~marg.learners.certification.selection_certificate.label_source`'s
        counts at 1 − α/3 of ``coverage`` (the class as fitted: the event bounds every class at once)."""
        from ..certification.selection_certificate import label_source, prior_coverage

        lower, approximate, bad = _lower_bounds(label_source(summary), prior_coverage(coverage))
        K = int(summary.n_classes)
        if bad:
            return Certificate(1.0, "W(h)", float(coverage), False, K,
                               note=f"the label table as released admits no interval ({bad}); the certificate is the "
                                    "trivial 1")
        return Certificate(float(1.0 - lower[self.class_]), "W(h)", float(coverage), approximate, K,
                           box=({"features": [summary.codebook.label.name], "lower": lower.tolist(),
                                 "upper": np.clip(1.0 - (lower.sum() - lower), 0.0, 1.0).tolist()},))

    # -------------------------------------------------------------- predict
    def _rows(self, X: Any) -> int:
        self._check_fitted()
        X = np.asarray(X)
        if X.ndim != 2:
            raise InputError(f"X must be a 2-D array of codes (rows × features), got shape {X.shape}")
        return X.shape[0]

    def predict(self, X: Any) -> np.ndarray:
        """``class_`` for every row, (n,)."""
        return np.full(self._rows(X), self.class_, dtype=np.int64)

    def predict_proba(self, X: Any) -> np.ndarray:
        """The released shares for every row, (n, K)."""
        return np.tile(self.shares_, (self._rows(X), 1))

    # ------------------------------------------- what the card and the CLI ask
    def linear_rule(self) -> Any:
        raise InputError("a label-only rule reads no feature; its certificate is its own (the label table's box)")

    def score_weights(self) -> None:
        return None

    def used_features(self) -> list[str]:
        return []

    def learn_lines(self, report: dict[str, Any]) -> list[str]:
        low, cls = report["share_lower_bound"], report["predicts"]
        if low is None:
            return [f"no feature: predicts {cls!r} for every row (the largest share as released; the label table's "
                    f"noise leaves no confidence bound)"]
        return [f"no feature: predicts {cls!r} for every row (its share's lower confidence bound, {low:.4f}, is the "
                f"largest of the label table's)"]

    def _report(self) -> dict[str, Any]:
        low = float(self.share_lower_[self.class_])
        return {"predicts": self.classes_[self.class_], "share_lower_bound": None if np.isnan(low) else low,
                "shares": [float(v) for v in self.shares_]}

    # ----------------------------------------------------------- persistence
    def _state(self) -> dict[str, Any]:
        return {"fingerprint": self.fingerprint_, "classes": list(self.classes_), "n": self.n_, "class": self.class_,
                "shares": [float(v) for v in self.shares_],
                "share_lower": [None if np.isnan(v) else float(v) for v in self.share_lower_],
                "share_upper": [None if np.isnan(v) else float(v) for v in self.share_upper_]}

    def _load_state(self, d: dict[str, Any]) -> None:
        classes = tuple(str(c) for c in d["classes"])
        K = len(classes)
        shares = np.asarray(d["shares"], dtype=np.float64)
        c = int(d["class"])
        if shares.shape != (K,) or not 0 <= c < K:
            raise InputError(f"label-only model: {K} classes but shares of shape {shares.shape} and class {c}")
        self.classes_ = classes
        self.class_ = c
        self.shares_ = shares
        self.share_lower_ = np.array([np.nan if v is None else float(v) for v in d["share_lower"]])
        self.share_upper_ = np.array([np.nan if v is None else float(v) for v in d["share_upper"]])
        self.feature_names_in_ = []
        self.n_ = float(d["n"])
        self.fingerprint_ = str(d["fingerprint"])
        self.certificate_ = Certificate(1.0 - float(np.nan_to_num(self.share_lower_[c], nan=0.0)), "W(h)",
                                        None, False, K)  # the model file's certificate record replaces it
