"""One confidence event for a choice among candidates, and certificates about the labels each candidate predicts.

**The labels a model predicts.** ``predict`` is a deterministic rule; R* bounds the minimax
learners' *randomized* rule (``predict_proba``). The choice compares what is promised about the
labels written out, so each candidate's certificate (:func:`label_certificate`) is the learner's
own: every learner bounds its deterministic rule (W(h), the hinge bound, the holdout bound; the
minimax learners through :mod:`marg.learners.certification.certify_labels`, R* kept as ``minimax_risk_``). A
learner still reporting R* gets W(h) of its additive rule over the first-order box, or 2·R*
(:func:`marg.learners.certification.certify_labels.doubled`).

R* itself is kept under its own name (``minimax_risk``) and never compared with a W(h).

**The estimator owns it.** :meth:`marg.learners.estimator.base.MarginalEstimator.certificate` (:func:`own_certificate`)
is the one way a fitted candidate is certified: the automatic choice asks it of every candidate it
compares (or, on screened features, of the one it chose), never writing a certificate from outside.

**One event for the whole choice** (Bonferroni over the candidates). The choice looks at
every candidate's certificate, so the event "every certificate holds" is what the chosen one
rests on. With m candidates each fitted and certified at coverage 1 − α/m
(:func:`split_coverage`), the union bound gives P(some candidate's box misses the truth) ≤ α:
whichever is chosen, its certificate holds with probability ≥ 1 − α. Candidates sharing a box
are counted once each (conservative). Structure chosen from the data inside a candidate (a
forest's edges, screened features) is inside its own box's count: the DCC's box covers every
candidate pair, :func:`marg.learners.certification.certify.certify` counts every pair the forest could take,
and the screened certificate counts every feature's cells.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from marg.errors import InconsistentStatistics, InputError

from ..core.certificate import Certificate
from .certify_labels import RANDOMIZED, doubled


def split_coverage(coverage: float, m: int) -> float:
    """Each of ``m`` candidates' coverage so that all hold together with probability ≥ ``coverage``: 1 − (1 −
    coverage)/m."""
    if m < 1:
        raise InputError(f"the number of candidates must be >= 1, got {m!r}")
    return 1.0 - (1.0 - float(coverage)) / int(m)


def label_certificate(est: Any, summary: Any, coverage: float, features: Sequence[str] | None = None
                      ) -> tuple[Certificate, float | None]:
    """(a certificate of the labels ``est`` predicts, R* of its randomized rule or None) — module docstring.

    A minimax learner certifies its labels itself (``certificate_`` W(h), ``minimax_risk_`` R*,
    :mod:`marg.learners.certification.certify_labels`); a learner whose certificate is still R* gets W(h) of its
    additive rule or 2·R*. ``coverage`` is the coverage ``est`` was fitted at (its box's); ``features``
    the features the candidates were restricted to (None: every one)."""
    cert = est.certificate_
    own = getattr(est, "minimax_risk_", None)
    if cert.kind not in RANDOMIZED:
        return cert, None if own is None or own is cert else float(own.value)
    rstar = float(cert.value)
    try:
        from .certify import certify

        w = certify(est, summary, coverage=coverage, structure="first",
                    features=None if features is None else list(features))
    except (InputError, InconsistentStatistics):  # a pairwise rule: no additive form to certify
        return doubled(cert), rstar
    return (w if w.value <= 2.0 * rstar else doubled(cert)), rstar


def randomized_risk(est: Any) -> float | None:
    """R* of ``est``'s randomized rule, the value :func:`label_certificate` reports beside the labels' certificate
    (``minimax_risk_`` when the certificate is not it; the certificate itself when it is still R*); None without one."""
    cert, own = est.certificate_, getattr(est, "minimax_risk_", None)
    if cert.kind not in RANDOMIZED:
        return None if own is None or own is cert else float(own.value)
    return float(cert.value)


def own_certificate(est: Any, summary: Any, coverage: float, features: Sequence[str] | None = None
                    ) -> tuple[Certificate, float | None]:
    """What :meth:`marg.learners.estimator.base.MarginalEstimator.certificate` answers, with R* of the randomized rule
    (or None).

    - ``summary`` records a selection of its features from the same patients (``summary.selection``, a
      select-then-measure study): the estimator's own
      :meth:`~marg.learners.estimator.base.MarginalEstimator.selection_certificate` of the rule as fitted, at
      ``coverage`` (its fit's when that is the coverage asked) — one event, the selection-wide box, that every
      candidate's certificate rests on (:mod:`marg.learners.certification.selection_certificate`);
    - ``est`` carries ``selected_from_`` (its features were screened from these same tables,
      :class:`marg.learners.choice.screened.ScreeningCandidates`): W(h) of its rule over the first-order box
      of EVERY discrete feature at ``coverage`` (:func:`marg.learners.certification.certify.certify_projected`) —
      valid for the selection, since that box is fixed before any feature is chosen;
    - it was fitted at another ``coverage`` (its box calibrated there): the same estimator refitted at ``coverage``;
    - otherwise its own labels' certificate (:func:`label_certificate`).
    """
    if summary.selection is not None:
        r = est.randomized_bound()
        have = getattr(est, "coverage", None) or 0.95
        same = math.isclose(float(have), float(coverage), rel_tol=0.0, abs_tol=1e-12)
        return (est.certificate_ if same else est.selection_certificate(summary, coverage)), \
            None if r is None else float(r.value)
    if getattr(est, "selected_from_", None) is not None:
        from .certify import certify_projected

        r = est.randomized_bound()
        return certify_projected(est, summary, coverage=coverage), None if r is None else float(r.value)
    params = est.get_params()
    have = params.get("coverage")
    if have is not None and est.certificate_.coverage is not None \
            and not math.isclose(float(have), float(coverage), rel_tol=0.0, abs_tol=1e-12):
        est = type(est)(**{**params, "coverage": float(coverage)}).fit(summary)
    return label_certificate(est, summary, coverage, features)
