"""Small helpers every marg layer may use: canonical JSON bytes, atomic file writes, the time stamp."""

from __future__ import annotations

import json
import math
import os
import tempfile
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, Callable, ContextManager, Iterator

from marg.errors import InputError


def canonical_json(obj: Any) -> bytes:
    """Canonical JSON bytes: sorted keys, no whitespace, UTF-8 (the bytes that get hashed)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode(
        "utf-8"
    )


def parse_canonical(raw: bytes) -> tuple[Any, str | None]:
    """Read bytes that must be the canonical JSON (:func:`canonical_json`) of an object.

    Returns
    -------
    (object, None), or (None, what is wrong)
        ``"UnicodeDecodeError"``, ``"JSONDecodeError"``, ``"RecursionError"`` (nested too deep),
        ``"not an object"``, ``"not canonical"`` (no canonical form, e.g. NaN) or ``"edited"``
        (valid JSON in another form: any byte edit that keeps valid JSON shows). Each reader
        (bundle header, ledger line) words the problem for its own message.
    """
    try:
        obj = json.loads(bytes(raw).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        return None, type(exc).__name__
    if not isinstance(obj, dict):
        return None, "not an object"
    try:
        canon = canonical_json(obj)
    except (ValueError, TypeError):
        return None, "not canonical"
    return (obj, None) if canon == raw else (None, "edited")


def read_json_file(path: str | os.PathLike[str], what: str, missing: str = "file") -> Any:
    """The JSON value in the file at ``path``; a one-line InputError ``"{missing} not found: PATH"`` when absent,
    ``"PATH: not a {what} file (JSON expected)"`` when unreadable or not JSON (its bytes never quoted)."""
    p = Path(path)
    try:
        return json.loads(p.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise InputError(f"{missing} not found: {p}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise InputError(f"{p}: not a {what} file (JSON expected)") from None


def bisect_monotone(ok: Callable[[float], bool], lo: float, hi: float, rel_tol: float,
                    geometric: bool = False) -> tuple[float, float]:
    """Shrink the bracket ``[lo, hi]`` of a monotone predicate (``ok`` false below some point,
    true above it; ``ok(hi)`` true) until ``hi − lo ≤ rel_tol · hi`` (``geometric``: ``hi / lo ≤
    1 + rel_tol``, midpoints ``sqrt(lo · hi)``); the one bisection of marg's searches (ρ for an
    ε, rows or ε for an informative certificate, patients needed).

    Returns
    -------
    (lo, hi)
        The final bracket: ``ok`` is true at ``hi`` (if it was at the start), false at ``lo``
        unless ``lo`` was never moved.
    """
    while (hi / lo > 1.0 + rel_tol) if geometric else (hi - lo > rel_tol * hi):
        mid = math.sqrt(lo * hi) if geometric else 0.5 * (lo + hi)
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return lo, hi


def now_iso() -> str:
    """The current UTC time to the second, ISO 8601 (``2026-01-31T12:00:00+00:00``): every
    timestamp marg writes (bundles, ledger entries, checkpoints, models, rounds)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@contextmanager
def _atomic_file(path: Path, mode: int | None = None, sync_dir: bool = True, text: bool = False,
                 newline: str = "") -> Iterator[IO[Any]]:
    """The one temp-file-and-rename: yield a handle on ``.NAME.*.tmp`` beside ``path``; on a clean
    exit fsync it, rename it over ``path`` and (``sync_dir``) fsync the folder; on an error remove it."""
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.exists():
        raise InputError(f"output folder does not exist: {parent}")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        with (os.fdopen(fd, "w", encoding="utf-8", newline=newline) if text else os.fdopen(fd, "wb")) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    if not sync_dir:
        return
    try:
        dfd = os.open(parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def atomic_write_bytes(path: Path, data: bytes, mode: int | None = None, sync_dir: bool = True) -> None:
    """Write ``data`` to ``path`` atomically: temp file in the same folder, fsync, rename,
    then fsync the folder.

    A crash at any point leaves either the old file (or none) or the complete new one.
    ``mode`` sets the permission bits before any byte is written (e.g. 0o600 for keys).
    ``sync_dir=False`` skips the folder's fsync: the rename may then be lost in a crash (the
    old file stays), for files whose previous version is still valid (ledger checkpoints).
    """
    with _atomic_file(path, mode, sync_dir) as fh:
        fh.write(data)


def atomic_text_writer(path: str | Path, newline: str = "") -> ContextManager[IO[str]]:
    """Write a text file in pieces, atomically (as :func:`atomic_write_bytes`): a context manager
    whose handle is a text file on a temp file renamed over ``path`` on success. If the block
    raises, the temp file is removed and ``path`` is untouched (never a half-written output)."""
    return _atomic_file(Path(path), text=True, newline=newline)
