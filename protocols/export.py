"""A site's export: data file → encoded chunks → count tables → bundle file.

This is the site-side pipeline behind ``marg export``. Nothing is written until every
check has passed and every table is counted; the bundle file is written atomically, so a
failed export never leaves a partial bundle.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from marginals.codebook import Codebook
from marginals.encoding import iter_encoded
from marginals.errors import InputError
from marginals.tables import MarginalTable, TableCounter, plan_cliques

from .bundle import Bundle


@dataclass(frozen=True)
class ExportResult:
    bundle: Bundle
    path: Path
    n_rows: int
    tables: list[MarginalTable]


def count_file(
    data: str | Path,
    codebook: Codebook,
    cliques: Sequence[tuple[str, ...]],
    progress: Callable[[int], None] | None = None,
) -> tuple[list[MarginalTable], int]:
    """Stream ``data`` through the encoder and count the tables of ``cliques``."""
    counter = TableCounter(codebook, cliques)
    for enc in iter_encoded(data, codebook, progress=progress):
        counter.add(enc.X, enc.y)
    if counter.n_rows == 0:
        raise InputError(f"{Path(data).name} has no data rows")
    return counter.tables(), counter.n_rows


def export_site(
    data: str | Path,
    codebook: Codebook,
    site: str,
    out: str | Path,
    *,
    stats: str = "first",
    pairs: Sequence[tuple[str, str]] | None = None,
    progress: Callable[[int], None] | None = None,
) -> ExportResult:
    """Count the planned tables of ``data`` and write the site's bundle to ``out``."""
    out = Path(out)
    if not out.parent.exists():
        raise InputError(f"output folder does not exist: {out.parent}")
    cliques = plan_cliques(codebook, stats, pairs)
    tables, n_rows = count_file(data, codebook, cliques, progress)
    bundle = Bundle.build(codebook, tables, site=site, n_rows=n_rows)
    bundle.save(out)
    return ExportResult(bundle=bundle, path=out, n_rows=n_rows, tables=tables)
