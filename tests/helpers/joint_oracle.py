"""DESIGN.md's test oracle: the minimax 0-1 error over every joint p(x, y) whose moments lie in a box, an LP over
the enumerated joint (small domains), shared by the MRC's tests and the hidden-cell tests."""

from __future__ import annotations

import itertools

import numpy as np
from scipy.optimize import linprog

from tests.helpers.quantities import blocks_of, psi_dim_of


def domain_phi(summary):
    """All domain points: list of (codes row for X, Ψ(x) vector)."""
    cb = summary.codebook
    blocks = blocks_of(summary)
    D = psi_dim_of(summary)
    choices = []
    for b in blocks:
        if b.kind == "onehot":
            choices.append([(float(a), b.offset + a, 1.0) for a in range(b.size)])
        else:
            choices.append([(b.lo, b.offset, b.lo), (b.hi, b.offset, b.hi)])
    out = []
    for combo in itertools.product(*choices):
        x = np.array([c[0] for c in combo])
        psi = np.zeros(D)
        for _, col, val in combo:
            psi[col] += val
        out.append((x, psi))
    assert len(cb.features) == len(blocks)
    return out


def brute_force_R(summary, tau, lam):
    """max_{p in U} Bayes error, an LP over the full joint (variables p(x,y) and t_x)."""
    dom = domain_phi(summary)
    K, D = tau.shape
    nx = len(dom)
    nv = nx * K + nx
    c = np.zeros(nv)
    c[: nx * K] = -1.0
    c[nx * K :] = 1.0
    rows, rhs = [], []
    for xi in range(nx):
        for y in range(K):
            r = np.zeros(nv)
            r[xi * K + y] = 1.0
            r[nx * K + xi] = -1.0
            rows.append(r)
            rhs.append(0.0)
    E = np.zeros((K * D, nv))
    for xi, (_, psi) in enumerate(dom):
        for y in range(K):
            E[y * D : (y + 1) * D, xi * K + y] = psi
    A = np.vstack([np.array(rows), E, -E])
    b = np.concatenate([rhs, (tau + lam).ravel(), -(tau - lam).ravel()])
    Aeq = np.zeros((1, nv))
    Aeq[0, : nx * K] = 1.0
    r = linprog(c, A_ub=A, b_ub=b, A_eq=Aeq, b_eq=[1.0], bounds=[(0, None)] * nv, method="highs")
    assert r.status == 0, r.message
    return -r.fun


