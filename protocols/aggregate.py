"""Aggregation: several sites' verified bundles → one learner-side Summary.

Counts add up clique by clique (only cliques every site released are used). Bundles must
share the study codebook's fingerprint, and a site may contribute only once; anything else
is refused with one line naming the bundle.
"""

from __future__ import annotations

from typing import Sequence

from marg.errors import InputError
from marg.marginals.summary import Summary, sum_tables

from .bundle import Bundle


def summary_from_bundles(bundles: Sequence[Bundle], sources: Sequence[str] | None = None) -> Summary:
    """Sum the sites' tables into a :class:`~marginals.summary.Summary`.

    Parameters
    ----------
    bundles : sequence of Bundle
        Parsed (and, by the caller, verified) bundles.
    sources : sequence of str, optional
        File names for messages and provenance.
    """
    if not bundles:
        raise InputError("no bundles to aggregate")
    sources = list(sources) if sources is not None else [f"bundle #{k + 1}" for k in range(len(bundles))]
    first = bundles[0]
    codebook = first.codebook
    seen: dict[str, str] = {}
    for b, src in zip(bundles, sources):
        if b.fingerprint != first.fingerprint:
            raise InputError(
                f"{src}: codebook fingerprint {b.fingerprint[:16]}… differs from {sources[0]}'s {first.fingerprint[:16]}… "
                "(sites must share one codebook)"
            )
        if b.site in seen:
            raise InputError(f"{src}: site {b.site!r} already contributed {seen[b.site]} (each site once)")
        seen[b.site] = src
    tables, dropped = sum_tables([b.tables for b in bundles])
    provenance = {
        "sites": [
            {
                "site": b.site,
                "created": b.header.get("created"),
                "software": b.header.get("software"),
                "n_rows": b.header.get("n_rows"),
                "digest": b.digest(),
                "source": src,
                "signed": b.signature is not None,
                "privacy": b.header.get("privacy"),
            }
            for b, src in zip(bundles, sources)
        ],
        "dropped_tables": dropped,
    }
    return Summary(codebook, tables, provenance=provenance)
