"""The 0-1 minimax risk classifier (MRC, seed 000) fitted from a Summary: first-order features.

Given τ = E[Φ] from the released first-order tables and the confidence box λ
(:mod:`marg.learners.features.calibration`), the MRC solves the minimax problem of
:mod:`marg.learners.minimax.problem` over the WHOLE codebook domain: R* is the worst-case
0-1 error of the randomized rule (6) over every distribution p with |E_pΦ − τ| ≤ λ — the
certificate. It is the minimax engine with a node-only map (a DCC with no edges); its only
choices are the driver — column generation over features (``solver="cg"``, Algorithms 1–2
of seed 000: R^1 ≥ R^2 ≥ … each a valid certificate, ending within ε‖μ*‖₁ of R*) or one LP
with every feature (``"full"``) — and the formulation (the exact epigraph LP, or row
generation with the exact separation oracle).

Rules: ŷ(x) = argmax_y Φ(x,y)ᵀμ (``predict``) and rule (6) (``predict_proba``).
"""

from __future__ import annotations

from typing import Any, Callable, Literal, Sequence

from ..estimator.base import FEATURES, features_param
from ..features.blocks import Block, FeatureMap, node_blocks
from ..minimax.empty_cells import FIRST_ORDER_POLICIES, empty_cells, policy_name
from ..minimax.first_order import SelectPricing
from ..minimax.fit import Columns, FitOptions, One, fit
from ..minimax.registry import FIRST_ORDER, formulation
from ..minimax.from_summary import problem_from
from .minimax_rules import MinimaxRules
from ..core.params import COVERAGE, LAMBDA_SCALE, TIME_LIMIT, Check, Interval, Options

Solver = Literal["cg", "full"]
LPSolver = Literal["simplex", "ipm", "choose"]


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
        (progress reporting; the library itself never prints). Not saved with the model.
    formulation : {"compact", "rows"}
        Exact epigraph LP, or row generation with the separation oracle.
    lp_solver : {"simplex", "ipm", "choose"}
        HiGHS algorithm for ``solver="full"`` (column generation always uses the simplex
        method, whose basis it re-uses between iterations).
    empty_cells : {"impossible", "keep"}
        An empty cell (τ = λ = 0: level a of feature i never seen with label y, exact
        release) is impossible under every distribution of the uncertainty set.
        ``"impossible"`` (default; ``"veto"`` in earlier releases) fixes μ[y, i, a] = −B
        there for the features of the final working set (all features for ``full``), so
        the rule never predicts y at x_i = a — this lowers the error under every
        distribution of the set; ``"keep"`` leaves the LP's value. R* is the same either
        way. With the default calibrated λ an exact zero count still gets λ > 0
        (Clopper–Pearson), so empty cells arise only with an explicit ``s`` on an exact
        release.

    Attributes
    ----------
    mu_ : ndarray (K, D)
    certificate_ : Certificate
        R* (R^k of the last iteration for ``cg``); ``worst_case_error_`` is its value.
    nu_, phi_ : float
        ν = φ(μ) + 1 and φ(μ).
    classes_ : tuple of str
    prior_ : ndarray (K,)
    nb_logp_ : ndarray (K, D)
        Naive-Bayes log P̂(x_i = a | y), which breaks argmax ties.
    map_ : FeatureMap
    feature_names_in_ : list of str
    tau_, lambda_ : ndarray (K, D)
    iterations_ : list of float
        R^k per column-generation iteration (non-increasing; one entry for ``full``).
    row_rounds_ : dict
        ``lower`` (LP values) and ``upper`` (exact R(μ)) of every LP solve.
    n_rows_ : int
    selected_features_ : list of str
        ``cg``: the final working set of Algorithm 1; ``full``: features with μ ≠ 0.
    solution_ : MinimaxSolution
        Solver details (``history`` per CG iteration, ``stop``, ``read.max_dual_violation``).
    impossible_ : ndarray of bool (K, D)
        Empty cells of the working-set features.
    ruled_out_ : ndarray of bool (K, D)
        Empty cells of every feature (used by :meth:`outside`).
    converged_ : bool
    fingerprint_ : str
    n_ : float
    """

    learner = "mrc"
    display_name = "an MRC"
    learn_options = ("s", "coverage", "solver", "eps", "n_max", "k_max")
    remedies = ("select features (--select)",)

    def __init__(
        self,
        s: float | None = None,
        coverage: float = 0.95,
        features: Sequence[str] | None = None,
        solver: Solver = "cg",
        n_max: int = 100,
        eps: float = 1e-4,
        k_max: int = 10,
        tol: float = 1e-9,
        bound: float = 1e3,
        time_limit: float | None = None,
        callback: Callable[[dict], None] | None = None,
        formulation: str = "compact",
        lp_solver: LPSolver = "simplex",
        empty_cells: str = "impossible",
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
    _parameter_constraints = {
        "solver": Options(Solver, "MRC solver"),
        "formulation": Check(lambda v: formulation(v, "MRC"), bad="no-such-formulation", what="MRC formulation"),
        "lp_solver": Options(LPSolver, "LP solver"),
        "empty_cells": Check(lambda v: policy_name(v, FIRST_ORDER_POLICIES, "MRC"), bad="no-such-policy",
                             what="empty-cell policy"),
        "s": LAMBDA_SCALE,
        "coverage": COVERAGE,
        "n_max": Interval(low=1, integer=True),
        "eps": Interval(low=0),
        "k_max": Interval(low=0, integer=True),
        "tol": Interval(low=0, open_low=True),
        "bound": Interval(low=0, open_low=True),
        "time_limit": TIME_LIMIT,
        "features": FEATURES,
    }

    def check_params(self) -> None:
        """The declared constraints, then the formulation against MRC's statistics (first-order tables) and solver."""
        super().check_params()
        formulation(self.formulation, "MRC").check(FIRST_ORDER, "columns" if self.solver == "cg" else "one", "MRC")

    def fit(self, summary: Any) -> "MRC":
        """Fit μ from a Summary (first-order-with-label tables suffice). Returns self."""
        self.check_params()
        blocks = node_blocks(summary.codebook, features_param(self.features))
        problem = problem_from(summary, FeatureMap(blocks, [b.column for b in blocks]), self.s, self.coverage)
        sol = fit(problem, formulation(self.formulation, "MRC"), self._search(), self._options())
        # every feature's empty cells, not only the working set's
        ruled_out = empty_cells(problem.fmap, problem.tau, problem.lam)
        self._set_minimax_state(summary, sol, ruled_out, approximate=problem.approximate)
        self.selected_features_ = [problem.fmap.blocks[int(i)].name for i in sol.selected]
        self.solution_ = sol
        self._certify_labels(summary)
        return self

    def _search(self) -> One | Columns:
        """``solver="full"``: one LP; ``"cg"``: column generation priced by SELECT."""
        if self.solver == "full":
            return One()
        return Columns(SelectPricing(n_max=int(self.n_max), eps=float(self.eps)), k_max=int(self.k_max))

    def _options(self) -> FitOptions:
        return FitOptions(bound=self.bound, tol=self.tol, time_limit=self.time_limit, callback=self.callback,
                          lp_solver=self.lp_solver, empty=self.empty_cells)

    def _report(self) -> dict[str, Any]:
        return {**super()._report(), "active_features": list(self.selected_features_)}

    def working_set(self) -> list[str]:
        return list(self.selected_features_)

    def learn_lines(self, report: dict[str, Any]) -> list[str]:
        """Column generation's final working set (``solver="cg"``), then the R* trace."""
        out = []
        act = report.get("active_features")
        if act is not None and len(report.get("iterations", [])) > 0 and self.solver == "cg":
            shown = ", ".join(act[:10]) + (f", … ({len(act) - 10} more)" if len(act) > 10 else "")
            out.append(f"column generation: {len(act)} features in the final working set: {shown}")
        return out + super().learn_lines(report)

    # ---------------------------------------------------------- persistence
    def _state(self) -> dict[str, Any]:
        return {**super()._state(), "selected_features": list(self.selected_features_)}

    def _load_state(self, state: dict[str, Any]) -> None:
        if "map" in state:
            fmap = FeatureMap.from_dict(state["map"])
        else:  # the previous release stored the blocks at the top level
            blocks = [Block.from_dict(b) for b in state["blocks"]]
            fmap = FeatureMap(blocks, [b.column for b in blocks])
        self._load_minimax_state(state, fmap, "R*")
        self.selected_features_ = [str(v) for v in state.get("selected_features", [])]

