"""The box a certificate was computed over, as ``marg inspect MODEL --json`` prints it
(``certificate.box``), recomputes the certificate: an independent LP over every distribution
on the codebook's whole domain whose table cells lie in the printed bounds, maximising the
model's own error (scipy's HiGHS, no marg code in the LP)."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from scipy.optimize import linprog

from marg.learners.classifiers.dcc import DCC
from marg.learners.estimator.model import Model
from marg.learners.classifiers.mrc import MRC
from marg.learners.classifiers.naive_bayes import NaiveBayes
from marg.learners.classifiers.renyi import RenyiClassifier
from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label
from marg.marginals.summary import Summary
from tests.helpers.console import marg


def _problem(seed: int = 3, n: int = 400):
    """Three ternary features (one with a missing level), a binary label, n rows of a known population."""
    cb = Codebook(features=(CategoricalFeature("a", ("p", "q", "r")), CategoricalFeature("b", ("u", "v", "w")),
                            CategoricalFeature("c", ("lo", "hi", "unknown"), missing="unknown")),
                  label=Label("y", ("no", "yes")))
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(54, 0.7)).reshape(3, 3, 3, 2)
    cells = rng.choice(p.size, size=n, p=p.ravel())
    a, b, c, y = np.unravel_index(cells, p.shape)
    return cb, Summary.from_rows(cb, np.column_stack([a, b, c]).astype(float), y, stats="all")


def _printed_box(model, tmp_path) -> tuple[dict, list[dict]]:
    path = tmp_path / f"{model.learner}.json"
    model.save(path)
    r = marg("inspect", path, "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    cert = json.loads(r.stdout)["certificate"]
    return cert, cert["box"]


def _lp_worst_case(cb: Codebook, box: list[dict], loss: np.ndarray) -> float:
    """max Σ p(x, y)·loss(x, y) over distributions p on the domain with every printed cell in its bounds.

    ``loss`` (D, K) over the domain points in C order of the features; cells are read in C order
    over each record's ``features`` (the label last), levels as the codebook lists them."""
    names = [f.name for f in cb.features]
    sizes = [f.n_levels for f in cb.features]
    K = len(cb.label.classes)
    pts = np.array(list(itertools.product(*[range(m) for m in sizes])))  # (D, p)
    rows, lo, hi = [], [], []
    for rec in box:
        assert rec["features"][-1] == cb.label.name  # the label's name last
        feats = rec["features"][:-1]
        cols = [names.index(f) for f in feats]
        if "cells" in rec:  # a monomial: Σ over its cells of p(cell, y = k) within [lower_k, upper_k]
            mask = np.array(rec["cells"], dtype=bool).reshape([sizes[c] for c in cols])
            hit = mask[tuple(pts[:, cols].T)] if cols else np.ones(len(pts), dtype=bool)
            for k in range(K):
                row = np.zeros((len(pts), K))
                row[hit, k] = 1.0
                rows.append(row.ravel())
                lo.append(rec["lower"][k])
                hi.append(rec["upper"][k])
            continue
        shape = [sizes[names.index(f)] for f in feats] + [K]
        assert len(rec["lower"]) == len(rec["upper"]) == int(np.prod(shape))
        for flat in range(int(np.prod(shape))):
            idx = np.unravel_index(flat, shape)
            hit = np.all(pts[:, cols] == np.array(idx[:-1]), axis=1)
            row = np.zeros((len(pts), K))
            row[hit, idx[-1]] = 1.0
            rows.append(row.ravel())
            lo.append(rec["lower"][flat])
            hi.append(rec["upper"][flat])
    A = np.array(rows)
    res = linprog(-loss.ravel(), A_ub=np.vstack([A, -A]), b_ub=np.concatenate([hi, -np.array(lo)]),
                  A_eq=np.ones((1, A.shape[1])), b_eq=[1.0], bounds=(0, None), method="highs")
    assert res.status == 0, res.message
    return float(-res.fun)


def _domain(cb: Codebook) -> np.ndarray:
    return np.array(list(itertools.product(*[range(f.n_levels) for f in cb.features])), dtype=float)


def _deterministic_loss(est, X: np.ndarray, K: int) -> np.ndarray:
    return (est.predict(X)[:, None] != np.arange(K)[None, :]).astype(float)


def _randomized_loss(est, X: np.ndarray) -> np.ndarray:
    return 1.0 - est.predict_proba(X)


def test_mrc_certificate_recomputed_from_the_printed_box(tmp_path):
    """First-order MRC: the printed certificate = W(h), the worst case over the printed box of the labels
    ``predict`` writes (tie-break included); R* (``minimax_risk``) = its randomized rule's worst case over
    the same box; cells in the codebook's level order, missing last."""
    cb, S = _problem()
    est = MRC(solver="full").fit(S)
    cert, box = _printed_box(Model("mrc", cb, est), tmp_path)
    assert [r["features"] for r in box] == [["a", "y"], ["b", "y"], ["c", "y"]]
    assert cert["value"] == est.certificate_.value and cert["kind"] == "W(h)" and cert["approximate"] is False
    # the printed cells are τ ± λ of the fitted map, in joint-probability units (table (c, y), C order)
    t = S.joint(("c", "y")).ravel()
    assert np.all(np.array(box[2]["lower"]) <= t) and np.all(t <= np.array(box[2]["upper"]))
    X = _domain(cb)
    assert _lp_worst_case(cb, box, _deterministic_loss(est, X, 2)) == pytest.approx(est.certificate_.value, abs=1e-6)
    assert _lp_worst_case(cb, box, _randomized_loss(est, X)) == pytest.approx(est.minimax_risk_.value, abs=1e-6)
    assert est.minimax_risk_.kind == "R*" and est.minimax_risk_.value <= est.certificate_.value + 1e-9


def test_naive_bayes_w_h_recomputed_from_the_printed_box(tmp_path):
    """W(h) of naive Bayes' deterministic rule (exact row generation) = the LP over the printed first-order box."""
    cb, S = _problem(seed=5)
    est = NaiveBayes().fit(S)
    assert est.certificate_converged_
    cert, box = _printed_box(Model("nb", cb, est), tmp_path)
    assert cert["kind"] == "W(h)" and len(box) == 3
    X = _domain(cb)
    assert _lp_worst_case(cb, box, _deterministic_loss(est, X, 2)) == pytest.approx(est.certificate_.value, abs=1e-6)


def test_renyi_and_dcc_certificates_bound_the_lp_over_their_printed_pair_boxes(tmp_path):
    """Rényi (W(h) over first-order cells and a forest's pairs, by row generation) and DCC (W(h) of its
    labels over its forest's box, R* of its randomized rule apart): the printed box holds the pair tables
    and the LP over it gives the certificate."""
    cb, S = _problem(seed=7, n=600)
    X = _domain(cb)
    assert RenyiClassifier().fit(S).certificate_.value >= RenyiClassifier(certify="exact").fit(S).certificate_.value
    ren = RenyiClassifier(certify="exact").fit(S)
    cert, box = _printed_box(Model("renyi", cb, ren), tmp_path)
    assert cert["kind"] == "W(h)" and any(len(r["features"]) == 3 for r in box)
    assert _lp_worst_case(cb, box, _deterministic_loss(ren, X, 2)) == pytest.approx(ren.certificate_.value, abs=1e-6)
    dcc = DCC().fit(S)
    cert, box = _printed_box(Model("dcc", cb, dcc), tmp_path)
    assert [r["features"][:-1] for r in box if len(r["features"]) == 3] == [list(e) for e in dcc.edges_]
    assert cert["kind"] == "W(h)"
    assert _lp_worst_case(cb, box, _deterministic_loss(dcc, X, 2)) == pytest.approx(dcc.certificate_.value, abs=1e-6)
    assert _lp_worst_case(cb, box, _randomized_loss(dcc, X)) == pytest.approx(dcc.minimax_risk_.value, abs=1e-6)


def test_boost_certificate_recomputed_from_its_printed_monomial_box(tmp_path):
    """Boost's vote: one record per monomial of the vote (its rule, its cells, K bounds widened by
    the rule's code-length price); the LP over them gives the vote's W(h) (its labels) and its R*
    (its randomized rule)."""
    from marg.learners.boost.vote import BoostVote

    cb, S = _problem(seed=9, n=600)
    est = BoostVote().fit(S)
    assert est.converged_
    cert, box = _printed_box(Model("boost", cb, est), tmp_path)
    assert [r["rule"] for r in box] == [est.map_.describe(u) for u in range(est.map_.dim)]
    X = _domain(cb)
    assert _lp_worst_case(cb, box, _deterministic_loss(est, X, 2)) == pytest.approx(est.certificate_.value, abs=1e-6)
    assert _lp_worst_case(cb, box, _randomized_loss(est, X)) == pytest.approx(est.minimax_risk_.value, abs=1e-6)


def test_a_raw_numeric_feature_is_recorded_as_its_sum_and_flags_the_normal_interval():
    """A raw numeric feature's entry E[x·1{y = k}] has only the normal interval z·std/√n (an
    approximation: ``approximate`` is true, and only then); its record says ``"statistic": "sum"``
    and holds τ ± λ of that entry, unclipped."""
    from marg.marginals.data.codebook import NumericFeature

    cb = Codebook(features=(CategoricalFeature("a", ("p", "q")), NumericFeature("x", lo=-2.0, hi=3.0)),
                  label=Label("y", ("no", "yes")))
    rng = np.random.default_rng(2)
    y = rng.integers(0, 2, 300)
    X = np.column_stack([rng.integers(0, 2, 300), np.clip(rng.normal(y - 0.5, 1.0), -2, 3)])
    S = Summary.from_rows(cb, X, y)
    est = MRC().fit(S)
    assert est.certificate_.approximate
    rec = {tuple(r["features"]): r for r in est.certificate_.box}
    num = rec[("x", "y")]
    j = est.map_.blocks[1].offset
    assert num["statistic"] == "sum" and "statistic" not in rec[("a", "y")]
    assert np.allclose(num["lower"], est.tau_[:, j] - est.lambda_[:, j])
    assert np.allclose(num["upper"], est.tau_[:, j] + est.lambda_[:, j])
    assert not MRC(features=["a"]).fit(S).certificate_.approximate
