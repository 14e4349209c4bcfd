"""A one-LP upper bound on a fixed rule's worst-case error: the Lagrangian relaxation of its separation.

:mod:`.fixed_rule` computes W(h) exactly by row generation with MILP separation — exact but
slow beyond small problems. Here the rule's constraints in each part of the separation,
max {Φ(x,y)ᵀμ : h(x) = p} (p the predicted class), are moved into the objective with
multipliers t ≥ 0 (weak duality)::

    max_{x: s_p(x) − s_c(x) ≥ −ε ∀c≠p} Φ(x,y)ᵀμ  ≤  max_x Φ(x,y)ᵀμ + Σ_{c≠p} t_c (s_p(x) − s_c(x) + ε),

and the right side — a max-sum over the uncertainty map's forest with potentials linear in
(μ, t) — is written exactly as linear constraints on message variables
(:func:`.forest_lp.forest_max_rows`). Minimising over μ and every part's t at once is ONE
LP whose optimum W_L satisfies W(h) ≤ W_L: a valid certificate, exact whenever the
Lagrangian relaxation is (e.g. a rule using one feature), computed as fast as the DCC's
forest LP. The rule's features must be nodes of the uncertainty map.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from marg.errors import InputError

from ..features.pairwise import PairwiseFeatureMap
from .fixed_rule import LinearRule
from .forest import ForestOracle
from .forest_lp import MuTerms, RowBuffer, forest_max_rows, one_shot_model


def _as_pairwise(umap: Any) -> PairwiseFeatureMap:
    if isinstance(umap, PairwiseFeatureMap):
        return umap
    return PairwiseFeatureMap(umap.blocks, [b.column for b in umap.blocks], [])


def certify_rule_lp(rule: LinearRule, umap: Any, tau: np.ndarray, lam: np.ndarray, tie_tol: float = 1e-9) -> float:
    """An upper bound W_L ≥ W(h) on ``rule``'s worst-case error over U = {p : |E_pΦ − τ| ≤ λ}
    (:func:`rule_lp_solution`'s value)."""
    return rule_lp_solution(rule, umap, tau, lam, tie_tol)[0]


def rule_lp_solution(rule: LinearRule, umap: Any, tau: np.ndarray, lam: np.ndarray,
                     tie_tol: float = 1e-9) -> tuple[float, np.ndarray]:
    """An upper bound W_L ≥ W(h) on ``rule``'s worst-case error over U = {p : |E_pΦ − τ| ≤ λ},
    and the μ (K, D) at which it is attained — a good point to evaluate W(h)'s dual at exactly
    (:func:`.fixed_rule_fit.certify_rule` ``start``): there the exact value is ≤ W_L.

    Parameters
    ----------
    rule : LinearRule
        Its features must be nodes of ``umap``.
    umap : FeatureMap or PairwiseFeatureMap
        The uncertainty set's map; its edges must form a forest.
    tau, lam : ndarray (K, D)
    tie_tol : float
        Score differences within this count as ties (both labels possible).

    Returns
    -------
    value : float
        W_L, clipped to [0, 1].
    mu : ndarray (K, D)

    Raises
    ------
    InconsistentStatistics
        If no distribution matches τ within λ (the LP is unbounded).
    """
    pm = _as_pairwise(umap)
    K = rule.n_classes
    D = pm.dim
    tau = np.asarray(tau, dtype=np.float64)
    lam = np.asarray(lam, dtype=np.float64)
    if tau.shape != (K, D) or lam.shape != tau.shape:
        raise InputError(f"tau and lam must have shape {(K, D)}, got {tau.shape} and {lam.shape}")
    # the rule's per-class score of every Ψ column of the uncertainty map (0 on edge cells)
    node_of = {b.column: b for b in pm.blocks}
    S = np.zeros((K, D))
    for b in rule.fmap.blocks:
        u = node_of.get(b.column)
        if u is None or u.kind != b.kind or u.size != b.size:
            raise InputError(f"the rule's feature {b.name!r} is not a node of the uncertainty set's map")
        S[:, u.offset : u.offset + u.size] = rule.weights[:, b.offset : b.offset + b.size]
    oracle = ForestOracle(pm, K)
    model = one_shot_model(tau, lam, np.arange(K * D), "the fixed-rule certificate LP")
    mt = MuTerms(model, D, [(y,) for y in range(K)])
    nvar = model.n_cols
    rows = RowBuffer()
    dead = np.zeros(D, dtype=bool)
    multipliers: list[np.ndarray] = []
    for y in range(K):
        for p in range(K):
            others = [c for c in range(K) if c != p]
            tcol = nvar + np.arange(len(others))
            nvar += len(others)
            multipliers.append(tcol)
            delta = [S[p] - S[c] for c in others]

            def entries(r: np.ndarray, cols: np.ndarray, vals: np.ndarray, y: int = y, tcol: np.ndarray = tcol,
                        delta: list[np.ndarray] = delta) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
                R, C, V = mt.entries(y, r, cols, vals)
                parts_r, parts_c, parts_v = [R], [C], [V]
                for t, dl in zip(tcol, delta):
                    v = vals * dl[cols]
                    nz = v != 0.0
                    parts_r.append(r[nz])
                    parts_c.append(np.full(int(nz.sum()), t))
                    parts_v.append(v[nz])
                return np.concatenate(parts_r), np.concatenate(parts_c), np.concatenate(parts_v)

            roots, nvar = forest_max_rows(oracle, dead, entries, nvar, rows, tag=(y, p))
            assert roots is not None  # no cell is dead: every root has a value
            const = np.array([rule.intercept[p] - rule.intercept[c] + tie_tol for c in others])
            loss = float(p != y)
            # Σ roots + Σ_c t_c·const_c − ν ≤ −loss
            rows.add(np.concatenate([roots, tcol, [0]]), np.concatenate([np.ones(len(roots)), const, [-1.0]]), -loss,
                     (y, p))
    aux_lower = np.full(nvar - model.n_cols, -np.inf)
    aux_lower[np.concatenate(multipliers) - model.n_cols] = 0.0  # the Lagrange multipliers t ≥ 0, messages free
    rows.solve(model, nvar, aux_lower)
    return float(min(1.0, max(0.0, model.objective))), model.mu.reshape(K, D)
