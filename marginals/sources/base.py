"""The Source interface: what every place a site's data can live must answer."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, Iterator, Sequence

import pyarrow as pa

from ..data.codebook import Codebook
from ..counts.tables import MarginalTable


class Source(ABC):
    """A table of one site's rows, wherever it is kept.

    Attributes
    ----------
    name : str
        How messages name it (no credentials).
    """

    name: str

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """What the bundle records about where the counts came from: kind, location,
        table or query — never a user name or a password."""

    @abstractmethod
    def columns(self) -> list[str]:
        """The column names, in order."""

    @abstractmethod
    def count(self, codebook: Codebook, cliques: Sequence[tuple[str, ...]],
              progress: Callable[[int], None] | None = None) -> tuple[list[MarginalTable], int]:
        """Exact count tables of ``cliques`` (plan order) and the number of rows.

        Raises InputError (one line) for a value the codebook refuses, a missing column,
        an unreachable or failing source, or a source without rows.
        """

    @abstractmethod
    def draft_batches(self, columns: list[str]) -> Iterator[tuple[dict[str, pa.Array], bool]]:
        """Text batches for drafting a codebook: ``(batch, True)`` for a batch of rows,
        ``(batch, False)`` for a column's distinct values (nulls included)."""

    def row_batches(self, columns: list[str]) -> Iterator[dict[str, pa.Array]]:
        """The rows' values of ``columns``, batch by batch, as stored (typed or text).

        For work that needs rows rather than counts — the held-out split and the
        evaluation on held-out rows (:mod:`marg.marginals.holdout`): they reach this
        process, at the site, and are encoded by the same rules as a file's.
        """
        from marg.errors import InputError

        raise InputError(f"{self.name}: this source cannot give its rows")

    def prepare(self, codebook: Codebook, *, with_label: bool = True, max_rows: int | None = None,
                all_entries: bool = False) -> None:
        """Get ready to give rows under ``codebook``: nothing for a table; a source whose rows the
        codebook defines (an OMOP CDM, :mod:`.omop_source`) checks the database and builds its query
        (``max_rows``: the rows kept per unit; ``all_entries``: every row, for prediction)."""

    def bounds_units(self, unit: Any) -> bool:
        """True when the source itself keeps at most ``unit.bound`` rows of each unit (an OMOP CDM keeps
        each person's first K cohort entries), so its engine counts without the row-bound pass."""
        return False

    def where_rows(self) -> "Callable[[int], str] | None":
        """How a message locates a refused value of :meth:`row_batches`: None for row numbers (a
        file's rows have an order), or a function naming the source (a database's rows have none)."""
        return None

    def close(self) -> None:
        """Release connections (idempotent)."""

    def __enter__(self) -> "Source":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def check_columns(self, wanted: Sequence[str]) -> None:
        """InputError naming the first of ``wanted`` the source lacks."""
        from marg.errors import InputError

        names = self.columns()
        have = set(names)
        missing = [c for c in wanted if c not in have]
        if missing:
            shown = ", ".join(names[:12]) + ("…" if len(names) > 12 else "")
            raise InputError(f"column {missing[0]!r} is absent from {self.name} (columns: {shown})")


def first_line(exc: BaseException) -> str:
    """An engine's error message, first line only (they can run to pages)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
