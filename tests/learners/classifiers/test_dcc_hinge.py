"""DCC with loss="hinge" (the Discrete Chebyshev Classifier's objective): brute-force oracles.

For the learned score f on the whole domain:
- max_{p ∈ U} E_p[max(0, 1 − s_y f(x))], an LP over the full joint p(x, y) with the node and
  reported-edge triple marginals within λ of the released ones, equals the certificate;
- that certificate is exactly 2·R*, R* = max_{p∈U} Bayes error (a separate LP): for binary
  labels the worst-case hinge loss of the best forest score is twice the 0-1 minimax risk;
- the worst-case 0-1 error of the deterministic rule (sign f, ties counted as errors) lies in
  [R*, certificate] (no rule beats the worst-case Bayes error), and the clipped randomized
  rule h(1|x) = (1 + clip(f, −1, 1))/2 attains R* exactly.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.optimize import linprog

from marg.learners.classifiers.dcc import DCC
from marg.errors import InputError
from tests.helpers.dcc_oracle import (brute_force_R, domain, edge_indices, make_problem, marginal_constraints,
                                      random_cases, rule_worst_case)

S_Y = np.array([-1.0, 1.0])


def worst_case_expectation(p, n_discrete, edges, loss, s):
    """max_{q ∈ U} Σ q(x, y)·loss[x, y] over the full joint (U as in test_dcc, λ from s)."""
    cliques = [(i,) for i in range(n_discrete)] + [tuple(e) for e in edges]
    A, lo, hi = marginal_constraints(p, cliques, s)
    res = linprog(-np.asarray(loss, dtype=float).ravel(), A_ub=np.vstack([A, -A]), b_ub=np.concatenate([hi, -lo]),
                  A_eq=np.ones((1, p.size)), b_eq=[1.0], bounds=(0, None), method="highs")
    assert res.status == 0, res.message
    return -res.fun


@pytest.mark.parametrize("s", [0.0, 0.5, 2.0])
@pytest.mark.parametrize("edge_weight", ["cmi", "label"])
def test_hinge_certificate_equals_brute_force(s, edge_weight):
    for k, (rng, levels, _) in enumerate(random_cases(8, seed=101 + int(10 * s), max_d=4)):
        levels = levels[:4]
        cb, S, p = make_problem(rng, levels, 2, sparsity=0.3 if k % 2 == 0 else 0.0)
        m = DCC(s=s, loss="hinge", edge_weight=edge_weight).fit(S)
        E = edge_indices(m, cb)
        X, _ = domain(levels)
        f = m.margin(X)
        hinge = np.maximum(0.0, 1.0 - f[:, None] * S_Y[None, :])  # (nx, 2), same order as p.reshape(-1, 2)
        wc = worst_case_expectation(p, len(levels), E, hinge, s)
        assert abs(wc - m.worst_case_error_) <= 1e-6, (levels, s, E, wc, m.worst_case_error_)
        R = brute_force_R(p, len(levels), E, s=s)
        assert abs(m.worst_case_error_ - 2.0 * R) <= 1e-6, (m.worst_case_error_, R)
        # deterministic rule sign f, ties (f = 0) counted as errors for both labels
        wrong = (f[:, None] * S_Y[None, :] <= 0.0).astype(float)
        err01 = worst_case_expectation(p, len(levels), E, wrong, s)
        assert R - 1e-6 <= err01 <= m.worst_case_error_ + 1e-6, (R, err01, m.worst_case_error_)
        # the clipped randomized rule attains R*
        H = m.predict_proba(X)
        assert np.all(H >= 0) and np.allclose(H.sum(axis=1), 1.0)
        assert np.allclose(H[:, 1], 0.5 * (1.0 + np.clip(f, -1.0, 1.0)))
        assert abs(rule_worst_case(p, len(levels), E, H, s=s) - R) <= 1e-6
        # predict: sign f, ties (f = 0) to the naive-Bayes choice
        F = m.decision_function(X)
        tie = np.abs(f) <= 1e-9 * np.maximum(1.0, np.abs(F).max(axis=1))
        tb = m.map_.psi(X) @ m.nb_logp_.T + np.log(m.prior_)
        assert np.array_equal(m.predict(X), np.where(tie, tb.argmax(axis=1), (f > 0).astype(int)))
        assert m.worst_case_error_ == m.iterations_[-1]
        if s == 0.0:
            assert np.all(m.lambda_ == 0.0)


def test_hinge_unseen_cells_score_as_main_effects():
    """A cell empty for both labels enters no constraint; its f coefficient is 0 (no interaction)."""
    rng = np.random.default_rng(7)
    for _ in range(4):
        cb, S, p = make_problem(rng, [3, 3, 2], 2, sparsity=0.5)
        m = DCC(s=0.0, loss="hinge").fit(S)
        both = (m.tau_ + m.lambda_ <= 0).all(axis=0)
        nd = m.map_.nodes.dim
        assert np.all(m.f_[nd:][both[nd:]] == 0.0)
        assert np.allclose(m.f_, m.mu_[1] - m.mu_[0])


def test_hinge_round_trip_and_errors():
    rng = np.random.default_rng(3)
    cb, S, p = make_problem(rng, [3, 2, 3], 2, sparsity=0.2)
    m = DCC(s=0.0, loss="hinge").fit(S)
    m2 = DCC.from_dict(json.loads(json.dumps(m.to_dict())))
    X, _ = domain([3, 2, 3])
    assert m2.loss == "hinge"
    assert np.allclose(m2.margin(X), m.margin(X)) and np.allclose(m2.predict_proba(X), m.predict_proba(X))
    assert np.array_equal(m2.predict(X), m.predict(X)) and m2.worst_case_error_ == m.worst_case_error_
    assert DCC.from_dict(DCC(s=0.0).fit(S).to_dict()).loss == "01"
    cb3, S3, _ = make_problem(rng, [2, 2], 3)
    with pytest.raises(InputError, match="binary label"):
        DCC(s=0.0, loss="hinge").fit(S3)
    for kw, msg in [
        (dict(loss="log"), "unknown DCC loss"),
        (dict(loss="hinge", greedy=True), "DCC formulation 'hinge' .* does not run greedy edge search"),
        (dict(loss="hinge", solver="rows"), "'hinge' formulation, one compact LP: solver='rows' does not apply"),
    ]:
        with pytest.raises(InputError, match=msg):
            DCC(**kw).fit(S)


def test_cli_learn_loss_option(demo_bundles, learn_dcc):
    """marg learn --learner dcc --loss hinge: certificate 2·R* of the 0-1 model, same forest; the model file keeps the
    loss."""
    bundles = demo_bundles(rows=400, seed=200)
    rep = {}
    for loss in ("01", "hinge"):
        rep[loss], est = learn_dcc(bundles, "--loss", loss)
        assert est.loss == loss
    assert rep["hinge"]["edges"] == rep["01"]["edges"]
    assert rep["hinge"]["worst_case_error"] == pytest.approx(2 * rep["01"]["worst_case_error"], abs=1e-6)
