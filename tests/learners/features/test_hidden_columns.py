"""Hidden class columns (min-cell suppression) are unknown, not zero: learning on a suppressed
release works through the installed console script, the recorded box covers the true
probabilities of the hidden cells (coverage by simulation; a box that reads the point estimate
as a real count does not), and a column hidden by one site of two is bounded per site before
the sums."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import binom

from marg.errors import InputError
from marg.learners.boost.columns import monomial_moments
from marg.learners.boost.literals import BinaryTest, Literal
from marg.learners.boost.vote import BoostVote
from marg.learners.features.calibration import confidence_box
from marg.learners.features.statistics import map_moments
from marg.learners.classifiers.mrc import MRC
from marg.learners.classifiers.naive_bayes import NaiveBayes
from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label
from marg.marginals.disclosure import apply_min_cell
from marg.marginals.summary import Summary, sum_tables
from marg.marginals.counts.counting import count_tables
from marg.marginals.counts.tables import MarginalTable, plan_cliques
from marg.protocols.aggregate import summary_from_bundles
from marg.protocols.bundle import Bundle, load_bundle
from tests.helpers.console import marg

RELEASES = 200
COVERAGE = 0.95
NEEDED = int(binom.ppf(0.01, RELEASES, COVERAGE))  # fewer hits: coverage < 95 % at the 1 % level
CB = Codebook(features=(CategoricalFeature("a", ("0", "1", "2", "3")), CategoricalFeature("b", ("0", "1", "2"))),
              label=Label("y", ("0", "1")))
# the population: P(y=1) = 0.3; given y = 1, a is 0 with probability 0.85 — so the evenly spread
# point estimate of the hidden column (y = 1 of N[a, y]) is far from the truth in cell (a=0, y=1)
PA = np.array([[0.25, 0.25, 0.25, 0.25], [0.85, 0.05, 0.05, 0.05]])  # P(a | y)
PB = np.array([[0.5, 0.3, 0.2], [0.2, 0.3, 0.5]])  # P(b | y)
PY = np.array([0.7, 0.3])
TRUE = {"a": (PA * PY[:, None]).T, "b": (PB * PY[:, None]).T}  # P(x, y), (m, K)


def draw(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    y = (rng.random(n) < PY[1]).astype(int)
    a = np.array([rng.choice(4, p=PA[v]) for v in y])
    b = np.array([rng.choice(3, p=PB[v]) for v in y])
    return np.column_stack([a, b]).astype(float), y


def truth(entry: dict) -> np.ndarray:
    """The population's value of a recorded box entry: P(x, y) per cell (C order), or for a boost
    rule (``cells``: the levels where it holds) P(rule holds, y) per class."""
    if entry["features"] == ["y"]:  # the constant rule: the class proportions
        return PY
    P = TRUE[entry["features"][0]]
    return P[np.asarray(entry["cells"], dtype=bool)].sum(axis=0) if "cells" in entry else P.ravel()


def hide(tables: list[MarginalTable], name: str, v: int) -> list[MarginalTable]:
    """Release class column ``v`` of ``N[name, y]`` as 0, as the suppression policy does."""
    out = []
    for t in tables:
        if t.clique == (name, "y"):
            c = t.counts.copy()
            c[:, v] = 0
            t = MarginalTable(t.clique, c, t.noise, t.kind)
        out.append(t)
    return out


def test_learning_on_a_suppressed_release_through_the_console_script(tmp_path):
    """The issue's release (demo codebook, 300 rows of one site, --min-cell 5 --min-cell-policy suppress
    --stats first) is learnable: mrc, nb, auto and boost fit it with a certificate; renyi refuses for the reason
    it refuses every first-order release (its Q needs pair tables), not as inconsistent statistics."""
    from marg.marginals.synthetic import SITES, demo_codebook, generate, write_csv

    demo_codebook().save(tmp_path / "cb.json")
    write_csv(tmp_path / "d.csv", generate(300, SITES[0], seed=4))
    r = marg("export", "d.csv", "--schema", "cb.json", "--site", "north", "--out", "s.bundle", "--stats", "first",
             "--min-cell", "5", "--min-cell-policy", "suppress", "--no-ledger", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "small cells suppressed" in r.stdout
    certs = {}
    for learner in ("mrc", "nb", "auto", "boost"):
        r = marg("learn", "s.bundle", "--learner", learner, "--out", f"{learner}.model", "--allow-unsigned", "--json",
                 cwd=tmp_path)
        assert r.returncode == 0, (learner, r.stderr)
        rep = json.loads(r.stdout)
        assert rep["certificate"]["coverage"] == 0.95 and not rep["certificate"]["approximate"]
        certs[learner] = rep["worst_case_error"]
        assert 0 < certs[learner] <= 1 and (tmp_path / f"{learner}.model").exists()
    r = marg("learn", "s.bundle", "--learner", "renyi", "--out", "renyi.model", "--allow-unsigned", cwd=tmp_path)
    assert r.returncode != 0 and "pair tables" in r.stderr and "inconsistent" not in r.stderr, r.stderr
    # the recorded box holds every value a hidden cell can take: from 0 up to its tail's whole sum
    r = marg("inspect", "mrc.model", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    box = {tuple(b["features"]): b for b in json.loads(r.stdout)["certificate"]["box"]}
    from marg.marginals.sources import open_source

    with open_source(tmp_path / "d.csv") as src:
        true, n = src.count(demo_codebook(), plan_cliques(demo_codebook(), "first"), None)
    b = load_bundle(tmp_path / "s.bundle")
    released = {t.name: t for t in b.tables}
    totals = released["N[cv_event]"].counts
    checked = 0
    for t in true:
        if t.name not in b.header["suppressed_cells"]:
            continue
        rel = released[t.name].counts
        found = False
        for v in np.flatnonzero(rel.sum(axis=0) != totals):  # a hidden tail: the cells after the last released one
            start = int(np.flatnonzero(np.r_[1, rel[:, v]])[-1])
            lower = np.array(box[t.clique]["lower"]).reshape(t.shape)[:, v]
            upper = np.array(box[t.clique]["upper"]).reshape(t.shape)[:, v]
            assert np.all(lower[start:] <= 1e-12) and np.all(upper[start:] >= (totals[v] - rel[:, v].sum()) / n)
            assert np.all((lower <= t.counts[:, v] / n) & (t.counts[:, v] / n <= upper))
            found = True
        checked += found
    assert checked == len(b.header["suppressed_cells"])


def test_the_box_covers_the_hidden_cells():
    """200 releases of n = 400 with class column y = 1 of N[a, y] hidden: the box MRC, naive Bayes and
    boost record covers the true P(a, y) and P(b, y) in ≥ 95 % of them (at the 1 % level). The box that
    takes the hidden cells' point estimate for a real count (no bounds) misses in most releases."""
    rng = np.random.default_rng(25)
    hits = {"mrc": 0, "nb": 0, "boost": 0}
    naive = 0
    for _ in range(RELEASES):
        X, y = draw(rng, 400)
        S = Summary(CB, hide(count_tables(CB, X, y, plan_cliques(CB, "first")), "a", 1))
        assert list(S.hidden) == ["N[a,y]"] and S.hidden["N[a,y]"][1] == float(y.sum())
        for name, est in (("mrc", MRC()), ("nb", NaiveBayes(certify="bound")), ("boost", BoostVote())):
            cert = est.fit(S).certificate_
            assert cert.box and cert.coverage == COVERAGE
            hits[name] += all(np.all((np.array(r["lower"]) <= truth(r)
                                      + 1e-12) & (truth(r) <= np.array(r["upper"]) + 1e-12))
                              for r in cert.box)
        m = map_moments(S, MRC().fit(S).map_)
        assert m.lo is not None and np.all(m.lo <= m.tau) and np.all(m.tau <= m.hi)
        plain = type(m)(m.tau, m.std, m.noise, m.n, m.draws, m.n_draws)  # the point estimate as if counted
        lam = confidence_box(plain, np.ones(m.tau.shape[1], dtype=bool)).lam
        naive += bool(np.all(np.abs(m.tau - np.concatenate([TRUE["a"].T, TRUE["b"].T], axis=1)) <= lam))
    assert min(hits.values()) >= NEEDED, (hits, NEEDED)
    assert naive < NEEDED // 2, (naive, NEEDED)


def _bundle(tables: list[MarginalTable], site: str, n: int, suppressed: dict[str, int]) -> Bundle:
    extra = {"min_cell": {"k": 3, "policy": "suppress", "suppressed": bool(suppressed)}}
    if suppressed:
        extra["suppressed_cells"] = suppressed
    return Bundle.build(CB, tables, site=site, n_rows=n, extra=extra)


def test_two_sites_one_hidden_column_is_bounded_per_site():
    """Site A hides class column y = 1 of N[a, y] (the suppression policy's own choice: a small cell
    there), site B releases it: the summed bounds are B's column plus [0, A's class total] per cell,
    they hold the true summed counts, their ends are reached, and the point estimate sums to N[y]."""
    rng = np.random.default_rng(3)
    XA, yA = draw(rng, 60)
    XA[yA == 1, 0] = np.where(np.arange(int(yA.sum())) < 2, 1, 0)  # two patients of class 1 with a = 1: small
    XA[yA == 1, 1] = np.arange(int(yA.sum())) % 3  # and b spread over its levels: nothing small there
    XB, yB = draw(rng, 200)
    trueA = count_tables(CB, XA, yA, plan_cliques(CB, "first"))
    trueB = count_tables(CB, XB, yB, plan_cliques(CB, "first"))
    relA, sup = apply_min_cell(trueA, k=3, policy="suppress", label="y", codebook=CB)
    per = {}
    for c in sup:
        per[c.table] = per.get(c.table, 0) + 1
    assert set(per) == {"N[a,y]"} and per["N[a,y]"] == 4  # the column of m = 4 cells, class 1
    S = summary_from_bundles([_bundle(relA, "A", 60, per), _bundle(trueB, "B", 200, {})])
    true = sum_tables([trueA, trueB])[0]
    Na = next(t for t in true if t.clique == ("a", "y")).counts
    lo, hi = S.count_bounds(("a", "y"))
    SA = float(yA.sum())
    hidA = next(t for t in trueA if t.clique == ("a", "y")).counts[:, 1]
    np.testing.assert_array_equal(lo[:, 1], Na[:, 1] - hidA)  # B's column: A's hidden rows not in it
    np.testing.assert_array_equal(hi[:, 1], lo[:, 1] + SA)
    np.testing.assert_array_equal(lo[:, 0], Na[:, 0])  # class 0: nothing hidden
    np.testing.assert_array_equal(hi[:, 0], Na[:, 0])
    assert np.all((lo <= Na) & (Na <= hi))
    # the point estimate: A's hidden rows spread in proportion to B's released column (issue 49; it was evenly)
    np.testing.assert_allclose(S.counts(("a", "y"))[:, 1], lo[:, 1] + SA * lo[:, 1] / lo[:, 1].sum())
    np.testing.assert_allclose(S.counts(("a", "y"))[:, 0], Na[:, 0])
    np.testing.assert_allclose(S.counts(("a", "y")).sum(axis=0), S.class_counts)
    assert S.count_bounds(("b", "y")) is None  # b's table hides nothing
    # a boost rule over the hidden column's cells: its rows may hold all of A's hidden class-1 rows or none
    test = BinaryTest("a", 0, (True, False, False, False), "a = 0", "a != 0")
    cm = monomial_moments(S, [test], (Literal(0),))
    np.testing.assert_allclose(cm.lo[:, 0] * S.n, [Na[0, 0], lo[0, 1]])
    np.testing.assert_allclose(cm.hi[:, 0] * S.n, [Na[0, 0], lo[0, 1] + SA])
    assert cm.lo[1, 0] * S.n <= Na[0, 1] <= cm.hi[1, 0] * S.n
    # leave-one-site-out summaries sum the sites' own (marked) tables: the same bounds
    rest = Summary(CB, sum_tables([ts for _, ts in S.site_parts])[0])
    np.testing.assert_array_equal(rest.count_bounds(("a", "y"))[1], hi)


def test_hidden_columns_that_do_not_add_up_are_refused():
    """A bundle whose zero columns disagree with the cells it reports suppressed, and two sites'
    tables summed before the hidden column was marked, are refused naming the table."""
    rng = np.random.default_rng(5)
    X, y = draw(rng, 100)
    tables = count_tables(CB, X, y, plan_cliques(CB, "first"))
    hidden = hide(tables, "a", 1)
    with pytest.raises(InputError, match=r"N\[a,y\] has hidden class columns that can hold 3 to 4 cells, but the "
                                         r"bundle reports 0 suppressed"):
        summary_from_bundles([_bundle(hidden, "A", 100, {})])
    with pytest.raises(InputError, match=r"N\[a,y\] has hidden class columns that can hold 0 to 0 cells, but the "
                                         r"bundle reports 4 suppressed"):
        summary_from_bundles([_bundle(tables, "A", 100, {"N[a,y]": 4})])
    X2, y2 = draw(rng, 100)
    other = count_tables(CB, X2, y2, plan_cliques(CB, "first"))
    S = Summary(CB, sum_tables([hidden, hide(other, "a", 1)])[0])  # both hid it: the sum is hidden whole
    assert S.hidden["N[a,y]"][1] == float(y.sum() + y2.sum())
    mixed = sum_tables([hidden, other])[0]  # A's hidden column summed with B's real one: neither
    bad = [MarginalTable(t.clique, t.counts, t.noise, t.kind, hidden=np.array([0.0, 1.0])) if t.clique == ("a", "y")
           else t for t in mixed]
    with pytest.raises(InputError, match=r"N\[a,y\] has hidden class columns"):
        Summary(CB, bad)


def test_the_point_estimate_of_a_hidden_column_is_the_other_sites_shape_and_the_left_out_site_is_filled_so():
    """Issue 49: a hidden cell is not 0, and not 1/m of its class either. Site A (40 patients) hides class column
    y = 1 of N[a, y]; site B (300) releases it. The point estimate spreads A's hidden rows like B's column (the
    expected count when the sites share P(a | y)): over 60 releases it is closer to the true summed counts than the
    even spread, whose cell (a=0, y=1) is far off (P(a=0 | y=1) = 0.85, not 1/4). The left-out site's rows of the
    leave-one-site-out estimate are drawn from A's tables filled the same way from the other sites (fill_from):
    each filled cell within its interval, each column summing to its class total."""
    from marg.learners.choice.cross_site import fill_hidden
    from marg.marginals.hidden import fill_from, mark_hidden

    rng = np.random.default_rng(49)
    ours = even = 0.0
    for _ in range(60):
        XA, yA = draw(rng, 40)
        XB, yB = draw(rng, 300)
        trueA = count_tables(CB, XA, yA, plan_cliques(CB, "first"))
        trueB = count_tables(CB, XB, yB, plan_cliques(CB, "first"))
        relA = mark_hidden(hide(trueA, "a", 1), "y")  # as the loader marks each site's release
        S = Summary(CB, sum_tables([relA, trueB])[0], site_parts=[("A", relA), ("B", trueB)])
        Na = next(t for t in sum_tables([trueA, trueB])[0] if t.clique == ("a", "y")).counts[:, 1]
        lo, hi = S.count_bounds(("a", "y"))
        got = S.counts(("a", "y"))[:, 1]
        assert np.all((lo[:, 1] - 1e-9 <= got) & (got <= hi[:, 1] + 1e-9))
        ours += float(np.abs(got - Na).sum())
        even += float(np.abs(lo[:, 1] + (hi[:, 1] - lo[:, 1]) / 4 - Na).sum())
        # the left-out site A, filled from B's shape
        B = Summary(CB, list(trueB))
        filledA = fill_hidden(S.site_parts[0][1], B)
        colA = next(t for t in filledA if t.clique == ("a", "y"))
        assert colA.hidden is None and colA.counts[:, 1].sum() == pytest.approx(float(yA.sum()))
        Bcol = B.counts(("a", "y"))[:, 1]
        np.testing.assert_allclose(colA.counts[:, 1], yA.sum() * Bcol / Bcol.sum())
        # no reference (None): evenly, as the release alone says
        alone = next(t for t in fill_from(S.site_parts[0][1], lambda c: None) if t.clique == ("a", "y"))
        np.testing.assert_allclose(alone.counts[:, 1], np.full(4, yA.sum() / 4))
    assert ours < 0.5 * even, (ours, even)


def test_the_minimax_lp_takes_a_hidden_cell_as_an_interval_against_the_joint_oracle():
    """DESIGN.md's oracle (enumerate the joint: max Σ_x (Σ_y p(x, y) − t_x), t_x ≥ p(x, y)) on a release whose class
    column y = 1 of N[a, y] is hidden. With λ = 0 elsewhere (s = 0), the MRC's R* equals the oracle over the box it
    recorded; that box holds every count the release leaves possible on the hidden cells ([lo, hi], not the point
    estimate), so R* is at least the oracle with the interval as the constraint — which is above the oracle that reads
    X."""
    from tests.helpers.quantities import tau_of
    from tests.helpers.joint_oracle import brute_force_R

    rng = np.random.default_rng(44)
    cb = Codebook(features=(CategoricalFeature("a", ("0", "1", "2")), CategoricalFeature("b", ("0", "1"))),
                  label=Label("y", ("0", "1")))
    checked = wider = 0
    for _ in range(6):
        p = rng.dirichlet(np.full(12, 0.8)).reshape(3, 2, 2)
        cells = rng.multinomial(200, p.ravel()).reshape(3, 2, 2)
        X = np.array([(a, b) for a in range(3) for b in range(2) for v in range(2) for _ in range(cells[a, b, v])],
                     dtype=np.float64)
        y = np.array([v for a in range(3) for b in range(2) for v in range(2) for _ in range(cells[a, b, v])])
        if min(np.bincount(y, minlength=2)) == 0:
            continue
        S = Summary(cb, hide(count_tables(cb, X, y, plan_cliques(cb, "first")), "a", 1))
        m = MRC(s=0.0, eps=0.0, n_max=1, k_max=100).fit(S)
        mom = map_moments(S, m.map_)
        tau = tau_of(S)
        np.testing.assert_allclose(tau, mom.tau, atol=1e-12)
        assert abs(m.minimax_risk_.value - brute_force_R(S, tau, m.lambda_)) <= 1e-6
        hid = mom.hi > mom.lo + 1e-12
        assert hid.sum() == 3  # the three cells of the hidden column
        assert np.all(tau - m.lambda_ <= mom.lo + 1e-12) and np.all(tau + m.lambda_ >= mom.hi - 1e-12)
        interval = brute_force_R(S, (mom.lo + mom.hi) / 2, (mom.hi - mom.lo) / 2)
        point = brute_force_R(S, tau, np.zeros_like(tau))
        assert m.minimax_risk_.value >= interval - 1e-7 and interval >= point - 1e-9
        wider += interval > point + 1e-6
        checked += 1
    assert checked >= 4 and wider >= 1  # the interval changes the worst case (2 of these 6), not only the bookkeeping


def test_a_table_whose_cells_are_all_hidden_is_read_as_unmeasured():
    """Every class column of N[a, y] hidden (at the only site): the release says nothing about a beyond the class
    totals. Naive Bayes predicts exactly as naive Bayes without a (its factors for a are the same for every class).
    A minimax learner given a widens its box for nothing (more entries share the coverage: R* 0.4175 against 0.4043
    here), so the automatic choice leaves such a feature out (``unmeasured_``) and its every candidate is the one
    fitted without it."""
    from itertools import product

    from marg.learners.auto import AutoLearner

    rng = np.random.default_rng(8)
    X, y = draw(rng, 300)
    tables = count_tables(CB, X, y, plan_cliques(CB, "first"))
    S = Summary(CB, hide(hide(tables, "a", 0), "a", 1))
    assert S.hidden["N[a,y]"] == np.bincount(y, minlength=2).astype(float).tolist() and S.unmeasured == ["a"]
    assert Summary(CB, hide(tables, "a", 1)).unmeasured == []  # one class column released: a is measured
    grid = np.array(list(product(range(4), range(3))), dtype=np.float64)
    np.testing.assert_array_equal(NaiveBayes().fit(S).predict(grid), NaiveBayes(features=["b"]).fit(S).predict(grid))
    full, without = MRC().fit(S), MRC(features=["b"]).fit(S)
    assert full.minimax_risk_.value > without.minimax_risk_.value + 1e-3
    auto = AutoLearner(candidates=[("mrc", {}), ("nb", {})]).fit(S)
    assert auto.unmeasured_ == ["a"] and auto.choice_report()["auto_unmeasured"] == ["a"]
    for fitted in auto.fitted_:  # the label-only rule reads no feature
        assert fitted is not None and (fitted.learner == "prior" or fitted.features == ["b"])
    mrc = next(f for f in auto.fitted_ if f.learner == "mrc")
    assert mrc.minimax_risk_.value == pytest.approx(MRC(features=["b"],
                                                        coverage=mrc.coverage).fit(S).minimax_risk_.value,
                                                    abs=1e-9)
