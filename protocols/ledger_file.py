"""The ledger folder's bytes on disk: its lock, its last lines, crash-safe appends and round markers.

A ledger folder ``DIR`` holds ``ledger.jsonl`` (one entry per line), ``checkpoint.json``, one
empty ``rounds/ID`` per answered round and ``.lock``. These functions know the files and
nothing of what an entry means (:mod:`protocols.ledger_format`) or which entries are allowed
(:mod:`protocols.ledger_state`); :class:`protocols.ledger.Ledger` puts them together.

* :func:`locked` serialises appends with an exclusive ``flock`` on ``DIR/.lock``;
* :func:`line_ending_at` reads the one line that ends at a byte offset (the cost of that line,
  not of the file), so a checkpoint's head is checked in O(1);
* :func:`append_line` writes one line with one ``write`` + ``fsync`` (``O_APPEND``), dropping a
  torn tail left by a crashed append first;
* :func:`mark_round` creates ``DIR/rounds/ID`` exclusively: a round is answered once.

Layout of a ledger folder ``DIR``::

    DIR/ledger.jsonl       one canonical-JSON entry per line (:mod:`protocols.ledger_format`)
    DIR/checkpoint.json    the state after the last entry, signed (:mod:`protocols.ledger_state`)
    DIR/rounds/ID          one empty file per learner's round a release answered
    DIR/.lock              advisory lock serialising appends

**A round is answered once.** A release for a learner's round (:mod:`protocols.rounds`)
creates ``DIR/rounds/ID`` (``O_EXCL``, under the lock, before its line is written); a second
release for the same round id is refused, so a learner cannot make the site mask or release
twice under one round (for secure aggregation that would leak the difference of the two
vectors). A crash after the marker and before the line burns the round id: refusing is the
safe side.
"""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from marg.errors import InputError, RefusedError

from .ledger_format import ROUND_ID

LOCK_FILE = ".lock"
ROUNDS_DIR = "rounds"
_CHUNK = 1 << 16


@contextmanager
def locked(directory: Path, create: bool = True) -> Iterator[None]:
    """Hold the folder's exclusive lock; ``create`` makes a missing folder (mode 0700), else a
    missing folder is read without a lock (there is nothing to serialise)."""
    if not directory.is_dir():
        if not create:
            yield
            return
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def line_ending_at(fh: Any, end: int) -> bytes:
    """The line that ends (with its ``"\\n"``) at byte ``end`` of an open file, without the newline.

    Reads backwards in 64 KiB chunks: the cost is one line's length, not the file's.
    Returns ``b"\\x00"`` (which hashes to no head) when ``end`` is not a line boundary.
    """
    if end <= 0:
        return b"\x00"
    fh.seek(end - 1)
    if fh.read(1) != b"\n":
        return b"\x00"
    buf, pos = b"", end - 1
    while pos > 0:
        start = max(0, pos - _CHUNK)
        fh.seek(start)
        buf = fh.read(pos - start) + buf
        pos = start
        cut = buf.rfind(b"\n")
        if cut >= 0:
            return buf[cut + 1:]
    return buf


def append_line(path: Path, line: bytes, end: int) -> None:
    """Append ``line`` and its newline to ``path`` durably, after cutting the file back to ``end``
    bytes (a torn tail of a crashed append); fsync the folder when the file is new."""
    created = not path.exists()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        if os.fstat(fd).st_size != end:
            os.ftruncate(fd, end)  # drop a torn tail left by a crashed append
        data = line + b"\n"
        while data:
            n = os.write(fd, data)
            data = data[n:]
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def clean_stale(directory: Path) -> None:
    """Remove temp files a crashed atomic write left in the folder (``.NAME.*.tmp``)."""
    for p in directory.glob(".*.tmp"):
        try:
            p.unlink()
        except OSError:
            pass


def mark_round(directory: Path, round_id: str, create: bool = True) -> Path:
    """Refuse a round the ledger in ``directory`` already answered; with ``create``, mark it
    answered (``DIR/rounds/ID``, created exclusively). Returns the marker's path."""
    if not isinstance(round_id, str) or not ROUND_ID.match(round_id):
        raise InputError(f"malformed round id {round_id!r}")
    marker = directory / ROUNDS_DIR / round_id
    if marker.exists():
        raise RefusedError(f"round {round_id} was already answered by this site (ledger {directory}): a reused "
                           "or replayed round; ask the learner for a new one")
    if create:
        marker.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            raise RefusedError(f"round {round_id} was already answered by this site (ledger {directory})") from None
    return marker
