"""The Summary: everything a learner may know about the data, derived from count tables.

Built from (aggregated) marginal tables under one codebook, a Summary exposes the design
card's quantities and never any row:

- the feature map layout: Ψ(x) is the concatenation of a one-hot block per discrete
  feature (m_i columns) and one column per raw numeric feature; Φ(x, y) = e_y ⊗ Ψ(x) is
  laid out as a (K, D) array;
- ``tau``  (K, D): τ[y, j] = E[1{Y=y} Ψ_j(X)] = N[x_i=a, y] / n for one-hot columns;
- ``tau_std`` (K, D): the sample std of each Φ entry, sqrt(τ(1−τ)) for one-hot columns
  (so λ = s·tau_std/sqrt(n) needs no extra statistic);
- ``noise_std`` (K, D): the std of the released noise on each τ entry, in τ units;
- ``Q`` (M, M) over the discrete features (M = Σ m_i): block (i, j) = P(X_i=a, X_j=b),
  diagonal block i = diag P(X_i=a); singular by construction (rank Σm_i − d + 1);
- ``d(c)`` (M,): P(X_i=a, Y=1) − P(X_i=a, Y=0) for binary labels; one-vs-rest with c.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from itertools import combinations
from typing import Any, Sequence

import numpy as np

from .codebook import Codebook
from marg.errors import InputError
from .noise import NoiseRecord
from .tables import MarginalTable, canonical_clique, count_tables, plan_cliques


@dataclass(frozen=True)
class FeatureBlock:
    """The columns of Ψ that belong to one feature.

    Attributes
    ----------
    name : str
    kind : {"onehot", "numeric"}
    size : int
        m_i for a one-hot block, 1 for a raw numeric feature.
    offset : int
        First column of the block in Ψ (or in Q/d for ``discrete_blocks``).
    levels : tuple of str
        Level names (one-hot blocks).
    lo, hi : float or None
        Public range of a raw numeric feature.
    """

    name: str
    kind: str
    size: int
    offset: int
    levels: tuple[str, ...] = ()
    lo: float | None = None
    hi: float | None = None

    @property
    def slice(self) -> slice:
        return slice(self.offset, self.offset + self.size)


def sum_tables(parts: Sequence[Sequence[MarginalTable]]) -> tuple[list[MarginalTable], list[str]]:
    """Aggregate several sites' tables: counts add up clique by clique.

    Only cliques released by every site are kept (the others are returned by name as
    ``dropped``). Noise stds add in quadrature (independent noise); the combined record
    keeps the largest per-site privacy cost, since sites hold disjoint patients.

    Returns
    -------
    tables : list of MarginalTable
    dropped : list of str
        Names of tables not released by all sites.
    """
    if not parts:
        raise InputError("nothing to aggregate: no tables")
    keyed = [{(t.clique, t.kind): t for t in p} for p in parts]
    common = [k for k in keyed[0] if all(k in kd for kd in keyed[1:])]
    dropped = sorted({MarginalTable(clique=k[0], counts=kd[k].counts, kind=k[1]).name for kd in keyed for k in kd if k not in common})
    out = []
    for k in common:
        ts = [kd[k] for kd in keyed]
        shapes = {t.shape for t in ts}
        if len(shapes) != 1:
            raise InputError(f"table {ts[0].name} has different shapes across sites: {sorted(shapes)}")
        counts = ts[0].counts.copy()
        for t in ts[1:]:
            counts = counts + t.counts
        noisy = [t.noise for t in ts if not t.noise.is_exact]
        if noisy:
            mechs = {r.mechanism for r in noisy}
            mech = noisy[0].mechanism if len(mechs) == 1 else "gaussian"
            rec = NoiseRecord(
                mechanism=mech,
                scale=max(r.scale for r in noisy),
                std=float(np.sqrt(sum(r.std**2 for r in noisy))),
                epsilon=max(r.epsilon for r in noisy),
                delta=max(r.delta for r in noisy),
                rho=max(r.rho for r in noisy),
            )
        else:
            rec = NoiseRecord.exact()
        out.append(MarginalTable(clique=ts[0].clique, counts=counts, noise=rec, kind=ts[0].kind))
    return out, dropped


class Summary:
    """Learner-side view of the data: n, τ, its std, Q, d, priors — from tables only.

    Parameters
    ----------
    codebook : Codebook
    tables : sequence of MarginalTable
        Must include a table containing the label and, for each feature, a table with
        ``(feature, label)`` (directly, or inside a pair-with-label table).
    provenance : dict, optional
        Sites, creation times, software versions, bundle digests.
    parent_fingerprint : str, optional
        Fingerprint of the full study codebook when this summary is a feature subset.
    postprocess : bool
        When some table carries DP noise, make the tables consistent and non-negative
        first (:func:`marginals.postprocess.postprocess_tables`; free under DP) and project
        Q onto the PSD cone. Default True.
    """

    def __init__(
        self,
        codebook: Codebook,
        tables: Sequence[MarginalTable],
        provenance: dict[str, Any] | None = None,
        parent_fingerprint: str | None = None,
        postprocess: bool = True,
    ):
        self.codebook = codebook
        self.provenance = dict(provenance or {})
        self.parent_fingerprint = parent_fingerprint
        self._tables: dict[tuple[tuple[str, ...], str], MarginalTable] = {}
        lab = codebook.label.name
        for t in tables:
            clique = canonical_clique(codebook, t.clique)
            if clique != t.clique:
                raise InputError(f"table {t.name} is not in canonical attribute order {clique!r}")
            if t.kind == "counts":
                expect = tuple(codebook.attribute_size(a) for a in t.clique)
                if t.shape != expect:
                    raise InputError(f"table {t.name} has shape {t.shape}, the codebook says {expect}")
            else:
                if not (len(t.clique) == 2 and t.clique[1] == lab and not codebook.feature(t.clique[0]).is_discrete):
                    raise InputError(f"moment table {t.name} must be over (raw numeric feature, label)")
                if t.shape != (2, codebook.n_classes):
                    raise InputError(f"moment table {t.name} has shape {t.shape}, expected (2, {codebook.n_classes})")
            key = (t.clique, t.kind)
            if key in self._tables:
                raise InputError(f"table {t.name} given twice")
            self._tables[key] = t
        self.postprocessed = False
        self._psd = postprocess
        if postprocess and any(not t.noise.is_exact for t in self._tables.values()):
            from .postprocess import postprocess_tables

            done = postprocess_tables(list(self._tables.values()))
            self._tables = {(t.clique, t.kind): t for t in done}
            self.postprocessed = True
        if not any(lab in c for (c, k) in self._tables if k == "counts"):
            raise InputError("the summary has no table containing the label")
        for f in codebook.features:
            if f.is_discrete:
                if self._find_table((f.name, lab)) is None:
                    raise InputError(f"no table gives N[{f.name}, {lab}] (feature {f.name!r} has no first-order table)")
            elif ((f.name, lab), "moments") not in self._tables:
                raise InputError(f"no moment table for raw numeric feature {f.name!r}")
        if not self.n > 0:
            raise InputError(f"the summary's row count must be positive, got {self.n:g}")

    # ----------------------------------------------------------- constructors
    @classmethod
    def from_tables(cls, codebook: Codebook, tables: Sequence[MarginalTable], **kw: Any) -> "Summary":
        return cls(codebook, tables, **kw)

    @classmethod
    def from_rows(
        cls,
        codebook: Codebook,
        X: np.ndarray,
        y: np.ndarray,
        stats: str = "first",
        pairs: Sequence[tuple[str, str]] | None = None,
    ) -> "Summary":
        """Count the tables of a ``stats`` plan from in-memory codes (tests, benchmarks)."""
        tables = count_tables(codebook, X, y, plan_cliques(codebook, stats, pairs))
        return cls(codebook, tables, provenance={"source": "rows", "n_rows": int(len(y))})

    # ---------------------------------------------------------------- tables
    @property
    def tables(self) -> list[MarginalTable]:
        return list(self._tables.values())

    @property
    def fingerprint(self) -> str:
        """The study codebook's fingerprint (the parent's for a feature subset)."""
        return self.parent_fingerprint or self.codebook.fingerprint

    def _find_table(self, names: Sequence[str]) -> MarginalTable | None:
        """The smallest released count table whose clique contains ``names`` (cached)."""
        want = frozenset(names)
        cache = self.__dict__.setdefault("_find_cache", {})
        if want in cache:
            return cache[want]
        by_attr = self.__dict__.get("_by_attr")
        if by_attr is None:  # attribute → count tables holding it, built once
            by_attr = {}
            for (c, k), t in self._tables.items():
                if k == "counts":
                    for a in c:
                        by_attr.setdefault(a, []).append(t)
            self.__dict__["_by_attr"] = by_attr
        best = None
        if want:
            pool = min((by_attr.get(a, []) for a in want), key=len)
            for t in pool:
                if want.issubset(t.clique) and (best is None or t.counts.size < best.counts.size):
                    best = t
        cache[want] = best
        return best

    def has_clique(self, names: Sequence[str]) -> bool:
        return self._find_table(names) is not None

    def counts(self, names: Sequence[str]) -> np.ndarray:
        """Counts over the clique ``names`` (axes in the given order), marginalised from
        the smallest released table that contains it."""
        t = self._find_table(names)
        if t is None:
            raise InputError(f"no released table contains the attributes {list(names)!r}")
        return t.marginal(names).astype(np.float64)

    def joint(self, names: Sequence[str]) -> np.ndarray:
        """Empirical probabilities over ``names`` (counts / n)."""
        return self.counts(names) / self.n

    def count_noise_std(self, names: Sequence[str]) -> float:
        """Std of the DP noise on one cell of ``counts(names)``, in counts.

        A cell marginalised from a larger table sums that table's independent cell noises,
        so its std is the table's per-cell std times the square root of the cells summed.
        """
        t = self._find_table(names)
        assert t is not None
        cells = t.counts.size // max(1, int(np.prod([t.counts.shape[t.clique.index(a)] for a in names])))
        return t.noise.std * float(np.sqrt(cells))

    _count_noise_std = count_noise_std

    @property
    def pairs(self) -> list[tuple[int, int]]:
        """Feature-index pairs (i < j) with a released pair-with-label table."""
        lab = self.codebook.label.name
        out = []
        for (c, k) in self._tables:
            if k == "counts" and len(c) == 3 and c[2] == lab:
                out.append((self.codebook.index(c[0]), self.codebook.index(c[1])))
        return sorted(out)

    @property
    def is_noisy(self) -> bool:
        return any(not t.noise.is_exact for t in self._tables.values())

    @property
    def noise_records(self) -> dict[str, NoiseRecord]:
        return {t.name: t.noise for t in self._tables.values()}

    # ------------------------------------------------------- basic quantities
    @cached_property
    def class_counts(self) -> np.ndarray:
        """(K,) class counts."""
        return self.counts((self.codebook.label.name,))

    @cached_property
    def n(self) -> float:
        return float(self.class_counts.sum())

    @property
    def prior(self) -> np.ndarray:
        return self.class_counts / self.n

    @property
    def classes(self) -> tuple[str, ...]:
        return self.codebook.label.classes

    @property
    def n_classes(self) -> int:
        return self.codebook.n_classes

    @property
    def feature_names(self) -> list[str]:
        return self.codebook.feature_names

    # -------------------------------------------------------- feature layout
    @cached_property
    def blocks(self) -> list[FeatureBlock]:
        """Ψ's blocks in codebook order."""
        out, off = [], 0
        for f in self.codebook.features:
            if f.is_discrete:
                b = FeatureBlock(f.name, "onehot", f.n_levels, off, levels=f.level_names)
            else:
                b = FeatureBlock(f.name, "numeric", 1, off, lo=f.lo, hi=f.hi)
            out.append(b)
            off += b.size
        return out

    @property
    def psi_dim(self) -> int:
        return sum(b.size for b in self.blocks)

    @cached_property
    def discrete_blocks(self) -> list[FeatureBlock]:
        """One-hot blocks only, offsets into Q/d (M = Σ m_i columns)."""
        out, off = [], 0
        for b in self.blocks:
            if b.kind == "onehot":
                out.append(FeatureBlock(b.name, "onehot", b.size, off, levels=b.levels))
                off += b.size
        return out

    # ---------------------------------------------------------- τ and its std
    def _first_order(self, name: str) -> np.ndarray:
        """(m_i, K) counts N[x_i, y]."""
        return self.counts((name, self.codebook.label.name))

    @cached_property
    def _moments(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        K, D = self.n_classes, self.psi_dim
        tau = np.zeros((K, D))
        second = np.zeros((K, D))
        noise = np.zeros((K, D))
        lab = self.codebook.label.name
        for b in self.blocks:
            if b.kind == "onehot":
                N = self._first_order(b.name)  # (m, K)
                tau[:, b.slice] = N.T / self.n
                second[:, b.slice] = N.T / self.n
                noise[:, b.slice] = self._count_noise_std((b.name, lab)) / self.n
            else:
                t = self._tables[((b.name, lab), "moments")]
                tau[:, b.offset] = t.counts[0] / self.n
                second[:, b.offset] = t.counts[1] / self.n
                noise[:, b.offset] = t.noise.std / self.n
        return tau, second, noise

    @property
    def tau(self) -> np.ndarray:
        """(K, D) feature expectations τ = E[Φ(X, Y)]."""
        return self._moments[0]

    @property
    def tau_std(self) -> np.ndarray:
        """(K, D) sample std of each Φ entry: sqrt(E[Φ²] − τ²) (= sqrt(τ(1−τ)) one-hot)."""
        tau, second, _ = self._moments
        return np.sqrt(np.clip(second - tau**2, 0.0, None))

    @property
    def noise_std(self) -> np.ndarray:
        """(K, D) std of the released noise on τ entries, in τ units (count std / n)."""
        return self._moments[2]

    # ------------------------------------------------------------------ Q, d
    @cached_property
    def Q(self) -> np.ndarray:
        """(M, M) second-moment matrix of the one-hot encoding of the discrete features."""
        db = self.discrete_blocks
        M = sum(b.size for b in db)
        Q = np.zeros((M, M))
        for b in db:
            p = self.joint((b.name,))
            Q[b.slice, b.slice] = np.diag(p)
        for bi, bj in combinations(db, 2):
            if not self.has_clique((bi.name, bj.name)):
                raise InputError(
                    f"Q needs the pair table of {bi.name!r} and {bj.name!r}; export with --stats all"
                )
            P = self.joint((bi.name, bj.name))
            Q[bi.slice, bj.slice] = P
            Q[bj.slice, bi.slice] = P.T
        if self._psd and self.is_noisy:
            from .postprocess import nearest_psd

            Q = nearest_psd(Q)
        return Q

    def d(self, positive: int | None = None) -> np.ndarray:
        """(M,) d_i(a) = P(X_i=a, Y=c) − P(X_i=a, Y≠c); c = 1 for binary labels."""
        K = self.n_classes
        if positive is None:
            if K != 2:
                raise InputError(f"d needs a positive class for a {K}-class label (one-vs-rest)")
            positive = 1
        if not 0 <= positive < K:
            raise InputError(f"positive class index {positive} outside 0..{K - 1}")
        parts = []
        for b in self.discrete_blocks:
            P = self._first_order(b.name) / self.n  # (m, K)
            parts.append(2 * P[:, positive] - P.sum(axis=1))
        return np.concatenate(parts) if parts else np.zeros(0)

    # ------------------------------------------------------------- subsets
    def restrict(self, names: Sequence[str]) -> "Summary":
        """The summary over a subset of features (tables within the subset + label)."""
        names = list(names)
        if not names:
            raise InputError("cannot restrict a summary to no features")
        sub = self.codebook.subset(names)
        keep = set(sub.feature_names) | {self.codebook.label.name}
        tables = [t for t in self._tables.values() if set(t.clique) <= keep]
        child = Summary(sub, tables, provenance=self.provenance, parent_fingerprint=self.fingerprint, postprocess=False)
        child._psd = self._psd  # tables are already post-processed; keep Q's PSD projection
        return child

    def describe(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "classes": list(self.classes),
            "class_counts": self.class_counts.tolist(),
            "features": self.feature_names,
            "tables": [t.name for t in self._tables.values()],
            "noisy": self.is_noisy,
        }
