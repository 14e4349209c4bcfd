"""W(h) of a fixed rule as one fit of the minimax engine: ``certify_rule`` is ``fit(RuleProblem, FIXED_RULE, One())``.

The problem (:class:`RuleProblem`) is a fixed rule h and the box U = {p : |E_pΦ − τ| ≤ λ}; the
formulation (:class:`FixedRule`, registered as ``fixed-rule``) writes W(h)'s outer LP on the one
model (:meth:`.lp_model.MinimaxModel.for_rows`) with rows from the fixed-rule MILPs
(:class:`.fixed_rule.FixedRuleOracle`, :func:`.generation.solve_boxed`); every round's R_h(μ)
(with the MILPs' proven bounds) is a valid upper bound on W(h), so the value is the best round's,
at any stop, and the fit's certificate is R_h of that round's μ.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from marg.errors import InputError

from .fit import FitOptions, One, Search, fit
from .fixed_rule import FixedRuleOracle, LinearRule, OutOfTime
from .registry import Formulation, register
from .generation import Generation, solve_boxed
from .lp_model import MinimaxModel
from .solution import Finished, MinimaxSolution


@dataclass
class RuleCertificate:
    """The outcome of :func:`certify_rule`.

    Attributes
    ----------
    value : float
        A proven upper bound on W(h) (= W(h) up to the MILP gap when ``converged``).
    lp_value : float
        The outer LP's value at the end (a lower bound on W(h) restricted to the generated rows).
    mu : ndarray (K, D)
    converged : bool
    rounds : int
    history : list of float
        The certified value after each row-generation round.
    """

    value: float
    lp_value: float
    mu: np.ndarray
    converged: bool
    rounds: int
    history: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class RuleProblem:
    """W(h)'s problem for :func:`.fit.fit`: the fixed ``rule`` and the box U = {p : |E_pΦ − τ| ≤ λ},
    Φ from ``fmap`` (τ, λ (K, D))."""

    rule: LinearRule
    fmap: Any
    tau: np.ndarray
    lam: np.ndarray

    @property
    def K(self) -> int:
        """The rule's classes."""
        return self.rule.n_classes


@dataclass(frozen=True)
class RuleRead:
    """What W(h)'s row generation reads besides μ: ``lp_value``, the outer LP's value at the end (a
    lower bound on W(h) restricted to the generated rows)."""

    lp_value: float


class _RuleRows:
    """W(h) by row generation as :class:`.fit.One` runs it: the one model's rows from the fixed-rule
    MILPs (:func:`.generation.solve_boxed`), each round's certified value R_h(μ) = 1 − τᵀμ + λᵀ|μ| +
    (the MILPs' proven bound − 1) recorded with its μ; the MILPs stop at the deadline too."""

    def __init__(self, problem: RuleProblem, options: FitOptions):
        K, D = problem.rule.n_classes, problem.fmap.dim
        self.oracle = FixedRuleOracle(problem.fmap, problem.rule, max_nodes=options.mip_nodes)
        self.lp = MinimaxModel.for_rows(problem.tau, problem.lam, options.bound)
        self.lp.add_mu(np.arange(K * D))
        self.lp.add_cuts(self.oracle.covering_cuts())
        self.tol, self.callback = options.tol, options.callback
        self.max_rounds = 100_000 if options.max_rounds is None else int(options.max_rounds)
        self.history: list[float] = []
        self.best: tuple[np.ndarray, float] = (np.zeros(K * D), 0.0)  # μ = 0, φ = 0: the trivial W ≤ 1
        self.converged, self.lp_value = False, float("nan")

    def _track(self, info: dict[str, Any]) -> None:
        lp, oracle = self.lp, self.oracle
        phi = oracle.last_upper - 1.0
        self.history.append(lp.risk(lp.mu, phi))
        if self.history[-1] < min(self.history[:-1], default=np.inf):
            self.best = (lp.mu.copy(), phi)
        oracle.recenter(lp.mu, self.history[-1])
        # what is known of W(h), an error rate: at least max(0, LP bound), at most the best so far
        if self.callback is not None:
            upper = min(1.0, min(self.history))
            self.callback({"stage": "certify", "lower": min(upper, max(0.0, info["lower"])), "upper": upper,
                           "rows": info["rows"]})

    def solve(self, deadline: float | None) -> float:
        """The best certified value (1 when not one round finished by ``deadline``)."""
        self.oracle.deadline = deadline
        try:
            res = solve_boxed(self.lp, self.oracle, tol=self.tol, deadline=deadline, callback=self._track,
                              max_rounds=self.max_rounds)
            self.converged, self.lp_value = bool(res.converged), float(res.lower[-1]) if res.lower else float("nan")
        except OutOfTime:
            self.converged, self.lp_value = False, float(self.lp.objective) if self.history else float("nan")
        return min(self.history, default=1.0)


class FixedRule(Formulation[RuleProblem, _RuleRows]):
    """W(h) of a fixed rule as a formulation of the one fit (:class:`RuleProblem`, search :class:`.fit.One`):
    ``build`` gives the row generation, ``read`` the best round's μ (the value it certifies: valid at
    any stop; μ = 0 and the trivial 1 when no round finished), ``finish`` nothing to fix and the
    rounds' values kept as recorded (the certificate is R_h of that μ, recomputed by the fit)."""

    def build(self, problem: RuleProblem, search: Search, options: FitOptions) -> _RuleRows:
        return _RuleRows(problem, options)

    def read(self, model: _RuleRows, gen: Generation) -> MinimaxSolution:
        K, D = model.oracle.K, model.oracle.D
        mu, phi = model.best
        return MinimaxSolution(mu=mu.reshape(K, D), tau=model.lp.tau.reshape(K, D), lam=model.lp.lam.reshape(K, D),
                               phi=phi,
                               value=min(model.history, default=1.0), iterations=list(model.history), lower=[],
                               upper=list(model.history), converged=model.converged, n_rows=model.lp.n_rows,
                               impossible=np.zeros((K, D), dtype=bool), bound=model.lp.bound, kind="W(h)",
                               read=RuleRead(model.lp_value))

    def finish(self, problem: RuleProblem, raw: MinimaxSolution, options: FitOptions) -> Finished:
        return Finished(problem.fmap, raw.mu, raw.tau, raw.lam, raw.impossible, raw.phi, raw.bound, iterate=None)


FIXED_RULE = register(FixedRule("fixed-rule", "W(h) of a fixed rule by row generation", ("certify",), max_order=2,
                                graph="forest", discrete=True))


def certify_rule(
    rule: LinearRule,
    umap: Any,
    tau: np.ndarray,
    lam: np.ndarray,
    tol: float = 1e-9,
    bound: float = 1e3,
    time_limit: float | None = None,
    callback: Callable[[dict[str, Any]], None] | None = None,
    max_rounds: int | None = None,
    max_nodes: int | None = None,
) -> RuleCertificate:
    """W(h) of ``rule`` over U = {p : |E_pΦ − τ| ≤ λ} (Φ from ``umap``, the whole domain).

    Parameters
    ----------
    rule : LinearRule
    umap : FeatureMap or PairwiseFeatureMap
    tau, lam : ndarray (K, D)
    tol : float
        Relative tolerance of row generation.
    bound : float
        Initial box on |μ| (enlarged while it binds; InconsistentStatistics if it keeps binding).
    time_limit : float or None
        Seconds for the whole computation, the MILPs of a round included (each stops at the
        deadline with its proven bound); the bound returned is valid at any stop. If not one
        round completes in time, the value is the trivial 1 (``converged`` False, no rounds).
        A wall-clock budget: the value may differ on a loaded machine (``max_rounds`` and
        ``max_nodes`` do not).
    max_rounds : int or None
        Rounds of row generation at most (a work budget; None: until converged).
    max_nodes : int or None
        Branch-and-bound nodes per separation MILP at most (HiGHS ``mip_max_nodes``; a MILP
        stopped there gives its proven bound, so the value stays valid). None: no limit.

    Returns
    -------
    RuleCertificate
        ``mu`` the μ of the best round (the one ``value`` certifies).
    """
    tau = np.asarray(tau, dtype=np.float64)
    lam = np.asarray(lam, dtype=np.float64)
    K = rule.n_classes
    if tau.shape != (K, umap.dim) or lam.shape != tau.shape:
        raise InputError(f"tau and lam must have shape {(K, umap.dim)}, got {tau.shape} and {lam.shape}")
    sol = fit(RuleProblem(rule, umap, tau, lam), FIXED_RULE, One(),
              FitOptions(bound=bound, tol=tol, time_limit=time_limit, callback=callback,
                                                                                   max_rounds=max_rounds,
                         mip_nodes=max_nodes))
    return RuleCertificate(value=float(min(1.0, sol.value)), lp_value=sol.read.lp_value, mu=sol.mu.copy(),
                           converged=sol.converged,
                           rounds=len(sol.iterations), history=list(sol.iterations))


__all__: Sequence[str] = ["RuleCertificate", "RuleProblem", "FIXED_RULE", "certify_rule"]
