"""Noise records: what mechanism perturbed a released statistic, at what scale and cost.

Every released table carries a :class:`NoiseRecord`. Exact (non-private) releases carry
``NoiseRecord.exact()``: mechanism ``"none"``, zero std and zero privacy cost.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from .errors import InputError

MECHANISMS = ("none", "laplace", "gaussian")


@dataclass(frozen=True)
class NoiseRecord:
    """How one released statistic was perturbed.

    Attributes
    ----------
    mechanism : {"none", "laplace", "gaussian"}
    scale : float
        Mechanism scale parameter (Laplace b, or Gaussian sigma), per cell.
    std : float
        Standard deviation of the noise added to each cell (Laplace: ``sqrt(2)·b``;
        Gaussian: ``sigma``).
    epsilon : float
        Pure-DP cost (Laplace) or the (ε, δ) conversion of a zCDP cost; 0 if exact.
    delta : float
        δ of the (ε, δ) report; 0 for pure DP.
    rho : float
        zCDP cost (Gaussian); 0 otherwise.
    """

    mechanism: str = "none"
    scale: float = 0.0
    std: float = 0.0
    epsilon: float = 0.0
    delta: float = 0.0
    rho: float = 0.0

    def __post_init__(self) -> None:
        if self.mechanism not in MECHANISMS:
            raise InputError(f"unknown noise mechanism {self.mechanism!r} (expected one of {', '.join(MECHANISMS)})")
        for field in ("scale", "std", "epsilon", "delta", "rho"):
            v = getattr(self, field)
            if not (v >= 0.0) or v != v or v == float("inf"):
                raise InputError(f"noise record field {field} must be finite and >= 0, got {v!r}")
        if self.mechanism == "none" and (self.std != 0.0 or self.scale != 0.0):
            raise InputError("an exact release (mechanism 'none') cannot carry noise std/scale")

    @classmethod
    def exact(cls) -> "NoiseRecord":
        return cls()

    @property
    def is_exact(self) -> bool:
        return self.mechanism == "none"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "NoiseRecord":
        try:
            return cls(
                mechanism=str(d.get("mechanism", "none")),
                scale=float(d.get("scale", 0.0)),
                std=float(d.get("std", 0.0)),
                epsilon=float(d.get("epsilon", 0.0)),
                delta=float(d.get("delta", 0.0)),
                rho=float(d.get("rho", 0.0)),
            )
        except (TypeError, ValueError) as exc:
            raise InputError(f"malformed noise record {d!r}: {exc}") from None
