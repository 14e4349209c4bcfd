"""Which tables a release holds: ``--stats auto`` (what ``marg learn``'s default can use, within a size), the warning
when it leaves the pair tables out, and a first-order share of the budget over them."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Sequence

from marg.errors import InputError
from marg.marginals.allocation import half_split_weights
from marg.marginals.data.codebook import Codebook
from marg.marginals.counts.tables import STATS


def first_order_weights(codebook: Codebook, cliques: Sequence[tuple[str, ...]], first_share: float) -> list[float]:
    """Per-table budget weights: first-order tables share ``first_share``, pair tables the rest
    (:func:`marg.marginals.allocation.half_split_weights` over the plan)."""
    plan = [SimpleNamespace(clique=tuple(c), kind="counts") for c in cliques]
    return half_split_weights(plan, codebook.label.name, first_share).tolist()


MAX_AUTO_CELLS = 250_000  # --stats auto releases every pair while the pair tables hold at most this many cells


def resolve_stats(codebook: Codebook, stats: str, dp: bool, pairs: Sequence[tuple[str, str]] | None = None) -> str:
    """``stats="auto"`` → what ``marg learn``'s default (the automatic choice) can use.

    Under differential privacy: first-order tables and every pair of discrete features
    (``"all"``: Rényi and the DCC need them) while the pair tables hold at most
    :data:`MAX_AUTO_CELLS` cells (adult: 17,000; kr-vs-kp: 5,000); beyond that first-order
    tables only (round 1 of the two-round protocol: ``marg request`` then asks for the pairs
    of the screened features).
    Exact releases: first-order tables only, since the min-cell rule would refuse most
    pair tables of real data. Given ``pairs`` → ``"pairs"``.
    """
    if stats != "auto":
        if stats not in STATS:
            raise InputError(f"unknown --stats {stats!r} (expected one of auto, {', '.join(STATS)})")
        return stats
    if pairs:
        return "pairs"
    if not dp:
        return "first"
    sizes = [codebook.attribute_size(a) for a in codebook.discrete_names]
    if len(sizes) < 2:
        return "first"
    total, cells = float(sum(sizes)), 0.0
    for m in sizes:  # Σ_{i<j} m_i m_j K, accumulated without listing the pairs
        total -= m
        cells += m * total * codebook.label.n_classes
        if cells > MAX_AUTO_CELLS:
            return "first"
    return "all"


def pairs_left_out(codebook: Codebook, stats: str, dp: bool,
                   pairs: Sequence[tuple[str, str]] | None = None) -> str | None:
    """The warning line when ``stats="auto"`` leaves the pair tables out for their size, else None.

    It names the size of all pair tables (``Σ_{i<j} m_i m_j K`` cells against
    :data:`MAX_AUTO_CELLS`) and the largest one, whose features are the likely cause.
    """
    if stats != "auto" or pairs or not dp or resolve_stats(codebook, stats, dp) != "first":
        return None
    # ties: codebook order
    sizes = sorted(((codebook.attribute_size(a), a) for a in codebook.discrete_names), key=lambda t: -t[0])
    if len(sizes) < 2:
        return None
    m = [float(x) for x, _ in sizes]
    K = codebook.label.n_classes
    cells = (sum(m) ** 2 - sum(x * x for x in m)) / 2.0 * K
    (m1, a), (m2, b) = sorted(sizes[:2], key=lambda t: codebook.index(t[1]))
    return (f"warning: the {len(m) * (len(m) - 1) // 2:,} pair tables are left out (--stats auto): they would hold "
            f"{cells:,.0f} cells, above {MAX_AUTO_CELLS:,}; the largest, N[{a},{b},{codebook.label.name}], "
            f"{m1 * m2 * K:,} cells ({a!r} has {m1:,} levels, {b!r} {m2:,}); coarser levels, --stats pairs --pairs "
            "a:b, or marg request choose fewer")


__all__ = ["MAX_AUTO_CELLS", "first_order_weights", "pairs_left_out", "resolve_stats"]
