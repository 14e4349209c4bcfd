"""The fitted state of a 0-1 minimax risk classifier and its two classification rules.

Shared by :class:`marg.learners.classifiers.mrc.MRC` and :class:`marg.learners.classifiers.dcc.DCC`: the deterministic
rule argmax_y Φ(x, y)ᵀμ and the randomized rule (6) of seed 000,
h(y|x) = (Φ(x,y)ᵀμ − φ)₊ / Σ_y' (Φ(x,y')ᵀμ − φ)₊ (uniform when every term is 0), whose
worst-case error over the uncertainty set is at most R*; the naive-Bayes tie-break of the
deterministic rule; which rows lie outside the uncertainty set (:meth:`MinimaxRules.outside`);
and the JSON form of the state all of these read (μ, φ, R*, the ruled-out cells, the
tie-break tables, provenance).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Iterable, cast

import numpy as np

from marg.errors import InputError

from ..estimator.base import Certificate, MarginalEstimator
from ..features.box import box_tables
from ..minimax.solution import MinimaxSolution

if TYPE_CHECKING:
    from ..core.certificate import CertificateKind
    from ..features.blocks import Block


def argmax_rule(scores: np.ndarray, tiebreak: np.ndarray | None = None, rtol: float = 1e-9) -> np.ndarray:
    """Class indices (n,) of the largest score per row of ``scores`` (n, K).

    Ties — scores within ``rtol``·max(1, |max|) of the row's maximum, which minimax rules
    produce often (many optimal μ, regions where the worst case is indifferent) — go to the
    tied label of largest ``tiebreak`` (n, K) score, then to the lowest index; without
    ``tiebreak``, to the lowest index.
    """
    F = np.asarray(scores, dtype=np.float64)
    labels: np.ndarray
    if tiebreak is None or F.shape[0] == 0:
        labels = np.argmax(F, axis=1)
    else:
        labels = np.argmax(np.where(maximal(F, rtol), np.asarray(tiebreak, dtype=np.float64), -np.inf), axis=1)
    return labels


def maximal(scores: np.ndarray, rtol: float = 1e-9) -> np.ndarray:
    """(n, K) bool: the labels whose score is within ``rtol``·max(1, |max|) of the row's maximum."""
    F = np.asarray(scores, dtype=np.float64)
    top = F.max(axis=1, keepdims=True)
    near: np.ndarray = F >= top - rtol * np.maximum(1.0, np.abs(top))
    return near


def naive_bayes_logp(tau: np.ndarray, prior: np.ndarray, n: float, blocks: Iterable[Block], dim: int) -> np.ndarray:
    """Naive-Bayes log-likelihoods log P̂(x_i = a | y) per column, (K, dim), for tie-breaking.

    From the released first-order proportions τ[y, col] = P̂(x_i = a, y) of each one-hot
    block (offset, size): log((n·τ + ½) / (n·π_y + ½·size)) (a Jeffreys pseudo-count of ½ per
    cell, so unseen levels stay finite). Other columns (raw numeric, edge cells) are 0.
    """
    tau = np.clip(np.asarray(tau, dtype=np.float64), 0.0, None)
    prior = np.clip(np.asarray(prior, dtype=np.float64), 0.0, None)
    out = np.zeros((tau.shape[0], dim))
    for b in blocks:
        if b.kind == "onehot":
            sl = slice(b.offset, b.offset + b.size)
            out[:, sl] = np.log((n * tau[:, sl] + 0.5) / (n * prior[:, None] + 0.5 * b.size))
    return out


def randomized_rule(scores: np.ndarray, phi: float) -> np.ndarray:
    """Rule (6): probabilities (n, K), rows summing to one.

    Parameters
    ----------
    scores : ndarray (n, K)
        Φ(x, y)ᵀμ for each row x and label y.
    phi : float
        φ(μ) = max_{x, C} (Σ_{y∈C} Φ(x,y)ᵀμ − 1)/|C| (or a certified upper bound of it).
    """
    s = np.asarray(scores, dtype=np.float64) - float(phi)
    h = np.maximum(s, 0.0)
    d = h.sum(axis=1, keepdims=True)
    K = s.shape[1]
    return np.where(d > 0, h / np.where(d > 0, d, 1.0), 1.0 / K)


class MinimaxRules(MarginalEstimator):
    """Prediction, coverage and persistence of a fitted 0-1 minimax classifier (base of MRC and DCC).

    The estimator sets ``mu_`` (K, D), ``phi_``, ``certificate_``, ``ruled_out_`` (K, D),
    ``prior_`` (K,) and ``nb_logp_`` (K, D) when fitted, and its feature map (an object with
    ``scores(X, mu)``, ``psi(X)``, ``dim`` and ``to_dict``) in ``map_``.
    """

    # the estimator's hyper-parameters (MRC's and DCC's) and the fitted state a loaded file may lack,
    # declared for the type checker
    coverage: float
    s: float | None
    minimax_risk_: Certificate | None
    prior_: np.ndarray | None
    nb_logp_: np.ndarray | None
    tau_: np.ndarray | None
    lambda_: np.ndarray | None

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        """Scores Φ(x, y)ᵀμ, shape (n, K); X is (n, p) codes in codebook feature order."""
        self._check_fitted()
        scores: np.ndarray = self.map_.scores(X, self.mu_)
        return scores

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Deterministic rule argmax_y Φ(x, y)ᵀμ, as class indices (n,).

        Ties (where the worst case is indifferent) are broken by the naive-Bayes score
        log π_y + Σ_i log P̂(x_i | y) from the released first-order tables (``nb_logp_``,
        ``prior_``): the evidence the model already holds, rather than the order of the
        labels. Models saved without it break ties by the lowest index.
        """
        F = self.decision_function(X)
        pred = argmax_rule(F)
        nb = getattr(self, "nb_logp_", None)
        if nb is None or self.prior_ is None or F.shape[0] == 0:  # a file with nb_logp has a prior (loading checks)
            return pred
        tied = np.flatnonzero(maximal(F).sum(axis=1) > 1)
        if tied.size:  # the tie-break scores only where they decide
            psi = self.map_.psi(np.asarray(X)[tied])
            tb = np.asarray(psi) @ nb.T + np.log(np.maximum(self.prior_, 1e-300))[None, :]
            pred[tied] = argmax_rule(F[tied], tb)
        return pred

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """Randomized rule (6): h(y|x) = (Φ(x,y)ᵀμ − φ)₊ / Σ_y' (Φ(x,y')ᵀμ − φ)₊, uniform when all are 0; (n, K)."""
        return randomized_rule(self.decision_function(X), self.phi_)

    has_uncertainty_set = True

    def outside(self, X: np.ndarray) -> np.ndarray:
        """Rows no distribution of the uncertainty set reaches, with any label; bool (n,).

        (x, y) crosses a cell recorded in ``ruled_out_`` (τ + λ = 0 there, so every p in U
        has E_p[1{cell, y}] = 0) for EVERY label y: p(x) = 0 for all p in U. The certificate
        R* is a worst case over U and so says nothing about such rows; the rule there is
        whichever optimal μ the solver returned.
        """
        self._check_fitted()
        psi = self.map_.psi(X)
        hits = (np.asarray(psi) != 0).astype(np.float64) @ np.asarray(self.ruled_out_, dtype=np.float64).T  # (n, K)
        out: np.ndarray = np.all(hits > 0, axis=1)
        return out

    # ---------------------------------------------------------------- fitted state
    def _set_minimax_state(self, summary: Any, sol: MinimaxSolution, ruled_out: np.ndarray | None = None,
                           approximate: bool = False) -> None:
        """Store the fitted state every minimax fit path shares, from its one result type.

        The map is the solution's (``sol.fmap``: the finished map, DCC's chosen edges);
        ``ruled_out`` (K, D): cells the rule vetoes (default: the solution's impossible cells);
        ``approximate``: the box's coverage is approximate; ``bound``: the largest entry of ``sol.bound``.
        """
        fmap = sol.fmap
        tau, lam, mu, phi, value = sol.tau, sol.lam, sol.mu, sol.phi, sol.value
        impossible = sol.impossible
        ruled_out = impossible if ruled_out is None else ruled_out
        self.map_ = fmap
        self.feature_names_in_ = list(fmap.names)
        self.classes_ = tuple(summary.classes)
        self.prior_ = np.asarray(summary.prior, dtype=np.float64)
        self.nb_logp_ = naive_bayes_logp(tau, self.prior_, float(summary.n), fmap.blocks, fmap.dim)
        self.tau_ = tau
        self.lambda_ = lam
        self.mu_ = mu
        self.phi_ = float(phi)
        self.nu_ = float(phi) + 1.0
        self.iterations_ = [float(v) for v in sol.iterations]
        self.row_rounds_ = {"lower": [float(v) for v in sol.lower], "upper": [float(v) for v in sol.upper]}
        self.n_rows_ = int(sol.n_rows)
        self.impossible_ = impossible
        self.ruled_out_ = ruled_out
        self.converged_ = bool(sol.converged)
        self.bound_ = float(np.max(sol.bound)) if np.size(sol.bound) else float("nan")
        self.fingerprint_ = str(summary.fingerprint)
        self.n_ = float(summary.n)
        self.minimax_risk_ = Certificate(float(value), sol.kind, self.coverage if self.s is None else None,
                                         bool(approximate), len(self.classes_),
                                         box=box_tables(fmap, tau, lam, summary.codebook.label.name))
        self.certificate_ = self.minimax_risk_  # until :meth:`_certify_labels` (the fit's last step)

    def _certify_labels(self, summary: Any) -> None:
        """The certificate of the labels ``predict`` writes: W(h) over the fit's own box, R* kept in
        ``minimax_risk_`` (:func:`marg.learners.certification.certify_labels.labels_certificate`), over the box that
        covers a selection of the features from the same patients when the summary records one
        (:meth:`cover_selection`). A fit's last step."""
        from ..certification.certify_labels import labels_certificate

        if getattr(self, "_predictor_only", False):  # fit_predictor: the labels are asked of it, not their bound
            return
        self.certificate_ = labels_certificate(self, summary)
        self.cover_selection(summary)

    def fit_predictor(self, summary: Any) -> "MinimaxRules":
        """:meth:`fit` without the labels' certificate (W(h), an LP over the box: most of a fit on adult's three sites);
        ``certificate_`` stays R*. The same μ and the same ``predict`` (the certificate is the fit's last step)."""
        self._predictor_only = True
        try:
            return cast("MinimaxRules", self.fit(summary))  # fit returns self
        finally:
            del self._predictor_only

    def randomized_bound(self) -> Certificate | None:
        """R* (``minimax_risk_``): the randomized rule's worst-case risk over the box, when the certificate is not
        it."""
        r = getattr(self, "minimax_risk_", None)
        return None if r is None or r is self.certificate_ else r

    def _certificate_loaded(self) -> None:
        """A file saved before the labels were certified carries R* (the randomized rule's) as its
        certificate: it becomes ``minimax_risk_``, and 2·R* the labels' certificate
        (:func:`marg.learners.certification.certify_labels.doubled`)."""
        from ..certification.certify_labels import RANDOMIZED, doubled

        if self.minimax_risk_ is None:
            self.minimax_risk_ = self.certificate_
        if self.certificate_.kind in RANDOMIZED:
            self.certificate_ = doubled(self.certificate_)

    def _report(self) -> dict[str, Any]:
        r = self.randomized_bound()
        return {"iterations": [float(v) for v in self.iterations_],
                "minimax_risk": None if r is None else {"value": float(r.value), "kind": r.kind}}

    # ------------------------------------------------------- what the card and the CLI show
    def linear_rule(self) -> Any:
        """argmax Φ(x, y)ᵀμ over the node columns, for a map without pair columns (with edges the
        rule is not additive: the base's InputError)."""
        self._check_fitted()
        if self.map_.edges:
            return super().linear_rule()
        from ..minimax.fixed_rule import LinearRule

        fmap = self.map_.nodes
        return LinearRule(fmap, self.mu_[:, : fmap.dim], np.zeros(len(self.classes_)))

    def score_weights(self) -> tuple[Any, np.ndarray]:
        """The map and μ's columns (pair columns included): the weights the rule adds up."""
        return self.map_, np.asarray(self.mu_, dtype=float)[:, : self.map_.dim]

    def impossible_cells(self) -> np.ndarray:
        return self.impossible_

    def trace(self) -> list[float]:
        return list(self.iterations_)

    def learn_lines(self, report: dict[str, Any]) -> list[str]:
        """R* after each iteration when there was more than one."""
        its = report.get("iterations", [])
        out = ["R^k: " + ", ".join(f"{r:.4f}" for r in its)] if len(its) > 1 else []
        r = report.get("minimax_risk")
        if r:  # the randomized rule's bound, under its own name: it is not the labels' certificate
            out.append(f"randomized rule (predict_proba): minimax risk {r['kind']} = {r['value']:.4f} (bounds the "
                       f"randomized rule, not the labels predict writes)")
        return out

    # ------------------------------------------------------------------ persistence
    def _state(self) -> dict[str, Any]:
        """The fitted minimax state as JSON-ready values (the learner adds its map)."""
        c = self.certificate_
        r = self.randomized_bound()
        prior, nb = getattr(self, "prior_", None), getattr(self, "nb_logp_", None)
        return {
            "fingerprint": self.fingerprint_,
            "classes": list(self.classes_),
            "n": self.n_,
            "mu": self.mu_.tolist(),
            "phi": self.phi_,
            "worst_case_error": float(c.value),
            "certificate": {"kind": c.kind, "coverage": c.coverage, "approximate": c.approximate},
            **({} if r is None else {"minimax_risk": {"value": float(r.value), "kind": r.kind}}),
            "iterations": list(self.iterations_),
            "n_rows": self.n_rows_,
            "impossible": [[int(j) for j in np.flatnonzero(row)] for row in self.impossible_],
            # only where it differs from "impossible" (MRC: every feature, not just the working set)
            **({} if np.array_equal(self.ruled_out_, self.impossible_)
               else {"ruled_out": [[int(j) for j in np.flatnonzero(row)] for row in self.ruled_out_]}),
            "converged": self.converged_,
            "prior": None if prior is None else [float(v) for v in prior],
            "nb_logp": None if nb is None else nb.tolist(),
            "map": self.map_.to_dict(),
        }

    def _load_minimax_state(self, d: dict[str, Any], fmap: Any, kind: str) -> None:
        """Set the fitted state from :meth:`_state` output for the map ``fmap``.

        Raises InputError when μ is not (K, D) or not finite; a missing key raises
        KeyError, a wrong type TypeError/ValueError (the caller turns those into one line).
        τ and λ are not stored: ``tau_`` and ``lambda_`` are None after loading. Files of
        the previous release carry no ``certificate`` record: its kind is the learner's and
        its coverage the saved parameters'.
        """
        dim = fmap.dim
        classes = tuple(str(c) for c in d["classes"])
        mu = np.asarray(d["mu"], dtype=np.float64)
        if mu.shape != (len(classes), dim):
            raise InputError(f"model mu has shape {mu.shape}, expected {(len(classes), dim)}")
        if not np.all(np.isfinite(mu)):
            raise InputError("model mu contains NaN or infinity")

        def cells(key: str) -> np.ndarray:
            out = np.zeros(mu.shape, dtype=bool)
            for y, cols in enumerate(d.get(key, [[] for _ in classes])):
                idx = np.asarray(cols, dtype=np.int64)
                if idx.size and (idx.min() < 0 or idx.max() >= dim):
                    raise InputError(f"model {key!r} cells out of range for {dim} columns: {cols!r}")
                out[y, idx] = True
            return out

        imp = cells("impossible")
        ruled = cells("ruled_out") if "ruled_out" in d else imp
        self.map_ = fmap
        self.feature_names_in_ = list(fmap.names)
        self.classes_ = classes
        self.mu_ = mu
        self.phi_ = float(d["phi"])
        self.nu_ = self.phi_ + 1.0
        value = float(d["worst_case_error"])
        rec = d.get("certificate") or {}
        if not isinstance(rec, dict):
            raise TypeError("certificate must be an object")
        cov = rec.get("coverage", self.coverage if self.s is None else None)
        # the file's kinds, not checked here
        self.certificate_ = Certificate(value, cast("CertificateKind", str(rec.get("kind", kind))),
                                        None if cov is None else float(cov), bool(rec.get("approximate", False)),
                                        len(classes))
        mr = d.get("minimax_risk")
        self.minimax_risk_ = (replace(self.certificate_, value=float(mr["value"]),
                                      kind=cast("CertificateKind", str(mr["kind"]))) if isinstance(mr, dict) else None)
        self.iterations_ = [float(v) for v in d.get("iterations", [])]
        self.n_rows_ = int(d.get("n_rows", 0))
        self.impossible_ = imp
        self.ruled_out_ = ruled
        prior = d.get("prior")
        if prior is not None:
            prior = np.asarray(prior, dtype=np.float64)
            if prior.shape != (len(classes),) or not np.all(np.isfinite(prior)):
                raise InputError(f"model prior must be {len(classes)} finite numbers, got {d.get('prior')!r}")
        self.prior_ = prior
        nb = d.get("nb_logp")
        if nb is not None:
            nb = np.asarray(nb, dtype=np.float64)
            if prior is None or nb.shape != mu.shape or not np.all(np.isfinite(nb)):
                raise InputError(f"model nb_logp must be finite with mu's shape {mu.shape} and come with a prior")
        self.nb_logp_ = nb
        self.converged_ = bool(d.get("converged", True))
        self.fingerprint_ = str(d["fingerprint"])
        self.n_ = float(d.get("n", float("nan")))
        self.tau_ = None
        self.lambda_ = None
        self.row_rounds_ = {"lower": [], "upper": []}
