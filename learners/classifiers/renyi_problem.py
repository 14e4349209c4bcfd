"""The Rényi least-squares problem on arrays: centering, the min-norm solve, separability, the bounds.

Array-level pieces of the Rényi classifier (:mod:`marg.learners.classifiers.renyi`): the intercept
eliminated from min E[(b + Wᵀz − C)²] (:func:`center_problem`), the minimum-norm or ridge
solution of the singular system (:func:`psd_eigh`, :func:`min_norm_solve`), the exact
separability test over the whole solution set (:func:`separable_solution`, one LP), the HGR
lower bound and rule (7)'s probability. Shared with feature selection.

Seed 004 (Razaviyayn, Farnia, Tse, *Discrete Rényi classifiers*). With pairwise marginals
only, the worst-case-robust surrogate problem reduces to the least-squares fit

    γ = min_z  zᵀQz − dᵀz + 1/4  = min_z E[(Wᵀz − C)²],                              (9)

where W ∈ {0,1}^M is the one-hot encoding of the discrete features (block i has m_i
entries, M = Σ m_i), C = +1/2 if Y = 1 and −1/2 otherwise, Q = E[WWᵀ] (block (i, j) =
P(X_i=a, X_j=b)) and d = 2E[CW] (d_i(a) = P(X_i=a, Y=1) − P(X_i=a, Y=0)). Q, d and therefore
γ depend on the pairwise marginals only, so they are the same for every distribution in
C_pairwise. The fitted additive score f(x) = b + Σ_i z_{i,x_i} gives

- P̃(Y=1 | x) = 1/2 + f(x)                                                         (11)
- the MAP rule: predict 1 iff f(x) > 0;
- the randomized rule (7): predict 1 with probability s₁²/(s₀² + s₁²),
  s₁ = clip(1/2 + f(x), 0, 1), s₀ = 1 − s₁;
- the HGR lower bound sqrt(1 − γ/(q(1−q))), q = P(Y=0) (Theorem 3, clipped at 0);
- the worst-case error certificate 2γ: for *any* additive f and *every* p ∈ C_pairwise,
  P_p(δ(X) ≠ Y) = Σ_x (p_{x0}s₁² + p_{x1}s₀²)/(s₀² + s₁²) ≤ 2 E_p[(C − f(X))²] because
  s₀² + s₁² ≥ 1/2 and clipping only moves s towards the label. So 2γ bounds the error of
  rule (7) whatever z was fitted (ridge, reference coding, a feature subset). It bounds the
  training sample only, so it is kept as ``training_bound_``; the model's ``certificate_`` is
  W(h) of the MAP rule over the confidence box (:func:`marg.learners.certification.certify.certify`).

The constant column is in the span of W (each block sums to one), so the paper's problem has
an implicit intercept. We make it explicit and unpenalized: minimising over b first gives
the *centered* problem

    γ = q(1−q) + min_z zᵀQ_c z − d_cᵀz,   Q_c = Q − ppᵀ,  d_c = d − (2q₁ − 1)p,        (C)
    b = (2q₁ − 1)/2 − pᵀz,

with p = diag(Q) the level probabilities and q₁ = P(Y=1). (C) is what a ridge term or a
group penalty should act on (they must not shrink the intercept), and it is what
:mod:`learners.selection` solves.

Q is singular by construction (and Q_c more so): block-constant shifts and never-seen
levels lie in its null space. ``coding="min-norm"`` takes the minimum-norm minimiser
(eigendecomposition, eigenvalues below ``rcond·λ_max`` — and any negative ones a noisy Q may
have — treated as zero); ``coding="reference"`` drops each feature's most probable level
(its z is fixed at 0) and solves the reduced system. Both give the same f on the support of
the marginals.

Separability (Theorem 3): if *some* minimiser z* has h(z*) ≤ 1/2 and h(−z*) ≤ 1/2,
h(z) = Σ_i max_a z_{i,a} — i.e. 1/2 + f(x) ∈ [0, 1] for every x in the full domain — then
γ = θ, θ the worst case of the harmonic-mean surrogate (8), and rule (7) is within a
factor 2 of the minimax rule. We check the fitted minimiser first and, if it fails while
the solution set is larger than the block shifts, solve a small LP over the whole solution
set {z₀ + Nw : N spans null(Q_c)}, so ``separable_`` decides the h-condition exactly.
The paper states the condition as necessary too; it is not quite: θ = γ also holds when
the worst-case distribution puts no mass on the x where 1/2 + f leaves [0, 1] (our tests
exhibit such a case with a brute-force witness). ``separable_ = False`` therefore means
"not certified", not "γ > θ". The exact criterion needs the full joint domain.

Multi-class labels are handled one-vs-rest: problem c has d^c_i(a) = P(X_i=a, Y=c) −
P(X_i=a, Y≠c). See :class:`RenyiClassifier` for the multi-class rule and certificate.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from marg.errors import InputError, SolverError
from marg.lp import HighsLP, Status

from ..selection.group_norms import block_offsets


RCOND = 1e-10
SEP_TOL = 1e-9


def center_problem(Q: np.ndarray, d: np.ndarray, q1: float) -> tuple[np.ndarray, np.ndarray, float, np.ndarray]:
    """Eliminate the unpenalized intercept from ``min_{b,z} E[(b + Wᵀz − C)²]``.

    Parameters
    ----------
    Q : ndarray, shape (M, M)
        Second moments of the one-hot encoding; ``p = diag(Q)`` are the level probabilities.
    d : ndarray, shape (M,)
        d_i(a) = P(X_i=a, Y=1) − P(X_i=a, Y=0).
    q1 : float
        P(Y=1) (the positive class of this binary problem).

    Returns
    -------
    Qc : ndarray, shape (M, M)
        Q − ppᵀ (the covariance of W).
    dc : ndarray, shape (M,)
        d − (2q₁ − 1)p.
    const : float
        q₁(1 − q₁): the value of E[(b + Wᵀz − C)²] at z = 0, b optimal.
    p : ndarray, shape (M,)
        diag(Q); the optimal intercept for a given z is b = (2q₁ − 1)/2 − pᵀz.

    Notes
    -----
    E[(b + Wᵀz − C)²] = b² + 2b pᵀz − (2q₁−1)b + zᵀQz − dᵀz + 1/4; minimising in b gives
    zᵀQ_c z − d_cᵀz + q₁(1−q₁).
    """
    Q = np.asarray(Q, dtype=np.float64)
    d = np.asarray(d, dtype=np.float64)
    p = np.diag(Q).copy()
    delta = 2.0 * float(q1) - 1.0
    Qc = Q - np.outer(p, p)
    dc = d - delta * p
    return Qc, dc, float(q1) * (1.0 - float(q1)), p


def psd_eigh(Q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigendecomposition of the symmetric part of Q with negative eigenvalues set to 0.

    A noisy (differentially private) Q can be slightly indefinite; projecting it onto the
    PSD cone keeps ``zᵀQz − dᵀz`` bounded below.

    Returns
    -------
    lam : ndarray, shape (M,)
        Eigenvalues, clipped at 0, ascending.
    V : ndarray, shape (M, M)
        Orthonormal eigenvectors (columns).
    """
    Q = np.asarray(Q, dtype=np.float64)
    if Q.size == 0:
        return np.zeros(0), np.zeros((0, 0))
    lam, V = np.linalg.eigh(0.5 * (Q + Q.T))
    return np.clip(lam, 0.0, None), V


def min_norm_solve(
    Q: np.ndarray | None,
    d: np.ndarray,
    ridge: float = 0.0,
    rcond: float = RCOND,
    eig: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Minimum-norm minimiser of ``zᵀQz − dᵀz + ridge·‖z‖²``.

    Parameters
    ----------
    Q : ndarray, shape (M, M), or None
        Symmetric PSD (negative eigenvalues are treated as 0); may be None when ``eig``
        is given.
    d : ndarray, shape (M,)
    ridge : float, >= 0
    rcond : float
        Eigenvalues ``λ + ridge <= rcond·max(λ + ridge)`` count as zero.
    eig : (lam, V), optional
        A precomputed :func:`psd_eigh` of Q.

    Returns
    -------
    z : ndarray, shape (M,)
        z = (Q + ridge·I)⁺ d / 2, so 2(Q + ridge·I)z = d on range(Q + ridge·I).
    """
    d = np.asarray(d, dtype=np.float64)
    if ridge < 0 or not math.isfinite(ridge):
        raise InputError(f"ridge must be finite and >= 0, got {ridge!r}")
    if d.size == 0:
        return np.zeros(0)
    lam, V = eig if eig is not None else psd_eigh(Q)
    denom = lam + ridge
    top = float(denom.max()) if denom.size else 0.0
    if top <= 0.0:
        return np.zeros_like(d)
    keep = denom > rcond * top
    Vk = V[:, keep]
    return Vk @ ((Vk.T @ d) / (2.0 * denom[keep]))


def quadratic_value(Q: np.ndarray, d: np.ndarray, z: np.ndarray) -> float:
    """``zᵀQz − dᵀz``."""
    z = np.asarray(z, dtype=np.float64)
    return float(z @ (np.asarray(Q) @ z) - np.asarray(d) @ z)


def score_range(z: np.ndarray, b: float, sizes: Sequence[int]) -> tuple[float, float]:
    """(max_x f(x), min_x f(x)) of f(x) = b + Σ_i z_{i,x_i} over the full domain.

    Equals (b + h(z), b − h(−z)) with the paper's h(z) = Σ_i max_a z_{i,a}.
    """
    off = block_offsets(sizes)
    hi = lo = float(b)
    for i in range(len(off) - 1):
        blk = z[off[i] : off[i + 1]]
        if blk.size:
            hi += float(blk.max())
            lo += float(blk.min())
    return hi, lo


def _is_separable(z: np.ndarray, b: float, sizes: Sequence[int], tol: float = SEP_TOL) -> bool:
    hi, lo = score_range(z, b, sizes)
    return hi <= 0.5 + tol and lo >= -0.5 - tol


def separable_solution(
    z0: np.ndarray,
    b0: float,
    p: np.ndarray,
    sizes: Sequence[int],
    null_basis: np.ndarray,
    tol: float = SEP_TOL,
) -> np.ndarray | None:
    """A minimiser of the centered problem with 1/2 + f(x) ∈ [0, 1] for all x, if one exists.

    The minimisers are z = z₀ + Nw (N spans null(Q_c)), with intercept b = b₀ − pᵀNw. Block
    shifts (a constant added to one block) change neither f nor h, so they are projected
    out of N first; if nothing is left, f is unique and z₀ decides. Otherwise solve the LP

        min t  s.t.  z_{i,a} ≤ u_i,  z_{i,a} ≥ l_i,  b + Σu_i − 1/2 ≤ t,  −1/2 − b − Σl_i ≤ t

    over (w, u, l, t); the condition holds iff t* ≤ tol.

    Parameters
    ----------
    z0 : ndarray, shape (M,)
        One minimiser.
    b0 : float
        Its intercept.
    p : ndarray, shape (M,)
        Level probabilities (diag Q).
    sizes : sequence of int
        Block sizes m_i.
    null_basis : ndarray, shape (M, k)
        Orthonormal basis of null(Q_c).

    Returns
    -------
    z : ndarray, shape (M,) or None
        A separable minimiser (z₀ itself when it already is), or None if none exists.
    """
    if _is_separable(z0, b0, sizes, tol):
        return z0
    M = z0.size
    off = block_offsets(sizes)
    nb = len(sizes)
    N = np.asarray(null_basis, dtype=np.float64).reshape(M, -1)
    if N.shape[1] == 0:
        return None
    B = np.zeros((M, nb))
    for i in range(nb):
        B[off[i] : off[i + 1], i] = 1.0 / math.sqrt(max(1, off[i + 1] - off[i]))
    R = N - B @ (B.T @ N)
    U, s, _ = np.linalg.svd(R, full_matrices=False)
    N2 = U[:, s > 0.5]
    k = N2.shape[1]
    if k == 0:
        return None
    # variables: w (k), u (nb), l (nb), t (1)
    nv = k + 2 * nb + 1
    rows, rhs = [], []
    blk_of = np.repeat(np.arange(nb), np.diff(off))
    for j in range(M):
        i = blk_of[j]
        r = np.zeros(nv)
        r[:k] = N2[j]
        r[k + i] = -1.0
        rows.append(r)
        rhs.append(-z0[j])  # z0_j + N_j w − u_i ≤ 0
        r = np.zeros(nv)
        r[:k] = -N2[j]
        r[k + nb + i] = 1.0
        rows.append(r)
        rhs.append(z0[j])  # −z0_j − N_j w + l_i ≤ 0
    pN = p @ N2
    r = np.zeros(nv)
    r[:k] = -pN
    r[k : k + nb] = 1.0
    r[-1] = -1.0
    rows.append(r)
    rhs.append(0.5 - b0)  # b0 − pN w + Σu − 1/2 ≤ t
    r = np.zeros(nv)
    r[:k] = pN
    r[k + nb : k + 2 * nb] = -1.0
    r[-1] = -1.0
    rows.append(r)
    rhs.append(0.5 + b0)  # −1/2 − b0 + pN w − Σl ≤ t
    c = np.zeros(nv)
    c[-1] = 1.0
    res = HighsLP.from_arrays(c, np.array(rows), np.array(rhs), (None, None), solver="choose").solve()
    if res.status is not Status.OPTIMAL:
        # the LP is always feasible and bounded (t ≥ (Σu − Σl − 1)/2 ≥ −1/2): anything else is the solver's failure
        raise SolverError(f"HiGHS failed on the Rényi separability LP: {res.message or res.status.value}")
    if res.objective > tol:
        return None
    z = z0 + N2 @ res.x[:k]
    b = b0 - float(p @ (N2 @ res.x[:k]))
    return z if _is_separable(z, b, sizes, 10 * tol + 1e-9) else None


def hgr_lower_bound(gamma: float, q: float) -> float:
    """Theorem 3's bound sqrt(1 − γ/(q(1−q))) on min_{P∈C} ρ(X, Y), clipped at 0."""
    v = q * (1.0 - q)
    if v <= 0.0:
        return 0.0
    return math.sqrt(max(0.0, 1.0 - gamma / v))


def rule7_positive_proba(f: np.ndarray) -> np.ndarray:
    """Probability that rule (7) predicts the positive class, given the score f.

    s₁ = clip(1/2 + f, 0, 1), s₀ = 1 − s₁, returns s₁²/(s₀² + s₁²) (denominator ≥ 1/2).
    """
    s1 = np.clip(0.5 + np.asarray(f, dtype=np.float64), 0.0, 1.0)
    s0 = 1.0 - s1
    return s1**2 / (s0**2 + s1**2)


