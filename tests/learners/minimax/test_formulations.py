"""The formulation registry (learners/minimax/registry.py): each formulation accepts what it solves and refuses, in one
line naming it and the statistic, what it cannot.

What a formulation accepts is checked by solving it: a forest given as DCC's structure is
solved by the row formulation to the compact forest LP's R*, the hinge LP on a given forest
equals the hinge LP on the spanning forest it chose itself, and the first-order formulations
reach the same R* by one LP and by column generation.
"""

from __future__ import annotations

import numpy as np
import pytest

from marg.errors import InputError
from marg.learners.boost.vote import BoostVote  # noqa: F401  (its module registers "monomials")
from marg.learners.classifiers.dcc import DCC
from marg.learners.features.blocks import FeatureMap
from tests.helpers.first_order_fit import solve_cg, solve_full
from marg.learners.minimax.first_order import FirstOrder
from marg.learners.minimax.fixed_rule_fit import FixedRule
from marg.learners.minimax.registry import (FIRST_ORDER, REGISTRY, Formulation, Statistics, check, formulation,
                                                offered, register)
from marg.learners.minimax.problem import MinimaxProblem
from marg.learners.classifiers.mrc import MRC
from tests.helpers.console import run
from tests.helpers.dcc_oracle import make_problem
from tests.helpers.quantities import blocks_of, tau_of

PAIRS_FOREST = Statistics.of_pairs([("a", "b"), ("b", "c")], "the pairs a-b, b-c")
PAIRS_CYCLE = Statistics.of_pairs([("a", "b"), ("b", "c"), ("c", "a")], "the pairs a-b, b-c, c-a")

# (formulation, statistics and search it solves, statistics and search it cannot, words the refusal names)
CASES = [
    ("compact", [(FIRST_ORDER, "one"), (FIRST_ORDER, "columns")], [(PAIRS_FOREST, "one")], "first-order tables only"),
    ("rows", [(FIRST_ORDER, "one"), (FIRST_ORDER, "columns")], [(PAIRS_FOREST, "columns")], "first-order tables only"),
    ("forest", [(PAIRS_FOREST, "one"), (PAIRS_FOREST, "greedy"), (FIRST_ORDER, "one")], [(PAIRS_CYCLE, "one")],
     "pair tables forming a forest"),
    ("forest-rows", [(PAIRS_FOREST, "one"), (PAIRS_FOREST, "greedy")], [(PAIRS_CYCLE, "greedy")], "graph with cycles"),
    ("local", [(PAIRS_CYCLE, "one"), (PAIRS_FOREST, "one")], [(PAIRS_CYCLE, "greedy")], "does not run greedy"),
    ("hinge", [(Statistics(2, "forest", "a forest's pair tables", 2), "one")],
     [(Statistics(2, "forest", "a forest's pair tables", 3), "one")], "needs a binary label"),
    ("monomials", [(Statistics(3, "cycles", "triples"), "columns")],
     [(Statistics(1, "none", "the codebook's features", discrete=False), "columns")], "needs discrete features"),
]


@pytest.mark.parametrize("name,solves,cannot,words", CASES, ids=[c[0] for c in CASES])
def test_each_formulation_accepts_what_it_solves_and_refuses_in_one_line(name, solves, cannot, words):
    f = REGISTRY[name]
    for stats, search in solves:
        assert f.accepts(stats, search) is None, (name, stats, search)
        assert f.check(stats, search) is f
    for stats, search in cannot:
        why = f.accepts(stats, search)
        assert why is not None and words in why and "\n" not in why
        with pytest.raises(InputError) as e:
            f.check(stats, search, "X")
        msg = str(e.value)
        assert msg.startswith(f"X formulation {name!r} ({f.title})") and words in msg and "\n" not in msg
        if stats.source in why:  # the refusal names the statistics it was given
            assert stats.source in msg


def test_the_pair_graph_of_any_pairs():
    assert PAIRS_FOREST.graph == "forest" and PAIRS_CYCLE.graph == "cycles" and PAIRS_FOREST.order == 2
    assert Statistics.of_pairs([], "none").graph == "none"
    assert Statistics.of_pairs([("a", "b"), ("b", "a")], "twice").graph == "forest"  # one edge given twice
    assert Statistics.of_pairs([(0, 1), (2, 3), (1, 2)], "a path").graph == "forest"
    assert Statistics.of_pairs([(0, 1), (2, 3), (1, 2), (3, 0)], "a ring").graph == "cycles"


def test_learners_offer_and_check_through_the_registry():
    assert offered("MRC") == ("compact", "rows") and offered("boost") == ("monomials",)
    assert set(offered("DCC")) == {"forest", "forest-rows", "local", "hinge"}
    with pytest.raises(InputError, match=r"unknown MRC formulation 'forest' \(expected one of compact, rows\)"):
        formulation("forest", "MRC")
    with pytest.raises(InputError, match="unknown MRC formulation 'no-such-formulation'"):
        MRC(formulation="no-such-formulation").check_params()
    # the first formulation that accepts wins; if none does, the last one's reason
    assert check(("forest", "local"), PAIRS_CYCLE) is REGISTRY["local"]
    assert check(("forest", "local"), PAIRS_FOREST) is REGISTRY["forest"]
    with pytest.raises(InputError, match="DCC formulation 'local' .* does not run greedy edge search"):
        check(("forest", "local"), PAIRS_CYCLE, "greedy", "DCC")


def test_a_new_formulation_plugs_in_by_its_record():
    toy = FirstOrder("toy-pairs", "a toy", ("Toy",), max_order=2, graph="forest")
    try:
        assert register(toy) is toy and offered("Toy") == ("toy-pairs",) and formulation("toy-pairs", "Toy") is toy
        assert toy.accepts(PAIRS_FOREST) is None and "forest" in toy.accepts(PAIRS_CYCLE)
        with pytest.raises(InputError, match="already registered"):
            register(FirstOrder("toy-pairs", "another", ("Toy",), max_order=3))
    finally:
        REGISTRY.pop("toy-pairs", None)


def test_a_formulation_without_build_read_and_finish_is_refused():
    """Formulation is an abstract base: a subclass that leaves out one of build, read and finish
    cannot be instantiated (so it never reaches the registry), and every registered one has all three."""
    with pytest.raises(TypeError, match="abstract methods build, finish, read"):
        Formulation("bare", "a record alone", ("Toy",))

    class NoRead(Formulation):
        def build(self, problem, search, options):
            raise AssertionError("never built")

        def finish(self, problem, raw, options):
            raise AssertionError("never finished")

    with pytest.raises(TypeError, match="abstract method read"):
        register(NoRead("no-read", "a formulation without its read", ("Toy",)))
    assert "no-read" not in REGISTRY and "bare" not in REGISTRY

    class Complete(NoRead):
        def read(self, model, gen):
            raise AssertionError("never read")

    assert Complete("complete", "all three", ("Toy",)).name == "complete"
    assert {"compact", "rows", "forest", "forest-rows", "local", "hinge", "monomials", "fixed-rule"} <= set(REGISTRY)
    assert isinstance(REGISTRY["fixed-rule"], FixedRule)
    for f in REGISTRY.values():
        assert isinstance(f, Formulation) and not type(f).__abstractmethods__, f.name


def test_what_is_accepted_is_solved():
    """The first-order formulations by one LP and by column generation, DCC's row formulation on a
    given forest, and the hinge LP on a given forest: each agrees with the path it replaces."""
    rng = np.random.default_rng(11)
    _, S, _ = make_problem(rng, [3, 2, 3, 2], 2)
    fmap = FeatureMap(blocks_of(S), [0, 1, 2, 3])
    tau = tau_of(S)
    lam = np.full(tau.shape, 0.001)
    values = [f(MinimaxProblem.first_order(fmap, tau, lam), formulation=name).value
              for name in offered("MRC") for f in (solve_full, solve_cg)]
    assert max(values) - min(values) <= 1e-7
    chosen = DCC(s=0.0).fit(S)
    given = [tuple(e) for e in chosen.edges_]
    rows = DCC(s=0.0, structure=given, solver="rows").fit(S)  # refused before the registry, solvable
    assert rows.minimax_risk_.value == pytest.approx(chosen.minimax_risk_.value, abs=1e-7)
    hinge = DCC(s=0.0, loss="hinge").fit(S)
    hinge_given = DCC(s=0.0, loss="hinge", structure=given).fit(S)
    assert sorted(hinge_given.edges_) == sorted(hinge.edges_)
    assert hinge_given.minimax_risk_.value == pytest.approx(hinge.minimax_risk_.value, abs=1e-9)


def test_the_console_script_names_the_formulation_and_the_statistic(site_bundles, tmp_path):
    _, bundles = site_bundles
    r = run("learn", *bundles, "--learner", "dcc", "--structure", "all", "--loss", "hinge", "--out",
            tmp_path / "m.json",
            "--allow-unsigned")
    assert r.exit_code == 2
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    said = [ln for ln in lines if "formulation" in ln]
    assert len(said) == 1, r.output
    assert "DCC formulation 'hinge'" in said[0] and "pair tables forming a forest" in said[0]
    assert "--structure all" in said[0]  # the setting as the command line spells it
    assert not (tmp_path / "m.json").exists()


def test_every_formulation_is_registered_by_its_own_module():
    """No formulation is named by a string to import: each is an object its module registers (the
    registry imports none of them), and each the one fit runs has build, read and finish."""
    import importlib

    from marg.learners.minimax import registry as fm

    homes = {"compact": "minimax.first_order", "rows": "minimax.first_order", "forest": "minimax.pair_formulations",
             "forest-rows": "minimax.pair_formulations", "local": "minimax.pair_formulations",
             "hinge": "classifiers.dcc_hinge",
             "monomials": "boost.minimax_cg", "fixed-rule": "minimax.fixed_rule_fit"}
    for name, home in homes.items():
        module = importlib.import_module(f"marg.learners.{home}")
        assert any(v is fm.REGISTRY[name] for v in vars(module).values()), name
        # the one fit runs each
        assert all(callable(getattr(fm.REGISTRY[name], m)) for m in ("build", "read", "finish")), name
    assert "importlib" not in open(fm.__file__, encoding="utf-8").read()
