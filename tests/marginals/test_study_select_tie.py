"""The study design's final split (issue 44, large): splits within ``SELECT_TIE`` of the least expected error are ties
won by round 2; the shares stay a split of the site's total and the rounds' ρ add to ρ_T."""

from __future__ import annotations

import numpy as np
import pytest

from marg.marginals import study_design as sd
from marg.marginals import study_split as ss
from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label
from marg.marginals.counts.dp_conversions import rho_for_epsilon


def _codebook(p: int) -> Codebook:
    return Codebook(features=tuple(CategoricalFeature(f"x{i}", ("a", "b")) for i in range(p)),
                    label=Label("y", ("n", "p")))


def _pooled(x, tie):
    return sd.mode_split(x, "pooled", True, tie)


def test_the_wider_tie_is_within_it_of_the_least_and_gives_round_two_at_least_as_much():
    """kr-vs-kp's shape (36 binary features, 1,790 training patients at 50/30/20 %, shared noise, t = 2 of 3)."""
    x = ss.SplitInputs((895, 537, 358), (2,) * 36, 2, 0.78 * rho_for_epsilon(1.0, 1e-6), 1, 1.5)
    objective, _ = sd.mode_functions("pooled", True)
    narrow, wide = _pooled(x, ss.TIE), _pooled(x, ss.SELECT_TIE)
    for s in (narrow, wide):
        assert s.label + s.select + s.round2 == pytest.approx(1.0, abs=1e-9) and min(s.label, s.select,
                                                                                     s.round2) >= ss.MIN_SHARE
        assert s.expected_error == pytest.approx(float(objective(x, np.array([s.label]), np.array([s.select]), s.k)[0]),
                                                 abs=1e-9)
    assert wide.round2 >= narrow.round2 and wide.expected_error <= narrow.expected_error + ss.SELECT_TIE
    # nothing on the rule's grid with a larger round-2 share is within the tie of the least E
    L, S = ss._grid(ss.label_floor(x), 1.0, ss.MIN_SHARE, 1.0, ss.STEP)
    E, ks = ss.evaluate_grid(x, L, S, objective)
    best = float(np.nanmin(E))
    within = (E <= best + ss.SELECT_TIE).any(axis=1)
    assert wide.round2 >= float((1.0 - L - S)[within].max()) - 1e-9
    assert wide.expected_error <= best + ss.SELECT_TIE + 1e-12


def test_the_studys_rounds_still_add_to_its_total():
    rho = rho_for_epsilon(1.0, 1e-6)
    for rows in ((1278, 767, 512), (300, 300, 300)):
        d = sd.design_study(_codebook(36), 3, rows, 1.0, 1e-6, 2)
        assert sum(d.rounds.values()) == pytest.approx(rho, rel=1e-12)
        assert min(d.rounds.values()) > 0
