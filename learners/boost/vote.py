"""``boost``: a sparse minimax vote over Boolean monomials, fitted from marginal tables.

The marginals version of the boosting seed's L0-RBoost (Goldberg 2010, ch. 3): the minimax
0-1 problem of seed 000 over monomial columns m_u(x)·1{y = c} (a rule "age > 54 AND cp = 4"
voting for a class), with the code-length price c(k) of (3.22), divided by n, added to each
column's half-width λ — so that, as in L0-RBoost, a column of order k enters only when its
gain pays for the bits that name it. Column generation prices monomials by the MMA branch
and bound on the cells of the released tables (:mod:`.minimax_cg`); monomials of order ≤ 2
read the first-order and label-pair tables. The inner maximisation over the whole domain is
exact (enumeration or a MILP, :mod:`.domain`), so the certificate R(μ) is a valid bound on
the worst-case error over the uncertainty set (enlarged by the price, which only makes it
more conservative).

Rules: ŷ(x) = argmax_c Σ_u μ[c, u] m_u(x) (``predict``) and the randomized rule (6)
(``predict_proba``, from :class:`..minimax.rules.MinimaxRules`). Where no rule separates the
classes (no rule holds, or the votes tie) the worst case is indifferent and the certificate
holds for any choice; ``predict`` then takes the naive-Bayes class of the released first-order
tables of the rule features, log π_y + Σ_f log P̂(x_f | y) (Jeffreys ½ pseudo-counts,
``tiebreak_``), as MRC does, rather than always the larger prior.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Sequence

import numpy as np

from marg.errors import InputError

from ..estimator.base import FEATURES, MarginalEstimator, features_param
from ..minimax.registry import Statistics
from ..classifiers.minimax_rules import MinimaxRules, argmax_rule, maximal
from ..core.params import COVERAGE, LAMBDA_SCALE, TIME_LIMIT, Interval
from .columns import MonomialMap
from .from_summary import prices_exactly, problem_from
from .literals import codebook_tests
from ..minimax.fit import Columns, FitOptions, fit
from .minimax_cg import FIT_NODES, MONOMIALS, SEARCH_NODES, ColumnSource, MonomialPricing
from .mma import SearchOptions


MAX_ORDER = 5  # the largest monomial order (and the largest table a request may ask for: MAX_CLIQUE)

DEFAULT_TIME_LIMIT: float | None = None
"""Default seconds of column generation: none. The fit stops on work alone (``k_max``
iterations, the stall rule, the pricing searches' budget of branch-and-bound nodes
``pricing_nodes``), so the same tables give the same certificate
on a loaded and an idle machine; ``time_limit`` (``--time-limit``) adds a wall-clock stop (the
LP solves and the pricing searches stop there and the best bound so far is the certificate,
valid at any stop, but then depending on the machine's speed)."""

STOPS = {"converged": "converged (no candidate rule is violated)",
         "stalled": "stopped when the bound stopped improving (--patience, --stall-tol)",
         "time_limit": "stopped at its time limit",
         "work_budget": "stopped when its pricing searches had spent their work budget",
         "k_max": "stopped after its most iterations"}
"""Why column generation ended (:attr:`BoostVote.stopped_`), in words."""


class BoostVote(MinimaxRules):
    """Sparse minimax vote over Boolean monomials of order ≤ 5 (see the module docstring).

    Parameters
    ----------
    s : float or None
        None: λ calibrated to simultaneous ``coverage`` over every candidate column
        (Bonferroni over K × the number of candidate monomials); a number: λ = s·std/√n
        (+ the noise term); 0 gives λ = 0 on exact summaries (only the price remains).
    coverage : float
    features : sequence of str or None
        Features monomials may read; None = every discrete feature.
    max_order : int in 1..5
        Largest monomial order (2 needs pair tables with the label for cross-feature pairs;
        two literals on one feature, an interval, read the first-order table; orders 3–5 are
        priced on the higher-order tables a ``marg request --learner boost`` round brought).
    kappa : float
        κ of (3.22): the bits of a weight, in units of log₂ n (the seed uses 1.5).
    penalty : float
        Multiplier of the price c(k)/n (1 = the seed's; 0 = no sparsity price).
    eps : float
        A column enters when its dual violation exceeds this.
    n_max, k_max : int
        Columns added per iteration; most iterations.
    patience, stall_tol : int, float
        Early stop: column generation stops when the best bound has not dropped by more than
        ``stall_tol`` over the last ``patience`` iterations (``converged_`` is then False; the
        certificate, the best R^k, stays valid).
    bound : float
        Box on |μ|.
    time_limit : float or None
        Seconds of column generation (default :data:`DEFAULT_TIME_LIMIT`, None: no limit): the LP
        solves and the pricing searches stop there, the best R^k so far is kept
        (``converged_`` False, ``stopped_`` ``"time_limit"``).
    pricing_nodes : int or None
        The work budget of column generation (default :data:`.minimax_cg.FIT_NODES`): branch-and-bound
        nodes of the pricing searches over the whole fit, each search at most
        :data:`.minimax_cg.SEARCH_NODES` of them (a search cut there offers its best monomial, and
        the pricing is not exact). When they are spent, column generation stops (``stopped_``
        ``"work_budget"``) with the best R^k as certificate, valid at any stop and the same on a
        loaded and an idle machine. None: the searches run to optimality.
    callback : callable or None
        Progress records per iteration (not saved).

    Attributes
    ----------
    mu_ : (K, D)
        Weights of the chosen monomials (the map's columns) per class.
    map_ : MonomialMap
        The chosen monomials (columns with a non-zero weight).
    certificate_ : Certificate
        R(μ) with the exact φ(μ): a bound on the worst-case 0-1 error over the uncertainty set.
    tau_, lambda_ : (K, D)
        Expectations and half-widths (price included) of the chosen columns.
    pricing_exact_ : bool
        No candidate column was left violated (``converged_`` and an exact search).
    phi_exact_ : bool
        Every inner maximisation was solved to optimality (else φ is HiGHS' dual bound).
    history_ : list of dict
        Per column-generation iteration: R, columns, rows, entered, nodes (of its pricing searches), seconds.
    stopped_ : str
        Why column generation ended: a key of :data:`STOPS`.
    empty_reason_ : str or None
        When no rule reads a feature: why, in one sentence (what was tried, the half-widths
        that kept every rule out, how the search ended, what the model predicts).
    """

    learner = "boost"
    display_name = "a sparse monomial vote"
    learn_options = ("s", "coverage", "max_order", "kappa", "patience", "stall_tol", "time_limit", "pricing_nodes")
    remedies = ("lower --max-order or raise the price (--kappa)",)

    def __init__(self, s: float | None = None, coverage: float = 0.95, features: Sequence[str] | None = None,
                 max_order: int = 2, kappa: float = 1.5, penalty: float = 1.0, eps: float = 1e-6, n_max: int = 20,
                 k_max: int = 30, patience: int = 8, stall_tol: float = 1e-6, bound: float = 1e3,
                 time_limit: float | None = DEFAULT_TIME_LIMIT, pricing_nodes: int | None = FIT_NODES,
                 callback: Callable[[dict], None] | None = None):
        self.s = s
        self.coverage = coverage
        self.features = features
        self.max_order = max_order
        self.kappa = kappa
        self.penalty = penalty
        self.eps = eps
        self.n_max = n_max
        self.k_max = k_max
        self.patience = patience
        self.stall_tol = stall_tol
        self.bound = bound
        self.time_limit = time_limit
        self.pricing_nodes = pricing_nodes
        self.callback = callback

    _parameter_constraints = {
        "s": LAMBDA_SCALE,
        "coverage": COVERAGE,
        "max_order": Interval(1, MAX_ORDER, integer=True),
        "kappa": Interval(low=0),
        "penalty": Interval(low=0),
        "eps": Interval(low=0),
        "n_max": Interval(low=1, integer=True),
        "k_max": Interval(low=0, integer=True),
        "patience": Interval(low=1, integer=True),
        "stall_tol": Interval(low=0),
        "bound": Interval(low=0, open_low=True),
        "time_limit": TIME_LIMIT,
        "pricing_nodes": Interval(low=1, integer=True, none_ok=True),
        "features": FEATURES,
    }

    # ------------------------------------------------------------------ fit
    def fit(self, summary: Any) -> "BoostVote":
        """Fit the vote from a Summary (first-order tables; pair and higher-order tables for longer rules). Returns
        self."""
        self.check_params()
        src, mm, res = self._solve(summary)
        keep = np.flatnonzero(np.any(res.mu != 0.0, axis=0))
        fmap = MonomialMap(src.fmap.tests, [src.fmap.monomials[u] for u in keep])
        sol = replace(res, fmap=fmap, mu=res.mu[:, keep], tau=res.tau[:, keep], lam=res.lam[:, keep],
                      impossible=res.impossible[:, keep], bound=float(self.bound))
        self._set_minimax_state(summary, sol)
        self.tiebreak_ = self._tiebreak_tables(summary, [t.feature for t in src.fmap.tests])
        self.pricing_exact_ = bool(res.converged and res.read.pricing_exact and prices_exactly(summary, src.cliques))
        self.phi_exact_ = bool(res.read.phi_exact)
        self.history_ = res.history
        self.stopped_ = res.stop
        self.empty_reason_ = None if self.used_features() else self._why_empty(src, mm, res)
        self._certify_labels(summary)
        return self

    def _why_empty(self, src: ColumnSource, mm: Any, res: Any) -> str:
        """One sentence on an empty vote: the rules tried, the half-widths that kept them out,
        how column generation ended and what the model predicts instead."""
        tried = [(c, u) for c, u in mm.lp.cols if src.fmap.monomials[u]]
        stop = STOPS.get(res.stop, res.stop)
        if res.stop == "time_limit":
            stop += f" ({self.time_limit:g} s)"
        elif res.stop == "work_budget":
            stop += f" ({self.pricing_nodes:,} branch-and-bound nodes)"
        if tried:
            lam = mm.lp.lam[[mm.lp.col_of[k] for k in tried]]
            price = np.array([src.order_cost[len(src.fmap.monomials[u])] for _, u in tried])
            j = int(np.argmin(lam))
            why = (f"{len(tried)} candidate rules entered the LP and the optimum gives none a weight: each rule's "
                   f"half-width λ (here at least {lam[j]:.3g}, of which the code-length price {price[j]:.3g}) "
                   "outweighs what it lowers the worst-case error by")
            remedy = ("lower --kappa" if price[j] >= 0.5 * lam[j]
                      else "more rows narrow λ (like 1/√n), so does a lower --coverage")
        else:
            why = "no candidate rule was violated at the first LP's duals"
            remedy = "lower --kappa, or release more rows"
        F = self.decision_function(np.zeros((1, len(self.feature_names_in_)), dtype=np.int64))
        if maximal(F).sum() > 1:
            pred = "the naive-Bayes class of the first-order tables (the vote ties on every row)"
        else:
            pred = f"{self.classes_[int(np.argmax(F[0]))]!r} for every row"
        return f"the boost vote is empty: {why}; column generation {stop}. The model predicts {pred}; {remedy}"

    def _watch_empty(self) -> Callable[[dict], None] | None:
        """The callback, and a warning record in the first seconds when the vote is still empty after the
        first rules entered: the LP's bound has not moved from the class prior's (the first LP, no rule).
        A statement of what is so, not a prediction: on breast-w rules enter together after a flat start
        (BENCHMARKS.md, "`--learner boost` on adult: how long, and when it says its vote is empty")."""
        if self.callback is None:
            return None
        seen: list[float] = []

        def watch(info: dict) -> None:
            self.callback(info)
            if info.get("stage") != "cg" or info.get("R") is None or len(seen) >= 2:
                return
            seen.append(float(info["R"]))
            if len(seen) == 2 and seen[1] >= seen[0] - max(float(self.stall_tol), 1e-9):
                self.callback({"stage": "note", "warn": True, "text": (
                    f"boost: no rule has a weight so far (R = {seen[1]:.4f}, the class prior's bound, after the first "
                    "candidate rules entered the LP): each rule's half-width λ, its code-length price included, "
                    "outweighs what it lowers the worst-case error by; rules may still enter together in later "
                    "iterations, but a vote that ends empty is not written without --allow-empty (lower --kappa, or "
                    "release more rows)")})

        return watch

    def _solve(self, summary: Any) -> tuple[ColumnSource, Any, Any]:
        """Column generation on ``summary``: (the column source, the driver with its LP, the result)."""
        cb = summary.codebook
        tests = codebook_tests(cb, features_param(self.features))
        MONOMIALS.check(Statistics(int(self.max_order), "cycles", "the codebook's features", discrete=bool(tests)),
                        "columns", "boost")
        used = sorted({t.feature for t in tests}, key=cb.index)
        cliques: list[tuple[str, ...]] = [(f,) for f in used]
        if self.max_order >= 2:
            cliques += [c for c in summary.feature_cliques() if set(c) <= set(used)]
        problem = problem_from(summary, tests, cliques, int(self.max_order), s=self.s, coverage=self.coverage,
                               kappa=self.kappa, penalty=self.penalty)
        nodes = None if self.pricing_nodes is None else int(self.pricing_nodes)
        options = SearchOptions(node_limit=None if nodes is None else min(SEARCH_NODES, nodes))
        search = Columns(MonomialPricing(float(self.eps), int(self.n_max), options, nodes), int(self.k_max),
                         int(self.patience), float(self.stall_tol))
        res = fit(problem, MONOMIALS, search,
                  FitOptions(bound=float(self.bound), time_limit=self.time_limit, callback=self._watch_empty()))
        return problem.src, res.read.model, res

    @staticmethod
    def _tiebreak_tables(summary: Any, features: Sequence[str]) -> list[tuple[str, int, np.ndarray]]:
        """(feature, codebook column, log P̂(x_f = a | y) of shape (K, m_f)) per rule feature, from
        the first-order tables (negative noisy counts clipped to 0; Jeffreys ½ pseudo-counts)."""
        cb = summary.codebook
        out = []
        for f in dict.fromkeys(features):
            N = np.clip(summary.counts((f, cb.label.name)), 0.0, None)  # (m, K)
            out.append((f, cb.index(f), np.log((N + 0.5) / (N.sum(axis=0, keepdims=True) + 0.5 * N.shape[0])).T))
        return out

    def predict(self, X: np.ndarray) -> np.ndarray:
        """The vote's class per row (n,); where no rule separates the classes, the naive-Bayes class (module
        docstring)."""
        F = self.decision_function(X)
        pred = argmax_rule(F)
        tables = getattr(self, "tiebreak_", None)
        if not tables or F.shape[0] == 0:
            return pred
        tied = np.flatnonzero(maximal(F).sum(axis=1) > 1)
        if tied.size:
            Xt = np.asarray(X)[tied]
            tb = np.tile(np.log(np.maximum(self.prior_, 1e-300)), (tied.size, 1))
            for f, col, logp in tables:
                codes = Xt[:, col].astype(np.int64) if col < Xt.shape[1] else None
                if codes is None or codes.min() < 0 or codes.max() >= logp.shape[1]:
                    raise InputError(f"tie-break table of {f!r} does not fit the rows' codes (column {col}, "
                                     f"{logp.shape[1]} levels)")
                tb += logp[:, codes].T
            pred[tied] = argmax_rule(F[tied], tb)
        return pred

    # ------------------------------------------------------------------ rules
    def rules(self) -> list[dict[str, Any]]:
        """The vote in words: one entry per (class, monomial) with a non-zero weight, largest |weight| first."""
        self._check_fitted()
        out = []
        for u in range(self.map_.dim):
            for c, cls in enumerate(self.classes_):
                w = float(self.mu_[c, u])
                if w != 0.0:
                    out.append({"class": cls, "rule": self.map_.describe(u), "order": len(self.map_.monomials[u]),
                                "weight": w})
        return sorted(out, key=lambda r: -abs(r["weight"]))

    def used_features(self) -> list[str]:
        """The features some rule of the vote reads (a non-zero weight), in codebook order."""
        self._check_fitted()
        used = {f for u in range(self.map_.dim) if np.any(self.mu_[:, u] != 0.0) for f in self.map_.features(u)}
        return [f for f in self.feature_names_in_ if f in used]

    @property
    def n_terms_(self) -> int:
        """‖μ‖₀: the number of (class, monomial) weights in the vote."""
        return int(np.count_nonzero(self.mu_))

    def linear_rule(self) -> Any:
        """A vote of monomials is not additive in one-hot features: its certificate is its own R*."""
        return MarginalEstimator.linear_rule(self)

    def learn_lines(self, report: dict[str, Any]) -> list[str]:
        """The vote's weighted rules, then the R* trace."""
        rules = report.get("monomials", [])
        k = len(rules)
        return ([f"vote: {k} weighted rule{'' if k == 1 else 's'} (score of a class = sum of the weights of its rules "
                 "that hold):"]
                + [f"  {r['weight']:+.4f}  {r['class']}  if  {r['rule']}" for r in rules] + super().learn_lines(report))

    def learn_warnings(self, report: dict[str, Any]) -> list[str]:
        """An empty vote predicts one class for every row: say so, why (:meth:`_why_empty`) and what
        would let a rule enter."""
        if report.get("empty_vote") is None:
            return []
        if report.get("empty_vote_reason"):
            return [f"warning: {report['empty_vote_reason']}"]
        return [f"warning: the {self.learner} vote is empty: no rule reads a feature, so the model predicts "
                f"{report['empty_vote']!r} for every row (the released tables gave no rule worth its price: lower "
                "--kappa or release more rows)"]

    def _report(self) -> dict[str, Any]:
        used = self.used_features()
        return {**super()._report(), "monomials": self.rules(), "terms": self.n_terms_,
                "converged": bool(self.converged_), "used_features": used, "stopped": getattr(self, "stopped_", None),
                "empty_vote_reason": getattr(self, "empty_reason_", None),
                "empty_vote": None if used
                else self.classes_[int(self.predict(np.zeros((1, len(self.feature_names_in_)), dtype=np.int64))[0])]}

    # ---------------------------------------------------------- persistence
    def _state(self) -> dict[str, Any]:
        return {**super()._state(), "tiebreak": [{"feature": f, "column": c, "logp": t.tolist()}
                                                 for f, c, t in self.tiebreak_]}

    def _load_state(self, state: dict[str, Any]) -> None:
        self._load_minimax_state(state, MonomialMap.from_dict(state["map"]), "R*")
        tables = []
        for d in state.get("tiebreak", []):
            try:
                f, col, t = str(d["feature"]), int(d["column"]), np.asarray(d["logp"], dtype=np.float64)
            except (KeyError, TypeError, ValueError):
                raise InputError(f"model tie-break entry {d!r} must hold feature, column and logp") from None
            if t.ndim != 2 or t.shape[0] != len(self.classes_) or not np.all(np.isfinite(t)) or col < 0:
                raise InputError(f"model tie-break table of {f!r} must be {len(self.classes_)} rows of finite "
                                 "log-probabilities")
            tables.append((f, col, t))
        self.tiebreak_ = tables
