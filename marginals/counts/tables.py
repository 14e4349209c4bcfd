"""Marginal count tables over cliques of attributes, and the plan of which tables a site releases.

A :class:`MarginalTable` is a count array over a clique of discrete attributes (features
and/or the label), e.g. ``N[x_i, y]`` or ``N[x_i, x_j, y]``, with the :class:`NoiseRecord`
of its release. Cliques are stored in canonical order: features in codebook order, the
label last. For a raw numeric feature ``f`` the site releases a *moment* table
(``kind="moments"``, clique ``(f, label)``) of shape (2, K): row 0 the per-class sums of
the clipped values, row 1 the per-class sums of their squares.

Which tables a site releases is its plan (:func:`plan_cliques`, :func:`parse_pairs`,
:func:`check_plan_size`); counting them fast is :mod:`marginals.counts.counting`'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import combinations
from typing import Iterable, Sequence

import numpy as np

from ..data.codebook import Codebook
from marg.errors import InputError
from .noise import NoiseRecord

KINDS = ("counts", "moments")


@dataclass(frozen=True)
class HiddenTail:
    """One site's class column of a table ``N[x, y]`` whose last levels min-cell suppression hid
    (:mod:`marg.marginals.suppression`): cells ``start … m−1`` of class ``cls`` hold ``rows`` patients
    in all, each anywhere in ``[0, rows]``; ``released`` is that site's column as released
    (shape (m,), 0 from ``start`` on), what a point estimate must not read as another site's shape.
    ``start = 0``: the whole column."""

    cls: int
    start: int
    rows: float
    released: tuple[float, ...]
STATS = ("first", "pairs", "pairs-only", "all")


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
    hidden : ndarray of shape (K,), optional
        Two-attribute tables ``N[x, y]`` (label last) only: per class, the rows that some site's
        release left out of the column (min-cell suppression hides a class column's tail,
        :mod:`marg.marginals.hidden`); they are not in ``counts``. None: nothing hidden.
    hidden_tails : tuple of HiddenTail
        Where those rows may be, one entry per site's hidden column (their ``rows`` add up to
        ``hidden`` class by class). Empty with ``hidden`` set: whole columns (``start = 0``).
    """

    clique: tuple[str, ...]
    counts: np.ndarray
    noise: NoiseRecord = field(default_factory=NoiseRecord.exact)
    kind: str = "counts"
    hidden: np.ndarray | None = None
    hidden_tails: tuple[HiddenTail, ...] = ()

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
        if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):  # integers are finite
            raise InputError(f"table {self.name}: counts contain NaN or infinity")
        object.__setattr__(self, "counts", arr)
        if self.hidden is not None:
            h = np.asarray(self.hidden, dtype=np.float64)
            if self.kind != "counts" or arr.ndim != 2 or h.shape != (arr.shape[1],) or not np.all(h >= 0):
                raise InputError(f"table {self.name}: hidden class-column counts must be >= 0, one per class of "
                                 f"a two-attribute count table, got shape {h.shape}")
            object.__setattr__(self, "hidden", h)
            m, K = arr.shape
            tails = tuple(self.hidden_tails) or tuple(HiddenTail(v, 0, float(h[v]), (0.0,) * m)
                                                      for v in range(K) if h[v] > 0)
            per = np.zeros(K)
            for p in tails:
                if not (0 <= p.cls < K and 0 <= p.start < m and len(p.released) == m and p.rows >= 0):
                    raise InputError(f"table {self.name}: a hidden tail outside the table's {m} levels and {K} classes")
                per[p.cls] += p.rows
            if not np.allclose(per, h, rtol=0.0, atol=1e-6):
                raise InputError(f"table {self.name}: hidden tails hold {per.tolist()} rows per class, hidden says "
                                 f"{h.tolist()}")
            object.__setattr__(self, "hidden_tails", tails)
        elif self.hidden_tails:
            raise InputError(f"table {self.name}: hidden tails without hidden rows")

    @property
    def name(self) -> str:
        return (("moments:" if self.kind == "moments" else "N[") + ",".join(self.clique)
                + ("" if self.kind == "moments" else "]"))

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


MAX_CLIQUE = 5  # features in one requested table (the boost learner's highest monomial order)


def parse_pairs(codebook: Codebook, spec: str) -> list[tuple[str, ...]]:
    """Parse ``"a:b,c:d"`` (pairs) or ``"a:b:c"`` (a table over 3 to 5 features, as a learner's
    request may ask) into canonical feature cliques; InputError on a bad item."""
    pairs: list[tuple[str, ...]] = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        parts = [x.strip() for x in item.split(":")]
        if not 2 <= len(parts) <= MAX_CLIQUE or not all(parts):
            raise InputError(f"bad pair {item!r} in --pairs (expected name:name, or up to {MAX_CLIQUE} names a:b:c)")
        if len(set(parts)) != len(parts):
            raise InputError(f"bad pair {item!r} in --pairs: a feature paired with itself")
        for nm in parts:
            if not codebook.feature(nm).is_discrete:
                raise InputError(f"feature {nm!r} in --pairs is raw numeric; pair tables need discrete features")
        pair = canonical_clique(codebook, tuple(parts))
        if pair not in pairs:
            pairs.append(pair)
    if not pairs:
        raise InputError(f"--pairs {spec!r} names no pair")
    return pairs


def plan_cliques(codebook: Codebook, stats: str = "first",
                 pairs: Sequence[tuple[str, ...]] | None = None) -> list[tuple[str, ...]]:
    """The cliques a site releases for a ``--stats`` choice.

    ``first``: ``N[y]`` and ``N[x_i, y]`` for every discrete feature (moments for raw numeric
    ones); ``pairs``: first plus ``N[x_i, x_j, y]`` for the given pairs (all pairs if none);
    ``all``: first plus ``N[x_i, x_j, y]`` for every pair of discrete features;
    ``pairs-only``: the given pairs' tables alone (round 2 of the two-round protocol: the
    first-order tables came in round 1). A given "pair" may list 3–5 features (a learner's
    request for higher-order tables, ``N[x_i, x_j, x_k, y]``).
    """
    if stats not in STATS:
        raise InputError(f"unknown --stats {stats!r} (expected one of {', '.join(STATS)})")
    lab = codebook.label.name
    if stats == "pairs-only":
        if not pairs:
            raise InputError("--stats pairs-only needs --pairs")
        return [(*c, lab) for c in pairs]
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
    out.extend((*c, lab) for c in chosen)
    return out


MAX_PLAN_CELLS = 1 << 28  # 268 M counts (2 GiB as int64): a release plan above this is refused before counting


def check_plan_size(codebook: Codebook, cliques: Sequence[tuple[str, ...]], max_cells: int = MAX_PLAN_CELLS) -> int:
    """The number of counts a plan releases; a one-line InputError naming the largest tables
    when it exceeds ``max_cells`` (before any memory is allocated or data read)."""
    lab = codebook.label.name
    sizes = []
    for c in cliques:
        raw = any(a != lab and not codebook.feature(a).is_discrete for a in c)
        cells = 2 * codebook.n_classes if raw else int(math.prod([float(codebook.attribute_size(a)) for a in c]))
        sizes.append((cells, c))
    total = sum(x for x, _ in sizes)
    if total > max_cells:
        big = sorted(sizes, reverse=True)[:2]
        named = ", ".join(f"N[{','.join(c)}] {x:,.0f} cells" for x, c in big)
        raise InputError(f"the release plan holds {total:,.0f} counts ({8 * total / 2**30:,.1f} GiB), over the limit "
                         f"of {max_cells:,} ({named}): ask for fewer pairs or coarser levels")
    return int(total)
