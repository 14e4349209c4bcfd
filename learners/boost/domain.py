"""The inner maximisation of the monomial minimax problem over the WHOLE domain, exactly.

For weights w_u on monomials m_u the separation problem is

    max_{x ∈ X}  s(x) = Σ_u w_u m_u(x),

X the product of the codebook features' code sets. Only the features the monomials with
w_u ≠ 0 read matter (the others do not change s). :func:`maximize_monomial_sum` solves it

- by enumeration when the product of those features' sizes is at most ``enum_limit``;
- otherwise as a MILP on HiGHS (through :mod:`marg.lp`): one-hot binaries z_{f,a}
  (Σ_a z_{f,a} = 1), a monomial's value on feature f the linear
  ℓ_{u,f} = Σ_{a: m_u true at a} z_{f,a}, and for a monomial over ≥ 2 features a variable
  t_u ∈ [0, 1] with t_u ≤ ℓ_{u,f} (if w_u > 0) or t_u ≥ Σ_f ℓ_{u,f} − (k − 1) (if w_u < 0) —
  the linearisation of the product, exact at a maximum because each t_u is pushed to its
  bound in the direction of w_u.

Both return an upper bound on the maximum (``upper``; the value itself unless the MILP hit its
time limit, when it is HiGHS' proven dual bound) and a maximiser (codes of the features read;
−1 for features free to take any value).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from marg.errors import InputError
from marg.lp import INF, HighsLP, Status, solver_error

from .literals import BinaryTest, Monomial


@dataclass(frozen=True)
class DomainMax:
    """The maximum of Σ_u w_u m_u(x) over the domain.

    Attributes
    ----------
    value : float
        s(x) at the returned maximiser.
    upper : float
        A proven upper bound on the maximum (= ``value`` when ``exact``).
    x : (p,) int64
        Codes of the maximiser, −1 on features no weighted monomial reads.
    exact : bool
    method : {"enumerate", "milp"}
    """

    value: float
    upper: float
    x: np.ndarray
    exact: bool
    method: str


def _feature_masks(monomial: Monomial, tests: Sequence[BinaryTest]) -> dict[int, np.ndarray]:
    """For each feature (codebook index) the monomial reads: the codes where its literals there hold."""
    out: dict[int, np.ndarray] = {}
    for lit in monomial:
        t = tests[lit.test]
        truth = t.lookup() if lit.positive else ~t.lookup()
        out[t.index] = out[t.index] & truth if t.index in out else truth.copy()
    return out


def maximize_monomial_sum(monomials: Sequence[Monomial], weights: np.ndarray, tests: Sequence[BinaryTest],
                          sizes: Sequence[int], enum_limit: int = 1 << 16, time_limit: float | None = None,
                          max_nodes: int | None = None) -> DomainMax:
    """max_x Σ_u w_u m_u(x) over the product domain (see the module docstring).

    Parameters
    ----------
    monomials : sequence of monomials (tuples of Literal over ``tests``)
    weights : (U,) float
    tests : sequence of BinaryTest
    sizes : (p,) int
        Number of codes of every codebook feature.
    enum_limit : int
        Enumerate when the product of the read features' sizes is at most this.
    time_limit : float, optional
        Seconds for the MILP; on expiry ``upper`` is the proven dual bound.
    max_nodes : int, optional
        Branch-and-bound nodes of the MILP at most (HiGHS ``mip_max_nodes``; a work budget,
        the same on any machine); there too ``upper`` is the proven dual bound.
    """
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    if w.shape[0] != len(monomials) or not np.all(np.isfinite(w)):
        raise InputError(f"weights must be {len(monomials)} finite numbers")
    p = len(sizes)
    keep = [u for u in range(len(monomials)) if w[u] != 0.0]
    masks = [_feature_masks(monomials[u], tests) for u in keep]
    wk = w[keep]
    const = float(sum(wk[k] for k, m in enumerate(masks) if not m))
    feats = sorted({f for m in masks for f in m})
    x = np.full(p, -1, dtype=np.int64)
    if not feats:
        return DomainMax(const, const, x, True, "enumerate")
    # a literal that is false everywhere on a feature makes the monomial the zero function
    live = [k for k, m in enumerate(masks) if m and all(v.any() for v in m.values())]
    total = 1
    for f in feats:
        total *= int(sizes[f])
        if total > enum_limit:
            break
    if total <= enum_limit:
        return _enumerate(masks, wk, live, feats, sizes, const, x)
    return _milp(masks, wk, live, feats, sizes, const, x, time_limit, max_nodes)


def _enumerate(masks, wk, live, feats, sizes, const, x) -> DomainMax:
    grids = np.indices([int(sizes[f]) for f in feats]).reshape(len(feats), -1)  # (F, G)
    pos = {f: k for k, f in enumerate(feats)}
    s = np.full(grids.shape[1], const)
    for k in live:
        on = np.ones(grids.shape[1], dtype=bool)
        for f, truth in masks[k].items():
            on &= truth[grids[pos[f]]]
        s += wk[k] * on
    g = int(np.argmax(s))
    x[feats] = grids[:, g]
    return DomainMax(float(s[g]), float(s[g]), x, True, "enumerate")


def _milp(masks, wk, live, feats, sizes, const, x, time_limit, max_nodes=None) -> DomainMax:
    lp = HighsLP(solver="choose", presolve=True, mip_rel_gap=0.0, mip_abs_gap=1e-9)
    if max_nodes is not None:
        lp.set_option("mip_max_nodes", int(max_nodes))
    off = {}
    n = 0
    for f in feats:
        off[f] = n
        n += int(sizes[f])
    # z columns (binary), then one t column per multi-feature monomial; minimise −s
    cost = np.zeros(n)
    t_of: dict[int, int] = {}
    t_cost: list[float] = []
    for k in live:
        m = masks[k]
        if len(m) == 1:
            (f, truth), = m.items()
            cost[off[f] + np.flatnonzero(truth)] -= wk[k]
        else:
            t_of[k] = n + len(t_cost)
            t_cost.append(-wk[k])
    lp.add_cols(np.concatenate([cost, t_cost]), np.zeros(n + len(t_cost)), np.ones(n + len(t_cost)))
    lp.set_integer(np.arange(n))
    starts, idx, val, lo, hi = [], [], [], [], []

    def row(cols, vals, lower, upper):
        starts.append(len(idx))
        idx.extend(int(c) for c in cols)
        val.extend(float(v) for v in vals)
        lo.append(lower)
        hi.append(upper)

    for f in feats:
        row(off[f] + np.arange(int(sizes[f])), np.ones(int(sizes[f])), 1.0, 1.0)
    for k, t in t_of.items():
        m = masks[k]
        if wk[k] > 0:  # t ≤ ℓ_f for every feature
            for f, truth in m.items():
                cols = off[f] + np.flatnonzero(truth)
                row(np.concatenate([[t], cols]), np.concatenate([[1.0], -np.ones(cols.size)]), -INF, 0.0)
        else:  # t ≥ Σ_f ℓ_f − (k − 1)
            cols = np.concatenate([off[f] + np.flatnonzero(truth) for f, truth in m.items()])
            row(np.concatenate([[t], cols]), np.concatenate([[1.0], -np.ones(cols.size)]), 1.0 - len(m), INF)
    lp.add_rows(lo, hi, starts, idx, val)

    r = lp.solve(deadline=None if time_limit is None else time.perf_counter() + float(time_limit))
    if r.status not in (Status.OPTIMAL, Status.LIMIT) or not r.has_solution:
        raise solver_error("the monomial separation MILP", r)
    z = np.round(r.x[:n]).astype(np.int64)
    for f in feats:
        x[f] = int(np.argmax(z[off[f]: off[f] + int(sizes[f])]))
    value = _evaluate(masks, wk, live, x, const)
    exact = r.status is Status.OPTIMAL
    upper = value if exact else max(value, const - float(r.dual_bound))
    return DomainMax(value, float(upper), x, exact, "milp")


def _evaluate(masks, wk, live, x, const) -> float:
    s = const
    for k in live:
        if all(truth[x[f]] for f, truth in masks[k].items()):
            s += wk[k]
    return float(s)


def brute_force_max(monomials: Sequence[Monomial], weights: np.ndarray, tests: Sequence[BinaryTest],
                    sizes: Sequence[int]) -> float:
    """max_x Σ_u w_u m_u(x) by enumerating every x of the whole domain (tests: tiny domains)."""
    w = np.asarray(weights, dtype=np.float64)
    masks = [_feature_masks(m, tests) for m in monomials]
    best = -np.inf
    for x in itertools.product(*[range(int(s)) for s in sizes]):
        s = sum(w[u] for u, m in enumerate(masks) if all(truth[x[f]] for f, truth in m.items()))
        best = max(best, float(s))
    return best
