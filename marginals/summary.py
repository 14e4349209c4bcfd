"""The Summary: a validated, read-only store of the (aggregated) marginal tables learners may see.

Built from count tables under one codebook — never from rows — a Summary answers queries:
the counts or probabilities over any clique held by some released table (marginalised from
the smallest one), the noise std of such a cell, the released pairs, n, the class prior,
the codebook fingerprint and the provenance of the bundles. What a learner derives from
them (τ, λ, Q, d) is the learner's business (:mod:`marg.learners.features`).

When tables carry differential-privacy noise the Summary post-processes them first
(consistency and non-negativity, :mod:`marg.marginals.postprocess`; free under DP). Class
columns hidden by min-cell suppression (exact releases) are unknown, not zero
(:mod:`marg.marginals.hidden`): :meth:`Summary.counts` spreads their rows in proportion to the
column's released part, evenly without one (the point estimate) and :meth:`Summary.count_bounds` says how far the truth
may lie from it.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any, Sequence

import numpy as np

from .data.codebook import Codebook
from marg.errors import InputError
from .hidden import count_bounds, filled, mark_hidden
from .counts.noise import NoiseRecord
from .noise_tails import merge as merge_parts
from .counts.counting import count_tables
from .counts.tables import MarginalTable, canonical_clique, plan_cliques


def sum_tables(parts: Sequence[Sequence[MarginalTable]]) -> tuple[list[MarginalTable], list[str]]:
    """Aggregate several sites' tables: counts add up clique by clique.

    Only cliques released by every site are kept (the others are returned by name as
    ``dropped``). Hidden class-column counts (:attr:`MarginalTable.hidden`, marked per site
    before summing) add up, each site's tails kept (:attr:`MarginalTable.hidden_tails`). Noise stds add in quadrature
    (independent noise); the combined record keeps the largest per-site privacy cost, since sites hold disjoint
    patients.

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
    dropped = sorted({MarginalTable(clique=k[0], counts=kd[k].counts, kind=k[1]).name for kd in keyed
                      for k in kd if k not in common})
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
            discrete = ts[0].kind == "counts"
            rec = NoiseRecord(
                mechanism=mech,
                scale=max(r.scale for r in noisy),
                std=float(np.sqrt(sum(r.std**2 for r in noisy))),
                epsilon=max(r.epsilon for r in noisy),
                delta=max(r.delta for r in noisy),
                rho=max(r.rho for r in noisy),
                parts=tuple(merge_parts([d for r in noisy for d in r.draws(discrete)])),
                # a shared noise's round (marginals.shared_noise): kept where every site's record states the same one
                threshold=noisy[0].threshold if len({(r.threshold, r.n_sites) for r in noisy}) == 1 else 0,
                n_sites=noisy[0].n_sites if len({(r.threshold, r.n_sites) for r in noisy}) == 1 else 0,
            )
        else:
            rec = NoiseRecord.exact()
        hid = [t.hidden for t in ts if t.hidden is not None]  # each site's hidden tails: rows known by their sum
        out.append(MarginalTable(clique=ts[0].clique, counts=counts, noise=rec, kind=ts[0].kind,
                                 hidden=np.sum(hid, axis=0) if hid else None,
                                 hidden_tails=tuple(p for t in ts for p in t.hidden_tails)))
    return out, dropped


class Summary:
    """Learner-side store of the released tables, with queries (see the module docstring).

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
        first (:func:`marginals.postprocess.postprocess_tables`; free under DP), and let
        learners project second-moment matrices onto the PSD cone. Default True.
    site_parts : sequence of (site, tables), optional
        Each site's own tables when the aggregator kept them (few sites): what
        leave-one-site-out model choice evaluates on. Not part of the summary's statistics.

    Attributes
    ----------
    postprocess : bool
        Noisy tables are (to be) post-processed: learners project Q onto the PSD cone.
    postprocessed : bool
        The tables were noisy and have been post-processed.
    """

    def __init__(
        self,
        codebook: Codebook,
        tables: Sequence[MarginalTable],
        provenance: dict[str, Any] | None = None,
        parent_fingerprint: str | None = None,
        postprocess: bool = True,
        site_parts: Sequence[tuple[str, Sequence[MarginalTable]]] = (),
    ):
        self.codebook = codebook
        self.site_parts = tuple((str(site), tuple(ts)) for site, ts in site_parts)
        self.provenance = dict(provenance or {})
        self.parent_fingerprint = parent_fingerprint
        self._tables: dict[tuple[tuple[str, ...], str], MarginalTable] = {}
        lab = codebook.label.name
        tables = mark_hidden(list(tables), lab)  # columns released as 0 that the sites did not mark (one site's tables)
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
        self._filled = self._check_hidden(lab)
        self.postprocessed = False
        self.postprocess = bool(postprocess)
        self._raw: list[MarginalTable] | None = None
        if postprocess and any(not t.noise.is_exact for t in self._tables.values()):
            from .postprocess import postprocess_tables

            self._raw = list(self._tables.values())
            done = postprocess_tables(self._raw)
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

    def _check_hidden(self, lab: str) -> dict[tuple[tuple[str, ...], str], MarginalTable]:
        """The point estimates of the tables with hidden class columns (:mod:`marg.marginals.hidden`),
        after checking that each column's released count plus its hidden rows is its class total."""
        out = {}
        hid = [t for t in self._tables.values() if t.hidden is not None and np.any(t.hidden > 0)]
        if not hid:
            return out
        noisy = [t for t in self._tables.values() if not t.noise.is_exact]
        if noisy:
            raise InputError(f"table {hid[0].name} has class columns hidden by min-cell suppression and "
                             f"{noisy[0].name} carries DP noise: the learner bounds hidden cells of exact releases "
                             "only; release every table with DP (--epsilon), or all exactly")
        totals = self._tables[((lab,), "counts")].counts if ((lab,), "counts") in self._tables else None
        for t in hid:
            got = np.asarray(t.counts, dtype=np.float64).sum(axis=0) + t.hidden
            if totals is None or not np.allclose(got, totals, rtol=0.0, atol=1e-6):
                raise InputError(f"table {t.name} has hidden class columns whose released and hidden rows add up to "
                                 f"{got.tolist()}, not the class totals {None if totals is None else totals.tolist()}: "
                                 "a site's hidden column was summed with another's without marking it")
            out[(t.clique, t.kind)] = MarginalTable(t.clique, filled(t), t.noise, t.kind)
        return out

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
        t = self._filled.get((t.clique, t.kind), t)  # hidden class columns: their expected counts (hidden.filled)
        return t.marginal(names).astype(np.float64)

    def count_bounds(self, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray] | None:
        """Bounds ``lo ≤ N ≤ hi`` on the true counts over ``names`` where a table hides class
        columns (:func:`marg.marginals.hidden.count_bounds`), None where :meth:`counts` is exact
        (no hidden cell behind it). :meth:`counts` gives the point estimate inside them."""
        t = self._find_table(names)
        if t is None:
            raise InputError(f"no released table contains the attributes {list(names)!r}")
        return count_bounds(t, names)

    def hidden_tails(self, names: Sequence[str]) -> tuple:
        """The hidden tails (:class:`~marg.marginals.counts.tables.HiddenTail`, one per site's hidden column) of the
        table :meth:`counts` reads ``names`` from; empty when nothing is hidden there."""
        t = self._find_table(names)
        if t is None:
            raise InputError(f"no released table contains the attributes {list(names)!r}")
        return tuple(t.hidden_tails)

    @property
    def hidden(self) -> dict[str, list[float]]:
        """Per table with class columns hidden by min-cell suppression: the rows of each class
        known only by that class's total (``MarginalTable.hidden``); empty when nothing is hidden."""
        return {t.name: t.hidden.tolist() for (c, k), t in self._tables.items() if (c, k) in self._filled}

    @property
    def unmeasured(self) -> list[str]:
        """Features the release says nothing about beyond the class totals: their one table ``N[x, y]`` has every
        class column hidden by min-cell suppression at every site (no released count) and no other table holds
        them. A learner reading them widens its box for nothing (issue 49: the automatic choice leaves them out)."""
        lab = self.codebook.label.name
        out = []
        for f in self.codebook.features:
            held = [key for key in self._tables if f.name in key[0]]
            t = self._tables.get(((f.name, lab), "counts"))
            if t is None or t.hidden is None or held != [((f.name, lab), "counts")]:
                continue
            released = np.asarray(t.counts, dtype=np.float64).sum(axis=0)
            if np.all(released == 0) and np.all((t.hidden > 0) | (self.class_counts <= 0)):
                out.append(f.name)
        return out

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

    def noise_draws(self, names: Sequence[str]) -> tuple:
        """The independent noise draws in one cell of ``counts(names)``: (mechanism, scale,
        discrete, count) parts, ``count`` multiplied by the cells of the released table that
        the marginal sums (see :mod:`marg.marginals.noise_tails`); () for exact tables."""
        t = self._find_table(names)
        if t is None:
            raise InputError(f"no released table contains the attributes {list(names)!r}")
        cells = t.counts.size // max(1, int(np.prod([t.counts.shape[t.clique.index(a)] for a in names])))
        return tuple((m, b, d, c * cells) for m, b, d, c in t.noise.draws(t.kind == "counts"))

    def moment_table(self, name: str) -> MarginalTable:
        """The moment table (per-class sum and sum of squares, shape (2, K)) of raw numeric feature ``name``."""
        t = self._tables.get(((name, self.codebook.label.name), "moments"))
        if t is None:
            raise InputError(f"no moment table for raw numeric feature {name!r}")
        return t

    @property
    def pairs(self) -> list[tuple[int, int]]:
        """Feature-index pairs (i < j) with a released pair-with-label table."""
        lab = self.codebook.label.name
        out = []
        for (c, k) in self._tables:
            if k == "counts" and len(c) == 3 and c[2] == lab:
                out.append((self.codebook.index(c[0]), self.codebook.index(c[1])))
        return sorted(out)

    def feature_cliques(self, min_size: int = 2) -> list[tuple[str, ...]]:
        """Feature tuples (codebook order) of the released counts tables ``N[x_a, …, y]`` with at
        least ``min_size`` features: the pairs and any higher-order tables a request brought."""
        lab = self.codebook.label.name
        out = {c[:-1] for (c, k) in self._tables if k == "counts" and c[-1] == lab and len(c) - 1 >= min_size}
        return sorted(out, key=lambda c: tuple(self.codebook.index(a) for a in c))

    @property
    def is_noisy(self) -> bool:
        return any(not t.noise.is_exact for t in self._tables.values())

    # ------------------------------------------------------- basic quantities
    @cached_property
    def class_counts(self) -> np.ndarray:
        """(K,) class counts."""
        return self.counts((self.codebook.label.name,))

    # ------------------------------------------------------- the two n's
    # A noisy Summary has two row counts; this class owns both and names them:
    #   n           the reported n — the label table's total after post-processing;
    #   n_released  the n of the tables as released — behind τ, its noise std and the boxes.
    # On an exact Summary, or on ``released()`` itself, they are the same number.
    @cached_property
    def n(self) -> float:
        """The reported n, the row count every report states: the label table's total after
        post-processing (under DP noise, :func:`marg.marginals.postprocess.postprocess_tables`
        pools every table's total by inverse variance — the best estimate of n; exact releases:
        the count itself). Reports, model files (``info.n``) and "n = …" lines use this one.

        The one other n is :attr:`n_released`."""
        return float(self.class_counts.sum())

    @property
    def n_released(self) -> float:
        """The n of the tables *as released* (:meth:`released`, before post-processing): the
        learners' moments, noise stds and confidence boxes divide by it
        (:mod:`marg.learners.features.statistics`), because only those tables carry exactly the
        noise their records describe. Equal to :attr:`n` when nothing was post-processed (and
        when the tables as released are no Summary, :attr:`released_invalid`)."""
        return self.released().n

    @property
    def n_exact(self) -> int | None:
        """The row count as an integer when every table is an exact count; None for a noisy
        (DP) release, whose count is only known approximately: :attr:`n` (a float) is then the
        post-processed estimate. :attr:`n` stays a float either way."""
        return None if self.is_noisy else int(round(self.n))

    def __repr__(self) -> str:
        sites = [str(s.get("site")) for s in self.provenance.get("sites", []) if isinstance(s, dict)]
        where = (f"{len(sites)} site{'s' if len(sites) != 1 else ''} ({', '.join(sites)})" if sites
                 else "no recorded sites")
        count = (f"n = {self.n_exact:,} (exact)" if self.n_exact is not None
                 else f"n ≈ {self.n:,.0f} (noisy: differential privacy)")
        lab = self.codebook.label
        return (f"<marg Summary: {where}; {count}; {len(self._tables)} tables; label {lab.name!r} "
                f"({', '.join(lab.classes)}); {self.codebook.n_features} features>")

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

    @property
    def selection(self) -> Any:
        """The record of a selection of these features from the same patients
        (:class:`marg.marginals.selected_from.SelectedFrom`, read from the provenance's round-1 study
        records: every summary derived from this one carries it), or None."""
        from .selected_from import selected_from

        return selected_from(self.provenance)

    # ------------------------------------------------------------- subsets
    def released(self) -> "Summary":
        """The Summary of the tables as released (before post-processing; ``self`` if none).

        Their noise is exactly what each table's record describes, so intervals built from
        it hold exactly (post-processing mixes tables of different noise). When the noise is
        so large that the tables as released count n ≤ 0 rows (tiny sites, small ε) they are
        no Summary: ``self`` stands in and :attr:`released_invalid` says so (the
        certificate of :func:`marg.learners.certification.certify.certify` is then the trivial 1)."""
        if self._raw is None:
            return self
        if "_released" not in self.__dict__:
            try:
                child = Summary(self.codebook, self._raw, provenance=self.provenance,
                                parent_fingerprint=self.parent_fingerprint, postprocess=False)
            except InputError as exc:
                if "row count must be positive" not in str(exc):
                    raise
                self.__dict__["released_invalid"] = str(exc)
                child = self
            self.__dict__["_released"] = child
        return self.__dict__["_released"]

    @property
    def released_invalid(self) -> str | None:
        """Why the tables as released are no Summary (n ≤ 0), or None."""
        self.released()
        return self.__dict__.get("released_invalid")

    def restrict(self, names: Sequence[str]) -> "Summary":
        """The summary over a subset of features (tables within the subset + label)."""
        names = list(names)
        if not names:
            raise InputError("cannot restrict a summary to no features")
        sub = self.codebook.subset(names)
        keep = set(sub.feature_names) | {self.codebook.label.name}
        tables = [t for t in self._tables.values() if set(t.clique) <= keep]
        child = Summary(sub, tables, provenance=self.provenance, parent_fingerprint=self.fingerprint, postprocess=False)
        child.postprocess = self.postprocess  # tables are already post-processed; keep Q's PSD projection
        return child

    def describe(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "classes": list(self.classes),
            "class_counts": self.class_counts.tolist(),
            "features": self.feature_names,
            "tables": [t.name for t in self._tables.values()],
            "noisy": self.is_noisy,
            "hidden": self.hidden,
        }
