"""Aggregation: many sites' verified bundles → one learner-side Summary, streamed.

Counts add up clique by clique (only cliques every site released are used). Bundles must
share the study codebook's fingerprint, and a site may contribute only once; anything else
is refused with one line naming the bundle. Bundles are folded into running sums one at a
time (:class:`Aggregator`), so a thousand sites need the memory of one bundle plus the
sums, not of a thousand bundles: give :func:`summary_from_files` the paths, or
:func:`summary_from_bundles` a generator.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from marg.errors import InputError
from marg.marginals.summary import Summary, sum_tables
from marg.marginals.tables import MarginalTable

from .bundle import Bundle


class Aggregator:
    """Running sums of the sites' tables, one bundle at a time.

    Folding is :func:`~marg.marginals.summary.sum_tables` of (sums so far, next site):
    counts add, the cliques kept are those every site so far released (in the first
    site's order), noise stds add in quadrature and privacy costs keep the largest —
    all associative, so the result equals summing every site at once.
    """

    KEEP_SITES = 20  # up to this many sites, each site's own tables are kept (leave-one-site-out choice)

    def __init__(self) -> None:
        self.first: Bundle | None = None
        self.parts: list[tuple[str, list[MarginalTable]]] = []
        self.first_source = ""
        self.tables: list[MarginalTable] = []
        self.dropped: set[str] = set()
        self.sites: list[dict[str, Any]] = []
        self._seen: dict[str, str] = {}

    def add(self, b: Bundle, source: str) -> None:
        """Check ``b`` against the sites so far and fold its tables into the sums."""
        if self.first is None:
            self.first, self.first_source = b, source
        elif b.fingerprint != self.first.fingerprint:
            raise InputError(
                f"{source}: codebook fingerprint {b.fingerprint[:16]}… differs from {self.first_source}'s "
                f"{self.first.fingerprint[:16]}… (sites must share one codebook)"
            )
        if b.site in self._seen:
            raise InputError(f"{source}: site {b.site!r} already contributed {self._seen[b.site]} (each site once)")
        self._seen[b.site] = source
        if not self.sites:
            self.tables, dropped = sum_tables([b.tables])
        else:
            self.tables, dropped = sum_tables([self.tables, b.tables])
        self.dropped.update(dropped)
        if len(self.sites) < self.KEEP_SITES:
            self.parts.append((b.site, list(b.tables)))
        else:
            self.parts = []  # too many sites to keep: memory of one bundle, as promised
        self.sites.append({
            "site": b.site,
            "created": b.header.get("created"),
            "software": b.header.get("software"),
            "n_rows": b.header.get("n_rows"),
            "digest": b.digest(),
            "source": source,
            "signed": b.signature is not None,
            "privacy": b.header.get("privacy"),
        })

    def summary(self) -> Summary:
        if self.first is None:
            raise InputError("no bundles to aggregate")
        return Summary(self.first.codebook, self.tables,
                       provenance={"sites": self.sites, "dropped_tables": sorted(self.dropped)},
                       site_parts=self.parts if len(self.parts) == len(self.sites) else ())


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
        agg.add(load(Path(p)), str(p))
        if progress is not None:
            progress(k + 1, total)
    return agg.summary()
