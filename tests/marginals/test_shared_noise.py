"""Shared noise under secure aggregation (issue 44): the distributed discrete Gaussian's shares and their accounting.

Oracles: the secure sum itself (:func:`marg.protocols.secagg_tables.secure_sum_tables`) against the
plan's pooled records; OpenDP's own map of one share's discrete Gaussian and its zCDP → (ε, δ)
conversion; simulation (the variance and tails of sums of shares drawn by OpenDP).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric import x25519

from marg.errors import InputError, RefusedError
from marg.marginals.counts.dp_conversions import dp_prelude
from marg.marginals.counts.noise import NoiseRecord
from marg.marginals.noise_tails import halfwidth
from marg.marginals.privacy import tables_cost
from marg.marginals.release_plan import TableSpec
from marg.marginals.shared_noise import MECHANISM, SharedNoisePlan, ddg_rho, shared_plan
from marg.marginals.synthetic import demo_codebook
from marg.marginals.counts.tables import MarginalTable, plan_cliques
from marg.protocols.secagg_tables import secure_sum_tables


def _count_cliques(cb):
    return [c for c in plan_cliques(cb, "first") if all(cb.feature(a).is_discrete for a in c if a != cb.label.name)]


def _zero_tables(cb, cliques):
    return [MarginalTable(clique=tuple(c), counts=np.zeros([cb.attribute_size(a) for a in c], dtype=np.int64))
            for c in cliques]


def test_the_secure_sum_of_the_shares_carries_the_plans_pooled_records():
    cb = demo_codebook()
    cliques = _count_cliques(cb)
    plan = shared_plan(cb, cliques, rho=0.5, threshold=2, n_sites=3, max_rows=2)
    exact = _zero_tables(cb, cliques)
    for i, t in enumerate(exact):  # some counts, so the shares are added to something
        exact[i] = MarginalTable(clique=t.clique,
                                 counts=np.arange(t.counts.size, dtype=np.int64).reshape(t.counts.shape))
    shares = {s: plan.share(exact) for s in ("a", "b", "c")}
    for ts in shares.values():
        for t, e in zip(ts, exact):
            assert t.counts.dtype.kind == "i" and t.noise.mechanism == MECHANISM
            assert (t.noise.threshold, t.noise.n_sites) == (2, 3)
        # a share was added (all 52 cells unchanged has probability ≈ 0.09^52)
        assert any(not np.array_equal(t.counts, e.counts) for t, e in zip(ts, exact))
    keys = {s: x25519.X25519PrivateKey.generate() for s in shares}
    pooled = secure_sum_tables(shares, keys)
    assert [t.noise for t in pooled] == plan.sum_records(3)
    assert tables_cost(pooled) == plan.study_cost()  # the pooled records state the study's guarantee
    for t, e in zip(pooled, exact):  # the pool is the three sites' exact counts plus three shares
        noise = t.counts - 3 * e.counts
        assert noise.shape == e.counts.shape and np.abs(noise).max() < 60 * t.noise.std
    # a site dropped before the round: the sum of the t = 2 survivors carries two shares
    two = secure_sum_tables({s: shares[s] for s in ("a", "c")}, keys)
    assert [t.noise for t in two] == plan.sum_records(2)
    assert all(r.parts == ((MECHANISM, r.scale, True, 2),) for r in plan.sum_records(2))


def test_a_share_record_travels_as_json_and_other_records_are_written_as_before():
    plan = SharedNoisePlan.build([TableSpec(("x",), "counts", 3, True)], rho=0.2, threshold=2, n_sites=3)
    rec = plan.share_record(plan.tables[0])
    d = rec.to_dict()
    assert (d["threshold"], d["n_sites"], d["mechanism"]) == (2, 3, MECHANISM) and NoiseRecord.from_dict(d) == rec
    old = NoiseRecord(mechanism="gaussian", scale=2.0, std=2.0, epsilon=1.0, delta=1e-6, rho=0.125)
    assert set(old.to_dict()) == {"mechanism", "scale", "std", "epsilon", "delta", "rho"}
    with pytest.raises(InputError, match="exceeds its n_sites"):
        NoiseRecord(mechanism=MECHANISM, scale=1.0, std=1.0, threshold=4, n_sites=3)


def test_fewer_than_t_survivors_are_refused_in_one_line():
    plan = SharedNoisePlan.build([TableSpec(("x",), "counts", 4, True)], rho=0.2, threshold=3, n_sites=5)
    for m in (0, 1, 2):
        with pytest.raises(RefusedError, match="fewer than the secure-aggregation threshold t = 3") as err:
            plan.study_cost(m)
        assert "\n" not in str(err.value)
        with pytest.raises(RefusedError):
            plan.sum_records(m)
    with pytest.raises(InputError):
        plan.study_cost(6)
    assert plan.study_cost(["a", "b", "c"]) == plan.study_cost(3)
    with pytest.raises(RefusedError):
        plan.sum_records({"a", "b"})
    with pytest.raises(InputError, match="twice"):
        plan.study_cost(["a", "a", "b"])
    assert plan.study_cost(3).rho <= plan.study_cost().rho * (1 + 1e-12)
    assert plan.study_cost(5).rho < plan.study_cost(3).rho


def test_the_study_guarantee_is_the_rounds_rho_and_the_site_alone_is_opendps_map():
    dp = dp_prelude()
    plan = SharedNoisePlan.build([TableSpec(("x",), "counts", 6, True), TableSpec(("x", "y"), "counts", 30, True)],
                                 rho=0.4, threshold=3, n_sites=4, max_rows=2, delta=1e-7)
    assert plan.study_cost().rho == pytest.approx(0.4, rel=1e-6) and plan.study_cost().rho <= 0.4
    own = 0.0
    for p in plan.tables:  # OpenDP's discrete Gaussian on i64 at the share's scale, mapped at the L2 sensitivity 2
        meas = dp.m.make_gaussian(dp.vector_domain(dp.atom_domain(T="i64")), dp.l2_distance(T="i64"), scale=p.scale)
        own += float(meas.map(2))
    site = plan.site_cost()
    assert site.rho == pytest.approx(own, rel=1e-12) and site.delta == 1e-7
    # the (ε, δ) statement is OpenDP's conversion of the composed ρ
    for cost in (site, plan.study_cost(), plan.study_cost(4)):
        scale = 1.0 / math.sqrt(2.0 * cost.rho)
        meas = dp.m.make_gaussian(dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=scale)
        while float(meas.map(1.0)) < cost.rho:
            scale = math.nextafter(scale, 0.0)
            meas = dp.m.make_gaussian(dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=scale)
        conv = dp.c.make_zCDP_to_approxDP(meas)
        assert cost.epsilon == pytest.approx(float(conv.map(1.0).epsilon(1e-7)), rel=1e-12)
    # one share alone costs about t times the sum's: the share is t times smaller in variance
    assert site.rho == pytest.approx(3 * plan.study_cost().rho, rel=0.02)


def test_a_recorded_std_is_the_std_of_the_draws():
    plan = SharedNoisePlan.build([TableSpec(("x",), "counts", 20000, True)], rho=0.3, threshold=2, n_sites=3)
    zero = MarginalTable(clique=("x",), counts=np.zeros(20000, dtype=np.int64))
    draws = [plan.share([zero])[0] for _ in range(3)]
    one = draws[0].noise
    assert np.std(draws[0].counts) == pytest.approx(one.std, rel=0.03)
    pooled = sum(d.counts for d in draws)
    (rec,) = plan.sum_records(3)
    assert np.std(pooled) == pytest.approx(rec.std, rel=0.03) and rec.std == pytest.approx(math.sqrt(3) * one.std)


def test_the_plan_round_trips_and_refuses_an_altered_scale():
    cb = demo_codebook()
    plan = shared_plan(cb, _count_cliques(cb), rho=1.0, threshold=2, n_sites=10, max_rows=3, weights="least-squares")
    d = plan.to_dict()
    assert SharedNoisePlan.from_dict(d) == plan
    d["tables"][0]["scale"] *= 0.5
    with pytest.raises(InputError, match="states σ"):
        SharedNoisePlan.from_dict(d)


def test_moment_tables_and_bad_rounds_are_refused():
    with pytest.raises(InputError, match="count tables only"):
        SharedNoisePlan.build([TableSpec(("age", "y"), "moments", 4, False)], rho=0.2, threshold=2, n_sites=3)
    with pytest.raises(InputError, match="exceeds"):
        SharedNoisePlan.build([TableSpec(("x",), "counts", 4, True)], rho=0.2, threshold=4, n_sites=3)
    plan = SharedNoisePlan.build([TableSpec(("x",), "counts", 4, True)], rho=0.2, threshold=2, n_sites=3)
    with pytest.raises(InputError, match="not the table"):
        plan.share([MarginalTable(clique=("z",), counts=np.zeros(4, dtype=np.int64))])


def test_the_theorems_tau_term_is_in_the_stated_rho():
    # σ = 0.6, three shares, 100 cells: τ ≈ 0.37, far from negligible next to Δ²/(3σ²) = 0.93
    assert ddg_rho(0.6, 3, 100, 1.0, 1.0) > 2 * 0.5 / (3 * 0.36)
    assert ddg_rho(3.0, 3, 100, 1.0, 1.0) == pytest.approx(0.5 / (3 * 9.0), rel=1e-9)


def test_the_pooled_tails_hold_by_simulation():
    plan = SharedNoisePlan.build([TableSpec(("x",), "counts", 40000, True)], rho=0.5, threshold=3, n_sites=4)
    zero = MarginalTable(clique=("x",), counts=np.zeros(40000, dtype=np.int64))
    pooled = sum(plan.share([zero])[0].counts for _ in range(3))
    (rec,) = plan.sum_records(3)
    for alpha in (0.1, 0.01, 1e-3):
        q = halfwidth(rec.parts, alpha)
        miss = float(np.mean(np.abs(pooled) > q))
        # the exact lattice bound: the miss rate is at most α (binomial slack of 4 standard errors)
        assert miss <= alpha + 4 * math.sqrt(alpha / 40000)
        # and tight: at a quarter of the half-width the sum is often outside
        assert float(np.mean(np.abs(pooled) > 0.25 * q)) > alpha


# ------------------------------------------------------------------------------------------------
# The privacy loss against an exact Rényi divergence (the oracle: the pmf of the sum by convolution)
# ------------------------------------------------------------------------------------------------
def _log_z(sigma):
    x = np.arange(-int(40 * sigma + 40), int(40 * sigma + 40) + 1, dtype=np.float64)
    return float(np.logaddexp.reduce(-(x * x) / (2 * sigma * sigma)))


def _log_sum_pmf(sigma, m, W):
    """log P(S = z), z = −mW … mW, of the sum of m discrete Gaussians N_Z(0, σ²), each cut to |x| ≤ W
    (convolved in the log domain: no underflow in the far tails the large orders reach)."""
    x = np.arange(-W, W + 1, dtype=np.float64)
    comp = -(x * x) / (2 * sigma * sigma) - _log_z(sigma)
    out = comp
    for _ in range(m - 1):
        res = np.full(out.size + comp.size - 1, -np.inf)
        for j, c in enumerate(comp):
            res[j:j + out.size] = np.logaddexp(res[j:j + out.size], out + c)
        out = res
    return out


def exact_renyi(sigma, m, shift, alpha):
    """(lower, upper) bounds on D_α(S ‖ S + shift), S the sum of m independent N_Z(0, σ²), from the
    convolved pmf on |z| ≤ T with rigorous bounds on what truncation leaves out:

    - envelope P(z) ≤ e^{−z²/(2mσ²)}/Z and P(z) ≥ e^{−z²/(2mσ²) − m/(8σ²)}/Z^m (Z = Σ e^{−x²/(2σ²)}), so
      outside the window P^α Q^{1−α} ≤ C·e^{−(z+(α−1)Δ)²/(2mσ²)} sums to at most 2·C·G(u);
    - components cut at |x| ≤ W change P on the window by a relative r ≤ m·P(|X| > W)·Z^{m−1}·e^{T²/(2mσ²) + m/(8σ²)}.
    """
    s2, lz, a, d = m * sigma * sigma, _log_z(sigma), float(alpha), int(shift)
    log_c = (m * (a - 1) - a) * lz + (a - 1) * m / (8 * sigma * sigma) + a * (a - 1) * d * d / (2 * s2)
    u = math.ceil(math.sqrt(2 * s2 * (max(log_c, 0.0) + 60.0))) + 1
    T = int(math.ceil(a * d)) + u
    log_r_need = T * T / (2 * s2) + m / (8 * sigma * sigma) + (m - 1) * lz + math.log(m) + 60.0
    W = max(T, int(math.ceil(sigma * math.sqrt(2 * log_r_need))))
    log_tail1 = math.log(2.0) - (W + 1) ** 2 / (2 * sigma * sigma) - math.log1p(-math.exp(-(W + 1) / sigma**2)) - lz
    log_r = math.log(m) + log_tail1 + (m - 1) * lz + T * T / (2 * s2) + m / (8 * sigma * sigma) if m > 1 else -np.inf
    r = math.exp(log_r)
    assert r < 1e-20
    logp = _log_sum_pmf(sigma, m, W)
    c0 = m * W  # index of z = 0
    z = np.arange(-T + d, T + 1)  # |z| ≤ T and |z − Δ| ≤ T
    lp, lq = logp[c0 + z], logp[c0 + z - d]
    log_s = float(np.logaddexp.reduce(a * lp + (1 - a) * lq))
    log_out = math.log(2.0) + log_c - u * u / (2 * s2) - math.log1p(-math.exp(-u / s2))
    upper = np.logaddexp(log_s - a * math.log1p(-r), log_out) / (a - 1)
    lower = (log_s + (a - 1) * math.log1p(-r)) / (a - 1)
    return float(lower), float(upper)


ALPHAS = (1.25, 1.5, 2.0, 3.0, 5.0, 8.0, 13.0, 21.0, 34.0)


def test_the_exact_renyi_oracle_is_the_continuous_gaussians_where_the_lattice_is_fine():
    # at σ = 6 a sum of two discrete Gaussians is N(0, 2σ²) to many digits: D_α = α·Δ²/(2·2σ²)
    for a in (2.0, 8.0):
        lo, hi = exact_renyi(6.0, 2, 1, a)
        assert lo <= hi and hi == pytest.approx(a / (4 * 36.0), rel=1e-6)


@pytest.mark.parametrize("rho, t, n, k, cells", [(0.3, 2, 3, 1, 1), (2.0, 3, 3, 1, 1), (1.0, 2, 4, 2, 12)])
def test_the_stated_rho_bounds_the_exact_renyi_divergence_of_the_sum(rho, t, n, k, cells):
    """D_α(sum at x ‖ sum at x + Δ) ≤ α·ρ_stated for every α of a grid, for the sum of exactly t and of
    all n shares, with Δ one cell moved by K or K cells by 1 (the divergence of independent cells adds)."""
    plan = SharedNoisePlan.build([TableSpec(("x",), "counts", cells, True)], rho=rho, threshold=t, n_sites=n,
                                 max_rows=k)
    sigma = plan.tables[0].scale
    for m in sorted({t, n}):
        stated = plan.table_rhos(m)[0]
        assert stated <= rho * (1 + 1e-9)
        for a in ALPHAS:
            worst = max(exact_renyi(sigma, m, k, a)[1], k * exact_renyi(sigma, m, 1, a)[1])
            assert worst <= a * stated, (m, a, worst, a * stated)


def test_a_share_too_small_fails_the_exact_check():
    plan = SharedNoisePlan.build([TableSpec(("x",), "counts", 1, True)], rho=0.3, threshold=3, n_sites=3)
    sigma, stated = plan.tables[0].scale, plan.table_rhos(3)[0]
    assert any(exact_renyi(0.8 * sigma, 3, 1, a)[0] > a * stated for a in ALPHAS)  # 20 % too small a share
    assert any(exact_renyi(sigma, 2, 1, a)[0] > a * stated for a in ALPHAS)  # one survivor fewer than t


def test_without_tau_the_theorem_would_understate_small_shares():
    """σ = ½, three shares: the sum's exact D_α exceeds α·Δ²/(2·3σ²) (the continuous Gaussian's, τ dropped),
    and stays below the theorem's ρ with its τ terms."""
    naive, stated = 1.0 / (2 * 3 * 0.25), ddg_rho(0.5, 3, 1, 1.0, 1.0)
    exact = [exact_renyi(0.5, 3, 1, a) for a in ALPHAS]
    assert any(lo > a * naive for (lo, _), a in zip(exact, ALPHAS))
    assert all(hi <= a * stated for (_, hi), a in zip(exact, ALPHAS))


# ------------------------------------------------------------------------------------------------
# The ledger records both guarantees; the study's is the one charged; `marg audit show` prints both
# ------------------------------------------------------------------------------------------------
def test_the_ledger_records_both_guarantees_and_charges_the_studys(tmp_path):
    import hashlib

    from cryptography.hazmat.primitives.asymmetric import ed25519

    from marg.marginals.accounting import PrivacyCost, Spend
    from marg.protocols.ledger import Ledger
    from tests.helpers.console import marg

    plan = SharedNoisePlan.build([TableSpec(("x", "y"), "counts", 8, True)], rho=0.2, threshold=2, n_sites=3)
    study, own = plan.study_cost(), plan.site_cost()
    assert own.rho > 1.9 * study.rho  # the share alone is about t times the sum's
    key = ed25519.Ed25519PrivateKey.generate()
    led = Ledger(tmp_path / "L")
    led.set_cap(PrivacyCost(rho=2.5 * study.rho), key, "north")  # admits two study charges, not one own cost plus one
    stats = [{"name": "N[x,y]", "kind": "counts", "clique": ["x", "y"], "shape": [4, 2], "mechanism": MECHANISM,
              "std": plan.share_record(plan.tables[0]).std}]
    for i in range(2):
        led.append(bundle_digest=hashlib.sha256(b"%d" % i).hexdigest(), site="north", statistics=stats, cost=study,
                   own_cost=own, private_key=key, round=f"r{i}")
    entries = led.entries()[1:]
    assert all(PrivacyCost.from_dict(e["own_cost"]) == own and PrivacyCost.from_dict(e["cost"]) == study
               for e in entries)
    assert led.spent().rho == pytest.approx(Spend.of(study, study).rho) and led.verify(public_key=key.public_key()).ok
    with pytest.raises(RefusedError, match="budget exhausted"):
        led.append(bundle_digest=hashlib.sha256(b"3").hexdigest(), site="north", statistics=stats, cost=study,
                   own_cost=own, private_key=key)
    res = marg("audit", "show", "--ledger", led.directory, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    lines = [ln for ln in res.stdout.splitlines() if "shared noise:" in ln]
    assert len(lines) == 2 and all(f"ρ={own.rho:.6g}" in ln and "study's guarantee" in ln for ln in lines)
    from marg.reports.audit_page import audit_page

    page = audit_page(led)
    assert page.count("share alone: ε=") == 2 and f"ρ={own.rho:.4g}" in page
    # the second guarantee is signed into the entry: an edit of it is caught
    raw = led.path.read_bytes().replace(f'"rho":{own.rho!r}'.encode(), f'"rho":{own.rho / 2!r}'.encode(), 1)
    assert raw != led.path.read_bytes()
    led.path.write_bytes(raw)
    assert not led.verify(public_key=key.public_key()).ok


def test_a_learner_fits_from_the_pooled_shares_with_the_exact_noise_tails():
    """The pooled summary's box takes the shares' recorded draws (exact lattice tails, not a normal
    approximation): the certificate is not approximate, and the box's noise is the plan's."""
    from marg.learners.classifiers.mrc import MRC
    from marg.marginals.counts.counting import count_tables
    from marg.marginals.summary import Summary

    cb = demo_codebook()
    cliques = plan_cliques(cb, "first")
    plan = shared_plan(cb, cliques, rho=0.5, threshold=2, n_sites=3)
    rng = np.random.default_rng(7)
    shares = {}
    for s in ("a", "b", "c"):
        X = np.column_stack([rng.integers(0, cb.attribute_size(f.name), 250) for f in cb.features]).astype(float)
        y = (rng.random(250) < 1 / (1 + np.exp(-(X[:, 0] - 1)))).astype(int)
        shares[s] = plan.share(count_tables(cb, X, y, cliques))
    pooled = secure_sum_tables(shares, {s: x25519.X25519PrivateKey.generate() for s in shares})
    summary = Summary.from_tables(cb, pooled)
    assert [t.noise for t in summary.released().tables] == plan.sum_records(3)
    cert = MRC().fit(summary).certificate_
    assert not cert.approximate and 0.0 < cert.value <= 1.0
