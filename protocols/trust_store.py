"""The learner's trust store: which signing keys it accepts, and whose they are.

A **trust store** (:class:`TrustStore`) is a directory of ``*.sign.pub`` files; the site name of
a key is the file name before ``.sign.pub``, its role the file's role line
(:mod:`protocols.key_roles`). The learner accepts a signed bundle only if its key id is in the
trust store and belongs to the site the bundle claims (:mod:`protocols.signing`).
"""

from __future__ import annotations

from pathlib import Path

from cryptography.hazmat.primitives.asymmetric import ed25519

from marg.errors import InputError

from .key_roles import read_role, role_line
from .keys import (SIGN_PUB_SUFFIX, PathLike, key_id, kind_name, load_verify_key, read_key_bytes, short_id,
                   validate_site_name)


class TrustStore:
    """The learner's trusted site keys: a directory of ``SITE.sign.pub`` files.

    Parameters
    ----------
    directory : path
        Every ``*.sign.pub`` file in it (not recursive) is loaded; other files are
        ignored. A ``*.sign.pub`` file that is not an Ed25519 public key is an
        :class:`InputError` (a broken trust store is never silently skipped).

    Attributes
    ----------
    directory : Path
    keys : dict[str, tuple[str, Ed25519PublicKey]]
        key id -> (site, public key).
    roles : dict[str, str or None]
        key id -> the role its file declares ("site", "learner"; None: no role line).
    """

    def __init__(self, directory: PathLike) -> None:
        d = Path(directory)
        if not d.is_dir():
            raise InputError(f"trust store {str(d)!r} is not a directory")
        self.directory = d
        self.keys: dict[str, tuple[str, ed25519.Ed25519PublicKey]] = {}
        self.roles: dict[str, str | None] = {}
        for f in sorted(d.glob(f"*{SIGN_PUB_SUFFIX}")):
            site = f.name[: -len(SIGN_PUB_SUFFIX)]
            key = load_verify_key(f)
            kid = key_id(key)
            self.roles[kid] = read_role(read_key_bytes(f, "public key")[1], str(f))
            if kid in self.keys and self.keys[kid][0] != site:
                raise InputError(
                    f"trust store {str(d)!r}: key {short_id(kid)} is listed for two sites, "
                    f"{self.keys[kid][0]!r} and {site!r}"
                )
            self.keys[kid] = (site, key)

    @classmethod
    def from_keys(cls, keys: dict[str, ed25519.Ed25519PublicKey], roles: dict[str, str] | None = None) -> "TrustStore":
        """An in-memory trust store from ``{site: public key}`` (for tests and APIs); ``roles``:
        ``{site: "site" | "learner"}`` (default none declared)."""
        self = cls.__new__(cls)
        self.directory = Path("<memory>")
        self.keys = {}
        self.roles = {}
        for site, key in keys.items():
            validate_site_name(site)
            if not isinstance(key, ed25519.Ed25519PublicKey):
                raise InputError(f"trust store key for site {site!r} is a {kind_name(key)}, expected Ed25519 public")
            self.keys[key_id(key)] = (site, key)
            role = (roles or {}).get(site)
            self.roles[key_id(key)] = None if role is None else read_role(role_line(role))
        return self

    def lookup(self, kid: str) -> tuple[str, ed25519.Ed25519PublicKey] | None:
        """``(site, key)`` for a key id, or ``None`` if the key is not trusted."""
        return self.keys.get(kid)

    def role(self, kid: str) -> str | None:
        """The role a trusted key's file declares (None: none, or not trusted)."""
        return self.roles.get(kid)

    def sites(self) -> dict[str, list[str]]:
        """site -> list of trusted key ids (a site may have rotated keys)."""
        out: dict[str, list[str]] = {}
        for kid, (site, _) in self.keys.items():
            out.setdefault(site, []).append(kid)
        return out

    def __len__(self) -> int:
        return len(self.keys)

    def __repr__(self) -> str:
        return f"TrustStore({str(self.directory)!r}, {len(self.keys)} keys)"
