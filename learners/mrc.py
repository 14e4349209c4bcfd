"""The 0-1 minimax risk classifier (MRC, seed 000) fitted from a Summary.

Given τ = E[Φ] from the released first-order tables and the confidence box λ
(:mod:`learners.calibration`), the MRC solves::

    R* = min_μ 1 − τᵀμ + φ(μ) + λᵀ|μ|,
    φ(μ) = max_{x ∈ X, ∅≠C⊆Y} (Σ_{y∈C} Φ(x,y)ᵀμ − 1)/|C|,

over the WHOLE codebook domain X (LP (13), :mod:`learners.mrc_lp`). R* is the worst-case
0-1 error of the randomized rule (6) over every distribution p with |E_pΦ − τ| ≤ λ — the
certificate. Rules:

- deterministic: ŷ(x) = argmax_y Φ(x,y)ᵀμ (``predict``);
- randomized (6): h(y|x) = (Φ(x,y)ᵀμ − φ(μ))₊ / d_x with d_x = Σ_y (Φ(x,y)ᵀμ − φ(μ))₊,
  uniform when d_x = 0 (``predict_proba``).

``solver="cg"`` (default) runs column generation over features (Algorithms 1–2 of seed
000): a sequence of LPs over growing/shrinking feature sets with non-increasing values
R^1 ≥ R^2 ≥ … (each a valid certificate: the uncertainty set of fewer features contains
the full one), ending within ε‖μ*‖₁ of R* (exactly R* at ε = 0). ``solver="full"`` solves
the same LP with every feature at once. Both use the exact compact (epigraph) form of the
whole-domain LP by default; ``formulation="rows"`` uses row generation with the exact
separation oracle instead (same optimum, much slower on many features).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from marg.errors import InputError

from .calibration import summary_lambda
from .featuremap import Block, FeatureMap, onehot_columns
from .mrc_lp import FORMULATIONS, MRCSolution, solve_cg, solve_full
from .rules import MinimaxRules, naive_bayes_logp

SOLVERS = ("cg", "full")
LP_SOLVERS = ("simplex", "ipm", "choose")


class MRC(MinimaxRules):
    """0-1 minimax risk classifier over the whole codebook domain.

    Parameters
    ----------
    s : float or None
        None: λ calibrated to simultaneous ``coverage`` (Bonferroni); a number: λ =
        s·std/√n (+ the noise term); 0 gives λ = 0 for exact summaries.
    coverage : float
        Simultaneous coverage of the box τ ± λ (default 0.95).
    features : sequence of str or None
        Names of the features Φ uses (e.g. after feature selection); None = all.
    solver : {"cg", "full"}
        Column generation over features, or the whole LP at once.
    formulation : {"compact", "rows"}
        Exact epigraph LP, or row generation with the separation oracle.
    lp_solver : {"simplex", "ipm", "choose"}
        HiGHS algorithm for ``solver="full"`` (column generation always uses the simplex
        method, whose basis it re-uses between iterations).
    empty_cells : {"veto", "keep"}
        An empty cell (τ = λ = 0: level a of feature i never seen with label y, exact
        release) is impossible under every distribution of the uncertainty set. ``veto``
        (default) fixes μ[y, i, a] = −B there for the features of the final working set
        (all features for ``full``), so the rule never predicts y at x_i = a — this lowers
        the error under every distribution of the set; ``keep`` leaves the LP's value. R*
        is the same either way. With the default calibrated λ an exact zero count still
        gets λ > 0 (Clopper–Pearson, :mod:`learners.calibration`), so empty cells arise
        only with an explicit ``s`` on an exact release (λ = s·std/√n is 0 where τ = 0).
    n_max, eps, k_max : int, float, int
        Column generation (seed 000 §4 defaults 100, 1e-4, 10): at most ``n_max``
        features enter per iteration, a feature enters when its dual violation exceeds
        ``eps``, at most ``k_max`` iterations after the first.
    tol : float
        Relative tolerance on row violations (row generation stops below it).
    bound : float
        Initial box on |μ| (enlarged automatically while it binds).
    time_limit : float or None
        Seconds for the LP work; on expiry the best μ so far is kept (``converged_`` False).
    callback : callable or None
        Called with a dict per row-generation round / column-generation iteration
        (progress reporting; the library itself never prints).

    Attributes
    ----------
    mu_ : ndarray (K, D)
    worst_case_error_ : float
        R* (R^k of the last iteration for ``cg``).
    nu_, phi_ : float
        ν = φ(μ) + 1 and φ(μ).
    classes_ : tuple of str
    prior_ : ndarray (K,)
        Released class proportions.
    nb_logp_ : ndarray of float (K, D)
        Naive-Bayes log P̂(x_i = a | y) of the one-hot columns, which break argmax ties
        (:meth:`predict`).
    blocks_ : list of Block
    feature_names_ : list of str
    tau_, lambda_ : ndarray (K, D)
    iterations_ : list of float
        R^k per column-generation iteration (non-increasing; one entry for ``full``).
    row_rounds_ : dict
        ``lower`` (LP values) and ``upper`` (exact R(μ)) of every LP solve (each
        row-generation round for ``formulation="rows"``).
    n_rows_ : int
        Rows (x, C) in the final LP.
    selected_features_ : list of str
        ``cg``: the final working set of Algorithm 1; ``full``: features with μ ≠ 0.
    solution_ : MRCSolution
        Solver details (``info["history"]`` per CG iteration, ``max_dual_violation``).
    impossible_ : ndarray of bool (K, D)
        Empty cells (τ = λ = 0) of the working-set features (ruled out when
        ``empty_cells="veto"``).
    ruled_out_ : ndarray of bool (K, D)
        Empty cells of every feature: (x, y) through one has probability 0 under every
        distribution of the uncertainty set (used by :meth:`outside`).
    converged_ : bool
    fingerprint_ : str
    n_ : float
    """

    _score_map = "fmap_"

    def __init__(
        self,
        s: float | None = None,
        coverage: float = 0.95,
        features: Sequence[str] | None = None,
        solver: str = "cg",
        n_max: int = 100,
        eps: float = 1e-4,
        k_max: int = 10,
        tol: float = 1e-9,
        bound: float = 1e3,
        time_limit: float | None = None,
        callback: Callable[[dict], None] | None = None,
        formulation: str = "compact",
        lp_solver: str = "simplex",
        empty_cells: str = "veto",
    ):
        self.s = s
        self.coverage = coverage
        self.features = features
        self.solver = solver
        self.n_max = n_max
        self.eps = eps
        self.k_max = k_max
        self.tol = tol
        self.bound = bound
        self.time_limit = time_limit
        self.callback = callback
        self.formulation = formulation
        self.lp_solver = lp_solver
        self.empty_cells = empty_cells

    # ------------------------------------------------------------------ fit
    def _check_params(self) -> None:
        if self.solver not in SOLVERS:
            raise InputError(f"unknown MRC solver {self.solver!r} (expected one of {', '.join(SOLVERS)})")
        if self.formulation not in FORMULATIONS:
            raise InputError(f"unknown MRC formulation {self.formulation!r} (expected one of {', '.join(FORMULATIONS)})")
        if self.lp_solver not in LP_SOLVERS:
            raise InputError(f"unknown LP solver {self.lp_solver!r} (expected one of {', '.join(LP_SOLVERS)})")
        if self.empty_cells not in ("veto", "keep"):
            raise InputError(f"unknown empty_cells {self.empty_cells!r} (expected 'veto' or 'keep')")
        if self.s is not None and not (np.isfinite(self.s) and self.s >= 0):
            raise InputError(f"s must be finite and >= 0, got {self.s!r}")
        if not (0.0 < self.coverage < 1.0):
            raise InputError(f"coverage must be in (0, 1), got {self.coverage!r}")
        if not (isinstance(self.n_max, (int, np.integer)) and self.n_max >= 1):
            raise InputError(f"n_max must be an integer >= 1, got {self.n_max!r}")
        if not (np.isfinite(self.eps) and self.eps >= 0):
            raise InputError(f"eps must be finite and >= 0, got {self.eps!r}")
        if not (isinstance(self.k_max, (int, np.integer)) and self.k_max >= 0):
            raise InputError(f"k_max must be an integer >= 0, got {self.k_max!r}")
        if not (self.tol > 0 and np.isfinite(self.tol)):
            raise InputError(f"tol must be positive, got {self.tol!r}")
        if not (self.bound > 0 and np.isfinite(self.bound)):
            raise InputError(f"bound must be positive, got {self.bound!r}")
        if self.time_limit is not None and not (self.time_limit > 0):
            raise InputError(f"time_limit must be positive, got {self.time_limit!r}")

    def fit(self, summary: Any) -> "MRC":
        """Fit μ from a Summary (first-order-with-label tables suffice).

        Parameters
        ----------
        summary : marginals.summary.Summary

        Returns
        -------
        self
        """
        self._check_params()
        cb = summary.codebook
        blocks = list(summary.blocks)
        if self.features is not None:
            names = list(self.features)
            if not names:
                raise InputError("features must name at least one feature (got an empty list)")
            known = {b.name for b in blocks}
            for nm in names:
                if nm not in known:
                    raise InputError(f"unknown feature {nm!r} in features (not in the summary's codebook)")
            want = set(names)
            blocks = [b for b in blocks if b.name in want]
        columns = [cb.index(b.name) for b in blocks]
        fmap = FeatureMap(blocks, columns)
        psi_cols = np.concatenate([np.arange(b.offset, b.offset + b.size) for b in blocks]).astype(np.int64)
        tau = np.asarray(summary.tau, dtype=np.float64)[:, psi_cols]
        lam = summary_lambda(summary, psi_cols, s=self.s, coverage=self.coverage)
        sol = self._solve(fmap, tau, lam)
        self._set_fitted(summary, fmap, tau, lam, sol)
        return self

    def _solve(self, fmap: FeatureMap, tau: np.ndarray, lam: np.ndarray) -> MRCSolution:
        if self.solver == "full":
            return solve_full(
                fmap, tau, lam, tol=self.tol, bound=self.bound, time_limit=self.time_limit,
                callback=self.callback, formulation=self.formulation, lp_solver=self.lp_solver,
                empty_cells=self.empty_cells,
            )
        return solve_cg(
            fmap, tau, lam, n_max=int(self.n_max), eps=float(self.eps), k_max=int(self.k_max), tol=self.tol,
            bound=self.bound, time_limit=self.time_limit, callback=self.callback, formulation=self.formulation,
            empty_cells=self.empty_cells,
        )

    def _set_fitted(self, summary: Any, fmap: FeatureMap, tau: np.ndarray, lam: np.ndarray, sol: MRCSolution) -> None:
        self.fmap_ = fmap
        self.blocks_ = list(fmap.blocks)
        self.feature_names_ = fmap.names
        self.classes_ = tuple(summary.classes)
        self.prior_ = np.asarray(summary.prior, dtype=np.float64)
        self.nb_logp_ = naive_bayes_logp(tau, self.prior_, float(summary.n), fmap.blocks, fmap.dim)
        self.tau_ = tau
        self.lambda_ = lam
        self.mu_ = sol.mu
        self.phi_ = float(sol.phi)
        self.nu_ = float(sol.phi) + 1.0
        self.worst_case_error_ = float(sol.value)
        self.iterations_ = [float(r) for r in sol.iterations]
        self.row_rounds_ = {"lower": [float(v) for v in sol.lower], "upper": [float(v) for v in sol.upper]}
        self.n_rows_ = int(sol.n_rows)
        self.selected_features_ = [fmap.blocks[int(i)].name for i in sol.selected]
        self.impossible_ = sol.impossible
        # every feature's empty cells, not only the working set's
        self.ruled_out_ = ((tau + lam) <= 0.0) & onehot_columns(fmap.blocks, fmap.dim)[None, :]
        self.converged_ = bool(sol.converged)
        self.bound_ = float(sol.bound)
        self.solution_ = sol
        self.fingerprint_ = str(summary.fingerprint)
        self.n_ = float(summary.n)

    # ---------------------------------------------------------- persistence
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready model (plain lists and floats)."""
        self._check_fitted()
        return {
            "learner": "mrc",
            **self._state_dict(),
            "params": {
                "s": None if self.s is None else float(self.s),
                "coverage": float(self.coverage),
                "solver": self.solver,
                "n_max": int(self.n_max),
                "eps": float(self.eps),
                "k_max": int(self.k_max),
                "tol": float(self.tol),
                "bound": float(self.bound),
                "formulation": self.formulation,
                "empty_cells": self.empty_cells,
            },
            "blocks": [b.to_dict() for b in self.blocks_],
            "selected_features": list(self.selected_features_),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "MRC":
        """Rebuild a fitted MRC from :meth:`to_dict` output (τ and λ are not stored)."""
        if not isinstance(d, dict) or d.get("learner") != "mrc":
            raise InputError(f"not an MRC model (learner {d.get('learner') if isinstance(d, dict) else d!r})")
        try:
            p = d.get("params", {})
            model = cls(
                s=p.get("s"),
                coverage=float(p.get("coverage", 0.95)),
                solver=str(p.get("solver", "cg")),
                n_max=int(p.get("n_max", 100)),
                eps=float(p.get("eps", 1e-4)),
                k_max=int(p.get("k_max", 10)),
                tol=float(p.get("tol", 1e-9)),
                bound=float(p.get("bound", 1e3)),
                formulation=str(p.get("formulation", "compact")),
                empty_cells=str(p.get("empty_cells", "veto")),
            )
            blocks = [Block.from_dict(b) for b in d["blocks"]]
            fmap = FeatureMap(blocks, [b.column for b in blocks])
            model._load_state(d, fmap.dim)
            model.fmap_ = fmap
            model.blocks_ = list(fmap.blocks)
            model.feature_names_ = fmap.names
            model.selected_features_ = [str(v) for v in d.get("selected_features", [])]
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"malformed MRC model: {exc}") from None
        return model
