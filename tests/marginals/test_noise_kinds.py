"""The noise registry (issue 36): each noise distribution answers its own std, tail, cost part and
least-squares weight, so a mechanism is one class.

Oracles: OpenDP's own sequential composition (``make_composition``) and zCDP → (ε, δ) conversion of the
measurements a plan calibrated, for every registered mechanism; the empirical std of the noise drawn;
the tail bound and weights of the Laplace the test's new noise is a re-parametrisation of.
"""

from __future__ import annotations

import math

import numpy as np
import opendp.prelude as dp
import pytest

from marg.errors import InputError
from marg.marginals.accounting import release_cost
from marg.marginals.allocation import least_squares_weights
from marg.marginals.mechanisms import MECHANISMS, Mechanism, register
from marg.marginals.counts.noise import NoiseRecord
from marg.marginals.counts.noise_kinds import NOISES, Laplace, Noise, noise_of, register_noise
from marg.marginals.noise_tails import halfwidth
from marg.marginals.privacy import privatize, tables_cost
from marg.marginals.release_plan import ReleasePlan, TableSpec
from marg.marginals.counts.tables import MarginalTable

dp.enable_features("contrib")
DELTA = 1e-6


def _specs(integer: bool) -> list[TableSpec]:
    return [TableSpec((f"t{i}",), "counts", size, integer) for i, size in enumerate((2, 6, 12, 4))]


def _opendp_cost(plan: ReleasePlan) -> tuple[float, float]:
    """(ε, ρ) of the plan's measurements composed by OpenDP itself: pure ε-DP adds ε; zCDP adds ρ and
    reports ε at δ through ``make_zCDP_to_approxDP`` — no formula of marg's."""
    meas = [t.measurement for t in plan.tables]
    sens = plan.tables[0].sensitivity
    comp = dp.c.make_composition(meas)
    if plan.mechanism.pure:  # its ρ: each table seen as zCDP, then composed
        return float(comp.map(sens)), float(dp.c.make_composition([dp.c.make_pureDP_to_zCDP(m)
                                                                   for m in meas]).map(sens))
    return float(dp.c.make_zCDP_to_approxDP(comp).map(sens).epsilon(DELTA)), float(comp.map(sens))


@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_every_registered_mechanism_costs_what_opendp_composes(name):
    mech = MECHANISMS[name]
    budget = dict(epsilon=0.9) if mech.pure else dict(rho=0.25)
    plan = ReleasePlan(_specs(mech.discrete), weights=[1, 2, 3, 4], delta=DELTA, mechanism=name, max_rows=2, **budget)
    eps, rho = _opendp_cost(plan)
    assert plan.cost.epsilon == pytest.approx(eps, rel=1e-9) and plan.cost.rho == pytest.approx(rho, rel=1e-9)
    assert plan.cost.delta == (0.0 if mech.pure else DELTA)
    # the records the release writes recompose, through each record's noise, to the same cost
    tables = [MarginalTable(clique=s.clique, counts=np.zeros(s.size, dtype=np.int64)) for s in _specs(True)]
    noisy, cost = privatize(tables, weights=[1, 2, 3, 4], delta=DELTA, mechanism=name, max_rows=2, **budget)
    assert cost == plan.cost and tables_cost(noisy).epsilon == pytest.approx(eps, rel=1e-9)
    assert [t.noise.std for t in noisy] == pytest.approx(plan.stds, rel=1e-12)


class LaplaceBySd(Noise):
    """A noise marg does not ship, written here: Laplace noise whose scale parameter is its std
    σ = √2·b (continuous only). Everything marg asks of a noise is answered by this class."""

    name, label, pure = "laplace-sd", "Laplace (by its sd)", True

    def std(self, scale, discrete):
        return float(scale)

    def scale_for(self, share, sensitivity):
        return math.sqrt(2.0) * float(sensitivity) / share

    def least_squares(self, c):
        return np.cbrt(c)

    def log_mgf(self, scale, discrete, count, theta):
        b = scale / math.sqrt(2.0)
        return math.inf if theta * b >= 1.0 else -count * math.log1p(-(theta * b) ** 2)

    def theta_max(self, scale):
        return math.sqrt(2.0) / scale

    def closed_halfwidth(self, parts, alpha):
        if len(parts) == 1 and parts[0][3] == 1:
            return parts[0][1] / math.sqrt(2.0) * math.log(1.0 / alpha)
        return None


@pytest.fixture
def laplace_by_sd():
    noise = register_noise(LaplaceBySd())
    mech = register(Mechanism("laplace-sd", "laplace-sd",
                              lambda dp_, dom, metric, scale: dp_.m.make_laplace(dom, metric,
                                                                                 scale=scale / math.sqrt(2.0)),
                              discrete=False))
    yield mech
    MECHANISMS.pop(mech.name)
    NOISES.pop(noise.name)


def test_a_noise_registered_in_a_test_reaches_cost_std_tails_and_weights(laplace_by_sd):
    # the cost: OpenDP's composition of the measurements the plan calibrated, within the budget
    plan = ReleasePlan(_specs(False), epsilon=0.7, weights=[1, 1, 2, 4], mechanism="laplace-sd")
    eps, rho = _opendp_cost(plan)
    assert plan.cost.epsilon == pytest.approx(eps, rel=1e-12) and plan.cost.epsilon <= 0.7 * (1 + 1e-12)
    assert plan.cost.rho == pytest.approx(rho, rel=1e-9) and plan.cost.delta == 0.0
    # the std the records carry is the noise drawn (20 000 draws: within 4 %)
    big = [MarginalTable(clique=("t",), counts=np.zeros(20_000, dtype=np.int64))]
    noisy, cost = privatize(big, epsilon=0.5, mechanism="laplace-sd")
    rec = noisy[0].noise
    assert rec.mechanism == "laplace-sd" and rec.std == rec.scale == pytest.approx(math.sqrt(2.0) / 0.5, rel=1e-9)
    assert float(np.std(noisy[0].counts)) == pytest.approx(rec.std, rel=0.04)
    assert rec.draws(True) == (("laplace-sd", rec.scale, False, 1),)  # continuous noise says so
    assert tables_cost(noisy) == cost and cost.epsilon == pytest.approx(0.5, rel=1e-12)
    # it composes as pure DP beside the shipped noises (ε's add; the Gaussian's ρ converted once)
    mixed = release_cost([("laplace-sd", 0.2, 0.02, 0.0), ("laplace", 0.3, 0.045, 0.0)])
    assert mixed.epsilon == pytest.approx(0.5) and mixed.delta == 0.0
    # tails: the same bounds as the Laplace it re-parametrises, closed form and Chernoff
    s = 3.0
    b = s / math.sqrt(2.0)
    assert halfwidth([("laplace-sd", s, False, 1)], 0.01) == pytest.approx(b * math.log(100.0), rel=1e-12)
    assert halfwidth([("laplace-sd", s, False, 3), ("gaussian", 1.0, False, 2)], 1e-4) == pytest.approx(
        halfwidth([("laplace", b, False, 3), ("gaussian", 1.0, False, 2)], 1e-4), rel=1e-6)
    # weights: least squares by the noise's own rule
    assert least_squares_weights([8, 27, 1], "laplace-sd") == pytest.approx(least_squares_weights([8, 27, 1],
                                                                                                  "laplace"))
    # a record naming it is valid; a continuous-only noise has no lattice pmf
    NoiseRecord(mechanism="laplace-sd", scale=1.0, std=1.0, epsilon=0.1, parts=(("laplace-sd", 1.0, False, 2),))
    with pytest.raises(InputError, match="no pmf on the integers"):
        noise_of("laplace-sd").lattice_pmf(1.0, 1e-6)


def test_the_registry_refuses_unknown_and_taken_names():
    with pytest.raises(InputError, match="unknown noise mechanism 'nope'"):
        noise_of("nope")
    with pytest.raises(InputError, match="unknown noise mechanism 'nope'"):
        least_squares_weights([1, 2], "nope")
    with pytest.raises(InputError, match="unknown noise mechanism 'nope'"):
        NoiseRecord(mechanism="nope", scale=1.0, std=1.0)
    with pytest.raises(InputError, match="already registered"):
        register_noise(Laplace())
    with pytest.raises(InputError, match="noise must be one of"):
        Mechanism("x", "nope", lambda *a: None)
