"""A certificate from held-out rows: an exact upper confidence bound on an error rate from noisily released counts.

**What is released.** Site s predicts its n_s held-out rows with the model's deterministic
rule and releases (:mod:`marg.protocols.evaluation`) its error count and its count of
correct predictions, each plus one independent noise draw of the same scale (a patient is
one of the two, so the pair has L1 sensitivity 1 and costs what the error count alone
would): Ẽ_s = E_s + Z_s, C̃_s = C_s + W_s. The held-out count is derived, ñ_s = Ẽ_s + C̃_s =
n_s + Z_s + W_s: it is sensitive (it reveals the site's size), so it is never released
exactly. Summed over the sites of a certificate, Ẽ = E + Z and ñ = n + Z_n, where Z (Z_n)
is the sum of the noise draws in Ẽ (ñ), whose exact distribution on the integers is the
convolution of the draws' pmfs (:func:`marg.marginals.noise_tails.lattice_pmf`: discrete
Laplace or discrete Gaussian, as OpenDP added them). A confusion-table release
(N[predicted, y], K² cells) and a class-wise release (N[y, outcome], 2K cells) give the same
two sums with more draws in each.

**The bound.** α = 1 − coverage; α_n = ``ROWS_SHARE``·α when ñ carries noise (else 0) and
α_e = α − α_n:

    q_n  = min{q ∈ ℤ : P(Z_n > q) ≤ α_n},            n⁻ = ⌊ñ⌋ − q_n,
    F_p(e) = P(Binomial(n⁻, p) + Z ≤ e) = Σ_{k=0}^{n⁻} C(n⁻,k) p^k (1−p)^{n⁻−k} · P(Z ≤ e − k),
    bound = sup{p ∈ [0, 1] : F_p(max(⌊Ẽ⌋, 0)) ≥ α_e}        (1 when n⁻ ≤ 0).

Without noise it is the exact one-sided Clopper–Pearson limit Beta⁻¹(1 − α; E + 1, n − E).

**Why it holds** (probability ≥ 1 − α over the held-out sample *and* the noise that the
model's error rate p* on the population the rows were drawn from is ≤ bound). Given n, the
rows are independent draws, so E ~ Binomial(n, p*) and Ẽ has cdf F⁽ⁿ⁾_{p*}. On the event
A = {Z_n ≤ q_n}, of probability ≥ 1 − α_n, n⁻ ≤ n, and Binomial(n⁻, p) is stochastically
smaller than Binomial(n, p), so F⁽ⁿ⁻⁾_p ≥ F⁽ⁿ⁾_p: p* excluded implies F⁽ⁿ⁾_{p*}(Ẽ) < α_e,
an event of probability ≤ α_e (a random variable's own cdf at it is below α_e with
probability ≤ α_e). The union bound gives ≤ α_n + α_e = α, whatever the dependence of Z and
Z_n. F_p is decreasing in p, so the set of non-excluded p is an interval [0, bound],
found by bisection. Raising Ẽ to 0 only enlarges the interval. The truncated pmf is used
conservatively: P(Z ≤ z) is taken as its truncated value plus the mass left out, and
P(Z_n > q) likewise. The noise of the **sum** enters once, exactly — not a half-width per
cell and per total — which is what makes the bound informative on a few hundred rows.

**The population it names** (issues 38, 44). The promise is "among new patients like the
sites' patients": the sites' error rates p_s weighted by their **patients**, Σ_s (N_s/N)·p_s.
When every site holds out the **same fraction** f (each patient independently, by the keyed
hash), the held-out rows are a uniform sample of all the study's patients, so the pooled bound
below is about that population. When the fractions differ, pooling would weight each site by
its held-out count (sites erring 10/25/45 % holding out 50/20/10 % certify 0.195 for a
population error of 0.267). The sites are then grouped by fraction (G groups; sites of one
fraction pool exactly, a uniform sample of the group's patients), each group's pooled bound
u_g is taken at α/G, and the certificate is their **patient-weighted** sum

    bound = Σ_g Ŵ_g·u_g,   Ŵ_g = Σ_{s∈g} max(ñ_s, 0)/f_g  /  Σ_h Σ_{s∈h} max(ñ_s, 0)/f_h,

each site's number of patients estimated by its released held-out count over its fraction
(N̂_s = ñ_s/f_s: the keyed split holds each patient out with probability f_s). On the event that
every group's rate lies below its bound (probability ≥ 1 − α, Bonferroni over the G groups)
Σ_g W_g·p_g ≤ Σ_g W_g·u_g for every weighting W, the estimated one included; the simulation in
``tests/learners/test_holdout_population.py`` checks the coverage of the true patient-weighted
error (N_s fixed, held-out counts drawn). It is never above the largest group bound, the old
certificate, and a small site enters by its weight instead of deciding the whole bound. A release
whose fraction is not known leaves its site's weight unknown: the certificate is then the largest
per-site bound at α/S (any weighting). :func:`holdout_certificates` says which in ``population``.

**One held-out set, several models** (issues 38, 44). Whoever keeps the best of several models
evaluated on the same held-out rows looks at all their evaluations. The site's ledger numbers the
distinct models evaluated on a held-out set (``evaluations_on_split``, 1 for the first;
:mod:`marg.protocols.evaluation_ledger`); the j-th model's certificate is at α·g(j),
g(j) = 6/(π²·j²) (:func:`evaluation_share`). Σ_j g(j) = 1, so the certificates of every model ever
evaluated on the set hold together with probability ≥ 1 − α, whichever is kept (α/j is not valid:
Σ 1/j diverges). Among the sites the largest ordinal counts (never less than the model's ordinal at
any one site). A stated number K (``marg certify --evaluations K``) can only lower the share:
min(g(j), 1/K). A release without the ordinal (an older marg) is taken as the first, and said.

Pooled over sites whose error rates differ, E is a sum of binomials with the held-out-count
weighted mean rate p̄; by Hoeffding's theorem (1956) such a sum is more concentrated than
Binomial(n, p̄) in the tails the test uses, so the pooled bound covers p̄ (the simulation
in ``tests/learners/test_holdout_bound.py`` draws sites with different rates). A **per-site** certificate is
the same bound on one site's release
(its own held-out population); a **class-wise** certificate bounds each class's error rate
(the rate among rows of true class y) at α/K each, so all K hold together. Every bound
assumes what every certificate here assumes: the rows are a random sample of the population
of interest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Sequence

import numpy as np

from marg.errors import InputError
from marg.marginals.noise_tails import NoisePart, lattice_pmf, merge

ROWS_SHARE = 0.25  # share of α spent on the lower bound of the (noisy) held-out count


def evaluation_share(ordinal: int, stated: int | None = None) -> float:
    """The share of α of the ``ordinal``-th model evaluated on a held-out set (module docstring): g(j) = 6/(π²·j²),
    or min(g(j), 1/``stated``) when a number of models evaluated on it is stated (a statement can only lower it)."""
    j = int(ordinal)
    if j < 1 or j != ordinal:
        raise InputError(f"a model's ordinal on its held-out set must be a whole number >= 1, got {ordinal!r}")
    g = 6.0 / (math.pi ** 2 * j * j)
    return min(g, 1.0 / int(stated)) if stated is not None else g
_TAIL = 1e-4  # share of a level allowed as truncated noise mass (added back conservatively)
LAYOUTS = ("errors", "classes", "confusion")


@dataclass(frozen=True)
class Released:
    """Released error and held-out counts over some sites, with the noise draws in each.

    Attributes
    ----------
    errors, rows : float
        Ẽ and ñ as released (sums over sites).
    noise_errors, noise_rows : tuple of (mechanism, scale, discrete, count)
        The independent draws summed into Ẽ and into ñ (() when exact).
    """

    errors: float
    rows: float
    noise_errors: tuple = ()
    noise_rows: tuple = ()

    def __add__(self, other: "Released") -> "Released":
        return Released(self.errors + other.errors, self.rows + other.rows,
                        tuple(merge(self.noise_errors + other.noise_errors)),
                        tuple(merge(self.noise_rows + other.noise_rows)))


def released_counts(counts: np.ndarray, draws: Sequence[NoisePart], layout: str) -> tuple[Released, list[Released]]:
    """One site's evaluation table read as (overall, per true class) released counts.

    Parameters
    ----------
    counts : ndarray
        ``errors``: N[outcome] (2,) = (correct, error); ``classes``: N[y, outcome] (K, 2);
        ``confusion``: N[predicted, y] (K, K).
    draws : sequence of (mechanism, scale, discrete, count)
        The noise draws in ONE cell of the table (its record; () when exact).
    layout : {"errors", "classes", "confusion"}

    Returns
    -------
    overall : Released
    by_class : list of Released
        Per true class (empty for ``errors``).
    """
    N = np.asarray(counts, dtype=np.float64)
    draws = tuple(draws)

    def parts(k: int) -> tuple:
        return tuple((m, b, d, c * k) for m, b, d, c in draws) if k else ()

    if layout == "errors":
        if N.shape != (2,):
            raise InputError(f"an error-count release has 2 cells (correct, error), got shape {N.shape}")
        return Released(float(N[1]), float(N.sum()), parts(1), parts(2)), []
    if layout == "classes":
        if N.ndim != 2 or N.shape[1] != 2:
            raise InputError(f"a class-wise release has shape (K, 2), got {N.shape}")
        K = N.shape[0]
        per = [Released(float(N[y, 1]), float(N[y].sum()), parts(1), parts(2)) for y in range(K)]
        return Released(float(N[:, 1].sum()), float(N.sum()), parts(K), parts(2 * K)), per
    if layout == "confusion":
        if N.ndim != 2 or N.shape[0] != N.shape[1]:
            raise InputError(f"a confusion release is square (K, K), got shape {N.shape}")
        K = N.shape[0]
        off = ~np.eye(K, dtype=bool)
        per = [Released(float(N[off[:, y], y].sum()), float(N[:, y].sum()), parts(K - 1), parts(K)) for y in range(K)]
        return Released(float(N[off].sum()), float(N.sum()), parts(K * (K - 1)), parts(K * K)), per
    raise InputError(f"unknown evaluation layout {layout!r} (expected one of {', '.join(LAYOUTS)})")


@dataclass(frozen=True)
class HoldoutBound:
    """The bound and what it rests on (released sums, the rows' lower bound, the levels)."""

    value: float
    errors: float
    rows: float
    rows_low: int
    coverage: float
    alpha_errors: float
    alpha_rows: float
    noise_sd: float = 0.0  # std of the noise in the released error count
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "errors": self.errors, "rows": self.rows, "rows_low": self.rows_low,
                "coverage": self.coverage, "alpha_errors": self.alpha_errors, "alpha_rows": self.alpha_rows,
                "noise_sd": self.noise_sd, **self.extra}


@lru_cache(maxsize=256)
def _noise_cdf(parts: tuple, tail: float) -> tuple[np.ndarray, int, float]:
    """cdf of the truncated pmf of a noise sum: (P(S ≤ lo + i), lo, lost mass)."""
    pmf, lo, lost = lattice_pmf(list(parts), tail)
    return np.cumsum(pmf), lo, lost


def rows_quantile(parts: Sequence[NoisePart], alpha: float) -> int:
    """The smallest integer q with P(S > q) ≤ ``alpha`` for the noise sum S of ``parts`` (0 if exact)."""
    parts = tuple(p for p in merge(parts) if p[0] != "none" and p[1] > 0 and p[3] > 0)
    if not parts:
        return 0
    tail = _TAIL * alpha
    cdf, lo, lost = _noise_cdf(parts, tail)
    above = 1.0 - cdf + lost  # ≥ P(S > lo + i): the truncated upper tail plus all lost mass
    ok = np.flatnonzero(above <= alpha)
    if not ok.size:  # pragma: no cover - the support reaches far beyond any level used here
        raise InputError(f"noise quantile at level {alpha!r} is beyond the computed support")
    return int(lo + ok[0])


def _noise_sd(parts: Sequence[NoisePart]) -> float:
    from marg.marginals.counts.noise_kinds import noise_of

    v = 0.0
    for m, b, d, c in parts:
        s = noise_of(m).std(b, d)
        v += c * s * s
    return math.sqrt(v)


def exact_bound(rel: Released, coverage: float = 0.95, rows_share: float = ROWS_SHARE) -> HoldoutBound:
    """The bound of the module docstring on released counts ``rel`` at ``coverage``.

    Parameters
    ----------
    rel : Released
        Ẽ, ñ and their noise draws (discrete mechanisms, as count releases are).
    coverage : float in (0, 1)
    rows_share : float in (0, 1)
        Share of α = 1 − coverage spent on the held-out count's lower bound when it is noisy.

    Returns
    -------
    HoldoutBound
    """
    from scipy.stats import beta, binom

    if not 0.0 < coverage < 1.0:
        raise InputError(f"coverage must be in (0, 1), got {coverage!r}")
    if not 0.0 < rows_share < 1.0:
        raise InputError(f"rows_share must be in (0, 1), got {rows_share!r}")
    alpha = 1.0 - coverage
    pe = tuple(p for p in merge(rel.noise_errors) if p[0] != "none" and p[1] > 0 and p[3] > 0)
    pn = tuple(p for p in merge(rel.noise_rows) if p[0] != "none" and p[1] > 0 and p[3] > 0)
    a_n = rows_share * alpha if pn else 0.0
    a_e = alpha - a_n
    n_low = int(math.floor(rel.rows + 1e-9)) - rows_quantile(pn, a_n) if pn else int(round(rel.rows))
    e = max(0, int(math.floor(rel.errors + 1e-9)))
    sd = _noise_sd(pe)

    def result(v: float) -> HoldoutBound:
        return HoldoutBound(float(min(1.0, max(0.0, v))), rel.errors, rel.rows, n_low, coverage, a_e, a_n, sd)

    if n_low <= 0:
        return result(1.0)
    if not pe:  # the error count is exact: Clopper–Pearson at n⁻
        return result(1.0 if e >= n_low else float(beta.ppf(1.0 - a_e, e + 1, n_low - e)))
    cdf, lo, lost = _noise_cdf(pe, _TAIL * a_e)
    top = min(1.0, float(cdf[-1]) + lost)  # ≥ P(Z ≤ z) for z above the support
    k0 = max(0, e - (lo + cdf.size - 1))  # k < k0: e − k above the support
    k1 = min(n_low, e - lo)  # k > k1: e − k below the support, P(Z ≤ e − k) ≤ lost
    ks = np.arange(k0, k1 + 1)
    G = np.minimum(1.0, cdf[e - ks - lo] + lost)

    def F(p: float) -> float:
        below = float(binom.cdf(k0 - 1, n_low, p)) * top if k0 > 0 else 0.0
        above = float(binom.sf(k1, n_low, p)) * lost if k1 < n_low else 0.0
        return below + float(np.dot(binom.pmf(ks, n_low, p), G)) + above

    if F(1.0) >= a_e:
        return result(1.0)
    lo, hi = 0.0, 1.0  # F(lo) ≥ α_e > F(hi): F(0) = P(Z ≤ e) + lost ≥ 1/2 for e ≥ 0
    while hi - lo > 1e-9:
        mid = 0.5 * (lo + hi)
        if F(mid) >= a_e:
            lo = mid
        else:
            hi = mid
    return result(hi)


@dataclass(frozen=True)
class Certificates:
    """The pooled bound, per-site bounds (sites that asked) and class-wise bounds (where released)."""

    pooled: HoldoutBound
    sites: dict[str, HoldoutBound]
    classes: dict[str, HoldoutBound]

    def to_dict(self) -> dict[str, Any]:
        return {"pooled": self.pooled.to_dict(), "sites": {s: b.to_dict() for s, b in self.sites.items()},
                "classes": {c: b.to_dict() for c, b in self.classes.items()}}


def holdout_certificates(releases: Sequence[tuple[str, Released, list[Released]]], classes: Sequence[str],
                         coverage: float = 0.95, per_site: Sequence[str] = (),
                         fractions: Sequence[float | None] | None = None, models: int = 1,
                         share: float | None = None) -> Certificates:
    """The pooled certificate over every site, per-site certificates for ``per_site``, and
    class-wise certificates (at α/K each, simultaneous) when every site released per-class counts.

    Parameters
    ----------
    releases : sequence of (site, overall Released, per-class Released list)
        One per site (:func:`released_counts`).
    classes : sequence of str
        The class names (K).
    coverage : float in (0, 1)
        Of each bound: the pooled one, each site's (its own population), the class-wise set.
    per_site : sequence of str
        The sites that asked for a certificate of their own.
    fractions : sequence of float or None, optional
        Each release's held-out fraction (an entry None: not known). One fraction (or one site, or
        ``fractions`` None: the caller knows they are one): the pooled bound; different ones: the
        patient-weighted sum of the fraction groups' bounds at α/G; an unknown one: the largest
        per-site bound at α/S (module docstring).
    models : int
        A number of models evaluated on the held-out split (≥ 1): every bound at α/``models`` (Bonferroni).
    share : float in (0, 1], optional
        This model's share of α instead (:func:`evaluation_share`); every bound at α·``share``.
    """
    if not releases:
        raise InputError("no evaluation releases to certify from")
    if int(models) != models or models < 1:
        raise InputError(f"the number of models evaluated on the held-out split must be >= 1, got {models!r}")
    if share is not None and not 0.0 < share <= 1.0:
        raise InputError(f"a model's share of alpha must be in (0, 1], got {share!r}")
    alpha = (1.0 - coverage) * (share if share is not None else 1.0 / int(models))
    level = 1.0 - alpha
    total = releases[0][1]
    for _, r, _ in releases[1:]:
        total = total + r
    fr = [None if f is None else float(f) for f in fractions] if fractions is not None else [1.0] * len(releases)
    groups: dict[float, list[int]] = {}
    for i, f in enumerate(fr):
        if f is not None:
            key = next((g for g in groups if abs(g - f) <= 1e-12), f)
            groups.setdefault(key, []).append(i)
    one = len(releases) == 1 or (None not in fr and len(groups) == 1)
    if one:
        pooled = exact_bound(total, level)
        pooled = HoldoutBound(**{**pooled.__dict__, "coverage": coverage, "extra": {
            "population": "the sites' patients weighted by their numbers (one held-out fraction at every site: the "
                          "held-out rows are a uniform sample of the study's patients)"}})
    elif None not in fr:
        pooled = _weighted(releases, groups, alpha, coverage, total)
    else:
        S = len(releases)
        each = {s: exact_bound(r, 1.0 - alpha / S) for s, r, _ in releases}
        worst = max(each, key=lambda s: each[s].value)
        pooled = HoldoutBound(each[worst].value, total.errors, total.rows, sum(b.rows_low for b in each.values()),
                              coverage, alpha / S, 0.0, each[worst].noise_sd, extra={
                                  "population": f"the sites' patients under any weighting of the sites (a site's "
                                                f"held-out fraction is not known, so its number of patients is not: "
                                                f"the largest of the {S} per-site bounds, each at α/{S})",
                                  "site_bounds": {s: b.value for s, b in each.items()}})
    sites = {s: exact_bound(r, level) for s, r, _ in releases if s in set(per_site)}
    by_class: dict[str, HoldoutBound] = {}
    if all(len(pc) == len(classes) for _, _, pc in releases) and len(classes) > 0 and one:
        level = 1.0 - (1.0 - level) / len(classes)
        for y, name in enumerate(classes):
            acc = releases[0][2][y]
            for _, _, pc in releases[1:]:
                acc = acc + pc[y]
            by_class[name] = exact_bound(acc, level)
    return Certificates(pooled, sites, by_class)


def _weighted(releases: Sequence[tuple[str, Released, list[Released]]], groups: dict[float, list[int]], alpha: float,
              coverage: float, total: Released) -> HoldoutBound:
    """The patient-weighted sum of the fraction groups' pooled bounds, each at α/G (module docstring)."""
    G = len(groups)
    bounds, weights = {}, {}
    for f, idx in groups.items():
        acc = releases[idx[0]][1]
        for i in idx[1:]:
            acc = acc + releases[i][1]
        bounds[f] = exact_bound(acc, 1.0 - alpha / G)
        weights[f] = sum(max(releases[i][1].rows, 0.0) for i in idx) / f  # N̂_g = Σ ñ_s / f_g
    W = sum(weights.values())
    if W <= 0.0:
        value = 1.0
        weights = {f: 1.0 / G for f in groups}
    else:
        weights = {f: w / W for f, w in weights.items()}
        value = float(min(1.0, sum(weights[f] * bounds[f].value for f in groups)))
    sd = math.sqrt(sum((weights[f] * bounds[f].noise_sd) ** 2 for f in groups))
    return HoldoutBound(value, total.errors, total.rows, sum(b.rows_low for b in bounds.values()), coverage, alpha / G,
                        0.0, sd, extra={
                            "population": f"the sites' patients weighted by their numbers (the sites held out "
                                          f"different fractions: the {G} fraction groups' bounds, each at α/{G}, "
                                          f"weighted by their patients, held-out count over fraction)",
                            "group_bounds": {f"{f:g}": bounds[f].value for f in groups},
                            "group_weights": {f"{f:g}": weights[f] for f in groups},
                            "group_sites": {f"{f:g}": [releases[i][0] for i in idx] for f, idx in groups.items()}})


def certify_model(model: Any, releases: Sequence[Any], coverage: float = 0.95,
                  evaluations: int | None = None) -> Certificates:
    """Replace ``model``'s certificate by the pooled holdout bound of the sites' evaluation releases.

    ``releases``: the verified releases (:func:`marg.protocols.evaluation.verified_evaluations`). The pooled bound
    (:func:`holdout_certificates`) becomes the model's certificate (kind ``"holdout"``); it, the per-site and the
    class-wise bounds are recorded in ``model.info["holdout_certificate"]``. α is this model's share
    (:func:`evaluation_share`) for the largest ordinal the releases record, at most 1/``evaluations`` when the user
    states a number (``marg certify --evaluations K``); ``models_source``: ``"ledger"``, ``"stated"`` or ``"unknown"``.
    """
    from ..core.certificate import Certificate

    if evaluations is not None and (isinstance(evaluations, bool) or int(evaluations) != evaluations
                                    or evaluations < 1):
        raise InputError(f"evaluations must be a whole number of models >= 1, got {evaluations!r}")
    counts, asked = [], []
    fractions = [getattr(r, "fraction", None) for r in releases]
    known = [getattr(r, "evaluations_on_split", None) for r in releases]
    ordinal = max([int(k) for k in known if k is not None] or [1])
    ledger = all(k is not None for k in known)
    share = evaluation_share(ordinal, evaluations)
    stated = evaluations is not None and share < evaluation_share(ordinal)
    models = max(ordinal, int(evaluations)) if evaluations is not None else ordinal
    models_known = ledger or evaluations is not None
    source = "stated" if stated or (evaluations is not None and not ledger) else ("ledger" if ledger else "unknown")
    for r in releases:
        t = r.table
        overall, per_class = released_counts(t.counts, t.noise.draws(True), r.content)
        counts.append((r.site, overall, per_class))
        if r.site_certificate:
            asked.append(r.site)
    classes = list(model.codebook.label.classes)
    certs = holdout_certificates(counts, classes, coverage, per_site=asked, fractions=fractions, share=share)
    bound = certs.pooled
    note = "" if models_known else (
        "the evaluation releases do not say how many models were evaluated on this held-out split (released by an "
        "older marg): the bound takes this model as the first, and does not hold if it was not (state the number "
        "of models evaluated with marg certify --evaluations K)")
    said = {"ledger": f"this model the {_ordinal_words(ordinal)} evaluated on it, as the sites' ledgers record",
            "stated": f"{evaluations} model(s) as stated (--evaluations {evaluations})"}.get(source, "")
    model.estimator.set_certificate(Certificate(bound.value, "holdout", coverage, False, len(classes), note=note))
    model.info = {**model.info, "holdout_certificate": {
        **bound.to_dict(), "models_on_split": models, "ordinal_on_split": ordinal, "alpha_share": share,
        "models_known": models_known, "models_source": source,
        "models_note": note or (f"α·{share:.4g} of α = {1.0 - coverage:g} for this model: the models evaluated on this "
                                f"held-out split share α (6/(π²·j²) for the j-th, so keeping the best of any number is "
                                f"covered), {said}"),
        "fractions": {r.site: f for r, f in zip(releases, fractions)},
        "sites": [r.site for r in releases], "privacy": {r.site: r.privacy for r in releases},
        "site_certificates": {s: v.to_dict() for s, v in certs.sites.items()},
        "class_certificates": {c: v.to_dict() for c, v in certs.classes.items()},
        "bundles": [r.digest for r in releases]}}
    return certs


def _ordinal_words(j: int) -> str:
    return f"{j}{'th' if 10 <= j % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(j % 10, 'th')}"
