"""The worst-case hinge loss on a forest (the published Discrete Chebyshev Classifier's objective), binary labels.

A score f(x) = Σ_i f_i(x_i) + Σ_{(i,j)∈E} f_ij(x_i, x_j) on a forest minimising the
worst-case hinge loss max_{p∈U} E_p[max(0, 1 − s_y f(x))] (s_y = ∓1 for labels 0/1) over the
uncertainty set U of the 0-1 minimax problem. Its LP dual turns the inner max into two
forest minima per label, written with the same message constraints as the 0-1 forest LP
(:func:`marg.learners.minimax.forest_lp.forest_max_rows`): one LP in f and the duals
(:func:`solve_hinge`). Its value is exactly 2·R* (R* the 0-1 value): the hinge loss changes
which optimal score is returned, not the worst case.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from marg.errors import InputError

from .minimax.forest import ForestOracle
from .minimax.forest_lp import RowBuffer, forest_max_rows
from .minimax.problem import mu_columns


class HingeSolution(NamedTuple):
    """Output of :func:`solve_hinge`.

    Attributes
    ----------
    value : float
        min_f max_{p∈U} E_p[max(0, 1 − s_y f(x))].
    f : ndarray (D,)
        Coefficients of the score f(x) = Ψ(x)ᵀf (zero outside ``f_columns``).
    theta : ndarray (2, D)
        The dual prices θ of the indicator moments (zero outside ``theta_columns``).
    nu : float
        The dual price of Σ p = 1.
    n_rows : int
        Rows of the LP.
    """

    value: float
    f: np.ndarray
    theta: np.ndarray
    nu: float
    n_rows: int


def solve_hinge(
    oracle: ForestOracle,
    tau: np.ndarray,
    lam: np.ndarray,
    f_columns: np.ndarray,
    theta_columns: np.ndarray,
    dead: np.ndarray,
) -> HingeSolution:
    """The minimax hinge loss over the forest's moment box, as ONE exact LP (binary labels).

    With s_y = −1 for label 0 and +1 for label 1, a score f(x) = Σ_i f_i(x_i) +
    Σ_{(i,j)∈E} f_ij(x_i, x_j) on the oracle's forest, and U = {p(x, y) ≥ 0, Σ p = 1:
    |E_p[Φ(x,y)] − τ| ≤ λ} for the node and edge indicators Φ(x, y) = e_y ⊗ Ψ(x), LP duality
    (dual prices θ = θ⁺ − θ⁻ of the two-sided moment rows, ν of Σ p = 1) gives

        max_{p∈U} E_p[max(0, 1 − s_y f(x))]
          = min_{θ⁺,θ⁻ ≥ 0, ν} ν + τᵀθ + λᵀ(θ⁺ + θ⁻)
            s.t. ν + θ(x, y) ≥ max(0, 1 − s_y f(x)) for every (x, y),

    θ(x, y) = Φ(x, y)ᵀθ. Per label y the constraint is two forest minima,
    (A) min_x θ(x, y) + ν ≥ 0 and (B) min_x θ(x, y) + s_y f(x) + ν ≥ 1, each written
    exactly with message variables (:func:`forest_max_rows` on −θ(·, y) and
    −θ(·, y) − s_y f). Minimising over f as well is one LP in (f, θ⁺, θ⁻, ν, messages).

    A cell with τ = λ = 0 for label y (``dead[y]``) carries no mass of label y in any
    p ∈ U, so every (x, y) through it is dropped from (A) and (B) (its θ is +∞; it must
    not be among ``theta_columns``).

    Parameters
    ----------
    oracle : ForestOracle
        Map and active forest (K = 2; its exclusions are ignored: ``dead`` is used).
    tau, lam : ndarray (2, D)
    f_columns : ndarray of int
        Ψ columns of f in the LP (the others are fixed at 0).
    theta_columns : ndarray of int
        Flat (y·D + j) entries of θ in the LP (the others are fixed at 0).
    dead : ndarray of bool (2, D)

    Returns
    -------
    HingeSolution

    Raises
    ------
    InputError
        For a label that is not binary.
    InconsistentStatistics
        If the LP is unbounded (no distribution matches τ within λ).
    SolverError
        If HiGHS fails.
    """
    K, D = oracle.K, oracle.D
    if K != 2:
        raise InputError(f"the hinge-loss DCC needs a binary label, got {K} classes")
    dead = np.asarray(dead, dtype=bool).reshape(K, D)
    f_columns = np.asarray(f_columns, dtype=np.int64)
    theta_columns = np.asarray(theta_columns, dtype=np.int64)
    nt, nf = theta_columns.size, f_columns.size
    tpos = np.full(K * D, -1, dtype=np.int64)
    tpos[theta_columns] = np.arange(nt)
    fpos = np.full(D, -1, dtype=np.int64)
    fpos[f_columns] = np.arange(nf)
    # variables: ν | θ⁺ (nt) | θ⁻ (nt) | f (nf) | messages and root epigraphs
    f0 = 1 + 2 * nt
    mc = mu_columns(tau, lam, theta_columns).costs  # θ = −μ: θ⁺ is μ⁻, θ⁻ is μ⁺
    cost = [np.array([1.0]), mc[nt:], mc[:nt], np.zeros(nf)]
    nvar = f0 + nf

    def entries(y: int, with_f: bool, row: np.ndarray, psi_cols: np.ndarray,
                vals: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(row, LP column, value) of vals[t]·(−θ[y, psi_cols[t]] − s_y·f[psi_cols[t]]) (f if ``with_f``) in row[t]."""
        p_ = tpos[y * D + psi_cols]
        on = p_ >= 0
        R, cols = [row[on], row[on]], [1 + p_[on], 1 + nt + p_[on]]
        vs = [-vals[on], vals[on]]
        if with_f:
            q = fpos[psi_cols]
            onf = q >= 0
            R.append(row[onf])
            cols.append(f0 + q[onf])
            vs.append(-(2.0 * y - 1.0) * vals[onf])
        return np.concatenate(R), np.concatenate(cols), np.concatenate(vs)

    rows = RowBuffer()
    for y in range(K):
        for with_f, rhs in ((False, 0.0), (True, -1.0)):
            fn = lambda r_, c_, v_, y=y, w=with_f: entries(y, w, r_, c_, v_)  # noqa: E731
            roots, nvar = forest_max_rows(oracle, dead[y], fn, nvar, rows, tag=(y, with_f))
            if roots is None:  # no x is allowed with label y: no constraint
                continue
            # max_x g(x) ≤ Σ t_r ≤ ν + rhs
            rows.add(np.concatenate([roots, [0]]), np.concatenate([np.ones(len(roots)), [-1.0]]), rhs, (y, with_f, 2))
    cvec = np.concatenate(cost + [np.zeros(nvar - f0 - nf)])
    bounds = np.zeros((nvar, 2))
    bounds[:, 1] = np.inf
    bounds[0] = (-np.inf, np.inf)
    bounds[f0:] = (-np.inf, np.inf)
    res = rows.solve(cvec, bounds, "the hinge-loss minimax LP")
    theta = np.zeros(K * D)
    theta[theta_columns] = res.x[1 : 1 + nt] - res.x[1 + nt : 1 + 2 * nt]
    f = np.zeros(D)
    f[f_columns] = res.x[f0 : f0 + nf]
    return HingeSolution(float(res.objective), f, theta.reshape(K, D), float(res.x[0]), rows.n)
