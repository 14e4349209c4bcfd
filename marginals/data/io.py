"""Reading tabular files in chunks.

Supported inputs: CSV, tab-separated (``.tsv``/``.tab``), either optionally gzip-compressed
(``.gz``), and Parquet. Files stream through in record batches, so a file larger than
memory never has to fit (peak memory depends on the chunk size, not the file size).

:func:`iter_typed_batches` yields columns as stored — CSV cells as dictionary-encoded text,
Parquet text columns straight from their dictionary pages, other Parquet columns in their
own type — for the encoder, which works on distinct values; :func:`iter_batches` yields
every column as plain text (categoricals and labels are compared as strings, so ``"01"``
stays ``"01"``). In CSV the cells listed in ``NULL_VALUES`` are missing; in Parquet,
nulls and NaN in float columns are. :func:`prefetched` reads the next chunk in a background
thread while the caller works on this one.

A malformed CSV row (too few or too many fields, an unterminated quote) is named by its line
and the first missing column — never by its content, which Arrow's own message repeats
(patient data, identifier included, would reach the terminal and the logs).

Arrow parses a CSV in blocks that must each hold a whole row; a wide study's row (thousands of
full-precision values: ~140 KB for 7,129 genes, megabytes for 10⁵ columns) can be longer than
the chunk size. The block then doubles (:func:`_grown`) and the file is read again, the rows
already yielded skipped, up to :data:`MAX_BLOCK_BYTES`; a longer row is refused in one line.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa

from marg.errors import InputError

DEFAULT_CHUNK_BYTES = 8 << 20
WIDE_ROWS = 2048
"""Rows a CSV read block holds at least (up to :data:`WIDE_BLOCK_BYTES`): a wide file's work per column is per block."""
WIDE_BLOCK_BYTES = 64 << 20
MAX_BLOCK_BYTES = 1 << 30
"""The largest CSV read block: a row (or header) longer than this is refused (Arrow holds a few blocks at once)."""
PARQUET_BATCH_CELLS = 1 << 19
"""Rows per Parquet batch = this / number of columns (at least 4,096): an export's memory is a few batches
(decoded columns, their codes), whatever the file's length; read on one thread without pre-buffering a row
group's column chunks (Arrow's per-thread buffers and a whole row group held were most of an export's memory)."""
DICT_TEXT = pa.dictionary(pa.int32(), pa.string())
NULL_VALUES = ["", "NA", "N/A", "NaN", "nan", "NULL", "null", "None", "#N/A"]


def _is_parquet(path: Path) -> bool:
    if path.suffix.lower() in (".parquet", ".pq"):
        return True
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == b"PAR1"
    except OSError:
        return False


def _delimiter(path: Path) -> str:
    name = path.name.lower()
    for suf in (".gz", ".bz2", ".zst", ".lz4"):
        if name.endswith(suf):
            name = name[: -len(suf)]
    if name.endswith((".tsv", ".tab")):
        return "\t"
    if name.endswith(".csv"):
        return ","
    # Sniff the first line.
    try:
        with pa.input_stream(str(path), compression="detect") as s:
            head = s.read(65536).decode("utf-8", errors="replace").splitlines()[:1]
    except (OSError, pa.ArrowException) as exc:
        raise InputError(f"cannot read {path}: {exc}") from None
    first = head[0] if head else ""
    return "\t" if first.count("\t") > first.count(",") else ","


_FOOTER: dict[tuple[str, int, int], Any] = {}
"""The last Parquet footer read, keyed by the file's path, modification time and size (:func:`parquet_footer`)."""


def parquet_footer(path: Path) -> Any:
    """A Parquet file's footer (``FileMetaData``), parsed once per version of the file: the header, the schema
    and the reader of one export all need it, and a wide file's is thousands of column chunks."""
    import pyarrow.parquet as pq

    st = path.stat()
    key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    md = _FOOTER.get(key)
    if md is None:
        md = pq.read_metadata(str(path))
        _FOOTER.clear()
        _FOOTER[key] = md
    return md


def column_names(path: str | Path) -> list[str]:
    """The header of a table file (without reading the data)."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"data file not found: {path}")
    if _is_parquet(path):
        try:
            return list(parquet_footer(path).schema.to_arrow_schema().names)
        except (OSError, pa.ArrowException, ValueError) as exc:  # ValueError: a corrupted file's names are not UTF-8
            raise InputError(f"cannot read Parquet file {path}: {_arrow_msg(exc)}") from None
    block = DEFAULT_CHUNK_BYTES
    try:
        plain = _plain_header(path)
        if plain is not None:  # the first block's rows parsed as before, one column decoded
            names, first = plain
            convert = {"strings_can_be_null": True, "null_values": NULL_VALUES, "include_columns": names[:1]}
            _open_csv(pa.BufferReader(first), path, convert, block, use_threads=False)
            return names
        while True:
            try:
                with pa.input_stream(str(path), compression="detect") as s:
                    # a block holds whole rows (the header and the rows typed from the first block)
                    convert = {"strings_can_be_null": True, "null_values": NULL_VALUES, "auto_dict_encode": False}
                    try:
                        return list(_open_csv(s, path, convert, block).schema.names)
                    # the reader parsed and typed a whole first block, kept otherwise (BENCHMARKS.md, "Issue 48
                    # (bytes2)": its size at 20,000 columns)
                    finally:
                        give_back_memory()
            except pa.ArrowInvalid as exc:
                block = _grown(exc, block, path)
    except UnicodeDecodeError:  # a header name that is not UTF-8
        raise InputError(f"cannot read {path}: the header is not UTF-8 text ({_bad_name(path)}); save the file as "
                         "UTF-8") from None
    except (OSError, pa.ArrowException) as exc:
        raise InputError(csv_error(exc, path)) from None


def _plain_header(path: Path) -> tuple[list[str], pa.Buffer] | None:
    """The header's names where Arrow's parse of them is a plain split, with the first read block's whole
    rows (what Arrow's reader parses first); None where it is not (Arrow's reader names the columns).

    Plain: a first line (Arrow drops a UTF-8 byte-order mark and ends a line at ``\r`` or ``\n``) that is
    not empty, holds no quote character and ends within :data:`DEFAULT_CHUNK_BYTES`. Arrow's reader builds
    a column decoder for every column it reads, header or rows (BENCHMARKS.md, "Issue 48 (widemem, fifth
    session)": their size at 20,000 columns). Raises UnicodeDecodeError for a header that is not UTF-8.
    """
    with pa.input_stream(str(path), compression="detect") as s:
        raw = s.read(DEFAULT_CHUNK_BYTES)
    head = raw[3:] if raw.startswith(b"\xef\xbb\xbf") else raw
    ends = [i for i in (head.find(b"\n"), head.find(b"\r")) if i >= 0]
    line = head[:min(ends)] if ends else b""  # (no line end in the block: Arrow's reader decides)
    if not line or b'"' in line:
        return None
    whole = max(raw.rfind(b"\n"), raw.rfind(b"\r")) + 1
    return line.decode("utf-8").split(_delimiter(path)), pa.py_buffer(raw).slice(0, whole)


def _grown(exc: Exception, block: int, path: Path) -> int:
    """The next read block after Arrow's ``exc``: twice ``block`` if a row was longer than it (Arrow:
    "straddling object straddles two block boundaries", or "Empty CSV file or block" for a header
    or first row longer than the block); otherwise ``exc`` again. Raises InputError
    (one line) past :data:`MAX_BLOCK_BYTES`: a row that long, or an unterminated quote that runs
    to the end of the file."""
    if not any(m in str(exc) for m in _BLOCK_ERRORS) or not _longer_than(path, block):
        raise exc
    if block >= MAX_BLOCK_BYTES:
        raise InputError(f"cannot read {path}: a row is longer than {MAX_BLOCK_BYTES / 2**20:g} MiB (the largest CSV "
                         "read block), or a quote is never closed; save the table as Parquet, which has no row-length "
                         "limit") from None
    return min(2 * block, MAX_BLOCK_BYTES)


_BLOCK_ERRORS = ("straddles two block boundaries", "Empty CSV file or block")
"""Arrow's messages for a row longer than the block (the latter also for an empty file: hence :func:`_longer_than`)."""


def _longer_than(path: Path, n: int) -> bool:
    """Whether the file holds more than ``n`` bytes (decompressed)."""
    try:
        with pa.input_stream(str(path), compression="detect") as s:
            return len(s.read(n + 1)) > n
    except (OSError, pa.ArrowException):
        return False


def _bad_name(path: Path) -> str:
    """Which header name (1-based) is not UTF-8, for the message (the header only is read)."""
    try:
        with pa.input_stream(str(path), compression="detect") as s:
            first = s.read(1 << 20).split(b"\n", 1)[0].rstrip(b"\r")
    except (OSError, pa.ArrowException):
        return "a column name"
    for k, raw in enumerate(first.split(_delimiter(path).encode()), 1):
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return f"column {k}, byte {raw[exc.start:exc.start + 1]!r}"
    return "a column name"


def _arrow_msg(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


_FIELDS = re.compile(r"Expected (\d+) columns, got (\d+)")
_ROW = re.compile(r"Row #(\d+)")


def csv_error(exc: Exception, path: Path, names: list[str] | None = None) -> str:
    """One line for a CSV parse error: the line and the column, never the row's values.

    Arrow's message ends with the offending row's text; it is dropped. With threads Arrow
    does not say which row, so the file is scanned again on one thread to find it.
    """
    text = str(exc)
    if "CSV parse error" not in text:
        return f"cannot read {path}: {_arrow_msg(exc)}"
    row = _ROW.search(text)
    if row is None:
        row = _ROW.search(_single_thread_error(path))
    where = f"line {row.group(1)}" if row else "a row"
    m = _FIELDS.search(text)
    if m is None:
        return f"cannot read {path}: malformed CSV at {where} (its values are not shown)"
    want, got = int(m.group(1)), int(m.group(2))
    names = names or _header(path)
    if got < want:
        col = f" (first missing: column {names[got]!r})" if names and got < len(names) else ""
        return (f"cannot read {path}: {where} has {got} of the header's {want} fields{col}: a short row or an "
                "unterminated quote (its values are not shown)")
    return (f"cannot read {path}: {where} has {got} fields, the header {want}: an extra delimiter or an unquoted "
            "value (its values are not shown)")


def _header(path: Path) -> list[str]:
    """The header line's names, read with Python's csv module (no data row)."""
    import csv

    try:
        with pa.input_stream(str(path), compression="detect") as s:
            first = s.read(1 << 20).decode("utf-8", errors="replace").split("\n", 1)[0]
        return next(csv.reader([first], delimiter=_delimiter(path)), [])
    except (OSError, pa.ArrowException, csv.Error):
        return []


def _single_thread_error(path: Path) -> str:
    convert = {"column_types": {}, "strings_can_be_null": True}
    try:
        for _ in _csv_batches(path, convert, DEFAULT_CHUNK_BYTES, use_threads=False):
            pass
    except (OSError, pa.ArrowException, InputError) as exc:
        return str(exc)
    return ""


def _open_csv(stream: Any, path: Path, convert: dict, block: int, use_threads: bool = True) -> Any:
    """Arrow's streaming CSV reader on ``stream`` (``path``'s delimiter, ``convert``: pyarrow.csv.ConvertOptions'
    arguments), in blocks of ``block`` bytes."""
    import pyarrow.csv as pcsv

    return pcsv.open_csv(stream, read_options=pcsv.ReadOptions(block_size=block, use_threads=use_threads),
                         parse_options=pcsv.ParseOptions(delimiter=_delimiter(path)),
                         convert_options=pcsv.ConvertOptions(**convert))


def _csv_batches(path: Path, convert: dict, block: int, *, use_threads: bool = True) -> Iterator[pa.RecordBatch]:
    """The CSV file's record batches (``convert``: pyarrow.csv.ConvertOptions' arguments), read in blocks of
    ``block`` bytes; when a row is longer than the block, the file is read again with a block twice as
    large (:func:`_grown`) and the rows already yielded are skipped, so every row comes exactly once."""
    done = 0  # rows yielded so far
    while True:
        skip = done
        try:
            with pa.input_stream(str(path), compression="detect") as s:
                for batch in _open_csv(s, path, convert, block, use_threads):
                    if skip:
                        cut = min(skip, batch.num_rows)
                        skip -= cut
                        batch = batch.slice(cut)
                        if batch.num_rows == 0:
                            continue
                    if block > DEFAULT_CHUNK_BYTES:  # a wide file's block: its parse buffers back before it is encoded
                        give_back_memory()
                    yield batch
                    done += batch.num_rows
            return
        except pa.ArrowInvalid as exc:
            block = _grown(exc, block, path)


def read_block(path: Path) -> int:
    """The CSV read block for ``path``: :data:`DEFAULT_CHUNK_BYTES`, or for a wide file (rows of
    tens of kilobytes: thousands of columns) :data:`WIDE_ROWS` rows' worth, at most
    :data:`WIDE_BLOCK_BYTES` (the row length estimated from the file's first block)."""
    try:
        with pa.input_stream(str(path), compression="detect") as s:
            head = s.read(DEFAULT_CHUNK_BYTES)
    except (OSError, pa.ArrowException):
        return DEFAULT_CHUNK_BYTES
    lines = head.count(b"\n")
    row = len(head) / max(lines, 1) if lines > 1 or len(head) < DEFAULT_CHUNK_BYTES else float(len(head))
    return int(min(WIDE_BLOCK_BYTES, max(DEFAULT_CHUNK_BYTES, row * WIDE_ROWS)))


def iter_typed_batches(
    path: str | Path, columns: list[str], *, chunk_bytes: int | None = None, dictionary: bool = True
) -> Iterator[dict[str, pa.Array]]:
    """Yield chunks of the file as ``{column: pyarrow array}`` for ``columns``, as stored.

    With ``dictionary`` (the default), CSV columns and Parquet text columns arrive as
    dictionary arrays (each distinct value once per chunk), which is what makes encoding
    cost per distinct value rather than per row. ``chunk_bytes``: the CSV read block (None:
    :func:`read_block`'s). Raises InputError (one line) if the file is missing, unreadable, or
    lacks a column. When the pass ends (or is left), its freed memory goes back to the system
    (:func:`give_back_memory`), so a pass before the counting one does not hold pages under the next
    pass's peak.
    """
    try:
        yield from _typed_batches(Path(path), columns, chunk_bytes, dictionary)
    finally:
        give_back_memory()


def give_back_memory() -> None:
    """Freed memory back to the system: Arrow's pool's unused pages, and on glibc the C heap's
    (``malloc_trim``: Arrow's CSV reader parses and types a block with ``malloc``, whose freed pages
    glibc keeps — a file's first pass held them under the next pass's peak)."""
    pa.default_memory_pool().release_unused()
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
            pass


def _typed_batches(path: Path, columns: list[str], chunk_bytes: int | None,
                   dictionary: bool) -> Iterator[dict[str, pa.Array]]:
    names = column_names(path)
    from collections import Counter

    seen = Counter(names)  # (names.count per column would cost columns × header: minutes at 20,000 columns)
    twice = [c for c in dict.fromkeys(columns) if seen[c] > 1]
    if twice:
        at = [k + 1 for k, n in enumerate(names) if n == twice[0]]
        raise InputError(f"{path.name}: the header names column {twice[0]!r} {len(at)} times (columns "
                         f"{', '.join(map(str, at))}): rename all but one")
    missing = [c for c in columns if c not in seen]
    if missing:
        raise InputError(f"column {missing[0]!r} is absent from {path.name} (columns: "
                         f"{', '.join(names[:12])}{'…' if len(names) > 12 else ''})")
    if _is_parquet(path):
        import pyarrow.parquet as pq

        try:
            footer = parquet_footer(path)
            schema = footer.schema.to_arrow_schema()
            text_cols = [c for c in columns if pa.types.is_string(schema.field(c).type)
                         or pa.types.is_large_string(schema.field(c).type)]
            pf = pq.ParquetFile(str(path), metadata=footer, read_dictionary=text_cols if dictionary else None,
                                pre_buffer=False)
            rows = max(4096, PARQUET_BATCH_CELLS // max(1, len(columns)))
            for batch in pf.iter_batches(batch_size=rows, columns=columns, use_threads=False):
                yield {c: batch.column(c) for c in columns}
        except (OSError, pa.ArrowException, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read Parquet file {path}: {_arrow_msg(exc)}") from None
        return
    convert = {"include_columns": columns, "column_types": {c: DICT_TEXT if dictionary else pa.string()
                                                            for c in columns},
               "strings_can_be_null": True, "null_values": NULL_VALUES}
    try:
        block = chunk_bytes or read_block(path)
        # a wide file's block parsed on one thread: the parsers of several blocks at once were its peak memory
        for batch in _csv_batches(path, convert, block, use_threads=block <= DEFAULT_CHUNK_BYTES):
            yield {c: batch.column(c) for c in columns}
    except (OSError, pa.ArrowException) as exc:
        raise InputError(csv_error(exc, path, names)) from None


def iter_batches(
    path: str | Path, columns: list[str], *, chunk_bytes: int | None = None
) -> Iterator[dict[str, pa.Array]]:
    """Yield chunks of the file as ``{column: pyarrow string array}`` for ``columns``.

    Raises InputError (one line) if the file is missing, unreadable, or lacks a column.
    """
    for batch in iter_typed_batches(path, columns, chunk_bytes=chunk_bytes, dictionary=False):
        yield {c: as_text(a, c) for c, a in batch.items()}


def as_text(arr: pa.Array, name: str | None = None) -> pa.Array:
    """A column as canonical text (:mod:`.value_text`): dictionaries decoded, whitespace trimmed,
    NaN in a float column made null, numbers, dates and booleans written the one way every source writes them."""
    from . import kernels as pc  # pyarrow.compute's kernels, called directly
    from .value_text import canonical, typed_text

    if pa.types.is_dictionary(arr.type):
        arr = pc.dictionary_decode(arr)
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        return canonical(pc.cast(pc.utf8_trim_whitespace(arr), pa.string()))
    try:
        text = typed_text(arr)
        return canonical(pc.utf8_trim_whitespace(pc.cast(arr, pa.string()))) if text is None else text
    except pa.ArrowException as exc:
        where = f"column {name!r}" if name else "a column"
        raise InputError(f"{where} of type {arr.type} cannot be read as text: {_arrow_msg(exc)}") from None


def prefetched(it: Iterator, depth: int = 1) -> Iterator:
    """Run ``it`` one item ahead in a background thread (exceptions re-raised in order)."""
    import queue
    import threading

    q: queue.Queue = queue.Queue(maxsize=depth)
    done = object()
    stop = threading.Event()

    def run() -> None:
        try:
            for item in it:
                while not stop.is_set():
                    try:
                        q.put(("item", item), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(("done", done))
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            q.put(("error", exc))

    t = threading.Thread(target=run, name="marg-prefetch", daemon=True)
    t.start()
    try:
        while True:
            kind, item = q.get()
            if kind == "item":
                yield item
            elif kind == "error":
                raise item
            else:
                return
    finally:
        stop.set()
