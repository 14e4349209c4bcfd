"""The one fit of the minimax engine (learners/minimax/fit.py): problem_from → fit(problem, formulation, search).

Checked against truths, not against itself: MRC is DCC with no edges (the same R* and the
same rule from the forest formulation on an edgeless pair map as from the first-order one);
every search ends in the one certificate — R(μ) recomputed from the finished μ by
``problem.risk`` with φ by brute force over the whole domain; a finish that would raise R is
refused, never silently undone; a formulation refuses a search it does not run.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest

from marg.errors import InputError, SolverError
from marg.learners.classifiers.dcc import DCC
from marg.learners.features.blocks import FeatureMap
from marg.learners.features.pairwise import PairwiseFeatureMap
from marg.learners.minimax import fit as fit_module
from marg.learners.minimax.first_order import COMPACT, ROWS, SelectPricing
from marg.learners.minimax.fit import Columns, FitOptions, Greedy, One, fit
from marg.learners.minimax.from_summary import problem_from
from marg.learners.minimax.layout import MuLayout, every_label, flat_index
from marg.learners.minimax.pair_formulations import FOREST, FOREST_ROWS, LOCAL
from marg.learners.minimax.problem import label_subsets
from marg.learners.classifiers.mrc import MRC
from tests.helpers.dcc_oracle import make_problem
from tests.helpers.quantities import blocks_of

LEVELS = [3, 2, 3, 2]


def summary(seed: int = 3, K: int = 2):
    _, S, _ = make_problem(np.random.default_rng(seed), LEVELS, K)
    return S


def brute_phi(fmap, mu: np.ndarray) -> float:
    """φ(μ) = max over every x of the domain and label subset C of (Σ_{y∈C} Φ(x, y)ᵀμ − 1)/|C|."""
    K = mu.shape[0]
    best = -np.inf
    for x in itertools.product(*[range(b.size) for b in fmap.blocks]):
        s = fmap.scores(np.array([x]), mu)[0]
        for C in label_subsets(K):
            best = max(best, (sum(s[y] for y in C) - 1.0) / len(C))
    return best


def test_the_flat_index_is_label_major():
    assert every_label(3, 5, [1, 4]).tolist() == [1, 4, 6, 9, 11, 14]
    assert flat_index(5, 2, np.array([0, 3])).tolist() == [10, 13]
    lay = MuLayout(np.zeros((2, 3), bool), np.array([[True, False, True], [True, True, False]]))
    assert lay.lp_columns([0, 1, 2]).tolist() == [0, 2, 3, 4]  # only the LP columns
    assert lay.restrict(np.array([1, 2])).lp_mask.tolist() == [[False, True], [True, False]]


@pytest.mark.parametrize("s", [0.0, 0.3])
def test_mrc_is_dcc_with_no_edges(s):
    """The forest formulation on a pair map without edges is the first-order problem: the same box,
    the same R*, the same rule."""
    S = summary()
    blocks = blocks_of(S)
    first = problem_from(S, FeatureMap(blocks, [b.column for b in blocks]), s)
    pairs = problem_from(S, PairwiseFeatureMap(blocks, [b.column for b in blocks], []), s)
    assert np.array_equal(first.tau, pairs.tau) and np.array_equal(first.lam, pairs.lam)
    mrc = fit(first, COMPACT, One(), FitOptions())
    dcc = fit(pairs, FOREST, One(()), FitOptions(empty="impossible"))
    assert dcc.edges == [] and dcc.value == pytest.approx(mrc.value, abs=1e-8)
    X = np.array(list(itertools.product(*[range(n) for n in LEVELS])))
    assert np.array_equal(np.argmax(mrc.fmap.scores(X, mrc.mu), axis=1), np.argmax(dcc.fmap.scores(X, dcc.mu), axis=1))
    # and so are the estimators
    assert DCC(s=s, max_edges=0,
               empty="impossible").fit(S).worst_case_error_ == pytest.approx(MRC(s=s).fit(S).worst_case_error_,
                                                                             abs=1e-8)


@pytest.mark.parametrize("formulation,search", [
    (COMPACT, One()), (ROWS, One()), (COMPACT, Columns(SelectPricing(n_max=1, eps=0.0, init=[0]), k_max=100)),
    (ROWS, Columns(SelectPricing(n_max=1, eps=0.0, init=[0]), k_max=100)),
])
def test_every_first_order_search_ends_in_the_certificate_of_its_mu(formulation, search):
    S = summary(4, K=3)
    blocks = blocks_of(S)
    problem = problem_from(S, FeatureMap(blocks, [b.column for b in blocks]), 0.2)
    sol = fit(problem, formulation, search)
    assert sol.value == pytest.approx(problem.risk(sol.mu, brute_phi(sol.fmap, sol.mu)), abs=1e-7)
    assert sol.iterations[-1] == sol.value and sol.stop == "converged" and sol.formulation == formulation.name
    assert sol.read.working_set.size > 0 and sol.seconds >= 0.0
    if search.name == "columns":
        assert sol.read.max_dual_violation <= 1e-8
    ref = fit(problem, COMPACT, One())
    assert sol.value == pytest.approx(ref.value, abs=1e-7)


@pytest.mark.parametrize("formulation", [FOREST, FOREST_ROWS])
def test_forest_searches_end_in_the_certificate_of_the_chosen_forest(formulation):
    S = summary(5)
    blocks = blocks_of(S)
    full = PairwiseFeatureMap(blocks, [b.column for b in blocks], list(itertools.combinations(range(len(blocks)), 2)))
    problem = problem_from(S, full, 0.1)
    greedy = fit(problem, formulation, Greedy({e: (0, e) for e in full.edges}, tol=1e-6))
    assert greedy.fmap.edges == greedy.edges and len(greedy.edges) >= 1
    assert greedy.value == pytest.approx(risk_on(problem, greedy), abs=1e-7)
    given = fit(problem, formulation, One(tuple(greedy.edges)))
    assert given.value == pytest.approx(greedy.value, abs=1e-6)


def risk_on(problem, sol) -> float:
    """R(μ) of a finished solution with its own τ, λ and a brute-force φ."""
    return float(1.0 - np.sum(sol.tau * sol.mu) + np.sum(sol.lam * np.abs(sol.mu)) + brute_phi(sol.fmap, sol.mu))


def test_the_local_polytope_certificate_bounds_the_exact_one():
    S = summary(6)
    blocks = blocks_of(S)
    cycle = [(0, 1), (1, 2), (0, 2)]
    problem = problem_from(S, PairwiseFeatureMap(blocks, [b.column for b in blocks], cycle), 0.1)
    sol = fit(problem, LOCAL, One(tuple(cycle)))
    assert sol.kind == "R*_L" and sol.read.offsets.shape[1] == sol.fmap.dim
    assert sol.value >= risk_on(problem, sol) - 1e-7  # R_L(μ) ≥ R(μ): φ_L bounds φ from above


def test_a_finish_that_raises_the_certificate_is_refused(monkeypatch):
    """The one end of a fit: a finish whose μ is worse than the LP's is a solver fault, not kept quietly."""
    S = summary()
    blocks = blocks_of(S)
    problem = problem_from(S, FeatureMap(blocks, [b.column for b in blocks]), 0.2)
    rows = fit(problem, ROWS, One())
    real = COMPACT.finish

    def worse(self, problem, raw, options):
        done = real(problem, raw, options)
        return done._replace(phi=done.phi + 0.1)

    monkeypatch.setattr(type(COMPACT), "finish", worse)
    with pytest.raises(SolverError, match=r"raised the certificate .*\(compact formulation\)"):
        fit(problem, COMPACT, One())
    # the hinge LP's value is its own
    assert fit_module.certificate(replace(rows, kind="hinge", value=0.5), None) == 0.5


def test_a_formulation_refuses_a_search_it_does_not_run():
    S = summary()
    blocks = blocks_of(S)
    problem = problem_from(S, PairwiseFeatureMap(blocks, [b.column for b in blocks], [(0, 1)]), 0.1)
    with pytest.raises(InputError, match="'local' .* does not run greedy edge search"):
        fit(problem, LOCAL, Greedy({(0, 1): 0}))


def test_the_engine_has_one_owner_of_each_small_quantity():
    """Measured by the code (issue 36): the flat index y·D + j is written only by the layout, the
    released tables are read by one call in learners/, and a solution carries no untyped dict."""
    import dataclasses
    import re
    from pathlib import Path

    from marg.learners.minimax.solution import MinimaxSolution

    root = Path(fit_module.__file__).resolve().parents[1]  # learners/
    sources = {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8") for p in root.rglob("*.py")}
    flat = [name for name, text in sources.items() if re.search(r"\by\s*\*\s*(self\.)?D\s*\+", text)]
    assert flat == ["minimax/layout.py"]
    released = [name for name, text in sources.items() for _ in re.finditer(r"\.released\(\)", text)]
    assert released.count("features/statistics.py") == 1
    assert {f.name for f in dataclasses.fields(MinimaxSolution)}.isdisjoint({"info"})
    assert not [name for name, text in sources.items() if re.search(r"\b(sol|res|fit|solution_?)\.info\b", text)]


def test_boosting_is_the_same_fit_on_a_map_that_grows():
    """Boost runs through ``fit`` (formulation ``monomials``, search ``Columns``): its certificate
    is R(μ) of the reported μ with φ by brute force over every point of the domain; its R^k
    history is the search's own (the certificate is of the best iterate, it replaces no R^k);
    and a search that does not run boosting is refused."""
    from marg.learners.boost.minimax_cg import MONOMIALS, MonomialPricing, MonomialProblem
    from marg.learners.boost.vote import BoostVote
    from marg.learners.minimax.problem import risk
    from marg.marginals.summary import Summary
    from tests.helpers.boost import sample, tiny_codebook

    cb = tiny_codebook([3, 3, 2, 3])
    X, y = sample(cb, 400, np.random.default_rng(3))
    S = Summary.from_rows(cb, X, y, stats="all")
    src, mm, res = BoostVote(s=0.0, max_order=2, k_max=4, time_limit=None)._solve(S)
    assert res.formulation == "monomials" and np.isfinite(res.seconds) and res.read.model is mm
    grid = np.array(list(itertools.product(*[range(cb.attribute_size(f.name)) for f in cb.features])))
    psi = src.fmap.psi(grid)  # (points, D): every monomial of the map at every point
    phi = max(float(((psi @ res.mu[list(C)].sum(axis=0)) - 1.0).max()) / len(C) for C in label_subsets(2))
    assert res.read.phi_exact and res.phi == pytest.approx(phi, abs=1e-12)
    assert res.value == risk(res.tau, res.lam, res.mu, res.phi)
    assert res.iterations == [h["R"] for h in res.history] + res.iterations[len(res.history):]
    assert min(res.iterations) == pytest.approx(res.value, abs=1e-9)  # the best R^k is the certificate's μ
    with pytest.raises(InputError, match="monomials"):
        fit(MonomialProblem(src, 2), MONOMIALS, One(), FitOptions())
    assert MonomialPricing.price_last is False
