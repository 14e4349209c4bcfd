"""How far each feature level's released counts stand above their noise: the record a model card reads.

A weight a model puts on a feature level is learned from that level's per-class counts.
Under differential privacy a count is the true count plus noise; when a level's released
count for some class is within the noise's half-width of 0 (a rare level: Hungary among
a few hundred patients), the data cannot tell that count from zero, and the weight on the
level may be set by the noise rather than by the patients. :func:`level_counts` records,
per discrete feature, the released (not post-processed) counts N[x = v, y] of every level
and class and the half-width q with P(|noise| > q) ≤ α of one such cell
(:func:`marg.marginals.noise_tails.halfwidth`, exact for the noise actually added; 0 for
an exact release).
"""

from __future__ import annotations

from typing import Any

from .noise_tails import halfwidth

ALPHA = 0.05
"""Tail probability of the half-width recorded (a 95% interval around each released count)."""
MAX_CELLS = 200_000
"""Largest number of (level, class) counts recorded; a larger codebook records none (the card says so)."""


def level_counts(summary: Any, alpha: float = ALPHA, max_cells: int = MAX_CELLS) -> dict[str, Any] | None:
    """Each discrete feature's released per-class level counts and their noise half-width.

    Parameters
    ----------
    summary : marginals.summary.Summary
    alpha : float
        P(|noise on one count| > halfwidth) ≤ alpha.
    max_cells : int
        None is returned when the codebook has more (level, class) cells than this.

    Returns
    -------
    dict or None
        ``{"alpha": α, "features": {name: {"counts": [[N[v, y] for y] for v], "halfwidth": q}}}``
        (JSON-ready; counts as released, so a noisy one may be negative).
    """
    cb = summary.codebook
    lab = cb.label.name
    disc = [f for f in cb.features if f.is_discrete]
    if sum(f.n_levels for f in disc) * cb.n_classes > max_cells:
        return None
    released = summary.released()
    out: dict[str, Any] = {}
    for f in disc:
        counts = released.counts((f.name, lab))
        draws = released.noise_draws((f.name, lab))
        q = float(halfwidth(list(draws), alpha)) if draws else 0.0
        out[f.name] = {"counts": [[float(c) for c in row] for row in counts.tolist()], "halfwidth": q}
    return {"alpha": float(alpha), "features": out}


__all__ = ["ALPHA", "MAX_CELLS", "level_counts"]
