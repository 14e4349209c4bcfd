"""The error hierarchy every marg layer raises, and the exit code each maps to.

Library code raises :class:`MargError` subclasses with a one-line message that names the
problem and the offending value; the CLI turns them into one line on stderr and an exit
code:

====================================  ====  =============================================
error                                 exit  meaning
====================================  ====  =============================================
:class:`InputError`                   2     bad input: malformed file, unknown level, ...
:class:`InconsistentStatistics`       2     the released statistics admit no distribution
:class:`NotFittedError`               2     a model used before it was fitted
:class:`RefusedError`                 1     refused: budget exhausted, bad signature, ...
:class:`SolverError`                  3     the optimisation solver failed
====================================  ====  =============================================

A message that tells the user which setting to change names it through :func:`option`, not
as a command-line flag: ``str(error)`` (what a notebook shows) writes it as the Python keyword
(``allow_unsigned=True``), :meth:`MargError.cli_message` (what ``marg`` prints) as the flag
(``--allow-unsigned``).
"""

from __future__ import annotations

import re

_OPTION = re.compile(r"\u27e6([a-z_][a-z0-9_]*)(?:=([^\u27e7]*))?\u27e7")


def option(name: str, value: object = None) -> str:
    """A reference to the setting ``name`` (a Python keyword; its flag is ``--name-with-dashes``)
    in an error message, optionally with the value to give it.

    Examples: ``option("key")`` reads ``key=…`` in Python and ``--key`` on the command line;
    ``option("allow_unsigned", True)`` reads ``allow_unsigned=True`` and ``--allow-unsigned``;
    ``option("select", "gbd")`` reads ``select='gbd'`` and ``--select gbd``.
    """
    return f"\u27e6{name}" + ("" if value is None else f"={value!r}") + "\u27e7"


def render(message: str, cli: bool) -> str:
    """``message`` with its :func:`option` references written for Python or for the command line."""
    def one(m: re.Match) -> str:
        name, val = m.group(1), m.group(2)
        if not cli:
            return f"{name}={val if val is not None else '…'}"
        flag = "--" + name.replace("_", "-")
        if val is None or val == "True":
            return flag
        return f"{flag} {val.strip(chr(39))}"

    return _OPTION.sub(one, message)


class MargError(Exception):
    """Base class of all marg errors. ``exit_code`` is what the CLI exits with.

    ``str(error)`` is the message for a Python caller; :meth:`cli_message` the same message
    with its setting references as command-line flags (:func:`option`).
    """

    exit_code = 2

    def __str__(self) -> str:
        return render(super().__str__(), cli=False)

    def cli_message(self) -> str:
        return render(super().__str__(), cli=True)


class InputError(MargError, ValueError):
    """Bad input: malformed file, unknown level, schema mismatch, NaN, wrong label, ..."""

    exit_code = 2


class InconsistentStatistics(InputError):
    """The statistics (with their intervals) admit no distribution: the data's fault, not the solver's."""


class NotFittedError(InputError):
    """An estimator was asked to predict or report before ``fit``."""


class RefusedError(MargError):
    """A refused operation: budget exhausted, bad or missing signature, unknown signer."""

    exit_code = 1


class SolverError(MargError):
    """The LP/MILP solver failed (numerical trouble, not the data's fault)."""

    exit_code = 3
