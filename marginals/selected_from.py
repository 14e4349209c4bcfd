"""What selection looked at: the record, carried by a Summary, of the features' selection from the same patients.

A select-then-measure study (:mod:`marg.marginals.study`) chooses the features round 2
measures from round 1's private selections at the sites, made on the same patients the
measured tables count. Each round-1 bundle's header records that selection under the site's
signature (``study``: ``round`` 1, the ``plan`` with ``cells`` = Σ_i m_i over the p candidate
features, the ``selection`` itself); the aggregate keeps the headers in the summary's
provenance (``sites[].rounds[].study``), so every Summary derived from it — restricted to some
features, the tables as released, a label source — carries the same record.

:class:`SelectedFrom` is that record as a value (``Summary.selection``): which sites selected
and what they looked at. A learner reads from it the number of candidate cells a confidence
box must cover together for its certificate to hold whichever features were selected
(:func:`marg.learners.certification.selection_certificate.selection_certificate`): on the event that all p
candidates' cells lie in their intervals — fixed before any selection — the selected ones do too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping


@dataclass(frozen=True)
class SelectedFrom:
    """The round-1 selections a summary's features were chosen by.

    Attributes
    ----------
    rounds : tuple of (site, record)
        Each site's round-1 study record, as its bundle header holds it (``plan``, ``selection``, ``spent``).
    cells : int
        Σ_i m_i over every candidate feature the sites selected from (the largest any record states):
        a box covering K·cells entries together covers whichever features were chosen.
    """

    rounds: tuple[tuple[str, Mapping[str, Any]], ...]
    cells: int

    def candidate_entries(self, n_classes: int, own_cells: int = 0) -> int:
        """K·max(cells, own_cells): the entries (class, level) of every candidate's first-order table.

        ``own_cells``: Σ_i m_i of the summary's own discrete features (a summary that still holds
        every candidate counts them itself)."""
        return int(n_classes) * max(int(self.cells), int(own_cells))


def selected_from(provenance: Mapping[str, Any] | None) -> SelectedFrom | None:
    """The :class:`SelectedFrom` of a summary's provenance: its sites' round-1 study records (None: no selection)."""
    rounds = []
    for s in (provenance or {}).get("sites", []) or []:
        if not isinstance(s, Mapping):
            continue
        for r in s.get("rounds", []) or []:
            st = r.get("study") if isinstance(r, Mapping) else None
            if isinstance(st, Mapping) and st.get("round") == 1:
                rounds.append((str(s.get("site")), st))
    if not rounds:
        return None
    cells = max(int((st.get("plan") or {}).get("cells", 0) or 0) for _, st in rounds)
    return SelectedFrom(tuple(rounds), cells)


__all__ = ["SelectedFrom", "selected_from"]
