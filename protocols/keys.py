"""Key files: Ed25519 signing and X25519 sealing key pairs of a site or the learner, their ids.

A site (or the learner) owns two key pairs, written by :func:`generate_keys` as PEM files
in one directory::

    DIR/NAME.sign.key   Ed25519 private key (PKCS8, mode 0600, optionally passphrase-encrypted)
    DIR/NAME.sign.pub   Ed25519 public key (SubjectPublicKeyInfo)
    DIR/NAME.seal.key   X25519 private key (PKCS8, mode 0600, optionally passphrase-encrypted)
    DIR/NAME.seal.pub   X25519 public key (SubjectPublicKeyInfo)

The signing pair identifies a site: bundles and ledger entries are signed with it. The
sealing pair lets others encrypt to its owner (sites seal bundles to the learner's
``.seal.pub``). A key's **id** is ``sha256(raw 32 public bytes)`` in hex (64 characters);
:func:`short_id` gives the first 16 for display.

Who a public key belongs to is the trust store's (:mod:`protocols.trust_store`); whether a
signing key is a site's or the learner's is its role line (:mod:`protocols.key_roles`).

Errors are one line: :class:`~marginals.errors.InputError` for a missing file, a file that
is not a key, the wrong kind of key, or a missing passphrase;
:class:`~marginals.errors.RefusedError` for a wrong passphrase or an attempt to overwrite
existing keys.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Union

from cryptography.hazmat.primitives.asymmetric import ed25519, x25519

from marg._util import atomic_write_bytes
from marg.errors import InputError, RefusedError

from .key_roles import role_line

PathLike = Union[str, "os.PathLike[str]"]

SIGN_KEY_SUFFIX = ".sign.key"
SIGN_PUB_SUFFIX = ".sign.pub"
SEAL_KEY_SUFFIX = ".seal.key"
SEAL_PUB_SUFFIX = ".seal.pub"

_SITE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

_KIND_NAMES = {
    ed25519.Ed25519PrivateKey: "Ed25519 private (signing) key",
    ed25519.Ed25519PublicKey: "Ed25519 public (verify) key",
    x25519.X25519PrivateKey: "X25519 private (sealing) key",
    x25519.X25519PublicKey: "X25519 public (sealing) key",
}


def kind_name(key: object) -> str:
    """Human-readable kind of a key object, e.g. ``"Ed25519 public (verify) key"``."""
    for cls, name in _KIND_NAMES.items():
        if isinstance(key, cls):
            return name
    return f"{type(key).__name__} key"


def validate_site_name(site: str) -> str:
    """Return ``site`` if it is a valid site name, else raise :class:`InputError`.

    A site name is 1–128 characters from ``[A-Za-z0-9._-]``, starting with a letter or
    digit (it becomes part of file names and of signed headers).
    """
    if not isinstance(site, str) or not _SITE_RE.match(site) or site.endswith((".sign", ".seal")):
        raise InputError(f"invalid site name {site!r} (use letters, digits, '.', '_', '-'; start with a letter or "
                         "digit)")
    return site


# ---------------------------------------------------------------------------------------
# key ids
# ---------------------------------------------------------------------------------------
def public_bytes(key: object) -> bytes:
    """Raw 32 public bytes of an Ed25519/X25519 key (public or private).

    Parameters
    ----------
    key : Ed25519PrivateKey | Ed25519PublicKey | X25519PrivateKey | X25519PublicKey

    Returns
    -------
    bytes, length 32
    """
    from cryptography.hazmat.primitives import serialization  # not at import: an unsigned export needs none
    if isinstance(key, (ed25519.Ed25519PrivateKey, x25519.X25519PrivateKey)):
        key = key.public_key()
    if not isinstance(key, (ed25519.Ed25519PublicKey, x25519.X25519PublicKey)):
        raise InputError(f"expected an Ed25519 or X25519 key, got {type(key).__name__}")
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(key: object) -> str:
    """Key id (fingerprint): ``sha256(raw public bytes)`` as 64 lowercase hex characters.

    A private key has the id of its public key.
    """
    return hashlib.sha256(public_bytes(key)).hexdigest()


def short_id(kid: str | None) -> str:
    """First 16 hex characters of a key id, for display (``"-"`` for ``None``)."""
    return "-" if kid is None else str(kid)[:16]


# ---------------------------------------------------------------------------------------
# passphrases
# ---------------------------------------------------------------------------------------
def read_passphrase_file(path: PathLike) -> bytes:
    """Read a passphrase from a file: its bytes without one trailing newline.

    Raises :class:`InputError` if the file is missing or the passphrase is empty.
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read passphrase file {str(p)!r}: {exc.strerror or exc}") from None
    if data.endswith(b"\r\n"):
        data = data[:-2]
    elif data.endswith(b"\n"):
        data = data[:-1]
    if not data:
        raise InputError(f"passphrase file {str(p)!r} is empty")
    return data


# ---------------------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class KeyFiles:
    """Paths and ids of one generated key set.

    Attributes
    ----------
    site : str
    sign_key, sign_pub, seal_key, seal_pub : Path
    sign_id, seal_id : str
        Key ids (sha256 hex of the raw public bytes) of the signing and sealing pairs.
    encrypted : bool
        Whether the private keys are passphrase-encrypted.
    """

    site: str
    sign_key: Path
    sign_pub: Path
    seal_key: Path
    seal_pub: Path
    sign_id: str
    seal_id: str
    encrypted: bool


def key_paths(site: str, directory: PathLike) -> dict[str, Path]:
    """The four key file paths of ``site`` in ``directory`` (keys ``sign_key``, ...)."""
    d = Path(directory)
    return {
        "sign_key": d / f"{site}{SIGN_KEY_SUFFIX}",
        "sign_pub": d / f"{site}{SIGN_PUB_SUFFIX}",
        "seal_key": d / f"{site}{SEAL_KEY_SUFFIX}",
        "seal_pub": d / f"{site}{SEAL_PUB_SUFFIX}",
    }


def _private_pem(key: object, passphrase: bytes | None) -> bytes:
    from cryptography.hazmat.primitives import serialization  # not at import: an unsigned export needs none
    enc: serialization.KeySerializationEncryption
    enc = serialization.BestAvailableEncryption(passphrase) if passphrase else serialization.NoEncryption()
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc)  # type: ignore[attr-defined]


def _public_pem(key: object) -> bytes:
    from cryptography.hazmat.primitives import serialization  # not at import: an unsigned export needs none
    return key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)  # type: ignore[attr-defined]


def generate_keys(
    site: str,
    directory: PathLike = ".",
    passphrase: bytes | None = None,
    overwrite: bool = False,
    role: str = "site",
) -> KeyFiles:
    """Generate an Ed25519 signing pair and an X25519 sealing pair for ``site``.

    Writes ``DIR/SITE.sign.key|.sign.pub|.seal.key|.seal.pub`` (PEM). Private keys are
    PKCS8 with mode ``0600`` (owner read/write only), encrypted with ``passphrase`` if
    given (``BestAvailableEncryption``); public keys are SubjectPublicKeyInfo, mode
    ``0644``. Each file is written atomically (temp file + fsync + rename).

    Parameters
    ----------
    site : str
        Site (or learner) name; see :func:`validate_site_name`.
    directory : path, default "."
        Created (mode 0700) if missing.
    passphrase : bytes, optional
        Encrypts the private keys.
    overwrite : bool, default False
        Without it, existing key files of ``site`` are never replaced
        (:class:`RefusedError`).
    role : {"site", "learner"}
        Written as the first line of ``SITE.sign.pub`` (see the module docstring).

    Returns
    -------
    KeyFiles
    """
    validate_site_name(site)
    head = role_line(role)
    if passphrase is not None and not isinstance(passphrase, (bytes, bytearray)):
        raise InputError(f"passphrase must be bytes, got {type(passphrase).__name__}")
    d = Path(directory)
    if d.exists() and not d.is_dir():
        raise InputError(f"key directory {str(d)!r} exists and is not a directory")
    paths = key_paths(site, d)
    if not overwrite:
        for p in paths.values():
            if p.exists():
                raise RefusedError(f"key file {str(p)!r} already exists (refusing to overwrite a site key)")
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    sign = ed25519.Ed25519PrivateKey.generate()
    seal = x25519.X25519PrivateKey.generate()
    pw = bytes(passphrase) if passphrase else None
    # public keys first: a crash half-way never leaves a private key without its public one
    atomic_write_bytes(paths["sign_pub"], head + _public_pem(sign.public_key()), mode=0o644)
    atomic_write_bytes(paths["seal_pub"], _public_pem(seal.public_key()), mode=0o644)
    atomic_write_bytes(paths["sign_key"], _private_pem(sign, pw), mode=0o600)
    atomic_write_bytes(paths["seal_key"], _private_pem(seal, pw), mode=0o600)
    return KeyFiles(
        site=site,
        sign_key=paths["sign_key"],
        sign_pub=paths["sign_pub"],
        seal_key=paths["seal_key"],
        seal_pub=paths["seal_pub"],
        sign_id=key_id(sign),
        seal_id=key_id(seal),
        encrypted=pw is not None,
    )


# ---------------------------------------------------------------------------------------
# loading
# ---------------------------------------------------------------------------------------
def read_key_bytes(path: PathLike, what: str) -> tuple[Path, bytes]:
    """The path and bytes of the ``what`` file ``path``; InputError naming it if it cannot be read."""
    p = Path(path)
    try:
        return p, p.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{what} file {str(p)!r} not found") from None
    except IsADirectoryError:
        raise InputError(f"{what} file {str(p)!r} is a directory") from None
    except OSError as exc:
        raise InputError(f"cannot read {what} file {str(p)!r}: {exc.strerror or exc}") from None


def _load_private(path: PathLike, passphrase: bytes | None, cls: type, what: str) -> object:
    from cryptography.hazmat.primitives import serialization  # not at import: an unsigned export needs none
    p, data = read_key_bytes(path, what)
    if b"PUBLIC KEY-----" in data and b"PRIVATE KEY-----" not in data:
        raise InputError(f"{str(p)!r} holds a public key, expected a {what}")
    try:
        key = serialization.load_pem_private_key(data, password=bytes(passphrase) if passphrase else None)
    except TypeError as exc:
        if "not given" in str(exc):
            raise InputError(f"{what} {str(p)!r} is passphrase-encrypted; give its passphrase") from None
        if "not encrypted" in str(exc):
            raise InputError(f"{what} {str(p)!r} is not encrypted, but a passphrase was given") from None
        raise InputError(f"{str(p)!r} is not a readable {what}: {exc}") from None
    except ValueError as exc:
        if "password" in str(exc).lower() or "decrypt" in str(exc).lower():
            raise RefusedError(f"wrong passphrase for {what} {str(p)!r}") from None
        raise InputError(f"{str(p)!r} is not a PEM {what}") from None
    except Exception as exc:  # unsupported algorithm and other parser errors
        raise InputError(f"{str(p)!r} is not a usable {what}: {type(exc).__name__}") from None
    if not isinstance(key, cls):
        raise InputError(f"{str(p)!r} holds a {kind_name(key)}, expected a {what}")
    return key


def _load_public(path: PathLike, cls: type | tuple[type, ...], what: str, expected: str | None = None,
                 private: str | None = None) -> object:
    """The public key of class ``cls`` in the PEM file ``path``; InputError naming ``what`` (the
    words ``expected`` and ``private`` for a key of the wrong kind and for a private key)."""
    from cryptography.hazmat.primitives import serialization  # not at import: an unsigned export needs none
    p, data = read_key_bytes(path, what)
    if b"PRIVATE KEY-----" in data:
        raise InputError(f"{str(p)!r} holds a private key"
                         + (private or f", expected a {what} (never share private keys)"))
    try:
        key = serialization.load_pem_public_key(data)
    except Exception:
        raise InputError(f"{str(p)!r} is not a PEM {what}") from None
    if not isinstance(key, cls):
        raise InputError(f"{str(p)!r} holds a {kind_name(key)}, expected {expected or 'a ' + what}")
    return key


def load_signing_key(path: PathLike, passphrase: bytes | None = None) -> ed25519.Ed25519PrivateKey:
    """Load an Ed25519 private key (``*.sign.key``).

    Raises
    ------
    InputError
        Missing file, not a PEM key, a public or non-Ed25519 key, passphrase missing.
    RefusedError
        Wrong passphrase.
    """
    return _load_private(path, passphrase, ed25519.Ed25519PrivateKey, "Ed25519 signing key")  # type: ignore[return-value]


def load_verify_key(path: PathLike) -> ed25519.Ed25519PublicKey:
    """Load an Ed25519 public key (``*.sign.pub``); :class:`InputError` if it is not one."""
    return _load_public(path, ed25519.Ed25519PublicKey, "Ed25519 public (verify) key")  # type: ignore[return-value]


def load_seal_key(path: PathLike, passphrase: bytes | None = None) -> x25519.X25519PrivateKey:
    """Load an X25519 private key (``*.seal.key``), used to open sealed bundles.

    Raises as :func:`load_signing_key`.
    """
    return _load_private(path, passphrase, x25519.X25519PrivateKey, "X25519 sealing key")  # type: ignore[return-value]


def load_seal_public_key(path: PathLike) -> x25519.X25519PublicKey:
    """Load an X25519 public key (``*.seal.pub``), the recipient of sealed bundles."""
    return _load_public(path, x25519.X25519PublicKey, "X25519 public (sealing) key")  # type: ignore[return-value]


def load_any_public_key(path: PathLike) -> object:
    """Load a PEM public key of either kind (Ed25519 or X25519), for display."""
    return _load_public(path, (ed25519.Ed25519PublicKey, x25519.X25519PublicKey), "public key",
                        expected="an Ed25519 or X25519 public key", private="; show its .pub file instead")
