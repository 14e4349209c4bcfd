"""Signed models: the learner's Ed25519 signature over a model file, bound to its codebook and bundles.

A model file (:mod:`marg.learners.model`, JSON) gets three top-level fields when the learner
signs it (``marg learn --sign-key LEARNER.sign.key``)::

    "bundles":   [{"site": ..., "digest": <sha256 hex of the signed bundle>}, ...]
    "round":     the round id every bundle carried (marg round new), or null
    "signature": {"alg": "ed25519", "key_id": <sha256 hex of the public key>,
                  "signer": <the learner's name>, "value": <base64 of 64 bytes>}

The signature covers the canonical JSON of every other field (sorted keys, no spaces,
UTF-8; floats as Python's shortest round-trip repr): the estimator's coefficients, the
certificate, the codebook and its fingerprint, the bundle digests and the round. Changing
one coefficient, the certificate or the list of bundles breaks it.

A site applies a model (:func:`marg.api.load_model`, ``marg predict|evaluate``) after
:func:`verify_model_dict`: the signer's key must be in the
site's trust store of learner keys (a folder of ``LEARNER.sign.pub``) under the name the
signature claims, and the model's codebook fingerprint must equal the site's own codebook
(a model fitted under another codebook would predict silently wrong). Unsigned models are
refused unless the caller explicitly allows them (experiments). Every refusal is one line
(:class:`~marg.errors.RefusedError`, exit 1) naming the file and the reason.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from cryptography.hazmat.primitives.asymmetric import ed25519

from marg._util import atomic_write_bytes, json_default
from marg.errors import InputError, RefusedError

from .keys import TrustStore, key_id, short_id, validate_site_name
from .signing import b64, sign_bytes, unb64, verify_bytes

ALG = "ed25519"
SIGNED_FIELDS = ("bundles", "round", "signature")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def model_signing_bytes(d: dict[str, Any]) -> bytes:
    """Canonical JSON of a model dict without its ``signature`` (what the learner signs).

    NaN and infinities are written as JSON's ``NaN``/``Infinity`` tokens (the model writer
    does the same), so every model that can be saved can be signed.
    """
    body = {k: v for k, v in d.items() if k != "signature"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=True).encode("utf-8")


def _plain(d: dict[str, Any]) -> dict[str, Any]:
    """The model dict as pure JSON types (numpy scalars/arrays become numbers/lists)."""
    return json.loads(json.dumps(d, default=json_default))


def bundle_bindings(sites: Sequence[dict[str, Any]]) -> list[dict[str, str]]:
    """``[{site, digest}]`` of the bundles a model was fitted on, from its provenance ``info["sites"]``."""
    out = []
    for s in sites:
        digest = s.get("digest")
        if not isinstance(digest, str) or not _HEX64.match(digest):
            raise InputError(f"model provenance names site {s.get('site')!r} without a bundle digest")
        out.append({"site": str(s.get("site")), "digest": digest})
    return out


def model_file_dict(
    model_dict: dict[str, Any],
    private_key: ed25519.Ed25519PrivateKey | None = None,
    signer: str | None = None,
    round_id: str | None = None,
) -> dict[str, Any]:
    """A model's file contents with ``bundles``, ``round`` and (given a key) the learner's ``signature``.

    Parameters
    ----------
    model_dict : dict
        ``Model.to_dict()`` of a fitted model; its ``info["sites"]`` holds the bundles'
        digests (as ``marg learn`` records them).
    private_key : Ed25519PrivateKey, optional
        The learner's ``LEARNER.sign.key``; None writes ``"signature": null``.
    signer : str
        The learner's name (sites trust its key under this name); required with a key.
    round_id : str, optional
        The round every bundle was exported for.
    """
    d = _plain(model_dict)
    d["bundles"] = bundle_bindings((d.get("info") or {}).get("sites") or [])
    d["round"] = round_id
    d["signature"] = None
    if private_key is None:
        return d
    if not isinstance(private_key, ed25519.Ed25519PrivateKey):
        raise InputError(f"models are signed with an Ed25519 private key, got {type(private_key).__name__}")
    if signer is None:
        raise InputError("a signed model needs the signer's name")
    validate_site_name(signer)
    value = sign_bytes(model_signing_bytes(d), private_key)
    d["signature"] = {"alg": ALG, "key_id": key_id(private_key), "signer": signer, "value": b64(value)}
    return d


def write_model_dict(d: dict[str, Any], path: str | Path) -> None:
    """Write a model file (indented JSON, atomically: no partial file on failure)."""
    text = json.dumps(d, indent=1, sort_keys=True) + "\n"
    atomic_write_bytes(Path(path), text.encode("utf-8"))


@dataclass(frozen=True)
class ModelOrigin:
    """Who signed a model and from what.

    Attributes
    ----------
    signed : bool
    signer : str or None
        The learner's name as the trust store knows it (None if unsigned or unverified).
    key_id : str or None
    verified : bool
        The signature was checked against a trust store.
    bundles : list of {site, digest}
    round : str or None
    """

    signed: bool
    signer: str | None
    key_id: str | None
    verified: bool
    bundles: list[dict[str, str]]
    round: str | None

    def words(self) -> str:
        """One line: ``signed by learner (key 1a2b…), verified; 3 bundles, round 5f…``."""
        if not self.signed:
            who = "unsigned"
        else:
            who = f"signed by {self.signer!r} (key {short_id(self.key_id)})" + (", verified" if self.verified else ", not verified")
        rnd = f", round {self.round}" if self.round else ""
        return f"{who}; fitted on {len(self.bundles)} bundle(s){rnd}"


def read_model_dict(path: str | Path) -> dict[str, Any]:
    """A model file's JSON object; :class:`InputError` (one line) if missing or not JSON."""
    p = Path(path)
    try:
        text = p.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise InputError(f"model file not found: {p}") from None
    except IsADirectoryError:
        raise InputError(f"model file {p} is a directory") from None
    except UnicodeDecodeError:
        raise InputError(f"{p}: model file is not UTF-8 text") from None
    except OSError as exc:
        raise InputError(f"cannot read model {p}: {exc.strerror or exc}") from None
    try:
        d = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{p}: model file is not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise InputError(f"{p}: model file nests too deeply") from None
    if not isinstance(d, dict):
        raise InputError(f"{p}: not a marg model file (not a JSON object)")
    return d


def _origin_fields(d: dict[str, Any], name: str) -> tuple[list[dict[str, str]], str | None]:
    bundles = d.get("bundles") or []
    rnd = d.get("round")
    if not isinstance(bundles, list) or not all(
        isinstance(b, dict) and isinstance(b.get("site"), str) and isinstance(b.get("digest"), str) for b in bundles
    ):
        raise RefusedError(f"{name} refused: malformed bundle list (altered)")
    if rnd is not None and not isinstance(rnd, str):
        raise RefusedError(f"{name} refused: malformed round id {rnd!r} (altered)")
    return [{"site": b["site"], "digest": b["digest"]} for b in bundles], rnd


def verify_model_dict(d: dict[str, Any], trust: TrustStore | str | Path | None, allow_unsigned: bool = False,
                      name: str = "model") -> ModelOrigin:
    """Check a model dict's signature against a trust store of learner keys.

    Parameters
    ----------
    d : dict
        The model file's JSON object.
    trust : TrustStore or folder of ``LEARNER.sign.pub``, or None
    allow_unsigned : bool
        Accept a model without signature (its origin is then unknown). A signed model is
        always verified when ``trust`` is given; without ``trust`` it is refused unless
        ``allow_unsigned`` (then its signature is reported as not verified).

    Raises
    ------
    RefusedError
        Unsigned, malformed signature, unknown key, bad signature (altered), or a signer
        name that differs from the trust store's.
    """
    bundles, rnd = _origin_fields(d, name)
    sig = d.get("signature")
    if sig is None:
        if allow_unsigned:
            return ModelOrigin(False, None, None, False, bundles, rnd)
        raise RefusedError(f"{name} refused: unsigned model (sign it with marg learn --sign-key, or pass --allow-unsigned)")
    if (not isinstance(sig, dict) or sig.get("alg") != ALG or not isinstance(sig.get("key_id"), str)
            or not _HEX64.match(sig["key_id"]) or not isinstance(sig.get("signer"), str)):
        raise RefusedError(f"{name} refused: malformed signature record")
    value = unb64(sig.get("value"), 64)
    if value is None:
        raise RefusedError(f"{name} refused: malformed signature value")
    if trust is None:
        if allow_unsigned:
            return ModelOrigin(True, sig["signer"], sig["key_id"], False, bundles, rnd)
        raise RefusedError(f"{name} refused: signed by key {short_id(sig['key_id'])} but no trust store was given (--trust)")
    store = trust if isinstance(trust, TrustStore) else TrustStore(trust)
    entry = store.lookup(sig["key_id"])
    if entry is None:
        raise RefusedError(f"{name} refused: signed by unknown key {short_id(sig['key_id'])} (not in trust store {store.directory})")
    trusted, pub = entry
    if not verify_bytes(model_signing_bytes(d), value, pub):
        raise RefusedError(f"{name} refused: bad signature (model altered after signing: coefficients, certificate or provenance)")
    if sig["signer"] != trusted:
        raise RefusedError(f"{name} refused: signer mismatch (key of {trusted!r}, signature claims {sig['signer']!r})")
    return ModelOrigin(True, trusted, sig["key_id"], True, bundles, rnd)
