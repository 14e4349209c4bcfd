"""ARCHITECTURE.md's claim "a newcomer adds a formulation by writing one module", held by the suite.

The page's ```python block is executed as a module of its own (with the engine's exact first-order
separator as its ``MyOracle``) and registered; MRC must then reach, through ``formulation="mine"``
and through the one ``fit``, the R* of the built-in ``compact`` formulation on random summaries.
"""

from __future__ import annotations

import re
import types
from pathlib import Path

import numpy as np
import pytest

from marg.learners.features.blocks import FeatureMap, node_blocks
from marg.learners.minimax import registry
from marg.learners.minimax.fit import FitOptions, One, fit
from marg.learners.minimax.from_summary import problem_from
from marg.learners.minimax.separation import FirstOrderOracle
from marg.learners.classifiers.mrc import MRC
from tests.helpers.dcc_oracle import make_problem

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture()
def mine(monkeypatch):
    """The page's formulation module, registered for this test only."""
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "class Mine(Formulation)" in b]
    assert len(blocks) == 1, "ARCHITECTURE.md's formulation example (class Mine(Formulation)) was not found"
    monkeypatch.setattr(registry, "REGISTRY", dict(registry.REGISTRY))
    module = types.ModuleType("mine")
    module.MyOracle = FirstOrderOracle
    exec(compile(blocks[0], "ARCHITECTURE.md formulation example", "exec"), module.__dict__)
    return module


@pytest.mark.parametrize("seed,K", [(0, 2), (1, 3), (2, 3)])
def test_the_pages_formulation_module_reaches_the_compact_formulations_R(mine, seed, K):
    _, S, _ = make_problem(np.random.default_rng(seed), [3, 2, 3, 2], K)
    want = MRC(s=0.5, formulation="compact", solver="full").fit(S).minimax_risk_.value
    got = MRC(s=0.5, formulation="mine", solver="full").fit(S).minimax_risk_.value
    blocks = node_blocks(S.codebook, None)
    sol = fit(problem_from(S, FeatureMap(blocks, [b.column for b in blocks]), 0.5), mine.MINE, One(), FitOptions())
    assert got == pytest.approx(want, abs=1e-7)
    assert sol.value == pytest.approx(want, abs=1e-7)
    assert sol.formulation == "mine"
