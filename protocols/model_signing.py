"""Signed models: the learner signs a model file; sites verify it before they predict with it.

A model file is JSON. Its signature is an Ed25519 signature over the canonical JSON
(:func:`marg._util.canonical_json`) of the whole file *without* its ``signature`` field,
so it covers the learner, the codebook and its fingerprint, the estimator's parameters and
state, the certificate, and the provenance (the sites and the digests of the bundles the
model was learned from). Any edit — negated coefficients, a lowered certificate, another
codebook — invalidates it. The record::

    "signature": {"alg": "ed25519", "key_id": "<sha256 of the learner's public key>",
                  "signer": "<name of the key in the trust store>", "value": "<base64>"}

:func:`sign_model_file` adds it (``marg learn --sign-key``); :func:`verify_model_file` checks
it against a trust store of ``NAME.sign.pub`` files (``--trust``), refusing with one line
(exit 1) an unsigned model (unless ``allow_unsigned``), an unknown signer or a bad signature.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ed25519

from marg._util import atomic_write_bytes, canonical_json
from marg.errors import InputError, RefusedError, option

from .keys import TrustStore, key_id
from .signing import ALG, _HEX64, b64, sign_bytes, trusted_signer, verify_bytes


def _read(path: Path) -> dict[str, Any]:
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"model file not found: {path}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: not a readable model file ({type(exc).__name__})") from None
    if not isinstance(d, dict) or d.get("format") != "marg-model":
        raise InputError(f"{path}: not a marg model file")
    return d


def signing_bytes(d: dict[str, Any]) -> bytes:
    """The bytes a model's signature covers: the canonical JSON of the file without ``signature``."""
    return canonical_json({k: v for k, v in d.items() if k != "signature"})


def sign_model_file(path: str | Path, private_key: ed25519.Ed25519PrivateKey, signer: str) -> str:
    """Sign the model file at ``path`` in place (atomically); return the key id."""
    p = Path(path)
    d = _read(p)
    kid = key_id(private_key)
    d["signature"] = {"alg": ALG, "key_id": kid, "signer": str(signer),
                      "value": b64(sign_bytes(signing_bytes(d), private_key))}
    atomic_write_bytes(p, (json.dumps(d, indent=1, sort_keys=True) + "\n").encode("utf-8"))
    return kid


def verify_model_file(path: str | Path, trust: TrustStore | str | Path | None, allow_unsigned: bool = False) -> str | None:
    """Check a model file's signature; return the signer's name (None: unsigned and allowed).

    Raises
    ------
    RefusedError
        Unsigned (without ``allow_unsigned``), malformed record, no trust store, unknown key,
        bad signature (the file was altered after signing).
    """
    p = Path(path)
    d = _read(p)
    sig = d.get("signature")
    if sig is None:
        if allow_unsigned:
            return None
        raise RefusedError(f"{p.name} refused: unsigned model (the learner signs it with its signing key, "
                           f"{option('sign_key')}; or accept unsigned models: {option('allow_unsigned', True)})")
    if not isinstance(sig, dict) or sig.get("alg") != ALG or not _HEX64.match(str(sig.get("key_id", ""))):
        raise RefusedError(f"{p.name} refused: malformed model signature record")
    name, key, value = trusted_signer(sig, trust, p.name)
    if not verify_bytes(signing_bytes(d), value, key):
        raise RefusedError(f"{p.name} refused: bad signature by {name!r} (the model was altered after signing)")
    return name


def describe_model_file(path: str | Path) -> dict[str, Any]:
    """Who signed a model and from which bundles (for ``marg inspect MODEL``); nothing verified."""
    p = Path(path)
    d = _read(p)
    sig = d.get("signature") if isinstance(d.get("signature"), dict) else None
    info = d.get("info") or {}
    sites = info.get("sites") or []
    return {
        "kind": "model",
        "learner": d.get("learner"),
        "codebook_fingerprint": d.get("codebook_fingerprint"),
        "worst_case_error": d.get("worst_case_error"),
        # the certificate as the estimator records it, with the box it was computed over
        "certificate": (d.get("estimator") or {}).get("certificate"),
        "signed": sig is not None,
        "signer": None if sig is None else sig.get("signer"),
        "key_id": None if sig is None else sig.get("key_id"),
        "bundles": [{"site": s.get("site"), "digest": s.get("digest")} for s in sites if isinstance(s, dict)],
        **({"holdout_certificate": info["holdout_certificate"]} if isinstance(info.get("holdout_certificate"), dict) else {}),
    }
