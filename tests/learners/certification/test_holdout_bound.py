"""The holdout bound covers the true error of a fixed rule, by simulation through OpenDP's noise.

A known population (a categorical x, y | x known) and a fixed rule h; its error rate at a
site is exact. Each simulated evaluation draws the sites' held-out rows, counts the rule's
errors, noises the (correct, error) table through the same call the evaluation release makes
(:func:`marg.marginals.privacy.privatize` on one count table at the release's budget; all
simulations in one vectorised call) and computes the certificates. A valid 95 % bound covers
in ≥ 95 % of the runs; the tests require at least the 0.1 % quantile of Binomial(R, 0.95)
coverages out of R runs, so a bound made too tight fails (the naive bound that ignores the
noise is shown to fail the same criterion).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import beta, binom

from marg.learners.certification.holdout_certificate import Released, exact_bound, holdout_certificates, released_counts
from marg.marginals.data.codebook import Codebook
from marg.marginals.counts.dp_conversions import rho_for_epsilon
from marg.marginals.privacy import privatize
from marg.marginals.counts.tables import MarginalTable
from marg.protocols.evaluation import OUTCOME, TRUTH, outcome_codebook, release_table

R = 500  # simulated evaluations per mechanism
MIN_COVERED = int(binom.ppf(0.001, R, 0.95))
SITES = {"north": 60, "south": 36, "city": 24}  # held-out rows per site (≈ 20 % of 600 patients)
P_X = np.array([0.35, 0.25, 0.2, 0.2])  # the population: x in 4 levels, P(y = 1 | x), rule h(x)
P_Y1 = {"north": np.array([0.1, 0.3, 0.75, 0.9]), "south": np.array([0.15, 0.4, 0.6, 0.95]),
        "city": np.array([0.05, 0.2, 0.8, 0.85])}
RULE = np.array([0, 0, 1, 1])


def true_error(site: str) -> float:
    p1 = P_Y1[site]
    return float(np.sum(P_X * np.where(RULE == 1, 1.0 - p1, p1)))


def simulate_tables(rng, site: str, n: int, content: str, classes=("no", "yes")) -> np.ndarray:
    """(R, ...) exact release tables of the rule on R independent held-out samples of n rows."""
    x = rng.choice(P_X.size, size=(R, n), p=P_X)
    y = (rng.random((R, n)) < P_Y1[site][x]).astype(np.int64)
    pred = RULE[x]
    conf = np.zeros((R, 2, 2), dtype=np.int64)
    for a in range(2):
        for b in range(2):
            conf[:, a, b] = np.sum((pred == a) & (y == b), axis=1)
    study = _study(classes)
    return np.stack([release_table(conf[r], study, content).counts for r in range(R)])


def _study(classes):
    from marg.marginals.data.codebook import CategoricalFeature, Label

    return Codebook(features=(CategoricalFeature("x", ("a", "b", "c", "d")),), label=Label("y", tuple(classes)))


def noisy(tables: np.ndarray, mechanism: str, epsilon: float = 0.5):
    """Noise R tables at once through privatize (the evaluation release's call and budget);
    return the noisy tables and the draws in one cell."""
    if mechanism == "exact":
        return tables, ()
    ecb = outcome_codebook(_study(("no", "yes")))
    flat = tables.reshape(R, -1)
    t = MarginalTable(clique=(TRUTH, OUTCOME), counts=flat)  # one table of the release's budget, R copies
    kw = {"epsilon": epsilon} if mechanism == "laplace" else {"rho": rho_for_epsilon(epsilon, 1e-6)}
    (out,), _ = privatize([t], codebook=ecb, **kw)
    return out.counts.reshape(tables.shape), out.noise.draws(True)


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian", "exact"])
def test_pooled_and_per_site_certificates_cover_the_true_error(mechanism):
    rng = np.random.default_rng({"laplace": 1, "gaussian": 2, "exact": 3}[mechanism])
    sims = {}
    for s, n in SITES.items():
        sims[s] = noisy(simulate_tables(rng, s, n, "classes"), mechanism)
    weights = np.array(list(SITES.values()), dtype=float)
    pooled_truth = float(np.dot(weights, [true_error(s) for s in SITES]) / weights.sum())
    covered = {"pooled": 0, "north": 0, "city": 0, "no": 0, "yes": 0}
    class_truth = {}
    for k, s in enumerate(SITES):  # class-wise truth: error rate among true class y, pooled over the sites' rows
        p1 = P_Y1[s]
        for c, py in (("no", 1.0 - p1), ("yes", p1)):
            mass = P_X * py
            err = float(np.sum(mass * (RULE != (c == "yes"))) / mass.sum())
            class_truth.setdefault(c, []).append((weights[k] * mass.sum(), err))
    class_truth = {c: sum(w * e for w, e in v) / sum(w for w, _ in v) for c, v in class_truth.items()}
    for r in range(R):
        rel = [(s, *released_counts(sims[s][0][r], sims[s][1], "classes")) for s in SITES]
        certs = holdout_certificates(rel, ["no", "yes"], 0.95, per_site=["north", "city"])
        covered["pooled"] += certs.pooled.value >= pooled_truth
        covered["north"] += certs.sites["north"].value >= true_error("north")
        covered["city"] += certs.sites["city"].value >= true_error("city")
        for c in ("no", "yes"):
            covered[c] += certs.classes[c].value >= class_truth[c]
    assert min(covered.values()) >= MIN_COVERED, (mechanism, covered, MIN_COVERED)


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_the_error_count_release_covers_and_the_naive_bound_does_not(mechanism):
    """The default (correct, error) release at a small evaluation budget: the exact bound covers;
    Clopper–Pearson on the noisy counts (noise ignored) falls below the criterion."""
    rng = np.random.default_rng(11 if mechanism == "laplace" else 12)
    sims = {s: noisy(simulate_tables(rng, s, n, "errors"), mechanism, epsilon=0.25) for s, n in SITES.items()}
    weights = np.array(list(SITES.values()), dtype=float)
    truth = float(np.dot(weights, [true_error(s) for s in SITES]) / weights.sum())
    ours = naive = 0
    for r in range(R):
        rel = [(s, *released_counts(sims[s][0][r], sims[s][1], "errors")) for s in SITES]
        b = holdout_certificates(rel, ["no", "yes"], 0.95).pooled
        ours += b.value >= truth
        e = min(max(0, int(b.errors)), max(1, int(b.rows)) - 1)
        naive += beta.ppf(0.95, e + 1, max(1, int(b.rows)) - e) >= truth
    assert ours >= MIN_COVERED, (ours, MIN_COVERED)
    assert naive < MIN_COVERED, (naive, MIN_COVERED)


def test_exact_counts_give_the_one_sided_clopper_pearson_limit():
    for e, n in ((0, 40), (7, 50), (30, 134), (49, 50)):
        assert exact_bound(Released(e, n), 0.95).value == pytest.approx(beta.ppf(0.95, e + 1, n - e), rel=1e-12)
    assert exact_bound(Released(50, 50)).value == 1.0


def test_the_bound_inverts_the_convolution_of_binomial_and_noise():
    """At the bound p⁺, P(Binomial(n⁻, p⁺) + Z ≤ e) = α_e, with Z's pmf convolved by brute force."""
    b = 3.0
    parts = (("laplace", b, True, 3),)
    rel = Released(25, 150, parts, (("laplace", b, True, 6),))
    res = exact_bound(rel, 0.95)
    r = np.exp(-1.0 / b)
    z = np.arange(-200, 201)
    one = (1 - r) / (1 + r) * r ** np.abs(z)
    pz = np.convolve(np.convolve(one, one), one)  # support -600..600
    zs = np.arange(-600, 601)
    k = np.arange(res.rows_low + 1)
    cdf_z = np.cumsum(pz)

    def F(p):
        idx = np.clip(25 - k + 600, -1, zs.size - 1)
        return float(np.dot(binom.pmf(k, res.rows_low, p), np.where(idx < 0, 0.0, cdf_z[idx])))

    assert F(res.value) == pytest.approx(res.alpha_errors, abs=2e-6)
    assert F(res.value - 1e-3) > res.alpha_errors > F(res.value + 1e-3)
    # the held-out count's lower bound: P(Z_n > q) ≤ α_n at q = ñ − n⁻, and not at q − 1
    pn = np.convolve(pz, pz)
    q = 150 - res.rows_low
    upper = lambda t: float(pn[np.arange(-1200, 1201) > t].sum())  # noqa: E731
    assert upper(q) <= res.alpha_rows < upper(q - 1)


def test_more_noise_or_fewer_rows_never_tighten_the_bound():
    base = exact_bound(Released(20, 120, (("laplace", 2.0, True, 3),), (("laplace", 2.0, True, 6),))).value
    assert exact_bound(Released(20, 120, (("laplace", 4.0, True, 3),), (("laplace", 4.0, True, 6),))).value > base
    assert exact_bound(Released(20, 100, (("laplace", 2.0, True, 3),), (("laplace", 2.0, True, 6),))).value > base
    assert exact_bound(Released(20, 120)).value < base
