"""A learner's pair request (``marg request --top`` / ``--learner boost``, versions 1–2), signed like every request.

The file's form is :mod:`marginals.request`'s; this module adds the learner's signature
(:func:`protocols.signing.sign_document`: ``key_id`` and ``signature`` over its canonical JSON) and
checks it where a site answers (``marg export --pairs @REQUEST``): the request decides which tables
a site spends its budget on, so, as the select-then-measure request (:mod:`protocols.study`), it is
taken only signed by a key the site's trust store holds as a learner's (``--trust``), unaltered.
An unsigned request (an older marg, or written without a key) is refused unless the site says
``--allow-unsigned`` (for experiments: anyone could have written it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from marg.errors import InputError, RefusedError
from marg.marginals.request import PairRequest, read_request


def signer(sign_key: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """``sign(doc) -> doc`` with the learner's signature (for :func:`marginals.request.write_request`)."""
    from .signing import sign_document

    return lambda doc: sign_document(doc, sign_key)


def read_signed_request(path: str | Path, fingerprint: str, trust: Any,
                        allow_unsigned: bool = False) -> tuple[PairRequest, str | None]:
    """The pair request at ``path`` after its learner's signature checks out: (request, signer;
    None when unsigned and ``allow_unsigned``).

    Raises
    ------
    RefusedError
        Unsigned (without ``allow_unsigned``), no trust store to check it, signed by a key not held
        as a learner's, or altered.
    InputError
        Not a request, or for another codebook.
    """
    from .signing import document_signed_by, trusted_signer
    from .trust_store import TrustStore

    p = Path(path)
    req = read_request(p, fingerprint=fingerprint)  # the form first: one-line InputErrors
    try:
        d = json.loads(p.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):  # read just now: only a race gets here
        raise InputError(f"cannot read request file {p}") from None
    kid = d.get("key_id")
    if d.get("signature") is None or not isinstance(kid, str):
        if allow_unsigned:
            return req, None
        raise RefusedError(f"{p.name} refused: unsigned request (anyone could have written which tables this site "
                           "spends on): the learner signs it (marg request --sign-key); --allow-unsigned takes it "
                           "anyway")
    if trust is None:
        raise RefusedError(f"{p.name} refused: give --trust with the learner's key (role learner) to check who asks")
    store = trust if isinstance(trust, TrustStore) else TrustStore(trust)
    name, pub, _ = trusted_signer({"key_id": kid, "value": d.get("signature")}, store, p.name, role="learner")
    if not document_signed_by(d, pub):
        raise RefusedError(f"{p.name} refused: bad signature by {name!r} (the request was altered)")
    return req, name
