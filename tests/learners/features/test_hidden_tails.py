"""A hidden tail (min-cell suppression of a class column's last levels, issue 49) as what it is.

Suppression hides the last ``j`` levels of a class column (:func:`marg.marginals.suppression.hidden_tail`); each
tail cell lies in ``[0, C]``, the tail summing to ``C`` (the class total less the released head). Checked here:

- the minimax box of a fixed rule over a tail is the hull of its fillings: W(h) equals the largest brute-force worst
  case over every integer filling of the tail's cells read as real counts (the head stays a point);
- the summed bounds and the point estimate against their definitions, computed by hand from three sites: one
  hiding a tail, one releasing the column whole, one hiding a longer tail (no shape for the others);
- by simulation, three sites of a population whose rare levels lie anywhere in the tail: the MRC's R* and naive
  Bayes's W(h) cover the population's error at their stated coverage, and the box holds every hidden entry;
- the release keeps what the whole-column rule threw away: on the same populations naive Bayes errs less.
"""

from __future__ import annotations

import itertools

import numpy as np
from scipy.stats import binom

from marg.learners.features.calibration import confidence_box
from marg.learners.certification.certify import certify, uncertainty_map
from marg.learners.features.statistics import map_moments
from marg.learners.minimax.fixed_rule_fit import certify_rule
from marg.learners.classifiers.mrc import MRC
from marg.learners.classifiers.naive_bayes import NaiveBayes
from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label
from marg.marginals.counts.counting import count_tables
from marg.marginals.disclosure import apply_min_cell
from marg.marginals.hidden import mark_hidden
from marg.marginals.summary import Summary, sum_tables
from marg.marginals.counts.tables import HiddenTail, MarginalTable, plan_cliques

from tests.helpers.box_oracle import worst_over_fillings

M = 5
CB = Codebook(features=(CategoricalFeature("a", tuple(str(v) for v in range(M))), CategoricalFeature("b", ("0", "1"))),
              label=Label("y", ("0", "1")))
GRID = np.array(list(itertools.product(range(M), range(2))), dtype=np.float64)


def rows(cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Data with ``cells[a, b, y]`` patients per cell."""
    idx = list(itertools.product(range(M), range(2), range(2)))
    X = np.array([(a, b) for a, b, v in idx for _ in range(cells[a, b, v])], dtype=np.float64)
    y = np.array([v for a, b, v in idx for _ in range(cells[a, b, v])])
    return X, y


def site(X: np.ndarray, y: np.ndarray, k: int) -> list[MarginalTable]:
    """One site's first-order release under min-cell suppression, its hidden tails marked (as the loader does)."""
    rel, _ = apply_min_cell(count_tables(CB, X, y, plan_cliques(CB, "first")), k=k, policy="suppress", label="y",
                            codebook=CB)
    return mark_hidden(rel, "y")


def test_the_box_of_a_hidden_tail_is_the_hull_of_its_fillings_against_the_brute_force_lp():
    """λ = 0 outside the hidden cells (s = 0): naive Bayes's W(h) over the box equals the largest brute-force worst
    case over every filling of the tail (all compositions of its sum over its three levels), each read as a real
    count, with the head's released cells fixed; the released head is a point (its box entries are τ)."""
    rng = np.random.default_rng(491)
    checked = 0
    while checked < 6:
        cells = np.zeros((M, 2, 2), dtype=np.int64)
        cells[:, :, 0] = rng.integers(3, 12, size=(M, 2))  # class 0: no small cell
        cells[:2, :, 1] = rng.integers(3, 12, size=(2, 2))  # class 1's head: large cells
        cells[2:, int(rng.integers(2)), 1] = last = rng.integers(0, 5, size=3)  # its last three levels: few
        if last.sum() < 3 or not np.any((last > 0) & (last < 3)):
            continue  # the tail of three levels holds a small cell and sums to k or more
        X, y = rows(cells)
        S = Summary(CB, site(X, y, k=3))
        if "N[a,y]" not in S.hidden:
            continue
        tail = S.hidden_tails(("a", "y"))
        assert len(tail) == 1 and tail[0].cls == 1 and tail[0].start == 2  # j = 3: the head has no small cell
        C = int(tail[0].rows)
        umap = uncertainty_map(S, "first")
        m = map_moments(S, umap)
        lam = confidence_box(m, umap.indicator_columns(), s=0.0).lam
        assert np.all(lam[1, :2] <= 1e-12) and np.all(lam[1, 2:M] > 0)  # head: a point; tail: an interval
        rule = NaiveBayes().fit(S).linear_rule()
        h = rule.predict(GRID)
        ours = certify_rule(rule, umap, m.tau, lam).value
        best = worst_over_fillings(umap, GRID, h, m.tau, S.n, 1, slice(2, M), C)
        assert abs(ours - best) <= 1e-6, (ours, best)
        checked += 1


def test_summed_bounds_and_point_estimate_against_their_definitions():
    """Three sites' N[a, y] (a of 5 levels): A hides class 1's last three levels (7 rows), B releases its column
    whole, C hides class 1's last four levels (5 rows). Bounds: each cell of class 1 in [released, released + the rows
    of every tail covering its level]. Point: A's and C's rows spread over their tails like B's column (C's partly
    released column is no shape: its levels 1–4 read 0 there), so every column sums to its class total; naive Bayes's
    p(a | y) is that point estimate's."""
    col0 = np.array([[10, 5, 4, 6, 5]] * 3, dtype=np.float64)
    A = np.array([8, 6, 0, 0, 0.0])
    B = np.array([9, 4, 6, 2, 3.0])
    C = np.array([12, 0, 0, 0, 0.0])
    tot1 = np.array([A.sum() + 7, B.sum(), C.sum() + 5])
    parts = []
    for s, (col, t1) in enumerate(zip((A, B, C), tot1)):
        ay = MarginalTable(("a", "y"), np.column_stack([col0[s], col]))
        by = MarginalTable(("b", "y"), np.array([[col0[s].sum(), t1], [0.0, 0.0]]))
        parts.append(mark_hidden([MarginalTable(("y",), np.array([col0[s].sum(), t1])), ay, by], "y"))
    S = Summary(CB, sum_tables(parts)[0])
    lo, hi = S.count_bounds(("a", "y"))
    released = A + B + C
    assert np.array_equal(lo[:, 1], released) and np.array_equal(lo[:, 0], col0.sum(axis=0))
    assert np.array_equal(hi[:, 1], released + np.array([0, 5, 12, 12, 12])) and np.array_equal(hi[:, 0], lo[:, 0])
    shape = B / B.sum()
    want = released.copy()
    want[2:] += 7 * B[2:] / B[2:].sum()
    want[1:] += 5 * B[1:] / B[1:].sum()
    got = S.counts(("a", "y"))[:, 1]
    assert (np.allclose(got, want) and abs(got.sum() - tot1.sum()) < 1e-9
            and np.all((lo[:, 1] <= got) & (got <= hi[:, 1])))
    assert shape.sum() == 1.0  # the reference is B's column alone (C's head would pile C's 5 rows onto level 0)
    lo_a, hi_a = S.count_bounds(("a",))
    assert np.array_equal(hi_a - lo_a, np.array([0, 5, 12, 12, 12]))
    nb = NaiveBayes().fit(S)  # naive Bayes reads that expected count (its smoothing α), not the released zeros
    a = float(nb.alpha)
    assert np.allclose(nb.weights_[1, :M], np.log((want + a) / (want.sum() + a * M)))


RELEASES = 100
NEEDED = int(binom.ppf(0.01, RELEASES, 0.95))  # fewer covered releases: coverage < 95 % at the 1 % level


def _population(rng):
    """P(a, b, y): class 1 rare on a random two of a's last three levels (0.01 each), the rest on the others."""
    pa1 = rng.dirichlet(np.full(M, 2.0))
    rare = 2 + rng.choice(3, size=2, replace=False)
    pa1[rare] = 0.0
    pa1 = 0.98 * pa1 / pa1.sum()
    pa1[rare] = 0.01
    pa = np.vstack([rng.dirichlet(np.full(M, 3.0)), pa1])
    pb = np.vstack([rng.dirichlet(np.full(2, 3.0)), rng.dirichlet(np.full(2, 3.0))])
    py = np.array([0.6, 0.4])
    return py[None, None, :] * pa.T[:, None, :] * pb.T[None, :, :]


def test_the_certificates_cover_populations_whose_tail_cells_lie_anywhere_in_their_interval():
    """100 populations, three sites of 80 / 120 / 200 patients each (k = 3): class 1's rare levels sit anywhere in
    a's tail. The MRC's R* and naive Bayes's W(h) cover the population's error in ≥ 95 % of the studies (1 % level),
    and the box holds the true P(a, y = 1) of every entry in ≥ 95 % of the studies that hid a tail."""
    rng = np.random.default_rng(4950)
    hits = {"mrc": 0, "nb": 0}
    tails = box_hits = 0
    for _ in range(RELEASES):
        P = _population(rng)
        parts = [site(*rows(rng.multinomial(n, P.ravel()).reshape(M, 2, 2)), k=3) for n in (80, 120, 200)]
        S = Summary(CB, sum_tables(parts)[0])
        mrc = MRC().fit(S)
        probs = mrc.predict_proba(GRID).reshape(M, 2, 2)
        hits["mrc"] += float(np.sum(P * (1.0 - probs))) <= mrc.minimax_risk_.value + 1e-9
        nb = NaiveBayes().fit(S)
        wrong = nb.predict(GRID).reshape(M, 2)[:, :, None] != np.arange(2)[None, None, :]
        hits["nb"] += float(np.sum(P * wrong)) <= certify(nb, S, structure="first").value + 1e-9
        if any(0 < p.start for p in S.hidden_tails(("a", "y"))):
            tails += 1
            umap = uncertainty_map(S, "first")
            m = map_moments(S, umap)
            lam = confidence_box(m, umap.indicator_columns()).lam[1, :M]
            box_hits += bool(np.all(np.abs(m.tau[1, :M] - P.sum(axis=1)[:, 1]) <= lam + 1e-12))
    assert tails >= RELEASES // 2, tails
    assert min(hits.values()) >= NEEDED, (hits, NEEDED)
    assert box_hits >= int(binom.ppf(0.01, tails, 0.95)), (box_hits, tails)


def test_the_tail_keeps_what_the_whole_column_threw_away():
    """The same kind of populations (class 1 rare at the end of a, classes far apart on a's head), three sites:
    naive Bayes on the tail release errs less on the population than on the same tables with every column that
    held a small cell hidden whole (the former rule), summed over 30 studies."""
    rng = np.random.default_rng(4951)
    tail_err = whole_err = 0.0
    for _ in range(30):
        P = _population(rng)
        parts, whole = [], []
        for n in (60, 90, 150):
            X, y = rows(rng.multinomial(n, P.ravel()).reshape(M, 2, 2))
            true = count_tables(CB, X, y, plan_cliques(CB, "first"))
            mine = site(X, y, k=3)
            parts.append(mine)
            old = []
            for t, r in zip(true, mine):
                if r.hidden is not None:  # the former rule: the column of each tail, hidden whole
                    c = np.array(t.counts, dtype=np.float64)
                    gone = [p.cls for p in r.hidden_tails]
                    c[:, gone] = 0
                    r = MarginalTable(t.clique, c, hidden=np.where(np.isin(np.arange(2), gone), t.counts.sum(0), 0.0),
                                      hidden_tails=tuple(HiddenTail(v, 0, float(t.counts[:, v].sum()),
                                                                    (0.0,) * c.shape[0])
                                                         for v in gone))
                old.append(r)
            whole.append(old)
        for release, acc in ((parts, "tail"), (whole, "whole")):
            nb = NaiveBayes().fit(Summary(CB, sum_tables(release)[0]))
            wrong = nb.predict(GRID).reshape(M, 2)[:, :, None] != np.arange(2)[None, None, :]
            if acc == "tail":
                tail_err += float(np.sum(P * wrong))
            else:
                whole_err += float(np.sum(P * wrong))
    assert tail_err < whole_err, (tail_err, whole_err)
