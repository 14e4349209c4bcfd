"""Parameter constraints, declared once per estimator (scikit-learn's ``_parameter_constraints`` idea).

Each estimator states in one class attribute, ``_parameter_constraints``, what every
constrained parameter may hold — a numeric :class:`Interval`, one of some :class:`Options`,
or a :class:`Check` for a rule of its own — and
:meth:`marg.learners.estimator.base.MarginalEstimator.check_params` validates them all through
:func:`validate_params`; an estimator overrides ``check_params`` only for rules that tie
parameters together. A bad value gives one InputError line naming the parameter (as the
constraint labels it) and the value. Every constraint can also produce a value it refuses
(:meth:`Interval.invalid` …), so a test checks each declared constraint of each registered
learner.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, get_args

import numpy as np

from marg.errors import InputError


def check_choice(name: str, value: Any, allowed: Any) -> str:
    """``value`` if it is one of ``allowed`` (a tuple or a ``Literal`` type), else a one-line InputError."""
    options = tuple(get_args(allowed)) if not isinstance(allowed, (tuple, list)) else tuple(allowed)
    if value not in options:
        raise InputError(f"unknown {name} {value!r} (expected one of {', '.join(map(str, options))})")
    return value


def check_number(name: str, value: Any, *, low: float | None = None, high: float | None = None,
                 open_low: bool = False, open_high: bool = False, integer: bool = False,
                 none_ok: bool = False) -> Any:
    """``value`` if it is a finite number in the given range, else a one-line InputError naming it."""
    if value is None and none_ok:
        return value
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if ok and integer:
        ok = isinstance(value, (int, np.integer))
    if ok:
        v = float(value)
        ok = math.isfinite(v)
        if ok and low is not None:
            ok = v > low if open_low else v >= low
        if ok and high is not None:
            ok = v < high if open_high else v <= high
    if not ok:
        what = "an integer" if integer else "a finite number"
        rng = ""
        if low is not None or high is not None:
            lo = "" if low is None else (f"> {low:g}" if open_low else f">= {low:g}")
            hi = "" if high is None else (f"< {high:g}" if open_high else f"<= {high:g}")
            rng = " " + " and ".join(x for x in (lo, hi) if x)
        raise InputError(f"{name} must be {what}{rng}, got {value!r}")
    return value


@dataclass(frozen=True)
class Interval:
    """A finite number (an integer with ``integer``) in [low, high] (ends open with ``open_low``/``open_high``; None:
    unbounded); ``none_ok``: None allowed."""

    low: float | None = None
    high: float | None = None
    open_low: bool = False
    open_high: bool = False
    integer: bool = False
    none_ok: bool = False

    def validate(self, name: str, value: Any) -> None:
        check_number(name, value, low=self.low, high=self.high, open_low=self.open_low, open_high=self.open_high,
                     integer=self.integer, none_ok=self.none_ok)

    def label(self, name: str) -> str:
        return name

    def invalid(self) -> Any:
        """A value outside the interval (below ``low``, else above ``high``, else not finite)."""
        if self.low is not None:
            return int(self.low) - 1 if self.integer else self.low - 1.0
        if self.high is not None:
            return int(self.high) + 1 if self.integer else self.high + 1.0
        return math.inf


@dataclass(frozen=True)
class Options:
    """One of ``values`` (a tuple or a ``Literal`` type); ``what`` names the parameter in the message (default: its
    name)."""

    values: Any
    what: str = ""

    def validate(self, name: str, value: Any) -> None:
        check_choice(self.label(name), value, self.values)

    def label(self, name: str) -> str:
        return self.what or name

    def invalid(self) -> Any:
        return "no-such-choice"


@dataclass(frozen=True)
class Check:
    """A rule of the parameter's own: ``fn(value)`` raises a one-line InputError naming it and
    the value; ``bad`` is a value it refuses and ``what`` the words that name the parameter."""

    fn: Callable[[Any], Any]
    bad: Any = None
    what: str = ""

    def validate(self, name: str, value: Any) -> None:
        self.fn(value)

    def label(self, name: str) -> str:
        return self.what or name

    def invalid(self) -> Any:
        return self.bad


Constraint = Interval | Options | Check

COVERAGE = Interval(0, 1, open_low=True, open_high=True)
"""A coverage level: a probability strictly between 0 and 1."""
LAMBDA_SCALE = Interval(low=0, none_ok=True)
"""``s``, the raw λ multiplier: ≥ 0, or None to calibrate λ to the coverage."""
TIME_LIMIT = Interval(low=0, open_low=True, none_ok=True)
"""Seconds (> 0), or None for no limit."""


def validate_params(constraints: Mapping[str, Constraint], params: Mapping[str, Any]) -> None:
    """Check every parameter that has a constraint, in the order they are declared (the first bad one raises)."""
    for name, constraint in constraints.items():
        constraint.validate(name, params[name])


__all__ = ["COVERAGE", "Check", "Constraint", "Interval", "LAMBDA_SCALE", "Options", "TIME_LIMIT", "check_choice",
           "check_number", "validate_params"]
