"""Drafting an OMOP codebook's levels and edges from a site's own CDM (``marg schema init --from-omop SPEC``).

The specification is a codebook whose features carry their OMOP definitions
(:mod:`marg.marginals.data.omop`) but may leave out what only data could suggest: a numeric feature's
``edges`` (age, a measurement: drafted as ``bins`` quantiles of the site's values) and a person
column's ``levels`` (drafted as the concept ids, or mapped names, seen). The rows come from the
source's own query, inside the database (a random sample of rows for the quantiles, each
column's distinct values for the levels), exactly as :func:`marg.marginals.draft.draft_codebook`
drafts a table. Data-derived edges and levels can disclose, so the result is marked
``"draft": true``: a person replaces them by public cut points and the public list of concepts
before the codebook is shared.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .data.codebook import MAX_LEVELS, Codebook
from .draft import MISSING_LEVEL
from .data.omop import kind_of
from marg.errors import InputError

PLACEHOLDER_LEVEL = "(draft)"


def draft_omop(source: Any, spec: dict[str, Any], *, bins: int = 4, level_cap: int = MAX_LEVELS) -> Codebook:
    """The codebook ``spec`` with its missing edges and levels drafted from ``source`` (module docstring)."""
    if not isinstance(spec, dict) or not isinstance(spec.get("features"), list):
        raise InputError("--from-omop: the specification must be a codebook object with a 'features' list")
    if bins < 2:
        raise InputError(f"--bins must be at least 2, got {bins}")
    spec = copy.deepcopy(spec)
    spec.pop("draft", None)
    spec.setdefault("format", "marg-codebook")
    spec.setdefault("version", 1)
    todo: dict[str, str] = {}  # feature -> "edges" or "levels"
    for fd in spec["features"]:
        if not isinstance(fd, dict) or not isinstance(fd.get("omop"), dict):
            raise InputError(f"--from-omop: feature {fd.get('name') if isinstance(fd, dict) else fd!r} has no omop "
                             "definition")
        kind = kind_of(fd["omop"])
        if kind in ("age", "measurement") and fd.get("edges") is None and fd.get("lo") is None:
            fd["type"], fd["edges"], todo[fd["name"]] = "numeric", [0.0], "edges"
            if kind == "measurement":
                fd["missing"] = True
        elif kind == "person" and fd.get("levels") is None and "map" not in fd["omop"]:
            fd["levels"], todo[fd["name"]] = [PLACEHOLDER_LEVEL], "levels"
    provisional = Codebook.from_dict(spec)  # checks every definition before the database is read
    source.prepare(provisional)
    names = list(todo)
    values: dict[str, set[str]] = {c: set() for c in names}
    nulls = {c: False for c in names}
    sample: dict[str, list[np.ndarray]] = {c: [] for c in names}
    rows = 0
    for batch, is_rows in source.draft_batches(names) if names else ():
        for c, arr in batch.items():
            arr = pc.utf8_trim_whitespace(arr)
            nulls[c] = nulls[c] or arr.null_count > 0
            if not is_rows:
                values[c].update(arr.drop_null().to_pylist())
            elif todo[c] == "edges":
                v = pc.cast(arr.drop_null(), pa.float64()).to_numpy(zero_copy_only=False)
                sample[c].append(v[np.isfinite(v)])
        if is_rows:
            rows += len(next(iter(batch.values()))) if batch else 0
    by_name = {fd["name"]: fd for fd in spec["features"]}
    for c in names:
        fd = by_name[c]
        if todo[c] == "edges":
            v = np.concatenate(sample[c]) if sample[c] else np.zeros(0)
            if v.size == 0:
                raise InputError(f"feature {c!r}: the cohort has no values to draft bin edges from (give its 'edges')")
            qs = np.quantile(v, np.linspace(0, 1, bins + 1)[1:-1])
            fd["edges"] = sorted({float(np.round(q, 3)) for q in qs}) or [float(np.median(v))]
            fd["missing"] = bool(fd.get("missing") or nulls[c]) if kind_of(fd["omop"]) == "measurement" else False
        else:
            levels = sorted(values[c], key=lambda s: (len(s), s))
            if len(levels) > level_cap:
                raise InputError(f"feature {c!r}: {len(levels):,} concepts seen, above the level cap {level_cap:,}: "
                                 "map them to public groups in its 'levels'")
            if nulls[c]:
                levels.append(MISSING_LEVEL)
                fd["missing"] = MISSING_LEVEL
            if not levels:
                raise InputError(f"feature {c!r}: no values in the cohort to draft levels from")
            fd["levels"] = levels
    spec["draft"] = True
    return Codebook.from_dict(spec)
