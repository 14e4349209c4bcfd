"""The learner-side quantities of a Summary over ALL its features, for tests: τ, its std, λ, Q, d, blocks."""

from __future__ import annotations

import numpy as np

from marg.learners.features.calibration import confidence_box
from marg.learners.features.blocks import FeatureMap, node_blocks
from marg.learners.features.quadratic import label_contrast, second_moments
from marg.learners.features.statistics import map_moments


def blocks_of(S):
    """Ψ's node blocks over every feature, codebook order."""
    return node_blocks(S.codebook)


def node_map(S, features=None) -> FeatureMap:
    blocks = node_blocks(S.codebook, features)
    return FeatureMap(blocks, [b.column for b in blocks])


def psi_dim_of(S) -> int:
    return node_map(S).dim


def tau_of(S) -> np.ndarray:
    """(K, D) τ of the first-order map over every feature."""
    return map_moments(S, node_map(S)).tau


def tau_std_of(S) -> np.ndarray:
    return map_moments(S, node_map(S)).std


def noise_std_of(S) -> np.ndarray:
    return map_moments(S, node_map(S)).noise


def lam_of(S, s=None, coverage: float = 0.95, features=None) -> np.ndarray:
    """λ of the first-order map (over ``features``, default all) as the MRC computes it."""
    fm = node_map(S, features)
    return confidence_box(map_moments(S, fm), fm.indicator_columns(), s=s, coverage=coverage).lam


def Q_of(S) -> np.ndarray:
    return second_moments(S)


def d_of(S, positive=None) -> np.ndarray:
    return label_contrast(S, positive)
