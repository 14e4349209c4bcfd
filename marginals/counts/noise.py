"""Noise records: what mechanism perturbed a released statistic, at what scale and cost.

Every released table carries a :class:`NoiseRecord`. Exact (non-private) releases carry
``NoiseRecord.exact()``: mechanism ``"none"``, zero std and zero privacy cost.

A record's ``std`` is the exact standard deviation of the noise that was added — each noise
distribution's own fact (:mod:`marg.marginals.counts.noise_kinds`; ``laplace_std`` and ``gaussian_std``
are re-exported here):

- integer count tables get **discrete** noise (OpenDP samples the discrete Laplace /
  discrete Gaussian on integer inputs): for the discrete Laplace of scale ``b``,
  ``P(Z=z) ∝ exp(−|z|/b)`` and ``Var Z = 2q/(1−q)²`` with ``q = exp(−1/b)``; for the
  discrete Gaussian of scale ``σ``, ``P(Z=z) ∝ exp(−z²/(2σ²))`` and the variance is the
  (rapidly converging) sum ``Σ z² P(Z=z)``;
- float statistics get continuous noise: ``Var = 2b²`` (Laplace), ``σ²`` (Gaussian).

A moment table (``kind="moments"``, shape (2, K): per-class sums of a raw numeric feature
clipped to ``[lo, hi]``, then of its squares) is released on the normalised scale
``B = max(|lo|, |hi|)``: row 0 divided by ``B`` and row 1 by ``B²``, both rows together
as one vector (L1 sensitivity 2, L2 sensitivity √2), then scaled back. Its record's
``scale`` and ``std`` are in the units of **row 0** (the sums); the noise std of row 1
(the sums of squares) is ``std · B``. :func:`cell_noise_std` returns the per-cell std
array for any table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from marg.errors import InputError

from .noise_kinds import NOISES, gaussian_std, laplace_std  # noqa: F401  (the variance facts: each noise's own)

if TYPE_CHECKING:  # pragma: no cover
    from ..data.codebook import Codebook

@dataclass(frozen=True)
class NoiseRecord:
    """How one released statistic was perturbed.

    Attributes
    ----------
    mechanism : {"none", "laplace", "gaussian", …}
        ``"none"`` or a registered noise (:mod:`marg.marginals.counts.noise_kinds`).
    scale : float
        Mechanism scale parameter (Laplace b, or Gaussian sigma), per cell.
    std : float
        Standard deviation of the noise added to each cell (continuous Laplace:
        ``sqrt(2)·b``; continuous Gaussian: ``sigma``; the discrete versions used on
        integer counts: see :func:`laplace_std` / :func:`gaussian_std`). For a moment
        table: the std on the sums row (row 1 has ``std · B``, see the module docstring).
    epsilon : float
        Pure-DP cost (Laplace) or the (ε, δ) conversion of a zCDP cost; 0 if exact.
    delta : float
        δ of the (ε, δ) report; 0 for pure DP.
    rho : float
        zCDP cost (Gaussian); 0 otherwise.
    parts : tuple of (mechanism, scale, discrete, count)
        For a table summed over sites: the independent draws in each cell, per site
        (:mod:`marginals.noise_tails` bounds their sum exactly). Empty for one site's
        release: one draw of ``mechanism`` at ``scale`` (discrete on count tables).
    threshold, n_sites : int
        A shared noise (:mod:`marg.marginals.shared_noise`): the secure-aggregation threshold t and
        the sites of the round whose secure sum of at least t shares carries the recorded ρ; 0 for
        every other release (and then not written).
    """

    mechanism: str = "none"
    scale: float = 0.0
    std: float = 0.0
    epsilon: float = 0.0
    delta: float = 0.0
    rho: float = 0.0
    parts: tuple = ()
    threshold: int = 0
    n_sites: int = 0

    def __post_init__(self) -> None:
        if self.mechanism != "none" and self.mechanism not in NOISES:
            raise InputError(f"unknown noise mechanism {self.mechanism!r} (expected one of none, {', '.join(NOISES)})")
        for field in ("scale", "std", "epsilon", "delta", "rho"):
            v = getattr(self, field)
            if not (v >= 0.0) or v != v or v == float("inf"):
                raise InputError(f"noise record field {field} must be finite and >= 0, got {v!r}")
        if self.mechanism == "none" and (self.std != 0.0 or self.scale != 0.0):
            raise InputError("an exact release (mechanism 'none') cannot carry noise std/scale")
        for field in ("threshold", "n_sites"):
            v = getattr(self, field)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise InputError(f"noise record field {field} must be an integer >= 0, got {v!r}")
        if self.threshold > self.n_sites:
            raise InputError(f"noise record threshold {self.threshold} exceeds its n_sites {self.n_sites}")
        for part in self.parts:
            ok = (isinstance(part, tuple) and len(part) == 4 and part[0] in NOISES and float(part[1]) > 0
                  and isinstance(part[2], bool) and isinstance(part[3], int) and part[3] > 0)
            if not ok:
                raise InputError(f"malformed noise part {part!r} (expected (mechanism, scale > 0, discrete, count > "
                                 "0))")

    def draws(self, discrete: bool) -> tuple:
        """The independent draws in one cell: ``parts``, or this record's one draw."""
        if self.is_exact:
            return ()
        return self.parts or ((self.mechanism, float(self.scale), bool(discrete), 1),)

    @classmethod
    def exact(cls) -> "NoiseRecord":
        """The exact record (no noise): one shared instance (it is frozen), not one validated per table."""
        return _EXACT if cls is NoiseRecord else cls()

    @property
    def is_exact(self) -> bool:
        return self.mechanism == "none"

    def to_dict(self) -> dict[str, Any]:
        """The record's fields as a JSON-ready dict (``parts`` only when there are any; what
        ``dataclasses.asdict`` gives, without its deep copy: a bundle has one per table)."""
        d = {"mechanism": self.mechanism, "scale": self.scale, "std": self.std, "epsilon": self.epsilon,
             "delta": self.delta, "rho": self.rho}
        if self.parts:
            d["parts"] = [list(p) for p in self.parts]
        for field in ("threshold", "n_sites"):  # a shared noise's only: other records are written as before
            if getattr(self, field):
                d[field] = getattr(self, field)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "NoiseRecord":
        if cls is NoiseRecord and d == _EXACT_DICT:  # an exact table's record (a bundle of 20,000 has 20,000)
            return _EXACT
        try:
            return cls(
                mechanism=str(d.get("mechanism", "none")),
                scale=float(d.get("scale", 0.0)),
                std=float(d.get("std", 0.0)),
                epsilon=float(d.get("epsilon", 0.0)),
                delta=float(d.get("delta", 0.0)),
                rho=float(d.get("rho", 0.0)),
                parts=tuple((str(m), float(b), bool(di), int(c)) for m, b, di, c in d.get("parts", ())),
                threshold=int(d.get("threshold", 0)),
                n_sites=int(d.get("n_sites", 0)),
            )
        except (TypeError, ValueError) as exc:
            raise InputError(f"malformed noise record {d!r}: {exc}") from None


_EXACT = NoiseRecord()
_EXACT_DICT = _EXACT.to_dict()


def moment_bound(codebook: "Codebook", feature: str) -> float:
    """``B = max(|lo|, |hi|)``: the largest |value| one row can add to a per-class sum of the
    raw numeric feature ``feature`` (its sum-of-squares row can move by at most ``B²``)."""
    f = codebook.feature(feature)
    if f.is_discrete or f.lo is None or f.hi is None:  # type: ignore[union-attr]
        raise InputError(f"feature {feature!r} is not a raw numeric feature with a public range")
    return max(abs(float(f.lo)), abs(float(f.hi)))  # type: ignore[union-attr,arg-type]


def cell_noise_std(table: Any, codebook: "Codebook | None" = None) -> np.ndarray:
    """Per-cell std of the released noise, same shape as ``table.counts``.

    Count tables: ``table.noise.std`` in every cell. Moment tables (shape (2, K)): row 0
    ``std``, row 1 ``std · B`` with ``B = max(|lo|, |hi|)`` of the feature (needs
    ``codebook``). Exact releases: zeros.
    """
    std = np.full(table.counts.shape, float(table.noise.std))
    if table.kind == "moments" and table.noise.std > 0.0:
        if codebook is None:
            raise InputError(f"table {table.name}: the noise std of a moment table needs the codebook")
        std[1, :] *= moment_bound(codebook, table.clique[0])
    return std
