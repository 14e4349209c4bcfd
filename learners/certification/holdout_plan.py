"""Planning a holdout certificate before anything is spent: the certificate to expect, and the ε split and fraction that
minimise it.

**Expected certificate.** For sites of n_s rows holding out a fraction f, an evaluation
release at ε_e per site and a model of error rate p, the expected certificate is the bound
of :mod:`marg.learners.certification.holdout_certificate` at the expected released counts — Ẽ = p·Σ f·n_s,
ñ = Σ f·n_s — at the first evaluated model's share of α (6/π²:
:func:`marg.learners.certification.holdout_certificate.evaluation_share`), with the noise draws the release would add
(their scale from the release code itself, :func:`marg.marginals.privacy.privatize`, so Laplace's ε ↦ b and the
Gaussian's (ε, δ) ↦ ρ ↦ σ are OpenDP's). It is the certificate of a typical run (its median, up to the
rounding of counts), computed, never guessed; :func:`needed_for` finds by bisection the rows
per site, or the evaluation ε, at which it reaches p + margin.

**The split rule.** A site's total ε is split into (1 − s)·ε for the training tables and
s·ε for the evaluation, and its rows into training (1 − f) and held out (f). More for the
evaluation tightens the bound but weakens the model. The planner models that cost: the
learner's inputs are the first-order tables N[y], N[x_i, y], which share half of the
tables' budget (the default split), each of the d + 1 at ρ((1 − s)·ε)/(2(d + 1))
(Gaussian, the tables' default mechanism), per-cell noise std σ_t. The model reads d + 1
rates from them on n_t = (1 − f)·Σ n_s rows; their summed sampling variance is
(d + 1)·p(1 − p)/n_t, and the DP noise of a rate (numerator and denominator noisy at S
sites, 2·S·σ_t²/n_t² per table) is pooled over the d + 1 tables that all carry it:

    v_t = (d + 1)·p(1 − p)/n_t + 2·S·σ_t²/((d + 1)·n_t²),

and the model's error is taken as p_model = p + √v_t. The rule: **(f, s) minimise the
expected certificate at p_model(f, s)** over the grid f ∈ {0.10, 0.15, …, 0.50},
s ∈ {0.1, 0.2, …, 0.9}; beyond p_model = 0.5 (a model the planner expects to be no better
than chance) the objective is the certificate at 0.5 plus p_model − 0.5, so even then the
plan that keeps the model best wins instead of a tie. Plans within 1 % of the minimum are
ties (the training side is modelled coarsely); among them the smallest fraction, then the
smallest evaluation share wins — spending less on the evaluation never hurts the model.
It is a planning heuristic, not a
guarantee: the certificate is valid whatever split is used. The plan depends only on what
the site declares (its row count as stated publicly, the number of sites, features and the
expected error), never on its data, so recording it in the bundle reveals nothing more.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any, Sequence

import numpy as np

from marg._util import bisect_monotone
from marg.marginals.accounting import DEFAULT_DELTA
from marg.errors import InputError, option
from .holdout_certificate import Released, evaluation_share, exact_bound

FRACTIONS = tuple(np.round(np.arange(0.10, 0.501, 0.05), 2))
SHARES = tuple(np.round(np.arange(0.1, 0.901, 0.1), 2))
MARGIN = 0.20  # "informative": a certificate within this of the expected error
MAX_ERROR = 0.5  # the planner's objective is extrapolated linearly beyond this modelled error
TIE = 0.01  # plans within this relative distance of the best count as ties


@lru_cache(maxsize=512)
def release_scale(epsilon: float, mechanism: str = "laplace", delta: float = DEFAULT_DELTA, n_tables: int = 1) -> float:
    """Per-cell noise scale (Laplace b or Gaussian σ) of one of ``n_tables`` equal-share count
    tables released at total ``epsilon`` — the scale the release code's own plan calibrates
    (:class:`marg.marginals.release_plan.ReleasePlan`; no data: the scale does not depend on the counts)."""
    from marg.marginals.privacy import budget_for
    from marg.marginals.release_plan import ReleasePlan, TableSpec

    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise InputError(f"epsilon must be finite and > 0, got {epsilon!r}")
    mech, eps, rho = budget_for(mechanism, epsilon, None, delta)
    specs = [TableSpec((f"t{i}",), "counts", 2, mech.discrete) for i in range(n_tables)]
    return float(ReleasePlan(specs, epsilon=eps, rho=rho, weights=[1.0] * n_tables, delta=delta,
                             mechanism=mech.name).scales[0])


def _rows(n_rows: int | Sequence[int], n_sites: int | None) -> list[int]:
    rows = [int(n_rows)] * int(n_sites or 1) if np.isscalar(n_rows) else [int(r) for r in n_rows]
    if not rows or min(rows) <= 0:
        raise InputError(f"rows per site must be positive, got {n_rows!r}")
    if n_sites is not None and not np.isscalar(n_rows) and len(rows) != n_sites:
        raise InputError(f"{len(rows)} row counts for {n_sites} sites")
    return rows


@dataclass(frozen=True)
class ExpectedCertificate:
    """The certificate to expect and what it rests on."""

    value: float
    expected_error: float
    held_out: float
    epsilon_evaluate: float
    noise_scale: float
    mechanism: str
    coverage: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def expected_holdout_certificate(n_rows: int | Sequence[int], epsilon: float | None, expected_error: float = 0.2,
                                 n_sites: int | None = None, holdout: float = 0.2, mechanism: str = "laplace",
                                 delta: float = DEFAULT_DELTA, coverage: float = 0.95) -> ExpectedCertificate:
    """The certificate a holdout evaluation can expect (module docstring).

    Parameters
    ----------
    n_rows : int or sequence of int
        Rows per site (one number: every one of ``n_sites`` sites).
    epsilon : float or None
        The evaluation release's ε per site; None: exact release.
    expected_error : float in (0, 1)
    n_sites : int, optional
    holdout : float in (0, 1)
        The fraction of each site's rows held out.
    mechanism : {"laplace", "gaussian"}
        Of the evaluation release (Laplace is its default).
    """
    if not 0.0 < expected_error < 1.0:
        raise InputError(f"expected error must be in (0, 1), got {expected_error!r}")
    if not 0.0 < holdout < 1.0:
        raise InputError(f"holdout fraction must be in (0, 1), got {holdout!r}")
    rows = _rows(n_rows, n_sites)
    held = [holdout * r for r in rows]
    n = float(sum(held))
    b = release_scale(float(epsilon), mechanism, delta) if epsilon is not None else 0.0
    parts_e = (((mechanism, b, True, len(rows)),) if b else ())
    parts_n = (((mechanism, b, True, 2 * len(rows)),) if b else ())
    rel = Released(round(expected_error * n), math.floor(n), parts_e, parts_n)
    v = exact_bound(rel, 1.0 - (1.0 - coverage) * evaluation_share(1)).value  # the first model's share of α
    return ExpectedCertificate(v, expected_error, n, float(epsilon or 0.0), b, mechanism, coverage)


def needed_for(n_rows: int | Sequence[int], epsilon: float | None, expected_error: float = 0.2,
               n_sites: int | None = None, holdout: float = 0.2, margin: float = MARGIN, **kw: Any) -> dict[str, Any]:
    """What makes the expected certificate informative (≤ expected error + ``margin``).

    Returns
    -------
    dict
        ``rows_factor``: the factor on every site's rows needed at this ε (``rows``: the rows
        per site that gives); ``epsilon``: the evaluation ε needed at these rows (None when
        even an exact release is not enough). Both by bisection on the expected certificate.
    """
    rows = _rows(n_rows, n_sites)
    target = expected_error + margin

    def cert(factor: float, eps: float | None) -> float:
        return expected_holdout_certificate([max(1, round(r * factor)) for r in rows], eps, expected_error,
                                            None, holdout, **kw).value

    out: dict[str, Any] = {"target": target}
    lo, hi = 0.0, 1.0
    while cert(hi, epsilon) > target:
        lo, hi = hi, hi * 2.0
        if hi > 1e5:
            break
    if cert(hi, epsilon) <= target:
        lo, hi = bisect_monotone(lambda f: f > 0 and cert(f, epsilon) <= target, lo, hi, 1e-3)
        out["rows_factor"] = hi
        out["rows"] = [math.ceil(r * hi) for r in rows]
    else:
        out["rows_factor"] = out["rows"] = None
    if epsilon is None or cert(1.0, None) > target:
        out["epsilon"] = None if cert(1.0, None) > target else 0.0
        return out
    elo, ehi = 1e-3, max(float(epsilon), 1e-3)
    while cert(1.0, ehi) > target:
        elo, ehi = ehi, ehi * 2.0
    elo, ehi = bisect_monotone(lambda e: cert(1.0, e) <= target, elo, ehi, 1e-3)
    out["epsilon"] = ehi
    return out


@dataclass(frozen=True)
class HoldoutPlan:
    """The chosen fraction and ε split, with the expected certificate and the modelled error."""

    fraction: float
    epsilon_tables: float
    epsilon_evaluate: float
    expected_certificate: float
    model_error: float
    expected_error: float
    rule: str = "min expected certificate at p + sqrt(v_t), v_t = (d+1)p(1-p)/n_t + 2S sigma_t^2/((d+1) n_t^2)"

    def to_dict(self) -> dict[str, Any]:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in asdict(self).items()}


def plan_holdout(n_rows: int | Sequence[int], epsilon_total: float, expected_error: float = 0.2,
                 n_sites: int | None = None, n_features: int = 10, delta: float = DEFAULT_DELTA,
                 coverage: float = 0.95, fractions: Sequence[float] = FRACTIONS,
                 shares: Sequence[float] = SHARES) -> HoldoutPlan:
    """The holdout fraction and ε split that minimise the expected certificate (module docstring).

    Parameters
    ----------
    n_rows : int or sequence of int
        Rows per site as declared (public).
    epsilon_total : float
        Each site's total ε (tables + evaluation).
    expected_error : float in (0, 1)
        The error the model is expected to reach (p).
    n_sites : int, optional
    n_features : int
        d: the first-order tables are d + 1.
    """
    if not (epsilon_total > 0 and math.isfinite(epsilon_total)):
        raise InputError(f"epsilon must be finite and > 0, got {epsilon_total!r}")
    if n_features < 1:
        raise InputError(f"features must be >= 1, got {n_features!r}")
    rows = _rows(n_rows, n_sites)
    S, total = len(rows), float(sum(rows))
    p = float(expected_error)
    grid = []
    for s in shares:
        eps_t = (1.0 - s) * epsilon_total
        # the first-order tables: half of the tables' budget over d + 1 tables (Gaussian)
        sigma = release_scale(eps_t, "gaussian", delta, 2 * (n_features + 1))
        for f in fractions:
            n_t = (1.0 - f) * total
            v_t = (n_features + 1) * p * (1.0 - p) / n_t + 2.0 * S * sigma * sigma / ((n_features + 1) * n_t * n_t)
            pm = p + math.sqrt(v_t)
            pc = min(pm, MAX_ERROR)
            c = expected_holdout_certificate(rows, s * epsilon_total, pc, None, f, "laplace", delta, coverage).value
            J = c + (pm - pc)  # beyond MAX_ERROR: the bound's margin there, plus the modelled error
            grid.append((J, f, s, pm, c))
    J_min = min(g[0] for g in grid)
    # ties within TIE of the minimum: the plan spending least on the evaluation (fraction, then share)
    _, f, s, pm, c = min((g for g in grid if g[0] <= J_min * (1.0 + TIE)), key=lambda g: (g[1], g[2]))
    return HoldoutPlan(float(f), float((1.0 - s) * epsilon_total), float(s * epsilon_total), float(c), float(pm), p)


def resolve_plan(rows: Sequence[int], sites: int | None, epsilon: float, error: float, n_features: int,
                 holdout: float | None, eval_epsilon: float | None, delta: float = DEFAULT_DELTA,
                 coverage: float = 0.95) -> dict[str, Any]:
    """The plan for total ε per site: the fraction and ε split (None: chosen by
    :func:`plan_holdout`; given ones are kept) and the expected certificate at them.

    What ``marg plan`` prints and what ``marg export --holdout auto`` records in the bundle
    (:func:`marg.api.plan_holdout`): one plan, whoever asks.
    """
    rows = list(rows) * sites if (sites and len(rows) == 1) else list(rows)
    if eval_epsilon is not None and not (0.0 < eval_epsilon < epsilon):
        raise InputError(f"{option('evaluate_epsilon')} must be in (0, {option('epsilon')} = {epsilon:g}), "
                         f"got {eval_epsilon!r}")
    if holdout is None or eval_epsilon is None:
        auto = plan_holdout(rows, epsilon, error, None, n_features, delta, coverage,
                            **({"fractions": (holdout,)} if holdout is not None else {}),
                            **({"shares": (eval_epsilon / epsilon,)} if eval_epsilon is not None else {}))
        f, e_eval, model_error, rule = auto.fraction, auto.epsilon_evaluate, auto.model_error, auto.rule
        # the planner's modelled error grows without bound on tiny, wide sites (it was refused above 1): a model
        # expected no better than chance is planned at chance, as the planner's own objective extrapolates
        model_error = min(model_error, MAX_ERROR)
    else:
        f, e_eval, model_error, rule = holdout, eval_epsilon, error, "given"
    exp = expected_holdout_certificate(rows, e_eval, model_error, None, f, "laplace", delta, coverage)
    return {"rows": rows, "epsilon": epsilon, "expected_error": error, "holdout": f, "epsilon_tables": epsilon - e_eval,
            "epsilon_evaluate": e_eval, "model_error": model_error, "expected_certificate": exp.value,
            "coverage": coverage, "features": n_features, "rule": rule}
