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
(exit 1) an unsigned model (unless ``allow_unsigned``), an unknown signer, a signer whose
trust-store key is not a learner's (:mod:`protocols.key_roles`: a site's key in the same
folder does not sign models) or a bad signature.

**Verify the bytes you use.** :func:`read_verified_model` reads the file once and returns the
verified bytes; the model is built from those (:meth:`marg.learners.estimator.model.Model.from_bytes`), never
from a second read of the path, which another process could have swapped in between.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ed25519

from marg._util import atomic_write_bytes, canonical_json
from marg.errors import InputError, RefusedError, option

from .keys import key_id
from .trust_store import TrustStore
from .signing import ALG, _HEX64, b64, sign_bytes, trusted_signer, verify_bytes


def _read(path: Path) -> dict[str, Any]:
    return _parse(_read_bytes(path), path)


def _read_bytes(path: Path) -> bytes:
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise InputError(f"model file not found: {path}") from None
    except OSError as exc:
        raise InputError(f"{path}: not a readable model file ({exc.strerror or type(exc).__name__})") from None


def _parse(data: bytes, path: Path) -> dict[str, Any]:
    try:
        d = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise InputError(f"{path}: not a readable model file ({type(exc).__name__})") from None
    if not isinstance(d, dict) or d.get("format") != "marg-model":
        raise InputError(f"{path}: not a marg model file")
    return d


def signing_bytes(d: dict[str, Any], name: str = "model") -> bytes:
    """The bytes a model's signature covers: the canonical JSON of the file without ``signature``.

    A model holding NaN or ±Infinity has no canonical JSON: InputError naming it.
    """
    try:
        return canonical_json({k: v for k, v in d.items() if k != "signature"})
    except ValueError:
        raise InputError(f"{name}: the model holds a non-finite number (NaN or Infinity), which no signature "
                         "covers") from None


def sign_model_file(path: str | Path, private_key: ed25519.Ed25519PrivateKey, signer: str) -> str:
    """Sign the model file at ``path`` in place (atomically); return the key id."""
    p = Path(path)
    d = _read(p)
    kid = key_id(private_key)
    d["signature"] = {"alg": ALG, "key_id": kid, "signer": str(signer),
                      "value": b64(sign_bytes(signing_bytes(d, p.name), private_key))}
    atomic_write_bytes(p, (json.dumps(d, indent=1, sort_keys=True) + "\n").encode("utf-8"))
    return kid


def verify_model_file(path: str | Path, trust: TrustStore | str | Path | None,
                      allow_unsigned: bool = False) -> str | None:
    """Check a model file's signature; return the signer's name (None: unsigned and allowed).

    To use the model, call :func:`read_verified_model` instead: this reads the path, and a
    later read may see another file.
    """
    return read_verified_model(path, trust, allow_unsigned)[1]


def read_verified_model(path: str | Path, trust: TrustStore | str | Path | None,
                        allow_unsigned: bool = False) -> tuple[bytes, str | None]:
    """Read a model file once and check its signature: (the verified bytes, the signer's name).

    Raises
    ------
    RefusedError
        Unsigned (without ``allow_unsigned``), malformed record, no trust store, unknown key,
        a key whose trust-store role is not learner, bad signature (the file was altered after
        signing; this includes NaN or Infinity, which marg never signs).
    """
    p = Path(path)
    data = _read_bytes(p)
    d = _parse(data, p)
    sig = d.get("signature")
    if sig is None:
        if allow_unsigned:
            return data, None
        raise RefusedError(f"{p.name} refused: unsigned model (the learner signs it with its signing key, "
                           f"{option('sign_key')}; or accept unsigned models: {option('allow_unsigned', True)})")
    if not isinstance(sig, dict) or sig.get("alg") != ALG or not _HEX64.match(str(sig.get("key_id", ""))):
        raise RefusedError(f"{p.name} refused: malformed model signature record")
    name, key, value = trusted_signer(sig, trust, p.name, role="learner")
    try:
        signed = signing_bytes(d, p.name)
    except InputError as exc:
        raise RefusedError(f"{p.name} refused: bad signature by {name!r} ({str(exc).split(': ', 1)[-1]}: altered "
                           "after signing)") from None
    if not verify_bytes(signed, value, key):
        raise RefusedError(f"{p.name} refused: bad signature by {name!r} (the model was altered after signing)")
    return data, name


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
        **({"holdout_certificate": info["holdout_certificate"]} if isinstance(info.get("holdout_certificate"), dict)
           else {}),
    }
