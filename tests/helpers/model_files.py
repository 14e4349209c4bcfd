"""Damaged model files: what every estimator's ``from_dict`` must refuse in one line."""

from __future__ import annotations

import copy

import pytest

from marg.errors import InputError


def check_malformed_models(cls, d):
    """A damaged model file gives one InputError line naming what is wrong, never a traceback.

    ``d`` is ``to_dict()`` output; its fitted state is damaged in each way in turn."""
    def damaged(edit):
        bad = copy.deepcopy(d)
        edit(bad["state"])
        return bad

    bad = damaged(lambda st: st.__setitem__("mu", st["mu"][:-1]))
    with pytest.raises(InputError, match=r"model mu has shape"):
        cls.from_dict(bad)
    bad = damaged(lambda st: st["mu"][0].__setitem__(0, float("nan")))
    with pytest.raises(InputError, match="NaN or infinity"):
        cls.from_dict(bad)
    bad = damaged(lambda st: st.pop("phi"))
    with pytest.raises(InputError, match=r"malformed .* model: 'phi'"):
        cls.from_dict(bad)
    # stored only when it differs
    bad = damaged(lambda st: st.__setitem__("ruled_out", [[10**6]] + st.get("ruled_out", st["impossible"])[1:]))
    with pytest.raises(InputError, match="'ruled_out' cells out of range"):
        cls.from_dict(bad)
    bad = damaged(lambda st: st.__setitem__("nb_logp", st["nb_logp"][:1]))
    with pytest.raises(InputError, match="nb_logp must be finite with mu's shape"):
        cls.from_dict(bad)
    bad = damaged(lambda st: st.__setitem__("worst_case_error", "high"))
    with pytest.raises(InputError, match="malformed .* model"):
        cls.from_dict(bad)
