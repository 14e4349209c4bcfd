"""The label-only rule: one class for every row, the class whose share is surely the largest, and its certificate.

When no feature carries signal above the noise (a DP release of thousands of genes where no
gene's screening lower bound is positive, :mod:`marg.learners.screened`), the best a rule can
promise is the label table's: predict for every row the class c whose share p(c) has the
largest lower confidence bound, and certify its error P(Y ≠ c) = 1 − p(c).

**The uncertainty set.** The label table's K cells as released, τ_k = N[y = k]/n, each with a
half-width λ_k from :func:`marg.learners.calibration.confidence_box` — the one calibration:
Clopper–Pearson at the Bonferroni level over the K cells (K + 1 intervals under DP: the noise
on n is one more), plus the exact tail of the DP noise the export recorded on each cell
(:func:`marg.learners.features.statistics.label_moments`) — intersected with the simplex::

    U = {p : p_k ∈ [l_k, u_k] for every k, Σ_k p_k = 1},  l_k = max(0, τ_k − λ_k),  u_k = min(1, τ_k + λ_k).

**The rule and its certificate.** The smallest share of class c over U is

    lower(c) = max(l_c, 1 − Σ_{k ≠ c} u_k)

(the other classes can take at most their upper ends; U is non-empty, Σ l ≤ 1 ≤ Σ u). The rule
predicts h ≡ c* = argmax_c lower(c), and its certificate is W(h) = max_{p ∈ U} P_p(Y ≠ c*) =
1 − lower(c*): the rule reads no feature, so its error under p depends on p's label marginal
alone, and U constrains nothing else.

**Valid for the data-dependent choice of c*.** The box holds all K cells *simultaneously* with
probability ≥ ``coverage`` (over the sample and the noise). On that event the true label
distribution p* lies in U, so 1 − p*(c) ≤ 1 − lower(c) for *every* c at once — in particular for
c*, whichever class the data chose. No correction for the choice is needed: the event does not
depend on it.

When the noise leaves U empty (the released cells are so far off that no distribution fits
their box, probability ≤ 1 − coverage) or the tables as released count n ≤ 0 rows, the rule
predicts the largest released share and the certificate is the trivial 1, saying why — as
:func:`marg.learners.certify.certify` does for every other rule.

:class:`LabelOnly` is registered as ``prior`` (``marg learn --learner prior``: the baseline
every feature-reading learner must beat, in a second) and is what
:class:`marg.learners.auto.AutoLearner` falls back to when the screen keeps no feature.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from marg.errors import InputError

from .base import Certificate, MarginalEstimator
from .calibration import confidence_box
from .features.statistics import label_moments
from .params import COVERAGE


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
        Each class's smallest and largest share over the uncertainty set (:func:`share_bounds`);
        NaN when the set is empty.
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
        """Compute the label table's box, choose the class and certify it. Returns self."""
        self.check_params()
        K = int(summary.n_classes)
        lab = summary.codebook.label.name
        prior = np.clip(np.asarray(summary.prior, dtype=np.float64), 0.0, None)
        shares = prior / prior.sum() if prior.sum() > 0 else np.full(K, 1.0 / K)
        why = None
        try:
            bad = summary.released_invalid if summary.is_noisy else None
        except InputError as exc:
            if not summary.is_noisy:
                raise
            bad = str(exc)
        if bad:
            why = f"the label table as released admits no interval ({bad})"
        else:
            m = label_moments(summary)
            cbox = confidence_box(m, np.ones(1, dtype=bool), coverage=self.coverage)
            bounds = share_bounds(m.tau[:, 0], cbox.lam[:, 0])
            if bounds is None:
                if not summary.is_noisy:  # exact shares always lie in their own box
                    raise InputError(f"the label table's shares {m.tau[:, 0].tolist()} do not sum to 1")
                why = (f"no distribution lies within the {self.coverage:.0%} confidence box of the noisy label table "
                       f"(the DP noise exceeded its calibrated half-width, probability <= {1 - self.coverage:.0%})")
        if why is None:
            lower, upper = bounds
            # the largest lower bound; ties: the larger released share, then the first class
            c = int(np.lexsort((-np.arange(K), shares, lower))[-1])
            value = float(1.0 - lower[c])
            box = ({"features": [lab], "lower": lower.tolist(), "upper": upper.tolist()},)
            self.certificate_ = Certificate(value, "W(h)", float(self.coverage), cbox.approximate, K, box=box)
        else:
            lower = upper = np.full(K, np.nan)
            c = int(np.argmax(shares))
            self.certificate_ = Certificate(1.0, "W(h)", float(self.coverage), False, K,
                                            note=f"{why}; the certificate is the trivial 1")
        self.class_ = c
        self.shares_ = shares
        self.share_lower_, self.share_upper_ = lower, upper
        self.classes_ = tuple(summary.classes)
        self.feature_names_in_: list[str] = []
        self.n_ = float(summary.n)
        self.fingerprint_ = str(summary.fingerprint)
        return self

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
