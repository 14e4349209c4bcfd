"""How one release's privacy budget is split across its tables (sequential composition).

The k tables of one release are k measurements of the same patients, so their costs add
(pure DP: ε's add; zCDP: ρ's add) and the total is split in proportion to per-table
weights. The default, :func:`least_squares_weights`, minimises the **total squared error
of the released counts**, Σ_T |T|·σ_T², for the given total:

- Gaussian (zCDP, L2 sensitivity 1 per count table): ρ_T = 1/(2σ_T²) with Σ ρ_T = ρ.
  Minimising Σ |T|/(2ρ_T) gives ρ_T ∝ √|T| (Lagrange: |T|/ρ_T² constant).
- Laplace (pure DP, L1 sensitivity 1): σ_T² = 2/ε_T² with Σ ε_T = ε. Minimising
  Σ 2|T|/ε_T² gives ε_T ∝ |T|^{1/3}.

|T| is the number of released numbers of the table (cells of a count table, 2K of a moment
table). Every learner reads sums of cells (τ, Q, d are cell sums divided by n̂), so the
summed squared count error is the noise that reaches it; on adult (3 sites, all 91 pairs,
Gaussian at ε = 1, δ = 1e-6) Rényi's test error with this split equals or beats the split
that gives first-order tables half of the budget (BENCHMARKS.md, "Privacy"). The half split
(:func:`half_split_weights`) remains available (``--first-order-share``), as are explicit
weights.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from marg.errors import InputError

ALLOCATION = "least-squares"  # the name of the default rule, recorded in bundles


def table_size(t: Any) -> int:
    """The number of released numbers of a table (``t.counts.size`` or ``t.size``)."""
    size = getattr(t, "size", None)
    if size is None:
        size = int(np.asarray(t.counts).size)
    return int(size)


def least_squares_weights(sizes: Sequence[int], mechanism: str) -> np.ndarray:
    """Weights minimising Σ_T |T|·σ_T² for a fixed total budget.

    Parameters
    ----------
    sizes : sequence of int, shape (k,)
        Released numbers per table, |T| ≥ 1.
    mechanism : {"gaussian", "laplace"}

    Returns
    -------
    ndarray, shape (k,)
        ``|T|^{1/2}`` (Gaussian) or ``|T|^{1/3}`` (Laplace), normalised to sum 1.
    """
    s = np.asarray(sizes, dtype=np.float64)
    if s.size == 0 or np.any(s < 1):
        raise InputError(f"table sizes must be >= 1, got {s.tolist()!r}")
    if mechanism == "gaussian":
        w = np.sqrt(s)
    elif mechanism == "laplace":
        w = np.cbrt(s)
    else:
        raise InputError(f"unknown mechanism {mechanism!r} (expected 'gaussian' or 'laplace')")
    return w / w.sum()


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
    """Normalised weights, shape (k,): ``None`` → :func:`least_squares_weights`; a sequence
    (one per table); or a mapping keyed by clique tuple, table name or ``"a,b,y"``."""
    if weights is None:
        return least_squares_weights([table_size(t) for t in tables], mechanism)
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
