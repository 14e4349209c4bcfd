"""Feature selection from a Summary: robust Rényi group lasso or exact best-M by GBD.

Both selectors work on the Rényi least-squares problem of the summary's discrete features
(seed 004 §6): with Q_c, D_c from :func:`selection_problem` (intercept eliminated, one
column per one-vs-rest problem for K > 2), the *restricted objective* of a feature set S is

    c₀(S) = min_{Z : Z_i = 0, i ∉ S} tr(ZᵀQ_cZ) − tr(D_cᵀZ),   γ(S) = Σ_t q_t(1 − q_t) + c₀(S),

γ(S) the Rényi γ of a refit on S (binary: its certificate is 2γ(S), its HGR bound
sqrt(1 − γ(S)/(q(1−q)))). Robust Rényi feature selection (13) asks for argmin_{|S|≤M} c₀(S).

- ``method="group-lasso"``: Algorithm 1 — the path of min tr(ZᵀQ_cZ) − tr(D_cᵀZ) + λΣ‖Z_i‖
  (``norm="linf"``, the paper's h(|z|), or ``"l2"``) from λ_max down; λ is picked

  * with ``max_features=M``: the smallest path λ whose support has ≤ M features, refined by
    bisection towards exactly M when the grid jumps past it;
  * without it, by the summary-only **generalized cross-validation** criterion
    GCV(S) = γ(S)/(1 − df(S)/n)², df(S) = 1 + rank(Q_{c,SS}) — the classical GCV of the
    least-squares refit, computable from n, Q and d alone (no held-out rows exist).

- ``method="gbd"``: exact min_{|S|≤M} c_g(S) with the ridge ‖Z‖²/g (default g = 100: a
  shrinkage of 0.01 in probability units, against ≤ 0.25 for an indicator's variance), by
  :func:`marg.learners.selection.gbd.gbd`, warm-started with cuts at the supports of the group-lasso path;
  reports lower/upper bounds and the certified gap. g trades cut strength for bias: the
  cut overstates a feature's gain by about a factor (1 + g·residual variance), so a small
  g converges fast and a large g (a nearly unridged objective) can need many iterations.
  ``feature_cost`` switches to FSP-λ (cost per selected feature).

The result names the selected features; the caller refits its learner on them
(e.g. ``RenyiClassifier(features=result.selected)``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from marg.errors import InputError

from ..features.quadratic import discrete_blocks, label_contrast, paired_features, second_moments
from .gbd import gbd, restricted_value
from .group_lasso import PathPoint, group_lasso, group_lasso_path
from .group_norms import NORMS, group_norms

__all__ = ["SelectionProblem", "SelectionResult", "selection_problem", "select_features", "gcv"]

METHODS = ("group-lasso", "gbd")
DEFAULT_G = 100.0


@dataclass
class SelectionProblem:
    """The arrays the selectors work on.

    Attributes
    ----------
    Qc : ndarray, shape (M, M)
        Q − ppᵀ over the candidate features' one-hot columns.
    Dc : ndarray, shape (M, T)
        d^t − (2q_t − 1)p for each binary problem t (T = 1 binary, K one-vs-rest).
    sizes : list of int
        Level counts of the candidates, in order.
    names : list of str
        Candidate feature names (codebook order).
    const : float
        Σ_t q_t(1 − q_t), so γ(S) = const + c₀(S).
    n : float
        Rows behind the summary.
    """

    Qc: np.ndarray
    Dc: np.ndarray
    sizes: list[int]
    names: list[str]
    const: float
    n: float

    def objective(self, support: Sequence[int], g: float = math.inf) -> float:
        """c_g(S) (c₀ for g = inf) for groups ``support``."""
        return restricted_value(self.Qc, self.Dc, self.sizes, support, g)[0]

    def df(self, support: Sequence[int]) -> int:
        """1 + rank(Q_{c,SS}): parameters of one binary least-squares refit on S."""
        off = np.concatenate([[0], np.cumsum(self.sizes)])
        idx = [j for i in support for j in range(off[i], off[i + 1])]
        if not idx:
            return 1
        lam = np.linalg.eigvalsh(self.Qc[np.ix_(idx, idx)])
        return 1 + int(np.sum(lam > 1e-10 * max(lam.max(), 1e-300)))


def selection_problem(summary: Any, candidates: Sequence[str] | None = None) -> SelectionProblem:
    """Build Q_c, D_c from a Summary (the features whose pair tables are all present —
    :func:`~marg.learners.features.quadratic.paired_features`: every feature after a
    ``--stats all`` release, the requested ones after the two-round protocol — or ``candidates``).

    Raises InputError naming a raw numeric candidate (no pair statistics exist for it) and,
    through :func:`marg.learners.features.quadratic.second_moments`, a missing pair table.
    """
    cb = summary.codebook
    if candidates is None:
        names = paired_features(summary)
    else:
        if isinstance(candidates, str):
            raise InputError(f"candidates must be a list of feature names, got the string {candidates!r}")
        names = [str(c) for c in candidates]
        for nm in names:
            cb.index(nm)
        if len(set(names)) != len(names):
            dup = next(nm for nm in names if names.count(nm) > 1)
            raise InputError(f"candidate feature {dup!r} listed twice")
        names = sorted(names, key=cb.index)
    if not names:
        raise InputError("feature selection needs at least one candidate feature")
    for nm in names:
        if not cb.feature(nm).is_discrete:
            raise InputError(
                f"feature selection works on discrete features' pair tables; {nm!r} is raw numeric "
                "(bin it, or pass the discrete features as candidates)"
            )
    sub = summary if names == list(cb.feature_names) else summary.restrict(names)
    Q = second_moments(sub)
    p = np.diag(Q).copy()
    K = summary.n_classes
    prior = np.asarray(summary.prior, dtype=np.float64)
    positives = [1] if K == 2 else list(range(K))
    cols = []
    const = 0.0
    for c in positives:
        d = label_contrast(sub, c if K > 2 else None)
        q = float(prior[c])
        cols.append(d - (2.0 * q - 1.0) * p)
        const += q * (1.0 - q)
    return SelectionProblem(
        Qc=Q - np.outer(p, p),
        Dc=np.column_stack(cols),
        sizes=[int(b.size) for b in discrete_blocks(sub.codebook)],
        names=names,
        const=const,
        n=float(summary.n),
    )


def gcv(problem: SelectionProblem, support: Sequence[int]) -> float:
    """GCV(S) = γ(S)/(1 − df(S)/n)² (inf when df ≥ n)."""
    gam = problem.const + problem.objective(support)
    df = problem.df(support)
    if df >= problem.n:
        return math.inf
    return gam / (1.0 - df / problem.n) ** 2


@dataclass
class SelectionResult:
    """What a selector chose and why.

    Attributes
    ----------
    selected : list of str
        Chosen features (codebook order).
    method : {"group-lasso", "gbd"}
    objective : float
        c₀(selected): the restricted Rényi objective (no ridge).
    gamma : float
        γ(selected) = Σ_t q_t(1−q_t) + c₀ (binary: the refit's certificate is 2γ).
    status : str
        Group lasso: "max_features" or "gcv"; GBD: "optimal", "time_limit" or "iteration_limit".
    lam : float or None
        The chosen λ (group lasso).
    ridge_objective : float or None
        c_g(selected), the value GBD minimises.
    lower_bound, upper_bound, gap : float or None
        GBD's certified bounds on min c_g and their gap.
    g : float or None
        GBD's ridge parameter.
    path : list of dict
        Group lasso: one record per λ (lam, n_active, active names, entered names,
        smooth part, penalty, kkt). GBD: the per-iteration bounds, after the group-lasso
        warm-start path.
    seconds : float
    """

    selected: list[str]
    method: str
    objective: float
    gamma: float
    status: str
    lam: float | None = None
    ridge_objective: float | None = None
    lower_bound: float | None = None
    upper_bound: float | None = None
    gap: float | None = None
    g: float | None = None
    path: list[dict] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (plain types)."""
        out: dict[str, Any] = {
            "method": self.method,
            "selected": list(self.selected),
            "objective": float(self.objective),
            "gamma": float(self.gamma),
            "status": self.status,
            "seconds": float(self.seconds),
            "path": self.path,
        }
        for k in ("lam", "ridge_objective", "lower_bound", "upper_bound", "gap", "g"):
            v = getattr(self, k)
            if v is not None:
                out[k] = float(v)
        return out

    def learn_report(self) -> dict[str, Any]:
        """The keys the selection adds to ``marg learn --json`` (and the model file's report):
        ``features``/``selected``, ``selection`` (method, status, objective, λ, the group-lasso
        path's λ, size and entering features) and, for GBD, its ``gap`` and bounds."""
        sel = {"method": self.method, "status": self.status, "objective": self.objective, "lambda": self.lam,
               "path": [{"lam": p["lam"], "n_active": p["n_active"], "entered": p["entered"]}
                        for p in self.path if self.method == "group-lasso" and "lam" in p]}
        out: dict[str, Any] = {"features": list(self.selected), "selected": list(self.selected), "selection": sel}
        if self.method == "gbd":
            out["gap"] = self.gap
            sel.update(lower_bound=self.lower_bound, upper_bound=self.upper_bound)
        return out


def _path_records(problem: SelectionProblem, path: list) -> list[dict]:
    recs, seen = [], set()
    for pt in path:
        act = [problem.names[i] for i in pt.active]
        entered = [nm for nm in act if nm not in seen]
        seen |= set(act)
        recs.append({
            "lam": float(pt.lam), "n_active": len(act), "active": act, "entered": entered,
            "smooth": float(pt.smooth), "penalty": float(pt.penalty), "kkt": float(pt.kkt),
        })
    return recs


def select_features(
    summary: Any,
    method: str = "group-lasso",
    max_features: int | None = None,
    *,
    norm: str = "linf",
    candidates: Sequence[str] | None = None,
    n_lambdas: int = 50,
    lambda_min_ratio: float = 1e-3,
    tol: float = 1e-8,
    g: float | None = None,
    feature_cost: float | Sequence[float] | None = None,
    time_limit: float = 60.0,
    max_iter: int = 500,
    gap_tol: float = 1e-6,
    warm_start: bool = True,
    problem: SelectionProblem | None = None,
    callback: Callable[[dict], None] | None = None,
) -> SelectionResult:
    """Select features from a Summary (never rows).

    Parameters
    ----------
    summary : Summary
        Needs the pair tables of the candidates (``--stats all`` or their pairs).
    method : {"group-lasso", "gbd"}
    max_features : int, optional
        M. Required for GBD unless ``feature_cost`` is given; for the group lasso, absent
        means "choose λ by GCV".
    norm : {"linf", "l2"}
        Group norm of the group lasso (also for GBD's warm-start path).
    candidates : list of str, optional
        Restrict the search to these features.
    n_lambdas, lambda_min_ratio, tol
        Group-lasso path grid and KKT tolerance.
    g : float, optional
        GBD ridge parameter (default 100).
    feature_cost : float or list of float, optional
        GBD FSP-λ: cost per selected feature.
    time_limit, max_iter, gap_tol
        GBD stopping rules.
    warm_start : bool
        Seed GBD with cuts at the group-lasso path's supports.
    problem : SelectionProblem, optional
        Precomputed :func:`selection_problem` (to reuse across calls).
    callback : callable, optional
        Progress: called with each path / iteration record.

    Returns
    -------
    SelectionResult
    """
    t0 = time.perf_counter()
    if method not in METHODS:
        raise InputError(f"unknown selection method {method!r} (expected 'group-lasso' or 'gbd')")
    if norm not in NORMS:
        raise InputError(f"unknown group norm {norm!r} (expected 'linf' or 'l2')")
    if max_features is not None:
        if isinstance(max_features, bool) or int(max_features) != max_features or max_features < 1:
            raise InputError(f"max_features must be a positive integer, got {max_features!r}")
        max_features = int(max_features)
    P = problem if problem is not None else selection_problem(summary, candidates)
    p = len(P.sizes)

    def path_cb(pt: Any) -> None:
        if callback is not None:
            callback({"stage": "path", "lam": float(pt.lam), "n_active": len(pt.active)})

    if method == "group-lasso":
        path = group_lasso_path(P.Qc, P.Dc, P.sizes, n_lambdas=n_lambdas, lambda_min_ratio=lambda_min_ratio,
                                norm=norm, max_features=max_features, tol=tol, keep_coef=True, callback=path_cb)
        if max_features is not None:
            ok = [pt for pt in path if len(pt.active) <= max_features]
            chosen = ok[-1]
            over = next((pt for pt in path if len(pt.active) > max_features), None)
            if over is not None and len(chosen.active) < max_features:
                lo_l, hi_l, Zw = over.lam, chosen.lam, chosen.Z  # λ_lo gives too many
                for _ in range(30):
                    mid = math.sqrt(lo_l * hi_l)
                    Zm, info = group_lasso(P.Qc, P.Dc, P.sizes, mid, norm, Z0=Zw, tol=tol)
                    k = len(info["active"])
                    if k > max_features:
                        lo_l = mid
                    else:
                        hi_l, Zw = mid, Zm
                        if k > len(chosen.active):
                            gn = group_norms(Zm, P.sizes, norm)
                            chosen = PathPoint(mid, tuple(info["active"]), gn,
                                               float(np.sum(Zm * (P.Qc @ Zm)) - np.sum(P.Dc * Zm)),
                                               float(gn.sum()), info["iterations"], info["kkt"], Zm)
                        if k == max_features:
                            break
            status = "max_features"
        else:
            best, chosen = math.inf, path[0]
            seen: dict[tuple, float] = {}
            for pt in path:
                if pt.active not in seen:
                    seen[pt.active] = gcv(P, pt.active)
                if seen[pt.active] < best:
                    best, chosen = seen[pt.active], pt
            status = "gcv"
        S = list(chosen.active)
        obj = P.objective(S)
        return SelectionResult(
            selected=[P.names[i] for i in S], method=method, objective=obj, gamma=P.const + obj, status=status,
            lam=float(chosen.lam), path=_path_records(P, path), seconds=time.perf_counter() - t0,
        )

    # ---- GBD
    if max_features is None and feature_cost is None:
        raise InputError("GBD needs max_features (best-M) or feature_cost (penalized variant)")
    gg = float(DEFAULT_G if g is None else g)
    if not (gg > 0) or not math.isfinite(gg):
        raise InputError(f"GBD ridge parameter g must be finite and > 0, got {g!r}")
    warm: list[tuple[int, ...]] = []
    records: list[dict] = []
    if warm_start and p > 0:
        path = group_lasso_path(P.Qc, P.Dc, P.sizes, n_lambdas=n_lambdas, lambda_min_ratio=lambda_min_ratio,
                                norm=norm, max_features=max_features, tol=max(tol, 1e-7), callback=path_cb)
        for pt in path:
            sup = pt.active
            if max_features is not None and len(sup) > max_features:
                # a feasible support too: the max_features largest groups of the point
                sup = tuple(sorted(sorted(sup, key=lambda i: -pt.group_norms[i])[:max_features]))
            for cand in {pt.active, sup}:
                if cand and cand not in warm:
                    warm.append(cand)
        records = _path_records(P, path)
    elapsed = time.perf_counter() - t0

    def it_cb(rec: dict) -> None:
        if callback is not None:
            callback({"stage": "gbd", **rec})

    res = gbd(P.Qc, P.Dc, P.sizes, max_features=max_features, g=gg, feature_cost=feature_cost,
              warm_supports=warm, time_limit=max(0.0, time_limit - elapsed), max_iter=max_iter,
              gap_tol=gap_tol, callback=it_cb)
    S = list(res.support)
    obj = P.objective(S)
    hist = [{"stage": "gbd", **h} for h in res.history]
    return SelectionResult(
        selected=[P.names[i] for i in S], method=method, objective=obj, gamma=P.const + obj, status=res.status,
        ridge_objective=P.objective(S, gg), lower_bound=res.lower_bound, upper_bound=res.upper_bound,
        gap=res.gap, g=gg, path=[{"stage": "path", **r} for r in records] + hist,
        seconds=time.perf_counter() - t0,
    )
