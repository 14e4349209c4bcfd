"""How many patients a non-trivial certificate would need, under the same DP noise per table cell.

Under differential privacy the noise added to a count does not shrink with the site's size,
so a small study can be too small for any informative certificate: the confidence box is so
wide that every rule's worst case is no better than guessing (≥ 1 − 1/K). The question a
study planner asks is how many patients would change that.

**Method** (:func:`patients_needed`). Scale every (post-processed) table by a factor t
(counts × t: the same cell proportions τ, n·t patients) keeping each table's noise record — the
same mechanism and the same per-cell noise scale, i.e. the same ε per site and the same
number of sites — and recompute the certificate with ``certificate_at(scaled summary)``
(:func:`scaled_summary`; the caller refits its learner and reads its certificate). The
sampling part of λ then shrinks as 1/√(n t), the noise part as 1/(n t). The factor is
doubled until the certificate drops below 1 − 1/K, then bisected in log t until the two
bracketing factors are within ``rel_tol``; the answer is ⌈n·t⌉ at the upper bracket, whose
certificate was computed (not extrapolated). It assumes the larger study's tables look like
this one's (same proportions) — a planning figure, not a promise.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Callable

from marg._util import bisect_monotone
from marg.marginals.summary import Summary
from marg.marginals.counts.tables import MarginalTable


@dataclass
class PatientsNeeded:
    """The outcome of :func:`patients_needed`.

    Attributes
    ----------
    n : float
        Patients in the summary now.
    needed : int or None
        Patients at which the certificate was computed below the threshold (None: not
        reached up to ``n · max_factor``).
    certificate : float
        The certificate at ``needed`` (or at the largest size tried when None).
    tried : int
        The largest number of patients tried.
    threshold : float
        1 − 1/K.
    factor : float
        The multiple of every table at which ``certificate`` was computed (``needed`` = ⌈n·factor⌉).
    learner : str
        Which learner (the caller's name for it; "" when not said).
    """

    n: float
    needed: int | None
    certificate: float
    tried: int
    threshold: float
    factor: float
    learner: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Every field, in declaration order (``marg learn --json``'s ``patients_needed``)."""
        return asdict(self)


def scaled_summary(summary: Any, factor: float) -> Summary:
    """``summary``'s tables with every count (and moment sum) multiplied by ``factor``, each keeping
    its noise record (so the per-cell noise scale is unchanged).

    The tables scaled are the post-processed ones (consistent, non-negative: the best estimate
    of the counts): scaling the tables as released would scale their noise draws too, far
    beyond the recorded scale, and leave no distribution in the confidence box."""
    tables = [MarginalTable(t.clique, t.counts * float(factor), t.noise, t.kind) for t in summary.tables]
    return Summary(summary.codebook, tables, provenance=summary.provenance,
                   parent_fingerprint=summary.parent_fingerprint,
                   postprocess=summary.postprocess)


def patients_needed(certificate_at: Callable[[Summary], float], summary: Any, n_classes: int,
                    max_factor: float = 2.0 ** 14, rel_tol: float = 0.02) -> PatientsNeeded:
    """The smallest study size (to ``rel_tol``) whose certificate is below 1 − 1/K (see the module docstring).

    Parameters
    ----------
    certificate_at : Summary → float
        The certificate of the learner refitted on a summary.
    summary : Summary
    n_classes : int
    max_factor : float
        Largest multiple of n tried.
    rel_tol : float
        Relative width of the final bracket.
    """
    threshold = 1.0 - 1.0 / n_classes
    n = float(summary.n)

    def informative(t: float) -> tuple[bool, float]:
        c = float(certificate_at(scaled_summary(summary, t)))
        return c < threshold - 1e-9, c

    lo, hi, c_hi = 1.0, None, float("nan")
    t = 2.0
    while t <= max_factor:
        ok, c = informative(t)
        if ok:
            hi, c_hi = t, c
            break
        lo, c_hi = t, c
        t *= 2.0
    if hi is None:
        return PatientsNeeded(n, None, c_hi, int(math.ceil(n * lo)), threshold, lo)
    last = [c_hi]

    def ok(t: float) -> bool:
        good, c = informative(t)
        if good:
            last[0] = c
        return good

    lo, hi = bisect_monotone(ok, lo, hi, rel_tol, geometric=True)
    c_hi = last[0]
    return PatientsNeeded(n, int(math.ceil(n * hi)), c_hi, int(math.ceil(n * hi)), threshold, hi)


def patients_line(report: dict[str, Any]) -> str | None:
    """One line for a choice whose every certificate is trivial under DP: the patients now and
    the patients a candidate would need (None when the report has no such record)."""
    p = report.get("auto_patients")
    if not p:
        return None
    head = (f"under the sites' DP noise {p['n']:,.0f} patients are too few for an informative certificate from any "
            f"candidate (each ≥ 1 − 1/K = {p['threshold']:.3g}, what guessing achieves)")
    if p["needed"] is None:
        return head + (f"; none gets below it even at {p['tried']:,} patients with the same noise per table cell")
    return head + (f"; {p['learner']} would need about {p['needed']:,} patients with the same noise per table cell "
                   f"(its certificate there: {p['certificate']:.4f})")
