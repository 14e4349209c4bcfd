"""Bundle signatures: Ed25519 over the canonical bundle bytes, verified against a trust store.

A site signs :meth:`Bundle.signing_bytes` — the canonical bytes of the bundle with
``header["signature"] = None`` — and stores::

    header["signature"] = {"alg": "ed25519", "key_id": <sha256 hex of the public key>,
                           "site": <the bundle's site>, "value": <base64 of 64 bytes>}

The signature covers every header field (site, codebook, statistics, privacy cost,
recipient, payload checksum) and hence every payload byte. The ``signature`` dict itself is
not covered; its ``key_id`` selects the trusted key and its ``site`` must equal the signed
header's site, so editing it can only make verification fail.

The learner's entry point is :func:`load_verified_bundle` (file → optional unsealing →
parse → verify). **Decision on altered files:** there, *any* bundle that cannot be opened,
parsed or verified is refused with a one-line :class:`~marginals.errors.RefusedError`
(exit code 1) naming the file and the reason — a flipped byte either breaks parsing
("malformed or altered"), the AES-GCM tag of a sealed file, or the signature ("bad
signature"). :meth:`Bundle.from_bytes` on its own keeps raising
:class:`~marginals.errors.InputError` (exit 2) for malformed bytes; only a missing or
unreadable file stays an :class:`InputError` here. Sign-then-seal order: the signature is
inside the sealed envelope, so the learner both knows who signed and that only it could
read the counts.
"""

from __future__ import annotations

import base64
import binascii
import re
from pathlib import Path
from typing import Any, Mapping, Union

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric import ed25519, x25519

from marg._util import canonical_json
from marg.errors import InputError, MargError, RefusedError, option

from .bundle import Bundle, read_bundle_bytes
from .keys import short_id
from .trust_store import TrustStore
from .keys import key_id as _key_id
from .sealing import is_sealed, open_sealed, seal, sealed_recipient

ALG = "ed25519"
_HEX64 = re.compile(r"^[0-9a-f]{64}$")

Trust = Union[TrustStore, str, Path]


# ---------------------------------------------------------------------------------------
# bytes-level core
# ---------------------------------------------------------------------------------------
def sign_bytes(data: bytes, private_key: ed25519.Ed25519PrivateKey) -> bytes:
    """Ed25519 signature (64 bytes) of ``data``."""
    if not isinstance(private_key, ed25519.Ed25519PrivateKey):
        raise InputError(f"signing needs an Ed25519 private key, got {type(private_key).__name__}")
    return private_key.sign(bytes(data))


def verify_bytes(data: bytes, signature: bytes, public_key: ed25519.Ed25519PublicKey) -> bool:
    """Whether ``signature`` is a valid Ed25519 signature of ``data`` under ``public_key``."""
    if not isinstance(public_key, ed25519.Ed25519PublicKey):
        raise InputError(f"verifying needs an Ed25519 public key, got {type(public_key).__name__}")
    try:
        public_key.verify(bytes(signature), bytes(data))
        return True
    except InvalidSignature:
        return False


def b64(data: bytes) -> str:
    """Standard base64 text of ``data``."""
    return base64.b64encode(data).decode("ascii")


def unb64(text: Any, expected_len: int | None = None) -> bytes | None:
    """Strict base64 decoding; ``None`` if ``text`` is not valid (or not of the length)."""
    if not isinstance(text, str):
        return None
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError):
        return None
    if b64(raw) != text or (expected_len is not None and len(raw) != expected_len):
        return None
    return raw


def sign_document(doc: Mapping[str, Any], private_key: ed25519.Ed25519PrivateKey) -> dict[str, Any]:
    """``doc`` with ``key_id`` and ``signature``: Ed25519 over its canonical JSON with ``signature`` null.

    The signed JSON documents of the trust layer (ledger checkpoints, site configurations,
    secure-aggregation files) all use this form.
    """
    out = {**doc, "key_id": _key_id(private_key), "signature": None}
    out["signature"] = b64(sign_bytes(canonical_json(out), private_key))
    return out


def document_signed_by(doc: Mapping[str, Any], public_key: ed25519.Ed25519PublicKey) -> bool:
    """Whether ``doc`` (from :func:`sign_document`) is signed by ``public_key``, unaltered.

    False for any malformed document: another key id, a signature that is not 64 base64
    bytes, or values that are not canonical JSON (NaN, infinity).
    """
    sig = unb64(doc.get("signature"), 64)
    if sig is None or doc.get("key_id") != _key_id(public_key):
        return False
    try:
        body = canonical_json({**doc, "signature": None})
    except (ValueError, TypeError):
        return False
    return verify_bytes(body, sig, public_key)


# ---------------------------------------------------------------------------------------
# bundles
# ---------------------------------------------------------------------------------------
def sign_bundle(bundle: Bundle, private_key: ed25519.Ed25519PrivateKey, key_id: str | None = None) -> Bundle:
    """Return ``bundle`` with an Ed25519 signature over its canonical signing bytes.

    Parameters
    ----------
    bundle : Bundle
        Any existing signature is replaced (the signing bytes exclude it).
    private_key : Ed25519PrivateKey
        The site's ``*.sign.key``.
    key_id : str, optional
        Must equal the key's id if given (guards against a mismatched key/id pair).

    Returns
    -------
    Bundle
        ``header["signature"] = {alg, key_id, site, value}``.
    """
    if not isinstance(private_key, ed25519.Ed25519PrivateKey):
        raise InputError(f"signing needs an Ed25519 private key, got {type(private_key).__name__}")
    kid = _key_id(private_key)
    if key_id is not None and key_id != kid:
        raise InputError(f"key id {short_id(key_id)} does not belong to the signing key ({short_id(kid)})")
    value = sign_bytes(bundle.signing_bytes(), private_key)
    return bundle.with_signature({"alg": ALG, "key_id": kid, "site": bundle.site, "value": b64(value)})


def _trust(trust: Trust) -> TrustStore:
    return trust if isinstance(trust, TrustStore) else TrustStore(trust)


def trusted_signer(sig: dict[str, Any], trust: Trust | None, name: str,
                   role: str = "site") -> tuple[str, ed25519.Ed25519PublicKey, bytes]:
    """(the trust store's name for the signing key, the key, the decoded signature) of a
    well-formed signature record; a one-line RefusedError naming ``name`` otherwise.

    ``role``: what the document needs its signer to be (:mod:`protocols.key_roles`): a
    ``"learner"`` document (model, round, secure sum) only under a key whose trust-store file
    says ``learner``; a ``"site"`` one (bundle) under a key that says ``site`` or nothing.
    """
    value = unb64(sig.get("value"), 64)
    if value is None:
        raise RefusedError(f"{name} refused: malformed signature value")
    if trust is None:
        raise RefusedError(f"{name} refused: signed by key {short_id(sig['key_id'])} but no trust store was given "
                           f"({option('trust')})")
    store = _trust(trust)
    entry = store.lookup(sig["key_id"])
    if entry is None:
        raise RefusedError(f"{name} refused: signed by unknown key {short_id(sig['key_id'])} (not in trust store "
                           f"{store.directory})")
    check_role(store, sig["key_id"], entry[0], role, name)
    return entry[0], entry[1], value


def check_role(store: TrustStore, kid: str, holder: str, role: str, name: str) -> None:
    """Refuse (one line) a trusted key whose role is not ``role`` (see :func:`trusted_signer`)."""
    have = store.role(kid)
    if have == role or (have is None and role == "site"):
        return
    if have is None:
        raise RefusedError(f"{name} refused: signed by {holder!r} (key {short_id(kid)}), whose trust-store file "
                           f"{store.directory}/{holder}.sign.pub declares no role (an older marg); a {role}'s "
                           f"signature is needed: mark it with marg keys trust PUB --trust DIR --role {role}")
    raise RefusedError(f"{name} refused: signed by {holder!r} (key {short_id(kid)}), a {have}'s key: a {role}'s "
                       "signature is needed")


def verify_bundle(bundle: Bundle, trust_dir: Trust | None, allow_unsigned: bool = False,
                  source: str | None = None) -> str:
    """Check a bundle's signature against the trust store; return the signer's site.

    Checks, in order: signed at all; well-formed signature record; key id in the trust
    store; Ed25519 signature valid over :meth:`Bundle.signing_bytes`; the trusted key's
    site, the signature's ``site`` and the header's ``site`` all agree.

    Parameters
    ----------
    bundle : Bundle
    trust_dir : TrustStore or path to a directory of ``*.sign.pub``, or None
        ``None`` is allowed only with ``allow_unsigned`` and an unsigned bundle.
    allow_unsigned : bool, default False
        Accept a bundle without signature (its site is then unauthenticated). A *signed*
        bundle is always verified.
    source : str, optional
        File name for messages.

    Returns
    -------
    str
        The site name.

    Raises
    ------
    RefusedError
        One line naming the bundle and the reason: unsigned, malformed signature, unknown
        key, bad signature (altered), signer/site mismatch.
    """
    name = source or f"bundle from site {bundle.site!r}"
    sig = bundle.header.get("signature")
    if sig is None:
        if allow_unsigned:
            return bundle.site
        raise RefusedError(f"{name} refused: unsigned (the site signs its export with its signing key; or accept "
                           f"unsigned bundles: {option('allow_unsigned', True)})")
    if (
        not isinstance(sig, dict)
        or sig.get("alg") != ALG
        or not isinstance(sig.get("key_id"), str)
        or not _HEX64.match(sig["key_id"])
        or not isinstance(sig.get("site"), str)
    ):
        raise RefusedError(f"{name} refused: malformed signature record")
    role = "learner" if bundle.header.get("secagg") is not None else "site"  # a secure sum is the learner's
    trusted_site, pub, value = trusted_signer(sig, trust_dir, name, role)
    if not verify_bytes(bundle.signing_bytes(), value, pub):
        raise RefusedError(f"{name} refused: bad signature (bundle altered after signing, or signature forged)")
    if trusted_site != bundle.site or sig["site"] != bundle.site:
        raise RefusedError(
            f"{name} refused: signer/site mismatch (signed with the key of site {trusted_site!r}, "
            f"bundle claims site {bundle.site!r})"
        )
    return trusted_site


def parse_verified(
    data: bytes,
    trust_dir: Trust | None,
    allow_unsigned: bool = False,
    seal_key: x25519.X25519PrivateKey | None = None,
    source: str = "bundle",
) -> Bundle:
    """Bytes (sealed or plain) → verified :class:`Bundle`; every failure is a RefusedError.

    Parameters
    ----------
    data : bytes
        A bundle file's bytes, possibly sealed (``b"MARGSEAL"``).
    trust_dir, allow_unsigned
        As in :func:`verify_bundle`.
    seal_key : X25519PrivateKey, optional
        The learner's ``*.seal.key``; needed for sealed files. If the bundle header names
        a ``recipient``, it must be this key's id.
    source : str
        File name for messages.
    """
    data = bytes(data)
    opened_with: str | None = None
    if is_sealed(data):
        if seal_key is None:
            raise RefusedError(f"{source} refused: sealed to key {short_id(_rcpt(data))}; give the learner's sealing "
                               f"key ({option('key')})")
        data = open_sealed(data, seal_key, name=source)
        opened_with = _key_id(seal_key)
    try:
        bundle = Bundle.from_bytes(data, source=source)
    except InputError as exc:
        raise RefusedError(f"{source} refused: malformed or altered ({_strip(str(exc), source)})") from None
    if bundle.to_bytes() != data:  # defensive: the signature is over canonical bytes only
        raise RefusedError(f"{source} refused: bytes are not the canonical encoding (altered)")
    rcpt = bundle.header.get("recipient")
    if opened_with is not None and rcpt is not None and rcpt != opened_with:
        raise RefusedError(
            f"{source} refused: addressed to recipient {short_id(str(rcpt))} but sealed to {short_id(opened_with)} "
            "(re-sealed?)"
        )
    verify_bundle(bundle, trust_dir, allow_unsigned=allow_unsigned, source=source)
    return bundle


def _rcpt(data: bytes) -> str:
    try:
        return sealed_recipient(data)
    except MargError:
        return "?"


def _strip(msg: str, source: str) -> str:
    prefix = f"{source}: "
    return msg[len(prefix):] if msg.startswith(prefix) else msg


def load_verified_bundle(
    path: str | Path,
    trust_dir: Trust | None,
    allow_unsigned: bool = False,
    seal_key: x25519.X25519PrivateKey | None = None,
) -> Bundle:
    """The learner's way to read a bundle file: open (if sealed), parse, verify.

    Raises :class:`InputError` only if the file is missing or unreadable; any other
    failure (malformed, altered, sealed to another key, unsigned, unknown signer, bad
    signature, site mismatch) is a one-line :class:`RefusedError` naming the file.
    """
    data = read_bundle_bytes(path)
    return parse_verified(data, trust_dir, allow_unsigned=allow_unsigned, seal_key=seal_key, source=str(path))


def finalize_bundle(
    bundle: Bundle,
    signing_key: ed25519.Ed25519PrivateKey | None = None,
    recipient: x25519.X25519PublicKey | None = None,
) -> tuple[Bundle, bytes]:
    """Site side: address, sign and seal a bundle; return it and the file bytes to write.

    Steps: ``header["recipient"] = key_id(recipient)`` (or null), sign with
    ``signing_key`` if given, then seal the signed bytes to ``recipient`` if given.

    Returns
    -------
    bundle : Bundle
        The final (addressed, signed) bundle; ``bundle.digest()`` is what the ledger
        records as the bundle digest.
    file_bytes : bytes
        What to write: the sealed envelope, or ``bundle.to_bytes()`` if not sealed.
    """
    if recipient is not None and not isinstance(recipient, x25519.X25519PublicKey):
        raise InputError(f"--to must be an X25519 public (sealing) key, got {type(recipient).__name__}")
    b = bundle.with_header(recipient=_key_id(recipient) if recipient is not None else None)
    if signing_key is not None:
        b = sign_bundle(b, signing_key)
    else:
        b = b.with_signature(None)
    data = b.to_bytes()
    return b, (seal(data, recipient) if recipient is not None else data)
