"""Aggregation: many sites' verified bundles → one learner-side Summary, streamed.

Counts add up clique by clique (only cliques every site released are used). Bundles must
share the study codebook's fingerprint; a site may send several bundles (the rounds of the
two-round protocol) but each table once, and in a study of several rounds every site must
answer every round; anything else is refused with one line naming the bundle or the site.
Bundles are folded into running sums one at a time (:class:`Aggregator`), so a thousand
sites need the memory of one bundle plus the sums, not of a thousand bundles: give
:func:`summary_from_files` the paths, or :func:`summary_from_bundles` a generator. Class
columns a site hid (min-cell suppression) are marked in its own tables, checked against the
counts its header reports, before they are summed (:mod:`marg.marginals.hidden`).
"""

from __future__ import annotations

import json

from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from marg.errors import InputError
from marg.marginals.hidden import mark_hidden
from marg.marginals.summary import Summary, sum_tables
from marg.marginals.counts.tables import MarginalTable

from .bundle import Bundle
from .drop_box import source_name


class Aggregator:
    """Running sums of the sites' tables, one bundle at a time, clique by clique.

    A site may send several bundles — the rounds of the two-round protocol (first-order
    tables, then the requested pair tables) — as long as no table comes twice from it (that
    would count its patients twice). Each table is folded into the running sum of its clique
    (:func:`~marg.marginals.summary.sum_tables`: counts add, noise stds add in quadrature,
    privacy costs keep the largest), so the result equals summing every site at once.

    One bundle per site (one round): the cliques kept are those every site released (in
    first-seen order), the others are reported as dropped. Several bundles from some site
    (several rounds): every site must have released every table — a site missing from a
    round, or answering another request, is refused naming the site. A site's provenance
    record composes its rounds' privacy costs (they add, as in its ledger) and lists each
    round.
    """

    KEEP_SITES = 20  # up to this many sites, each site's own tables are kept (leave-one-site-out choice)

    def __init__(self) -> None:
        self.first: Bundle | None = None
        self.first_source = ""
        self.sums: dict[tuple[tuple[str, ...], str], MarginalTable] = {}
        self.released_by: dict[tuple[tuple[str, ...], str], dict[str, str]] = {}
        self.parts: dict[str, list[MarginalTable]] = {}
        self.sites: list[dict[str, Any]] = []
        self._site_index: dict[str, int] = {}
        self.bundles = 0
        self._digests: dict[str, str] = {}

    def add(self, b: Bundle, source: str) -> None:
        """Check ``b`` against the bundles so far and fold its tables into the sums."""
        if self.first is None:
            self.first, self.first_source = b, source
        elif b.fingerprint != self.first.fingerprint:
            raise InputError(
                f"{source}: codebook fingerprint {b.fingerprint[:16]}… differs from {self.first_source}'s "
                f"{self.first.fingerprint[:16]}… (sites must share one codebook)"
            )
        digest = b.digest()
        if digest in self._digests:
            raise InputError(f"{source}: the same bundle as {self._digests[digest]} (given twice)")
        for t in b.tables:
            prev = self.released_by.get((t.clique, t.kind), {}).get(b.site)
            if prev is not None:
                raise InputError(f"{source}: site {b.site!r} already released {t.name} in {prev} "
                                 "(each table once per site: it would count its patients twice)")
        if b.site in self._site_index:
            seen = self.sites[self._site_index[b.site]]
            n_prev, n_now = seen.get("n_rows"), b.header.get("n_rows")
            if isinstance(n_prev, int) and isinstance(n_now, int) and n_prev != n_now:
                raise InputError(f"{source}: site {b.site!r} released {n_now:,} rows here and {n_prev:,} in "
                                 f"{seen['source']} (its data changed between rounds: the tables would not fit "
                                 "together)")
        self.bundles += 1
        self._digests[digest] = source
        # hidden class columns are marked per site, before summing (another site's real column would mask them)
        tables = mark_hidden(b.tables, b.codebook.label.name, dict(b.header.get("suppressed_cells") or {}), source)
        for t in tables:
            key = (t.clique, t.kind)
            self.sums[key] = t if key not in self.sums else sum_tables([[self.sums[key]], [t]])[0][0]
            self.released_by.setdefault(key, {})[b.site] = source
        if b.site not in self._site_index:
            self._site_index[b.site] = len(self.sites)
            self.sites.append({"site": b.site, "rounds": []})
        if len(self._site_index) <= self.KEEP_SITES:
            self.parts.setdefault(b.site, []).extend(tables)
        else:
            self.parts = {}  # too many sites to keep: memory of one bundle, as promised
        rec = self.sites[self._site_index[b.site]]
        info = {
            "created": b.header.get("created"),
            "software": b.header.get("software"),
            "n_rows": b.header.get("n_rows"),
            "digest": digest,
            "source": source,
            "signed": b.signature is not None,
            "privacy": b.header.get("privacy"),
        }
        if b.header.get("study"):  # select-then-measure: the round, its plan and the site's private selection
            info["study"] = b.header["study"]
        if b.header.get("secagg"):  # a secure sum: which sites it covers, which dropped out
            info["secagg"] = b.header["secagg"]
        if not rec["rounds"]:
            rec.update(info)  # the site's first bundle describes it (one-round studies: the only one)
        rec["rounds"].append(info)
        if len(rec["rounds"]) > 1:
            rec["privacy"] = composed_privacy([r["privacy"] for r in rec["rounds"]])

    def summary(self) -> Summary:
        if self.first is None:
            raise InputError("no bundles to aggregate")
        n_sites = len(self.sites)
        if self.bundles > n_sites:
            self._check_rounds()
        kept = [t for key, t in self.sums.items() if len(self.released_by[key]) == n_sites]
        dropped = sorted(t.name for key, t in self.sums.items() if len(self.released_by[key]) < n_sites)
        missing = {}
        for key, t in self.sums.items():
            if len(self.released_by[key]) < n_sites:
                for s in self.sites:
                    if s["site"] not in self.released_by[key]:
                        missing.setdefault(s["site"], []).append(t.name)
        parts = [(s["site"], self.parts[s["site"]]) for s in self.sites] if len(self.parts) == n_sites else ()
        codebook, parent = self.first.codebook, None
        if any(r.get("study") for s in self.sites for r in s["rounds"]):
            codebook, kept, parts = measured_only(codebook, kept, parts)
            parent = self.first.codebook.fingerprint if codebook is not self.first.codebook else None
        return Summary(codebook, kept,
                       provenance={"sites": self.sites, "dropped_tables": dropped, "missing_by_site": missing},
                       site_parts=parts, parent_fingerprint=parent)

    def _check_rounds(self) -> None:
        """Several rounds: refuse the first site that lacks a table some other site released."""
        lab = self.first.codebook.label.name if self.first is not None else None
        for s in self.sites:
            lacking = [(key, self.sums[key]) for key, by in self.released_by.items() if s["site"] not in by]
            if not lacking:
                continue
            first_order = [len([a for a in key[0] if a != lab]) <= 1 for key, _ in lacking]
            which = ("round 1 (first-order tables)" if all(first_order) else
                     "round 2 (pair tables)" if not any(first_order) else "a round")
            others = sorted({site for key, _ in lacking for site in self.released_by[key]})
            raise InputError(
                f"site {s['site']!r} is missing from {which}: {len(lacking)} table(s) released by "
                f"{', '.join(repr(o) for o in others)} are not in its bundles (e.g. {lacking[0][1].name}); "
                "give all of its rounds' bundles, or leave every bundle of that site out")


def measured_only(codebook: Any, kept: list[MarginalTable], parts: Any) -> tuple[Any, list[MarginalTable], Any]:
    """Select-then-measure: the study's codebook restricted to the features whose first-order
    table was measured (the rest were not selected), with the tables and site parts within it."""
    lab = codebook.label.name
    have = {t.clique[0] for t in kept if t.kind == "counts" and len(t.clique) == 2 and t.clique[1] == lab}
    measured = [f.name for f in codebook.features if f.name in have]
    if len(measured) == len(codebook.features):
        return codebook, kept, parts
    if not measured:
        raise InputError("these select-then-measure bundles measure no feature's table (round 1 alone, or a request "
                         "that asked for nothing): give the round-2 bundles too")
    keep = set(measured) | {lab}
    sub = codebook.subset(measured)
    inside = [t for t in kept if set(t.clique) <= keep]
    parts = [(s, [t for t in ts if set(t.clique) <= keep]) for s, ts in parts]
    return sub, inside, parts


def composed_privacy(records: Sequence[dict[str, Any] | None]) -> dict[str, Any]:
    """One site's total privacy cost over its rounds, composed as its ledger composes them
    (:class:`marginals.accounting.Spend`: ρ's add, converted once by OpenDP) at the δ its ledger
    states its spend at (the cap's, ``ledger_delta`` of the releases; bundles of an older marg
    or without a cap: the sum of the rounds' δ's) — the number ``marg audit show`` gives for
    these releases; ``releases`` keeps each release's own (ε, δ) beside it."""
    from marg.marginals.accounting import PrivacyCost, Spend

    total, spend = PrivacyCost.zero(), Spend()
    mechs: list[str] = []
    at = [float(r["ledger_delta"]) for r in records if r and r.get("ledger_delta") is not None]
    for r in records:
        r = r or {}
        c = PrivacyCost.from_dict(r)
        total, spend = total + c, spend.add(c)
        m = str(r.get("mechanism", "none"))
        if m not in mechs:
            mechs.append(m)
    named = [m for m in mechs if m != "none"] or ["none"]
    releases = [{"epsilon": PrivacyCost.from_dict(r or {}).epsilon, "delta": PrivacyCost.from_dict(r or {}).delta}
                for r in records]
    out = {"mechanism": "+".join(named), **spend.as_cost(max(at) if at else total.delta).to_dict(),
           "rounds": len(records), "releases": releases, "ledger_delta": max(at) if at else None}
    units = {json.dumps((r or {}).get("unit"), sort_keys=True) for r in records}
    if len(units) == 1 and (records[0] or {}).get("unit") is not None:  # the rounds' one privacy unit
        out["unit"] = (records[0] or {})["unit"]
    return out


def summary_from_bundles(
    bundles: Iterable[Bundle],
    sources: Sequence[str] | None = None,
    progress: Callable[[int], None] | None = None,
) -> Summary:
    """Sum the sites' tables into a :class:`~marginals.summary.Summary`.

    Parameters
    ----------
    bundles : iterable of Bundle
        Parsed (and, by the caller, verified) bundles; a generator is consumed one bundle
        at a time.
    sources : sequence of str, optional
        File names for messages and provenance.
    progress : callable, optional
        ``progress(k)`` after the k-th bundle.
    """
    agg = Aggregator()
    for k, b in enumerate(bundles):
        agg.add(b, sources[k] if sources is not None else f"bundle #{k + 1}")
        if progress is not None:
            progress(k + 1)
    return agg.summary()


def summary_from_files(
    paths: Sequence[str | Path],
    load: Callable[[Path], Bundle],
    progress: Callable[[int, int], None] | None = None,
) -> Summary:
    """Load (``load(path)``: open, verify, parse), check and fold bundle files one at a time.

    ``progress(k, total)`` after each file. Only one bundle's arrays are held at once.
    """
    total = len(paths)
    agg = Aggregator()
    for k, p in enumerate(paths):
        agg.add(load(Path(p)), source_name(p))
        if progress is not None:
            progress(k + 1, total)
    return agg.summary()
