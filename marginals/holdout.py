"""A site's held-out rows: a seeded split of the data rows, decided row by row and remembered locally.

``marg export --holdout F`` leaves a fraction F of the site's rows out of every released
table. Which rows: row r (1-based data-row number) is held out iff ``u(seed, r) < F`` with
``u`` the SplitMix64 hash of ``seed + r`` mapped to [0, 1) — a pure function of the row
number, so the split is the same however the file is chunked, and independent of the data.
The seed is drawn at export time and stored **only at the site**, in ``holdout.json`` beside
the ledger (:func:`remember`), together with the row counts; ``marg export --evaluate
MODEL`` recomputes the same split on the same file, refuses if the counts differ (the data
changed), and releases the model's confusion matrix on the held-out rows with DP noise.
Those rows never entered the training release, so the error measured on them is an
unbiased estimate of the model's error on the sites' population, and its confidence bound
a valid certificate of that error (:mod:`marg.learners.holdout_certificate`).
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from marg._util import atomic_write_bytes, canonical_json
from marg.errors import InputError

HOLDOUT_FILE = "holdout.json"
_MASK64 = (1 << 64) - 1


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser of uint64 ``x`` (vectorised; wraps modulo 2⁶⁴)."""
    z = x + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@dataclass(frozen=True)
class Holdout:
    """The split: ``fraction`` ∈ (0, 1) of the rows held out, chosen by ``seed`` (0 ≤ seed < 2⁶⁴)."""

    fraction: float
    seed: int

    def __post_init__(self) -> None:
        if not (0.0 < float(self.fraction) < 1.0):
            raise InputError(f"--holdout must be a fraction in (0, 1), got {self.fraction!r}")
        if not (isinstance(self.seed, int) and 0 <= self.seed <= _MASK64):
            raise InputError(f"holdout seed must be an integer in [0, 2^64), got {self.seed!r}")

    @classmethod
    def new(cls, fraction: float) -> "Holdout":
        return cls(float(fraction), secrets.randbits(64))

    def mask(self, start_row: int, n: int) -> np.ndarray:
        """Held-out flags (n,) bool of data rows ``start_row … start_row + n − 1``."""
        rows = np.arange(start_row, start_row + n, dtype=np.uint64)
        with np.errstate(over="ignore"):
            h = _splitmix64(rows + np.uint64(self.seed))
        u = (h >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))
        return u < self.fraction


def record_path(ledger_dir: str | os.PathLike[str]) -> Path:
    return Path(ledger_dir) / HOLDOUT_FILE


def remember(ledger_dir: str | os.PathLike[str], fingerprint: str, site: str, spec: Holdout,
             n_rows: int, n_held: int) -> None:
    """Store the split of this study's export at this site (atomically; replaces an earlier one)."""
    path = record_path(ledger_dir)
    data: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    data[f"{fingerprint}:{site}"] = {"fraction": spec.fraction, "seed": spec.seed, "n_rows": int(n_rows),
                                     "n_held": int(n_held)}
    atomic_write_bytes(path, canonical_json(data))


def recall(ledger_dir: str | os.PathLike[str], fingerprint: str, site: str) -> tuple[Holdout, int, int]:
    """The split remembered for this study and site, with its (rows, held-out rows) counts."""
    path = record_path(ledger_dir)
    if not path.exists():
        raise InputError(f"no held-out rows are recorded in {path.parent} (export with --holdout F first)")
    try:
        rec = json.loads(path.read_text())[f"{fingerprint}:{site}"]
    except (KeyError, ValueError):
        raise InputError(f"{path}: no holdout recorded for site {site!r} under codebook {fingerprint[:16]}…") from None
    return Holdout(float(rec["fraction"]), int(rec["seed"])), int(rec["n_rows"]), int(rec["n_held"])


def select(enc: Any, keep: np.ndarray) -> Any:
    """The rows of an encoded chunk where ``keep`` (n,) is True, as a new chunk."""
    from .encoding import Encoded

    parts = [enc.column(i)[keep] for i in range(len(enc.parts))]
    return Encoded(parts, None if enc.y is None else enc.y[keep], enc.start_row, int(keep.sum()))
