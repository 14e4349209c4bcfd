"""How one release's privacy budget is split across its tables (sequential composition).

The k tables of one release are k measurements of the same patients, so their costs add
(pure DP: ε's add; zCDP: ρ's add) and the total is split in proportion to per-table
weights. The default, :func:`half_split_weights`, gives the first-order tables (the label
table, ``N[x_i, y]``, moment tables) half of the budget and the pair tables the other half,
equally within each kind. The alternative ``"least-squares"``
(:func:`least_squares_weights`) minimises the noise **as modelled to reach a learner's
objective**: Σ_T c_T·σ_T² with ``c_T = |T|·p^(−2·o_T)``, where |T| is the
number of released numbers of table T, o_T the number of features in it (0 for the label
table, 1 for ``N[x_i, y]`` and moment tables, 2 for ``N[x_i, x_j, y]``) and p the number of
features released. The weight ``p^(−o)`` per cell is the size of the coefficient a cell gets
in the objectives that read it: an additive score over p features has terms of order 1/p,
first-order cells enter linearly (τ, d: one term), pair cells through products of two
terms (Q: zᵢzⱼ). Then

- Gaussian (zCDP, L2 sensitivity 1 per count table): ρ_T = 1/(2σ_T²), Σ ρ_T = ρ;
  minimising Σ c_T/(2ρ_T) gives ρ_T ∝ √c_T (Lagrange: c_T/ρ_T² constant).
- Laplace (pure DP, L1 sensitivity 1): σ_T² = 2/ε_T², Σ ε_T = ε; minimising Σ 2c_T/ε_T²
  gives ε_T ∝ c_T^{1/3}.

Measured on the default path (bench/privacy.py, BENCHMARKS.md "Differential privacy"),
the half split erred least on adult at ε = 0.25 and 1 and on house-votes-84 at ε = 1,
ahead of this model and of plain least squares over the counts (all c_T = |T|), so it is
the default; ``--allocation least-squares`` and ``--first-order-share`` remain.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from marg.errors import InputError

from .counts.noise_kinds import noise_of

ALLOCATIONS = ("half", "least-squares")  # --allocation; the first is the default


def table_size(t: Any) -> int:
    """The number of released numbers of a table (``t.counts.size`` or ``t.size``)."""
    size = getattr(t, "size", None)
    if size is None:
        size = int(np.asarray(t.counts).size)
    return int(size)


def least_squares_weights(sizes: Sequence[int], mechanism: str, orders: Sequence[int] | None = None,
                          p: int | None = None) -> np.ndarray:
    """Weights minimising Σ_T c_T·σ_T², ``c_T = |T|·p^(−2·o_T)``, for a fixed total budget.

    Parameters
    ----------
    sizes : sequence of int, shape (k,)
        Released numbers per table, |T| ≥ 1.
    mechanism : {"gaussian", "laplace", …}
        A registered noise (:mod:`marg.marginals.counts.noise_kinds`): it answers the weights.
    orders : sequence of int, shape (k,), optional
        Features per table o_T (None: all 0, i.e. plain least squares over the counts).
    p : int, optional
        Features released (≥ 1; needed with ``orders``).

    Returns
    -------
    ndarray, shape (k,)
        ``√c_T`` (Gaussian) or ``c_T^{1/3}`` (Laplace) — the noise's ``least_squares`` —, normalised to sum 1.
    """
    s = np.asarray(sizes, dtype=np.float64)
    if s.size == 0 or np.any(s < 1):
        raise InputError(f"table sizes must be >= 1, got {s.tolist()!r}")
    c = s.copy()
    if orders is not None:
        o = np.asarray(orders, dtype=np.float64)
        if o.shape != s.shape or p is None or p < 1:
            raise InputError(f"orders need one value per table and p >= 1, got {o.shape} and {p!r}")
        c = s * float(p) ** (-2.0 * o)
    w = noise_of(mechanism).least_squares(c)
    return w / w.sum()


def table_order(t: Any, label: str | None) -> int:
    """Features in a table: its attributes other than ``label`` (a moment table: 1)."""
    if t.kind == "moments":
        return 1
    return sum(1 for a in t.clique if a != label)


def is_first_order(t: Any, label: str | None) -> bool:
    """A moment table, the label table or ``N[x_i, y]``: at most one feature besides ``label``
    (without ``label``: cliques of size ≤ 2)."""
    if t.kind == "moments":
        return True
    if label is None:
        return len(t.clique) <= 2
    return sum(1 for a in t.clique if a != label) <= 1


def half_split_weights(tables: Sequence[Any], label: str | None = None, first_share: float = 0.5) -> np.ndarray:
    """First-order tables share ``first_share`` of the budget equally, the others the rest.

    Returns
    -------
    ndarray, shape (k,)
        ``first_share/k1`` for each of the k1 first-order tables and ``(1−first_share)/k2``
        for each of the k2 others (``1/k1`` or ``1/k2`` when one kind is absent).
    """
    if not 0.0 < first_share <= 1.0:
        raise InputError(f"--first-order-share must be in (0, 1], got {first_share}")
    first = np.array([is_first_order(t, label) for t in tables], dtype=bool)
    k1, k2 = int(first.sum()), int((~first).sum())
    w = np.zeros(len(tables))
    if k1 and k2:
        if first_share == 1.0:
            raise InputError("--first-order-share 1 leaves no budget for the pair tables")
        w[first], w[~first] = first_share / k1, (1.0 - first_share) / k2
    elif k1:
        w[:] = 1.0 / k1
    elif k2:
        w[:] = 1.0 / k2
    return w


def resolve_weights(tables: Sequence[Any], weights: Any, label: str | None, mechanism: str) -> np.ndarray:
    """Normalised weights, shape (k,): ``None`` or ``"half"`` → :func:`half_split_weights`;
    ``"least-squares"`` → :func:`least_squares_weights`; a sequence (one per table); or a
    mapping keyed by clique tuple, table name or ``"a,b,y"``."""
    if weights is None or (isinstance(weights, str) and weights == "half"):
        w = half_split_weights(tables, label)
        return w / w.sum()
    if isinstance(weights, str):
        if weights != "least-squares":
            raise InputError(f"unknown allocation {weights!r} (expected one of {', '.join(ALLOCATIONS)})")
        orders = [table_order(t, label) for t in tables]
        p = len({a for t in tables for a in t.clique if a != label}) if label is not None else None
        if label is None:  # without the label's name: plain least squares over the counts
            return least_squares_weights([table_size(t) for t in tables], mechanism)
        return least_squares_weights([table_size(t) for t in tables], mechanism, orders, max(1, p))
    if isinstance(weights, Mapping):
        w = np.empty(len(tables))
        for k, t in enumerate(tables):
            for key in (t.clique, t.name, ",".join(t.clique)):
                if key in weights:
                    w[k] = float(weights[key])
                    break
            else:
                raise InputError(f"weights give no value for table {t.name}")
    else:
        w = np.asarray(weights, dtype=np.float64).ravel()
        if w.shape != (len(tables),):
            raise InputError(f"weights must have one value per table ({len(tables)}), got {w.shape[0]}")
    if not np.all(np.isfinite(w)) or np.any(w <= 0):
        bad = w[~(np.isfinite(w) & (w > 0))][0]
        raise InputError(f"budget weights must be finite and > 0, got {bad!r}")
    return w / w.sum()


def split_budget(total: float, weights: np.ndarray) -> np.ndarray:
    """Shares ``total · w_t / Σ w`` (shape (k,)); they add up to ``total``."""
    w = np.asarray(weights, dtype=np.float64)
    return float(total) * w / w.sum()
