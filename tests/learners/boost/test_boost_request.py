"""Longer rules through the request protocol (``marg request --learner boost``).

A label that is a conjunction of three features (3% of labels flipped) cannot be voted from
pairs; the order-3 table of those three features can. Checked:

- the bound B of :mod:`marg.learners.boost.request` is at or above the true violation of every
  order-3 monomial (τ read from the table the request did not yet have), for every clique;
- the request ranks the conjunction's clique first; with that table released the vote finds the
  order-3 rule, beats the pairs-only vote by the conjunction's share of errors, and its
  certificate equals R(μ) recomputed by enumerating the whole domain;
- request files of version 2 round-trip; version-1 files still read; bad ones are refused;
- the whole flow through the installed ``marg`` (two sites, exact): export, request, export
  the requested table, learn at order 3, predict.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from marg.errors import InputError
from marg.learners.boost.request import _BoundContext, _literal_matrices, rank_cliques
from marg.learners.boost.vote import BoostVote
from marg.learners.minimax.problem import label_subsets
from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label
from marg.marginals.request import read_request, write_request
from marg.marginals.summary import Summary
from marg.marginals.counts.tables import parse_pairs
from tests.helpers.console import marg

P = 6


def conjunction(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    cb = Codebook(tuple(CategoricalFeature(f"x{i}", ("no", "yes")) for i in range(P)), Label("y", ("neg", "pos")))
    X = rng.integers(0, 2, size=(n, P))
    y = (X[:, 0] & X[:, 1] & X[:, 2]).astype(np.int64)
    y = np.where(rng.random(n) < 0.03, 1 - y, y)
    return cb, X, y


def pairs_and(cb, extra=()):
    return list(itertools.combinations(cb.feature_names, 2)) + list(extra)


def test_bound_is_above_every_true_violation():
    cb, X, y = conjunction(seed=1)
    S2 = Summary.from_rows(cb, X, y, stats="all")
    S3 = Summary.from_rows(cb, X, y, stats="pairs", pairs=pairs_and(cb, itertools.combinations(cb.feature_names, 3)))
    est = BoostVote(s=0.0, max_order=3)
    src, mm, _ = est._solve(S2)
    _, _, _, duals = mm.solve_rows(None, [], [])
    tests = src.fmap.tests
    mats = {f: _literal_matrices(tests, f, 2) for f in cb.feature_names}
    price = float(src.order_cost[3])
    ctx = _BoundContext(S2, mm, duals, mats, price)
    truth = _BoundContext(S3, mm, duals, mats, price)
    checked = 0
    for Q in itertools.combinations(cb.feature_names, 3):
        for c in range(2):
            B, E = ctx.bounds(Q, c)
            tau = truth.tau_literals(Q)[..., c]  # the order-3 table the request would bring
            viol = np.abs(E - tau) - price
            assert np.all(viol <= B + 1e-12), Q
            checked += viol.size
    assert checked == 20 * 2 * 2 ** 3  # every clique, class and literal choice (one test, two literals, per feature)


def test_request_finds_the_conjunction_and_the_order3_vote_certifies():
    cb, X, y = conjunction()
    S2 = Summary.from_rows(cb, X, y, stats="all")
    ranked = rank_cliques(BoostVote(s=0.0, max_order=3), S2)
    assert ranked[0].clique == ("x0", "x1", "x2")
    assert all(ranked[i].bound >= ranked[i + 1].bound for i in range(len(ranked) - 1))
    acc2 = np.mean(BoostVote(s=0.0).fit(S2).predict(X) == y)
    S3 = Summary.from_rows(cb, X, y, stats="pairs", pairs=pairs_and(cb, [ranked[0].clique]))
    est = BoostVote(s=0.0, max_order=3).fit(S3)
    acc3 = np.mean(est.predict(X) == y)
    assert acc3 >= 1.0 - np.mean((X[:, 0] & X[:, 1] & X[:, 2]) != y) - 1e-12  # every flipped label and no other error
    assert acc3 > acc2 + 0.08
    assert any(r["order"] == 3 for r in est.rules())
    full = np.array(list(itertools.product(range(2), repeat=P)), dtype=float)
    F = est.decision_function(full)
    phi = max((F[:, list(C)].sum(axis=1).max() - 1.0) / len(C) for C in label_subsets(2))
    R = 1.0 - np.sum(est.tau_ * est.mu_) + np.sum(est.lambda_ * np.abs(est.mu_)) + phi
    assert est.minimax_risk_.value == pytest.approx(R, abs=1e-9)


def test_request_refusals():
    cb, X, y = conjunction(n=400)
    with pytest.raises(InputError, match="pair tables first"):
        rank_cliques(BoostVote(s=0.0, max_order=3), Summary.from_rows(cb, X, y, stats="first"))
    S3 = Summary.from_rows(cb, X, y, stats="pairs", pairs=pairs_and(cb, itertools.combinations(cb.feature_names, 3)))
    with pytest.raises(InputError, match="already released"):
        rank_cliques(BoostVote(s=0.0, max_order=3), S3)
    with pytest.raises(InputError, match="max_order"):
        rank_cliques(BoostVote(s=0.0, max_order=6), S3)


def test_request_files_v2_round_trip_and_v1_still_reads(tmp_path):
    cb, _, _ = conjunction(n=10)
    fp = cb.fingerprint
    path = write_request(tmp_path / "r.json", fp, [("x0", "x1", "x2"), ("x1", "x3")])
    d = json.loads(path.read_text())
    assert d["version"] == 2
    back = read_request(path, fingerprint=fp)
    assert back.pairs == (("x0", "x1", "x2"), ("x1", "x3"))
    assert parse_pairs(cb, back.spec) == [("x0", "x1", "x2"), ("x1", "x3")]
    v1 = write_request(tmp_path / "v1.json", fp, [("x0", "x1")])
    assert json.loads(v1.read_text())["version"] == 1 and read_request(v1).pairs == (("x0", "x1"),)
    bad = dict(d, version=1)  # a triple in a version-1 file
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(InputError, match="bad pair"):
        read_request(tmp_path / "bad.json")
    (tmp_path / "v9.json").write_text(json.dumps(dict(d, version=9)))
    with pytest.raises(InputError, match="unknown version 9"):
        read_request(tmp_path / "v9.json")
    with pytest.raises(InputError, match="bad pair"):
        parse_pairs(cb, "x0:x1:x2:x3:x4:x5")
    with pytest.raises(InputError, match="itself"):
        parse_pairs(cb, "x0:x1:x0")


def test_higher_order_round_through_the_console_script(tmp_path):
    cb, X, y = conjunction(n=2400, seed=3)
    schema = tmp_path / "codebook.json"
    cb.save(schema)
    sites = {}
    for k, name in enumerate(("north", "south")):
        rows = slice(k * 1200, (k + 1) * 1200)
        f = tmp_path / f"{name}.csv"
        lines = [",".join([*cb.feature_names, "y"])]
        for xr, yr in zip(X[rows], y[rows]):
            lines.append(",".join([*("yes" if v else "no" for v in xr), ("neg", "pos")[yr]]))
        f.write_text("\n".join(lines) + "\n")
        sites[name] = f
    r1, r2 = [], []
    for name, f in sites.items():
        out = tmp_path / f"{name}-r1.bundle"
        p = marg("export", f, "--schema", schema, "--site", name, "--out", out, "--stats", "all", "--min-cell", "1",
                 "--ledger", tmp_path / f"{name}-ledger", cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        r1.append(out)
    req = tmp_path / "req.json"
    p = marg("request", *r1, "--learner", "boost", "--s", "0", "--max-order", "3", "--max-tables", "2", "--out", req,
             "--allow-unsigned", "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    answer = json.loads(p.stdout)
    assert answer["tables"][0]["features"] == ["x0", "x1", "x2"] and len(answer["tables"]) == 2
    assert answer["qualified"] >= 2
    for name, f in sites.items():
        out = tmp_path / f"{name}-r2.bundle"
        p = marg("export", f, "--schema", schema, "--site", name, "--out", out, "--pairs", f"@{req}", "--min-cell", "1",
                 "--allow-unsigned", "--ledger", tmp_path / f"{name}-ledger", cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        r2.append(out)
    model = tmp_path / "boost3.json"
    p = marg("learn", *r1, *r2, "--learner", "boost", "--max-order", "3", "--s", "0", "--out", model,
             "--allow-unsigned", "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    assert any(r["order"] == 3 and r["rule"] == "x0 = yes AND x1 = yes AND x2 = yes" for r in rep["monomials"])
    p = marg("evaluate", model, sites["north"], "--allow-unsigned", "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    truth = (X[:1200, 0] & X[:1200, 1] & X[:1200, 2]) != y[:1200]
    assert json.loads(p.stdout)["error"] <= float(np.mean(truth)) + 1e-9
    # refusals: --top with --learner boost; an unknown learner; order out of range
    for extra, msg in ((["--top", "3"], "--top screens"), (["--learner", "mrc"], "takes boost"),
                       (["--max-order", "7"], "max_order")):
        args = [a for a in extra] + ([] if "--learner" in extra else ["--learner", "boost"])
        p = marg("request", *r1, *args, "--out", tmp_path / "x.json", "--allow-unsigned", cwd=tmp_path)
        assert p.returncode != 0 and msg in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert not (tmp_path / "x.json").exists()
