"""The privacy unit: whose rows one DP guarantee protects, and how many rows of each are counted.

Differential privacy protects a *unit*: neighbouring datasets differ by all the rows of one
unit. When each row is a different patient the unit is the row. Hospital data is
longitudinal — visits, admissions, prescriptions — so a patient with k rows moves every count
table by k, and a release "at ε" protects that patient only at about k·ε. marg therefore
bounds each unit's rows, as Tumult Analytics (privacy ids, ``MaxRowsPerID``) and Google's DP
libraries (contribution bounds) do:

- ``--privacy-unit COLUMN --max-rows-per-unit K`` (or the codebook's ``privacy_unit``):
  every table is counted over at most K rows of each value of COLUMN;
- the sensitivity of every table is K times a row's (:func:`marg.marginals.release_plan.table_sensitivity`
  takes the bound; OpenDP's ``measurement.map(d_in)`` gives the cost at that ``d_in``), so
  the stated (ε, δ) holds for every *patient*.

**Which rows are kept** (deterministic, documented, the same from every source): each row
gets the priority ``BLAKE2b(unit id, the row's encoded content)`` — its values under the
codebook, the same for a CSV, Parquet, DuckDB, PostgreSQL or Spark (they encode through one
set of rules) — and each unit keeps its K rows of smallest priority. Identical rows of one
unit share a priority and are interchangeable, so the kept *multiset* is a function of the
data alone, not of the row order. Which rows a unit keeps depends only on that unit's own rows:
truncation is stable, one unit added or removed changes at most K rows of the counted data.

Finding the rows takes two passes over the source (the rows reach this process, as for
``--holdout``): the first finds each unit's K-th priority (16 bytes a row), the second counts.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from marg.errors import InputError

from .holdout import Holdout, Splitter, content_rows, id_values, select

ROW = "row"  # --privacy-unit row: each row is a different person (bound 1)
_PERSON = b"marg-unit-bound"


def _digest(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8, person=_PERSON).digest(), "little")


@dataclass(frozen=True)
class PrivacyUnit:
    """The unit one DP guarantee protects: ``column`` (None: the row) and its row bound ``max_rows``."""

    column: str | None
    max_rows: int = 1

    def __post_init__(self) -> None:
        if self.column is not None and (not isinstance(self.column, str) or not self.column.strip()):
            raise InputError(f"--privacy-unit must name a column (or 'row'), got {self.column!r}")
        k = self.max_rows
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= int(k) <= 1_000_000:
            raise InputError(f"--max-rows-per-unit must be a whole number from 1 to 1,000,000, got {k!r}")
        if self.column is None and int(k) != 1:
            raise InputError("--privacy-unit row counts each row as one person: --max-rows-per-unit does not apply")

    @property
    def bound(self) -> int:
        """K: the rows of one unit a table may count (the factor of every table's sensitivity)."""
        return int(self.max_rows)

    def to_dict(self) -> dict[str, Any]:
        """What the bundle, the ledger and the dry run state: ``{"column", "max_rows_per_unit"}``."""
        return {"column": self.column if self.column is not None else ROW, "max_rows_per_unit": self.bound}

    def describe(self) -> str:
        if self.column is None:
            return "one row = one person"
        return f"{self.column} (at most {self.bound} row{'s' if self.bound != 1 else ''} each)"


def resolve_unit(codebook: Any, column: str | None = None, max_rows: int | None = None) -> PrivacyUnit | None:
    """The export's privacy unit from ``--privacy-unit``/``--max-rows-per-unit`` and the codebook's
    ``privacy_unit`` (the flags may fill in the bound; another column than the codebook's is refused).

    Returns None when neither declares one.
    """
    declared = codebook.unit_declaration
    cb_col, cb_k = declared.get("column"), declared.get("max_rows_per_unit")
    if column is not None and cb_col is not None and column != cb_col:
        raise InputError(f"--privacy-unit {column!r} differs from the codebook's privacy unit {cb_col!r}: "
                         "every site of the study counts the same unit")
    col = column if column is not None else cb_col
    k = max_rows if max_rows is not None else cb_k
    if col is None:
        if k is not None:
            raise InputError("--max-rows-per-unit needs --privacy-unit COLUMN (the column that names each patient)")
        return None
    if col == ROW:
        return PrivacyUnit(None, 1 if k is None else k)
    if k is None:
        raise InputError(f"the privacy unit {col!r} needs a bound on each unit's rows: give --max-rows-per-unit K "
                         "(every table's noise scales with K; rows beyond K of a unit are left out)")
    return PrivacyUnit(col, k)


def agree_holdout(unit: PrivacyUnit | None, holdout_id: str | None) -> str | None:
    """The id column a holdout splits by, agreeing with the privacy unit: one patient on one side.

    With a unit column, a holdout splits by it (``holdout_id`` None → the unit column);
    another ``--holdout-id`` is refused.
    """
    if unit is None or unit.column is None:
        return holdout_id
    if holdout_id is not None and holdout_id != unit.column:
        raise InputError(f"--holdout-id {holdout_id!r} differs from the privacy unit {unit.column!r}: one patient's "
                         f"rows would fall on both sides; hold out by the privacy unit (--holdout-id {unit.column})")
    return unit.column


@dataclass
class RowBound:
    """Which rows of each unit are counted (module docstring), and the tally the site is told.

    Attributes
    ----------
    units, over, dropped, largest : int
        Units seen, units above the bound, rows left out, rows of the largest unit.
    """

    unit: PrivacyUnit
    units: int = 0
    over: int = 0
    dropped: int = 0
    largest: int = 0
    # per unit above the bound (sorted by its digest): the K-th priority and how many rows at it are kept
    _over_ids: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.uint64), repr=False)
    _thr: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.uint64), repr=False)
    _need: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64), repr=False)
    _taken: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64), repr=False)

    def priorities(self, enc: Any, ids: Any) -> tuple[np.ndarray, np.ndarray]:
        """(unit digest, priority) (n,) uint64 of an encoded chunk and its unit column."""
        values, index = id_values(ids, self.unit.column, enc.start_row, "--privacy-unit")
        udig = np.array([_digest(b"unit\x00" + v.encode("utf-8")) for v in values], dtype=np.uint64)[index]
        rows = content_rows(enc, udig)
        uniq, inv = np.unique(rows, return_inverse=True)
        pri = np.fromiter((_digest(b"row\x00" + c.tobytes()) for c in uniq), dtype=np.uint64, count=len(uniq))
        return udig, pri[inv.ravel()]

    def plan(self, units: np.ndarray, pri: np.ndarray) -> None:
        """Pass 1's result: every row's (unit digest, priority) → each over-bound unit's threshold."""
        K = self.unit.bound
        order = np.lexsort((pri, units))
        u, p = units[order], pri[order]
        if u.size == 0:
            return
        starts = np.flatnonzero(np.concatenate([[True], u[1:] != u[:-1]]))
        sizes = np.diff(np.concatenate([starts, [u.size]]))
        self.units, self.largest = int(starts.size), int(sizes.max())
        big = np.flatnonzero(sizes > K)
        self.over, self.dropped = int(big.size), int((sizes[big] - K).sum())
        thr = p[starts[big] + K - 1]
        less = np.array([np.searchsorted(p[s:s + n], t, "left") for s, n, t in zip(starts[big], sizes[big], thr)],
                        dtype=np.int64)
        self._over_ids, self._thr, self._need = u[starts[big]], thr, K - less
        self._taken = np.zeros(big.size, dtype=np.int64)

    def keep(self, enc: Any, ids: Any) -> np.ndarray:
        """Pass 2: the rows (n,) bool of a chunk that are counted (at most K of each unit in all)."""
        udig, pri = self.priorities(enc, ids)
        keep = np.ones(udig.size, dtype=bool)
        if self._over_ids.size == 0:
            return keep
        pos = np.minimum(np.searchsorted(self._over_ids, udig), self._over_ids.size - 1)
        over = self._over_ids[pos] == udig
        keep[over] = pri[over] < self._thr[pos[over]]
        for r in np.flatnonzero(over & (pri == self._thr[pos])):  # rows at the threshold: identical content
            j = pos[r]
            if self._taken[j] < self._need[j]:
                self._taken[j] += 1
                keep[r] = True
        return keep

    def note(self) -> str | None:
        """The site's own line about what the bound left out (None when nothing)."""
        if not self.dropped:
            return None
        return (f"note: privacy unit {self.unit.column!r}: {self.over:,} of {self.units:,} units have more than "
                f"{self.unit.bound} rows (the largest {self.largest:,}); {self.dropped:,} rows beyond the bound are "
                "not counted (each unit keeps its K rows of smallest content priority: the README's privacy unit)")


def bounded_batches(source: Any, codebook: Any, bound: RowBound | None, split: Splitter | None = None, *,
                    with_label: bool = True, progress: Callable[[int], None] | None = None
                    ) -> Iterator[tuple[Any, np.ndarray, np.ndarray]]:
    """``(encoded chunk, held-out flags, counted flags)`` over the rows of any Source.

    ``counted`` is True on the rows ``bound`` keeps (every row without one), ``held`` the
    holdout's flags (all False without ``split``). With a bound the source is read twice
    (pass 1 plans it, :meth:`RowBound.plan`); ``bound`` and ``split`` keep their tallies.
    """
    from .data.encoding import encode_batch

    columns = codebook.feature_names + ([codebook.label.name] if with_label else [])
    ucol = bound.unit.column if bound is not None else None
    hcol = split.spec.id_column if split is not None else None
    extra = [c for c in dict.fromkeys([ucol, hcol]) if c is not None and c not in columns]
    if extra:
        source.check_columns(extra)

    def batches() -> Iterator[tuple[Any, dict]]:
        row, memo = 1, {}
        for batch in source.row_batches(columns + extra):
            enc = encode_batch(codebook, batch, row, with_label=with_label, memo=memo, where=source.where_rows())
            yield enc, batch
            row += enc.n

    if bound is not None:
        parts = [bound.priorities(enc, b[ucol]) for enc, b in batches()]
        empty = np.empty(0, np.uint64)
        bound.plan(np.concatenate([u for u, _ in parts] or [empty]), np.concatenate([p for _, p in parts] or [empty]))
    for enc, b in batches():
        held = (split.mask(enc, b.get(hcol) if hcol is not None else None) if split is not None
                else np.zeros(enc.n, bool))
        counted = bound.keep(enc, b[ucol]) if bound is not None else np.ones(enc.n, bool)
        yield enc, held, counted
        if progress is not None:
            progress(enc.start_row + enc.n - 1)


def count_rows(source: Any, codebook: Any, cliques: Sequence[tuple[str, ...]], unit: PrivacyUnit | None,
               holdout: Holdout | None = None, key: bytes | None = None,
               progress: Callable[[int], None] | None = None) -> tuple[list[Any], int, Splitter | None,
                                                                       RowBound | None]:
    """The exact count tables of the rows counted — outside the holdout, within each unit's bound —,
    their number, the holdout's tally and the bound's. A source that runs code where its rows are
    (Spark: ``source.partitions``) runs these steps there (:func:`_count_partitions`)."""
    from .counts.counting import TableCounter

    if hasattr(source, "partitions"):
        return _count_partitions(source, codebook, cliques, unit, holdout, key, progress)

    counter = TableCounter(codebook, cliques)
    split = Splitter(holdout, key) if holdout is not None else None
    bound = RowBound(unit) if unit is not None and unit.column is not None else None
    for enc, held, counted in bounded_batches(source, codebook, bound, split, progress=progress):
        counter.add_encoded(select(enc, counted & ~held))
    if counter.n_rows == 0:
        raise InputError(f"{source.name} has no data rows" + (" outside the holdout" if split and split.held else ""))
    return counter.tables(), counter.n_rows, split, bound


def shuffle_key(batch: Any, *, codebook: Any, unit_column: str | None) -> np.ndarray:
    """The key (n,) uint64 that brings together the rows deciding together, for an engine that splits
    them among workers: the unit id's digest (a unit's rows, for its bound) or, without a unit, a
    64-bit hash of the encoded content (the occurrences of one content, for a holdout by content)."""
    from .data.encoding import encode_batch
    from .holdout import _mix64

    if unit_column is not None:
        values, index = id_values(batch.column(unit_column), unit_column, 1, "--privacy-unit")
        return np.array([_digest(b"unit\x00" + v.encode("utf-8")) for v in values], dtype=np.uint64)[index]
    enc = encode_batch(codebook, {c: batch.column(c) for c in codebook.feature_names + [codebook.label.name]}, 1)
    M = content_rows(enc).view(np.uint64).reshape(batch.num_rows, -1)
    k = np.zeros(batch.num_rows, dtype=np.uint64)
    for j in range(M.shape[1]):
        k = _mix64(k ^ M[:, j])
    return k


def partition_counts(rows: Any, *, codebook: Any, cliques: list, unit: PrivacyUnit | None, holdout: Holdout | None,
                     key: bytes | None) -> dict[str, Any]:
    """:func:`count_rows`'s steps on one partition of an engine's rows (all rows of a unit, or of a content,
    in one partition): its tables as arrays, its row count and the tallies of its split and bound."""
    from .counts.counting import TableCounter

    counter = TableCounter(codebook, cliques)
    split = Splitter(holdout, key) if holdout is not None else None
    bound = RowBound(unit) if unit is not None and unit.column is not None else None
    for enc, held, counted in bounded_batches(rows, codebook, bound, split):
        keep = counted & ~held
        counter.add_encoded(enc if keep.all() else select(enc, keep))
    return {"tables": [t.counts for t in counter.tables()], "n": counter.n_rows,
            "split": (split.rows, split.held, split.fingerprint) if split is not None else None,
            "bound": (bound.units, bound.over, bound.dropped, bound.largest) if bound is not None else None}



def add_partition_tallies(part: dict, split: Any, bound: "RowBound | None") -> None:
    """Add one partition's holdout tallies (``part["split"]``: rows, held, fingerprint, to ``split``, a
    :class:`marg.marginals.holdout.Splitter`) and row-bound tallies (``part["bound"]``: units, over, dropped,
    largest, to ``bound``) to the whole source's, in place; either may be None (not asked for)."""
    if split is not None:
        rows, held, fp = part["split"]
        split.rows, split.held = split.rows + rows, split.held + held
        split.fingerprint = (split.fingerprint + fp) & ((1 << 64) - 1)
    if bound is not None:
        units, over, dropped, largest = part["bound"]
        bound.units, bound.over, bound.dropped = bound.units + units, bound.over + over, bound.dropped + dropped
        bound.largest = max(bound.largest, largest)

def _count_partitions(source: Any, codebook: Any, cliques: Sequence[tuple[str, ...]], unit: PrivacyUnit | None,
                      holdout: Holdout | None, key: bytes | None, progress: Callable[[int], None] | None
                      ) -> tuple[list[Any], int, Splitter | None, RowBound | None]:
    """:func:`count_rows` where the rows are: each partition runs :func:`partition_counts` (after a shuffle by
    :func:`shuffle_key` when a unit's bound or a holdout by content decides on groups of rows), summed here.
    The sums are the local path's: tables and row counts add up, so do the tallies (the held-out
    fingerprint is a sum mod 2⁶⁴), and the largest unit is the largest of the partitions'."""
    from dataclasses import replace

    from .counts.counting import TableCounter

    ucol = unit.column if unit is not None else None
    hcol = holdout.id_column if holdout is not None else None
    columns = list(dict.fromkeys(codebook.feature_names + [codebook.label.name] + [c for c in (ucol, hcol) if c]))
    shuffle = partial(shuffle_key, codebook=codebook, unit_column=ucol) \
        if ucol is not None or (holdout is not None and hcol is None) else None
    work = partial(partition_counts, codebook=codebook, cliques=list(cliques), unit=unit, holdout=holdout, key=key)
    empty = TableCounter(codebook, cliques).tables()
    sums, n = [t.counts for t in empty], 0
    split = Splitter(holdout, key) if holdout is not None else None
    bound = RowBound(unit) if ucol is not None else None
    for part in source.partitions(columns, work, shuffle, reread=bound is not None):
        for acc, arr in zip(sums, part["tables"]):
            acc += arr
        n += part["n"]
        add_partition_tallies(part, split, bound)
    if n == 0:
        raise InputError(f"{source.name} has no data rows" + (" outside the holdout" if split and split.held else ""))
    if progress is not None:
        progress(n)
    return [replace(t, counts=c) for t, c in zip(empty, sums)], n, split, bound


ID_DISTINCT = 0.9  # a column whose values are this distinct and that repeats names patients, whatever its name
MIN_ROWS_DISTINCT = 20  # fewer rows: distinctness says nothing
_NUMBER = r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$"


def repeat_tally(batch: dict, cands: Sequence[str]) -> dict[str, tuple[bool, bool, bool, dict[str, int]]]:
    """One batch's part of :func:`repeat_counts`: per column ``(floating type, every non-empty value a number,
    one with a fraction or an exponent, {normalised id: rows})`` (a batch without values: a number, vacuously).

    Batches combine by ``any`` (floating, fraction), ``all`` (number) and the sum of the row counts, so an
    engine that tallies its partitions where they are (Spark) sums to the one pass over all rows."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from .holdout import normalise_id
    from .data.io import as_text

    out = {}
    for c in cands:
        col = batch[c]
        text = pc.utf8_trim_whitespace(as_text(col, c)).drop_null()
        vc = pc.value_counts(text)
        values = vc.field("values")
        nonempty = pc.filter(values, pc.not_equal(values, ""))
        number, fraction = True, False
        if len(nonempty):
            number = bool(pc.all(pc.match_substring_regex(nonempty, _NUMBER)).as_py())
            fraction = bool(pc.any(pc.match_substring_regex(nonempty, r"[.eE]")).as_py())
        ids: dict[str, int] = {}
        for v, k in zip(values.to_pylist(), vc.field("counts").to_pylist()):
            v = normalise_id(v)
            ids[v] = ids.get(v, 0) + k
        out[c] = (pa.types.is_floating(col.type), number, fraction, ids)
    return out


def repeat_counts(source: Any, codebook: Any, also: Sequence[str] = ()) -> dict[str, tuple[int, bool]]:
    """``{column: (rows of its most frequent id, id-like)}`` for the columns that may name patients.

    Read in one pass over the columns outside the codebook (and ``also``), their values normalised
    as ids are (:func:`marg.marginals.holdout.normalise_id`: NFKC, case, separators and spaces).
    A column is *id-like* when its name is (:func:`marg.marginals.draft.identifier_name`: ``patient_id``,
    ``pid``, ``subject``, ``encounter``, ``chart_ref``…), when it is in ``also``, or when it is not a
    floating-point column (a float type, or text that is all numbers with a fraction or an exponent:
    measurements repeat by chance) and at least :data:`ID_DISTINCT` of its non-empty values (over at
    least :data:`MIN_ROWS_DISTINCT` rows) are distinct. A source that tallies where its rows are
    (``source.repeat_tallies``: Spark) runs :func:`repeat_tally` there and returns each column's
    ``(largest id's rows, non-empty rows, distinct non-empty ids, floating)``.
    """
    from collections import Counter

    from .draft import identifier_name

    known = set(codebook.feature_names) | {codebook.label.name}
    cands = [c for c in source.columns() if c not in known or c in set(also)]
    if not cands:
        return {}
    if hasattr(source, "repeat_tallies"):
        tallies = source.repeat_tallies(cands, repeat_tally)
    else:
        seen: dict[str, Counter] = {c: Counter() for c in cands}
        flags = {c: [False, True, False] for c in cands}  # floating type, all numbers, one with a fraction
        for batch in source.row_batches(cands):
            for c, (fl, number, fraction, ids) in repeat_tally(batch, cands).items():
                f = flags[c]
                f[0], f[1], f[2] = f[0] or fl, f[1] and number, f[2] or fraction
                seen[c].update(ids)
        tallies = {}
        for c, cnt in seen.items():
            cnt.pop("", None)
            fl, number, fraction = flags[c]
            tallies[c] = (max(cnt.values(), default=0), sum(cnt.values()), len(cnt), fl or (number and fraction))
    out = {}
    for c, (top, n, distinct, floating) in tallies.items():
        unique = not floating and n >= MIN_ROWS_DISTINCT and distinct >= ID_DISTINCT * n
        out[c] = (top, c in set(also) or identifier_name(c) is not None or unique)
    return out


def repeating_column(source: Any, codebook: Any, also: Sequence[str] = (), exclude: Sequence[str] = ()
                     ) -> tuple[str, int] | None:
    """The first id-like column (:func:`repeat_counts`) that repeats, with the most rows one of its values has;
    None if none repeats. ``exclude``: columns not asked about (the declared unit).

    Under DP such a column means a patient may have several rows (visits), whom a per-row
    guarantee does not protect.
    """
    for c, (top, idlike) in repeat_counts(source, codebook, also).items():
        if idlike and top > 1 and c not in set(exclude):
            return c, int(top)
    return None


def refuse_repeats(source: Any, codebook: Any, also: Sequence[str] = ()) -> None:
    """InputError (one line naming the fix) when :func:`repeating_column` finds a column that repeats."""
    hit = repeating_column(source, codebook, also)
    if hit is not None:
        c, top = hit
        raise InputError(f"column {c!r} repeats ({top:,} rows share one value): one patient may have several rows, "
                         f"and a per-row DP guarantee does not protect them: give --privacy-unit {c} "
                         "--max-rows-per-unit K (or --privacy-unit row if every row is a different person)")


def check_unit(source: Any, codebook: Any, unit: PrivacyUnit | None, also: Sequence[str] = ()) -> None:
    """The repeat check of every DP release, whatever unit is declared (by the site or the codebook).

    - no unit: an id-like column that repeats is refused (:func:`refuse_repeats`);
    - ``row`` (each row a person): refused when an id-like column repeats — a codebook (someone
      else's document) cannot switch the check off;
    - a unit column: refused when it is unique (one row each) while another id-like column repeats,
      naming both (the declared unit is then not the patient).
    """
    if unit is None:
        refuse_repeats(source, codebook, also)
        return
    counts = repeat_counts(source, codebook, list(also) + ([unit.column] if unit.column else []))
    hits = [(c, top) for c, (top, idlike) in counts.items() if idlike and top > 1 and c != unit.column]
    if not hits:
        return
    c, top = hits[0]
    if unit.column is None:
        raise InputError(f"privacy unit 'row' refused: column {c!r} repeats ({top:,} rows share one value), so a row "
                         f"is not a person: give --privacy-unit {c} --max-rows-per-unit K")
    if counts.get(unit.column, (0, True))[0] <= 1:
        raise InputError(f"privacy unit {unit.column!r} refused: it is unique (one row each) while column {c!r} "
                         f"repeats ({top:,} rows share one value): the patient is likely {c!r} (--privacy-unit {c})")
