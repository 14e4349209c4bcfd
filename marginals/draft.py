"""Drafting a codebook from local data (``marg schema init``).

The draft takes categorical levels from the values seen and numeric bin edges from
quantiles of the data (a file streams through; a database sends each column's distinct
values and a random sample of rows for the quantiles). Both are *data-derived*, which can disclose (a rare level, an
extreme value), so the draft is marked ``"draft": true`` and the CLI says loudly that it
must be reviewed — replace edges by public clinical cut points, add levels every site may
have — before the codebook is shared.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .data.codebook import MAX_LEVELS, CategoricalFeature, Codebook, Label, NumericFeature
from marg.errors import InputError

if TYPE_CHECKING:
    from .sources import Source

MISSING_LEVEL = "(missing)"
RESERVOIR = 200_000
NEAR_UNIQUE = 0.5  # a text column with at least this many distinct values per row identifies rows
MIN_ROWS_UNIQUE = 20  # fewer rows seen: uniqueness says nothing
# name tokens of columns that identify patients (matched on the words of the name: patient_id, PatientName, DOB…)
ID_WORDS = ("id", "ids", "mrn", "ssn", "nhs", "uuid", "guid", "name", "surname", "email", "phone", "telephone", "dob",
            "address", "postcode", "pid", "patid", "subject", "person", "encounter", "chartref")
ID_PHRASES = (("date", "of", "birth"), ("birth", "date"), ("birthdate",), ("patient", "number"), ("patient", "no"),
              ("record", "number"), ("first", "name"), ("last", "name"), ("chart", "ref"), ("chart", "number"))


def _words(name: str) -> list[str]:
    import re

    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)  # PatientID -> Patient ID
    return [w for w in re.split(r"[^a-z0-9]+", spaced.lower()) if w]


def identifier_name(name: str) -> str | None:
    """The id-like word of a column name (``patient_id`` → ``"patient"``), or None."""
    words = _words(name)
    if words == ["patient"]:
        return "patient"
    for phrase in ID_PHRASES:
        k = len(phrase)
        if any(tuple(words[i:i + k]) == phrase for i in range(len(words) - k + 1)):
            return " ".join(phrase)
    return next((w for w in words if w in ID_WORDS), None)


@dataclass(frozen=True)
class LeftOut:
    """A column the draft left out, and why (one phrase naming the evidence)."""

    column: str
    reason: str


def _sort_levels(values: Sequence[str]) -> list[str]:
    try:
        return sorted(values, key=lambda v: (float(v), v))
    except ValueError:
        return sorted(values)


def draft_codebook(
    path: "str | Path | Source",
    label: str,
    *,
    max_levels: int = 20,
    bins: int = 4,
    categorical: Sequence[str] = (),
    numeric: Sequence[str] = (),
    exclude: Sequence[str] = (),
    seed: int = 0,
    level_cap: int = MAX_LEVELS,
    left_out: list[LeftOut] | None = None,
) -> Codebook:
    """Draft a codebook from a data file.

    A column whose non-missing values all parse as numbers and that has more than
    ``max_levels`` distinct values becomes a numeric feature with ``bins`` quantile bins;
    every other column becomes categorical with its observed levels (plus a missing level
    if empty cells occur). ``categorical`` / ``numeric`` force a column's type; ``exclude``
    drops columns.

    Columns that identify rows are left out, each appended to ``left_out`` with its reason:
    an id-like name (:func:`identifier_name`: id, mrn, ssn, patient, name, email, phone,
    date of birth, …); a text column with at least ``NEAR_UNIQUE`` distinct values per row
    (of at least ``MIN_ROWS_UNIQUE`` rows seen — a database sends a random sample of rows);
    an integer column unique in every row (a row number); a text column with more than
    ``level_cap`` levels (its rare levels point at patients; export refuses it). A column
    forced with ``categorical``/``numeric`` is kept. The first id-like column whose values
    repeat among the rows seen (visits of one patient) becomes the codebook's ``privacy_unit``,
    its row bound left for a person to set (:mod:`marg.marginals.privacy_unit`).
    """
    from .sources import open_source

    src = open_source(path) if not hasattr(path, "draft_batches") else path
    names = src.columns()
    if label not in names:
        raise InputError(f"label column {label!r} is absent from {src.name} (columns: {', '.join(names[:12])})")
    for nm in list(categorical) + list(numeric) + list(exclude):
        if nm not in names:
            raise InputError(f"column {nm!r} is absent from {src.name}")
    both = set(categorical) & set(numeric)
    if both:
        raise InputError(f"column {sorted(both)[0]!r} cannot be both categorical and numeric")
    if bins < 2:
        raise InputError(f"--bins must be at least 2, got {bins}")
    cols = [c for c in names if c not in set(exclude)]
    feats = [c for c in cols if c != label]
    if not feats:
        raise InputError("no feature columns left besides the label")
    rng = np.random.default_rng(seed)
    levels: dict[str, set[str]] = {c: set() for c in cols}
    too_many: set[str] = set()
    has_null = {c: False for c in cols}
    is_num = {c: True for c in feats}
    sample: dict[str, list[np.ndarray]] = {c: [] for c in feats}
    seen = 0
    row_levels: dict[str, set[str]] = {c: set() for c in feats}  # distinct values among the rows seen (capped)
    for batch, rows in src.draft_batches(cols):
        nrows = len(next(iter(batch.values()))) if rows else 0
        for c in batch:
            arr = pc.utf8_trim_whitespace(batch[c])
            if arr.null_count:
                has_null[c] = True
            if rows and c != label and len(row_levels[c]) <= 10_000:
                row_levels[c].update(v for v in pc.unique(arr.drop_null()).to_pylist())
            if c not in too_many:
                levels[c].update(v for v in pc.unique(arr.drop_null()).to_pylist())
                if c != label and len(levels[c]) > 10_000:
                    too_many.add(c)
            if c == label or not is_num[c]:
                continue
            try:
                v = pc.cast(arr.drop_null(), pa.float64()).to_numpy(zero_copy_only=False)
            except pa.ArrowInvalid:
                is_num[c] = False
                sample[c] = []
                continue
            if rows:  # a sample of rows (not a list of distinct values) gives the quantiles
                sample[c].append(v[np.isfinite(v)])
        seen += nrows
        # Keep the numeric reservoir bounded for files larger than memory.
        for c in feats:
            if sample[c] and sum(len(a) for a in sample[c]) > 2 * RESERVOIR:
                allv = np.concatenate(sample[c])
                sample[c] = [rng.choice(allv, RESERVOIR, replace=False)]
    if seen == 0:
        raise InputError(f"{src.name} has no data rows")
    out = []
    unit = None  # the first id-like column whose values repeat: several rows per patient
    for c in feats:
        force_num, force_cat = c in numeric, c in categorical
        why = None if (force_num or force_cat) else _identifies(c, levels[c], row_levels[c], seen, is_num[c],
                                                                 c in too_many, max_levels, level_cap)
        if why is not None:
            if unit is None and identifier_name(c) is not None and len(row_levels[c]) < min(seen, 10_000):
                unit = c
                why += "; its values repeat (several rows per patient): the codebook names it the privacy unit"
            if left_out is not None:
                left_out.append(LeftOut(c, why))
            continue
        if force_num and not is_num[c]:
            raise InputError(f"column {c!r} was declared numeric but holds non-numbers")
        n_distinct = len(levels[c])
        use_num = force_num or (not force_cat and is_num[c] and (n_distinct > max_levels or c in too_many))
        if use_num:
            v = np.concatenate(sample[c]) if sample[c] else np.zeros(0)
            if v.size == 0:
                raise InputError(f"column {c!r} has no numeric values to draft bin edges from")
            qs = np.quantile(v, np.linspace(0, 1, bins + 1)[1:-1])
            edges = sorted({float(np.round(q, 6)) for q in qs})
            if not edges:
                edges = [float(np.median(v))]
            out.append(NumericFeature(name=c, edges=tuple(edges), missing=has_null[c]))
        else:
            if c in too_many:
                raise InputError(f"column {c!r} has more than 10000 distinct non-numeric values (an identifier? use "
                                 "--exclude)")
            lv = _sort_levels(list(levels[c]))
            miss = None
            if has_null[c]:
                miss = MISSING_LEVEL
                lv.append(MISSING_LEVEL)
            if not lv:
                raise InputError(f"column {c!r} is empty")
            out.append(CategoricalFeature(name=c, levels=tuple(lv), missing=miss))
    if not out:
        raise InputError("no feature columns left besides the label: every column looks like an identifier "
                         "(force one with --categorical or --numeric)")
    if has_null[label]:
        pass  # rows with a missing label are rejected at export; classes come from the values seen
    classes = _sort_levels(list(levels[label]))
    if len(classes) < 2:
        raise InputError(f"label column {label!r} has fewer than 2 distinct values: {classes!r}")
    if len(classes) > 100:
        raise InputError(f"label column {label!r} has {len(classes)} distinct values; is it really a class label?")
    return Codebook(features=tuple(out), label=Label(name=label, classes=tuple(classes)), draft=True,
                    privacy_unit=None if unit is None else (unit, None))


def _identifies(c: str, levels: set[str], row_levels: set[str], rows: int, numeric: bool, too_many: bool,
                max_levels: int, level_cap: int) -> str | None:
    """Why column ``c`` identifies rows (one phrase), or None (see :func:`draft_codebook`)."""
    word = identifier_name(c)
    if word is not None:
        return f"its name says it identifies patients ({word!r})"
    n_row = len(row_levels)
    if numeric:
        if rows >= MIN_ROWS_UNIQUE and n_row >= rows and all(float(v).is_integer() for v in row_levels):
            return f"a different whole number in every one of the {rows:,} rows (a row or patient number)"
        return None
    if too_many:
        return "more than 10,000 distinct values (an identifier or free text)"
    if rows >= MIN_ROWS_UNIQUE and n_row >= NEAR_UNIQUE * rows:
        return f"{n_row:,} distinct values in {rows:,} rows: nearly one per row"
    if len(levels) > level_cap:
        return (f"{len(levels):,} levels, above the level cap {level_cap:,} (export refuses it: map it to public "
                "categories, or force it with --categorical and raise --max-levels at export)")
    return None
