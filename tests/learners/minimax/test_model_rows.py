"""The one minimax LP model owns its rows: its record of them IS the HiGHS model.

``MinimaxModel`` (with :class:`minimax.rows.ModelRows`) keeps, for every row written in flat μ
space, its coefficients, ν's coefficient, bounds, label subset, point and dedup key. What must
hold after any sequence of edits (rows generated, columns out and back in, rows deleted):

- the HiGHS rows equal the record mapped onto the LP columns (ν, μ⁺ = +g, μ⁻ = −g for the
  columns in the model), row for row, bounds included — read back from HiGHS itself;
- deleting rows removes them from HiGHS and from the record together, and forgets their
  keys (the same row may be added again); a row already in the model is written once;
- a column entering gets its coefficient in every recorded row (rows generated while it was
  out included), so re-adding columns restores the optimum;
- boosting's LP is the same model: its rows' coefficients are the columns' monomials at the
  recorded points (checked by evaluating the monomials independently);
- no LP-model class forwards another object's attribute through a property.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from marg.learners.features.blocks import FeatureMap
from marg.learners.minimax.generation import generate_rows
from marg.learners.minimax.lp_model import MinimaxModel
from marg.learners.minimax.separation import Cut, FirstOrderOracle
from tests.helpers.dcc_oracle import make_problem
from tests.helpers.quantities import blocks_of, tau_of

ROOT = Path(__file__).resolve().parents[3]


def first_order_model(seed: int, levels=(3, 2, 3, 2), K: int = 3, half_width: float = 0.02):
    cb, S, _ = make_problem(np.random.default_rng(seed), list(levels), K)

    fmap = FeatureMap(blocks_of(S), list(range(len(levels))))
    tau = tau_of(S)
    model = MinimaxModel.for_rows(tau, np.full(tau.shape, half_width), 1e3)
    return model, FirstOrderOracle(fmap, K), tau.shape


def record_on_lp(model: MinimaxModel) -> np.ndarray:
    """The recorded rows as LP rows (n_rows, n_cols): ν's coefficient, +g on μ⁺, −g on μ⁻ (columns in the model)."""
    F = model.row_matrix().toarray()
    A = np.zeros((model.n_rows, model.n_cols))
    A[:, 0] = model.row_nu
    on = np.flatnonzero(model.plus >= 0)
    A[:, model.plus[on]] = F[:, on]
    A[:, model.minus[on]] = -F[:, on]
    return A


def assert_record_is_highs(model: MinimaxModel) -> None:
    A, lower, upper = model.lp.rows()
    assert A.shape == (model.n_rows, model.n_cols)
    assert len(model.labels) == len(model.points) == model.row_tag.size == model.n_rows
    assert np.array_equal(A.toarray(), record_on_lp(model))
    assert np.array_equal(lower, model.row_lower) and np.array_equal(upper, model.row_upper)


def test_the_record_is_the_highs_model_through_every_edit():
    model, oracle, (K, D) = first_order_model(6)
    model.add_mu(np.arange(K * D))
    model.add_cuts(oracle.covering_cuts())
    res = generate_rows(model, oracle)
    assert res.converged
    R0 = model.objective
    assert_record_is_highs(model)
    assert all(lab is not None for lab in model.labels) and np.all(model.row_nu == -1.0)
    out = np.arange(D, 2 * D)  # label 1's columns out: the record keeps their coefficients
    model.remove_mu(out)
    assert_record_is_highs(model)
    assert model.row_matrix()[:, out].nnz > 0
    model.solve()
    idle = np.flatnonzero((np.abs(model.row_dual) <= 1e-12)
                          & (model.row_upper + model.nu - model.row_matrix() @ model.mu > 1e-7))
    assert idle.size
    model.delete_rows(idle)
    assert_record_is_highs(model)
    model.add_mu(out)  # back in, with their coefficients in every row still there
    assert_record_is_highs(model)
    assert generate_rows(model, oracle).converged
    assert model.objective == pytest.approx(R0, abs=1e-7)
    assert_record_is_highs(model)


def test_a_deleted_row_leaves_highs_and_the_record_and_may_come_back():
    model, oracle, (K, D) = first_order_model(3)
    model.add_mu(np.arange(K * D))
    cuts = oracle.covering_cuts()
    assert model.add_cuts(cuts) == len(cuts)
    assert model.add_cuts(cuts[:3]) == 0  # each already in the model: written once
    n = model.n_rows
    gone = [1, n - 1]
    labels = [model.labels[r] for r in range(n) if r not in gone]
    model.delete_rows(gone)
    assert model.n_rows == model.lp.n_rows == n - 2 and model.labels == labels
    assert_record_is_highs(model)
    assert model.add_cuts([cuts[1], cuts[0]]) == 1  # the deleted row's key is forgotten, the kept one's is not
    assert model.n_rows == n - 1 and model.labels[-1] == tuple(cuts[1].labels)
    assert_record_is_highs(model)


def test_a_column_entering_gets_its_coefficients_in_rows_written_while_it_was_out():
    model, oracle, (K, D) = first_order_model(4)
    keep = np.arange(D)
    model.add_mu(keep)
    g = np.random.default_rng(0).random(K * D)
    model.add_cuts([Cut(g, -0.5, np.nan, (0,)), Cut(2 * g, -0.25, np.nan, (1,))])
    A, _, _ = model.lp.rows()
    assert A.nnz == 2 * (1 + 2 * D)  # HiGHS holds only the terms of columns in the model (and ν)
    model.add_mu(np.arange(D, K * D))
    assert_record_is_highs(model)
    assert np.allclose(model.row_matrix().toarray(), np.vstack([g, 2 * g]))


def test_boosting_rows_are_the_monomials_at_their_points_on_the_one_model():
    from marg.learners.boost.vote import BoostVote
    from marg.marginals.summary import Summary
    from tests.helpers.boost import sample, tiny_codebook

    cb = tiny_codebook([3, 3, 2, 3])
    X, y = sample(cb, 400, np.random.default_rng(3))
    src, mm, res = BoostVote(s=0.0, max_order=2, k_max=4,
                             time_limit=None)._solve(Summary.from_rows(cb, X, y, stats="all"))
    lp = mm.lp
    assert isinstance(lp, MinimaxModel) and lp.n_rows == res.n_rows > len(mm.subsets)
    expect = np.zeros((lp.n_rows, lp.m))
    for r, (x, C) in enumerate(zip(lp.points, lp.labels)):
        assert np.all(x >= 0)  # a complete point
        for k, (c, u) in enumerate(lp.cols):
            holds = all(src.fmap.tests[lit.test].truth[x[src.fmap.tests[lit.test].index]] == lit.positive
                        for lit in src.fmap.monomials[u])  # the conjunction, read off the codes by hand
            expect[r, k] = -float(holds) if c in C else 0.0
    assert np.array_equal(lp.row_matrix().toarray(), expect)
    assert np.array_equal(lp.row_nu, [float(len(C)) for C in lp.labels]) and np.all(lp.row_lower == -1.0)
    assert_record_is_highs(lp)
    points = lp.points[2:]
    lp.delete_rows([0, 1])
    assert lp.points == points
    assert_record_is_highs(lp)


LP_MODEL_FILES = ["learners/minimax/lp_model.py", "learners/minimax/rows.py", "learners/minimax/first_order_models.py",
                  "learners/minimax/first_order.py", "learners/boost/monomial_lp.py", "learners/boost/minimax_cg.py"]


def test_no_lp_model_class_forwards_another_objects_attribute():
    """A property whose body is ``return self.a.b`` hands another object's state on by hand: the
    chain RowModel → MinimaxLP → MinimaxModel → HighsLP this test keeps from growing back."""
    bad = []
    for name in LP_MODEL_FILES:
        for node in ast.walk(ast.parse((ROOT / name).read_text())):
            if not isinstance(node, ast.FunctionDef) or not any(
                    isinstance(d, ast.Name) and d.id == "property" for d in node.decorator_list):
                continue
            body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
            if len(body) == 1 and isinstance(body[0], ast.Return) and isinstance(body[0].value, ast.Attribute) \
                    and isinstance(body[0].value.value, ast.Attribute):
                bad.append(f"{name}:{node.lineno} {node.name}")
    assert not bad, bad
    assert not (ROOT / "learners/minimax/rows.py").read_text().count("class MinimaxLP")
