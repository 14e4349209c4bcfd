"""Rounds: a learner-issued nonce that sites sign into their bundles, so an old bundle cannot be replayed.

``marg round --schema codebook.json --out round.json`` draws a fresh 128-bit round id for one
aggregation of one study; sites export with ``--round round.json`` (the id goes into the
bundle header, which the site's signature covers); ``marg learn --round round.json`` refuses
any bundle of another round, or of none — a replayed or stale bundle, even one validly signed
and sealed. Round file (JSON)::

    {"format": "marg-round", "version": 1, "id": "<32 hex>", "fingerprint": "<codebook>", "created": "<UTC>"}
"""

from __future__ import annotations

import json
import re
import secrets
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

from marg._util import atomic_write_bytes, canonical_json
from marg.errors import InputError, RefusedError

FORMAT = "marg-round"
_ID = re.compile(r"^[0-9a-f]{32}$")


def new_round(path: str | Path, fingerprint: str) -> str:
    """Write a fresh round file for the study ``fingerprint``; return its id."""
    rid = secrets.token_hex(16)
    d = {"format": FORMAT, "version": 1, "id": rid, "fingerprint": str(fingerprint),
         "created": datetime.now(timezone.utc).replace(microsecond=0).isoformat()}
    atomic_write_bytes(Path(path), canonical_json(d))
    return rid


def read_round(spec: str | Path, fingerprint: str | None = None) -> str:
    """A round id from a round file (checked against the study ``fingerprint``) or given as 32 hex digits."""
    text = str(spec)
    if _ID.match(text):
        return text
    p = Path(spec)
    try:
        d = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"round file not found: {p}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        raise InputError(f"{p}: not a round file (JSON expected)") from None
    if not isinstance(d, dict) or d.get("format") != FORMAT or not _ID.match(str(d.get("id", ""))):
        raise InputError(f"{p}: not a marg round file")
    if fingerprint is not None and d.get("fingerprint") != fingerprint:
        raise InputError(f"{p}: the round is for codebook {str(d.get('fingerprint'))[:16]}…, not {fingerprint[:16]}…")
    return str(d["id"])


def check_round(bundle_round: str | None, allowed: Iterable[str], source: str) -> None:
    """Refuse a bundle whose signed round id is not one of ``allowed``."""
    allowed = set(allowed)
    if bundle_round not in allowed:
        got = "no round" if bundle_round is None else f"round {str(bundle_round)[:12]}…"
        raise RefusedError(f"{source} refused: it carries {got}, not the current round "
                           f"({', '.join(sorted(a[:12] + '…' for a in allowed))}): a replayed or stale bundle")
