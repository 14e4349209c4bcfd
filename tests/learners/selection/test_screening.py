"""Screening from first-order tables (learners/selection/screening.py) and screen-then-learn
(learners/choice/screened.py): the score against a brute-force count, the DP bounds on the event the noise stays within
its recorded tails (checked for every draw), the selection-valid certificate against an exact LP oracle and by
coverage simulation, and the default's switch through the installed ``marg learn``."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from scipy.optimize import linprog
from scipy.stats import binom

from marg.learners.auto import AutoLearner
from marg.learners.features.calibration import confidence_box
from marg.learners.certification.certify import uncertainty_map
from marg.learners.features.statistics import map_moments
from marg.learners.classifiers.label_only import LabelOnly
from marg.learners.classifiers.naive_bayes import NaiveBayes
from marg.learners.choice.choice_rule import TOLERANCE
from marg.learners.choice.screened import (SCREEN_MIN_FEATURES, ScreeningCandidates, screening_applies,
                                           selection_certificate)
from marg.learners.selection.screening import screen_scores
from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label
from marg.marginals.noise_tails import halfwidth
from marg.marginals.summary import Summary
from marg.marginals.counts.counting import count_tables
from marg.marginals.counts.tables import plan_cliques
from tests.helpers.console import marg


def _codebook(sizes, K=2):
    feats = tuple(CategoricalFeature(f"g{j}", tuple(f"v{a}" for a in range(m))) for j, m in enumerate(sizes))
    return Codebook(features=feats, label=Label("y", tuple(f"c{k}" for k in range(K))))


def screen_and_learn(S, coverage=0.95, **settings):
    """The automatic choice on the screening generator's candidates (other learners, sizes, replicates)."""
    return AutoLearner(coverage=coverage).fit_candidates(S, ScreeningCandidates(S, coverage=coverage, **settings))


def _configs(auto):
    return auto.screen_["configs"]


def _rows(rng, n, p, informative, levels=3, flip=0.2):
    """Labels uniform; feature j < informative copies the label (level 2y) except a ``flip`` share; the rest uniform."""
    y = rng.integers(0, 2, n)
    X = rng.integers(0, levels, (n, p)).astype(np.float64)
    for j in range(informative):
        noise = rng.random(n) < flip
        X[:, j] = np.where(noise, rng.integers(0, levels, n), 2 * y)
    return X, y


def _brute_dependence(X, y, j, levels, K):
    """Σ_{a,y} |P(a, y) − P(a)P(y)| counted row by row."""
    n = len(y)
    total = 0.0
    for a in range(levels):
        for k in range(K):
            pay = sum(1 for i in range(n) if X[i, j] == a and y[i] == k) / n
            pa = sum(1 for i in range(n) if X[i, j] == a) / n
            py = sum(1 for i in range(n) if y[i] == k) / n
            total += abs(pay - pa * py)
    return total


def test_scores_and_ranking_match_a_brute_force_count():
    rng = np.random.default_rng(3)
    X, y = _rows(rng, 90, 7, informative=2, flip=0.4)
    X[:, 6] = 1.0  # a constant feature: no dependence at all
    S = Summary.from_rows(_codebook([3] * 7), X, y)
    sc = screen_scores(S)
    brute = np.array([_brute_dependence(X, y, j, 3, 2) for j in range(7)])
    assert sc.score == pytest.approx(brute, abs=1e-12)
    assert sc.lower == pytest.approx(brute, abs=1e-12) and sc.upper == pytest.approx(brute, abs=1e-12)  # exact tables
    # the ranking: every feature with positive dependence, by dependence (ties by codebook order)
    expect = [f"g{j}" for j in sorted(range(7), key=lambda j: (-brute[j], j)) if brute[j] > 0]
    assert sc.rank() == expect and "g6" not in expect
    assert set(sc.rank()[:2]) == {"g0", "g1"}




def test_dp_bounds_hold_for_every_draw_on_the_noise_event():
    """Released counts = exact counts + OpenDP noise (unseedable): for EVERY draw, when every cell's noise is within
    its recorded half-width (the event E, probability ≥ coverage), the bounds hold the exact tables' dependence,
    features independent of the label in the sample are not kept, and the informative ones (dependence above the
    interval's width) are; E itself fails at most as often as its coverage allows (binomial tail < 1e-6)."""
    from marg.marginals.privacy import privatize

    n, p, coverage = 3000, 8, 0.9
    y = np.repeat([0, 1], n // 2)
    X = np.zeros((n, p))
    for j in range(2):  # informative: level 2y, a fifth of the rows moved to level 1
        X[:, j] = np.where(np.arange(n) % 5 == j, 1.0, 2.0 * y)
    for j in range(2, p):  # exactly independent of the label in the sample: the same level pattern in both classes
        half = np.arange(n // 2) % 3
        X[:, j] = np.concatenate([np.roll(half, j), np.roll(half, j)])
    cb = _codebook([3] * p)
    exact = count_tables(cb, X, y, plan_cliques(cb, "first"))
    S0 = Summary(cb, exact)
    truth = screen_scores(S0).score
    assert np.all(truth[2:] == 0) and np.all(truth[:2] > 0.5)
    m = 2 * (3 * p + 1)
    alpha = (1 - coverage) / m
    draws, misses = 60, 0
    kept_informative = 0
    for _ in range(draws):
        noisy, _ = privatize(exact, epsilon=4.0, codebook=cb)
        S = Summary(cb, noisy)
        sc = screen_scores(S, coverage=coverage)
        lab = cb.label.name
        inside = abs(S.counts((lab,)) - S0.counts((lab,))).max() <= halfwidth(S.noise_draws((lab,)), alpha)
        for nm in cb.feature_names:
            q = halfwidth(S.noise_draws((nm, lab)), alpha)
            inside &= bool(np.abs(S.counts((nm, lab)) - S0.counts((nm, lab))).max() <= q)
        if not inside:
            misses += 1
            continue
        assert np.all(sc.lower <= truth + 1e-12) and np.all(truth <= sc.upper + 1e-12)
        assert np.all(sc.class_lower <= screen_scores(S0).class_score + 1e-12)  # the one-vs-rest bounds too
        ranked = sc.rank()
        assert not set(ranked) & {f"g{j}" for j in range(2, p)}
        for j in range(2):
            if truth[j] > sc.upper[j] - sc.lower[j]:
                assert f"g{j}" in ranked
                kept_informative += 1
    assert binom.sf(misses - 1, draws, 1 - coverage) > 1e-6  # P(≥ misses | P(miss) ≤ 1 − coverage) is not tiny
    assert kept_informative > 0  # the informative features' dependence was above the noise's width


def test_with_more_classes_every_class_gets_its_genes_in_turn():
    """A planted population of four classes: 12 strong genes each separate class 3 only, one weaker gene separates
    class 1 only, the rest are noise. By D_j alone the class-1 gene ranks below every class-3 gene; the multi-class
    ranking puts it among the first K = 4 (class 1's turn comes before the class-3 genes run out). The one-vs-rest
    scores match a row-by-row count of the dependence on [Y = y], and they sum to twice D_j."""
    rng = np.random.default_rng(21)
    n, p, K = 800, 30, 4
    y = np.repeat(np.arange(K), n // K)
    X = rng.integers(0, 3, (n, p)).astype(np.float64)
    for j in range(12):  # class 3: level 2, the others level 0, a tenth of the rows random
        X[:, j] = np.where(rng.random(n) < 0.1, rng.integers(0, 3, n), np.where(y == 3, 2, 0))
    X[:, 12] = np.where((y == 1) & (rng.random(n) < 0.5), 2, rng.integers(0, 2, n))  # class 1 only, weaker
    S = Summary.from_rows(_codebook([3] * p, K=K), X, y)
    sc = screen_scores(S)
    for j in (0, 12, 20):
        for k in range(K):
            assert sc.class_score[j, k] == pytest.approx(_brute_dependence(X, (y == k).astype(int), j, 3, 2), abs=1e-12)
    assert sc.class_score.sum(axis=1) == pytest.approx(2 * sc.score, abs=1e-12)
    by_d = sorted(range(p), key=lambda j: (-sc.lower[j], j))
    assert by_d.index(12) >= 12  # D_j alone: every class-3 gene first
    ranked = sc.rank()
    assert "g12" in ranked[:K] and set(ranked) == {f"g{j}" for j in range(p) if sc.lower[j] > 0}
    assert sc.order()[: len(ranked)] == ranked


def _oracle_worst_error(rule_predict, cb, tau, lam, blocks):
    """max P_p(h(X) ≠ Y) over every distribution p on the domain of ``blocks``' features (the others fixed at
    level 0: the rule does not read them) with |E_pΦ − τ| ≤ λ on those blocks' first-order cells: an LP over the
    domain's probabilities (``tau``, ``lam`` indexed by each block's offset)."""
    K = cb.n_classes
    cells = list(itertools.product(*[range(b.size) for b in blocks]))
    Xd = np.zeros((len(cells), cb.n_features))
    for i, cell in enumerate(cells):
        for b, a in zip(blocks, cell):
            Xd[i, b.column] = a
    pred = rule_predict(Xd)
    nvar = len(cells) * K
    c = np.zeros(nvar)
    for i in range(len(cells)):
        for k in range(K):
            if pred[i] != k:
                c[i * K + k] = -1.0  # maximise the error
    A, b_ub = [], []
    for t, blk in enumerate(blocks):
        for a in range(blk.size):
            for k in range(K):
                row = np.zeros(nvar)
                for i, cell in enumerate(cells):
                    if cell[t] == a:
                        row[i * K + k] = 1.0
                col = blk.offset + a
                A.append(row)
                b_ub.append(tau[k, col] + lam[k, col])
                A.append(-row)
                b_ub.append(-(tau[k, col] - lam[k, col]))
    res = linprog(c, A_ub=np.array(A), b_ub=np.array(b_ub), A_eq=np.ones((1, nvar)), b_eq=[1.0], bounds=(0, None),
                  method="highs")
    assert res.status == 0
    return -res.fun


def test_the_screened_certificate_bounds_the_worst_case_over_every_features_box():
    """The certificate of a rule on the screened features is ≥ the exact worst-case error of that rule over the
    uncertainty set of ALL features (brute force over the whole domain, λ calibrated for every cell); its exact
    refinement equals the worst case over the screened features' cells with that same λ (the set it is computed
    over, which contains the projection of the whole set)."""
    rng = np.random.default_rng(11)
    X, y = _rows(rng, 400, 4, informative=2, levels=3, flip=0.5)
    cb = _codebook([3, 3, 3, 3])
    S = Summary.from_rows(cb, X, y)
    top = screen_scores(S).rank()[:2]
    for coverage in (0.5, 0.95):
        nb = NaiveBayes(features=top, certify="bound", coverage=coverage).fit(S)
        umap = uncertainty_map(S, "first")
        m = map_moments(S, umap)
        lam = confidence_box(m, umap.indicator_columns(), coverage=coverage).lam
        whole = _oracle_worst_error(nb.predict, cb, m.tau, lam, list(umap.blocks))
        screened = _oracle_worst_error(nb.predict, cb, m.tau, lam, [b for b in umap.blocks if b.name in top])
        bound = selection_certificate(nb, S, coverage)  # the one-LP bound: valid, possibly loose
        exact = selection_certificate(nb, S, coverage, exact=True)  # to convergence: no wall-clock limit
        assert bound.value >= exact.value - 1e-9 and exact.value >= whole - 1e-7
        assert exact.value == pytest.approx(screened, abs=1e-6)
        assert screened >= whole - 1e-9 and 0 < whole < 1


def test_the_selection_valid_certificate_covers_the_true_error_by_simulation():
    """Rows from a known distribution; screen, choose M and the learner from the summary, certify: the chosen
    rule's true error (exact over the domain) exceeds the certificate in at most as many draws as coverage 0.8
    allows (a binomial tail < 1e-6 beyond the asserted count)."""
    rng = np.random.default_rng(21)
    cb = _codebook([2] * 5)
    coverage, draws = 0.8, 25
    # p*(y) = ½; x_0, x_1 copy y with probability 0.75 and 0.65; x_2..x_4 fair coins: the true error of any rule
    flips = [0.25, 0.35, 0.5, 0.5, 0.5]
    cells = np.array(list(itertools.product(*[range(2)] * 5)), dtype=np.float64)

    def true_error(model):
        pred = model.predict(cells)
        err = 0.0
        for k in range(2):
            pk = np.prod([np.where(cells[:, j] == k, 1 - f, f) for j, f in enumerate(flips)], axis=0) * 0.5
            err += float(pk[pred != k].sum())
        return err

    misses = 0
    for _ in range(draws):
        y = rng.integers(0, 2, 300)
        X = np.array([np.where(rng.random(300) < f, 1 - y, y) for f in flips], dtype=np.float64).T
        res = screen_and_learn(Summary.from_rows(cb, X, y), learners=("nb",), sizes=(1, 2, 3), coverage=coverage,
                               replicates=1)
        misses += true_error(res.chosen_) > res.chosen_.certificate_.value + 1e-12
    # each draw misses with probability ≤ 1 − coverage: more than `limit` misses has probability < 1e-6
    limit = next(k for k in range(draws + 1) if binom.sf(k, draws, 1 - coverage) < 1e-6)
    assert misses <= limit


def test_screening_applies_only_past_the_stated_rule():
    rng = np.random.default_rng(1)
    wide, narrow = SCREEN_MIN_FEATURES + 1, SCREEN_MIN_FEATURES
    for p, first_only, expect in ((wide, True, True), (narrow, True, False)):
        X, y = _rows(rng, 40, p, informative=1)
        assert screening_applies(Summary.from_rows(_codebook([3] * p), X, y)) is expect
    # every pair released: the pair tables carry every feature, no screening
    X, y = _rows(rng, 40, wide, informative=1)
    cb = _codebook([3] * wide)
    assert not screening_applies(Summary(cb, count_tables(cb, X, y, plan_cliques(cb, "all"))))
    # the pairs of a requested few: screening still applies
    pairs = [("g0", "g1"), ("g0", "g2"), ("g1", "g2")]
    assert screening_applies(Summary.from_rows(cb, X, y, stats="pairs", pairs=pairs))


def _export(tmp, X, y, levels="ab", name="site"):
    """Rows (codes into ``levels``) written as a CSV, exported exactly (first-order tables) by the installed CLI."""
    p = X.shape[1]
    cb = Codebook(features=tuple(CategoricalFeature(f"g{j}", tuple(levels)) for j in range(p)),
                  label=Label("y", ("no", "yes")))
    cb.save(tmp / "codebook.json")
    lines = [",".join([f"g{j}" for j in range(p)] + ["y"])]
    lines += [",".join([levels[v] for v in X[i]] + [("no", "yes")[y[i]]]) for i in range(len(y))]
    (tmp / "data.csv").write_text("\n".join(lines) + "\n")
    out = tmp / f"{name}{p}.bundle"
    r = marg("export", tmp / "data.csv", "--schema", tmp / "codebook.json", "--site", "north", "--out", out,
             "--stats", "first", "--min-cell", "1", "--no-ledger", cwd=tmp)
    assert r.returncode == 0, r.stderr
    return out


def _wide_bundle(tmp, p, n=400, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    X = rng.integers(0, 2, (n, p))
    for j in range(3):
        X[:, j] = np.where(rng.random(n) < 0.1, 1 - y, y)
    return _export(tmp, X, y)


def _mi(N):
    """Plug-in mutual information (nats) of a count table."""
    P = N / N.sum()
    E = np.outer(P.sum(1), P.sum(0))
    nz = P > 0
    return float(np.sum(P[nz] * np.log(P[nz] / E[nz])))


def test_marg_request_top_ranks_by_the_screening_score(tmp_path):
    """Planted counts where the two scores disagree: g0 has a rare level seen only in class yes (L1 dependence
    0.2, mutual information 0.075 nats), g1 a mild shift over two levels (0.24, 0.029), g2 exactly independent.
    ``marg request --top 2`` asks for the screening order (g1 before g0), not the plug-in MI order."""
    y = np.repeat([1, 0], 500)
    g0 = np.concatenate([np.r_[np.full(100, 2), np.zeros(400)], np.zeros(500)]).astype(int)
    g1 = np.concatenate([np.r_[np.ones(310), np.zeros(190)], np.r_[np.ones(190), np.zeros(310)]]).astype(int)
    g2 = np.arange(1000) % 2
    X = np.stack([g0, g1, g2], axis=1)
    bundle = _export(tmp_path, X, y, levels="abc")
    tables = [np.array([[np.sum((X[:, j] == a) & (y == k)) for k in (0, 1)] for a in range(3)], float)
              for j in range(3)]
    S = Summary.from_rows(_codebook([3] * 3), X.astype(float), y)
    d = screen_scores(S).score
    assert d[1] > d[0] > d[2] == 0 and _mi(tables[0]) > _mi(tables[1])  # the two orders differ on this table
    r = marg("request", bundle, "--top", "2", "--out", tmp_path / "req.json", "--allow-unsigned", "--json",
             cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["features"] == ["g1", "g0"] and got["above_noise"] == 2 and got["pairs"] == [["g0", "g1"]]


@pytest.mark.parametrize("p", [SCREEN_MIN_FEATURES + 20, 12])
def test_marg_learn_screens_by_default_only_past_the_rule(tmp_path, p):
    bundle = _wide_bundle(tmp_path, p)
    r = marg("learn", bundle, "--out", tmp_path / "m.json", "--json", "--allow-unsigned", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    if p > SCREEN_MIN_FEATURES:
        scr = rep["screen"]
        assert scr["applied"] and scr["size"] == len(scr["features"]) == len(rep["features"])
        assert {"g0", "g1", "g2"} <= set(scr["features"])  # the three label copies pass the screen first
        assert set(rep["features"]) == set(scr["features"])  # the model lists them in codebook order
        assert all(c["params"].get("screened") for c in rep["auto"] if c["learner"] != "prior")
        assert [c["learner"] for c in rep["auto"]].count("prior") == 1  # the label-only rule: always a candidate
        text = marg("learn", bundle, "--out", tmp_path / "m2.json", "--allow-unsigned", cwd=tmp_path)
        assert text.returncode == 0, text.stderr
        line = f"screened: {scr['size']} of {p} features used by {scr['learner']}"
        assert line in text.stdout
        card = marg("report", tmp_path / "m.json", "--out", tmp_path / "card.html", "--allow-unsigned", cwd=tmp_path)
        assert card.returncode == 0, card.stderr
        assert "S" + line[1:] in (tmp_path / "card.html").read_text()  # the model card names the screened genes
    else:
        assert "screen" not in rep and len(rep["features"]) == p
    # an explicit learner never screens
    r = marg("learn", bundle, "--learner", "nb", "--out", tmp_path / "nb.json", "--json", "--allow-unsigned",
             cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert "screen" not in rep and len(rep["features"]) == p


def test_leave_one_site_out_repeats_the_screen_without_each_site():
    """Three exact sites: each (learner, M)'s estimate is the n-weighted mean over sites of the error, on rows
    simulated from the left-out site's tables, of the learner fitted on the top M screened from the OTHER sites."""
    from marg.learners.choice.cross_site import SEED, sample_error, tan_sample
    from marg.marginals.summary import sum_tables

    rng = np.random.default_rng(8)
    p = SCREEN_MIN_FEATURES + 5
    cb = _codebook([3] * p)
    parts = []
    for k, n in enumerate((120, 90, 60)):
        X, y = _rows(rng, n, p, informative=3)
        parts.append((f"s{k}", count_tables(cb, X, y, plan_cliques(cb, "first"))))
    S = Summary(cb, sum_tables([t for _, t in parts])[0], site_parts=parts)
    res = screen_and_learn(S, learners=("nb",), sizes=(2, 4), coverage=0.9)
    assert res.error_method_.startswith("leave-one-site-out over 3 sites")
    assert _configs(res)[0]["learner"] == "prior"  # always a configuration; the others screen
    for c in _configs(res)[1:]:
        errs = []
        for k in range(3):
            rest = Summary(cb, sum_tables([t for j, (_, t) in enumerate(parts) if j != k])[0])
            top = screen_scores(rest, coverage=0.9).rank()[: c["size"]]
            nb = NaiveBayes(features=top, certify="bound", coverage=0.9).fit(rest)
            errs.append(sample_error(nb, tan_sample(Summary(cb, list(parts[k][1])), seed=SEED + k)))
        assert c["folds"] == pytest.approx(errs, abs=1e-12)
        assert c["error"] == pytest.approx(np.average(errs, weights=[120, 90, 60]), abs=1e-12)


def test_an_empty_screen_under_dp_falls_back_to_the_label_only_rule_and_says_so():
    """Every feature exactly independent of the label in the sample, tables released with DP noise: on the event
    that the noise stays within its recorded tails (probability ≥ 0.99 per draw) no feature passes the screen and
    the default is the label-only rule (one class for every row, the label table's certificate) with a note;
    three draws all off that event have probability ≤ 1e-6."""
    from marg.learners.classifiers.label_only import LabelOnly
    from marg.marginals.privacy import privatize

    p = SCREEN_MIN_FEATURES + 1
    n = 600
    y = np.repeat([0, 1], n // 2)
    half = np.arange(n // 2) % 3
    X = np.stack([np.concatenate([np.roll(half, j), np.roll(half, j)]) for j in range(p)], axis=1).astype(np.float64)
    cb = _codebook([3] * p)
    exact = count_tables(cb, X, y, plan_cliques(cb, "first"))
    fallbacks = 0
    for _ in range(3):
        noisy, _ = privatize(exact, epsilon=2.0, codebook=cb)
        S = Summary(cb, noisy)
        auto = AutoLearner(coverage=0.99).fit(S)
        if not auto.screen_["applied"]:
            fallbacks += 1
            assert auto.chosen_.learner == "prior" and auto.chosen_.feature_names_in_ == []
            assert auto.screen_["note"] == ("no feature above the noise: predicting the class with the largest share, "
                                            "prior")
            assert "screening lower bounds are 0" in auto.screen_["reason"]
            assert auto.choice_report()["screen"] == auto.screen_
            assert auto.error_method_.startswith("not estimated")
            direct = LabelOnly(coverage=0.99).fit(S)
            assert auto.certificate_ == direct.certificate_
            assert set(auto.predict(X[:50])) == {direct.class_}
    assert fallbacks >= 1


@pytest.mark.parametrize("informative, flip", [(40, 0.85), (3, 0.1)])
def test_the_number_of_features_grows_while_the_estimate_still_falls_at_the_largest(informative, flip):
    """The choice among the tried (learner, M) is the fewest features within the tolerance of the best estimate; while
    that is the largest M tried, GROWTH × M is tried too, until the choice is below the largest M or every ranked
    feature is used. Planted populations: 40 weak features, each a noisy copy of the label (the signal is spread:
    the estimate at 4 features is far above the one at 40, so M must grow past the grid), and 3 strong copies
    among 37 independent features (the signal is in 3: the choice stays at most one step past the grid)."""
    from marg.learners.choice.screened import GROWTH

    rng = np.random.default_rng(11)
    X, y = _rows(rng, 300, 40, informative=informative, flip=flip)
    S = Summary.from_rows(_codebook([3] * 40), X, y)
    ranked = screen_scores(S).rank()
    res = screen_and_learn(S, learners=("nb",), sizes=(2, 4), replicates=1)
    configs = [c for c in _configs(res) if c["learner"] != "prior"]  # the label-only rule: never chosen here
    tried = [c["size"] for c in configs]
    best = min(c["error"] for c in configs)
    chosen = [c for c in configs if c["chosen"]]
    assert len(chosen) == 1 and chosen[0]["size"] == len(res.screen_["features"]) == len(res.chosen_.feature_names_in_)
    ok = [c["size"] for c in configs if c["error"] <= best + TOLERANCE + 1e-12]
    assert chosen[0]["size"] == min(ok)
    # each size past the grid is GROWTH × the largest before it (capped at the ranked count), tried only
    # because the choice was the largest M tried so far
    for k in range(2, len(tried)):
        assert tried[k] == min(len(ranked), GROWTH * tried[k - 1])
        prior = configs[:k]
        pbest = min(c["error"] for c in prior)
        assert min(c["size"] for c in prior if c["error"] <= pbest + TOLERANCE + 1e-12) == tried[k - 1]
    assert chosen[0]["size"] < max(tried) or max(tried) == len(ranked)
    if informative == 40:
        assert max(tried) > 4 and chosen[0]["size"] > 4
    else:
        assert max(tried) <= GROWTH * 4


def _two_rounds(seed: int, informative: int = 6, k: int = 5):
    rng = np.random.default_rng(seed)
    p = SCREEN_MIN_FEATURES + 20
    X, y = _rows(rng, 400, p, informative=informative)
    cb = _codebook([3] * p)
    top = screen_scores(Summary.from_rows(cb, X, y)).order()[:k]
    return X, y, cb, top, Summary.from_rows(cb, X, y, stats="pairs", pairs=list(itertools.combinations(top, 2)))


def test_renyi_on_the_screened_genes_pair_tables_gets_a_real_estimate():
    """Under the one-site simulation (the path DP summaries take), Rényi on the requested pairs gets a
    real estimate: each training set carries the pair tables of its own top k — not the failure value
    1.0 a first-order-only simulated summary used to give it."""
    from marg.learners.choice.cross_site import split_errors

    X, y, cb, top, S = _two_rounds(4)
    gen = ScreeningCandidates(S, replicates=2)
    five, ten = gen.candidate("renyi", 5), gen.candidate("renyi", 10)
    errs = split_errors(S, [("5", five.refit), ("10", ten.refit)], 2, gen.train)
    assert max(errs["5"]) < 0.25, errs  # 6 genes copy the label: far below chance
    assert errs["10"] == [1.0, 1.0]  # beyond the released pairs Rényi cannot fit: the failure value


def test_second_round_gcv_equals_ridge_regression_on_the_rows():
    """gcv_path's GCV(M, ridge) = (RSS/n) / (1 − tr H/n)², computed here from the rows: least squares of
    1{y = 1} on the one-hot codes of the top M with an intercept and the penalty n·ridge·‖z‖², H its hat
    matrix, RSS its residual sum of squares."""
    from marg.learners.classifiers.renyi_summary import gcv_path

    X, y, cb, top, S = _two_rounds(7)
    path = gcv_path(S, top, [0, 2, 5], ridges=(0.01, 0.3))
    n = len(y)
    assert [M for M, _, _ in path] == [0, 0, 2, 2, 5, 5]  # M = 0: the intercept alone (the label-only rule)
    for M, r, g in path:
        names = sorted(top[:M], key=cb.index)
        W = np.hstack([np.zeros((n, 0))] + [(X[:, cb.index(nm)][:, None] == np.arange(3)[None, :]).astype(float)
                                             for nm in names])
        Wc = W - W.mean(axis=0)
        t = (y == 1).astype(float)
        tc = t - t.mean()
        A = Wc.T @ Wc + n * r * np.eye(W.shape[1])
        z = np.linalg.solve(A, Wc.T @ tc)
        rss = float(np.sum((tc - Wc @ z) ** 2))
        df = 1.0 + float(np.trace(Wc @ np.linalg.solve(A, Wc.T)))
        assert g == pytest.approx((rss / n) / (1.0 - df / n) ** 2, rel=1e-8), (M, r)


def test_second_round_fits_renyi_on_the_requested_pairs_by_gcv():
    """With the pairs of the top k released (exact tables), screen_and_learn takes Rényi on the top M of
    those k, (M, ridge) the smallest GCV, certified by the selection-valid certificate; the rule beats
    chance on fresh rows of the same population, and no M beyond the requested k is tried."""
    from marg.learners.classifiers.renyi_summary import gcv_path

    X, y, cb, top, S = _two_rounds(4)
    res = screen_and_learn(S)
    configs = _configs(res)
    assert (res.chosen_.learner == "renyi" and [c["learner"] for c in configs] == ["prior"]
            + ["renyi"] * (len(configs) - 1))
    assert max(c["size"] for c in configs) == 5 and sum(c["chosen"] for c in configs) == 1
    M, r, g = min(gcv_path(S, top, [c["size"] for c in configs]), key=lambda t: (t[2], t[0]))
    assert len(res.screen_["features"]) == M and res.chosen_.ridge == r and res.screen_["features"] == top[:M]
    assert res.chosen_.certificate_.kind == "W(h)" and "generalized cross-validation" in res.error_method_
    Xn, yn = _rows(np.random.default_rng(99), 400, SCREEN_MIN_FEATURES + 20, informative=6)
    assert np.mean(res.chosen_.predict(Xn) != yn) < 0.25


def test_the_second_round_can_answer_the_larger_class():
    """Issue 38: the second round's choice has the label-only rule among its configurations (M = 0, the intercept
    alone), chosen when its GCV is the smallest — here pairs requested for five genes that carry no signal (seed 4:
    GCV 0.2143 against Rényi's best 0.2158) — with the label table's certificate at 1 − α/2, said at 95 %."""
    from marg.learners.classifiers.renyi_summary import gcv_path
    from marg.learners.choice.screened import SIZES

    rng = np.random.default_rng(4)
    n, p = 100, SCREEN_MIN_FEATURES + 20
    y = (rng.random(n) > 0.7).astype(int)
    X = rng.integers(0, 3, (n, p)).astype(np.float64)
    cb = _codebook([3] * p)
    noise = [f"g{j}" for j in range(p - 5, p)]
    S = Summary.from_rows(cb, X, y, stats="pairs", pairs=list(itertools.combinations(noise, 2)))
    res = screen_and_learn(S, ranked=noise)
    path = gcv_path(S, noise, [0] + sorted({min(m, 5) for m in SIZES}))
    assert min(path, key=lambda t: (t[2], t[0]))[0] == 0
    configs = _configs(res)
    assert res.chosen_.learner == "prior" and res.screen_["features"] == [] and configs[0]["chosen"]
    assert [c["learner"] for c in configs] == ["prior"] + ["renyi"] * (len(configs) - 1)
    assert res.chosen_.predict(X[:5]).tolist() == [int(np.argmax(np.bincount(y)))] * 5  # the larger class
    cert = res.chosen_.certificate_
    assert cert.coverage == 0.95 and cert.value == pytest.approx(
        LabelOnly(coverage=1 - 0.05 / 2).fit(S).certificate_.value)


def test_marg_learn_after_the_second_round_fits_renyi_on_the_requested_pairs(tmp_path):
    """The installed console script, both rounds: first-order export, ``marg request --top 5``, the pairs
    export, ``marg learn`` on both bundles: Rényi on the top M of the 5 requested genes by GCV, said in
    its output, and ``marg predict`` uses the model."""
    b1 = _wide_bundle(tmp_path, SCREEN_MIN_FEATURES + 20)
    req = tmp_path / "req.json"
    r = marg("request", b1, "--top", "5", "--out", req, "--allow-unsigned", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    b2 = tmp_path / "round2.bundle"
    r = marg("export", tmp_path / "data.csv", "--schema", tmp_path / "codebook.json", "--site", "north", "--out", b2,
             "--pairs", f"@{req}", "--min-cell", "1", "--no-ledger", "--allow-unsigned", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = marg("learn", b1, b2, "--out", tmp_path / "m.json", "--json", "--allow-unsigned", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    scr = rep["screen"]
    assert scr["applied"] and scr["learner"] == "renyi" and "generalized cross-validation" in scr["method"]
    assert set(scr["features"]) <= set(json.loads(req.read_text())["features"])
    assert {"g0", "g1", "g2"} <= set(scr["features"]) or scr["size"] < 3
    text = marg("learn", b1, b2, "--out", tmp_path / "m2.json", "--allow-unsigned", cwd=tmp_path)
    assert text.returncode == 0 and "used by renyi" in text.stdout and "GCV" in text.stdout, text.stdout + text.stderr
    r = marg("predict", tmp_path / "m.json", tmp_path / "data.csv", "--out", tmp_path / "pred.csv", "--allow-unsigned",
             cwd=tmp_path)
    assert r.returncode == 0, r.stderr
