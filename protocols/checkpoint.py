"""The site's checkpoints of its ledgers, kept outside the ledger folder.

A ledger verifies itself (hash chain, signatures), but whoever can write its folder can also
delete it, truncate it, rewrite it whole with lower costs, or edit ``budget.json``. The site
therefore keeps, in its own configuration folder (``$MARG_HOME``, default
``~/.config/marg``), one checkpoint per ledger: the number of entries, the hash of the last
one, its byte offset, its cumulative spend and the budget cap, updated after every append.

Before appending, :func:`read_state` refuses — in one line — a ledger that is missing,
shorter than its checkpoint, whose entry at the checkpoint hashes differently (rewritten), or
whose cap differs from the checkpointed one (``budget.json`` edited or deleted). It reads the
file **from the checkpointed entry on**: that entry's hash pins it (and its cumulative spend),
so only the entries after it need verifying, and :func:`append_line` adds the new entry
with one appended, fsynced line — an append costs the same at entry 10 and at entry 10,000
(``bench/ledger.py``). Without a checkpoint (a ledger's first export on this machine) the
whole file is read and verified once.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from marg._util import atomic_write_bytes, canonical_json
from marg.errors import RefusedError

FILE = "ledgers.json"


def home() -> Path:
    return Path(os.environ.get("MARG_HOME") or Path.home() / ".config" / "marg")


def _load() -> dict[str, Any]:
    p = home() / FILE
    if not p.exists():
        return {}
    try:
        d = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise RefusedError(f"the ledger checkpoints {p} are unreadable: restore them before exporting") from None
    return d if isinstance(d, dict) else {}


def _key(ledger_file: Path) -> str:
    return str(Path(ledger_file).resolve())


def check(ledger_file: Path, lines: Sequence[bytes], line_hash: Any, cap: dict | None) -> None:
    """Refuse appending to ``ledger_file`` (with complete ``lines``) if it contradicts its checkpoint."""
    cp = _load().get(_key(ledger_file))
    if cp is None:
        return
    n, head = int(cp["n"]), cp["head"]
    if len(lines) < n:
        what = "deleted" if not lines else f"truncated to {len(lines)} entries"
        raise RefusedError(f"the ledger {ledger_file} was {what}; its checkpoint ({home() / FILE}) records {n} entries")
    if n and line_hash(lines[n - 1]) != head:
        raise RefusedError(f"the ledger {ledger_file} was rewritten: entry {n} does not match its checkpoint ({home() / FILE})")
    if cp.get("cap") != cap:
        raise RefusedError(f"the budget of {ledger_file.parent} changed from its checkpoint ({cp.get('cap')} → {cap}): "
                           "budget.json was edited or deleted")


def check_key(ledger_file: Path, kid: str | None) -> None:
    """Refuse an entry signed by another key than the one the ledger's checkpoint pins."""
    pinned = (_load().get(_key(ledger_file)) or {}).get("key_id")
    if pinned and kid and kid != pinned:
        raise RefusedError(f"the ledger {ledger_file} is pinned to key {pinned[:16]}… (its checkpoint); "
                           f"this export signs with key {kid[:16]}…")


def update(ledger_file: Path, n: int, head: str, cap: dict | None, start: int | None = None,
           cumulative: dict | None = None, kid: str | None = None) -> None:
    d = _load()
    old = d.get(_key(ledger_file)) or {}
    rec: dict[str, Any] = {"n": int(n), "head": head, "cap": cap}
    if old.get("key_id") or kid:
        rec["key_id"] = old.get("key_id") or kid
    if start is not None:
        rec.update(start=int(start), cumulative=cumulative)
    d[_key(ledger_file)] = rec
    p = home() / FILE
    p.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(p, canonical_json(d))


def forget_under(directory: Path) -> None:
    """Drop the checkpoints of every ledger below ``directory`` (a folder being deleted on purpose,
    e.g. ``marg demo`` replacing its own earlier run)."""
    d = _load()
    root = str(Path(directory).resolve())
    keep = {k: v for k, v in d.items() if not (k == root or k.startswith(root + os.sep))}
    if len(keep) != len(d):
        atomic_write_bytes(home() / FILE, canonical_json(keep))


@dataclass
class State:
    """A ledger as an append sees it: complete ``lines`` after the pinned entry (or all of them
    when ``pinned`` is None), the entry count ``n``, the last complete line, the file size and a
    torn tail to drop; ``spent`` is filled in after verification."""

    lines: list[bytes]
    pinned: bytes | None
    pinned_seq: int
    n: int
    last: bytes | None
    size: int
    torn: bytes
    spent: Any = None


def read_state(ledger_file: Path, cap: dict | None, line_hash: Callable[[bytes], str]) -> State:
    """The ledger's tail from its checkpoint (see the module docstring), refusing contradictions."""
    from .ledger import split_lines

    p = Path(ledger_file)
    cp = _load().get(_key(p))
    if cp is None or "start" not in cp:
        try:
            data = p.read_bytes()
        except FileNotFoundError:
            data = b""
        lines, torn = split_lines(data)
        if cp is not None:
            check(p, lines, line_hash, cap)
        return State(lines, None, 0, len(lines), lines[-1] if lines else None, len(data), torn)
    if cp.get("cap") != cap:
        raise RefusedError(f"the budget of {p.parent} changed from its checkpoint ({cp.get('cap')} → {cap}): "
                           "budget.json was edited or deleted")
    n, start = int(cp["n"]), int(cp["start"])
    try:
        size = p.stat().st_size
    except FileNotFoundError:
        raise RefusedError(f"the ledger {p} was deleted; its checkpoint ({home() / FILE}) records {n} entries") from None
    with open(p, "rb") as fh:
        fh.seek(start)
        data = fh.read()
    lines, torn = split_lines(data)
    if not lines or line_hash(lines[0]) != cp["head"]:
        what = "truncated" if size <= start else "rewritten"
        raise RefusedError(f"the ledger {p} was {what}: entry {n} does not match its checkpoint ({home() / FILE})")
    after = lines[1:]
    return State(after, lines[0], n, n + len(after), after[-1] if after else lines[0], size, torn)


def append_line(ledger_file: Path, line: bytes, size: int, torn: bytes) -> int:
    """Append ``line`` + newline to the ledger file (dropping a torn tail first), fsync it;
    return the offset where the line starts."""
    p = Path(ledger_file)
    new = not p.exists()
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if torn:
            size -= len(torn)
            os.ftruncate(fd, size)
        elif size > 0:
            os.lseek(fd, size - 1, os.SEEK_SET)
            if os.read(fd, 1) != b"\n":  # a complete last entry that lost its newline
                os.lseek(fd, size, os.SEEK_SET)
                os.write(fd, b"\n")
                size += 1
        os.lseek(fd, size, os.SEEK_SET)
        buf = memoryview(line + b"\n")
        while buf:
            buf = buf[os.write(fd, buf):]
        os.fsync(fd)
    finally:
        os.close(fd)
    if new:
        dfd = os.open(p.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    return size
