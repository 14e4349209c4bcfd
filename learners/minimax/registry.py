"""The minimax formulations and the statistics each accepts — declared once, as cvxpy's problem classes declare what
they solve.

A formulation writes the inner maximum φ(μ) of the minimax problem (:mod:`.problem`) into an
LP, and each can do so only for some statistics: the first-order epigraph for first-order
tables, the forest epigraph for pair tables that form a forest, the local polytope for any
pair graph, … Each is a frozen :class:`Formulation` record — its name, the learners that offer
it, the statistics it accepts (the highest table order, the pair graph, the number of classes,
discrete features) and the searches that run it (one LP, column generation, greedy edges) —
and :meth:`Formulation.accepts` says why it does not accept a :class:`Statistics`, or None.
The estimators check their formulation-type parameters here (:func:`check`), so an
unsupported combination gives one line naming the formulation and the statistic it lacks.

A formulation the one fit runs (:func:`marg.learners.minimax.fit.fit`) is a subclass that implements
the abstract ``build(problem, search, options)`` (the LP model the search drives), ``read(model,
generation)`` (the LP's point as a :class:`.solution.MinimaxSolution`, its own read-out in a
typed ``read`` record) and ``finish(problem, raw, options)`` (the empty cells,
a :class:`.solution.Finished`). Each is registered by the module that defines it
(:mod:`.first_order`: ``compact``, ``rows``; :mod:`.pair_formulations`: ``forest``,
``forest-rows``, ``local``; :mod:`.fixed_rule_fit`: ``fixed-rule``; :mod:`marg.learners.classifiers.dcc_hinge`:
``hinge``; :mod:`marg.learners.boost.minimax_cg`: ``monomials``, column generation priced by MMA),
so the registry imports none of them: a new formulation is one new module. The contract is in
types (:class:`marg.learners.minimax.fit.FitFormulation`, which :class:`Formulation` subclasses): a
subclass that leaves one of the three out cannot be instantiated, so it never reaches the registry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable, Sequence, TypeVar

from marg.errors import InputError, option

from ..features.structure import UnionFind
from .fit import FitFormulation, Problem, SearchModel

GRAPHS = ("none", "forest", "cycles")
"""Pair graphs, each more general than the one before: no pair tables, a forest, any graph."""

SEARCHES = {"one": "one LP on the given statistics", "columns": "column generation",
            "greedy": "greedy edge search"}
"""How a fit runs a formulation, in words."""


@dataclass(frozen=True)
class Statistics:
    """What a fit gives its formulation.

    Attributes
    ----------
    order : int
        The most features in one table (with the label) the fit reads: 1 first-order tables.
    graph : {"none", "forest", "cycles"}
        The pair tables' graph: none, a forest, or a graph that may have cycles.
    source : str
        The statistics in words, for messages (e.g. "structure='all' (every pair)").
    n_classes : int or None
        The label's classes (None: not known before the data).
    discrete : bool
        Some feature is discrete (categorical or binned): binary tests exist.
    """

    order: int = 1
    graph: str = "none"
    source: str = "first-order tables"
    n_classes: int | None = None
    discrete: bool = True

    @classmethod
    def of_pairs(cls, pairs: Sequence[tuple[Hashable, Hashable]], source: str,
                 n_classes: int | None = None) -> "Statistics":
        """First-order and pair tables on the graph of ``pairs`` (any hashable node names): a forest or with cycles."""
        nodes = {v: k for k, v in enumerate(dict.fromkeys(v for e in pairs for v in e))}
        uf = UnionFind(len(nodes))
        edges = [sorted(nodes[v] for v in e) for e in dict.fromkeys(frozenset(e) for e in pairs)]
        forest = all(len(e) == 2 and uf.union(*e) for e in edges)  # a pair given twice is one edge
        return cls(order=2 if pairs else 1, graph=("forest" if forest else "cycles") if pairs else "none",
                   source=source, n_classes=n_classes)

    @classmethod
    def of_structure(cls, structure: Any, given: Sequence[tuple[Hashable, Hashable]] | None = None,
                     n_classes: int | None = None) -> "Statistics":
        """The pair tables of a DCC ``structure`` ("forest", "all" or pairs; ``given`` its edges once known)."""
        words = f"the pair tables of {option('structure', structure)}"
        if structure == "forest" or (given is None and structure == "all"):
            return cls(2, "forest" if structure == "forest" else "cycles",
                       words + " (every released pair)" * (structure == "all"), n_classes)
        return cls.of_pairs(list(structure) if given is None else given, words, n_classes)


FIRST_ORDER = Statistics()
"""First-order tables (each feature with the label): what MRC reads."""

P = TypeVar("P", bound=Problem)
M = TypeVar("M", bound=SearchModel)


@dataclass(frozen=True)
class Formulation(FitFormulation[P, M]):
    """One LP formulation of the minimax problem and the statistics it accepts: an abstract base.

    A subclass implements :meth:`~marg.learners.minimax.fit.FitFormulation.build`, ``read`` and
    ``finish`` (``P`` the problem it reads, ``M`` the model it builds); until it does, instantiating
    it raises ``TypeError`` naming the missing methods.

    Attributes
    ----------
    name : str
        The value a learner's parameter gives it.
    title : str
        What it is, in words.
    learners : tuple of str
        The estimators that offer it.
    max_order : int or None
        The most features in one table it reads (None: any).
    graph : {"none", "forest", "cycles"}
        The most general pair graph it accepts.
    classes : int or None
        The number of classes it needs (None: any).
    discrete : bool
        It needs discrete features.
    searches : tuple of str
        The searches that run it (keys of :data:`SEARCHES`).
    """

    name: str
    title: str
    learners: tuple[str, ...]
    max_order: int | None = 1
    graph: str = "none"
    classes: int | None = None
    discrete: bool = False
    searches: tuple[str, ...] = ("one",)

    def accepts(self, stats: Statistics, search: str = "one") -> str | None:
        """None if it solves ``stats`` by ``search``, else the reason it does not (one line)."""
        if GRAPHS.index(stats.graph) > GRAPHS.index(self.graph):
            need = "first-order tables only" if self.graph == "none" else "pair tables forming a forest"
            has = "add pair tables" if self.graph == "none" else "form a graph with cycles"
            return f"accepts {need}; {stats.source} {has}"
        if self.max_order is not None and stats.order > self.max_order:
            return (f"reads tables of at most {self.max_order} feature(s) with the label; {stats.source} "
                    f"need tables of {stats.order} features")
        if self.classes is not None and stats.n_classes is not None and stats.n_classes != self.classes:
            return (f"needs a {'binary' if self.classes == 2 else str(self.classes) + '-class'} label; {stats.source} "
                    f"have {stats.n_classes} classes")
        if self.discrete and not stats.discrete:
            return f"needs discrete features (categorical or binned numeric); {stats.source} give no binary test"
        if search not in self.searches:
            return self.accepts_search(search)
        return None

    def accepts_search(self, search: str) -> str:
        """Why it does not run ``search``, in words."""
        return f"does not run {SEARCHES.get(search, search)} (it runs {', '.join(SEARCHES[s] for s in self.searches)})"

    def check(self, stats: Statistics, search: str = "one", learner: str = "") -> "Formulation[P, M]":
        """Itself if it accepts ``stats`` by ``search``, else a one-line InputError naming it and the reason."""
        why = self.accepts(stats, search)
        if why is not None:
            who = f"{learner} formulation" if learner else "formulation"
            raise InputError(f"{who} {self.name!r} ({self.title}) {why}")
        return self


REGISTRY: dict[str, Formulation[Any, Any]] = {}
"""Every formulation by name (:func:`register`)."""

F = TypeVar("F", bound=Formulation[Any, Any])


def register(formulation: F) -> F:
    """Add ``formulation`` to the registry (a name is registered once)."""
    if formulation.name in REGISTRY and REGISTRY[formulation.name] != formulation:
        raise InputError(f"a formulation named {formulation.name!r} is already registered")
    REGISTRY[formulation.name] = formulation
    return formulation


def offered(learner: str) -> tuple[str, ...]:
    """The names of the formulations ``learner`` offers, in registration order."""
    return tuple(name for name, f in REGISTRY.items() if learner in f.learners)


def formulation(name: str, learner: str) -> Formulation[Any, Any]:
    """The formulation ``name`` of ``learner``, or a one-line InputError listing the ones it offers."""
    f = REGISTRY.get(name) if isinstance(name, str) else None
    if f is None or learner not in f.learners:
        raise InputError(f"unknown {learner} formulation {name!r} (expected one of {', '.join(offered(learner))})")
    return f


def check(names: tuple[str, ...], stats: Statistics, search: str = "one", learner: str = "") -> Formulation[Any, Any]:
    """The first of ``names`` that accepts ``stats`` by ``search``; if none does, the last one's reason as an
    InputError."""
    for name in names[:-1]:
        if REGISTRY[name].accepts(stats, search) is None:
            return REGISTRY[name]
    return REGISTRY[names[-1]].check(stats, search, learner)
