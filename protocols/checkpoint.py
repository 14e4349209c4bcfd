"""The site's checkpoints of its ledgers, kept outside the ledger folder.

A ledger verifies itself (hash chain, signatures), but whoever can write its folder can also
delete it, truncate it, rewrite it whole with lower costs, or edit ``budget.json``. The site
therefore keeps, in its own configuration folder (``$MARG_HOME``, default
``~/.config/marg``), one checkpoint per ledger: the number of entries, the hash of the last
one and the budget cap, updated after every append. Before appending,
:func:`check` refuses — in one line — a ledger with fewer entries than its checkpoint, whose
entry at the checkpoint hashes differently (rewritten), that is missing, or whose cap differs
from the checkpointed one (``budget.json`` edited or deleted).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Sequence

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


def update(ledger_file: Path, n: int, head: str, cap: dict | None) -> None:
    d = _load()
    d[_key(ledger_file)] = {"n": int(n), "head": head, "cap": cap}
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
