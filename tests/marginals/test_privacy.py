"""DP release: recorded noise std matches the noise, recorded costs are OpenDP's maps,
composition adds up to the requested budget, the budget cap refuses first; two-round
request files and feature screening."""

from __future__ import annotations

import json
import math
from itertools import combinations

import numpy as np
import pytest

import opendp.prelude as dp

from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label, NumericFeature
from marg.errors import InputError, RefusedError
from marg.marginals.counts.noise import cell_noise_std, gaussian_std, laplace_std
from marg.marginals.allocation import half_split_weights
from marg.marginals.accounting import PrivacyCost, check_budget
from marg.marginals.budget_file import read_budget, write_budget
from marg.marginals.counts.dp_conversions import rho_to_epsilon
from marg.marginals.privacy import plan_cost, privatize, tables_cost
from marg.marginals.request import PairRequest, read_request, write_request
from marg.marginals.counts.counting import count_tables
from marg.marginals.counts.tables import MarginalTable, plan_cliques
from tests.helpers.data import random_rows

dp.enable_features("contrib")


def _codebook(levels=(3, 2, 4), numeric=True, lo=-20.0, hi=100.0):
    feats = [CategoricalFeature(f"f{i}", tuple(f"l{j}" for j in range(m))) for i, m in enumerate(levels)]
    if numeric:
        feats.append(NumericFeature("age", lo=lo, hi=hi))
    return Codebook(features=tuple(feats), label=Label("y", ("neg", "pos")))


def _data(cb, n, seed):
    return random_rows(np.random.default_rng(seed), cb, n)


def _zero_table(shape, dtype=np.int64):
    names = tuple(f"a{i}" for i in range(len(shape)))
    return MarginalTable(clique=names, counts=np.zeros(shape, dtype=dtype))


# ---------------------------------------------------------------------------------------
# Noise distribution facts
# ---------------------------------------------------------------------------------------
def test_discrete_std_formulas_match_direct_sums():
    for b in (0.3, 1.0, 4.0):
        z = np.arange(-2000, 2001, dtype=float)
        w = np.exp(-np.abs(z) / b)
        assert laplace_std(b, True) == pytest.approx(math.sqrt(np.sum(z * z * w) / w.sum()), rel=1e-12)
    assert laplace_std(1e4, True) == pytest.approx(math.sqrt(2) * 1e4, rel=1e-6)
    assert gaussian_std(50.0, True) == pytest.approx(50.0, rel=1e-12)
    assert gaussian_std(0.4, True) < 0.4  # the discrete Gaussian is narrower for small σ


def _pooled_std(mech_kw, shape, reps, dtype=np.int64):
    """Empirical std of the noise over ``reps`` releases of an all-zero table."""
    t = _zero_table(shape, dtype)
    samples, recs = [], []
    for _ in range(reps):
        (out,), _ = privatize([t], **mech_kw)
        samples.append(np.asarray(out.counts, dtype=float).ravel())
        recs.append(out.noise)
    x = np.concatenate(samples)
    return x, recs[0]


@pytest.mark.parametrize(
    "kw, discrete_vs_cont",
    [
        (dict(epsilon=1.0), (laplace_std(1.0, True), laplace_std(1.0, False))),
        (dict(rho=2.0), (gaussian_std(0.5, True), gaussian_std(0.5, False))),
    ],
)
def test_empirical_std_of_released_counts_matches_record(kw, discrete_vs_cont):
    x, rec = _pooled_std(kw, (40, 50, 2), reps=6)  # 24,000 cells
    assert rec.std == pytest.approx(discrete_vs_cont[0], rel=1e-9)
    # The two candidate stds differ by > 4 %; the estimate's relative SE is < 1 %.
    assert abs(discrete_vs_cont[0] - discrete_vs_cont[1]) / discrete_vs_cont[0] > 0.04
    # the std estimate's SE needs the kurtosis of the discrete noise, from its exact pmf
    k = np.arange(-200, 201, dtype=float)
    pmf = np.exp(-np.abs(k) / rec.scale) if "epsilon" in kw else np.exp(-k * k / (2 * rec.scale**2))
    pmf /= pmf.sum()
    kurt = float(np.sum(pmf * k**4) / np.sum(pmf * k**2) ** 2)
    se = rec.std * math.sqrt((kurt - 1.0) / (4.0 * x.size))
    assert abs(x.std() - rec.std) < 5 * se
    assert abs(x.mean()) < 5 * rec.std / math.sqrt(x.size)
    assert np.all(x == np.round(x))  # integer counts stay integer (discrete mechanisms)


def test_empirical_std_of_released_moments_matches_record():
    K = 100
    cb = Codebook(features=(NumericFeature("age", lo=-20.0, hi=100.0),),
                  label=Label("y", tuple(f"c{k}" for k in range(K))))
    B = 100.0
    for kw, kurt in ((dict(epsilon=0.5), 6.0), (dict(rho=0.5), 3.0)):
        rows0, rows1 = [], []
        for _ in range(60):
            t = MarginalTable(clique=("age", "y"), counts=np.zeros((2, K)), kind="moments")
            (out,), cost = privatize([t], codebook=cb, **kw)
            rows0.append(out.counts[0])
            rows1.append(out.counts[1])
        std = cell_noise_std(out, cb)
        assert std[1, 0] == pytest.approx(std[0, 0] * B)
        for rows, s in ((np.concatenate(rows0), std[0, 0]), (np.concatenate(rows1), std[1, 0])):
            se = s * math.sqrt((kurt - 1.0) / (4.0 * rows.size))
            assert abs(rows.std() - s) < 5 * se
        # the normalised vector (row0/B, row1/B²) has L1 sensitivity 2, L2 sensitivity √2
        if "epsilon" in kw:
            assert out.noise.std == pytest.approx(math.sqrt(2) * 2.0 / 0.5 * B)
        else:
            assert out.noise.std == pytest.approx(math.sqrt(2.0) / math.sqrt(2 * 0.5) * B)


# ---------------------------------------------------------------------------------------
# Costs are OpenDP's maps; composition
# ---------------------------------------------------------------------------------------
def _release(kw, seed=0):
    cb = _codebook()
    X, y = _data(cb, 400, seed)
    tables = count_tables(cb, X, y, plan_cliques(cb, "all"))
    noisy, cost = privatize(tables, codebook=cb, **kw)
    return cb, tables, noisy, cost


def test_recorded_cost_equals_opendp_map_laplace():
    cb, tables, noisy, cost = _release(dict(epsilon=0.9))
    for t in noisy:
        r = t.noise
        if t.kind == "counts":
            m = dp.m.make_laplace(dp.vector_domain(dp.atom_domain(T="i64")), dp.l1_distance(T="i64"), scale=r.scale)
            assert r.epsilon == m.map(1)
            assert r.std == pytest.approx(laplace_std(r.scale, True))
        else:
            B = 100.0
            m = dp.m.make_laplace(
                dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float), scale=r.scale / B
            )
            assert r.epsilon == pytest.approx(m.map(2.0), rel=1e-12)
    assert cost.epsilon == pytest.approx(0.9, rel=1e-12)
    assert cost.epsilon <= 0.9 * (1 + 1e-12)
    assert cost.delta == 0.0
    assert cost.rho == pytest.approx(sum(t.noise.epsilon ** 2 / 2 for t in noisy), rel=1e-12)


def test_recorded_cost_equals_opendp_map_gaussian():
    delta = 1e-7
    cb, tables, noisy, cost = _release(dict(rho=0.4, delta=delta))
    for t in noisy:
        r = t.noise
        if t.kind != "counts":
            continue
        m = dp.m.make_gaussian(dp.vector_domain(dp.atom_domain(T="i64")), dp.l2_distance(T="i64"), scale=r.scale)
        assert r.rho == m.map(1)
        assert r.delta == delta
        assert r.epsilon == pytest.approx(dp.c.make_zCDP_to_approxDP(m).map(1).epsilon(delta), rel=1e-9)
    assert cost.rho == pytest.approx(0.4, rel=1e-12)
    assert cost.delta == delta
    assert cost.epsilon == pytest.approx(rho_to_epsilon(0.4, delta), rel=1e-12)
    # the (ε, δ) of a zCDP cost is OpenDP's conversion: ε ≈ ρ + 2 sqrt(ρ log(1/δ)) bound
    assert cost.epsilon <= 0.4 + 2 * math.sqrt(0.4 * math.log(1 / delta)) + 1e-9


@pytest.mark.parametrize("kw", [dict(epsilon=1.3), dict(rho=0.7)])
def test_composition_over_tables_sums_to_requested_budget(kw):
    cb = _codebook(numeric=False)
    X, y = _data(cb, 300, 1)
    tables = count_tables(cb, X, y, plan_cliques(cb, "all"))
    noisy, cost = privatize(tables, codebook=cb, **kw)
    meas = []
    for t in noisy:
        if "epsilon" in kw:
            meas.append(dp.m.make_laplace(dp.vector_domain(dp.atom_domain(T="i64")), dp.l1_distance(T="i64"),
                                          scale=t.noise.scale))
        else:
            meas.append(dp.m.make_gaussian(dp.vector_domain(dp.atom_domain(T="i64")), dp.l2_distance(T="i64"),
                                           scale=t.noise.scale))
    composed = dp.c.make_composition(meas).map(1)  # OpenDP's own sequential composition
    if "epsilon" in kw:
        assert cost.epsilon == pytest.approx(composed, rel=1e-12)
        assert cost.epsilon == pytest.approx(kw["epsilon"], rel=1e-12)
        assert sum(t.noise.epsilon for t in noisy) == pytest.approx(kw["epsilon"], rel=1e-12)
    else:
        assert cost.rho == pytest.approx(composed, rel=1e-12)
        assert cost.rho == pytest.approx(kw["rho"], rel=1e-12)
    assert tables_cost(noisy).rho == pytest.approx(cost.rho, rel=1e-12)
    assert plan_cost(plan_cliques(cb, "all"), cb, **kw) == cost


def test_least_squares_split_minimises_weighted_noise_half_default_custom_weights():
    """The least-squares split minimises the objective-weighted noise, half is the default, custom weights are
    followed."""
    cb = _codebook(levels=(2, 3, 2, 4), numeric=False)
    X, y = _data(cb, 200, 2)
    tables = count_tables(cb, X, y, plan_cliques(cb, "all"))  # 1 + 4 first-order, 6 pairs
    sizes = np.array([t.counts.size for t in tables], dtype=float)
    orders = np.array([len(t.clique) - 1 for t in tables], dtype=float)  # features besides the label
    c = sizes * 4.0 ** (-2 * orders)  # p = 4 features: a cell's weight in an objective is p^-order
    for mech, kw, root in (("laplace", {"epsilon": 2.0}, np.cbrt), ("gaussian", {"rho": 0.5}, np.sqrt)):
        noisy, cost = privatize(tables, codebook=cb, weights="least-squares", **kw)
        share = np.array([t.noise.epsilon if mech == "laplace" else t.noise.rho for t in noisy])
        np.testing.assert_allclose(share, list(kw.values())[0] * root(c) / root(c).sum(), rtol=1e-9)
        # optimality: no other split of the same total has a smaller sum of c_T * var_T
        var = np.array([t.noise.std for t in noisy]) ** 2
        best = float(np.sum(c * var))
        rng = np.random.default_rng(0)
        for _ in range(20):
            w = share * np.exp(0.3 * rng.standard_normal(share.size))
            alt, _ = privatize(tables, codebook=cb, weights=w, **kw)
            assert float(np.sum(c * np.array([t.noise.std for t in alt]) ** 2)) >= best * (1 - 1e-6)
        assert plan_cost(plan_cliques(cb, "all"), cb, weights="least-squares", **kw) == cost
    # the default, the half split: first-order tables share half, equally within each kind
    w = half_split_weights(tables, "y")
    first = np.array([len(t.clique) <= 2 for t in tables])
    assert w[first].sum() == pytest.approx(0.5) and w[~first].sum() == pytest.approx(0.5)
    noisy, cost = privatize(tables, epsilon=2.0, codebook=cb)
    np.testing.assert_allclose([t.noise.epsilon for t in noisy], 2.0 * w, rtol=1e-12)
    with pytest.raises(InputError, match="unknown allocation 'fair'"):
        privatize(tables, epsilon=2.0, codebook=cb, weights="fair")
    # custom weights by clique: shares proportional to them
    custom = {t.clique: (3.0 if len(t.clique) == 3 else 1.0) for t in tables}
    noisy, cost = privatize(tables, epsilon=2.0, weights=custom, codebook=cb)
    eps = np.array([t.noise.epsilon for t in noisy])
    wts = np.array([custom[t.clique] for t in tables])
    np.testing.assert_allclose(eps, 2.0 * wts / wts.sum(), rtol=1e-12)
    assert cost.epsilon == pytest.approx(2.0, rel=1e-12)


def test_privatize_refuses_bad_input():
    cb = _codebook()
    X, y = _data(cb, 50, 3)
    tables = count_tables(cb, X, y, plan_cliques(cb, "first"))
    with pytest.raises(InputError, match="exactly one"):
        privatize(tables, epsilon=1.0, rho=1.0, codebook=cb)
    with pytest.raises(InputError, match="exactly one"):
        privatize(tables, codebook=cb)
    with pytest.raises(InputError, match="epsilon"):
        privatize(tables, epsilon=-1.0, codebook=cb)
    with pytest.raises(InputError, match="moment"):
        privatize(tables, epsilon=1.0)  # moment table without codebook
    noisy, _ = privatize(tables, epsilon=1.0, codebook=cb)
    with pytest.raises(InputError, match="already carries"):
        privatize(noisy, epsilon=1.0, codebook=cb)
    with pytest.raises(InputError, match="weights"):
        privatize(tables, epsilon=1.0, weights=[1.0], codebook=cb)
    with pytest.raises(InputError, match="weights"):
        privatize(tables, epsilon=1.0, weights=[1.0, 0.0] + [1.0] * (len(tables) - 2), codebook=cb)


def test_rho_to_epsilon_matches_opendp_for_real_measurements():
    for sigma in (0.7, 3.0, 20.0):
        m = dp.m.make_gaussian(dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=sigma)
        rho = m.map(1.0)
        ref = dp.c.make_zCDP_to_approxDP(m).map(1.0).epsilon(1e-6)
        assert rho_to_epsilon(rho, 1e-6) == pytest.approx(ref, rel=1e-9)
    e = [rho_to_epsilon(r, 1e-6) for r in (0.01, 0.1, 1.0)]
    assert e[0] < e[1] < e[2]


# ---------------------------------------------------------------------------------------
# Budget
# ---------------------------------------------------------------------------------------
def test_check_budget_refuses_over_cap_in_one_line_and_allows_exact_fill():
    cap = PrivacyCost(epsilon=1.0)
    check_budget(cap, PrivacyCost(epsilon=0.5), PrivacyCost(epsilon=0.5))  # exactly the cap: allowed
    with pytest.raises(RefusedError) as ei:
        check_budget(cap, PrivacyCost(epsilon=0.7), PrivacyCost(epsilon=0.4))
    msg = str(ei.value)
    assert "\n" not in msg
    assert msg.startswith("privacy budget exhausted: spent ε=0.7")
    assert "requested ε=0.4" in msg and "cap ε=1" in msg
    # a pure-ε cap refuses any δ > 0 (Gaussian releases)
    with pytest.raises(RefusedError):
        check_budget(cap, PrivacyCost(), PrivacyCost(epsilon=0.1, delta=1e-6, rho=0.01))
    # a zCDP cap charges pure-DP releases ε²/2
    zcap = PrivacyCost(rho=0.5)
    lap = plan_cost([("f0", "y")], _codebook(), epsilon=1.0)
    assert lap.rho == pytest.approx(0.5)
    check_budget(zcap, PrivacyCost(), lap)
    with pytest.raises(RefusedError):
        check_budget(zcap, PrivacyCost(rho=0.01), lap)
    # an exact release always exceeds a cap
    with pytest.raises(RefusedError, match="no differential-privacy guarantee"):
        check_budget(cap, PrivacyCost(), PrivacyCost.unbounded())
    with pytest.raises(InputError):
        check_budget(PrivacyCost(), PrivacyCost(), PrivacyCost(epsilon=0.1))


def test_budget_file_is_configured_once_and_refusal_needs_no_data(tmp_path):
    cap = PrivacyCost(epsilon=2.0)
    assert read_budget(tmp_path) is None
    p = write_budget(tmp_path, cap)
    before = p.read_bytes()
    assert read_budget(tmp_path) == cap
    write_budget(tmp_path, cap)  # same cap again: no-op
    with pytest.raises(RefusedError, match="already configured"):
        write_budget(tmp_path, PrivacyCost(epsilon=5.0))
    assert p.read_bytes() == before
    # the cost of an export is known from its plan alone: the check runs before counting
    cb = _codebook()
    cliques = plan_cliques(cb, "all")
    spent = PrivacyCost(epsilon=1.5)
    req = plan_cost(cliques, cb, epsilon=1.0)
    with pytest.raises(RefusedError, match="privacy budget exhausted"):
        check_budget(read_budget(tmp_path), spent, req)
    assert sorted(x.name for x in tmp_path.iterdir()) == ["budget.json"]
    # round trip of costs through JSON, infinities included
    for c in (cap, PrivacyCost(epsilon=0.3, delta=1e-6, rho=0.01), PrivacyCost.unbounded()):
        assert PrivacyCost.from_dict(json.loads(json.dumps(c.to_dict()))) == c


def test_costs_add_field_by_field():
    a = PrivacyCost(epsilon=0.5, delta=1e-6, rho=0.1)
    b = PrivacyCost(epsilon=0.25, delta=0.0, rho=0.03125)
    s = a + b
    assert (s.epsilon, s.delta, s.rho) == (0.75, 1e-6, pytest.approx(0.13125))


# ---------------------------------------------------------------------------------------
# Two-round protocol
# ---------------------------------------------------------------------------------------
def test_request_round_trips(tmp_path):
    """A request file reads back as written; a foreign fingerprint and a bad pair are refused. (Which features
    ``marg request --top`` puts in it is the screening's order: tests/learners/selection/test_screening.py.)"""
    cb = Codebook(features=tuple(CategoricalFeature(f"g{i}", ("0", "1")) for i in range(6)),
                  label=Label("y", ("a", "b")))
    top = ["g0", "g2", "g4"]
    req = PairRequest.all_pairs(cb.fingerprint, top)
    path = write_request(tmp_path / "request.json", req.fingerprint, req.pairs, req.features)
    back = read_request(path, fingerprint=cb.fingerprint)
    assert back == req
    assert back.pairs == tuple(combinations(top, 2))
    assert back.spec == "g0:g2,g0:g4,g2:g4"
    with pytest.raises(InputError, match="not this codebook"):
        read_request(path, fingerprint="0" * 64)
    (tmp_path / "bad.json").write_text('{"format": "marg-request", "fingerprint": "x", "pairs": [["a", "a"]]}')
    with pytest.raises(InputError, match="bad pair"):
        read_request(tmp_path / "bad.json")
