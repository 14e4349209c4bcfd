"""A site's held-out rows: a keyed hash of each row's content (or id), decided at the site and remembered there.

``marg export --holdout F`` leaves a fraction F of the site's rows out of every released
table; ``marg export --evaluate MODEL`` later releases the model's errors on exactly those
rows. Which rows is a function of the data and of a secret **key kept at the site**
(32 random bytes in ``holdout.json`` beside the ledger, :func:`site_key`), never of the
row order or of the engine that reads the data:

- by content (the default): a row's content is its encoded values under the codebook
  (feature codes, clipped raw numbers, label code) — the same for a CSV, a Parquet file,
  DuckDB, PostgreSQL or Spark holding the same rows, since every source encodes through
  the one set of value rules (:mod:`marg.marginals.data.encoding`). The k-th row with content c
  gets ``h = mix(BLAKE2b_key(c) + k·φ)``; identical rows are interchangeable, so which of
  them comes k-th does not matter — the *multiset* of held-out rows is a function of the
  data alone, and each (c, k) is held out independently, as if every row had been drawn
  with probability F;
- by an id column (``--holdout-id COLUMN``): ``h = mix(BLAKE2b_key(id as text))``; every
  row with the same id is held out together (one patient's visits stay on one side).

Row r is held out iff ``u = (h >> 11)·2⁻⁵³ < F``. One key serves every export of the site,
so exports of the same data with the same F hold out the same rows (the rounds of the
two-round protocol fit together) and a smaller F holds out a subset of a larger F's rows.

Provenance: each ``--holdout`` export is remembered under its bundle's digest
(:func:`remember`) with F, the id column and the held-out rows' count and fingerprint (an
order-free sum of their hashes). ``--evaluate MODEL`` reads which bundles of this site the
model learned from (its signed provenance) and evaluates the rows held out of *all* of
them (:func:`split_for_model`); if one of them was exported without ``--holdout`` it
refuses, since every row was in training. The evaluation release names those bundles, and
``marg certify`` checks them against the model's (:mod:`marg.protocols.evaluation`).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from marg._util import atomic_write_bytes, canonical_json
from marg.errors import InputError, RefusedError

HOLDOUT_FILE = "holdout.json"
FORMAT = "marg-holdout"
_PHI = np.uint64(0x9E3779B97F4A7C15)
_PERSON = b"marg-holdout-v2"


def _mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser of uint64 ``x`` (vectorised; wraps modulo 2⁶⁴)."""
    with np.errstate(over="ignore"):
        z = x + _PHI
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _keyed(key: bytes, data: bytes) -> int:
    """BLAKE2b keyed with the site's secret: 64 bits of ``data``'s pseudorandom digest."""
    return int.from_bytes(hashlib.blake2b(data, key=key, digest_size=8, person=_PERSON[:16]).digest(), "little")


@dataclass(frozen=True)
class Holdout:
    """The split: ``fraction`` ∈ (0, 1) held out, by row content or by ``id_column``."""

    fraction: float
    id_column: str | None = None

    def __post_init__(self) -> None:
        if not (0.0 < float(self.fraction) < 1.0):
            raise InputError(f"--holdout must be a fraction in (0, 1), got {self.fraction!r}")
        if self.id_column is not None and (not isinstance(self.id_column, str) or not self.id_column):
            raise InputError(f"--holdout-id must name a column, got {self.id_column!r}")

    @property
    def by(self) -> str:
        return "rows" if self.id_column is None else f"id column {self.id_column}"


@dataclass
class Splitter:
    """Decides chunk by chunk which rows are held out, and keeps the tally.

    Attributes
    ----------
    rows, held : int
        Rows seen and held out so far.
    fingerprint : int
        Σ mix(h ⊕ c) mod 2⁶⁴ over the held-out rows: equal for equal multisets, whatever
        the order (how ``--evaluate`` tells that the data changed since the export).
    """

    spec: Holdout
    key: bytes
    rows: int = 0
    held: int = 0
    fingerprint: int = 0
    # contents seen so far: their 64-bit keyed digests and occurrence counts — 16 bytes a distinct row — as
    # sorted runs (digests, counts), each at least twice the next one's size: a chunk's new contents are a new
    # run, merged into the last while it is not smaller, so n distinct rows cost O(n log n), not a copy of
    # every row seen at every chunk (np.insert: quadratic in the rows at 10⁷)
    _runs: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list, repr=False)

    def mask(self, enc: Any, ids: Any = None) -> np.ndarray:
        """Held-out flags (n,) bool of an encoded chunk (``ids``: its id column, when split by id)."""
        h = self._by_id(ids, enc.start_row) if self.spec.id_column is not None else self._by_content(enc)
        u = (h >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))
        held = u < float(self.spec.fraction)
        self.rows += int(held.shape[0])
        self.held += int(held.sum())
        if held.any():
            s = _mix64(h[held] ^ np.uint64(0x5851F42D4C957F2D)).sum(dtype=np.uint64)
            self.fingerprint = (self.fingerprint + int(s)) & ((1 << 64) - 1)
        return held

    def _by_content(self, enc: Any) -> np.ndarray:
        n = enc.n
        contents, inv, counts = distinct_contents(enc)
        digest = np.fromiter((_keyed(self.key, b"row\x00" + c) for c in contents), dtype=np.uint64, count=len(counts))
        base = self._occurrences(digest, counts.astype(np.uint64))
        order = np.argsort(inv, kind="stable")
        first = np.concatenate([[0], np.cumsum(counts)[:-1]])
        rank = np.empty(n, dtype=np.uint64)
        rank[order] = np.arange(n, dtype=np.uint64) - first[inv[order]].astype(np.uint64)
        with np.errstate(over="ignore"):
            return _mix64(digest[inv] + (base[inv] + rank) * _PHI)

    def _occurrences(self, digest: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Rows seen before with each of the (distinct) ``digest``s; adds ``counts`` to the tally.

        A digest is in at most one run, so its count is where the search finds it; digests new in this
        chunk (equal ones, a 64-bit collision, kept in chunk order as sorted insertion keeps them) form
        a new run."""
        base = np.zeros(digest.size, dtype=np.uint64)
        new = np.ones(digest.size, dtype=bool)
        for digests, tally in self._runs:
            pos = np.searchsorted(digests, digest)
            found = pos < digests.size
            found[found] = digests[pos[found]] == digest[found]
            base[found] = tally[pos[found]]
            tally[pos[found]] += counts[found]
            new &= ~found
        if new.any():
            order = np.argsort(digest[new], kind="stable")
            run = (digest[new][order], counts[new][order])
            while self._runs and self._runs[-1][0].size <= 2 * run[0].size:
                older = self._runs.pop()
                d = np.concatenate([older[0], run[0]])
                merged = np.argsort(d, kind="stable")  # older first among equal digests, as before
                run = (d[merged], np.concatenate([older[1], run[1]])[merged])
            self._runs.append(run)
        return base

    def _by_id(self, ids: Any, start_row: int) -> np.ndarray:
        values, index = id_values(ids, self.spec.id_column, start_row, "--holdout-id")
        digest = np.array([_keyed(self.key, b"id\x00" + v.encode("utf-8")) for v in values], dtype=np.uint64)
        return _mix64(digest[index])


def content_rows(enc: Any, extra: np.ndarray | None = None) -> np.ndarray:
    """Each row's content as one opaque value (n,): its encoded values under the codebook (feature
    codes, clipped raw numbers, label code), preceded by ``extra`` (n,) uint64 when given — equal
    rows give equal values, whatever source they came from."""
    cols = ([extra] if extra is not None else []) + [np.asarray(enc.column(i)) for i in range(len(enc.parts))]
    if enc.y is not None:
        cols.append(np.asarray(enc.y))
    M = np.empty((enc.n, len(cols)), dtype=np.uint64)
    for j, c in enumerate(cols):
        M[:, j] = (c.astype(np.float64) + 0.0).view(np.uint64) if c.dtype.kind == "f" else c.astype(np.uint64)
    return np.ascontiguousarray(M).view(np.dtype((np.void, 8 * M.shape[1]))).ravel()


def distinct_contents(enc: Any, extra: np.ndarray | None = None) -> tuple[Iterator[bytes], np.ndarray, np.ndarray]:
    """The distinct values of :func:`content_rows` — (their bytes in ``np.unique``'s order, each row's index
    into them (n,), their counts) — without its n × columns uint64 matrix (and ``np.unique``'s copies of it:
    at 20,000 columns 160 MB each).

    A column whose values fit in fewer than 8 bytes (unsigned codes, booleans) is kept as its low bytes: the
    others are 0 in every row, so rows are equal, and ordered byte by byte, exactly as their 8-byte form;
    the 8-byte form of each distinct row is written out again when it is read, a few MiB of rows at a time.
    """
    cols = ([extra] if extra is not None else []) + [np.asarray(enc.column(i)) for i in range(len(enc.parts))]
    if enc.y is not None:
        cols.append(np.asarray(enc.y))
    width = np.array([c.dtype.itemsize if c.dtype.kind in "ub" else 8 for c in cols], dtype=np.int64)
    if sys.byteorder != "little" or (width == 8).all() or enc.n == 0:  # (low bytes lead in little-endian words)
        uniq, inv, counts = np.unique(content_rows(enc, extra), return_inverse=True, return_counts=True)
        return (u.tobytes() for u in uniq), inv.ravel(), counts
    at = np.concatenate([[0], np.cumsum(width)])
    low = np.empty((enc.n, int(at[-1])), dtype=np.uint8)
    for j, c in enumerate(cols):
        w = int(width[j])
        if w == 1:
            low[:, at[j]] = c
        else:
            word = (c.astype(np.float64) + 0.0).view(np.uint64) if c.dtype.kind == "f" else c.astype(np.uint64)
            low[:, at[j]:at[j + 1]] = word.view(np.uint8).reshape(enc.n, 8)[:, :w]
    uniq, inv, counts = np.unique(low.view(np.dtype((np.void, low.shape[1]))).ravel(), return_inverse=True,
                                  return_counts=True)
    # byte k of the compact row goes to byte 8·(its column) + (its place in the column's low bytes)
    where = np.repeat(8 * np.arange(len(cols)), width) + np.arange(low.shape[1]) - np.repeat(at[:-1], width)
    compact = uniq.view(np.uint8).reshape(uniq.size, -1)

    def contents() -> Iterator[bytes]:
        step = max(1, (4 << 20) // (8 * len(cols)))
        for s in range(0, len(compact), step):
            full = np.zeros((min(step, len(compact) - s), 8 * len(cols)), dtype=np.uint8)
            full[:, where] = compact[s:s + step]
            yield from (r.tobytes() for r in full)

    return contents(), inv.ravel(), counts


def id_values(ids: Any, name: str, start_row: int, flag: str) -> tuple[list[str], np.ndarray]:
    """An id column's distinct values (normalised, :func:`normalise_id`) and each row's index into them.

    InputError for a row without an id, naming ``flag``, the column and the row — never an id.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    from .data.arrays import bool_array, scalar, to_numpy
    from .data.io import as_text

    if ids is None:
        raise InputError(f"{flag} {name}: the id column was not read")
    if isinstance(ids, pa.ChunkedArray):
        ids = ids.combine_chunks()
    text = pc.utf8_trim_whitespace(as_text(ids, name))
    bad = to_numpy(pc.or_kleene(pc.is_null(text),
                                pc.equal(text, scalar("", pa.string()))).fill_null(bool_array([True])[0]))
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        raise InputError(f"{flag} column {name!r}: missing id at row {start_row + r} (every row needs an id)")
    enc = pc.dictionary_encode(text)
    raw = enc.dictionary.to_pylist()
    norm = [normalise_id(v) for v in raw]
    index = enc.indices.to_numpy(zero_copy_only=False)
    if any(not v for v in norm):
        r = int(np.flatnonzero(np.array([not norm[i] for i in index]))[0])
        raise InputError(f"{flag} column {name!r}: missing id at row {start_row + r} (every row needs an id: this one "
                         "holds only separators or spaces)")
    values, back = np.unique(np.array(norm, dtype=object), return_inverse=True)
    return [str(v) for v in values], back.ravel()[index]


def normalise_id(value: str) -> str:
    """One patient's id whatever its spelling: Unicode NFKC, case folded, separators and spaces removed.

    ``"P-00 12"``, ``"p0012"``, ``"Ｐ００１２"`` (full-width) and ``"P\u200b0012"`` (a zero-width space) are one
    patient: only letters and digits are kept (``str.isalnum`` after NFKC and casefolding). Two ids
    that differ only in separators count as one unit — the bound then covers both, which errs on the
    side of the patient.
    """
    import unicodedata

    return "".join(ch for ch in unicodedata.normalize("NFKC", value).casefold() if ch.isalnum())


# ------------------------------------------------------------------ rows of any source
def iter_split(source: Any, codebook: Any, split: Splitter, *, with_label: bool = True,
               progress: Callable[[int], None] | None = None) -> Iterator[tuple[Any, np.ndarray]]:
    """``(encoded chunk, held-out flags)`` over the rows of any Source, ``split`` keeping the tally.

    Every source yields its rows' values in batches (:meth:`Source.row_batches`) that go
    through :func:`marg.marginals.data.encoding.encode_batch`, so the same rows give the same
    codes — and so the same split — from a file, a database or Spark.
    """
    from .data.encoding import encode_batch

    spec = split.spec
    columns = codebook.feature_names + ([codebook.label.name] if with_label else [])
    extra = [spec.id_column] if spec.id_column is not None and spec.id_column not in columns else []
    if spec.id_column is not None:
        source.check_columns([spec.id_column])
    row = 1
    memo: dict = {}
    for batch in source.row_batches(columns + extra):
        enc = encode_batch(codebook, batch, row, with_label=with_label, memo=memo, where=source.where_rows())
        held = split.mask(enc, batch.get(spec.id_column) if spec.id_column is not None else None)
        yield enc, held
        row += enc.n
        if progress is not None:
            progress(row - 1)


def select(enc: Any, keep: np.ndarray) -> Any:
    """The rows of an encoded chunk where ``keep`` (n,) is True, as a new chunk."""
    from .data.encoding import Encoded

    parts = [enc.column(i)[keep] for i in range(len(enc.parts))]
    return Encoded(parts, None if enc.y is None else enc.y[keep], enc.start_row, int(keep.sum()))


# ------------------------------------------------------------------ what the site remembers
def record_path(ledger_dir: str | os.PathLike[str]) -> Path:
    return Path(ledger_dir) / HOLDOUT_FILE


def _read(ledger_dir: str | os.PathLike[str]) -> dict[str, Any]:
    path = record_path(ledger_dir)
    if not path.exists():
        return {"format": FORMAT, "version": 2, "splits": {}}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: not a readable holdout record ({type(exc).__name__})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        # version 1 kept a seed per study and split by row number: those splits cannot be recomputed
        return {"format": FORMAT, "version": 2, "splits": {}}
    return data


def _write(ledger_dir: str | os.PathLike[str], data: dict[str, Any]) -> None:
    atomic_write_bytes(record_path(ledger_dir), canonical_json(data), mode=0o600)


def has_site_key(ledger_dir: str | os.PathLike[str]) -> bool:
    """Whether the site's ``holdout.json`` holds a split key already (:func:`site_key` reads it)."""
    return "key" in _read(ledger_dir)


def site_key(ledger_dir: str | os.PathLike[str], create: bool = False) -> bytes:
    """The site's split key (32 bytes), kept only in its ``holdout.json``; made on first use."""
    data = _read(ledger_dir)
    if "key" in data:
        try:
            key = bytes.fromhex(str(data["key"]))
        except ValueError:
            key = b""
        if len(key) != 32:
            raise InputError(f"{record_path(ledger_dir)}: its split key is damaged (expected 32 bytes in hex)")
        return key
    if not create:
        raise InputError(f"no held-out rows are recorded in {ledger_dir} (export with --holdout F first)")
    key = secrets.token_bytes(32)
    Path(ledger_dir).mkdir(parents=True, exist_ok=True)  # the ledger's folder (the ledger makes it too)
    _write(ledger_dir, {**data, "key": key.hex()})
    return key


def remember(ledger_dir: str | os.PathLike[str], bundle_digest: str, fingerprint: str, site: str,
             spec: Holdout, split: Splitter) -> None:
    """Record that bundle ``bundle_digest`` of ``site`` left out ``split``'s rows (atomically)."""
    data = _read(ledger_dir)
    data.setdefault("splits", {})[bundle_digest] = {
        "fingerprint": fingerprint, "site": site, "fraction": float(spec.fraction), "id_column": spec.id_column,
        "n_rows": int(split.rows), "n_held": int(split.held), "held_fingerprint": f"{split.fingerprint:016x}"}
    _write(ledger_dir, data)


@dataclass(frozen=True)
class ModelSplit:
    """The rows a model never saw at this site: held out of every bundle it learned from here."""

    spec: Holdout
    key: bytes
    bundles: tuple[str, ...]
    n_rows: int
    n_held: int
    held_fingerprint: str


def training_bundles(model_info: dict[str, Any], site: str) -> list[str]:
    """Digests of the bundles of ``site`` a model learned from (its provenance, ``info["sites"]``)."""
    out: list[str] = []
    for s in model_info.get("sites") or []:
        if isinstance(s, dict) and s.get("site") == site:
            rounds = s.get("rounds") or [s]
            out += [str(r.get("digest")) for r in rounds if isinstance(r, dict) and r.get("digest")]
    return out


def split_for_model(ledger_dir: str | os.PathLike[str], model_info: dict[str, Any], fingerprint: str,
                    site: str) -> ModelSplit:
    """The split to evaluate a model on: the rows held out of every bundle of ``site`` it learned from.

    Raises RefusedError when the model learned from no bundle of this site, or from one
    exported without ``--holdout`` (or not recorded in this ledger): its rows were in training.
    """
    digests = training_bundles(model_info, site)
    if not digests:
        raise RefusedError(f"refused: the model learned from no bundle of site {site!r}, so no rows of it are held "
                           "out of its training (evaluate it at a site that exported with --holdout)")
    data = _read(ledger_dir)
    splits = data.get("splits") or {}
    recs = []
    for d in digests:
        rec = splits.get(d)
        if rec is None:
            raise RefusedError(f"refused: the model learned from bundle {d[:16]}… of site {site!r}, which was not "
                               f"exported with --holdout from {ledger_dir}: every row of it was in training")
        if rec.get("fingerprint") != fingerprint or rec.get("site") != site:
            raise RefusedError(f"refused: bundle {d[:16]}… was exported under another codebook or site")
        recs.append(rec)
    if len({r.get("id_column") for r in recs}) > 1 or len({r["n_rows"] for r in recs}) > 1:
        raise RefusedError(f"refused: the model's bundles of site {site!r} held out different rows (another "
                           "--holdout-id or other data): no row is held out of all of them")
    smallest = min(recs, key=lambda r: float(r["fraction"]))
    return ModelSplit(Holdout(float(smallest["fraction"]), smallest.get("id_column")), site_key(ledger_dir),
                      tuple(digests), int(smallest["n_rows"]), int(smallest["n_held"]),
                      str(smallest["held_fingerprint"]))
