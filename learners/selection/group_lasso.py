"""Group-lasso solver for the robust Rényi feature selection problem (seed 004 §6, Algorithm 1).

Objective (the intercept already eliminated, see :func:`marg.learners.classifiers.renyi_problem.center_problem`),
for T binary problems sharing Q_c (T = 1 binary label, T = K one-vs-rest):

    F(Z) = tr(ZᵀQ_c Z) − tr(D_cᵀZ) + λ Σ_i w_i ‖Z_i‖,      Z ∈ R^{M×T},

Z_i the rows of feature i (an m_i × T block), ‖·‖ the L1/L∞ group norm of the paper
(h(|z|) = Σ_i max_a |z_{i,a}|: ``norm="linf"``, the max of the block's absolute entries) or
the usual L1/L2 (``norm="l2"``, the block's Frobenius norm). Smooth part f(Z) = tr(ZᵀQ_cZ) −
tr(D_cᵀZ), ∇f = 2Q_cZ − D_c, Lipschitz constant L = 2λ_max(Q_c).

Solver: FISTA with adaptive restart and the exact prox of each norm —
L2: block soft-thresholding; L∞: v − Π_{‖·‖₁ ≤ t}(v) (Moreau decomposition with the
projection onto the L1 ball, Duchi et al. 2008) — run on a working set of groups that is
grown until the KKT conditions of the *full* problem hold:

    Z_i = 0:  ‖G_i‖_* ≤ λw_i            G = D_c − 2Q_cZ (minus the gradient),
    Z_i ≠ 0:  G_i ∈ λw_i ∂‖Z_i‖          (‖·‖_* the dual norm: L2 ↔ L2, L∞ ↔ L1).

λ_max = max_i ‖D_{c,i}‖_*/w_i is the smallest λ with Z = 0. The path runs from λ_max down a
geometric grid, warm-started, with the sequential strong rule choosing the working set.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from marg.errors import InputError

from .group_norms import as_matrix, block_offsets, dual_group_norms, group_norms, prox_group, _check_norm

__all__ = [
    "PathPoint",
    "lambda_max",
    "kkt_violation",
    "group_lasso",
    "group_lasso_path",
]

def _weights(weights: np.ndarray | None, p: int) -> np.ndarray:
    if weights is None:
        return np.ones(p)
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (p,) or not np.all(np.isfinite(w)) or np.any(w <= 0):
        raise InputError(f"group weights must be {p} positive finite numbers, got shape {w.shape}")
    return w


def lambda_max(Dc: np.ndarray, sizes: Sequence[int], norm: str = "linf", weights: np.ndarray | None = None) -> float:
    """Smallest λ for which Z = 0 is optimal: max_i ‖D_{c,i}‖_*/w_i."""
    w = _weights(weights, len(sizes))
    if len(sizes) == 0:
        return 0.0
    return float(np.max(dual_group_norms(Dc, sizes, norm) / w))


def kkt_violation(
    Qc: np.ndarray, Dc: np.ndarray, Z: np.ndarray, sizes: Sequence[int], lam: float, norm: str = "linf",
    weights: np.ndarray | None = None,
) -> np.ndarray:
    """Per-group violation of the optimality conditions (0 at an exact solution). Shape (p,).

    With G = D_c − 2Q_cZ and r_i = λw_i:
    Z_i = 0: max(0, ‖G_i‖_* − r_i).
    Z_i ≠ 0, L2: ‖G_i − r_i Z_i/‖Z_i‖‖.
    Z_i ≠ 0, L∞: the subdifferential of ‖·‖_∞ at Z_i is {S : ‖S‖₁ = 1, S_a = 0 where
    |Z_a| < ‖Z_i‖_∞, S_a·Z_a ≥ 0}; the violation is |‖G_i‖₁ − r_i| plus the mass of G_i off
    the maximal entries or of the wrong sign.
    """
    Z = as_matrix(Z)
    Dc = as_matrix(Dc)
    w = _weights(weights, len(sizes))
    G = Dc - 2.0 * (Qc @ Z)
    off = block_offsets(sizes)
    out = np.zeros(len(sizes))
    for i in range(len(sizes)):
        zi, gi, r = Z[off[i] : off[i + 1]], G[off[i] : off[i + 1]], lam * w[i]
        if not np.any(zi):
            dn = np.abs(gi).sum() if norm == "linf" else math.sqrt(float(np.sum(gi * gi)))
            out[i] = max(0.0, dn - r)
        elif norm == "l2":
            out[i] = math.sqrt(float(np.sum((gi - r * zi / math.sqrt(float(np.sum(zi * zi)))) ** 2)))
        else:
            top = np.abs(zi).max()
            on = np.abs(zi) >= top * (1 - 1e-9) - 1e-15
            off_mass = np.abs(gi[~on]).sum()
            wrong = np.abs(gi[on] * (np.sign(gi[on]) * np.sign(zi[on]) < 0)).sum()
            out[i] = abs(np.abs(gi).sum() - r) + off_mass + wrong
    return out


def _lipschitz(Q: np.ndarray) -> float:
    n = Q.shape[0]
    if n == 0:
        return 1.0
    if n <= 150:
        top = float(np.linalg.eigvalsh(Q)[-1])
    else:
        from scipy.sparse.linalg import eigsh

        top = float(eigsh(Q, k=1, which="LA", return_eigenvectors=False, tol=1e-10)[0]) * (1.0 + 1e-6)
    return 2.0 * max(top, 1e-12)


def _fista(
    Q: np.ndarray, D: np.ndarray, sizes: Sequence[int], thr: np.ndarray, norm: str, Z0: np.ndarray,
    tol: float, max_iter: int, L: float | None = None,
) -> tuple[np.ndarray, int]:
    """FISTA with gradient-based adaptive restart on a (small) problem. Returns (Z, iters)."""
    L = _lipschitz(Q) if L is None else L
    step = 1.0 / L
    X = Z0.copy()
    Y = X.copy()
    t = 1.0
    it = 0
    for it in range(1, max_iter + 1):
        grad = 2.0 * (Q @ Y) - D
        Xn = prox_group(Y - step * grad, sizes, step * thr, norm)
        gm = (Y - Xn) * L  # gradient mapping
        if np.max(np.abs(gm), initial=0.0) <= tol:
            X = Xn
            break
        if np.sum((Y - Xn) * (Xn - X)) > 0:  # restart momentum
            t = 1.0
            Y = Xn.copy()
        else:
            tn = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * t * t))
            Y = Xn + ((t - 1.0) / tn) * (Xn - X)
            t = tn
        X = Xn
    return X, it


def group_lasso(
    Qc: np.ndarray,
    Dc: np.ndarray,
    sizes: Sequence[int],
    lam: float,
    norm: str = "linf",
    weights: np.ndarray | None = None,
    Z0: np.ndarray | None = None,
    working: Sequence[int] | None = None,
    tol: float = 1e-9,
    max_iter: int = 20000,
) -> tuple[np.ndarray, dict]:
    """Solve min tr(ZᵀQ_cZ) − tr(D_cᵀZ) + λΣ_i w_i‖Z_i‖ to KKT tolerance ``tol``.

    Parameters
    ----------
    Qc : ndarray, shape (M, M)
    Dc : ndarray, shape (M,) or (M, T)
    sizes : sequence of int
        Group sizes m_i (Σ m_i = M).
    lam : float, >= 0
    norm : {"linf", "l2"}
    weights : ndarray, shape (p,), optional
        Group weights w_i (default 1).
    Z0 : ndarray, optional
        Warm start.
    working : sequence of int, optional
        Initial working set of groups (default: groups nonzero in Z0).
    tol : float
        KKT tolerance (per group, absolute).

    Returns
    -------
    Z : ndarray, shape like Dc
    info : dict
        ``iterations`` (FISTA steps), ``rounds`` (working-set rounds), ``active`` (groups
        with Z_i ≠ 0), ``kkt`` (max violation).
    """
    _check_norm(norm)
    if not (lam >= 0) or not math.isfinite(lam):
        raise InputError(f"lambda must be finite and >= 0, got {lam!r}")
    squeeze = np.asarray(Dc).ndim == 1
    D = as_matrix(Dc)
    M, T = D.shape
    p = len(sizes)
    off = block_offsets(sizes)
    if off[-1] != M or Qc.shape != (M, M):
        raise InputError(f"group sizes sum to {off[-1]} but Q is {Qc.shape} and d has {M} rows")
    w = _weights(weights, p)
    if p == 0 or lam >= lambda_max(D, sizes, norm, w):
        # Z = 0 satisfies the KKT conditions exactly: return it without rounding noise
        Z = np.zeros((M, T))
        kkt = kkt_violation(Qc, D, Z, sizes, lam, norm, w)
        info = {"iterations": 0, "rounds": 0, "active": [], "kkt": float(kkt.max(initial=0.0))}
        return (Z[:, 0] if squeeze else Z), info
    Z = np.zeros((M, T)) if Z0 is None else as_matrix(Z0).copy()
    ws = set(int(i) for i in (working if working is not None else []))
    ws |= {i for i in range(p) if np.any(Z[off[i] : off[i + 1]])}
    iters = 0
    rounds = 0
    while True:
        rounds += 1
        G = D - 2.0 * (Qc @ Z)
        dn = dual_group_norms(G, sizes, norm)
        viol = [i for i in range(p) if i not in ws and dn[i] > lam * w[i] + tol]
        if rounds > 1 and not viol:
            break
        if viol:
            # add the worst violators (all of them if few)
            viol.sort(key=lambda i: -(dn[i] - lam * w[i]))
            ws |= set(viol[: max(10, len(viol) // 2)])
        if not ws:
            break
        grp = sorted(ws)
        idx = np.concatenate([np.arange(off[i], off[i + 1]) for i in grp])
        sub_sizes = [int(sizes[i]) for i in grp]
        Qs = Qc[np.ix_(idx, idx)]
        Zs, k = _fista(Qs, D[idx], sub_sizes, lam * w[grp], norm, Z[idx], tol, max_iter)
        iters += k
        Z[:] = 0.0
        Z[idx] = Zs
        if rounds > 100:
            break
    norms = group_norms(Z, sizes, norm)
    active = [i for i in range(p) if norms[i] > 0]
    kkt = kkt_violation(Qc, D, Z, sizes, lam, norm, w)
    info = {"iterations": iters, "rounds": rounds, "active": active, "kkt": float(kkt.max(initial=0.0))}
    return (Z[:, 0] if squeeze else Z), info


@dataclass
class PathPoint:
    """One point of the regularization path.

    Attributes
    ----------
    lam : float
    active : tuple of int
        Groups with Z_i ≠ 0, in order of group index.
    group_norms : ndarray, shape (p,)
    smooth : float
        tr(ZᵀQ_cZ) − tr(D_cᵀZ) at the solution.
    penalty : float
        Σ_i w_i‖Z_i‖.
    iterations : int
    kkt : float
    """

    lam: float
    active: tuple[int, ...]
    group_norms: np.ndarray
    smooth: float
    penalty: float
    iterations: int
    kkt: float
    Z: np.ndarray | None = field(default=None, repr=False)


def group_lasso_path(
    Qc: np.ndarray,
    Dc: np.ndarray,
    sizes: Sequence[int],
    lambdas: Sequence[float] | None = None,
    n_lambdas: int = 50,
    lambda_min_ratio: float = 1e-3,
    norm: str = "linf",
    weights: np.ndarray | None = None,
    max_features: int | None = None,
    tol: float = 1e-9,
    keep_coef: bool = False,
    callback: Callable[[PathPoint], None] | None = None,
) -> list[PathPoint]:
    """Warm-started path from λ_max down a geometric grid.

    The working set at λ_k is seeded by the sequential strong rule — groups nonzero at
    λ_{k−1} or with ‖G_i(Z(λ_{k−1}))‖_* ≥ w_i(2λ_k − λ_{k−1}) — and then grown until the full
    KKT conditions hold, so the rule never changes the answer.

    Parameters
    ----------
    lambdas : sequence of float, optional
        Explicit decreasing grid (default: n_lambdas values from λ_max to
        λ_max·lambda_min_ratio).
    max_features : int, optional
        Stop after the first point with more than this many active groups.
    keep_coef : bool
        Store Z at each point (memory M·T per point).
    callback : callable, optional
        Called with each PathPoint (progress reporting).

    Returns
    -------
    list of PathPoint, in decreasing λ.
    """
    _check_norm(norm)
    D = as_matrix(Dc)
    p = len(sizes)
    w = _weights(weights, p)
    lmax = lambda_max(D, sizes, norm, w)
    if lambdas is None:
        if n_lambdas < 1:
            raise InputError(f"n_lambdas must be >= 1, got {n_lambdas}")
        if not 0 < lambda_min_ratio < 1:
            raise InputError(f"lambda_min_ratio must be in (0, 1), got {lambda_min_ratio}")
        lambdas = lmax * np.geomspace(1.0, lambda_min_ratio, n_lambdas) if lmax > 0 else np.zeros(1)
    lambdas = [float(v) for v in lambdas]
    Z = np.zeros_like(D)
    prev_lam = lmax
    out: list[PathPoint] = []
    for lam in lambdas:
        G = D - 2.0 * (Qc @ Z)
        dn = dual_group_norms(G, sizes, norm)
        gn = group_norms(Z, sizes, norm)
        strong = [i for i in range(p) if gn[i] > 0 or dn[i] >= w[i] * (2 * lam - prev_lam)]
        Z, info = group_lasso(Qc, D, sizes, lam, norm, w, Z0=Z, working=strong, tol=tol)
        gnorm = group_norms(Z, sizes, norm)
        pt = PathPoint(
            lam=lam,
            active=tuple(info["active"]),
            group_norms=gnorm,
            smooth=float(np.sum(Z * (Qc @ Z)) - np.sum(D * Z)),
            penalty=float(np.sum(w * gnorm)),
            iterations=int(info["iterations"]),
            kkt=float(info["kkt"]),
            Z=Z.copy() if keep_coef else None,
        )
        out.append(pt)
        if callback is not None:
            callback(pt)
        prev_lam = lam
        if max_features is not None and len(pt.active) > max_features:
            break
    return out
