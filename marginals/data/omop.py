"""OMOP CDM definitions in a codebook: features, the label and the population defined by the CDM.

A codebook may define its rows by the OMOP Common Data Model (CDM 5.4) instead of by
columns: the population is a cohort (``"omop": {"target_cohort": 11}`` on the codebook; each
entry's ``cohort_start_date`` is its *index date*) and every feature and the label say how
the CDM computes them for one entry (``"omop": {...}`` on each)::

    {"name": "age",   "type": "numeric", "edges": [40, 60], "omop": {"age_at": "index"}}
    {"name": "sex",   "levels": {"8507": "male", "8532": "female"}, "omop": {"person": "gender_concept_id"}}
    {"name": "t2dm",  "omop": {"domain": "condition", "concepts": [201826], "descendants": true,
                               "window": [-365, 0]}}                      # levels "no", "yes"
    {"name": "hba1c", "type": "numeric", "edges": [5.7, 6.5, 8], "missing": true,
     "omop": {"domain": "measurement", "concepts": [3004410], "window": [-180, 0], "value": "last"}}
    label: {"name": "outcome", "classes": ["no", "yes"],
            "omop": {"outcome_cohort": 12, "time_at_risk": [1, 365]}}

Windows are in days relative to the index date, both ends included. A feature reads no event
after the index date (its window ends at day 0 at the latest); the label reads none before it
(its time at risk starts at day 0 at the earliest). Presence features are ``"no"``/``"yes"``
(absent, present: the levels' order); a measurement's value is the ``first``, ``last``,
``max`` or ``min`` ``value_as_number`` in its window, binned by the feature's edges (no value:
the missing level). ``"descendants": true`` adds every descendant of the concepts from
``concept_ancestor``; ``"unit": ID`` keeps only a measurement's rows in that ``unit_concept_id``.

Each definition is normalised here (:func:`complete_feature`, :func:`label_definition`,
:func:`population_definition`: concepts sorted, every key explicit) and kept in the codebook's
JSON, so the fingerprint covers it: every site computes the same features. Errors are one line
naming the feature and the key.
"""

from __future__ import annotations

from typing import Any

from marg.errors import InputError

# domain -> (table, concept column, date column)
DOMAINS = {
    "condition": ("condition_occurrence", "condition_concept_id", "condition_start_date"),
    "drug": ("drug_exposure", "drug_concept_id", "drug_exposure_start_date"),
    "procedure": ("procedure_occurrence", "procedure_concept_id", "procedure_date"),
    "observation": ("observation", "observation_concept_id", "observation_date"),
    "measurement": ("measurement", "measurement_concept_id", "measurement_date"),
}
PRESENCE_DOMAINS = ("condition", "drug", "procedure", "observation")
VALUES = ("first", "last", "max", "min")
PERSON_COLUMNS = ("gender_concept_id", "race_concept_id", "ethnicity_concept_id")
PRESENCE_LEVELS = ("no", "yes")
UNIT = "person_id"  # the privacy unit of every OMOP codebook
RESERVED = ("person_id", "cohort_start_date", "cohort_entry")  # columns of the feature rows besides the codebook's
MAX_DAYS = 36_600  # a window longer than a century is a typo

_KEYS = {
    "age": ("age_at",),
    "person": ("person",),
    "presence": ("domain", "concepts", "descendants", "window"),
    "measurement": ("domain", "concepts", "descendants", "window", "value", "unit"),
}
_LABEL_KEYS = ("outcome_cohort", "domain", "concepts", "descendants", "time_at_risk")


def _int_id(v: Any, where: str, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0 or v >= 1 << 63:
        raise InputError(f"{where}: {what} must be a whole number (a concept or cohort id), got {v!r}")
    return int(v)


def _unknown(d: dict, allowed: tuple[str, ...], where: str) -> None:
    for k in d:
        if k not in allowed:
            raise InputError(f"{where}: unknown omop key {k!r} (allowed here: {', '.join(allowed)})")


def _days(v: Any, where: str, key: str) -> tuple[int, int]:
    if (not isinstance(v, (list, tuple)) or len(v) != 2
            or any(isinstance(x, bool) or not isinstance(x, int) for x in v)):
        raise InputError(f"{where}: {key} must be [start, end] in whole days relative to the index date, got {v!r}")
    a, b = int(v[0]), int(v[1])
    if a > b:
        raise InputError(f"{where}: {key} [{a}, {b}] starts after it ends")
    if max(abs(a), abs(b)) > MAX_DAYS:
        raise InputError(f"{where}: {key} [{a}, {b}] reaches beyond {MAX_DAYS:,} days")
    return a, b


def _concepts(d: dict, where: str) -> list[int]:
    cs = d.get("concepts")
    if not isinstance(cs, (list, tuple)) or not cs:
        raise InputError(f"{where}: 'concepts' must be a non-empty list of concept ids, got {cs!r}")
    return sorted({_int_id(c, where, "a concept") for c in cs})


def _descendants(d: dict, where: str) -> bool:
    v = d.get("descendants", False)
    if not isinstance(v, bool):
        raise InputError(f"{where}: 'descendants' must be true or false, got {v!r}")
    return v


def kind_of(omop: dict) -> str:
    """``"age"``, ``"person"``, ``"presence"`` or ``"measurement"``: what a feature's definition computes."""
    if "age_at" in omop:
        return "age"
    if "person" in omop:
        return "person"
    return "measurement" if omop.get("domain") == "measurement" else "presence"


def feature_definition(name: Any, omop: Any) -> dict[str, Any]:
    """A feature's ``omop`` object, checked and normalised (every key explicit, concepts sorted)."""
    where = f"feature {name!r}"
    if not isinstance(omop, dict) or not omop:
        raise InputError(f"{where}: 'omop' must be an object (age_at, person, or domain/concepts/window)")
    if "age_at" in omop:
        _unknown(omop, _KEYS["age"], where)
        if omop["age_at"] != "index":
            raise InputError(f"{where}: 'age_at' must be \"index\" (the age at the cohort start date), got "
                             f"{omop['age_at']!r}")
        return {"age_at": "index"}
    if "person" in omop:
        _unknown(omop, _KEYS["person"] + ("map",), where)
        col = omop["person"]
        if col not in PERSON_COLUMNS:
            raise InputError(f"{where}: 'person' must name one of {', '.join(PERSON_COLUMNS)} of table person, got "
                             f"{col!r}")
        out: dict[str, Any] = {"person": col}
        if "map" in omop:
            out["map"] = _concept_map(omop["map"], where)
        return out
    dom = omop.get("domain")
    if dom not in DOMAINS:
        raise InputError(f"{where}: 'domain' must be one of {', '.join(DOMAINS)} (or give age_at or person), got "
                         f"{dom!r}")
    kind = "measurement" if dom == "measurement" else "presence"
    _unknown(omop, _KEYS[kind], where)
    if "window" not in omop:
        raise InputError(f"{where}: a {dom} feature needs a 'window': [start, end] in days relative to the index date")
    a, b = _days(omop["window"], f"{where} (table {DOMAINS[dom][0]})", "window")
    if b > 0:
        raise InputError(f"{where} (table {DOMAINS[dom][0]}): window [{a}, {b}] ends {b} days after the index date; a "
                         "feature reads only events up to the index date (end <= 0)")
    out = {"domain": dom, "concepts": _concepts(omop, where), "descendants": _descendants(omop, where),
           "window": [a, b]}
    if kind == "measurement":
        v = omop.get("value")
        if v not in VALUES:
            raise InputError(f"{where}: a measurement feature needs 'value': one of {', '.join(VALUES)}, got {v!r}")
        out["value"] = v
        if omop.get("unit") is not None:
            out["unit"] = _int_id(omop["unit"], where, "'unit' (a unit_concept_id)")
    return out


def _concept_map(m: Any, where: str) -> dict[str, str]:
    """``{"8507": "male", …}``: concept id (as text) → level name."""
    if not isinstance(m, dict) or not m:
        raise InputError(f"{where}: levels of a person column map concept ids to level names, e.g. "
                         "{\"8507\": \"male\", \"8532\": \"female\"}; got {m!r}")
    out = {}
    for k, v in m.items():
        try:
            cid = int(str(k).strip())
        except ValueError:
            raise InputError(f"{where}: {k!r} is not a concept id (the levels map concept ids to level "
                             "names)") from None
        if not isinstance(v, str) or not v.strip():
            raise InputError(f"{where}: concept {k} maps to {v!r}; give a level name")
        out[str(cid)] = v
    return dict(sorted(out.items(), key=lambda kv: int(kv[0])))


def complete_feature(fd: dict[str, Any]) -> dict[str, Any]:
    """A codebook feature object with an ``omop`` definition, completed as the codebook reads it:
    ``type`` inferred (presence and person: categorical; age and measurement: numeric), a presence
    feature's levels ``["no", "yes"]``, a person column's ``levels`` map moved into ``omop.map`` and
    its level names made the levels, and ``omop`` normalised (:func:`feature_definition`)."""
    name = fd.get("name")
    omop = feature_definition(name, fd["omop"])
    kind = kind_of(omop)
    out = dict(fd)
    where = f"feature {name!r}"
    typ = out.get("type", "numeric" if kind in ("age", "measurement") else "categorical")
    want = "numeric" if kind in ("age", "measurement") else "categorical"
    if typ != want:
        raise InputError(f"{where}: an omop {kind} feature is {want}, not {typ!r}")
    out["type"] = typ
    if kind == "presence":
        lv = out.get("levels", list(PRESENCE_LEVELS))
        if not isinstance(lv, (list, tuple)) or len(lv) != 2:
            raise InputError(f"{where}: a presence feature has two levels [absent, present], got {lv!r}")
        if out.get("missing") is not None:
            raise InputError(f"{where}: a presence feature has no missing level (an absent concept is its first level)")
        out["levels"] = list(lv)
    elif kind == "person":
        lv = out.get("levels")
        if isinstance(lv, dict):
            if "map" in omop:
                raise InputError(f"{where}: give the concept map once, in 'levels' or in omop 'map'")
            omop["map"] = _concept_map(lv, where)
            names = list(dict.fromkeys(omop["map"].values()))
            miss = out.get("missing")
            out["levels"] = names + ([miss] if miss is not None and miss not in names else [])
        elif "map" in omop and lv is None:
            miss = out.get("missing")
            names = list(dict.fromkeys(omop["map"].values()))
            out["levels"] = names + ([miss] if miss is not None and miss not in names else [])
    elif kind == "measurement":
        if out.get("edges") is None:
            raise InputError(f"{where}: a measurement feature is binned: give its public 'edges'")
    out["omop"] = omop
    return out


def label_definition(name: Any, omop: Any) -> dict[str, Any]:
    """The label's ``omop`` object, checked and normalised: an outcome cohort, or a concept set of a
    domain, within the time at risk ``[start, end]`` days after the index (start >= 0)."""
    where = f"label {name!r}"
    if not isinstance(omop, dict):
        raise InputError(f"{where}: 'omop' must be an object (outcome_cohort or domain/concepts, and time_at_risk)")
    _unknown(omop, _LABEL_KEYS, where)
    if "time_at_risk" not in omop:
        raise InputError(f"{where}: the label needs 'time_at_risk': [start, end] in days after the index date")
    a, b = _days(omop["time_at_risk"], where, "time_at_risk")
    if a < 0:
        raise InputError(f"{where}: time_at_risk [{a}, {b}] starts before the index date; the label reads only "
                         "events from the index date on (start >= 0)")
    if "outcome_cohort" in omop:
        if any(k in omop for k in ("domain", "concepts", "descendants")):
            raise InputError(f"{where}: give an outcome_cohort or a domain with concepts, not both")
        return {"outcome_cohort": _int_id(omop["outcome_cohort"], where, "'outcome_cohort'"), "time_at_risk": [a, b]}
    dom = omop.get("domain")
    if dom not in DOMAINS:
        raise InputError(f"{where}: give 'outcome_cohort' or a 'domain' (one of {', '.join(DOMAINS)}), got {dom!r}")
    return {"domain": dom, "concepts": _concepts(omop, where), "descendants": _descendants(omop, where),
            "time_at_risk": [a, b]}


def population_definition(omop: Any) -> dict[str, Any]:
    """The codebook's ``omop`` object: ``{"target_cohort": N}``."""
    if not isinstance(omop, dict):
        raise InputError("codebook: 'omop' must be an object {\"target_cohort\": N}")
    _unknown(omop, ("target_cohort",), "codebook population")
    if "target_cohort" not in omop:
        raise InputError("codebook population: 'omop' needs 'target_cohort' (the cohort whose entries are the rows)")
    return {"target_cohort": _int_id(omop["target_cohort"], "codebook population", "'target_cohort'")}


def check_codebook(cb: Any) -> None:
    """The rules across a codebook's parts: with a population every feature and the label have an
    omop definition (and without one none has), each fits its feature's type, the privacy unit is
    ``person_id``, and no feature takes a name of the rows' own columns."""
    parts = [f.omop for f in cb.features] + [cb.label.omop]
    if cb.omop is None:
        if any(p is not None for p in parts):
            raise InputError("codebook: omop features need the population on the codebook: \"omop\": "
                             "{\"target_cohort\": N}")
        return
    for f in cb.features:
        if f.omop is None:
            raise InputError(f"feature {f.name!r}: an OMOP codebook defines every feature by the CDM (give it 'omop')")
        if f.name in RESERVED:
            raise InputError(f"feature {f.name!r}: the name is one of the rows' own columns ({', '.join(RESERVED)})")
        kind = kind_of(f.omop)
        if kind in ("age", "measurement") and not f.is_discrete:
            raise InputError(f"feature {f.name!r}: an omop {kind} feature is binned: give its public 'edges'")
        if kind == "age" and f.missing:
            raise InputError(f"feature {f.name!r}: the age at the index is never missing (year_of_birth is required)")
        if kind == "person" and "map" in f.omop:
            extra = sorted(set(f.omop["map"].values()) - set(f.levels))
            if extra:
                raise InputError(f"feature {f.name!r}: concepts map to {extra[0]!r}, which is not one of its levels")
    if cb.label.omop is None:
        raise InputError(f"label {cb.label.name!r}: an OMOP codebook defines the label by the CDM (give it 'omop')")
    if cb.label.n_classes != 2:
        raise InputError(f"label {cb.label.name!r}: an omop label has two classes [without outcome, with outcome]")
    if cb.label.name in RESERVED:
        raise InputError(f"label {cb.label.name!r}: the name is one of the rows' own columns ({', '.join(RESERVED)})")
    if cb.privacy_unit is not None and cb.privacy_unit[0] != UNIT:
        raise InputError(f"codebook: an OMOP codebook's privacy unit is {UNIT!r} (the person), not "
                         f"{cb.privacy_unit[0]!r}")


def concept_sets(cb: Any) -> list[tuple[str, dict[str, Any]]]:
    """``(what, definition)`` of every definition that names concepts (features, then the label)."""
    out = [(f"feature {f.name!r}", f.omop) for f in cb.features if f.omop is not None and "concepts" in f.omop]
    if cb.label.omop is not None and "concepts" in cb.label.omop:
        out.append((f"label {cb.label.name!r}", cb.label.omop))
    return out
