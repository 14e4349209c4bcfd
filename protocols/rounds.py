"""Rounds: a learner-issued nonce that sites sign into their bundles, so an old bundle cannot be replayed.

``marg round --schema codebook.json --sign-key learner.sign.key --out round.json`` draws a
fresh 128-bit round id for one aggregation of one study, signed by the learner; sites export
with ``--round round.json --trust learner-keys/`` (the signature is checked against a key whose
role is learner, :mod:`protocols.key_roles`; the id goes into the bundle header, which the site's
signature covers); ``marg learn --round round.json`` refuses any bundle of another round, or
of none — a replayed or stale bundle, even one validly signed and sealed. Without
``--round``, ``marg learn`` says in one line how many bundles carry no round (rounds are
what stops a replay; :func:`round_warning`). Round file (canonical JSON)::

    {"format": "marg-round", "version": 1, "id": "<32 hex>", "fingerprint": "<codebook>", "created": "<UTC>",
     "key_id": "<learner's key id>", "signature": "<base64 Ed25519 over the rest>"}

A round file of an older marg has no signature: a site that checks (``--trust``) refuses it.
"""

from __future__ import annotations

import re
import secrets
from pathlib import Path
from typing import Any, Iterable, Sequence

from marg._util import atomic_write_bytes, canonical_json, now_iso, read_json_file
from marg.errors import InputError, RefusedError

FORMAT = "marg-round"
_ID = re.compile(r"^[0-9a-f]{32}$")


def new_round(path: str | Path, fingerprint: str, sign_key: Any = None) -> str:
    """Write a fresh round file for the study ``fingerprint``, signed with ``sign_key`` (the
    learner's Ed25519 key) when given; return its id."""
    from .signing import sign_document

    rid = secrets.token_hex(16)
    d = {"format": FORMAT, "version": 1, "id": rid, "fingerprint": str(fingerprint),
         "created": now_iso()}
    if sign_key is not None:
        d = sign_document(d, sign_key)
    atomic_write_bytes(Path(path), canonical_json(d))
    return rid


def read_round(spec: str | Path, fingerprint: str | None = None, trust: Any = None) -> str:
    """A round id from a round file (checked against the study ``fingerprint``) or given as 32 hex digits.

    With ``trust`` (a trust store of learner keys) the file must be signed by a key there whose
    role is learner; an id given alone, an unsigned file, an unknown signer or an altered file
    is refused.
    """
    text = str(spec)
    if _ID.match(text):
        if trust is not None:
            raise RefusedError(f"round {text[:12]}… given as an id: its signature cannot be checked (give the round "
                               "file)")
        return text
    p = Path(spec)
    d = read_json_file(p, "round", "round file")
    if not isinstance(d, dict) or d.get("format") != FORMAT or not _ID.match(str(d.get("id", ""))):
        raise InputError(f"{p}: not a marg round file")
    if fingerprint is not None and d.get("fingerprint") != fingerprint:
        raise InputError(f"{p}: the round is for codebook {str(d.get('fingerprint'))[:16]}…, not {fingerprint[:16]}…")
    if trust is not None:
        verify_round(d, trust, p.name)
    return str(d["id"])


def verify_round(d: dict[str, Any], trust: Any, name: str) -> str:
    """Check a round document's signature under a learner key of ``trust``; return the signer's name."""
    from .trust_store import TrustStore
    from .signing import document_signed_by, trusted_signer

    kid = d.get("key_id")
    if d.get("signature") is None or not isinstance(kid, str):
        raise RefusedError(f"{name} refused: unsigned round file (the learner signs it: marg round --sign-key)")
    store = trust if isinstance(trust, TrustStore) else TrustStore(trust)
    signer, pub, _ = trusted_signer({"key_id": kid, "value": d.get("signature")}, store, name, role="learner")
    if not document_signed_by(d, pub):
        raise RefusedError(f"{name} refused: bad signature by {signer!r} (the round file was altered)")
    return signer


def round_warning(rounds: Sequence[str | None]) -> str | None:
    """The one line ``marg learn`` prints without ``--round``: how many bundles carry no round
    (a replayed or stale bundle would not be noticed), or which rounds they answer."""
    none = sum(1 for r in rounds if r is None)
    if none:
        return (f"warning: {none} of {len(rounds)} bundles carry no round id: a replayed or stale bundle is not "
                "detected (marg round --sign-key, then marg export --round and marg learn --round)")
    if rounds:
        ids = sorted({str(r)[:12] + "…" for r in rounds})
        return (f"note: the bundles answer round {', '.join(ids)}; give --round ROUND.json to refuse bundles of any "
                "other round")
    return None


def check_round(bundle_round: str | None, allowed: Iterable[str], source: str) -> None:
    """Refuse a bundle whose signed round id is not one of ``allowed``."""
    allowed = set(allowed)
    if bundle_round not in allowed:
        got = "no round" if bundle_round is None else f"round {str(bundle_round)[:12]}…"
        raise RefusedError(f"{source} refused: it carries {got}, not the current round "
                           f"({', '.join(sorted(a[:12] + '…' for a in allowed))}): a replayed or stale bundle")
