"""The budget file of older marg: ``budget.json`` in a ledger folder, a cap outside the chain.

Current marg records the cap as a signed entry of the ledger (:meth:`protocols.ledger.Ledger.set_cap`);
a ledger folder that still holds ``budget.json`` is refused until that cap is recorded in the
chain (``marg audit budget``), which moves the file aside.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from marg._util import atomic_write_bytes
from marg.errors import InputError, RefusedError

from .accounting import PrivacyCost, validate_cap

BUDGET_FILE = "budget.json"
BUDGET_FORMAT = "marg-budget"


def write_budget(directory: str | os.PathLike[str], cap: PrivacyCost) -> Path:
    """Configure the dataset's privacy budget cap, once: ``DIR/budget.json`` (older marg).

    The file is ``{"format": "marg-budget", "version": 1, "epsilon": …, "delta": …,
    "rho": …}``, written atomically. Writing the same cap again is a no-op; a different cap
    is refused. Current marg records the cap in the signed ledger instead.

    Returns the file's path.
    """
    validate_cap(cap)
    d = Path(directory)
    old = read_budget(d)
    path = d / BUDGET_FILE
    if old is not None:
        if old == cap:
            return path
        raise RefusedError(f"privacy budget already configured in {path}: {old.describe_cap()} (requested "
                           f"{cap.describe_cap()})")
    d.mkdir(parents=True, exist_ok=True)
    body = {"format": BUDGET_FORMAT, "version": 1, **cap.to_dict()}
    atomic_write_bytes(path, (json.dumps(body, sort_keys=True) + "\n").encode("utf-8"))
    return path


def read_budget(directory: str | os.PathLike[str]) -> PrivacyCost | None:
    """The configured cap in ``DIR/budget.json``, or None when none is configured."""
    path = Path(directory) / BUDGET_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InputError(f"cannot read privacy budget {path}: {exc}") from None
    try:
        d = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"privacy budget {path} is not valid JSON: {exc.msg}") from None
    if not isinstance(d, dict) or d.get("format") != BUDGET_FORMAT:
        raise InputError(f"not a marg privacy budget file: {path}")
    return PrivacyCost.from_dict(d)
