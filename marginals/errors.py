"""The error hierarchy every marg layer raises, and the exit code each maps to.

Library code raises :class:`MargError` subclasses with a one-line message that names the
problem and the offending value; the CLI turns them into one line on stderr and an exit
code (``InputError`` → 2, ``RefusedError`` → 1).
"""

from __future__ import annotations


class MargError(Exception):
    """Base class of all marg errors. ``exit_code`` is what the CLI exits with."""

    exit_code = 2


class InputError(MargError, ValueError):
    """Bad input: malformed file, unknown level, schema mismatch, NaN, wrong label, ..."""

    exit_code = 2


class RefusedError(MargError):
    """A refused operation: budget exhausted, bad or missing signature, unknown signer."""

    exit_code = 1
