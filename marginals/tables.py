"""Marginal count tables over cliques of attributes, and how to count them fast.

A :class:`MarginalTable` is a count array over a clique of discrete attributes (features
and/or the label), e.g. ``N[x_i, y]`` or ``N[x_i, x_j, y]``, with the :class:`NoiseRecord`
of its release. Cliques are stored in canonical order: features in codebook order, the
label last. For a raw numeric feature ``f`` the site releases a *moment* table
(``kind="moments"``, clique ``(f, label)``) of shape (2, K): row 0 the per-class sums of
the clipped values, row 1 the per-class sums of their squares.

Counting is vectorised: a clique's codes are combined into one flat index
(``ravel_multi_index``) and counted with ``np.bincount``; all first-order-with-label tables
are counted together in one bincount over offset codes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from typing import Iterable, Sequence

import numpy as np

from .codebook import Codebook
from marg.errors import InputError
from .noise import NoiseRecord

KINDS = ("counts", "moments")
STATS = ("first", "pairs", "all")


@dataclass(frozen=True)
class MarginalTable:
    """A released count table.

    Attributes
    ----------
    clique : tuple of str
        Attribute names, canonical order (codebook order, label last).
    counts : ndarray
        Shape = the attributes' domain sizes (``kind="counts"``), or (2, K) for moments.
    noise : NoiseRecord
    kind : {"counts", "moments"}
    """

    clique: tuple[str, ...]
    counts: np.ndarray
    noise: NoiseRecord = field(default_factory=NoiseRecord.exact)
    kind: str = "counts"

    def __post_init__(self) -> None:
        object.__setattr__(self, "clique", tuple(self.clique))
        if not self.clique:
            raise InputError("a marginal table needs a non-empty clique")
        if len(set(self.clique)) != len(self.clique):
            raise InputError(f"clique {self.clique!r} repeats an attribute")
        if self.kind not in KINDS:
            raise InputError(f"unknown table kind {self.kind!r}")
        arr = np.asarray(self.counts)
        if arr.dtype.kind not in "iuf":
            raise InputError(f"table {self.name}: counts must be numeric, got dtype {arr.dtype}")
        if self.kind == "counts" and arr.ndim != len(self.clique):
            raise InputError(f"table {self.name}: {arr.ndim}-d counts for a {len(self.clique)}-attribute clique")
        if self.kind == "moments" and (arr.ndim != 2 or arr.shape[0] != 2 or len(self.clique) != 2):
            raise InputError(f"table {self.name}: a moment table has clique (feature, label) and shape (2, K)")
        if not np.all(np.isfinite(arr)):
            raise InputError(f"table {self.name}: counts contain NaN or infinity")
        object.__setattr__(self, "counts", arr)

    @property
    def name(self) -> str:
        return ("moments:" if self.kind == "moments" else "N[") + ",".join(self.clique) + ("" if self.kind == "moments" else "]")

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.counts.shape)

    @property
    def total(self) -> float:
        return float(self.counts.sum()) if self.kind == "counts" else float("nan")

    def marginal(self, names: Sequence[str]) -> np.ndarray:
        """Counts over the sub-clique ``names`` (axes in the order given)."""
        if self.kind != "counts":
            raise InputError(f"cannot marginalise moment table {self.name}")
        names = tuple(names)
        missing = [a for a in names if a not in self.clique]
        if missing:
            raise InputError(f"table {self.name} has no attribute {missing[0]!r}")
        drop = tuple(k for k, a in enumerate(self.clique) if a not in names)
        arr = self.counts.sum(axis=drop) if drop else self.counts
        kept = [a for a in self.clique if a in names]
        return np.transpose(arr, [kept.index(a) for a in names])


def canonical_clique(codebook: Codebook, names: Iterable[str]) -> tuple[str, ...]:
    """Sort attribute names into canonical order (codebook order, label last)."""
    names = list(names)
    lab = codebook.label.name
    for nm in names:
        if nm != lab:
            codebook.index(nm)
    feats = sorted((nm for nm in names if nm != lab), key=codebook.index)
    return tuple(feats) + ((lab,) if lab in names else ())


def parse_pairs(codebook: Codebook, spec: str) -> list[tuple[str, str]]:
    """Parse ``"a:b,c:d"`` into canonical feature pairs; InputError on a bad item."""
    pairs: list[tuple[str, str]] = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        parts = item.split(":")
        if len(parts) != 2 or not parts[0].strip() or not parts[1].strip():
            raise InputError(f"bad pair {item!r} in --pairs (expected name:name)")
        a, b = parts[0].strip(), parts[1].strip()
        if a == b:
            raise InputError(f"bad pair {item!r} in --pairs: a feature paired with itself")
        for nm in (a, b):
            if not codebook.feature(nm).is_discrete:
                raise InputError(f"feature {nm!r} in --pairs is raw numeric; pair tables need discrete features")
        pair = canonical_clique(codebook, (a, b))
        if pair not in pairs:
            pairs.append(pair)  # type: ignore[arg-type]
    if not pairs:
        raise InputError(f"--pairs {spec!r} names no pair")
    return pairs


def plan_cliques(codebook: Codebook, stats: str = "first", pairs: Sequence[tuple[str, str]] | None = None) -> list[tuple[str, ...]]:
    """The cliques a site releases for a ``--stats`` choice.

    ``first``: ``N[y]`` and ``N[x_i, y]`` for every discrete feature (moments for raw numeric
    ones); ``pairs``: first plus ``N[x_i, x_j, y]`` for the given pairs (all pairs if none);
    ``all``: first plus ``N[x_i, x_j, y]`` for every pair of discrete features.
    """
    if stats not in STATS:
        raise InputError(f"unknown --stats {stats!r} (expected one of {', '.join(STATS)})")
    lab = codebook.label.name
    out: list[tuple[str, ...]] = [(lab,)]
    for f in codebook.features:
        out.append((f.name, lab))
    if stats == "first":
        if pairs:
            raise InputError("--pairs needs --stats pairs")
        return out
    disc = codebook.discrete_names
    if stats == "all":
        if pairs:
            raise InputError("--pairs cannot be combined with --stats all (all pairs are released)")
        chosen = list(combinations(disc, 2))
    else:
        chosen = list(pairs) if pairs else list(combinations(disc, 2))
    out.extend((a, b, lab) for a, b in chosen)
    return out


class TableCounter:
    """Accumulates the tables of a clique plan over encoded chunks.

    Parameters
    ----------
    codebook : Codebook
    cliques : list of tuple of str
        Canonical cliques (from :func:`plan_cliques`); a clique ``(f, label)`` with ``f``
        raw numeric accumulates a moment table.
    """

    def __init__(self, codebook: Codebook, cliques: Sequence[tuple[str, ...]]):
        self.codebook = codebook
        self.cliques = [canonical_clique(codebook, c) for c in cliques]
        lab = codebook.label.name
        K = codebook.n_classes
        self.n_rows = 0
        self._acc: dict[tuple[str, ...], np.ndarray] = {}
        self._kind: dict[tuple[str, ...], str] = {}
        first_disc: list[str] = []
        for c in self.cliques:
            feats = [a for a in c if a != lab]
            if any(not codebook.feature(a).is_discrete for a in feats):
                if len(c) != 2 or lab not in c:
                    raise InputError(f"clique {c!r}: raw numeric features are released only as (feature, label) moments")
                self._kind[c] = "moments"
                self._acc[c] = np.zeros((2, K), dtype=np.float64)
                continue
            self._kind[c] = "counts"
            shape = tuple(codebook.attribute_size(a) for a in c)
            self._acc[c] = np.zeros(shape, dtype=np.int64)
            if len(c) == 2 and c[1] == lab:
                first_disc.append(c[0])
        # All first-order-with-label tables are counted in a single bincount.
        self._first = [codebook.index(a) for a in first_disc]
        self._first_names = first_disc
        sizes = np.array([codebook.n_levels(i) for i in self._first], dtype=np.int64)
        self._first_off = np.concatenate([[0], np.cumsum(sizes)])
        self._first_total = int(self._first_off[-1])

    def add(self, X: np.ndarray, y: np.ndarray) -> None:
        """Count one encoded chunk (X: (n, p) codes/values, y: (n,) class codes)."""
        cb = self.codebook
        lab = cb.label.name
        K = cb.n_classes
        n = X.shape[0]
        if n == 0:
            return
        self.n_rows += n
        y = np.asarray(y, dtype=np.int64)
        if self._first:
            codes = X[:, self._first].astype(np.int64) + self._first_off[:-1][None, :]
            flat = (codes * K + y[:, None]).ravel()
            cnt = np.bincount(flat, minlength=self._first_total * K)
            for j, nm in enumerate(self._first_names):
                lo, hi = self._first_off[j] * K, self._first_off[j + 1] * K
                self._acc[(nm, lab)] += cnt[lo:hi].reshape(-1, K)
        for c, acc in self._acc.items():
            kind = self._kind[c]
            if kind == "moments":
                v = X[:, cb.index(c[0])]
                acc[0] += np.bincount(y, weights=v, minlength=K)
                acc[1] += np.bincount(y, weights=v * v, minlength=K)
                continue
            if len(c) == 2 and c[1] == lab and c[0] in self._first_names:
                continue  # done above
            cols = [y if a == lab else X[:, cb.index(a)].astype(np.int64) for a in c]
            flat = np.ravel_multi_index(cols, acc.shape)
            acc += np.bincount(flat, minlength=acc.size).reshape(acc.shape)

    def tables(self) -> list[MarginalTable]:
        """The exact (noise-free) tables counted so far, in plan order."""
        return [
            MarginalTable(clique=c, counts=self._acc[c].copy(), noise=NoiseRecord.exact(), kind=self._kind[c])
            for c in self.cliques
        ]


def count_tables(codebook: Codebook, X: np.ndarray, y: np.ndarray, cliques: Sequence[tuple[str, ...]]) -> list[MarginalTable]:
    """Count the tables of ``cliques`` over in-memory codes (X: (n, p), y: (n,))."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    if X.ndim != 2 or X.shape[1] != codebook.n_features:
        raise InputError(f"X must have shape (n, {codebook.n_features}), got {X.shape}")
    if y.shape != (X.shape[0],):
        raise InputError(f"y must have shape ({X.shape[0]},), got {y.shape}")
    for i, f in enumerate(codebook.features):
        if f.is_discrete:
            col = X[:, i]
            bad = (col < 0) | (col >= f.n_levels) | (col != np.floor(col))
            if bad.any():
                k = int(np.flatnonzero(bad)[0])
                raise InputError(f"feature {f.name!r}: code {col[k]:g} at row {k + 1} is outside 0..{f.n_levels - 1}")
    if y.size and (y.min() < 0 or y.max() >= codebook.n_classes):
        k = int(np.flatnonzero((y < 0) | (y >= codebook.n_classes))[0])
        raise InputError(f"label code {y[k]} at row {k + 1} is outside 0..{codebook.n_classes - 1}")
    tc = TableCounter(codebook, cliques)
    tc.add(X, y)
    return tc.tables()
