"""The codebook: the public schema every site of a study shares.

A codebook lists the features in order — categorical (explicit levels, optionally an
explicit missing level) or numeric (public bin edges → a discrete feature; or a public
range ``[lo, hi]`` → a raw numeric feature) — and the label with its classes. Its
fingerprint (SHA-256 of the canonical JSON) goes into every bundle and model, so data
coded under another schema is refused.

Levels, edges and ranges must be public facts, never data-derived: a drafted codebook
(``marg schema init``) carries ``"draft": true`` until a person reviews it.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from marg._util import canonical_json
from marg.errors import InputError

if TYPE_CHECKING:
    import numpy as np

FORMAT = "marg-codebook"
VERSION = 1
MAX_CODEBOOK_BYTES = 64 << 20  # a larger codebook file is refused before it is parsed (100,000 binary genes: ~16 MB)
MAX_LEVELS = 100  # a feature with more levels is refused at export (--max-levels) and left out of a drafted codebook


def code_dtype(n_levels: int) -> "np.dtype":
    """The smallest unsigned integer type holding codes 0..n_levels−1."""
    import numpy as np  # not at import: the codebook is read by commands that never count (marg --help)

    if n_levels <= 1 << 8:
        return np.dtype(np.uint8)
    if n_levels <= 1 << 16:
        return np.dtype(np.uint16)
    return np.dtype(np.uint32)


def _check_name(name: Any, what: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise InputError(f"{what} name must be a non-empty string, got {name!r}")
    return name


def _check_levels(levels: Any, where: str) -> tuple[str, ...]:
    if not isinstance(levels, (list, tuple)) or len(levels) == 0:
        raise InputError(f"{where}: levels must be a non-empty list, got {levels!r}")
    out = []
    for lv in levels:
        if isinstance(lv, bool) or not isinstance(lv, (str, int)):
            raise InputError(f"{where}: level {lv!r} must be a string")
        out.append(str(lv))
    seen = set()
    for lv in out:
        if lv in seen:
            raise InputError(f"{where}: duplicate level {lv!r}")
        seen.add(lv)
    return tuple(out)


@dataclass(frozen=True)
class CategoricalFeature:
    """A categorical feature with explicit, public levels.

    Attributes
    ----------
    name : str
    levels : tuple of str
        The ordered levels; a value's code is its index here.
    missing : str or None
        The level that empty / NA cells map to (must be one of ``levels``). ``None``
        means missing values are an error.
    """

    name: str
    levels: tuple[str, ...]
    missing: str | None = None
    omop: dict | None = field(default=None, hash=False)  # its OMOP CDM definition (:mod:`marg.marginals.data.omop`)

    kind = "categorical"

    def __post_init__(self) -> None:
        _check_name(self.name, "feature")
        object.__setattr__(self, "levels", _check_levels(self.levels, f"feature {self.name!r}"))
        if self.missing is not None and self.missing not in self.levels:
            raise InputError(
                f"feature {self.name!r}: missing level {self.missing!r} is not one of its levels"
            )

    @property
    def n_levels(self) -> int:
        return len(self.levels)

    @property
    def is_discrete(self) -> bool:
        return True

    @property
    def level_names(self) -> tuple[str, ...]:
        return self.levels

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "type": "categorical", "levels": list(self.levels)}
        if self.missing is not None:
            d["missing"] = self.missing
        if self.omop is not None:
            d["omop"] = self.omop
        return d


@dataclass(frozen=True)
class NumericFeature:
    """A numeric feature with public bin edges (discrete) or a public range (raw).

    With ``edges`` (strictly increasing, interior cut points e_1 < … < e_k) the value v gets
    code ``#{j : e_j < v}``, i.e. bins ``(-inf, e_1], (e_1, e_2], …, (e_k, inf)``; with
    ``missing=True`` an extra last level ``"missing"`` takes empty cells. With only
    ``lo``/``hi`` the feature is used raw, clipped to ``[lo, hi]``.
    """

    name: str
    edges: tuple[float, ...] | None = None
    lo: float | None = None
    hi: float | None = None
    missing: bool = False
    omop: dict | None = field(default=None, hash=False)  # its OMOP CDM definition (:mod:`marg.marginals.data.omop`)

    kind = "numeric"

    def __post_init__(self) -> None:
        _check_name(self.name, "feature")
        where = f"feature {self.name!r}"
        if self.edges is not None:
            try:
                edges = tuple(float(e) for e in self.edges)
            except (TypeError, ValueError):
                raise InputError(f"{where}: bin edges must be numbers, got {self.edges!r}") from None
            if len(edges) == 0:
                raise InputError(f"{where}: bin edges must be a non-empty list")
            if any(not math.isfinite(e) for e in edges):
                raise InputError(f"{where}: bin edges must be finite, got {list(edges)!r}")
            if any(b <= a for a, b in zip(edges, edges[1:])):
                raise InputError(f"{where}: bin edges must be strictly increasing, got {list(edges)!r}")
            object.__setattr__(self, "edges", edges)
        for attr in ("lo", "hi"):
            v = getattr(self, attr)
            if v is not None:
                try:
                    v = float(v)
                except (TypeError, ValueError):
                    raise InputError(f"{where}: {attr} must be a number, got {v!r}") from None
                if not math.isfinite(v):
                    raise InputError(f"{where}: {attr} must be finite, got {v!r}")
                object.__setattr__(self, attr, v)
        if self.edges is None:
            if self.lo is None or self.hi is None:
                raise InputError(f"{where}: a numeric feature needs bin edges or a public range lo/hi")
            if not self.lo < self.hi:
                raise InputError(f"{where}: range needs lo < hi, got [{self.lo}, {self.hi}]")
            if self.missing:
                raise InputError(f"{where}: a raw numeric feature cannot have a missing level; bin it")
        object.__setattr__(self, "missing", bool(self.missing))

    @property
    def is_discrete(self) -> bool:
        return self.edges is not None

    @property
    def n_levels(self) -> int:
        """Number of codes (bins, plus the missing level); 1 for a raw numeric feature."""
        if self.edges is None:
            return 1
        return len(self.edges) + 1 + (1 if self.missing else 0)

    @property
    def level_names(self) -> tuple[str, ...]:
        if self.edges is None:
            return (self.name,)
        e = [f"{x:g}" for x in self.edges]
        names = [f"<={e[0]}"] + [f"({a},{b}]" for a, b in zip(e, e[1:])] + [f">{e[-1]}"]
        if self.missing:
            names.append("missing")
        return tuple(names)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "type": "numeric"}
        if self.edges is not None:
            d["edges"] = list(self.edges)
        if self.lo is not None:
            d["lo"] = self.lo
        if self.hi is not None:
            d["hi"] = self.hi
        if self.missing:
            d["missing"] = True
        if self.omop is not None:
            d["omop"] = self.omop
        return d


Feature = Union[CategoricalFeature, NumericFeature]


@dataclass(frozen=True)
class Label:
    """The label column and its public classes (codes 0..K-1 in this order)."""

    name: str
    classes: tuple[str, ...]
    omop: dict | None = field(default=None, hash=False)  # its OMOP CDM definition (:mod:`marg.marginals.data.omop`)

    def __post_init__(self) -> None:
        _check_name(self.name, "label")
        object.__setattr__(self, "classes", _check_levels(self.classes, f"label {self.name!r}"))
        if len(self.classes) < 2:
            raise InputError(f"label {self.name!r} needs at least 2 classes, got {list(self.classes)!r}")

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "classes": list(self.classes)}
        if self.omop is not None:
            d["omop"] = self.omop
        return d


@dataclass(frozen=True)
class Codebook:
    """Ordered features plus the label: the schema shared by all sites of a study.

    Attributes
    ----------
    features : tuple of CategoricalFeature | NumericFeature
    label : Label
    draft : bool
        True for a codebook drafted from local data that nobody has reviewed yet.
    privacy_unit : (column, max_rows_per_unit or None), optional
        The column naming each patient and the bound on a patient's rows
        (:mod:`marg.marginals.privacy_unit`; the bound may be left to ``--max-rows-per-unit``).
    omop : dict, optional
        The population of a codebook defined by the OMOP CDM (``{"target_cohort": N}``,
        :mod:`marg.marginals.data.omop`): its rows are the cohort's entries, its unit the person.
    """

    features: tuple[Feature, ...]
    label: Label
    draft: bool = False
    privacy_unit: tuple[str, int | None] | None = None
    omop: dict | None = field(default=None, hash=False)
    _index: dict = field(default=None, init=False, repr=False, compare=False, hash=False)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        object.__setattr__(self, "features", tuple(self.features))
        if not self.features:
            raise InputError("codebook has no features")
        names = [f.name for f in self.features]
        seen: set[str] = set()
        for nm in names + [self.label.name]:
            if nm in seen:
                raise InputError(f"codebook: duplicate column name {nm!r}")
            seen.add(nm)
        object.__setattr__(self, "_index", {nm: i for i, nm in enumerate(names)})
        if self.privacy_unit is not None:
            unit = self.privacy_unit
            if not isinstance(unit, tuple) or len(unit) != 2 or not isinstance(unit[0], str) or not unit[0] or not (
                    unit[1] is None or (isinstance(unit[1], int) and not isinstance(unit[1], bool) and unit[1] >= 1)):
                raise InputError("codebook: 'privacy_unit' must be {\"column\": NAME, \"max_rows_per_unit\": K >= 1 "
                                 "or null}")
        if self.omop is not None or self.label.omop is not None or any(f.omop is not None for f in self.features):
            from .omop import check_codebook

            check_codebook(self)

    # ----------------------------------------------------------------- queries
    @property
    def feature_names(self) -> list[str]:
        return [f.name for f in self.features]

    @property
    def n_features(self) -> int:
        return len(self.features)

    @property
    def n_classes(self) -> int:
        return self.label.n_classes

    def index(self, name: str) -> int:
        """Position of feature ``name``; InputError naming it if absent."""
        try:
            return self._index[name]
        except KeyError:
            raise InputError(f"unknown feature {name!r} (not in the codebook)") from None

    def feature(self, name: str) -> Feature:
        return self.features[self.index(name)]

    def n_levels(self, i: int | str) -> int:
        f = self.features[self.index(i)] if isinstance(i, str) else self.features[i]
        return f.n_levels

    def attribute_size(self, name: str) -> int:
        """Domain size of a discrete attribute (a discrete feature or the label)."""
        if name == self.label.name:
            return self.label.n_classes
        f = self.feature(name)
        if not f.is_discrete:
            raise InputError(f"feature {name!r} is raw numeric and has no count table")
        return f.n_levels

    @property
    def discrete_names(self) -> list[str]:
        return [f.name for f in self.features if f.is_discrete]

    @property
    def numeric_names(self) -> list[str]:
        return [f.name for f in self.features if not f.is_discrete]

    # ------------------------------------------------------------ persistence
    def to_dict(self, *, include_draft: bool = True) -> dict[str, Any]:
        d: dict[str, Any] = {
            "format": FORMAT,
            "version": VERSION,
            "features": [f.to_dict() for f in self.features],
            "label": self.label.to_dict(),
        }
        if self.privacy_unit is not None:
            d["privacy_unit"] = {"column": self.privacy_unit[0], "max_rows_per_unit": self.privacy_unit[1]}
        if self.omop is not None:
            d["omop"] = self.omop
        if include_draft and self.draft:
            d["draft"] = True
        return d

    @property
    def unit_declaration(self) -> dict[str, Any]:
        """The codebook's ``privacy_unit`` as ``{column, max_rows_per_unit}`` (empty when it names none).

        An OMOP codebook's unit is always the person: ``person_id``, by default at most one row (the
        first cohort entry) each."""
        if self.omop is not None:
            return {"column": "person_id", "max_rows_per_unit": (self.privacy_unit or ("", None))[1] or 1}
        if self.privacy_unit is None:
            return {}
        return {"column": self.privacy_unit[0], "max_rows_per_unit": self.privacy_unit[1]}

    @cached_property
    def fingerprint(self) -> str:
        """SHA-256 (hex) of the canonical JSON of the schema (the draft flag excluded; computed once: a codebook is
        frozen)."""
        return hashlib.sha256(canonical_json(self.to_dict(include_draft=False))).hexdigest()

    @classmethod
    def from_dict(cls, d: Any) -> "Codebook":
        if not isinstance(d, dict):
            raise InputError(f"codebook must be a JSON object, got {type(d).__name__}")
        if d.get("format", FORMAT) != FORMAT:
            raise InputError(f"not a marg codebook: format {d.get('format')!r}")
        if d.get("version", VERSION) != VERSION:
            raise InputError(f"unsupported codebook version {d.get('version')!r} (this marg reads {VERSION})")
        feats_raw = d.get("features")
        if not isinstance(feats_raw, list):
            raise InputError("codebook: 'features' must be a list")
        feats: list[Feature] = []
        for k, fd in enumerate(feats_raw):
            if not isinstance(fd, dict):
                raise InputError(f"codebook: feature #{k} must be an object, got {fd!r}")
            if fd.get("omop") is not None:
                from .omop import complete_feature

                fd = complete_feature(fd)
            typ = fd.get("type")
            name = fd.get("name")
            if typ == "categorical":
                feats.append(CategoricalFeature(name=name, levels=fd.get("levels"), missing=fd.get("missing"),
                                                omop=fd.get("omop")))
            elif typ == "numeric":
                feats.append(
                    NumericFeature(
                        name=name,
                        edges=fd.get("edges"),
                        lo=fd.get("lo"),
                        hi=fd.get("hi"),
                        missing=fd.get("missing", False),
                        omop=fd.get("omop"),
                    )
                )
            else:
                raise InputError(f"codebook: feature {name!r} has unknown type {typ!r} (categorical or numeric)")
        lab = d.get("label")
        if not isinstance(lab, dict):
            raise InputError("codebook: 'label' must be an object with name and classes")
        unit = d.get("privacy_unit")
        if unit is not None and not isinstance(unit, dict):
            raise InputError("codebook: 'privacy_unit' must be an object {column, max_rows_per_unit}")
        lab_omop, pop = lab.get("omop"), d.get("omop")
        if lab_omop is not None or pop is not None:
            from .omop import label_definition, population_definition

            lab_omop = None if lab_omop is None else label_definition(lab.get("name"), lab_omop)
            pop = None if pop is None else population_definition(pop)
        return cls(
            features=tuple(feats),
            label=Label(name=lab.get("name"), classes=lab.get("classes", ["no", "yes"] if lab_omop else None),
                        omop=lab_omop),
            draft=bool(d.get("draft", False)),
            privacy_unit=None if unit is None else (unit.get("column"), unit.get("max_rows_per_unit")),
            omop=pop,
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, text: str) -> "Codebook":
        if len(text) > MAX_CODEBOOK_BYTES:
            raise InputError(f"codebook text is larger than {MAX_CODEBOOK_BYTES >> 20} MiB: refused before parsing")
        try:
            d = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"codebook is not valid JSON: {exc.msg} at line {exc.lineno}") from None
        return cls.from_dict(d)

    def save(self, path: str | Path) -> None:
        from marg._util import atomic_write_bytes

        atomic_write_bytes(Path(path), self.to_json().encode("utf-8"))

    @classmethod
    def load(cls, path: str | Path) -> "Codebook":
        p = Path(path)
        try:
            with open(p, "rb") as fh:  # the size is checked before anything is parsed
                raw = fh.read(MAX_CODEBOOK_BYTES + 1)
            if len(raw) > MAX_CODEBOOK_BYTES:
                raise InputError(f"codebook {p} is larger than {MAX_CODEBOOK_BYTES >> 20} MiB: refused before parsing "
                                 "(a study's codebook of 20,000 binned features is about 2 MB)")
            text = raw.decode("utf-8")
        except FileNotFoundError:
            raise InputError(f"codebook file not found: {p}") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read codebook {p}: {exc}") from None
        return cls.from_json(text)

    def check_level_cap(self, max_levels: int = MAX_LEVELS) -> None:
        """Refuse a feature with more than ``max_levels`` levels (InputError naming it and its count).

        A feature with that many levels is an identifier or close to one: its rare levels
        point at single patients and its pair tables grow as ``m_i · m_j · K``.
        """
        if not isinstance(max_levels, int) or max_levels < 2:
            raise InputError(f"--max-levels must be an integer of at least 2, got {max_levels!r}")
        for f in self.features:
            if f.is_discrete and f.n_levels > max_levels:
                raise InputError(
                    f"feature {f.name!r} has {f.n_levels:,} levels, above the level cap {max_levels:,} (--max-levels): "
                    "that many levels identify patients; merge them into public categories or leave the column out"
                )

    def subset(self, names: list[str]) -> "Codebook":
        """The codebook restricted to the features ``names`` (in codebook order)."""
        keep = set(names)
        for nm in names:
            self.index(nm)
        return Codebook(features=tuple(f for f in self.features if f.name in keep), label=self.label, omop=self.omop)
