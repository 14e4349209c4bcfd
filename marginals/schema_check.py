"""Whether a site's data fits the study codebook, before anyone spends (``marg schema check``).

Every site of a study runs the check on its own data before the first site exports: a level
the codebook lacks would stop that site's export after others have spent their budgets. The
check reads the data through the export's own source and value rules
(:func:`~marg.marginals.data.encoding.value_codes`: the same canonical text, the same bins), and
reports only *which* values the codebook refuses — levels missing from the codebook, values
of a numeric column that are not numbers, missing values where the codebook has no missing
level, absent columns — never how many rows hold them: nothing is counted, nothing released,
no ledger is touched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .data.codebook import Codebook, NumericFeature
from .data.column_codes import MISSING, UNKNOWN, distinct, label_codes, value_codes

if TYPE_CHECKING:
    from .sources import Source

SHOWN = 20  # values named per column (a column refusing more is named with "…")


@dataclass
class ColumnMisfit:
    """What one column holds that the codebook refuses.

    Attributes
    ----------
    column : str
    kind : str
        ``"feature"`` or ``"label"``.
    unknown : list of str
        Values the codebook lacks (canonical text; for a numeric feature: not numbers), sorted.
    missing : bool
        Missing values occur and the codebook gives this column no missing level (a raw numeric
        feature takes none).
    absent : bool
        The source has no such column.
    numeric : bool
        A numeric feature (its unknown values are not numbers).
    """

    column: str
    kind: str
    unknown: list[str] = field(default_factory=list)
    missing: bool = False
    absent: bool = False
    numeric: bool = False

    def describe(self, show_values: bool = False) -> str:
        """One line naming the column and how many distinct values the codebook lacks; the values
        themselves only with ``show_values`` (a rare value can be a patient's: the site's own terminal)."""
        what = "the label" if self.kind == "label" else "column"
        if self.absent:
            return f"{what} {self.column!r} is absent from the data"
        parts = []
        if self.unknown:
            k = len(self.unknown)
            noun = ("class" if k == 1 else "classes") if self.kind == "label" else ("level" if k == 1 else "levels")
            text = f"{k:,} distinct value{'s' if k != 1 else ''} that {'is' if k == 1 else 'are'} not a number" \
                if self.numeric else f"{k:,} distinct {noun} missing from the codebook"
            if show_values:
                text += ": " + ", ".join(repr(v) for v in self.unknown[:SHOWN]) + ("…" if k > SHOWN else "")
            parts.append(text)
        if self.missing:
            parts.append("missing values, and the codebook gives it no missing level")
        return f"{what} {self.column!r}: " + "; ".join(parts)


@dataclass
class SchemaCheck:
    """The result of :func:`check_schema`: ``fits`` and, when not, the columns that do not."""

    source: str
    codebook_fingerprint: str
    misfits: list[ColumnMisfit]

    @property
    def fits(self) -> bool:
        return not self.misfits

    def to_dict(self) -> dict[str, Any]:
        return {"data": self.source, "fingerprint": self.codebook_fingerprint, "fits": self.fits,
                "columns": [{"column": m.column, "kind": m.kind, "absent": m.absent, "unknown": len(m.unknown),
                             "missing_without_level": m.missing, "not_numbers": m.numeric and bool(m.unknown)}
                            for m in self.misfits]}


def check_schema(source: "Source", codebook: Codebook) -> SchemaCheck:
    """Read ``source`` and say which of its values ``codebook`` refuses (module docstring).

    Every distinct value of every codebook column is looked up once by the encoder's rules
    (a database sends each column's distinct values; a file streams through).
    """
    source.prepare(codebook)  # a source whose rows the codebook defines (an OMOP CDM) checks itself first
    names = set(source.columns())
    lab = codebook.label.name
    wanted = [c for c in codebook.feature_names + [lab] if c in names]
    found: dict[str, ColumnMisfit] = {}
    for c in codebook.feature_names + [lab]:
        if c not in names:
            found[c] = ColumnMisfit(c, "label" if c == lab else "feature", absent=True)
    unknown: dict[str, set[str]] = {c: set() for c in wanted}
    missing = {c: False for c in wanted}
    from .sources.files import FileSource

    if isinstance(source, FileSource) and len(wanted) == len(codebook.feature_names) + 1:
        # a file's rows through the export's own batch encoder: every column of a chunk in one pass (one
        # column at a time, 20,000 columns cost seconds of per-column work and a text copy of every cell)
        from .data.batch_codes import BatchEncoder
        from .data.io import as_text, give_back_memory

        encoder = BatchEncoder(codebook)
        for batch in source.row_batches(wanted):
            found_here, rest = encoder.misfits(batch)
            for j, (texts, miss) in found_here.items():
                unknown[wanted[j]].update(texts)
                missing[wanted[j]] = missing[wanted[j]] or miss
            for j in rest:
                _look_up(codebook, wanted[j], as_text(batch[wanted[j]], wanted[j]), unknown, missing)
        encoder = batch = None
        give_back_memory()  # the last chunk and its codes: not held under the export that follows the check
    else:
        for batch, _rows in source.draft_batches(wanted):
            for c, arr in batch.items():
                _look_up(codebook, c, arr, unknown, missing)
    for c in wanted:
        if unknown[c] or missing[c]:
            f = None if c == lab else codebook.feature(c)
            found[c] = ColumnMisfit(c, "label" if c == lab else "feature", unknown=_sorted(unknown[c]),
                                    missing=missing[c], numeric=isinstance(f, NumericFeature))
    order = {c: k for k, c in enumerate(codebook.feature_names + [lab])}
    return SchemaCheck(source.name, codebook.fingerprint, sorted(found.values(), key=lambda m: order[m.column]))


def _look_up(codebook: Codebook, c: str, arr: Any, unknown: dict[str, set[str]], missing: dict[str, bool]) -> None:
    """Column ``c``'s text values ``arr`` looked up by the codebook's rules, one column at a time: the
    values it refuses added to ``unknown[c]``, ``missing[c]`` set when a value is missing."""
    values, index, _nulls = distinct(arr)
    used = np.zeros(len(values) + 1, dtype=bool)
    used[np.unique(index)] = True
    if c == codebook.label.name:
        codes, text = label_codes(codebook.label.classes, values)
        bad, miss = codes == UNKNOWN, codes == MISSING
    else:
        f = codebook.feature(c)
        codes, text = value_codes(f, values)
        if isinstance(f, NumericFeature) and f.edges is None:
            bad, miss = np.isinf(codes), np.isnan(codes)
        else:
            bad, miss = codes == UNKNOWN, codes == MISSING
    unknown[c].update(text[int(k)].as_py() for k in np.flatnonzero(bad & used))
    missing[c] = missing[c] or bool((miss & used).any())


def _sorted(values: set[str]) -> list[str]:
    try:
        return sorted(values, key=lambda v: (float(v), v))
    except ValueError:
        return sorted(values)
