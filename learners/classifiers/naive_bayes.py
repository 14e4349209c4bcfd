"""Naive Bayes from the released first-order tables, certified by its worst case over the uncertainty set.

The rule h(x) = argmax_y log π̂_y + Σ_i log P̂(x_i | y) needs only the tables N[x_i, y]:
P̂(x_i = a | y) = (N[a, y] + α) / (N[y] + α·m_i) with a pseudo-count α (negative noisy counts
are clipped to 0 first), π̂_y = (N[y] + α)/(n + α·K). It is additive in one-hot features, so
its worst-case error over the first-order uncertainty set U = {p : |E_pΦ − τ| ≤ λ} (λ
calibrated as for the MRC) is bounded by the one-LP Lagrangian bound W_L ≥ W(h)
(:func:`marg.learners.minimax.fixed_rule_lp.certify_rule_lp`, fast) and, with
``certify="exact"`` (the default), computed by row generation with exact MILP separation
(:func:`marg.learners.minimax.fixed_rule_fit.certify_rule`, valid at any stop):
``certificate_`` is the smaller of the two — a valid bound on the error of the rule it
predicts with, over every distribution the released tables allow. Noise in the tables changes the rule,
never the validity of the bound.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..estimator.base import FEATURES, Certificate, MarginalEstimator, features_param
from ..core.params import COVERAGE, LAMBDA_SCALE, TIME_LIMIT, Interval, Options
from ..features.calibration import confidence_box
from ..features.box import box_tables
from ..features.blocks import FeatureMap, node_blocks
from ..features.statistics import map_moments
from ..minimax.fixed_rule import LinearRule
from ..minimax.fixed_rule_fit import certify_rule
from ..minimax.fixed_rule_lp import certify_rule_lp


EXACT_ROUNDS = 50
"""Default work budget of the exact W(h) refinement: rounds of row generation. A count, not
seconds, so that the same tables give the same certificate on a loaded and an idle machine. On
adult (14 features, 148 levels; three sites at ε = 1) many more rounds still certify above the LP
bound, so the LP bound is the certificate there (BENCHMARKS.md, "Issue 48 (suite)"); on small domains
the refinement converges in a few rounds."""

EXACT_NODES = 1000
"""Default work budget of each separation MILP of the refinement: branch-and-bound nodes (HiGHS
``mip_max_nodes``); a MILP stopped there gives its proven bound, so the value stays valid."""


class NaiveBayes(MarginalEstimator):
    """Naive Bayes on the discrete features, with the W(h) certificate.

    Parameters
    ----------
    alpha : float
        Pseudo-count per cell (default 0.5, Jeffreys).
    s : float or None
        λ of the uncertainty set behind the certificate, as for the MRC (None: calibrated
        to ``coverage``).
    coverage : float
    features : sequence of str or None
        Discrete features used (None: every discrete feature).
    certify : {"exact", "bound"}
        ``"exact"``: W(h) by row generation (within the work budget ``max_rounds`` ×
        ``max_nodes``, and ``time_limit`` seconds if given), or the LP bound W_L if smaller; ``"bound"``: the LP bound
        W_L only (one LP; for model choice).
    time_limit : float or None
        Seconds for the exact certificate's refinement of the LP bound (default None: the
        work budget alone; its MILPs stop at the deadline with their proven bounds, so the
        value is valid at any stop and never above the LP bound). A wall-clock budget makes
        the certificate depend on the machine's load; the work budget does not.
    max_rounds : int
        Rounds of the refinement's row generation at most (default :data:`EXACT_ROUNDS`).
    max_nodes : int
        Branch-and-bound nodes per separation MILP at most (default :data:`EXACT_NODES`).
    callback : callable or None
        Progress records of the certificate's row generation.

    Attributes
    ----------
    weights_ : ndarray (K, D)
        log P̂(x_i = a | y) per one-hot column; ``intercept_`` (K,) log π̂_y.
    map_ : FeatureMap
    certificate_ : Certificate
        W(h) of the deterministic rule (kind ``"W(h)"``).
    certificate_converged_ : bool
    classes_, prior_, feature_names_in_, n_, fingerprint_
    """

    learner = "nb"
    display_name = "a naive-Bayes"
    learn_options = ("s", "coverage", "alpha", "time_limit")

    def __init__(self, alpha: float = 0.5, s: float | None = None, coverage: float = 0.95,
                 features: Sequence[str] | None = None, certify: str = "exact", time_limit: float | None = None,
                 callback: Callable[[dict], None] | None = None, max_rounds: int = EXACT_ROUNDS,
                 max_nodes: int = EXACT_NODES):
        self.alpha = alpha
        self.certify = certify
        self.s = s
        self.coverage = coverage
        self.features = features
        self.time_limit = time_limit
        self.callback = callback
        self.max_rounds = max_rounds
        self.max_nodes = max_nodes

    _parameter_constraints = {
        "alpha": Interval(low=0, open_low=True),
        "s": LAMBDA_SCALE,
        "coverage": COVERAGE,
        "time_limit": TIME_LIMIT,
        "max_rounds": Interval(low=1, integer=True),
        "max_nodes": Interval(low=1, integer=True),
        "certify": Options(("exact", "bound")),
        "features": FEATURES,
    }

    def fit(self, summary: Any) -> "NaiveBayes":
        """Fit the rule from the first-order tables and certify it. Returns self."""
        self.check_params()
        from marg.errors import InputError

        blocks = [b for b in node_blocks(summary.codebook, features_param(self.features)) if b.kind == "onehot"]
        if not blocks:
            raise InputError("naive Bayes needs at least one discrete feature")
        fmap = FeatureMap(blocks, [b.column for b in blocks])
        m = map_moments(summary, fmap)
        lab = summary.codebook.label.name
        K = int(summary.n_classes)
        a = float(self.alpha)
        Ny = np.clip(summary.counts((lab,)), 0.0, None)
        W = np.zeros((K, fmap.dim))
        for b in fmap.blocks:
            N = np.clip(summary.counts((b.name, lab)), 0.0, None)  # (m, K)
            W[:, b.slice] = np.log((N.T + a) / (N.sum(axis=0)[:, None] + a * b.size))
        b0 = np.log((Ny + a) / (Ny.sum() + a * K))
        cbox = confidence_box(m, fmap.indicator_columns(), s=self.s, coverage=self.coverage)
        lam = cbox.lam
        rule = LinearRule(fmap, W, b0)
        value, converged = float(certify_rule_lp(rule, fmap, m.tau, lam)), False
        if self.certify == "exact":
            if self.callback is not None:
                budget = (f" for at most {self.max_rounds} rounds"
                          + ("" if self.time_limit is None else f" or {self.time_limit:g} s"))
                self.callback({"stage": "note", "text": f"LP bound W_L = {value:.4f}; refining W(h) by row "
                                                        f"generation{budget}"})
            cert = certify_rule(rule, fmap, m.tau, lam, time_limit=self.time_limit, callback=self.callback,
                                max_rounds=self.max_rounds, max_nodes=self.max_nodes)
            if cert.value <= value:
                value, converged = float(cert.value), bool(cert.converged)
        self.map_ = fmap
        self.weights_ = W
        self.intercept_ = b0
        self.feature_names_in_ = list(fmap.names)
        self.classes_ = tuple(summary.classes)
        self.prior_ = np.asarray(summary.prior, dtype=np.float64)
        self.n_ = float(summary.n)
        self.fingerprint_ = str(summary.fingerprint)
        self.certificate_converged_ = converged
        self.certificate_ = Certificate(value, "W(h)", self.coverage if self.s is None else None, cbox.approximate, K,
                                        box=box_tables(fmap, m.tau, lam, lab))
        self.cover_selection(summary)  # features selected from the same patients: the box covers the selection
        return self

    # -------------------------------------------------------------- predict
    def decision_function(self, X: np.ndarray) -> np.ndarray:
        """Log posterior scores log π̂_y + Σ_i log P̂(x_i | y), (n, K)."""
        self._check_fitted()
        return self.map_.scores(X, self.weights_) + self.intercept_[None, :]

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.argmax(self.decision_function(X), axis=1)

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        F = self.decision_function(X)
        F = np.exp(F - F.max(axis=1, keepdims=True))
        return F / F.sum(axis=1, keepdims=True)

    def _report(self) -> dict[str, Any]:
        return {"certificate_converged": self.certificate_converged_}

    def linear_rule(self) -> Any:
        """log π_y + Σ_i log P̂(x_i | y): additive in the node map's one-hot columns."""
        from ..minimax.fixed_rule import LinearRule

        self._check_fitted()
        return LinearRule(self.map_, self.weights_, self.intercept_)

    # ---------------------------------------------------------- persistence
    def _state(self) -> dict[str, Any]:
        return {"fingerprint": self.fingerprint_, "classes": list(self.classes_), "n": self.n_,
                "prior": [float(v) for v in self.prior_], "map": self.map_.to_dict(),
                "weights": self.weights_.tolist(), "intercept": [float(v) for v in self.intercept_],
                "worst_case_error": float(self.certificate_.value),
                "certificate_converged": self.certificate_converged_,
                "certificate": {"kind": self.certificate_.kind, "coverage": self.certificate_.coverage,
                                "approximate": self.certificate_.approximate}}

    def _load_state(self, d: dict[str, Any]) -> None:
        from marg.errors import InputError

        fmap = FeatureMap.from_dict(d["map"])
        classes = tuple(str(c) for c in d["classes"])
        W = np.asarray(d["weights"], dtype=np.float64)
        b0 = np.asarray(d["intercept"], dtype=np.float64)
        if (W.shape != (len(classes), fmap.dim) or b0.shape != (len(classes),)
            or not (np.all(np.isfinite(W)) and np.all(np.isfinite(b0)))):
            raise InputError(f"naive-Bayes model weights must be finite with shape {(len(classes), fmap.dim)}")
        rec = d.get("certificate") or {}
        self.map_ = fmap
        self.weights_ = W
        self.intercept_ = b0
        self.feature_names_in_ = list(fmap.names)
        self.classes_ = classes
        self.prior_ = np.asarray(d["prior"], dtype=np.float64)
        self.n_ = float(d["n"])
        self.fingerprint_ = str(d["fingerprint"])
        self.certificate_converged_ = bool(d.get("certificate_converged", True))
        cov = rec.get("coverage")
        self.certificate_ = Certificate(float(d["worst_case_error"]), str(rec.get("kind", "W(h)")),
                                        None if cov is None else float(cov), bool(rec.get("approximate", False)),
                                        len(classes))
