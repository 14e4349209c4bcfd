"""The DCC-style pairwise classifier: the minimax engine on node and pair indicators, plus a structure strategy.

The feature map adds, for every edge (i, j) of a graph over the discrete features, the pair
indicators 1{x_i = a, x_j = b} (:class:`marg.learners.features.pairwise.PairwiseFeatureMap`),
with τ from the pair-with-label tables N[x_i, x_j, y]. The learner solves the 0-1 minimax
problem of :mod:`marg.learners.minimax.problem` over the WHOLE codebook domain; with λ = 0,
R* is the largest Bayes error — the worst-case error of the randomized rule (6) — over all
distributions whose (X_i, Y) and (X_i, X_j, Y) marginals on the edges equal the released
ones: the 0-1-loss version of the Discrete Chebyshev Classifier (Eban, Mezuman, Globerson,
ICML 2014, which minimises the worst-case hinge loss over the marginals of all pairs).

Its own idea is the structure — which edges to use; everything else is the engine's one fit
(:func:`..minimax.fit.fit`: the problem from the Summary, a formulation, a search):

- ``structure="forest"``: the maximum-weight spanning forest on I(X_i; X_j | Y) (TAN /
  Chow–Liu, ``edge_weight="cmi"``) or on I(X_i, X_j; Y) (``"label"``)
  (:mod:`marg.learners.features.structure`), solved exactly (the ``forest`` formulation,
  :mod:`..minimax.pair_formulations`);
- ``greedy=True``: edges added while R* drops (:class:`..minimax.fit.Greedy`);
- ``structure="all"`` or a list of pairs: any graph; with a cycle the separation's max is
  replaced by its local-polytope bound (:mod:`..minimax.local`): R*_L ≥ R*, still a valid
  certificate, exact on a forest;
- ``loss="hinge"`` (binary labels): the published DCC's worst-case hinge loss on the
  spanning forest (:mod:`marg.learners.classifiers.dcc_hinge`), = 2·R*.

λ covers the nodes and EVERY candidate pair (the structure is chosen from the same tables);
the gauge at λ = 0 and the empty cells are the problem's layout
(:func:`..minimax.from_summary.problem_from`) and the formulation's finish.
"""

from __future__ import annotations

import time
import weakref
from typing import Any, Callable, Literal, Sequence

import numpy as np

from marg.errors import InputError, option

from ..estimator.base import FEATURES, features_param
from .dcc_hinge import HINGE
from ..features.blocks import node_blocks
from ..features.pairwise import PairwiseFeatureMap
from ..minimax.empty_cells import POLICIES
from ..minimax.fit import FitOptions, Greedy, One, fit
from ..minimax.forest_models import FORMULATIONS
from ..minimax.registry import Formulation, Statistics, check
from ..minimax.from_summary import problem_from
from .minimax_rules import MinimaxRules
from ..core.params import COVERAGE, LAMBDA_SCALE, TIME_LIMIT, Check, Interval, Options
from ..features.structure import check_structure, graph_edges, max_spanning_forest, node_pair_weights

Loss = Literal["01", "hinge"]
EdgeWeight = Literal["cmi", "label"]


class DCC(MinimaxRules):
    """DCC-style minimax classifier: the 0-1 MRC over node and pairwise indicators.

    Parameters
    ----------
    s : float or None
        None: λ calibrated to simultaneous ``coverage`` (Bonferroni over the entries of
        EVERY candidate pair); a number: λ = s·std/√n (+ the noise term); ``s=0`` on exact
        summaries is the pure DCC.
    coverage : float
        Simultaneous coverage of the box τ ± λ.
    max_edges : int or None
        Cap on the number of edges.
    greedy : bool
        False: maximum spanning forest on ``edge_weight``. True: greedy R*-driven edges.
    greedy_tol : float
        Greedy search stops when the best edge lowers R* by ``greedy_tol`` or less.
    greedy_candidates : int or None
        Edges solved exactly per greedy step: among those the current worst-case
        distribution violates, the ones of largest I(X_i, X_j; Y) (None: all).
    edge_weight : {"cmi", "label"}
        Forest weights: I(X_i; X_j | Y) (TAN / Chow–Liu) or I(X_i, X_j; Y).
    solver : {"compact", "rows"}
        The exact forest epigraph LP (message variables), or row generation with the DP oracle.
    empty : {"evidence", "free", "impossible"}
        What the rule does in an empty cell of some labels (R* is the same for all three,
        :mod:`..minimax.empty_cells`).
    alpha : float
        Family-wise significance level of ``empty="evidence"``.
    extra_rows : int or None
        ``solver="rows"``: extra rows per label subset and round from the constrained
        maxima x_i = v (None: all distinct ones).
    features : sequence of str or None
        Features used (None = all).
    tol : float
        Relative row-violation tolerance of row generation.
    bound : float
        Initial box on |μ| (enlarged automatically while it binds).
    time_limit : float or None
        Seconds for each LP solve by row generation (``converged_`` False on expiry).
    callback : callable or None
        Progress: called with a dict per row-generation round and greedy step. Not saved.
    loss : {"01", "hinge"}
        ``"hinge"`` (binary labels; a forest, spanning or given; compact LP): the score f minimising
        the worst-case hinge loss; ``predict`` is sign f (ties to naive Bayes),
        ``predict_proba`` h(1|x) = (1 + clip(f, −1, 1))/2, the certificate the worst-case
        hinge loss (= 2·R*).
    structure : {"forest", "all"} or sequence of (str, str)
        ``"forest"``: the spanning forest on ``edge_weight`` (or ``greedy``). ``"all"``:
        every pair with a released pair-with-label table (with ``max_edges``: the
        ``max_edges`` pairs of largest ``edge_weight``). A sequence: those feature pairs.
        On a graph with a cycle the certificate is R*_L ≥ R* and ``relaxed_`` is True;
        ``predict_proba`` then uses the certified bound φ_L(μ) ≥ φ(μ). Not with ``greedy``; with
        a cycle not with ``solver="rows"`` or ``loss="hinge"`` (:mod:`..minimax.registry`).

    Attributes
    ----------
    mu_ : ndarray (K, D)
    phi_, nu_ : float
    certificate_ : Certificate
        R*, R*_L (``relaxed_``) or the worst-case hinge loss; ``worst_case_error_`` its value.
    f_, theta_ : ndarray
        ``loss="hinge"`` only: the score coefficients (D,) (``mu_`` = [−f/2, f/2]) and the
        dual prices θ (2, D) of the moment rows.
    iterations_ : list of float
        Greedy: R* of the first-order model and after each added edge (non-increasing).
        Otherwise: [R*] (compact LP), or the running minimum of R(μ) over the rounds.
    edges_ : list of (str, str)
    relaxed_ : bool
    edge_weights_ : list of float
        The ``edge_weight`` (nats) of each edge.
    impossible_, ruled_out_ : ndarray of bool (K, D)
        The empty cells (τ + λ = 0) of the model's map.
    seconds_ : float
        The fit's wall time, structure included.
    classes_, prior_, nb_logp_, map_, feature_names_in_, tau_, lambda_, row_rounds_, n_rows_, converged_, fingerprint_,
    n_ : see MRC
    """

    learner = "dcc"
    display_name = "a DCC"
    learn_options = ("s", "coverage", "greedy", "max_edges", "edge_weight", "structure", "loss")
    remedies = ("select features (--select)", "release fewer pair tables (export --pairs)")

    def __init__(
        self,
        s: float | None = None,
        coverage: float = 0.95,
        max_edges: int | None = None,
        greedy: bool = False,
        greedy_tol: float = 1e-4,
        greedy_candidates: int | None = 8,
        edge_weight: EdgeWeight = "cmi",
        solver: str = "compact",
        empty: str = "evidence",
        alpha: float = 0.05,
        extra_rows: int | None = 0,
        features: Sequence[str] | None = None,
        tol: float = 1e-9,
        bound: float = 1e3,
        time_limit: float | None = None,
        callback: Callable[[dict], None] | None = None,
        loss: Loss = "01",
        structure: str | Sequence[tuple[str, str]] = "forest",
    ):
        self.s = s
        self.coverage = coverage
        self.max_edges = max_edges
        self.greedy = greedy
        self.greedy_tol = greedy_tol
        self.greedy_candidates = greedy_candidates
        self.edge_weight = edge_weight
        self.solver = solver
        self.empty = empty
        self.alpha = alpha
        self.extra_rows = extra_rows
        self.features = features
        self.tol = tol
        self.bound = bound
        self.time_limit = time_limit
        self.callback = callback
        self.loss = loss
        self.structure = structure

    # ------------------------------------------------------------------ fit
    _parameter_constraints = {
        "s": LAMBDA_SCALE,
        "coverage": COVERAGE,
        "max_edges": Interval(low=0, integer=True, none_ok=True),
        "greedy_tol": Interval(low=0),
        "greedy_candidates": Interval(low=1, integer=True, none_ok=True),
        "edge_weight": Options(EdgeWeight, "edge weight"),
        "solver": Options(FORMULATIONS, "DCC solver"),
        "empty": Options(POLICIES, "empty-cell policy"),
        "alpha": Interval(0, 1, open_low=True, open_high=True),
        "extra_rows": Interval(low=0, integer=True, none_ok=True),
        "tol": Interval(low=0, open_low=True),
        "bound": Interval(low=0, open_low=True),
        "time_limit": TIME_LIMIT,
        "loss": Options(Loss, "DCC loss"),
        "structure": Check(check_structure, bad="chain", what="structure"),
        "features": FEATURES,
    }

    def check_params(self) -> None:
        """The declared constraints, then the formulation (:mod:`..minimax.registry`) against the structure."""
        super().check_params()
        self._formulation()
        if self.greedy and self.structure != "forest":
            raise InputError(f"{option('greedy', True)} chooses its own edges: it needs "
                             f"{option('structure', 'forest')}")
        if self.loss == "hinge" and self.solver == "rows":
            raise InputError(f"{option('loss', 'hinge')} is the 'hinge' formulation, one compact LP: "
                             f"{option('solver', 'rows')} does not apply")

    def _formulation(self, n_classes: int | None = None, given: Sequence[tuple[Any, Any]] | None = None) -> Formulation:
        """The formulation of ``loss``, ``solver`` and the structure's pair graph (``given`` edges once known)."""
        names = (("hinge",) if self.loss == "hinge" else ("forest-rows",) if self.solver == "rows"
                 else ("forest", "local"))
        return check(names, Statistics.of_structure(self.structure, given, n_classes),
                     "greedy" if self.greedy else "one", "DCC")

    def fit(self, summary: Any) -> "DCC":
        """Fit the structure and μ from a Summary (first-order and pair-with-label tables). Returns self."""
        self.check_params()
        t0 = time.perf_counter()
        blocks = node_blocks(summary.codebook, features_param(self.features))
        shared = _shared_work(summary)
        names = tuple(b.name for b in blocks)
        if ("weights", names) not in shared:
            shared["weights", names] = node_pair_weights(summary, blocks)
        cmi, label_info = shared["weights", names]
        weights = cmi if self.edge_weight == "cmi" else label_info
        key: tuple = ("problem", names, self.s, self.coverage)
        if key not in shared:
            shared[key] = problem_from(summary, PairwiseFeatureMap(blocks, [b.column for b in blocks], sorted(weights)),
                                       self.s,
                                       self.coverage)
        problem = shared[key]
        edges = (graph_edges(self.structure, problem.fmap.blocks, weights, self.max_edges) if self.structure != "forest"
                 else None)
        how = self._formulation(int(summary.n_classes), edges)  # the statistics it lacks, in one line
        if self.greedy:  # pairs that tell most about Y first
            search: One | Greedy = Greedy({e: (-label_info[e], e) for e in label_info}, self.max_edges, self.greedy_tol,
                                          self.greedy_candidates)
        else:
            search = One(tuple(edges if edges is not None
                               else max_spanning_forest(len(blocks), weights, self.max_edges)))
        # the same LP for the same edges: two DCCs whose edge weights chose the same forest share one solve
        params = {k: v for k, v in self.get_params().items() if k not in ("edge_weight", "callback")}
        key = ("fit", names, repr(sorted(params.items())), repr(search))
        if self.callback is not None or key not in shared:  # a progress callback sees its own solve
            shared[key] = fit(problem, how, search,
                              FitOptions(bound=self.bound, tol=self.tol, time_limit=self.time_limit,
                                                               callback=self.callback, extra_rows=self.extra_rows,
                                                               empty=self.empty, alpha=self.alpha))
        sol = shared[key]
        self._set_minimax_state(summary, sol, approximate=problem.approximate)
        self.edges_ = sol.fmap.edge_names
        self.relaxed_ = sol.kind == "R*_L"
        self.edge_weights_ = [float(weights[e]) for e in sol.edges]
        if how is HINGE:
            self.f_, self.theta_, self.nu_ = sol.read.f, sol.read.theta, sol.read.nu
        self._certify_labels(summary)
        self.seconds_ = time.perf_counter() - t0
        return self

    # -------------------------------------------------------------- predict
    def margin(self, X: np.ndarray) -> np.ndarray:
        """Score difference of label 1 over label 0, (n,): f(x) for ``loss="hinge"`` (binary only)."""
        F = self.decision_function(X)
        if F.shape[1] != 2:
            raise InputError(f"margin needs a binary label, the model has {F.shape[1]} classes")
        return F[:, 1] - F[:, 0]

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """Randomized rule (6), (n, K); ``loss="hinge"``: h(1|x) = (1 + clip(f(x), −1, 1))/2.

        The hinge rule's expected 0-1 loss at (x, y) is min(1, max(0, 1 − s_y f(x)))/2 ≤ the
        hinge loss, so the certificate covers it too."""
        if self.loss == "hinge":
            self._check_fitted()
            p1 = 0.5 * (1.0 + np.clip(self.margin(X), -1.0, 1.0))
            return np.column_stack([1.0 - p1, p1])
        return super().predict_proba(X)

    def _report(self) -> dict[str, Any]:
        return {**super()._report(), "edges": [list(e) for e in self.edges_], "relaxed": bool(self.relaxed_)}

    def pairs(self) -> list[tuple[str, str]]:
        return [tuple(e) for e in self.edges_]

    def start_note(self) -> str | None:
        if self.structure == "all":
            return "solving the local-polytope LP over every released pair (can take a while with many features)"
        return None

    def learn_lines(self, report: dict[str, Any]) -> list[str]:
        """The forest's (or graph's) edges, then the R* trace."""
        kind = "graph (local-polytope bound)" if report.get("relaxed") else "forest"
        edges = report.get("edges", [])
        return ([f"{kind}: {len(edges)} edges: " + ", ".join(f"{a}–{b}" for a, b in edges)]
                + super().learn_lines(report))

    # ---------------------------------------------------------- persistence
    @classmethod
    def _param_from_json(cls, name: str, value: Any) -> Any:
        if name == "structure" and not isinstance(value, str):
            return [(str(a), str(b)) for a, b in value]
        return value

    def _state(self) -> dict[str, Any]:
        return {**super()._state(), "relaxed": bool(self.relaxed_), "edges": [list(e) for e in self.edges_],
                "edge_weights": list(self.edge_weights_)}

    def _load_state(self, state: dict[str, Any]) -> None:
        pmap = PairwiseFeatureMap.from_dict(state["map"])
        relaxed = bool(state.get("relaxed", False))
        self._load_minimax_state(state, pmap, "hinge" if self.loss == "hinge" else ("R*_L" if relaxed else "R*"))
        self.edges_ = pmap.edge_names
        self.relaxed_ = relaxed
        self.edge_weights_ = [float(w) for w in state.get("edge_weights", [np.nan] * pmap.n_edges)]
        if self.loss == "hinge":
            if len(self.classes_) != 2:
                raise InputError("a hinge-loss DCC model must have two classes")
            self.f_ = self.mu_[1] - self.mu_[0]
            self.nu_ = float("nan")  # not stored



_SHARED: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()


def _shared_work(summary: Any) -> dict:
    """What DCC fits on the same Summary object share while it lives: the pair weights (both kinds are computed
    together), the problem (τ, the box) of the same features, s and coverage, and the solution of the same LP (same
    parameters but the edge weight, same search: e.g. the automatic choice's ``edge_weight="label"`` and ``"cmi"``
    candidates when both choose the same forest, on all sites and on every leave-one-site-out fold). A Summary is
    not changed after it is built; the entries go with it."""
    try:
        return _SHARED.setdefault(summary, {})
    except TypeError:  # not weakly referable: nothing shared
        return {}
