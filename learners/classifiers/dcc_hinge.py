"""The worst-case hinge loss on a forest (the published Discrete Chebyshev Classifier's objective), binary labels.

A score f(x) = Σ_i f_i(x_i) + Σ_{(i,j)∈E} f_ij(x_i, x_j) on a forest minimising the
worst-case hinge loss max_{p∈U} E_p[max(0, 1 − s_y f(x))] (s_y = ∓1 for labels 0/1) over the
uncertainty set U of the 0-1 minimax problem. Its LP dual turns the inner max into two
forest minima per label, written with the same message constraints as the 0-1 forest LP
(:func:`marg.learners.minimax.forest_lp.forest_max_rows`): one LP in f and the duals
(:func:`solve_hinge`). Its value is exactly 2·R* (R* the 0-1 value): the hinge loss changes
which optimal score is returned, not the worst case.

The ``hinge`` formulation of the one fit (:class:`Hinge`, registered here) runs it with
:class:`marg.learners.minimax.fit.One` on the given forest of a pairwise problem; its typed
read-out is a :class:`HingeScore`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from marg.errors import InputError

from ..minimax.empty_cells import empty_cells
from ..minimax.forest import ForestOracle
from ..minimax.forest_lp import MuTerms, RowBuffer, forest_max_rows, one_shot_model
from ..features.pairwise import PairwiseFeatureMap
from ..minimax.registry import register
from ..minimax.gauge import reference_mask
from ..minimax.pair_formulations import OnSubmap, submodel
from ..minimax.problem import MinimaxProblem
from ..minimax.solution import Finished, MinimaxSolution


@dataclass(frozen=True)
class HingeScore:
    """The hinge LP's read-out: ``f`` (D,) the score's coefficients, ``theta`` (2, D) the dual prices θ
    of the indicator moments, ``nu`` the dual price of Σ p = 1."""

    f: np.ndarray
    theta: np.ndarray
    nu: float


def solve_hinge(
    oracle: ForestOracle,
    tau: np.ndarray,
    lam: np.ndarray,
    f_columns: np.ndarray,
    theta_columns: np.ndarray,
    dead: np.ndarray,
) -> MinimaxSolution:
    """The minimax hinge loss over the forest's moment box, as ONE exact LP (binary labels).

    With s_y = −1 for label 0 and +1 for label 1, a score f(x) = Σ_i f_i(x_i) +
    Σ_{(i,j)∈E} f_ij(x_i, x_j) on the oracle's forest, and U = {p(x, y) ≥ 0, Σ p = 1:
    |E_p[Φ(x,y)] − τ| ≤ λ} for the node and edge indicators Φ(x, y) = e_y ⊗ Ψ(x), LP duality
    (dual prices θ = θ⁺ − θ⁻ of the two-sided moment rows, ν of Σ p = 1) gives

        max_{p∈U} E_p[max(0, 1 − s_y f(x))]
          = min_{θ⁺,θ⁻ ≥ 0, ν} ν + τᵀθ + λᵀ(θ⁺ + θ⁻)
            s.t. ν + θ(x, y) ≥ max(0, 1 − s_y f(x)) for every (x, y),

    θ(x, y) = Φ(x, y)ᵀθ. With μ = −θ this is LP (13)'s objective ν − τᵀμ + λᵀ|μ| on the
    one model (:class:`marg.learners.minimax.lp_model.MinimaxModel`, the θ⁺ = μ⁻ block first),
    with these rows and the score columns f. Per label y the constraint is two forest minima,
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
    MinimaxSolution
        ``kind`` "hinge", ``value`` min_f max_{p∈U} E_p[max(0, 1 − s_y f(x))] (= 2·R*), ``mu``
        (2, D) the rule's coefficients (−f/2, f/2) (so Φ(x, 1)ᵀμ − Φ(x, 0)ᵀμ = f(x)), φ 0,
        ``impossible`` ``dead``, ``bound`` inf, and ``read`` a :class:`HingeScore`: ``f`` (D,) the
        score's coefficients (zero outside ``f_columns``), ``theta`` (2, D) the dual prices θ of
        the indicator moments (zero outside ``theta_columns``), ``nu`` the dual price of Σ p = 1.

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
    nf = f_columns.size
    fpos = np.full(D, -1, dtype=np.int64)
    fpos[f_columns] = np.arange(nf)
    # variables: ν | θ⁺ = μ⁻ | θ⁻ = μ⁺ | f (nf) | messages and root epigraphs
    model = one_shot_model(tau, lam, theta_columns, "the hinge-loss minimax LP", layout="minus-first")
    mt = MuTerms(model, D, [(0,), (1,)])
    f0 = model.n_cols
    nvar = f0 + nf

    def entries(y: int, with_f: bool, row: np.ndarray, psi_cols: np.ndarray,
                vals: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(row, LP column, value) of vals[t]·(μ[y, psi_cols[t]] − s_y·f[psi_cols[t]]) (f if ``with_f``) in row[t] (μ =
        −θ)."""
        R, cols, vs = mt.entries(y, row, psi_cols, vals)
        if not with_f:
            return R, cols, vs
        q = fpos[psi_cols]
        onf = q >= 0
        return (np.concatenate([R, row[onf]]), np.concatenate([cols, f0 + q[onf]]),
                np.concatenate([vs, -(2.0 * y - 1.0) * vals[onf]]))

    rows = RowBuffer()
    for y in range(K):
        for with_f, rhs in ((False, 0.0), (True, -1.0)):
            fn = lambda r_, c_, v_, y=y, w=with_f: entries(y, w, r_, c_, v_)  # noqa: E731
            roots, nvar = forest_max_rows(oracle, dead[y], fn, nvar, rows, tag=(y, with_f))
            if roots is None:  # no x is allowed with label y: no constraint
                continue
            # max_x g(x) ≤ Σ t_r ≤ ν + rhs
            rows.add(np.concatenate([roots, [0]]), np.concatenate([np.ones(len(roots)), [-1.0]]), rhs, (y, with_f, 2))
    rows.solve(model, nvar)  # f and the messages free
    theta = -model.mu.reshape(K, D)
    f = np.zeros(D)
    f[f_columns] = model.x[f0 : f0 + nf]
    value = model.objective
    return MinimaxSolution(mu=np.stack([-0.5 * f, 0.5 * f]), tau=np.asarray(tau, dtype=np.float64).reshape(K, D),
                           lam=np.asarray(lam, dtype=np.float64).reshape(K, D), phi=0.0, value=value,
                           iterations=[value], lower=[], upper=[], converged=True, n_rows=rows.n, impossible=dead,
                           bound=np.inf, kind="hinge", simplex_iterations=model.lp.simplex_iterations,
                           lp_columns=model.n_cols, read=HingeScore(f, theta, model.nu))


class Hinge(OnSubmap):
    """``hinge``: the worst-case hinge loss LP on the given forest (``One(edges)``).

    LP columns: f in the reference coding minus the cells empty for BOTH labels (every (x, y)
    through one is outside U: f = 0 there, "no interaction seen"); θ on the entries with
    τ + λ > 0, reference-coded like f when λ = 0 everywhere. The finish keeps the score (its
    empty cells are the LP's dead cells); the certificate is the LP's value (``kind="hinge"``).
    """

    stage: ClassVar[str] = "hinge"

    def solve_on(self, problem: MinimaxProblem, pmap: PairwiseFeatureMap, keep: np.ndarray) -> MinimaxSolution:
        tau, lam = problem.tau[:, keep], problem.lam[:, keep]
        empty = empty_cells(pmap, tau, lam)
        ref = reference_mask(pmap, tau)
        tmask = ~empty
        if not np.any(lam > 0):
            tmask &= ref[None, :]
        return solve_hinge(ForestOracle(pmap, 2), tau, lam, np.flatnonzero(ref & ~empty.all(axis=0)),
                           np.flatnonzero(tmask.ravel()), empty)

    def finish(self, problem: MinimaxProblem, raw: MinimaxSolution, options: Any) -> Finished:
        pmap, keep = submodel(problem, raw.edges)
        return Finished(pmap, raw.mu, problem.tau[:, keep], problem.lam[:, keep], raw.impossible, float(raw.phi),
                        float(options.bound))


HINGE = register(Hinge("hinge", "the worst-case hinge loss LP on a forest", ("DCC",), max_order=2, graph="forest",
                       classes=2))
