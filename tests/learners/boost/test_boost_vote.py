"""The marginals monomial vote (``boost``) against brute force on tiny domains.

- the exact inner maximisation (enumeration and MILP) equals enumerating every x;
- the certificate equals R(μ) recomputed by enumerating the whole domain, and equals the
  minimax LP over the chosen columns with EVERY (x, C) row written out;
- when column generation converged with an exact search, the certificate equals the
  minimax value over ALL monomials of order ≤ 2 (every column and every row written out);
- the empirical distribution lies in the uncertainty set of an exact release with s = 0, so
  the randomized rule's training error is at most the certificate;
- the model file round-trips and lists its rules in words.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from marg.learners.estimator.base import REGISTRY
from marg.learners.boost.cost import code_length_cost
from marg.learners.boost.columns import MonomialMap, monomial_moments
from marg.learners.boost.domain import brute_force_max, maximize_monomial_sum
from marg.learners.boost.literals import Literal, codebook_tests
from marg.learners.boost.vote import BoostVote
from marg.lp import HighsLP, Status
from marg.learners.minimax.problem import label_subsets
from marg.marginals.summary import Summary
from tests.helpers.boost import sample, tiny_codebook


def random_monomials(rng, n_tests, count):
    out = []
    for _ in range(count):
        k = int(rng.integers(0, 3))
        ts = rng.choice(n_tests, size=min(k, n_tests), replace=False)
        out.append(tuple(sorted(Literal(int(t), bool(rng.integers(2))) for t in ts)))
    return out


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.lists(st.integers(2, 4), min_size=1, max_size=4), st.integers(1, 8))
def test_domain_max_equals_enumeration(seed, sizes, count):
    rng = np.random.default_rng(seed)
    cb = tiny_codebook(sizes)
    tests = codebook_tests(cb)
    monos = random_monomials(rng, len(tests), count)
    w = rng.normal(size=count)
    truth = brute_force_max(monos, w, tests, sizes)
    for limit in (1 << 16, 1):  # enumeration, then the MILP
        r = maximize_monomial_sum(monos, w, tests, sizes, enum_limit=limit)
        assert r.exact and r.value == pytest.approx(truth, abs=1e-7) and r.upper == pytest.approx(truth, abs=1e-7)
        x = np.where(r.x < 0, 0, r.x)  # features no weighted monomial reads: any code
        fm = MonomialMap(tests)
        cols = [fm.add(m) for m in monos]
        psi = fm.psi(x[None, :].astype(float))[0]
        assert float(sum(w[k] * psi[cols[k]] for k in range(count))) == pytest.approx(r.value, abs=1e-7)


def all_monomials(n_tests, max_order=2):
    for k in range(max_order + 1):
        for S in itertools.combinations(range(n_tests), k):
            for pol in itertools.product((True, False), repeat=k):
                yield tuple(Literal(t, p) for t, p in zip(S, pol))


def minimax_lp(est, S, monos, classes_of, price):
    """min 1 − τᵀμ + λᵀ|μ| + ν over the columns (c, u) given, every (x, C) row written out."""
    cb = S.codebook
    sizes = [cb.attribute_size(f.name) for f in cb.features]
    K = S.n_classes
    tests = est.map_.tests
    fm = MonomialMap(tests, monos)
    cols = [(c, u) for u in range(fm.dim) for c in classes_of(u)]
    tau = np.array([monomial_moments(S, tests, fm.monomials[u]).tau[c, 0] for c, u in cols])
    lam = np.array([price[len(fm.monomials[u])] for c, u in cols])  # s = 0: λ is the price alone
    X = np.array(list(itertools.product(*[range(m) for m in sizes])), dtype=float)
    P = fm.psi(X)
    rows, rhs = [], []
    for C in label_subsets(K):
        for r in range(X.shape[0]):
            a = np.array([P[r, u] if c in C else 0.0 for c, u in cols])
            rows.append(np.concatenate([[-len(C)], a, -a]))  # Σ m μ − |C| ν ≤ 1
            rhs.append(1.0)
    cost = np.concatenate([[1.0], -tau + lam, tau + lam])
    bounds = [(None, None)] + [(0, est.bound)] * (2 * len(cols))
    r = HighsLP.from_arrays(cost, np.array(rows), np.array(rhs), bounds).solve()
    assert r.status is Status.OPTIMAL
    return r.objective + 1.0


@pytest.mark.parametrize("seed,sizes", [(0, (2, 3, 2)), (1, (3, 2, 3)), (2, (2, 2, 2, 2))])
def test_certificate_is_the_brute_force_minimax_value(seed, sizes):
    rng = np.random.default_rng(seed)
    cb = tiny_codebook(sizes)
    X, y = sample(cb, 200, rng)
    S = Summary.from_rows(cb, X, y, stats="all")
    est = BoostVote(s=0.0).fit(S)
    K = S.n_classes
    tests = est.map_.tests
    price = code_length_cost(len(tests), S.n, 2, est.kappa) / S.n
    # R(μ) by enumerating the whole domain
    full = np.array(list(itertools.product(*[range(cb.attribute_size(f.name)) for f in cb.features])), dtype=float)
    F = est.decision_function(full)
    phi = max((F[:, list(C)].sum(axis=1).max() - 1.0) / len(C) for C in label_subsets(K))
    R = 1.0 - np.sum(est.tau_ * est.mu_) + np.sum(est.lambda_ * np.abs(est.mu_)) + phi
    assert est.minimax_risk_.value == pytest.approx(R, abs=1e-9)
    assert est.phi_ == pytest.approx(phi, abs=1e-9)
    # the minimax LP over the chosen columns, every row written out
    support = est.map_.monomials
    chosen = minimax_lp(est, S, support, lambda u: [c for c in range(K) if est.mu_[c, u] != 0], price)
    assert est.minimax_risk_.value == pytest.approx(chosen, abs=1e-7)
    # the training rows' distribution is in U (exact tables, λ ≥ 0): the randomized rule's error ≤ R
    proba = est.predict_proba(X.astype(float))
    assert 1.0 - proba[np.arange(len(y)), y].mean() <= est.minimax_risk_.value + 1e-9
    if est.converged_ and est.pricing_exact_:
        everything = minimax_lp(est, S, list(all_monomials(len(tests))), lambda u: range(K), price)
        assert est.minimax_risk_.value == pytest.approx(everything, abs=1e-6)


def test_calibrated_fit_round_trips_and_speaks_words():
    rng = np.random.default_rng(5)
    cb = tiny_codebook((3, 3, 2, 2))
    X, y = sample(cb, 400, rng)
    S = Summary.from_rows(cb, X, y, stats="all")
    est = BoostVote().fit(S)
    assert 0.0 < est.minimax_risk_.value <= 1.0 and est.certificate_.coverage == 0.95
    rules = est.report()["monomials"]
    assert rules and all(isinstance(r["rule"], str) and r["class"] in cb.label.classes for r in rules)
    assert all(" AND " in r["rule"] or r["order"] <= 1 for r in rules)
    d = json.loads(json.dumps(est.to_dict()))
    again = REGISTRY["boost"].from_dict(d)
    assert np.array_equal(again.predict(X.astype(float)), est.predict(X.astype(float)))
    assert again.rules() == est.rules()


def test_bad_parameters_are_one_line_errors():
    from marg.errors import InputError

    with pytest.raises(InputError, match="max_order"):
        BoostVote(max_order=6).check_params()
    with pytest.raises(InputError, match="kappa"):
        BoostVote(kappa=-1.0).check_params()


def test_time_limit_inside_an_lp_keeps_the_best_vote_so_far(monkeypatch):
    """A deadline that expires inside an LP solve (HiGHS stops with a limit) ends column
    generation with the best vote so far, whose certificate is still R(μ) by enumeration;
    before the first iteration finishes it is a one-line SolverError."""
    import dataclasses

    from marg.errors import SolverError
    from marg.lp import HighsLP, Status

    rng = np.random.default_rng(5)
    cb = tiny_codebook((3, 3, 2))
    X, y = sample(cb, 300, rng)
    S = Summary.from_rows(cb, X, y, stats="all")
    full = BoostVote(s=0.0).fit(S)
    assert len(full.iterations_) >= 3
    original = HighsLP.solve
    for stop_after, ok in ((6, True), (0, False)):
        calls = {"n": 0}

        def limited(self, deadline=None):
            r = original(self, deadline)
            calls["n"] += 1
            return dataclasses.replace(r, status=Status.LIMIT) if calls["n"] > stop_after else r

        monkeypatch.setattr(HighsLP, "solve", limited)
        if not ok:
            with pytest.raises(SolverError, match="did not finish one iteration"):
                BoostVote(s=0.0, time_limit=30.0).fit(S)
            continue
        est = BoostVote(s=0.0, time_limit=30.0).fit(S)
        assert not est.converged_ and len(est.iterations_) < len(full.iterations_)
        grid = np.array(list(itertools.product(*[range(cb.attribute_size(f.name)) for f in cb.features])), dtype=float)
        F = est.decision_function(grid)
        phi = max((F[:, list(C)].sum(axis=1).max() - 1.0) / len(C) for C in label_subsets(S.n_classes))
        R = 1.0 - np.sum(est.tau_ * est.mu_) + np.sum(est.lambda_ * np.abs(est.mu_)) + phi
        assert (est.minimax_risk_.value == pytest.approx(R, abs=1e-9)
                and est.minimax_risk_.value >= full.minimax_risk_.value - 1e-9)


def test_candidate_count_bounds_every_priceable_monomial():
    """The Bonferroni count is at least the number of distinct monomials of order ≤ K whose
    features lie in one priced clique (enumerated), for K = 1..3, pairs or a triple released."""
    from marg.learners.boost.literals import canonical
    from marg.learners.boost.from_summary import count_candidates

    cb = tiny_codebook((3, 3, 2, 2))
    tests = codebook_tests(cb)
    names = cb.feature_names
    for cliques in ([(f,) for f in names] + [(names[0], names[1]), (names[1], names[3])],
                    [(f,) for f in names] + [(names[0], names[1], names[2])]):
        for K in (1, 2, 3):
            seen = set()
            for k in range(K + 1):
                for S in itertools.combinations(range(len(tests)), k):
                    feats = {tests[t].feature for t in S}
                    if not any(feats <= set(c) for c in cliques):
                        continue
                    for pol in itertools.product((True, False), repeat=k):
                        seen.add(canonical(Literal(t, p) for t, p in zip(S, pol)))
            assert count_candidates(tests, cliques, K) >= len(seen), (cliques, K)


def test_ties_go_to_the_naive_bayes_class_of_the_first_order_tables(tmp_path):
    """Rows where the vote ties get argmax_y log π_y + Σ_f log((N_f[x_f, y] + ½)/(N_y + ½ m_f))
    (computed here from the rows); the others the vote's argmax; a saved model predicts the same."""
    from marg.learners.estimator.model import Model

    rng = np.random.default_rng(0)
    cb = tiny_codebook((3, 4, 2))
    X, y = sample(cb, 200, rng)
    S = Summary.from_rows(cb, X, y, stats="all")
    est = BoostVote().fit(S)  # calibrated λ on 200 rows: one rule per class, the other rows tie
    assert est.n_terms_ > 0
    grid = np.array(list(itertools.product(*[range(cb.attribute_size(f.name)) for f in cb.features])), dtype=float)
    F = est.decision_function(grid)
    tied = np.isclose(F, F.max(axis=1, keepdims=True), rtol=1e-9, atol=1e-12).sum(axis=1) > 1
    assert tied.any()
    K = S.n_classes
    nb = np.tile(np.log(np.bincount(y, minlength=K) / y.size), (grid.shape[0], 1))
    features = {t.feature for t in est.map_.tests}
    for i, f in enumerate(cb.features):
        if f.name in features:
            m = cb.attribute_size(f.name)
            N = np.array([[np.sum((X[:, i] == a) & (y == c)) for c in range(K)] for a in range(m)], dtype=float)
            nb += np.log((N + 0.5) / (N.sum(axis=0) + 0.5 * m))[grid[:, i].astype(int)]
    pred = est.predict(grid)
    assert np.array_equal(pred[tied], np.argmax(nb[tied], axis=1))
    assert len(set(pred[tied])) == K  # not the larger prior everywhere
    assert np.array_equal(pred[~tied], np.argmax(F[~tied], axis=1))
    path = tmp_path / "boost.json"
    Model(learner="boost", codebook=cb, estimator=est, info={}).save(path)
    assert np.array_equal(Model.load(path).estimator.predict(grid), pred)


def test_column_generation_stops_when_the_bound_stops_improving():
    """The early stop: column generation ends at the first iteration k where the best bound has
    not dropped by more than stall_tol over the last `patience` iterations (never before), and
    a longer patience rides out a plateau that the rules then leave (here 6 flat iterations)."""
    rng = np.random.default_rng(0)
    cb = tiny_codebook((3, 4, 2))
    X, y = sample(cb, 200, rng)
    S = Summary.from_rows(cb, X, y, stats="all")
    records = []
    short = BoostVote(patience=3, stall_tol=1e-4, callback=records.append).fit(S)
    it = list(short.iterations_)

    def stalled(j, p, tol):  # after j iterations
        return j > p and min(it[:j - p]) - min(it[j - p:j]) <= tol

    assert stalled(len(it), 3, 1e-4) and not any(stalled(j, 3, 1e-4) for j in range(1, len(it)))
    assert not short.converged_ and records[-1]["stage"] == "stalled" and records[-1]["patience"] == 3
    assert short.used_features() == [] and short._report()["empty_vote"] in cb.label.classes
    long = BoostVote(patience=8).fit(S)  # the default
    assert min(long.iterations_) < min(it) - 1e-3 and long.used_features()
    assert long._report()["empty_vote"] is None


def test_an_empty_vote_is_said_and_predicts_one_class(tmp_path, demo_study):
    """Stopped on its first plateau the demo's vote holds no rule: `marg learn` says so in one line
    naming the class, and that class is what `marg predict` writes for every row."""
    import csv

    from tests.helpers.console import marg

    schema, bundles = demo_study.schema, demo_study.bundles  # 400 rows per site, seeds 10, 11, 12
    env = {"MARG_HOME": str(tmp_path / "home"), "MARG_PROGRESS_AFTER": "0"}  # the summary line however fast the fit
    r = marg("learn", *bundles, "--learner", "boost", "--patience", "3", "--out", tmp_path / "m.json",
             "--allow-unsigned",
             "--no-sign", cwd=tmp_path, env=env)
    assert r.returncode == 1 and not (tmp_path / "m.json").exists()  # an empty vote is written only when asked for
    r = marg("learn", *bundles, "--learner", "boost", "--patience", "3", "--out", tmp_path / "m.json",
             "--allow-unsigned",
             "--no-sign", "--allow-empty", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    said = [ln for ln in r.stderr.splitlines() if "vote is empty" in ln]  # (and, early, "no rule has a weight so far")
    assert len(said) == 1 and "stopped early" in r.stderr
    cls = said[0].split("predicts ")[1].split("'")[1]
    r = marg("predict", tmp_path / "m.json", demo_study.data["north"], "--out", tmp_path / "p.csv", "--schema", schema,
             "--allow-unsigned", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    with open(tmp_path / "p.csv", newline="") as fh:
        assert {row["predicted"] for row in csv.DictReader(fh)} == {cls}
    r = marg("learn", *bundles, "--learner", "boost", "--out", tmp_path / "m8.json", "--allow-unsigned", "--no-sign",
             cwd=tmp_path, env=env)
    assert r.returncode == 0 and "vote is empty" not in r.stderr  # patience 8 rides out the plateau
