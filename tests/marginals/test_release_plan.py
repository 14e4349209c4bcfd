"""One release plan (issue 36): the plan made before any data is read is the plan the release carries out.

Oracles: the noise records of the released tables (their scale, std and cost share, written by the
release itself); :func:`marg.marginals.privacy.tables_cost`, the cost recomputed from those records;
OpenDP's own map of each table's measurement at its sensitivity; and the empirical std of the
noise actually drawn.
"""

from __future__ import annotations

import numpy as np
import pytest

from marg.marginals.privacy import plan_cost, privatize, tables_cost
from marg.marginals.release_plan import ReleasePlan, TableSpec, table_sensitivity
from marg.marginals.synthetic import demo_codebook
from marg.marginals.counts.tables import MarginalTable, plan_cliques

BUDGETS = [dict(epsilon=1.0, mechanism="laplace"), dict(rho=0.3), dict(rho=0.3, weights="least-squares", max_rows=3)]


def _zero_tables(cb, cliques):
    return [MarginalTable(clique=tuple(c), counts=np.zeros([cb.attribute_size(a) for a in c], dtype=np.int64))
            for c in cliques]


@pytest.mark.parametrize("budget", BUDGETS)
def test_the_plan_before_the_data_is_the_release(budget):
    cb = demo_codebook()
    cliques = [c for c in plan_cliques(cb, "all") if all(cb.feature(a).is_discrete for a in c if a != cb.label.name)]
    plan = ReleasePlan.for_cliques(cliques, cb, **budget)
    noisy, cost = privatize(_zero_tables(cb, cliques), codebook=cb, **budget)
    assert plan.cost == cost == plan_cost(cliques, cb, **budget) == tables_cost(noisy)
    assert plan.scales == [t.noise.scale for t in noisy]
    assert plan.stds == pytest.approx([t.noise.std for t in noisy], rel=1e-12)
    for t in plan.tables:  # each cost is OpenDP's map of the measurement at the table's sensitivity, within its share
        assert float(t.measurement.map(t.sensitivity)) == t.cost <= t.share * (1 + 1e-12)


def test_the_plans_std_is_the_noise_drawn():
    spec = TableSpec(("x",), "counts", 4000, True)
    plan = ReleasePlan([spec], rho=0.05)
    (out,) = plan.release([MarginalTable(clique=("x",), counts=np.zeros(4000, dtype=np.int64))])
    assert np.std(out.counts) == pytest.approx(plan.stds[0], rel=0.06)
    assert out.noise.std == pytest.approx(plan.stds[0]) and out.noise.mechanism == "gaussian"


def test_a_plan_refuses_tables_it_was_not_made_for():
    plan = ReleasePlan([TableSpec(("x",), "counts", 2, True)], epsilon=1.0)
    with pytest.raises(Exception, match="plan is for 1 tables"):
        plan.release([])
    assert table_sensitivity("counts", "laplace", True, 3) == 3
