"""Certificates for any rule: the worst-case error of a FIXED classifier over the uncertainty set.

For a classifier h and the box U = {p : |E_pΦ − τ| ≤ λ} over the whole codebook domain,

    W(h) = max_{p∈U} Σ_{x,y} p(x, y)·1{h(x) ≠ y}
         = min_μ −τᵀμ + λᵀ|μ| + max_{(x,y)} [Φ(x,y)ᵀμ + 1{h(x) ≠ y}]      (LP duality)

— the MRC LP with the loss moved inside the max (so W(h) ≥ R* always: MRC is minimax). The
inner max separates per label y into the larger of max_{x: h(x)=y} Φ(x,y)ᵀμ and
1 + max_{x: h(x)≠y} Φ(x,y)ᵀμ. For a rule that is an argmax of scores additive in one-hot
features (:class:`LinearRule`: Rényi's MAP rule, naive Bayes, a linear vote) each part is
a maximisation of an additive (or, with pairwise Φ, pairwise) objective under linear
constraints on the scores: a small MILP, solved exactly by HiGHS (:class:`FixedRuleOracle`).
Row generation on the one model then solves the outer LP (:mod:`.fixed_rule_fit`: W(h) is one
fit, ``certify_rule``), and the certificate is evaluated at each round's μ with the MILPs'
proven upper bounds (dual bounds), so it is a valid upper bound on W(h) whatever the LP's
tolerance. Ties between scores (within ``tie_tol``) count both
ways — the rule's region of each label is over-approximated — which can only raise W.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np
from numpy.typing import NDArray

from marg.errors import InputError, SolverError
from marg.lp import INF, HighsLP, Status

from ..features.blocks import FeatureMap
from .layout import flat_index
from .separation import Cut


class LinearRule:
    """h(x) = argmax_c Σ_i W[c, col_i(x_i)] + b[c] over a node map (lowest class index on ties).

    Parameters
    ----------
    fmap : FeatureMap
        The rule's features (one-hot blocks; raw numeric blocks enter linearly).
    weights : ndarray (K, D)
        Per-class score of each Ψ column of ``fmap``.
    intercept : ndarray (K,)
    """

    def __init__(self, fmap: FeatureMap, weights: np.ndarray, intercept: np.ndarray):
        self.fmap = fmap
        self.weights = np.asarray(weights, dtype=np.float64)
        self.intercept = np.asarray(intercept, dtype=np.float64).ravel()
        K = self.intercept.size
        if K < 2 or self.weights.shape != (K, fmap.dim):
            raise InputError(f"a linear rule needs weights (K, {fmap.dim}) and K >= 2 intercepts, got "
                             f"{self.weights.shape} and {K}")
        if not (np.all(np.isfinite(self.weights)) and np.all(np.isfinite(self.intercept))):
            raise InputError("a linear rule's weights and intercepts must be finite")

    @property
    def n_classes(self) -> int:
        return int(self.intercept.size)

    def scores(self, X: np.ndarray) -> np.ndarray:
        return self.fmap.scores(X, self.weights) + self.intercept[None, :]

    def predict(self, X: np.ndarray) -> NDArray[np.intp]:
        labels: NDArray[np.intp] = np.argmax(self.scores(X), axis=1)
        return labels


class _Layout:
    """MILP columns for the union of the uncertainty map's and the rule's features."""

    def __init__(self, umap: Any, rule: LinearRule):
        nodes = umap.nodes
        feats: dict[int, Any] = {}
        for b in list(nodes.blocks) + list(rule.fmap.blocks):
            have = feats.get(b.column)
            if have is not None and (have.kind != b.kind or have.size != b.size):
                raise InputError(f"feature {b.name!r} has different layouts in the rule and the uncertainty set")
            feats.setdefault(b.column, b)
        self.columns = sorted(feats)
        self.blocks = [feats[c] for c in self.columns]
        self.var: dict[int, np.ndarray] = {}  # codebook column -> MILP column(s): levels (one-hot) or [v] (numeric)
        n = 0
        for c, b in zip(self.columns, self.blocks):
            k = b.size if b.kind == "onehot" else 1
            self.var[c] = np.arange(n, n + k)
            n += k
        self.edge_var: list[np.ndarray] = []
        for e, (i, j) in enumerate(umap.edges):
            mi, mj = umap.edge_shape[e]
            self.edge_var.append(np.arange(n, n + mi * mj))
            n += mi * mj
        self.n = n
        self.umap = umap

    def linear(self, fmap: FeatureMap, coef: np.ndarray) -> np.ndarray:
        """MILP objective/row coefficients (n,) of Σ_j coef[j]·Ψ_j(x) for a node map's columns."""
        out = np.zeros(self.n)
        for b in fmap.blocks:
            out[self.var[b.column]] += coef[b.offset : b.offset + b.size]
        return out


class FixedRuleOracle:
    """Exact separation for W(h): per label y, max_x Φ(x, y)ᵀμ + 1{h(x) ≠ y} by HiGHS MILPs.

    One MILP per label and part, built once (the rule's constraints do not change) and
    re-solved with the objective of each μ: part A (h(x) = y: s_y − s_c ≥ −tie_tol for all
    c ≠ y) and parts B_c (h(x) = c ≠ y: s_c − s_y ≥ −tie_tol). ``last_upper`` holds, after
    each call, the proven upper bound on max_{x,y} [Φ(x,y)ᵀμ + loss] (the MILPs' dual bounds).

    Parameters
    ----------
    umap : FeatureMap or PairwiseFeatureMap
        The uncertainty set's feature map (Φ).
    rule : LinearRule
    tie_tol : float
        Score differences within this count as ties (both labels possible).
    time_limit : float or None
        Seconds per MILP solve.
    max_nodes : int or None
        Branch-and-bound nodes per MILP solve (a deterministic work budget; a MILP stopped
        there still gives its proven bound). None: no limit.
    stabilize : bool
        Also separate at the in-out point (fewer rounds, twice the MILPs per round).
    """

    def __init__(self, umap: Any, rule: LinearRule, tie_tol: float = 1e-9, time_limit: float | None = None,
                 stabilize: bool = False, max_nodes: int | None = None):
        self.umap = umap
        self.stabilize = bool(stabilize)
        self.rule = rule
        self.K = rule.n_classes
        self.D = umap.dim
        self.time_limit = time_limit
        self.max_nodes = max_nodes
        lay = _Layout(umap, rule)
        self.layout = lay
        self.models: list[list[tuple[int, HighsLP]]] = []  # per y: (predicted class, MILP)
        S = [lay.linear(rule.fmap, rule.weights[c]) for c in range(self.K)]
        for y in range(self.K):
            parts = []
            for pred in range(self.K):
                others = [c for c in range(self.K) if c != pred]
                rows = [(S[pred] - S[c], -tie_tol - (rule.intercept[pred] - rule.intercept[c])) for c in others]
                parts.append((pred, self._milp(rows)))
            self.models.append(parts)
        self.last_upper = np.nan
        self.last_lower = np.nan
        self.deadline: float | None = None  # a time.perf_counter() value no MILP runs past (certify_rule's budget)
        self.center: np.ndarray | None = None
        self.center_value = np.inf

    def _milp(self, rule_rows: list[tuple[np.ndarray, float]]) -> HighsLP:
        lay = self.layout
        lp = HighsLP(solver="choose", presolve=None, mip_rel_gap=0.0, mip_abs_gap=1e-7,
                     mip_feasibility_tolerance=1e-9, primal_feasibility_tolerance=1e-9)
        if self.max_nodes is not None:
            lp.set_option("mip_max_nodes", int(self.max_nodes))
        lo = np.zeros(lay.n)
        hi = np.ones(lay.n)
        ints = []
        for c, b in zip(lay.columns, lay.blocks):
            v = lay.var[c]
            if b.kind == "onehot":
                ints.append(v)
            else:
                lo[v], hi[v] = b.lo, b.hi
        lp.add_cols(np.zeros(lay.n), lo, hi)
        if ints:
            lp.set_integer(np.concatenate(ints))
        R, C, V, L, U = [], [], [], [], []
        r = 0
        for c, b in zip(lay.columns, lay.blocks):
            if b.kind == "onehot":  # exactly one level
                v = lay.var[c]
                R += [np.full(v.size, r)]
                C += [v]
                V += [np.ones(v.size)]
                L.append(1.0)
                U.append(1.0)
                r += 1
        nodes = self.umap.nodes
        for e, (i, j) in enumerate(self.umap.edges):  # the pair's cells marginalise to its two levels
            mi, mj = self.umap.edge_shape[e]
            w = lay.edge_var[e].reshape(mi, mj)
            zi, zj = lay.var[nodes.blocks[i].column], lay.var[nodes.blocks[j].column]
            for a in range(mi):
                R += [np.full(mj + 1, r)]
                C += [np.concatenate([w[a], [zi[a]]])]
                V += [np.concatenate([np.ones(mj), [-1.0]])]
                L.append(0.0)
                U.append(0.0)
                r += 1
            for bb in range(mj):
                R += [np.full(mi + 1, r)]
                C += [np.concatenate([w[:, bb], [zj[bb]]])]
                V += [np.concatenate([np.ones(mi), [-1.0]])]
                L.append(0.0)
                U.append(0.0)
                r += 1
        for coef, low in rule_rows:
            nz = np.flatnonzero(coef)
            R += [np.full(nz.size, r)]
            C += [nz]
            V += [coef[nz]]
            L.append(low)
            U.append(INF)
            r += 1
        if r:
            import scipy.sparse as sp

            A = sp.csr_array((np.concatenate(V), (np.concatenate(R), np.concatenate(C))), shape=(r, lay.n))
            lp.add_rows_matrix(A, np.asarray(L), np.asarray(U))
        return lp

    def _objective(self, mu_y: np.ndarray) -> np.ndarray:
        """MILP coefficients of Φ(x, y)ᵀμ for μ[y] (D,) over the uncertainty map."""
        lay = self.layout
        c = lay.linear(self.umap.nodes, mu_y[: self.umap.nodes.dim])
        for e in range(len(self.umap.edges)):
            c[lay.edge_var[e]] += mu_y[self.umap.edge_columns(e)]
        return c

    def _assignment(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Ψ_U columns and values at a MILP solution (node levels, numeric values, edge cells)."""
        lay, um = self.layout, self.umap
        cols, vals = [], []
        level = {}
        for b in um.nodes.blocks:
            v = x[lay.var[b.column]]
            if b.kind == "onehot":
                a = int(np.argmax(v))
                level[b.column] = a
                cols.append(b.offset + a)
                vals.append(1.0)
            else:
                cols.append(b.offset)
                vals.append(float(v[0]))
        for e, (i, j) in enumerate(um.edges):
            a, bb = level[um.nodes.blocks[i].column], level[um.nodes.blocks[j].column]
            cols.append(int(um.edge_offset[e]) + a * um.edge_shape[e][1] + bb)
            vals.append(1.0)
        return np.asarray(cols, dtype=np.int64), np.asarray(vals)

    def _separate(self, mu: np.ndarray) -> tuple[list[Cut], float]:
        """Every part's best row at μ (K·K cuts at most) and the proven upper bound on the max."""
        mu = np.asarray(mu, dtype=np.float64).reshape(self.K, self.D)
        cuts: list[Cut] = []
        upper = -np.inf
        for y in range(self.K):
            obj = -self._objective(mu[y])  # HiGHS minimises
            for pred, lp in self.models[y]:
                loss = 0.0 if pred == y else 1.0
                lp.set_col_costs(np.arange(lp.n_cols), obj)
                deadline = None if self.time_limit is None else time.perf_counter() + self.time_limit
                if self.deadline is not None:
                    deadline = self.deadline if deadline is None else min(deadline, self.deadline)
                res = lp.solve(deadline)
                if res.status is Status.INFEASIBLE:
                    continue  # the rule never predicts ``pred`` (within the tie tolerance)
                if res.status is Status.LIMIT and not res.has_solution:
                    raise OutOfTime  # no row and no bound for this part: the round cannot be completed
                if res.status not in (Status.OPTIMAL, Status.LIMIT) or not res.has_solution:
                    raise SolverError("HiGHS failed on the fixed-rule separation MILP: "
                                      f"{res.message or res.status.value}")
                bound = (-res.dual_bound if np.isfinite(res.dual_bound) else -res.objective) + loss
                upper = max(upper, bound)
                cols, vals = self._assignment(res.x)
                cuts.append(Cut((flat_index(self.D, y, cols), vals), -loss, float(mu[y, cols] @ vals) + loss, (y,)))
        if not cuts:
            raise InputError("the rule predicts no class anywhere on the domain")
        return cuts, float(upper)

    def most_violated(self, mu: np.ndarray) -> list[Cut]:
        """The best row of every (label, predicted class) part at μ, plus those at the in-out point
        ½(μ_best + μ) (μ_best: the μ of the best certified value so far) with their violation at μ —
        valid rows that damp the oscillation of plain cutting planes."""
        mu = np.asarray(mu, dtype=np.float64).ravel()
        cuts, upper = self._separate(mu)
        self.last_upper = upper
        self.last_lower = float(max(c.violation for c in cuts))
        if self.stabilize and self.center is not None:
            mid, _ = self._separate(0.5 * (self.center + mu))
            for c in mid:
                idx, val = c.g
                cuts.append(c._replace(violation=float(mu[idx] @ val) - c.b))
        return cuts

    def recenter(self, mu: np.ndarray, value: float) -> None:
        """Record μ as the stability center when its certified value is the best so far."""
        if value < self.center_value:
            self.center_value, self.center = value, np.asarray(mu, dtype=np.float64).ravel().copy()

    def covering_cuts(self) -> list[Cut]:
        """Rows (x, y) that touch every level of every node of the uncertainty map (x_i = level min(t, m_i − 1))."""
        um = self.umap
        cuts = []
        sizes = [b.size if b.kind == "onehot" else 2 for b in um.nodes.blocks]
        for t in range(max(sizes) if sizes else 1):
            X = np.zeros((1, max((b.column for b in list(um.nodes.blocks) + list(self.rule.fmap.blocks)), default=-1)
                          + 1))
            for b in list(um.nodes.blocks) + list(self.rule.fmap.blocks):
                X[0, b.column] = min(t, b.size - 1) if b.kind == "onehot" else (b.lo if t == 0 else b.hi)
            pred = int(self.rule.predict(X)[0])
            psi = um.psi(X)[0]
            cols = np.flatnonzero(psi)
            for y in range(self.K):
                cuts.append(Cut((flat_index(self.D, y, cols), psi[cols]), -float(pred != y), np.nan, (y,)))
        return cuts


class OutOfTime(Exception):
    """The time budget ran out inside a separation round (caught by :func:`.fixed_rule_fit.certify_rule`)."""


__all__: Sequence[str] = ["LinearRule", "FixedRuleOracle"]
