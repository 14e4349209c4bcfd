"""Column generation for the MRC (seed 000, Algorithms 1-2) on problems with many features.

Checks: CG and the full LP reach the same R* at ε = 0 (so the split pricing of features
outside the model is exact); R^k never increases (Theorem 2); R* ≤ R^k ≤ R* + ε‖μ*‖₁
(Theorem 3); dual feasibility at the end; the pricing bounds; a real gene-expression set.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from marg.learners.features.calibration import confidence_box
from marg.learners.features.statistics import Moments
from marg.learners.features.blocks import FeatureMap
from marg.learners.classifiers.mrc import MRC
from tests.helpers.first_order_fit import solve_cg, solve_full
from marg.learners.minimax.problem import MinimaxProblem
from marg.learners.minimax.pricing import SplitPricer
from marg.learners.minimax.problem import label_subsets
from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label
from marg.marginals.summary import Summary


class _B:
    def __init__(self, name, kind, size, lo=0.0, hi=1.0):
        self.name, self.kind, self.size, self.lo, self.hi = name, kind, size, lo, hi


def _lam(sd, n, s):
    """λ = s·sd/√n of an exact release with raw entries (the calibration's override)."""
    return confidence_box(Moments(np.zeros_like(sd), sd, np.zeros_like(sd), n), np.zeros(sd.shape[1], bool), s=s).lam


def random_highdim(rng, p, K, n, levels=(2, 3), informative=6, numeric=0):
    """Rows from a model where a few features depend on y; returns (fmap, tau, tau_std)."""
    y = rng.integers(0, K, n)
    m = rng.choice(levels, size=p)
    cols = []
    for j in range(p):
        x = rng.integers(0, m[j], n)
        if j < informative:
            flip = rng.random(n) < rng.uniform(0.2, 0.7)
            x[flip] = (y[flip] + j) % m[j]
        cols.append(x)
    blocks = [_B(f"f{j}", "onehot", int(m[j])) for j in range(p)]
    for k in range(numeric):
        v = rng.normal(y * (0.5 if k == 0 else 0.0), 1.0, n)
        cols.append(np.clip(v, -2.0, 3.0))
        blocks.append(_B(f"x{k}", "numeric", 1, -2.0, 3.0))
    fmap = FeatureMap(blocks, list(range(len(blocks))))
    psi = fmap.psi(np.column_stack(cols).astype(float))
    phi = np.zeros((n, K, fmap.dim))
    phi[np.arange(n), y] = psi
    return fmap, phi.mean(axis=0), phi.std(axis=0)


CASES = [(40, 2, 60, 0), (60, 3, 90, 0), (50, 2, 80, 2), (30, 4, 120, 0), (80, 2, 50, 0)]


@pytest.mark.parametrize("p,K,n,numeric", CASES)
def test_cg_equals_full_at_eps_zero(p, K, n, numeric):
    """ε = 0: CG's R equals the full LP's within 1e-6, from a poor initial set, in several iterations."""
    rng = np.random.default_rng(p * 7 + K)
    fmap, tau, sd = random_highdim(rng, p, K, n, numeric=numeric)
    for s in (0.0, 0.3, 1.0):
        lam = _lam(sd, n, s)
        full = solve_full(MinimaxProblem.first_order(fmap, tau, lam))
        worst = np.argsort(-np.abs(tau).sum(axis=0))[-1:]  # start from an arbitrary feature
        init = [int(fmap.block_of_column[worst[0]])]
        cg = solve_cg(MinimaxProblem.first_order(fmap, tau, lam), n_max=2, eps=0.0, k_max=1000, init=init)
        assert cg.converged
        assert abs(cg.value - full.value) <= 1e-6, (s, cg.value, full.value)
        assert cg.read.max_dual_violation <= 1e-8  # dual feasible for every feature
        R = np.array(cg.iterations)
        assert np.all(np.diff(R) <= 1e-9), R  # Theorem 2
        assert np.all(R >= full.value - 1e-7)  # every R^k bounds R* from above
        assert len(R) >= 2


def test_cg_leaves_features_out_and_is_still_exact():
    """With λ > 0 the optimum is sparse: CG stops with most features outside and the same R*."""
    rng = np.random.default_rng(5)
    fmap, tau, sd = random_highdim(rng, 120, 2, 100, informative=4)
    lam = _lam(sd, 100, 0.5)
    full = solve_full(MinimaxProblem.first_order(fmap, tau, lam))
    cg = solve_cg(MinimaxProblem.first_order(fmap, tau, lam), n_max=3, eps=0.0, k_max=1000, n_init=3)
    assert cg.converged and len(cg.selected) < fmap.n_blocks // 2
    assert abs(cg.value - full.value) <= 1e-6


@pytest.mark.parametrize("eps", [1e-3, 1e-2, 5e-2])
def test_theorem3_eps_bound(eps):
    """R* ≤ R^k ≤ R* + ε‖μ*‖₁ once nothing enters (Theorem 3)."""
    rng = np.random.default_rng(int(eps * 1e4))
    for K in (2, 3):
        fmap, tau, sd = random_highdim(rng, 60, K, 80, informative=8)
        lam = _lam(sd, 80, 0.2)
        full = solve_full(MinimaxProblem.first_order(fmap, tau, lam))
        cg = solve_cg(MinimaxProblem.first_order(fmap, tau, lam), n_max=2, eps=eps, k_max=1000, n_init=1)
        assert cg.converged
        assert full.value - 1e-7 <= cg.value <= full.value + eps * np.abs(full.mu).sum() + 1e-7
        assert cg.read.max_dual_violation <= eps + 1e-9
        assert np.all(np.diff(cg.iterations) <= 1e-9)


def test_cg_rows_formulation_matches_compact():
    """The row-generation formulation (pluggable oracle, split-filled rows) gives the same R^k path end."""
    rng = np.random.default_rng(12)
    fmap, tau, sd = random_highdim(rng, 25, 3, 70, informative=5)
    lam = _lam(sd, 70, 0.4)
    a = solve_cg(MinimaxProblem.first_order(fmap, tau, lam), n_max=2, eps=0.0, k_max=1000, n_init=1,
                 formulation="compact")
    b = solve_cg(MinimaxProblem.first_order(fmap, tau, lam), n_max=2, eps=0.0, k_max=1000, n_init=1, formulation="rows")
    assert abs(a.value - b.value) <= 1e-6
    assert np.all(np.diff(b.iterations) <= 1e-9)


def test_k_max_stops_early_with_a_valid_certificate():
    rng = np.random.default_rng(3)
    fmap, tau, sd = random_highdim(rng, 50, 2, 60, informative=10)
    lam = _lam(sd, 60, 0.2)
    full = solve_full(MinimaxProblem.first_order(fmap, tau, lam))
    # start from a noise feature
    cg = solve_cg(MinimaxProblem.first_order(fmap, tau, lam), n_max=1, eps=0.0, k_max=0, init=[49])
    assert len(cg.iterations) == 1 and not cg.converged  # features wanted in, but k_max reached
    assert cg.value >= full.value + 1e-3  # a valid (loose) upper bound on R*
    for k_max in (1, 2, 3):
        cg = solve_cg(MinimaxProblem.first_order(fmap, tau, lam), n_max=1, eps=0.0, k_max=k_max, init=[49])
        assert len(cg.iterations) <= k_max + 1  # Algorithm 1: the loop runs while k ≤ k_max
        assert cg.value >= full.value - 1e-9


def test_pricing_heuristic_bounds_exact_and_exact_is_minimal():
    """The IPF split's violation ≥ the exact min-max split LP; random splits never beat the LP."""
    rng = np.random.default_rng(8)
    fmap, tau, sd = random_highdim(rng, 30, 3, 50, informative=6, numeric=1)
    lam = _lam(sd, 50, 0.3)
    pr = SplitPricer(fmap, tau, lam, label_subsets(3))
    sizes = np.array([len(c) for c in label_subsets(3)], dtype=float)
    for _ in range(5):
        W = rng.dirichlet(np.ones(len(sizes)) * 0.5)
        W /= (sizes * W).sum()  # Σ_C |C|·W_C = 1
        blocks = np.arange(fmap.n_blocks)
        vh = pr.heuristic(blocks, W)
        ve, splits = pr.exact(blocks, W)
        assert np.all(ve <= np.maximum(vh, 0.0) + 1e-9)
        for i in blocks[:10]:
            b = fmap.blocks[int(i)]
            V = np.eye(b.size) if b.kind == "onehot" else np.array([[b.lo], [b.hi]])
            T, L = tau[:, b.slice], lam[:, b.slice]
            q = splits[int(i)]
            F = np.array([[(W[c] * q[c] @ V) for c, C in enumerate(label_subsets(3)) if y in C]
                          for y in range(3)]).sum(axis=1)
            v_split = np.max(np.abs(F - T) - L)
            assert v_split <= max(ve[i], 0.0) + 1e-7  # the returned split attains the LP value
            for _ in range(20):  # any other split is no better
                qr = rng.dirichlet(np.ones(V.shape[0]), size=len(sizes))
                Fr = np.array([[(W[c] * qr[c] @ V) for c, C in enumerate(label_subsets(3)) if y in C]
                               for y in range(3)]).sum(axis=1)
                assert np.max(np.abs(Fr - T) - L) >= ve[i] - 1e-7


def test_estimator_cg_reports_selection_and_iterations():
    rng = np.random.default_rng(4)
    p, K, n = 40, 2, 80
    y = rng.integers(0, K, n)
    X = rng.integers(0, 3, (n, p))
    X[:, 3] = np.where(rng.random(n) < 0.8, y, X[:, 3])
    cb = Codebook(features=tuple(CategoricalFeature(f"g{j}", ("a", "b", "c")) for j in range(p)),
                  label=Label("y", ("0", "1")))
    S = Summary.from_rows(cb, X.astype(float), y)
    cg = MRC(s=0.3, solver="cg", eps=0.0, n_max=5).fit(S)
    full = MRC(s=0.3, solver="full").fit(S)
    assert abs(cg.minimax_risk_.value - full.minimax_risk_.value) <= 1e-6
    assert "g3" in cg.selected_features_ and "g3" in full.selected_features_
    assert cg.iterations_[-1] == pytest.approx(cg.minimax_risk_.value, abs=1e-12)
    assert np.array_equal(cg.predict(X.astype(float)), np.argmax(cg.decision_function(X.astype(float)), axis=1))


# ------------------------------------------------------------------- real data

DATASETS = Path(os.environ.get("MARG_DATASETS", Path(__file__).resolve().parents[4] / "shared" / "datasets"))


def test_colon_cg_equals_full():
    """colon (62 × 2000, discretized {-2, 0, 2}): CG at ε = 0 and the full LP agree; R^k monotone."""
    path = DATASETS / "colon" / "colon.mat"
    if not path.exists():
        pytest.skip(f"dataset not found: {path}")
    import scipy.io as sio

    m = sio.loadmat(path)
    X = m["X"].astype(float)[:, :600]
    y = m["Y"].ravel()
    codes = np.searchsorted([-1.0, 1.0], X, side="left").astype(float)
    classes = np.unique(y)
    cb = Codebook(
        features=tuple(CategoricalFeature(f"g{j}", ("-2", "0", "2")) for j in range(X.shape[1])),
        label=Label("y", tuple(str(int(c)) for c in classes)),
    )
    S = Summary.from_rows(cb, codes, np.searchsorted(classes, y))
    full = MRC(s=0.3, solver="full").fit(S)
    cg = MRC(s=0.3, solver="cg", eps=0.0, n_max=20).fit(S)
    assert abs(cg.minimax_risk_.value - full.minimax_risk_.value) <= 1e-6
    assert np.all(np.diff(cg.iterations_) <= 1e-9)
    assert cg.solution_.read.max_dual_violation <= 1e-8
    err = np.mean(cg.predict(codes) != np.searchsorted(classes, y))
    assert err <= cg.minimax_risk_.value + 0.2  # training error is not wildly above the certificate


def test_cli_learn_cg_progress_iterations_and_full(tmp_path):
    """`marg learn --learner mrc` on 300 genes: progress per CG iteration, R^k in --json, --solver full agrees."""
    import json

    from typer.testing import CliRunner

    from marg.cli.main import app
    from tests.conftest import gene_study

    p = 300
    schema, data = gene_study(tmp_path, n=150, p=p)
    runner = CliRunner(env={"MARG_PROGRESS": "lines"})
    bundle = tmp_path / "genes.bundle"
    r = runner.invoke(app, ["export", str(data), "--schema", str(schema), "--site", "lab", "--out", str(bundle),
                            "--min-cell", "1"])
    assert r.exit_code == 0, r.output
    base = ["learn", str(bundle), "--learner", "mrc", "--allow-unsigned", "--s", "0.3", "--json", "--eps", "0"]
    r = runner.invoke(app, base + ["--out", str(tmp_path / "cg.json"), "--n-max", "1", "--k-max", "50"])
    assert r.exit_code == 0, r.output
    assert "iteration 1: R = " in r.stderr and "iteration 2: R = " in r.stderr
    cg = json.loads(r.stdout)
    R = cg["iterations"]
    assert len(R) >= 2 and R[-1] < R[0] and all(b <= a + 1e-12 for a, b in zip(R, R[1:]))
    assert cg["minimax_risk"]["value"] == pytest.approx(R[-1]) and cg["minimax_risk"]["kind"] == "R*"
    assert cg["worst_case_error"] >= R[-1] - 1e-9 and cg["certificate"]["kind"] == "W(h)"  # the labels' W(h) ≥ R*
    assert cg["active_features"] and set(cg["active_features"]) <= {f"g{j}" for j in range(p)}
    r = runner.invoke(app, base + ["--out", str(tmp_path / "full.json"), "--solver", "full"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["minimax_risk"]["value"] == pytest.approx(cg["minimax_risk"]["value"], abs=1e-6)
    r = runner.invoke(app, base[:-3] + ["--out", str(tmp_path / "cg2.json"), "--n-max", "1"])
    assert r.exit_code == 0, r.output
    assert "features in the final working set: g" in r.stdout
