"""Empty cells: definite coefficients for entries no distribution of the uncertainty set reaches.

An empty cell is an indicator entry with τ + λ = 0 (level a of feature i — or a pair of
levels — never seen with label y in an exact release). It costs nothing in the objective and
lowering its μ only relaxes rows, so the LP leaves it anywhere below some value (or, where
it is excluded from the LP, at −∞). The fixers here give it a definite value without
changing R(μ), according to one policy vocabulary (:data:`POLICIES`):

- ``"impossible"``: label y is ruled out wherever it is empty (every distribution of the
  uncertainty set gives it probability 0 there, so ruling it out can only lower the error
  under each of them); MRC's historical name for it is ``"veto"``;
- ``"free"``: the rule stays as uncommitted as the worst case allows, never favouring the
  unseen label;
- ``"evidence"``: ``"impossible"`` only where the absence is significant, else ``"free"``;
- ``"keep"``: the LP's value (no fixing; first-order MRC only).

A level empty for EVERY label (an unseen level or pair of levels) always gets a label-
neutral value. :func:`fix_empty_cells_first_order` serves the first-order MRC,
:func:`fix_empty_cells_forest` a forest (max-marginals) and :func:`fix_empty_cells_local`
the local-polytope bound (at its reparametrisation).
"""

from __future__ import annotations

from typing import cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from marg.errors import InputError

from ..features.blocks import FeatureMap
from ..features.pairwise import PairwiseFeatureMap
from .forest import ForestOracle
from .local import GraphLayout, local_phi
from .problem import subsets_for

POLICIES = ("evidence", "free", "impossible")
"""Policies of the forest and local fixers (DCC)."""
FIRST_ORDER_POLICIES = ("impossible", "keep")
"""Policies of the first-order fixer (MRC); ``"veto"`` is read as ``"impossible"``."""
ALIASES = {"veto": "impossible"}


def policy_name(policy: str, allowed: tuple[str, ...], who: str) -> str:
    """The canonical name of an empty-cell ``policy`` (aliases resolved), or an InputError naming it."""
    name = ALIASES.get(policy, policy)
    if name not in allowed:
        raise InputError(f"unknown empty-cell policy {policy!r} for {who} (expected one of {', '.join(allowed)})")
    return name


def fix_empty_cells_first_order(fmap: FeatureMap, mu: np.ndarray, tau: np.ndarray, lam: np.ndarray, bound: ArrayLike,
                                blocks: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Give empty one-hot cells (τ + λ = 0) a definite coefficient without changing R(μ).

    Such a column costs nothing in the objective and lowering it only relaxes rows, so the
    LP leaves it anywhere below some value. Two cases (blocks in ``blocks`` only, all if
    None):

    - level a of block i is empty for every label ("unseen level"): μ[y, i, a] = c_i for
      all y, c_i = min_C max_{a' seen} mean_{y∈C} μ[y, i, a'] — the largest label-neutral
      constant that keeps every row with x_i = a dominated by a row with a seen level;
    - empty for some labels only: μ[y, i, a] = −B (label y is impossible there: every
      distribution in the uncertainty set gives it probability 0, so ruling it out can only
      lower the error under each of them).

    Neither changes φ(μ) (rows through the cell stay dominated) nor the objective.

    Returns
    -------
    mu : ndarray (K, D)
    impossible : ndarray of bool (K, D)
    """
    K, D = mu.shape
    mu = mu.copy()
    empty = np.zeros((K, D), dtype=bool)
    B = np.asarray(bound, dtype=np.float64).reshape(K, D)
    subsets = subsets_for(K).subsets
    ids = range(fmap.n_blocks) if blocks is None else [int(i) for i in blocks]
    for i in ids:
        blk = fmap.blocks[i]
        if blk.kind != "onehot":
            continue
        sl = blk.slice
        e = (tau[:, sl] + lam[:, sl]) <= 0.0
        if not e.any():
            continue
        empty[:, sl] = e
        part = e & ~e.all(axis=0, keepdims=True)
        m = mu[:, sl]
        m[part] = -B[:, sl][part]
        unseen = e.all(axis=0)
        seen = ~unseen
        if unseen.any() and seen.any():
            c = min(float(np.max(m[list(C)][:, seen].mean(axis=0))) for C in subsets)
            m[:, unseen] = c
        mu[:, sl] = m
    return mu, empty


def empty_cells(pmap: PairwiseFeatureMap, tau: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """Empty cells: one-hot node and edge entries with τ + λ = 0 (never raw numeric columns), (K, D) bool."""
    empty: NDArray[np.bool_] = ((tau + lam) <= 0.0) & pmap.indicator_columns()[None, :]
    return empty


def fix_empty_cells_forest(
    oracle: ForestOracle,
    mu: np.ndarray,
    tau: np.ndarray,
    lam: np.ndarray,
    policy: str = "evidence",
    n: float | None = None,
    alpha: float = 0.05,
) -> tuple[np.ndarray, np.ndarray]:
    """Give empty cells (τ + λ = 0) definite coefficients without changing R(μ).

    An empty cell costs nothing in the objective and lowering its μ only relaxes rows, so
    the minimax problem leaves it anywhere below some value (the LP treats it as −∞). All
    empty cells first go to a value L low enough that no row through one is a maximum
    (L = −(2U + 10), U = Σ_y Σ_blocks max |μ| over the other cells), so φ(μ) is the LP's.
    Then, factor by factor (nodes, then edges), with max-marginals recomputed each time so
    that rows crossing several raised cells stay feasible:

    - a cell empty for every label (an unseen level or pair of levels) gets the label-
      neutral value min(0, c), c = min_C (|C|·φ + 1 − M_C)/|C| the largest keeping φ, M_C
      the max over x through the cell of Σ_{y∈C} Φ(x,y)ᵀμ without the cell's own term;
    - a cell empty for some labels only: ``policy="free"`` raises each such label's entry
      to min(c_y, the largest entry of a label seen there), c_y = min_{C∋y} |C|·φ + 1 −
      M_C^{(−y)} the largest value keeping φ (the rule stays as uncommitted as the worst
      case allows, never favouring the unseen label); ``policy="impossible"`` leaves it at
      L (the label is ruled out there); ``policy="evidence"`` rules label y out only when
      its absence is significant: with n_c = n·Σ_y' τ[y', cell] rows in the cell and the
      class prior π_y, (1 − π_y)^{n_c} ≤ ``alpha``/m (the chance of seeing no y among n_c
      rows if the cell told nothing about the label; Bonferroni over the m such (label,
      cell) entries, so ``alpha`` is a family-wise level), and raises it as ``"free"``
      otherwise.

    Neither step changes the objective (τ = λ = 0 there) nor raises φ.

    Parameters
    ----------
    oracle : ForestOracle
        Over the model's map, all edges active, no excluded cells.
    mu, tau, lam : ndarray (K, D)
    policy : {"evidence", "free", "impossible"}
    n : float
        Rows behind τ (needed by ``"evidence"``).
    alpha : float
        Family-wise significance level of ``"evidence"``.

    Returns
    -------
    mu : ndarray (K, D)
    empty : ndarray of bool (K, D)
    """
    if policy not in POLICIES:
        raise InputError(f"unknown empty-cell policy {policy!r} (expected one of {', '.join(POLICIES)})")
    if policy == "evidence" and not (n is not None and n > 0):
        raise InputError(f"the 'evidence' empty-cell policy needs the row count n > 0, got {n!r}")
    pm = oracle.pmap
    K, D = mu.shape
    mu = mu.copy()
    empty = empty_cells(pm, tau, lam)
    if not empty.any():
        return mu, empty
    factors: list[tuple[str, int, np.ndarray]] = []
    for i, b in enumerate(pm.blocks):
        if b.kind == "onehot":
            factors.append(("node", i, np.arange(b.offset, b.offset + b.size)))
    for e in range(pm.n_edges):
        factors.append(("edge", e, pm.edge_columns(e)))
    held = np.where(empty, 0.0, np.abs(mu))
    U = sum(float(held[:, cols].max(axis=1).sum()) for _, _, cols in factors)
    for b in pm.blocks:
        if b.kind == "numeric":
            U += float(np.abs(mu[:, b.offset]).sum()) * max(abs(b.lo), abs(b.hi))
    mu[empty] = -(2.0 * U + 10.0)
    unseen, part = _empty_targets(pm, tau, empty, policy, n, alpha)
    phi = oracle.phi(mu.ravel())
    sizes = oracle.sizes[:, None]
    member = oracle.member
    for kind, idx, cols in factors:
        u = unseen[cols]
        py = part[:, cols]
        if not (u.any() or py.any()):
            continue
        if u.any():
            M = _factor_max_marginals(oracle, mu, kind, idx, cols)
            c = np.minimum(np.min((sizes * phi + 1.0 - M) / sizes, axis=0), 0.0)
            mu[:, cols[u]] = c[u][None, :]
        for y in range(K):
            if not py[y].any():
                continue
            M = _factor_max_marginals(oracle, mu, kind, idx, cols)
            own = member @ mu[:, cols]
            My = M + own - member[:, [y]] * mu[y, cols][None, :]  # without label y's own entry
            inC = member[:, y] > 0
            c = np.min(sizes[inC] * phi + 1.0 - My[inC], axis=0)
            seen = np.where(empty[:, cols], -np.inf, mu[:, cols]).max(axis=0)  # best observed label
            mu[y, cols[py[y]]] = np.minimum(c, seen)[py[y]]
    return mu, empty


def _empty_targets(pm: PairwiseFeatureMap, tau: np.ndarray, empty: np.ndarray, policy: str, n: float | None,
                   alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """The empty cells to raise: ``unseen`` (D,) cells empty for every label, and ``part``
    (K, D) the (label, cell) entries empty for some labels only that ``policy`` raises."""
    K = tau.shape[0]
    unseen = cast("NDArray[np.bool_]", empty.all(axis=0))  # numpy types an axis reduction as array or scalar
    part = empty & ~unseen[None, :]
    if policy == "impossible":
        part = np.zeros_like(part)
    elif policy == "evidence":
        first = next((b for b in pm.blocks if b.kind == "onehot"), None)
        prior = tau[:, first.slice].sum(axis=1) if first is not None else np.full(K, 1.0 / K)
        assert n is not None  # the caller refuses "evidence" without n
        n_cell = float(n) * tau.sum(axis=0)  # (D,) rows in each cell
        chance = (1.0 - np.clip(prior, 0.0, 1.0))[:, None] ** n_cell[None, :]
        part &= chance > alpha / max(1, int(part.sum()))  # significant absences (Bonferroni) stay ruled out
    return unseen, part


def _factor_max_marginals(oracle: ForestOracle, mu: np.ndarray, kind: str, idx: int, cols: np.ndarray) -> np.ndarray:
    """(nC, cells): max over x through each cell of the factor of Σ_{y∈C} Φ(x,y)ᵀμ without the factor's own term."""
    node_mm, edge_mm = oracle.max_marginals(mu.ravel())
    if kind == "node":
        node: NDArray[np.float64] = node_mm[idx] - oracle.member @ mu[:, cols]
        return node
    edge = edge_mm[idx]
    assert edge is not None, "an edge factor is an active edge"
    return edge.reshape(len(oracle.subsets), -1)


def fix_empty_cells_local(
    pmap: PairwiseFeatureMap,
    mu: np.ndarray,
    tau: np.ndarray,
    lam: np.ndarray,
    offsets: np.ndarray,
    nu: float,
    policy: str = "evidence",
    n: float | None = None,
    alpha: float = 0.05,
) -> tuple[np.ndarray, np.ndarray, float]:
    """:func:`fix_empty_cells_forest` for the local-polytope LP: definite values for the empty
    cells (τ + λ = 0) that keep the certified bound φ_L ≤ ν − 1 at the LP's reparametrisation.

    With δ fixed the bound decomposes by factor: per subset C, Σ_f u_f^C ≤ T_C =
    |C|(ν − 1) + 1 with u_f^C the largest row of factor f (:class:`_GraphLayout`). Empty
    cells first go to a value L below every other row (so each u_f^C is the LP's); then,
    factor by factor (nodes, then edges), they are raised as far as the slack
    T_C − Σ_f u_f^C and the factor's own largest row allow — the local stand-in for the
    forest's max-marginals (so more conservative): an unseen cell (empty for every label)
    to the label-neutral min(0, c), a cell empty for some labels per ``policy`` exactly as
    in :func:`fix_empty_cells_forest` (``"free"``: min(c_y, the best seen label);
    ``"impossible"``: stays at L; ``"evidence"``: stays at L only for significant absences).

    Returns
    -------
    mu : ndarray (K, D)
    empty : ndarray of bool (K, D)
    phi : float
        φ_L(μ; δ) of the returned μ (≤ ν − 1 up to LP tolerances).
    """
    if policy not in POLICIES:
        raise InputError(f"unknown empty-cell policy {policy!r} (expected one of {', '.join(POLICIES)})")
    if policy == "evidence" and not (n is not None and n > 0):
        raise InputError(f"the 'evidence' empty-cell policy needs the row count n > 0, got {n!r}")
    K, D = mu.shape
    mu = mu.copy()
    g = GraphLayout(pmap)
    ls = subsets_for(K)
    member = ls.member
    sizes = member.sum(axis=1)
    empty = empty_cells(pmap, tau, lam)
    if not empty.any():
        return mu, empty, local_phi(pmap, mu, offsets)
    fin = g.row_values(member @ np.where(empty, 0.0, mu), offsets)
    crossed = (member @ empty) > 0
    u_alive = g.factor_max(np.where(crossed, -np.inf, fin))
    big = float(np.max(np.abs(fin))) + float(np.max(np.abs(u_alive[np.isfinite(u_alive)]), initial=0.0))
    mu[empty] = -(2.0 * big + 10.0)
    unseen, part = _empty_targets(pmap, tau, empty, policy, n, alpha)
    T = sizes * (float(nu) - 1.0) + 1.0
    val = g.row_values(member @ mu, offsets)
    u = g.factor_max(val)
    slack = T - u.sum(axis=1)
    ends = np.append(g.starts[1:], D)
    for f in range(g.n + g.E):
        cols = np.arange(g.starts[f], ends[f])
        if f < g.n and pmap.blocks[f].kind != "onehot":
            continue
        uu = unseen[cols]
        py = part[:, cols]
        if not (uu.any() or py.any()):
            continue

        def update() -> None:
            val[:, cols] = member @ mu[:, cols] + offsets[:, cols]  # one-hot factors only
            new = np.maximum(u[:, f], val[:, cols].max(axis=1))
            slack[:] -= new - u[:, f]
            u[:, f] = new

        if uu.any():  # every label gets c: the row is |C|·c + offset
            cap = (u[:, f, None] + slack[:, None] - offsets[:, cols]) / sizes[:, None]
            c = np.minimum(cap.min(axis=0), 0.0)
            mu[:, cols[uu]] = c[uu][None, :]
            update()
        for y in range(K):
            if not py[y].any():
                continue
            inC = member[:, y] > 0
            own = val[inC][:, cols] - mu[y, cols][None, :]
            c = (u[inC, f][:, None] + slack[inC][:, None] - own).min(axis=0)
            seen = np.where(empty[:, cols], -np.inf, mu[:, cols]).max(axis=0)
            mu[y, cols[py[y]]] = np.minimum(c, seen)[py[y]]
            update()
    return mu, empty, local_phi(pmap, mu, offsets)
