"""The one rule that chooses among fitted candidates: estimated error within its own noise, never worse than the prior,
then certificate.

Both automatic choices use it — among learners (:class:`marg.learners.auto.AutoLearner`) and
among (learner, M) on screened features (:meth:`marg.learners.choice.screened.ScreeningCandidates.choose`). A
candidate ``k`` carries an estimated error ê_k (leave-one-site-out over S sites: the mean of
its fold errors e_{k,s} weighted by the sites' n, w_s = n_s / Σn; or in sample), its folds,
and, for the learner choice, a certificate (a bound on the error of the labels it predicts:
W(h), or the holdout bound — never R*, the randomized rule's, :mod:`marg.learners.certification.choice_certificates`).

**Noise of a comparison.** The folds are paired: every candidate is evaluated on the same
left-out sites with the same simulated rows. The standard error of the difference of two
estimates is that of the weighted mean of the paired differences d_s = e_{a,s} − e_{b,s}::

    se(a, b)² = S/(S − 1) · Σ_s w_s² (d_s − d̄)²,      d̄ = Σ_s w_s d_s

(the weighted sample variance, :func:`paired_se`). Without folds (in-sample estimates, one
site) it is 0 and only the floor below counts.

**Never worse than the larger class beyond the noise.** The label-only rule (``prior``, the
class with the largest share for every row) is a candidate like any other: under ``"accuracy"``
it is chosen when it is estimated better than the best rule beyond the noise of that comparison,
so no rule is chosen that is estimated worse than it by more than that noise; under
``"certificate"`` a rule estimated above the prior is never chosen.

**The choice** (``prefer``):

- ``"accuracy"`` (default, issue 49): **choose for accuracy, certify what was chosen** — the
  rule c with the smallest estimate (ties: the smaller certificate), unless the label-only rule
  is estimated better *beyond the noise*: ê_prior + max(``tolerance``, se(prior, c)) < ê_c. The
  chosen model's certificate is then computed for it, whatever its size. A trivial certificate
  (≥ 1 − 1/K) is reported, not avoided: a rule that predicts nothing (the larger class, which
  certifies ≈ 0.5) is no safer than the rule the estimates say errs less. Measured on five
  clinical sets (BENCHMARKS.md, "Issue 49"): the former default below took the label-only rule
  on most small splits because every estimate was within noise of every other.
- ``"certificate"`` (the default before issue 49; ``"balanced"`` is its former name): among the
  candidates within noise of the best (below), the smallest **non-trivial** certificate (ties:
  the smaller estimate); when every one of them is trivial, the first by :data:`NOISE_ORDER`
  (ties: the smaller estimate) — a trivial certificate is no reason to prefer a candidate, and
  among estimates the noise cannot tell apart the smallest is the one most flattered by it.
  Never a rule whose estimate is above the prior's.

**Within noise** (``"certificate"``). Let b be the candidate with the smallest estimate.
Candidate k is *within noise* of b when ê_k ≤ ê_b + max(``tolerance``, se(k, b)) — the
one-standard-error rule (Breiman, Friedman, Olshen and Stone, 1984); ``tolerance`` is the floor
(the Monte Carlo error of the simulated rows, :data:`TOLERANCE`).

Candidates without an estimate are eligible only when no candidate has one (then: the smallest
certificate).

**Defaults** (``defaults``, optional, in order): candidates the caller trusts more than the
estimates can show — those whose estimates do not rest on what the simulated rows assume (the
study's rule on its best-ranked feature alone, then Rényi: :func:`marg.learners.study.two_round.study_choice`).
The first default is kept unless the rule above picks a candidate c whose estimate is lower by
more than the noise at 95 %: ê_c + max(``tolerance``, :data:`DEFAULT_Z`·se(c, default)) < ê_default
(a two-sided 95 % test of the paired difference); if it is beaten, the next default is tried the
same way, and when every default is beaten the rule's pick stands. A default without an estimate,
or estimated worse than the prior, is passed over. Both ``prefer`` take them.

**Evidence from an evaluation round** (:func:`with_heldout`): a candidate measured on held-out patients
carries that error rate as its estimate (its binomial and noise standard error beside it), compared with
the others by the unpaired noise √(se_a² + se_b²); the rule is otherwise the same. A study's evaluation round
uses it to choose among the top K candidates it measured (:func:`marg.learners.study.final_choice.final_among`).

**Each estimate's own noise** (:func:`estimate_se`): the standard error of a leave-one-site-out
estimate as a weighted mean of its folds, se(k)² = S/(S − 1)·Σ_s w_s²(e_{k,s} − ê_k)², is reported
beside it (``error_se``); it is not the noise of a comparison (the folds are paired: se(a, b) above).
"""

from __future__ import annotations

import copy
import math
from typing import Any, Mapping, Sequence

import numpy as np

from marg.errors import InputError

from ..core.params import check_choice

PREFER = ("accuracy", "certificate")
ALIASES = {"balanced": "certificate"}
"""Former names of a ``prefer`` (``"balanced"`` was the default before issue 49: it is ``"certificate"`` now)."""
TOLERANCE = 0.01
"""The floor of the noise margin: the Monte Carlo error of the simulated rows (≤ 0.5/√DRAWS per class
for the learner choice, about 0.011 per class on the screened path's population)."""
DEFAULT_Z = 1.96
"""How many standard errors of the paired difference a candidate's estimate must lie below the default's to
replace it: the two-sided 95 % normal quantile (module docstring, "Defaults")."""
PRIOR = "prior"
NOISE_ORDER: tuple[str, ...] = ("nb", "renyi", "mrc", "dcc", "boost", PRIOR)
"""Among candidates the estimate cannot tell apart, all with trivial certificates: the first learner in
this order (then the smaller estimate). Naive Bayes reads the first-order tables directly and loses least
to their noise; a minimax learner whose certificate is trivial predicts from its tie-break (its minimax rule
is the uniform guess), so it comes after the rules that read the tables themselves. Measured on simulated
small-site DP studies (BENCHMARKS.md, issue 38): within noise, the smallest estimate is the winner's curse."""


def paired_se(a: Sequence[float], b: Sequence[float], weights: Sequence[float] | None = None) -> float:
    """Standard error of Σ_s w_s (a_s − b_s) from paired folds (module docstring); 0 without ≥ 2 folds.

    Parameters
    ----------
    a, b : sequence of float, shape (S,)
        Two candidates' fold errors on the same folds.
    weights : sequence of float, shape (S,), optional
        The folds' weights (the sites' n); None: equal.
    """
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    S = a.size
    if S < 2 or b.size != S:
        return 0.0
    w = np.ones(S) if weights is None else np.clip(np.asarray(weights, dtype=np.float64), 0.0, None)
    if w.size != S or w.sum() <= 0:
        w = np.ones(S)
    w = w / w.sum()
    d = a - b
    dbar = float(np.dot(w, d))
    return float(math.sqrt(S / (S - 1) * float(np.sum(w * w * (d - dbar) ** 2))))


def estimate_se(folds: Sequence[float], weights: Sequence[float] | None = None) -> float | None:
    """The standard error of an estimate that is the weighted mean of its ``folds`` (shape (S,)): paired_se against
    zeros (module docstring, "Each estimate's own noise"); None with fewer than 2 folds (no measure of its noise)."""
    if len(folds) < 2:
        return None
    return paired_se(folds, [0.0] * len(folds), weights)


def shrink_estimates(values: Sequence[float], ses: Sequence[float]) -> list[float]:
    """The candidates' estimates shrunk toward their mean (positive-part James–Stein, the mean estimated):
    ê'_k = ē + c·(ê_k − ē), c = max(0, 1 − (m − 3)·mean(se²) / Σ_k (ê_k − ē)²), m candidates (m < 3: unchanged).
    Measured against the unshrunk estimates in ``bench/estimate_49.py`` (BENCHMARKS.md, "Issue 49")."""
    v = np.asarray(values, dtype=np.float64)
    m = v.size
    spread = float(np.sum((v - v.mean()) ** 2)) if m else 0.0
    if m < 3 or spread <= 0:
        return [float(x) for x in v]
    c = max(0.0, 1.0 - (m - 3) * float(np.mean(np.square(ses))) / spread)
    return [float(x) for x in v.mean() + c * (v - v.mean())]


def canonical_prefer(prefer: str) -> str:
    """``prefer`` by its current name (:data:`ALIASES`); one-line InputError for an unknown one."""
    prefer = ALIASES.get(prefer, prefer)
    check_choice("prefer", prefer, PREFER)
    return prefer


def _label(c: Any) -> str:
    feats = (getattr(c, "params", None) or {}).get("features")
    return c.learner + (f" on {', '.join(map(str, feats))}" if feats else "")


def _err(c: Any) -> float:
    return math.inf if c.error is None else float(c.error)


def _cert(c: Any) -> float:
    v = getattr(c, "certificate", None)
    return math.inf if v is None else float(v)


def noise_margin(c: Any, best: Any, tolerance: float, weights: Sequence[float] | None = None, z: float = 1.0) -> float:
    """How far above ``best``'s estimate ``c``'s may lie and still be within noise: max(tolerance, z·se(c, best)) —
    paired over the folds, or, when either is measured on held-out patients (:func:`with_heldout`: no folds to
    pair), unpaired: se(c, best)² = se(c)² + se(best)²."""
    if c is best:
        return float(tolerance)
    if HELDOUT in (getattr(c, "method", ""), getattr(best, "method", "")):
        ses = [getattr(r, "error_se", None) or 0.0 for r in (c, best)]
        return max(float(tolerance), z * math.sqrt(ses[0] ** 2 + ses[1] ** 2))
    if not c.folds or len(c.folds) != len(best.folds):
        return float(tolerance)
    return max(float(tolerance), z * paired_se(c.folds, best.folds, weights))


HELDOUT = "held-out"
"""The ``method`` of an estimate measured on held-out patients (:func:`with_heldout`)."""


def with_heldout(rows: Sequence[Any], evidence: Mapping[int, tuple[float, float, float]]) -> list[Any]:
    """The candidates with the estimates of those measured on held-out patients replaced by that measurement.

    The evidence of an evaluation round (patients no table the candidates were fitted on holds) is unbiased
    where leave-one-site-out is not (its simulated rows assume the tables' own tree-augmented distribution), so
    it replaces the estimate rather than being averaged with it; :func:`choose_index` then compares such a
    candidate with the others by the unpaired noise of :func:`noise_margin`.

    Parameters
    ----------
    rows : sequence of candidates (``error``, ``error_se``, ``method``, ``folds``, ``fold_weights``)
    evidence : dict index → (errors, n, noise_std)
        Candidate ``index``'s released error count on ``n`` held-out patients and the std of the noise on that
        count (0: exact).

    Returns
    -------
    list
        Copies of the rows; row k with evidence has ``error = clip(errors/n, 0, 1)``, ``error_se =
        √(e(1 − e)/n + (noise_std/n)²)``, ``method = "held-out"`` and no folds.

    Raises
    ------
    InputError
        An index that is not a row, or ``n`` ≤ 0.
    """
    out = [copy.copy(r) for r in rows]
    for k, (errors, n, noise_std) in evidence.items():
        if not 0 <= int(k) < len(out):
            raise InputError(f"held-out evidence for candidate {k}, but there are {len(out)} candidates")
        if not float(n) > 0:
            raise InputError(f"held-out evidence for candidate {k} on {n} patients: it needs at least one")
        e = float(np.clip(float(errors) / float(n), 0.0, 1.0))
        r = out[int(k)]
        r.error, r.method, r.folds, r.fold_weights = e, HELDOUT, [], []
        r.error_se = math.sqrt(e * (1.0 - e) / float(n) + (float(noise_std) / float(n)) ** 2)
    return out


def choose_index(rows: Sequence[Any], prefer: str = "accuracy", tolerance: float = TOLERANCE,
                 weights: Sequence[float] | None = None, by_certificate: bool = True,
                 order: Sequence[int] | None = None, defaults: Sequence[int] = ()) -> tuple[int, str]:
    """The index of the chosen candidate and the rule in words (module docstring).

    Parameters
    ----------
    rows : sequence of candidates
        Each with ``learner``, ``error``, ``folds``, ``certificate`` and ``trivial``. Only those with a
        certificate are considered when ``by_certificate``.
    prefer : {"accuracy", "certificate"} (or a former name, :data:`ALIASES`)
    tolerance : float
        The floor of the noise margin.
    weights : sequence of float, optional
        The folds' weights (the sites' n).
    by_certificate : bool
        False (the screened path, whose configurations are certified after the choice): among the
        candidates within noise, the first by ``order`` instead of the smallest certificate.
    order : sequence of int, optional
        Tie-break key per row (default: the row's index).
    defaults : sequence of int
        Indices of default candidates, in order: the first not beaten beyond the noise at 95 % by the rule's
        pick is chosen (module docstring).

    Raises
    ------
    InputError
        No candidate was fitted.
    """
    k, words = _choose(rows, prefer, tolerance, weights, by_certificate, order)
    prior = [_err(r) for r in rows if r.learner == PRIOR and r.error is not None]
    beaten = []
    for j in defaults if rows[k].error is not None else ():
        d = rows[j]
        if d.error is None or (prior and _err(d) > min(prior) + 1e-12):
            continue
        if j == k:
            break
        margin = noise_margin(rows[k], d, tolerance, weights, DEFAULT_Z)
        if _err(rows[k]) + margin < _err(d) - 1e-12:
            beaten.append(_label(d))
            continue
        return j, (f"the default {_label(d)} (estimated {_err(d):.4f}): no candidate's estimate is lower by more than "
                   f"max({tolerance:g}, {DEFAULT_Z:g} standard errors of the paired difference) — {words} would have "
                   f"taken {rows[k].learner} ({_err(rows[k]):.4f})"
                   + (f"; beaten: {', '.join(beaten)}" if beaten else ""))
    if beaten:
        words += (f"; it beats the default{'s' if len(beaten) > 1 else ''} ({', '.join(beaten)}) beyond the noise at "
                  "95 %")
    return k, words


def _accurate(rows: Sequence[Any], estimated: Sequence[int], prior: Sequence[int], tolerance: float,
              weights: Sequence[float] | None, key: Sequence[int]) -> tuple[int, str]:
    """``prefer="accuracy"`` (module docstring): the rule with the smallest estimate, the label-only rule only when it
    is estimated better than that rule beyond the noise of the paired comparison."""
    rules = [k for k in estimated if rows[k].learner != PRIOR]
    if not rules:
        k = min(estimated, key=lambda k: (_err(rows[k]), _cert(rows[k]), key[k]))
        return k, "the larger class (no other candidate has an estimate)"
    c = min(rules, key=lambda k: (_err(rows[k]), _cert(rows[k]), key[k]))
    best = f"the smallest estimated error ({_label(rows[c])}, {_err(rows[c]):.4f})"
    if not prior:
        return c, best
    p = min(prior, key=lambda k: (_err(rows[k]), key[k]))
    margin = noise_margin(rows[p], rows[c], tolerance, weights)
    if _err(rows[p]) + margin < _err(rows[c]) - 1e-12:
        return p, (f"the larger class: estimated {_err(rows[p]):.4f}, better than {best} by more than the noise "
                   f"(max({tolerance:g}, one standard error of the paired difference) = {margin:.4f})")
    return c, (best + f"; the larger class ({_err(rows[p]):.4f}) is not estimated better by more than the noise "
               f"({margin:.4f}), so the rule is kept and its own certificate computed")


def _choose(rows: Sequence[Any], prefer: str, tolerance: float, weights: Sequence[float] | None,
            by_certificate: bool, order: Sequence[int] | None) -> tuple[int, str]:
    prefer = canonical_prefer(prefer)
    key = list(range(len(rows))) if order is None else list(order)
    fitted = [k for k, r in enumerate(rows) if not by_certificate or getattr(r, "certificate", None) is not None]
    if not fitted:
        raise InputError("no learner could be fitted on these summaries: "
                         + "; ".join(f"{r.learner}: {getattr(r, 'note', '')}" for r in rows))
    estimated = [k for k in fitted if rows[k].error is not None]

    def by_cert(ks: Sequence[int]) -> int:
        return min(ks, key=lambda k: (_cert(rows[k]), _err(rows[k]), key[k]))

    if not estimated:
        if not by_certificate:
            return min(fitted, key=lambda k: key[k]), "the first candidate (no candidate's error could be estimated)"
        return by_cert(fitted), "the smallest certificate (no candidate's error could be estimated)"
    prior = [k for k in estimated if rows[k].learner == PRIOR]
    if prefer == "accuracy":
        return _accurate(rows, estimated, prior, tolerance, weights, key)
    guard = ""
    if prior:
        cap = min(_err(rows[k]) for k in prior)
        kept = [k for k in estimated if _err(rows[k]) <= cap + 1e-12]
        if len(kept) < len(estimated):
            guard = f"; never a rule estimated worse than the larger class ({cap:.4f})"
        estimated = kept
    b = min(estimated, key=lambda k: (_err(rows[k]), key[k]))
    best = rows[b]
    within = [k for k in estimated if _err(rows[k]) <= _err(best) + noise_margin(rows[k], best, tolerance, weights)
              + 1e-12]
    noise = (f"within noise of the best estimate ({_err(best):.4f}: within max({tolerance:g}, one standard error of "
             f"the paired difference over the folds))")
    if not by_certificate:
        return min(within, key=lambda k: key[k]), f"the first candidate {noise}" + guard
    useful = [k for k in within if not getattr(rows[k], "trivial", True)]
    if useful:
        return by_cert(useful), f"the smallest non-trivial certificate among the candidates {noise}" + guard
    rank = {nm: i for i, nm in enumerate(NOISE_ORDER)}
    k = min(within, key=lambda k: (rank.get(rows[k].learner, len(rank)), _err(rows[k]), key[k]))
    return k, (f"the first of {', '.join(NOISE_ORDER)} among the candidates {noise}: every one has a trivial "
               f"certificate, which is no reason to prefer one") + guard
