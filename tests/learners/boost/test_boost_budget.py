"""boost under its time limit: a deadline that falls inside the pricing searches ends column
generation with a certificate that is still R(μ) of the vote it returns (the whole domain
enumerated) and never below the converged minimax value over every monomial; the searches are
handed the time left; an empty vote says why."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from marg.learners.boost import minimax_cg
from marg.learners.boost.vote import BoostVote
from marg.learners.minimax.problem import label_subsets
from marg.marginals.summary import Summary
from tests.helpers.boost import Clock, sample, tiny_codebook


def R_by_enumeration(est, cb, K):
    grid = np.array(list(itertools.product(*[range(cb.attribute_size(f.name)) for f in cb.features])), dtype=float)
    F = est.decision_function(grid)
    phi = max((F[:, list(C)].sum(axis=1).max() - 1.0) / len(C) for C in label_subsets(K))
    return 1.0 - np.sum(est.tau_ * est.mu_) + np.sum(est.lambda_ * np.abs(est.mu_)) + phi


@pytest.mark.parametrize("seed,sizes", [(5, (3, 3, 2)), (1, (3, 2, 3))])
def test_a_deadline_inside_pricing_keeps_a_valid_certificate(monkeypatch, seed, sizes):
    rng = np.random.default_rng(seed)
    cb = tiny_codebook(sizes)
    X, y = sample(cb, 300, rng)
    S = Summary.from_rows(cb, X, y, stats="all")
    full = BoostVote(s=0.0, time_limit=None).fit(S)
    assert full.converged_ and full.pricing_exact_ and full.stopped_ == "converged"  # full.R = R* over all monomials
    clock = Clock()
    searches = {"n": 0}
    original = minimax_cg.maximize_agreement

    def ticking(oracle, **kw):
        left = budget - clock.skew  # at most: the searches so far took a second each
        assert kw["options"].time_limit is not None and kw["options"].time_limit <= left
        searches["n"] += 1
        clock.skew += 1.0
        return original(oracle, **kw)

    monkeypatch.setattr(minimax_cg, "time", clock)
    monkeypatch.setattr(minimax_cg, "maximize_agreement", ticking)
    n_parts = None
    for budget in (1.0, 2.0, 5.0, 9.0, 17.0):
        clock.skew, searches["n"] = 0.0, 0
        est = BoostVote(s=0.0, time_limit=budget).fit(S)
        n_parts = n_parts or searches["n"]
        assert searches["n"] <= budget  # no search starts after the deadline
        assert est.stopped_ == "time_limit" and not est.converged_
        assert est.minimax_risk_.value == pytest.approx(R_by_enumeration(est, cb, S.n_classes), abs=1e-9)
        assert est.minimax_risk_.value >= full.minimax_risk_.value - 1e-9
        if not est.used_features():
            assert "time limit" in est.empty_reason_ and est.report()["empty_vote_reason"] == est.empty_reason_
    assert n_parts >= 1


def test_an_empty_vote_says_what_kept_the_rules_out():
    """Calibrated λ on 60 rows: every candidate rule's half-width outweighs its gain; the reason
    names the smallest λ of the rules tried and what the model predicts, and the prediction is it."""
    rng = np.random.default_rng(3)
    cb = tiny_codebook((3, 3, 2, 2))
    X, y = sample(cb, 60, rng)
    S = Summary.from_rows(cb, X, y, stats="all")
    est = BoostVote(time_limit=None).fit(S)
    assert est.used_features() == []
    why = est.empty_reason_
    assert why.startswith("the boost vote is empty") and est.stopped_ in ("converged", "stalled", "k_max")
    pred = est.predict(X.astype(float))
    if "for every row" in why:
        assert len(set(pred.tolist())) == 1 and repr(est.classes_[pred[0]]) in why
    else:
        assert "naive-Bayes" in why


@pytest.mark.parametrize("seed,sizes", [(5, (3, 3, 2)), (1, (3, 2, 3))])
def test_the_work_budget_stops_pricing_with_a_valid_certificate(seed, sizes):
    """``pricing_nodes``: a budget of branch-and-bound nodes over the fit's pricing searches. Below
    what the exact searches use, column generation stops (``"work_budget"``) or converges on another
    path; either way the certificate is R(μ) of the vote returned (the whole domain enumerated), never
    below the converged minimax value R*, and no pricing starts once the budget is spent."""
    rng = np.random.default_rng(seed)
    cb = tiny_codebook(sizes)
    X, y = sample(cb, 300, rng)
    S = Summary.from_rows(cb, X, y, stats="all")
    full = BoostVote(s=0.0, pricing_nodes=None).fit(S)
    assert full.converged_ and full.pricing_exact_
    need = sum(h["nodes"] for h in full.history_)
    assert need > 3
    stops = set()
    for budget in (1, 2, need // 3, need - 1):
        est = BoostVote(s=0.0, pricing_nodes=budget).fit(S)
        stops.add(est.stopped_)
        assert est.minimax_risk_.value == pytest.approx(R_by_enumeration(est, cb, S.n_classes), abs=1e-9)
        assert est.minimax_risk_.value >= full.minimax_risk_.value - 1e-9
        spent = np.cumsum([0] + [h["nodes"] for h in est.history_])
        assert all(spent[k] < budget for k, h in enumerate(est.history_) if h["nodes"] > 0)
        if est.stopped_ == "work_budget":
            assert not est.converged_ and not est.pricing_exact_ and spent[-1] >= budget  # spent, not converged
        else:
            assert (est.stopped_ == "converged" and est.minimax_risk_.value == pytest.approx(full.minimax_risk_.value,
                                                                                             abs=1e-9))
        if not est.used_features():
            assert "work budget" in est.empty_reason_
    assert "work_budget" in stops
    again = BoostVote(s=0.0, pricing_nodes=need).fit(S)  # the budget the exact searches need: the same fit
    assert (again.stopped_ == "converged" and again.minimax_risk_.value == pytest.approx(full.minimax_risk_.value,
                                                                                         abs=1e-12))
