"""The certificate of the labels a minimax classifier predicts: W(h) of its deterministic rule over its own box.

A minimax learner (MRC, DCC) solves for R*, the worst-case 0-1 risk over the box
U = {p : |E_pΦ − τ| ≤ λ} of its *randomized* rule (6) (``predict_proba``). The labels it writes
out come from its deterministic rule ĥ(x) = argmax_y Φ(x, y)ᵀμ with its tie-break (``predict``),
whose worst case over the same box is

    W(ĥ) = max_{p∈U} Σ_{x,y} p(x, y)·1{ĥ(x) ≠ y}        (≥ R*: the MRC is minimax).

That is the certificate (:func:`labels_certificate`), over the SAME box as R* (the fit's τ and λ,
so the same coverage event), computed by the first of these that applies:

1. **The domain enumerated** (every feature of the map one-hot and Π_i m_i · K ≤
   :data:`DOMAIN_CELLS`): the LP above over every (x, y) of the codebook domain, with ĥ(x) the
   labels ``predict`` writes, tie-break included — W(ĥ) exactly (up to the LP's tolerance).
2. **An additive rule** (``linear_rule()``: the MRC's argmax over one-hot features): the
   one-LP Lagrangian bound W_L ≥ W(ĥ) (:func:`marg.learners.minimax.fixed_rule_lp.certify_rule_lp`),
   over the rule's own features with their τ and λ (the projection of U onto them, which contains
   U's projection, so the bound still holds over U); score ties count both ways, so any tie-break
   is covered.
3. **Always**: 2·R*, capped at 1. Where ĥ(x) ≠ y the randomized rule puts h(y|x) ≤ h(ĥ(x)|x)
   (rule (6) is monotone in the scores and ĥ picks a largest score), and the two sum to at most 1,
   so h(y|x) ≤ ½ and 1{ĥ(x) ≠ y} ≤ 2(1 − h(y|x)) at every (x, y); taking expectations under any p of
   U, W(ĥ) ≤ 2·R(h) ≤ 2·R*. (R*_L ≥ R* on a graph with cycles: the same with R*_L.)

The certificate is the smallest of those computed (each bounds W(ĥ) from above; 1 is exact).
R* stays under its own name (``minimax_risk_``, "randomized rule") and is never compared with W(ĥ).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from marg.errors import InconsistentStatistics, InputError, SolverError

from ..core.certificate import Certificate

DOMAIN_CELLS = 20000
"""The largest codebook domain (points × classes) whose W(ĥ) is computed by enumerating it."""
RANDOMIZED = ("R*", "R*_L")
"""Certificate kinds that bound the randomized rule, not the labels written out."""


def doubled(rstar: Certificate) -> Certificate:
    """min(1, 2·R*): a bound on the deterministic rule's worst-case error from the randomized rule's (module docstring,
    3)."""
    value = min(1.0, 2.0 * float(rstar.value))
    return Certificate(value, "W(h)", rstar.coverage, rstar.approximate, rstar.n_classes, box=rstar.box,
                       note=f"2·{rstar.kind}: twice the randomized rule's bound" if value < 1.0 else "")


def _domain(est: Any, codebook: Any) -> np.ndarray | None:
    """Every point of the domain of the features ``est``'s map reads, as rows of codes (n, p) (the other
    features at code 0); None when one of them is numeric or there are more than :data:`DOMAIN_CELLS` points."""
    blocks = getattr(est.map_, "blocks", None)
    if blocks:
        if any(b.kind != "onehot" for b in blocks):
            return None
        cols, sizes = [int(b.column) for b in blocks], [int(b.size) for b in blocks]
    else:  # a vote of monomials: the features its rules read
        names = list(codebook.feature_names)
        feats = [codebook.features[names.index(f)] for f in (est.used_features() or [])]
        if any(not f.is_discrete for f in feats):
            return None
        cols, sizes = [names.index(f.name) for f in feats], [int(f.n_levels) for f in feats]
    if float(np.prod([float(m) for m in sizes])) > DOMAIN_CELLS:
        return None
    grid = np.indices(sizes).reshape(len(sizes), -1).T if sizes else np.zeros((1, 0), dtype=np.int64)
    X = np.zeros((grid.shape[0], len(codebook.features)), dtype=np.int64)
    X[:, cols] = grid
    return X


def enumerated_worst_case(fmap: Any, labels: np.ndarray, X: np.ndarray, tau: np.ndarray, lam: np.ndarray) -> float:
    """max_{p∈U} Σ p(x, y)·1{labels(x) ≠ y} over the points ``X`` (the whole domain), by one LP.

    Parameters
    ----------
    fmap : FeatureMap or PairwiseFeatureMap
        Ψ of the box; Φ(x, y) is Ψ(x) in label y's row.
    labels : ndarray of int (n,)
        The rule's label at each row of ``X``.
    X : ndarray (n, p)
        Every point of the domain.
    tau, lam : ndarray (K, D)

    Raises
    ------
    InconsistentStatistics
        No distribution on the domain lies in the box.
    """
    import scipy.sparse as sp

    from marg.lp import HighsLP, Status

    psi = sp.csr_array(np.asarray(fmap.psi(X), dtype=np.float64))
    K, D = tau.shape
    n = psi.shape[0]
    # p[x, y] at column y·n + x; moment row y·D + d: Σ_x Ψ_d(x) p[x, y]
    F = sp.block_diag([psi.T] * K, format="csr")
    loss = (np.asarray(labels)[None, :] != np.arange(K)[:, None]).astype(np.float64).ravel()
    A = sp.vstack([F, -F], format="csr")
    b = np.concatenate([(tau + lam).ravel(), -(tau - lam).ravel()])
    lp = HighsLP.from_arrays(-loss, A, b, (0.0, None), np.ones((1, n * K)), [1.0])
    res = lp.solve()
    if res.status is Status.INFEASIBLE:
        raise InconsistentStatistics("no distribution on the codebook domain lies within the certificate's box")
    if res.status is not Status.OPTIMAL:
        raise SolverError(f"HiGHS failed on the rule's worst-case LP: {res.message or res.status.value}")
    return float(min(1.0, max(0.0, -res.objective)))


def _additive_bound(est: Any, tau: np.ndarray, lam: np.ndarray) -> float:
    """W_L of ``est.linear_rule()`` over its used features' part of the box (module docstring, 2)."""
    from ..features.blocks import FeatureMap
    from ..minimax.fixed_rule import LinearRule
    from ..minimax.fixed_rule_lp import certify_rule_lp

    rule = est.linear_rule()
    W = np.asarray(rule.weights, dtype=np.float64)
    used = ([b for b in rule.fmap.blocks if np.any(W[:, b.offset: b.offset + b.size] != 0.0)]
            or list(rule.fmap.blocks[:1]))
    sub = FeatureMap(used, [b.column for b in used])
    cols = np.concatenate([np.arange(b.offset, b.offset + b.size) for b in used])
    small = LinearRule(sub, W[:, cols], rule.intercept)
    # predict's ties are within 1e-9·max(1, |top score|): count at least those as ties
    top = float(np.abs(rule.intercept).max() + sum(np.abs(W[:, b.offset: b.offset + b.size]).max() for b in used))
    return float(certify_rule_lp(small, sub, tau[:, cols], lam[:, cols], tie_tol=1e-9 * max(1.0, top)))


def labels_certificate(est: Any, summary: Any) -> Certificate:
    """The certificate of the labels ``est`` (a fitted minimax classifier with ``tau_``, ``lambda_``,
    ``map_`` and ``minimax_risk_``) predicts: the module docstring's W(ĥ) over its own box.

    A certificate that already bounds the deterministic rule (the hinge loss) is returned as it is."""
    rstar: Certificate = est.minimax_risk_
    if rstar.kind not in RANDOMIZED:
        return rstar
    best = doubled(rstar)
    tau, lam = getattr(est, "tau_", None), getattr(est, "lambda_", None)
    if tau is None or lam is None:
        return best
    tau, lam = np.asarray(tau, dtype=np.float64), np.asarray(lam, dtype=np.float64)
    X = _domain(est, summary.codebook)
    try:
        if X is not None and X.shape[0] * tau.shape[0] <= DOMAIN_CELLS:
            value = enumerated_worst_case(est.map_, est.predict(X), X, tau, lam)
        else:
            value = _additive_bound(est, tau, lam)
    except (InputError, InconsistentStatistics, SolverError):
        return best  # a pairwise rule on a large domain, or a box the LP cannot solve: 2·R*
    if value >= best.value:
        return best
    return Certificate(value, "W(h)", rstar.coverage, rstar.approximate, rstar.n_classes, box=rstar.box)
