"""A stand-in for a fitted estimator where only the certificate a chooser gives it matters (the
final choice's and the holdout bound's tests): attributes as given, and ``set_certificate``, the one
way code outside an estimator sets ``certificate_``."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any


class StandIn(SimpleNamespace):
    """``SimpleNamespace`` with :meth:`set_certificate` (no validation: the tests check the bound, not the
    estimator)."""

    def set_certificate(self, certificate: Any) -> "StandIn":
        self.certificate_ = certificate
        return self
