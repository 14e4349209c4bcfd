"""The Rényi (minimum-HGR) classifier: additive least squares on one-hot indicators, from Q and d.

The estimator: :class:`RenyiClassifier` fits z and the intercept from a Summary's Q, d and
class prior, predicts with the MAP rule (binary: class 1 iff f(x) > 0; K > 2: one-vs-rest,
argmax_c f_c(x)) or the randomized rule (7), and certifies the MAP rule by W(h) over the
confidence box (:func:`marg.learners.certification.certify.certify`); the training-sample bound 2γ is kept
as ``training_bound_``. The mathematics (problem (9), its centered form (C), the codings,
separability, the HGR bound) is in :mod:`marg.learners.classifiers.renyi_problem`, which solves it on
arrays; what the fit reads from a Summary (features, noise in γ̂, ridge under DP) is in
:mod:`marg.learners.classifiers.renyi_summary`.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from marg.errors import InputError

from ..estimator.base import FEATURES, Certificate, MarginalEstimator
from ..core.params import COVERAGE, TIME_LIMIT, Interval, Options
from ..certification.certify import certify, certify_projected
from ..features.quadratic import discrete_blocks, label_contrast, second_moments
from .renyi_summary import auto_ridge, discrete_problem, noise_sd
from ..selection.group_norms import block_offsets
from .renyi_problem import (
    RCOND,
    _is_separable,
    hgr_lower_bound,
    min_norm_solve,
    psd_eigh,
    quadratic_value,
    rule7_positive_proba,
    separable_solution,
)

__all__ = ["RenyiClassifier"]

# ------------------------------------------------------------------------- estimator
class RenyiClassifier(MarginalEstimator):
    """Rényi classifier (seed 004) fitted from a Summary's Q, d and class prior.

    Parameters
    ----------
    ridge : float or None
        Ridge weight on z (not on the intercept): minimise zᵀQ_c z − d_cᵀz + ridge·‖z‖².
        None (default): 0 on exact summaries, set from the recorded noise under DP
        (:func:`auto_ridge`).
    coding : {"min-norm", "reference"}
        How the singular system is resolved (see the module docstring).
    features : list of str or None
        Discrete features to use (default: all features; a raw numeric one is an
        InputError naming it). An empty list gives the intercept-only model.
    coverage : float
        Simultaneous coverage of the confidence box behind the certificate.
    certify : {"bound", "exact", "first"}
        ``"bound"`` (default): the one-LP bound W_L ≥ W(h);
        ``"exact"``: W(h) by row generation (at most ``time_limit`` seconds), or W_L if
        smaller — far tighter on small codebooks, no better on adult within the default limit (both
        measured, and the bound's time on adult: BENCHMARKS.md, "Issue 47: numbers moved out of
        docstrings"); ``"first"``: W_L over its features' first-order
        box, λ for every feature's cells (:func:`marg.learners.certification.certify.certify_projected`).
    time_limit : float or None
        Seconds for the exact certificate (valid at any stop).

    Attributes
    ----------
    classes_ : tuple of str
    feature_names_in_ : list of str
        Feature names used, codebook order.
    unpaired_ : list of str
        Discrete features left out because their pair tables were not all released (round 2
        of the two-round protocol released the requested features' pairs only); empty when
        ``features`` is given or every pair was released.
    columns_ : ndarray of int, shape (p,)
        Their column positions in the codebook (the columns of X at predict time).
    sizes_ : ndarray of int, shape (p,)
        Their level counts m_i; z_ is laid out block by block in this order.
    levels_ : list of tuple of str
        The level names of each feature used (z_ is laid out block by block).
    n_features_in_ : int
        Number of codebook features X must have.
    z_ : ndarray, shape (n_problems, M)
        One coefficient vector per binary problem: n_problems = 1 for a binary label (the
        problem "class 1 vs class 0"), K for K > 2 (class c vs the rest).
    intercept_ : ndarray, shape (n_problems,)
        b in f(x) = b + Σ_i z_{i,x_i}.
    gamma_ : ndarray, shape (n_problems,)
        γ = z_ᵀQz_ − dᵀz_ + 1/4 at the fitted z (equal to the minimum when ridge = 0).
    hgr_lower_bound_ : ndarray, shape (n_problems,)
        sqrt(1 − γ/(q(1−q))) clipped at 0, q the positive class's prior.
    separable_per_problem_ : ndarray of bool, shape (n_problems,)
        Theorem 3's h-condition (decided exactly by an LP over all minimisers) when
        ridge = 0 — sufficient for γ = θ; with ridge > 0, whether the fitted z itself
        keeps 1/2 + f in [0, 1].
    separable_ : bool
        All problems separable.
    certificate_ : Certificate
        W(h): the worst-case error of the rule :meth:`predict` uses (the MAP rule) over the
        uncertainty set of the released tables at ``coverage``
        (:func:`marg.learners.certification.certify.certify`, first-order cells and a spanning forest's
        pairs); ``worst_case_error_`` is its value. The same number ``marg learn`` prints.
    training_bound_ : Certificate
        2γ (kind ``"2gamma"``): bounds the error of :meth:`predict_proba`'s randomized rule
        under every distribution with exactly the released pairwise marginals — the
        training sample's, not the population's: 2γ for a binary label; for K > 2,
        min(1, Σ_c 2γ_c) (see :meth:`predict_proba`). Under DP widened by the noise margin
        (a normal approximation: ``training_bound_.approximate``).
    prior_ : ndarray, shape (K,)
    n_ : float
        Rows behind the summary.
    fingerprint_ : str
        The study codebook's fingerprint.
    """

    learner = "renyi"
    display_name = "a Rényi"
    learn_options = ("coverage", "ridge")

    def __init__(self, ridge: float | None = None, coding: str = "min-norm", features: Sequence[str] | None = None,
                 coverage: float = 0.95, certify: str = "bound", time_limit: float | None = 120.0):
        self.ridge = ridge
        self.coding = coding
        self.features = features
        self.coverage = coverage
        self.certify = certify
        self.time_limit = time_limit

    # ------------------------------------------------------------------ fit
    _parameter_constraints = {
        "ridge": Interval(low=0, none_ok=True),
        "coding": Options(("min-norm", "reference")),
        "coverage": COVERAGE,
        "certify": Options(("exact", "bound", "first")),
        "time_limit": TIME_LIMIT,
        "features": FEATURES,
    }

    def fit(self, summary: Any) -> "RenyiClassifier":
        """Fit from ``summary`` (its Q, d(·), prior and discrete blocks only). Returns self."""
        self.check_params()
        names, sub = discrete_problem(summary, self.features)
        cb = summary.codebook
        K = summary.n_classes
        prior = np.asarray(summary.prior, dtype=np.float64)
        positives = [1] if K == 2 else list(range(K))
        if sub is not None:
            Q = second_moments(sub)
            blocks = discrete_blocks(sub.codebook)
            ds = [label_contrast(sub, c if K > 2 else None) for c in positives]
        else:
            Q = np.zeros((0, 0))
            blocks = []
            ds = [np.zeros(0) for _ in positives]
        sizes = np.array([b.size for b in blocks], dtype=np.int64)
        M = int(sizes.sum())
        ridge = float(self.ridge) if self.ridge is not None else auto_ridge(summary, names, M)
        p = np.diag(Q).copy()
        Qc = Q - np.outer(p, p)
        eig_full = psd_eigh(Qc) if M else (np.zeros(0), np.zeros((0, 0)))
        if self.coding == "reference" and M:
            off = block_offsets(sizes)
            ref = np.array([off[i] + int(np.argmax(p[off[i] : off[i + 1]])) for i in range(len(sizes))])
            keep = np.setdiff1d(np.arange(M), ref)
            eig_ref = psd_eigh(Qc[np.ix_(keep, keep)])
        Z = np.zeros((len(positives), M))
        b = np.zeros(len(positives))
        gam = np.zeros(len(positives))
        hgr = np.zeros(len(positives))
        sep = np.zeros(len(positives), dtype=bool)
        for k, (c, d) in enumerate(zip(positives, ds)):
            q1 = float(prior[c])
            delta = 2.0 * q1 - 1.0
            dc = d - delta * p
            if M and self.coding == "reference":
                z = np.zeros(M)
                z[keep] = min_norm_solve(None, dc[keep], ridge, eig=eig_ref)
            elif M:
                z = min_norm_solve(None, dc, ridge, eig=eig_full)
            else:
                z = np.zeros(0)
            bk = 0.5 * delta - float(p @ z)
            Z[k], b[k] = z, bk
            # γ = E[(b + Wᵀz − C)²] = q1(1−q1) + zᵀQ_c z − d_cᵀz at the optimal b.
            gam[k] = q1 * (1.0 - q1) + (quadratic_value(Qc, dc, z) if M else 0.0)
            hgr[k] = hgr_lower_bound(gam[k], q1)
            if ridge > 0.0 or not M:
                sep[k] = _is_separable(z, bk, sizes)
            else:
                z0 = z if self.coding == "min-norm" else min_norm_solve(None, dc, 0.0, eig=eig_full)
                b0 = 0.5 * delta - float(p @ z0)
                lam, V = eig_full
                top = float(lam.max()) if lam.size else 0.0
                N = V[:, lam <= RCOND * top] if top > 0 else V
                sep[k] = separable_solution(z0, b0, p, sizes, N) is not None
        self.classes_ = tuple(summary.classes)
        self.feature_names_in_ = names
        self.unpaired_ = [] if self.features is not None else [f for f in cb.discrete_names if f not in names]
        self.columns_ = np.array([cb.index(nm) for nm in names], dtype=np.int64)
        self.sizes_ = sizes
        self.levels_ = [tuple(cb.feature(nm).level_names) for nm in names]
        self.n_features_in_ = cb.n_features
        self.z_ = Z
        self.intercept_ = b
        self.gamma_ = gam
        self.hgr_lower_bound_ = hgr
        self.separable_per_problem_ = sep
        self.separable_ = bool(sep.all())
        # Under DP noise γ̂ is computed from noisy tables; widen it by an upper confidence
        # margin for the noise (see noise_margin) so that 2(γ̂ + margin) still bounds the
        # error of rule (7) with probability ≥ coverage over the noise.
        margin = np.zeros_like(gam)
        if summary.is_noisy:
            if not (0.0 < self.coverage < 1.0):
                raise InputError(f"coverage must be in (0, 1), got {self.coverage!r}")
            from scipy.special import ndtri  # scipy.stats' norm.ppf, without its import

            zq = float(ndtri(1.0 - (1.0 - self.coverage) / len(gam)))
            for k in range(len(gam)):
                pos = 1 if len(gam) == 1 else k
                margin[k] = zq * noise_sd(summary, names, sizes, Z[k], float(b[k]), pos)
        # Never worse than the majority vote: a problem whose fitted risk does not beat the
        # prior's, q(1−q), by more than the noise margin predicts the majority (z = 0).
        fallback = np.zeros(len(gam), dtype=bool)
        for k, c in enumerate(positives):
            q1 = float(prior[c])
            if summary.is_noisy and M and gam[k] + margin[k] >= q1 * (1.0 - q1):
                fallback[k] = True
                Z[k] = 0.0
                b[k] = 0.5 * (2.0 * q1 - 1.0)
                gam[k] = q1 * (1.0 - q1)
                hgr[k] = hgr_lower_bound(gam[k], q1)
        self.ridge_ = ridge
        self.fallback_ = fallback
        self.noise_margin_ = margin
        self.training_bound_ = Certificate(float(min(1.0, max(0.0, 2.0 * float((gam + margin).sum())))), "2gamma",
                                           float(self.coverage) if summary.is_noisy else None, bool(summary.is_noisy),
                                           K)
        self.prior_ = prior
        self.n_ = float(summary.n)
        self.fingerprint_ = str(summary.fingerprint)
        self.certificate_ = self.training_bound_  # fitted: the rule exists; now certify it
        if summary.selection is None and not getattr(self, "_predictor_only", False):
            self.certificate_ = (certify_projected(self, summary, coverage=self.coverage) if self.certify == "first"
                                 else
                                 certify(self, summary, self.coverage, exact=self.certify == "exact",
                                         time_limit=self.time_limit))
        if not getattr(self, "_predictor_only", False):
            self.cover_selection(summary)  # features selected from the same patients: the box covers the selection
        return self

    def fit_predictor(self, summary: Any) -> "RenyiClassifier":
        """:meth:`fit` without the W(h) certificate (an LP over the box, most of a fit); ``certificate_`` stays 2γ.
        The same z, intercept and ``predict`` (the certificate is computed after the rule)."""
        self._predictor_only = True
        try:
            return self.fit(summary)
        finally:
            del self._predictor_only

    # -------------------------------------------------------------- predict
    def _check_X(self, X: Any) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise InputError(f"X must have shape (n, {self.n_features_in_}), got {X.shape}")
        for col, m, nm in zip(self.columns_, self.sizes_, self.feature_names_in_):
            v = X[:, col]
            bad = ~np.isfinite(v) | (v < 0) | (v >= m) | (v != np.floor(v))
            if bad.any():
                r = int(np.flatnonzero(bad)[0])
                raise InputError(f"feature {nm!r}: code {v[r]!r} at row {r + 1} is outside 0..{m - 1}")
        return X

    def decision_function(self, X: Any) -> np.ndarray:
        """Additive scores f(x) = b + Σ_i z_{i,x_i} (P̃(Y=positive | x) = 1/2 + f).

        Parameters
        ----------
        X : array, shape (n, n_features_in_)
            Codebook-ordered codes.

        Returns
        -------
        ndarray, shape (n,) for a binary label (score of class 1), (n, K) otherwise.
        """
        self._check_fitted()
        X = self._check_X(X)
        off = block_offsets(self.sizes_)
        F = np.tile(self.intercept_, (X.shape[0], 1))
        for i, col in enumerate(self.columns_):
            idx = off[i] + X[:, col].astype(np.int64)
            F += self.z_[:, idx].T
        return F[:, 0] if len(self.classes_) == 2 else F

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities of the randomized rule; rows sum to 1.

        Binary: rule (7), P(predict 1) = s₁²/(s₀² + s₁²), s₁ = clip(1/2 + f, 0, 1).

        K > 2: each one-vs-rest problem c gives a coin b_c ~ Bernoulli(π_c), π_c the
        rule-(7) probability of its score. If exactly one coin says "yes" the rule
        predicts that class; otherwise (mass F) it picks c with probability ∝ π_c. When
        every coin is right the prediction is Y, so the error is at most
        Σ_c P(coin c wrong) ≤ Σ_c 2γ_c under every distribution matching the marginals —
        the ``worst_case_error_`` reported. Probabilities:
        P(c) = π_c Π_{k≠c}(1 − π_k) + F·π_c/Σ_k π_k.

        Returns
        -------
        ndarray, shape (n, K)
        """
        F = self.decision_function(X)
        if len(self.classes_) == 2:
            p1 = rule7_positive_proba(F)
            return np.column_stack([1.0 - p1, p1])
        pi = rule7_positive_proba(F)
        K = pi.shape[1]
        exact = np.empty_like(pi)
        for c in range(K):
            exact[:, c] = pi[:, c] * np.prod(np.delete(1.0 - pi, c, axis=1), axis=1)
        rest = np.clip(1.0 - exact.sum(axis=1), 0.0, None)
        tot = pi.sum(axis=1, keepdims=True)
        w = np.where(tot > 0, pi / np.where(tot > 0, tot, 1.0), 1.0 / K)
        P = exact + rest[:, None] * w
        return P / P.sum(axis=1, keepdims=True)

    def predict(self, X: Any) -> np.ndarray:
        """MAP rule: class 1 iff f(x) > 0 (binary); argmax_c f_c(x) (K > 2). Class codes (n,)."""
        F = self.decision_function(X)
        if len(self.classes_) == 2:
            return (F > 0).astype(np.int64)
        return np.argmax(F, axis=1).astype(np.int64)

    def linear_rule(self) -> Any:
        """The MAP rule over the node map: binary, scores (0, f); K > 2, the one-vs-rest scores."""
        from ..features.blocks import Block, FeatureMap
        from ..minimax.fixed_rule import LinearRule

        self._check_fitted()
        blocks = []
        off = 0
        for nm, col, m in zip(self.feature_names_in_, self.columns_, self.sizes_):
            blocks.append(Block(nm, "onehot", int(m), off, int(col)))
            off += int(m)
        fmap = FeatureMap(blocks, [b.column for b in blocks])
        if len(self.classes_) == 2:
            W = np.zeros((2, fmap.dim))
            W[1] = self.z_[0]
            return LinearRule(fmap, W, np.array([0.0, float(self.intercept_[0])]))
        return LinearRule(fmap, np.asarray(self.z_), np.asarray(self.intercept_))

    def falls_back(self) -> bool:
        return bool(np.any(self.fallback_))

    def learn_lines(self, report: dict[str, Any]) -> list[str]:
        return [f"γ = {report['gamma']}, HGR lower bound {report['hgr_lower_bound']}, separable: {report['separable']}"]

    def _report(self) -> dict[str, Any]:
        return {
            "unpaired_features": list(self.unpaired_),
            "gamma": _scalar_or_list(self.gamma_),
            "hgr_lower_bound": _scalar_or_list(self.hgr_lower_bound_),
            "separable": bool(self.separable_),
            "training_bound": float(self.training_bound_.value),
            "training_bound_approximate": bool(self.training_bound_.approximate),
            "noise_margin": _scalar_or_list(self.noise_margin_),
            "ridge": float(self.ridge_),
            "majority_fallback": _scalar_or_list(self.fallback_),
        }

    # ---------------------------------------------------------- persistence
    def _state(self) -> dict[str, Any]:
        """The fitted state as JSON-ready values (plain lists and floats)."""
        return {
            "fingerprint": self.fingerprint_,
            "classes": list(self.classes_),
            "features": list(self.feature_names_in_),
            "columns": [int(c) for c in self.columns_],
            "sizes": [int(s) for s in self.sizes_],
            "levels": [list(lv) for lv in self.levels_],
            "n_features_in": int(self.n_features_in_),
            "z": [[float(v) for v in row] for row in self.z_],
            "intercept": [float(v) for v in self.intercept_],
            "gamma": [float(v) for v in self.gamma_],
            "hgr_lower_bound": [float(v) for v in self.hgr_lower_bound_],
            "separable": bool(self.separable_),
            "separable_per_problem": [bool(v) for v in self.separable_per_problem_],
            "worst_case_error": float(self.certificate_.value),
            "training_bound": float(self.training_bound_.value),
            "noise_margin": [float(v) for v in self.noise_margin_],
            "training_bound_approximate": bool(self.training_bound_.approximate),
            "prior": [float(v) for v in self.prior_],
            "n": float(self.n_),
            "ridge_used": float(self.ridge_),
            "unpaired": list(self.unpaired_),
            "fallback": [bool(v) for v in self.fallback_],
        }

    @classmethod
    def from_dict(cls, d: Any) -> "RenyiClassifier":
        """Rebuild a fitted model from :meth:`to_dict` output (or a previous release's layout)."""
        if isinstance(d, dict) and d.get("learner") == "renyi" and "state" not in d:
            # the previous release kept the parameters beside the state
            try:
                params = {"ridge": float(d["ridge"]), "coding": str(d["coding"]), "features": list(d["features"]),
                          "coverage": float(d.get("coverage", 0.95))}
            except (KeyError, TypeError, ValueError) as exc:
                raise InputError(f"malformed Rényi model: {type(exc).__name__} {exc}") from None
            d = {"learner": "renyi", "params": params, "state": d}
        return super().from_dict(d)

    def _load_state(self, d: dict[str, Any]) -> None:
        self.classes_ = tuple(str(c) for c in d["classes"])
        self.feature_names_in_ = [str(f) for f in d["features"]]
        self.columns_ = np.asarray(d["columns"], dtype=np.int64)
        self.sizes_ = np.asarray(d["sizes"], dtype=np.int64)
        self.levels_ = [tuple(str(v) for v in lv) for lv in d["levels"]]
        self.n_features_in_ = int(d["n_features_in"])
        self.z_ = np.asarray(d["z"], dtype=np.float64).reshape(len(d["z"]), -1)
        self.intercept_ = np.asarray(d["intercept"], dtype=np.float64)
        self.gamma_ = np.asarray(d["gamma"], dtype=np.float64)
        self.hgr_lower_bound_ = np.asarray(d["hgr_lower_bound"], dtype=np.float64)
        self.separable_per_problem_ = np.asarray(d["separable_per_problem"], dtype=bool)
        self.separable_ = bool(d["separable"])
        self.noise_margin_ = np.asarray(d.get("noise_margin", [0.0] * len(d["gamma"])), dtype=np.float64)
        tb_approx = bool(d.get("training_bound_approximate", d.get("certificate_approximate", False)))
        self.ridge_ = float(d.get("ridge_used", self.ridge or 0.0))
        self.unpaired_ = [str(f) for f in d.get("unpaired", [])]
        self.fallback_ = np.asarray(d.get("fallback", [False] * len(d["gamma"])), dtype=bool)
        self.prior_ = np.asarray(d["prior"], dtype=np.float64)
        self.n_ = float(d["n"])
        self.fingerprint_ = str(d["fingerprint"])
        K = len(self.classes_)
        n_prob = 1 if K == 2 else K
        M = int(self.sizes_.sum())
        ok = (
            K >= 2
            and len(self.feature_names_in_) == len(self.columns_) == len(self.sizes_) == len(self.levels_)
            and all(len(lv) == s for lv, s in zip(self.levels_, self.sizes_))
            and self.z_.shape == (n_prob, M)
            and self.intercept_.shape == self.gamma_.shape == self.hgr_lower_bound_.shape == (n_prob,)
            and self.separable_per_problem_.shape == (n_prob,)
            and self.prior_.shape == (K,)
            and np.all((self.columns_ >= 0) & (self.columns_ < self.n_features_in_))
            and np.all(np.isfinite(self.z_))
            and np.all(np.isfinite(self.intercept_))
        )
        if not ok:
            raise InputError(
                f"malformed Rényi model: inconsistent shapes (classes {K}, features {len(self.feature_names_in_)}, "
                f"z {self.z_.shape})"
            )
        # files of earlier releases stored 2γ as "worst_case_error" (their W(h), if any, in the model's
        # certificate record, which replaces this one when the model is loaded)
        old = "training_bound" not in d
        self.training_bound_ = Certificate(float(d["worst_case_error" if old else "training_bound"]), "2gamma",
                                           float(self.coverage) if tb_approx else None, tb_approx, K)
        self.certificate_ = self.training_bound_ if old else Certificate(
            float(d["worst_case_error"]), "W(h)", float(self.coverage), False, K)


def _scalar_or_list(v: Any) -> Any:
    a = np.asarray(v)
    return a.reshape(()).item() if a.size == 1 else a.tolist()  # binary label: one problem, one number
