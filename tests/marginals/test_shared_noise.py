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
from marg.marginals.dp_conversions import dp_prelude
from marg.marginals.noise_tails import halfwidth
from marg.marginals.release_plan import TableSpec
from marg.marginals.shared_noise import MECHANISM, SharedNoisePlan, ddg_rho, shared_plan
from marg.marginals.synthetic import demo_codebook
from marg.marginals.tables import MarginalTable, plan_cliques
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
        exact[i] = MarginalTable(clique=t.clique, counts=np.arange(t.counts.size, dtype=np.int64).reshape(t.counts.shape))
    shares = {s: plan.share(exact) for s in ("a", "b", "c")}
    for ts in shares.values():
        for t, e in zip(ts, exact):
            assert t.counts.dtype.kind == "i" and t.noise.mechanism == MECHANISM
            assert (t.noise.threshold, t.noise.n_sites) == (2, 3) and not np.array_equal(t.counts, e.counts)
    keys = {s: x25519.X25519PrivateKey.generate() for s in shares}
    pooled = secure_sum_tables(shares, keys)
    assert [t.noise for t in pooled] == plan.sum_records(3)
    for t, e in zip(pooled, exact):  # the pool is the three sites' exact counts plus three shares
        noise = t.counts - 3 * e.counts
        assert noise.shape == e.counts.shape and np.abs(noise).max() < 60 * t.noise.std


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
