"""Private feature selection at a site: OpenDP's noisy top-k on each feature's dependence score.

Round 1 of the select-then-measure path (:mod:`marg.marginals.study`) asks each site which
features carry the label, without releasing a table per feature. The site scores every
discrete feature by the **best single-feature rule's correct count**

    s_i = Σ_x max_y N[x_i = x, y]          (rows a rule reading x_i alone gets right)

and releases only the indices of the k largest scores, chosen by OpenDP's
``make_noisy_top_k`` (the exponential mechanism run k times without replacement, Gumbel
noise of ``scale`` on each score; Durfee and Rogers 2019, McKenna and Sheldon 2020) under
zero-concentrated DP. Its cost grows with k, not with the p candidates.

**Sensitivity.** Adding or removing one row changes one cell of every table N[x_i, y] by 1,
so every s_i moves by at most 1, all in the same direction (adding a row never lowers a
score): the score vector has L∞ sensitivity 1 and is *monotonic*, the case where OpenDP
charges half. A privacy unit of r rows (several rows per patient) moves every score by at
most r: ``sensitivity=r``. The cost is **OpenDP's own map** of the measurement at that
sensitivity — ρ = k·(Δ/scale)²/8 for the monotonic zCDP top-k — never a formula of ours:
the scale is calibrated until the map is at most the share, and the ledger is charged the
map (:func:`marg.marginals.accounting.release_cost` composes it with the tables' ρ).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from marg.errors import InputError

from .counts.dp_conversions import MAX_NOISE_SCALE, calibrated, dp_prelude

MECHANISM = "noisy-top-k"
"""The name a selection carries in the bundle, the ledger's cost and :func:`release_cost` (a zCDP part)."""
SCORE = "best single-feature rule's correct count: sum_x max_y N[x_i = x, y]"


def feature_scores(tables: Sequence[Any], names: Sequence[str], label: str) -> np.ndarray:
    """The score s_i of each feature in ``names`` from its exact first-order count table.

    Parameters
    ----------
    tables : sequence of MarginalTable
        Exact count tables holding ``N[x_i, y]`` (clique ``(x_i, label)``) for every name.
    names : sequence of str, shape (p,)
    label : str

    Returns
    -------
    ndarray, shape (p,)
        ``s_i = Σ_x max_y N[x_i = x, y]`` (float).
    """
    by = {t.clique: t for t in tables if t.kind == "counts"}
    out = np.empty(len(names), dtype=np.float64)
    for i, a in enumerate(names):
        t = by.get((a, label))
        if t is None:
            raise InputError(f"selection needs the table N[{a},{label}], which was not counted")
        out[i] = float(np.asarray(t.counts, dtype=np.float64).reshape(-1, np.shape(t.counts)[-1]).max(axis=1).sum())
    return out


def top_k_measurement(k: int, scale: float):
    """OpenDP's noisy top-k over a float score vector: monotonic L∞ input, zCDP output."""
    dp = dp_prelude()
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.linf_distance(T=float, monotonic=True)
    return dp.m.make_noisy_top_k(*space, dp.zero_concentrated_divergence(), k=int(k), scale=float(scale))


def calibrate_top_k(k: int, rho: float, sensitivity: float = 1.0) -> tuple[float, Any, float]:
    """(scale, measurement, ρ) of the top-k whose OpenDP map at ``sensitivity`` is at most ``rho``.

    Starts at the scale where the map equals ``rho`` (Δ·sqrt(k/(8ρ))) and nudges it up while
    OpenDP's conservative arithmetic puts the map above the share.
    """
    if not (rho > 0.0 and math.isfinite(rho)):
        raise InputError(f"the selection's ρ share must be finite and > 0, got {rho!r}")
    if not (sensitivity > 0.0 and math.isfinite(sensitivity)):
        raise InputError(f"the selection's sensitivity must be finite and > 0, got {sensitivity!r}")
    scale = float(sensitivity) * math.sqrt(k / (8.0 * rho))
    if not scale <= MAX_NOISE_SCALE:
        raise InputError(f"the selection's ρ share {rho:.3g} needs Gumbel noise of scale {scale:.3g}: give a larger "
                         "--epsilon")
    return calibrated(lambda s: top_k_measurement(k, s), scale, float(sensitivity), rho,
                      lambda s: f"the noisy top-{k} at scale {s:.3g}")


@dataclass(frozen=True)
class Selection:
    """One site's private selection, as its bundle records it.

    Attributes
    ----------
    features : tuple of str
        The k features chosen, best (noisy) score first.
    candidates : int
        The p discrete features it chose among.
    scale : float
        The Gumbel noise scale on each score.
    sensitivity : float
        The scores' L∞ sensitivity the cost was computed at (rows per privacy unit).
    rho : float
        Its zCDP cost, OpenDP's map of the measurement at ``sensitivity``.
    """

    features: tuple[str, ...]
    candidates: int
    scale: float
    sensitivity: float
    rho: float

    @property
    def measures_all(self) -> bool:
        """Whether the site ranked every candidate (k = p: the split rule's "measure every candidate"), dropping
        none."""
        return len(self.features) == self.candidates

    def cost_part(self, delta: float) -> tuple[str, float, float, float]:
        """Its part for :func:`marg.marginals.accounting.release_cost` (a zCDP release)."""
        return (MECHANISM, 0.0, self.rho, float(delta))

    def to_dict(self) -> dict[str, Any]:
        return {"mechanism": MECHANISM, "opendp": "make_noisy_top_k(linf_distance(monotonic=True), zCDP)",
                "score": SCORE, "features": list(self.features), "k": len(self.features),
                "candidates": self.candidates, "scale": self.scale, "sensitivity": self.sensitivity, "rho": self.rho}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Selection":
        try:
            return cls(tuple(str(a) for a in d["features"]), int(d["candidates"]), float(d["scale"]),
                       float(d["sensitivity"]), float(d["rho"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"malformed selection record ({exc!r})") from None


def select_top_k(tables: Sequence[Any], names: Sequence[str], label: str, k: int, rho: float,
                 sensitivity: float = 1.0) -> Selection:
    """Score ``names`` from their exact first-order tables and choose k by OpenDP's noisy top-k at ``rho``.

    Returns
    -------
    Selection
        The chosen features (best first) and the cost OpenDP's map gives.
    """
    names = list(names)
    if not names:
        raise InputError("no discrete feature to select from")
    k = max(1, min(int(k), len(names)))
    scores = feature_scores(tables, names, label)
    scale, meas, cost = calibrate_top_k(k, rho, sensitivity)
    idx = [int(i) for i in meas(scores.tolist())]
    return Selection(tuple(names[i] for i in idx), len(names), scale, float(sensitivity), cost)
