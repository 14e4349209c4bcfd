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
"""

from __future__ import annotations


class MargError(Exception):
    """Base class of all marg errors. ``exit_code`` is what the CLI exits with."""

    exit_code = 2


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
