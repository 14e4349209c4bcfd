"""Parameter constraints are declared once per estimator (``_parameter_constraints``) and enforced.

For every registered learner and every parameter it constrains, a value the constraint refuses
(``invalid()``) makes ``check_params`` — and therefore ``fit`` — raise one InputError line that
names the parameter (as the constraint labels it) and, for numbers and choices, the value; the
defaults pass. The constraints name real constructor parameters, and every hand check the
estimators had before is one of them (the ranges below are the documented ones).
"""

from __future__ import annotations

import math

import pytest

from marg.errors import InputError
from marg.learners.estimator.base import LEARNERS, REGISTRY
from marg.learners.core.params import COVERAGE, Check, Interval, Options, validate_params

CASES = [(name, param) for name in LEARNERS for param in REGISTRY[name]._parameter_constraints]


def test_every_learner_declares_its_constraints_on_real_parameters():
    for name in LEARNERS:
        cls = REGISTRY[name]
        declared = set(cls._parameter_constraints)
        assert declared, f"{name} declares no parameter constraints"
        assert declared <= set(cls.param_names()), (f"{name}: constraints on unknown parameters "
                                                    f"{declared - set(cls.param_names())}")
        assert "coverage" in declared and cls._parameter_constraints["coverage"] == COVERAGE
        cls().check_params()  # the defaults are valid


@pytest.mark.parametrize(("learner", "param"), CASES, ids=[f"{n}-{p}" for n, p in CASES])
def test_a_bad_value_is_refused_in_one_line_naming_it(learner, param):
    cls = REGISTRY[learner]
    constraint = cls._parameter_constraints[param]
    bad = constraint.invalid()
    with pytest.raises(InputError) as info:
        cls(**{param: bad}).check_params()
    msg = str(info.value)
    assert "\n" not in msg
    assert constraint.label(param) in msg
    if not isinstance(constraint, Check):
        assert repr(bad) in msg


def test_interval_ends_and_integers_are_what_they_say():
    closed = Interval(0, 1)
    for ok in (0, 0.5, 1):
        closed.validate("x", ok)
    open_ = Interval(0, 1, open_low=True, open_high=True)
    for bad in (0, 1, -0.1, 1.1, math.nan, math.inf, True, "0.5"):
        with pytest.raises(InputError, match="x must be a finite number > 0 and < 1"):
            open_.validate("x", bad)
    whole = Interval(low=1, integer=True)
    whole.validate("k", 3)
    with pytest.raises(InputError, match=r"k must be an integer >= 1, got 2\.5"):
        whole.validate("k", 2.5)
    Interval(low=0, none_ok=True).validate("s", None)
    with pytest.raises(InputError, match="s must be a finite number >= 0, got None"):
        Interval(low=0).validate("s", None)
    for c in (closed, open_, whole, Interval(high=3), Interval()):
        with pytest.raises(InputError):
            c.validate("v", c.invalid())


def test_validation_follows_the_declared_order_and_options_name_their_label():
    constraints = {"solver": Options(("cg", "full"), "MRC solver"), "coverage": COVERAGE}
    with pytest.raises(InputError, match=r"^unknown MRC solver 'x' \(expected one of cg, full\)$"):
        validate_params(constraints, {"solver": "x", "coverage": 2.0})
    with pytest.raises(InputError, match="coverage must be"):
        validate_params(constraints, {"solver": "cg", "coverage": 2.0})


def test_fit_refuses_before_reading_the_summary():
    """``fit`` validates first: a bad parameter is refused even with no summary at all."""
    for name in LEARNERS:
        with pytest.raises(InputError, match="coverage"):
            REGISTRY[name](coverage=1.5).fit(None)
