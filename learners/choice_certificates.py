"""One confidence event for a choice among candidates, and certificates about the labels each candidate predicts.

**The labels a model predicts.** ``predict`` is a deterministic rule; the minimax learners
(MRC, DCC) report R*, the worst-case risk of their *randomized* rule (``predict_proba``).
The choice compares what is promised about the labels written out, so each candidate's
certificate (:func:`label_certificate`) is:

- the learner's own when it already bounds its deterministic rule (W(h), the hinge bound,
  the holdout bound);
- for a rule additive in one-hot features (the MRC's argmax, :meth:`linear_rule`): W(h) of
  that rule over the first-order box of the features (:func:`marg.learners.certify.certify`);
- otherwise (a DCC's pairwise rule) 2·R*, capped at 1: where the argmax ŷ(x) ≠ y, the
  randomized rule puts h(y|x) ≤ h(ŷ|x), and the two sum to at most 1, so h(y|x) ≤ ½ and
  1{ŷ(x) ≠ y} ≤ 2(1 − h(y|x)) for every (x, y); taking expectations, the deterministic rule's
  error under any p of the box is at most twice the randomized rule's risk, which R* bounds.

R* itself is kept under its own name (``minimax_risk``) and never compared with a W(h).

**One event for the whole choice** (Bonferroni over the candidates). The choice looks at
every candidate's certificate, so the event "every certificate holds" is what the chosen one
rests on. With m candidates each fitted and certified at coverage 1 − α/m
(:func:`split_coverage`), the union bound gives P(some candidate's box misses the truth) ≤ α:
whichever is chosen, its certificate holds with probability ≥ 1 − α. Candidates sharing a box
are counted once each (conservative). Structure chosen from the data inside a candidate (a
forest's edges, screened features) is inside its own box's count: the DCC's box covers every
candidate pair, :func:`marg.learners.certify.certify` counts every pair the forest could take,
and the screened certificate counts every feature's cells.
"""

from __future__ import annotations

from typing import Any, Sequence

from marg.errors import InconsistentStatistics, InputError

from .base import Certificate

RANDOMIZED = ("R*", "R*_L")


def split_coverage(coverage: float, m: int) -> float:
    """Each of ``m`` candidates' coverage so that all hold together with probability ≥ ``coverage``: 1 − (1 − coverage)/m."""
    if m < 1:
        raise InputError(f"the number of candidates must be >= 1, got {m!r}")
    return 1.0 - (1.0 - float(coverage)) / int(m)


def label_certificate(est: Any, summary: Any, coverage: float, features: Sequence[str] | None = None
                      ) -> tuple[Certificate, float | None]:
    """(a certificate of the labels ``est`` predicts, R* of its randomized rule or None) — module docstring.

    ``coverage`` is the coverage ``est`` was fitted at (its box's); ``features`` the features the
    candidates were restricted to (None: every one)."""
    cert = est.certificate_
    if cert.kind not in RANDOMIZED:
        return cert, None
    rstar = float(cert.value)
    try:
        from .certify import certify

        w = certify(est, summary, coverage=coverage, structure="first",
                    features=None if features is None else list(features))
    except (InputError, InconsistentStatistics):  # a pairwise rule: no additive form to certify
        value = min(1.0, 2.0 * rstar)
        return Certificate(value, "W(h)", cert.coverage, cert.approximate, cert.n_classes, box=cert.box,
                           note=f"2·R* (R* = {rstar:.4f}) bounds the deterministic rule's error: where it errs, the "
                                f"randomized rule puts at most 1/2 on the truth"), rstar
    return w, rstar
