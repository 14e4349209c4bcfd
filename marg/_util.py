"""Small helpers every marg layer may use: canonical JSON bytes and atomic file writes."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from marg.errors import InputError


def canonical_json(obj: Any) -> bytes:
    """Canonical JSON bytes: sorted keys, no whitespace, UTF-8 (the bytes that get hashed)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode(
        "utf-8"
    )


def atomic_write_bytes(path: Path, data: bytes, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` atomically: temp file in the same folder, fsync, rename,
    then fsync the folder.

    A crash at any point leaves either the old file (or none) or the complete new one.
    ``mode`` sets the permission bits before any byte is written (e.g. 0o600 for keys).
    """
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.exists():
        raise InputError(f"output folder does not exist: {parent}")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    try:
        dfd = os.open(parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


class atomic_text_writer:
    """Write a text file in pieces, atomically: a temp file beside ``path`` renamed over it on success.

    Use as a context manager; the handle is a text file. If the block raises, the temp file
    is removed and ``path`` is untouched (never a half-written output).
    """

    def __init__(self, path: str | Path, newline: str = ""):
        self.path = Path(path)
        self.newline = newline

    def __enter__(self):
        parent = self.path.parent if str(self.path.parent) else Path(".")
        if not parent.exists():
            raise InputError(f"output folder does not exist: {parent}")
        fd, self._tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=parent)
        self._fh = os.fdopen(fd, "w", encoding="utf-8", newline=self.newline)
        return self._fh

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                self._fh.flush()
                os.fsync(self._fh.fileno())
            self._fh.close()
            if exc_type is None:
                os.replace(self._tmp, self.path)
        finally:
            if os.path.exists(self._tmp):
                os.unlink(self._tmp)
