"""The site's configuration: who the site is, its pinned signing key, where its ledger lives.

The one owner of the configuration's defaults: the folder (:func:`site_home`), the ledger a
command uses when none is named (:func:`site_ledger`), the signing key a learner uses when
none is named (:func:`default_signing_key`).

One file, ``HOME/site.json``, where ``HOME`` is ``$MARG_HOME`` or else
``$XDG_CONFIG_HOME/marg`` (default ``~/.config/marg``) — a place of the site's own, not the
working directory. ``marg audit init`` writes it::

    format, version   "marg-site", 1
    site              the site's name
    key_id            sha256 hex of the site's Ed25519 public key (the pinned key)
    public_key        that key, base64 of its raw 32 bytes
    sign_key          absolute path of the private key file (SITE.sign.key)
    ledger            absolute path of the ledger folder
    head              {n, size, hash} of the ledger's last checkpoint seen, or null
    signature         base64 Ed25519 signature by the pinned key over the rest

Once it exists, every export of the site goes to *that* ledger and is signed by *that*
key: another ``--ledger`` folder, another signing key or ``--no-ledger`` is refused
(:func:`resolve_export_ledger`). The recorded ``head`` lets the ledger detect being rolled
back to an earlier state, deleted or replaced (the ledger folder and this file live apart).
The file is signed, so editing it (another ledger, a reset head) without the key is caught.

Limits (see the README's threat model): whoever holds the site key can write anything;
deleting both this file and the ledger starts afresh; pointing ``MARG_HOME`` elsewhere is a
configuration change that the privacy officer must catch by comparing the ledger head they
recorded (``marg audit show``) with ``marg audit verify --head``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ed25519

from marg._util import atomic_write_bytes, canonical_json
from marg.errors import InputError, RefusedError

from .keys import SIGN_KEY_SUFFIX, key_id, public_bytes, short_id, validate_site_name
from .signing import b64, document_signed_by, sign_document, unb64

CONFIG_FILE = "site.json"
CONFIG_FORMAT = "marg-site"
DEFAULT_LEDGER = "ledger"  # a configured site's ledger folder, under HOME (marg audit init)
DEFAULT_LEDGER_DIR = "marg-ledger"  # an unconfigured site's ledger folder, in the working directory
KEYS_DIR = "keys"  # under HOME: the learner's default key pairs


def site_home(home: str | os.PathLike[str] | None = None) -> Path:
    """The configuration folder: ``home``, else ``$MARG_HOME``, else ``$XDG_CONFIG_HOME/marg``
    (``~/.config/marg``)."""
    if home is not None:
        return Path(home)
    env = os.environ.get("MARG_HOME")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CONFIG_HOME")
    return (Path(xdg) if xdg else Path.home() / ".config") / "marg"


def default_signing_key(home: str | os.PathLike[str] | None = None) -> Path | None:
    """The signing key used when none is named: ``$MARG_SIGN_KEY``, else the one
    ``*.sign.key`` in ``HOME/keys`` (``marg keys init --site NAME --dir $MARG_HOME/keys``),
    else None. Two or more keys there, or ``$MARG_SIGN_KEY`` naming no file: InputError.
    """
    env = os.environ.get("MARG_SIGN_KEY")
    if env:
        p = Path(env)
        if not p.is_file():
            raise InputError(f"$MARG_SIGN_KEY names no key file: {p}")
        return p
    d = site_home(home) / KEYS_DIR
    found = sorted(d.glob("*" + SIGN_KEY_SUFFIX)) if d.is_dir() else []
    if len(found) > 1:
        raise InputError(f"{d} holds {len(found)} signing keys ({', '.join(p.name for p in found)}): name one with "
                         "--sign-key")
    return found[0] if found else None


@dataclass(frozen=True)
class SiteConfig:
    """A site's configuration (see the module docstring).

    Attributes
    ----------
    home : Path
    site : str
    public_key : Ed25519PublicKey
        The pinned key: ledger entries, checkpoints and this file are signed by it.
    sign_key : Path
    ledger : Path
    head : dict or None
        ``{"n", "size", "hash"}`` of the last ledger checkpoint this site saw.
    """

    home: Path
    site: str
    public_key: ed25519.Ed25519PublicKey
    sign_key: Path
    ledger: Path
    head: dict[str, Any] | None = None

    @property
    def key_id(self) -> str:
        return key_id(self.public_key)

    @property
    def path(self) -> Path:
        return self.home / CONFIG_FILE

    def _body(self) -> dict[str, Any]:
        return {"format": CONFIG_FORMAT, "version": 1, "site": self.site,
                "public_key": b64(public_bytes(self.public_key)),
                "sign_key": str(self.sign_key), "ledger": str(self.ledger), "head": self.head}

    def save(self, private_key: ed25519.Ed25519PrivateKey, sync_dir: bool = True) -> None:
        """Sign with the pinned key and write atomically (``sync_dir``: see :func:`marg._util.atomic_write_bytes`)."""
        if key_id(private_key) != self.key_id:
            raise RefusedError(f"site configuration {self.path}: signing key {short_id(key_id(private_key))} is not "
                               f"the site's pinned key {short_id(self.key_id)}")
        self.home.mkdir(parents=True, exist_ok=True, mode=0o700)
        atomic_write_bytes(self.path, canonical_json(sign_document(self._body(), private_key)) + b"\n", mode=0o600,
                           sync_dir=sync_dir)

    def with_head(self, n: int, size: int, head: str) -> "SiteConfig":
        return replace(self, head={"n": int(n), "size": int(size), "hash": str(head)})

    def owns(self, ledger_dir: str | os.PathLike[str]) -> bool:
        """Whether ``ledger_dir`` is this site's configured ledger folder."""
        return _resolved(ledger_dir) == self.ledger

    @classmethod
    def load(cls, home: str | os.PathLike[str] | None = None) -> "SiteConfig | None":
        """The site's configuration, or None if the site has none.

        Raises
        ------
        RefusedError
            The file exists but is malformed, or its signature does not verify (edited).
        """
        h = site_home(home)
        path = h / CONFIG_FILE
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise InputError(f"cannot read site configuration {path}: {exc.strerror or exc}") from None
        try:
            d = json.loads(data.decode("utf-8"))
            if not isinstance(d, dict) or d.get("format") != CONFIG_FORMAT or d.get("version") != 1:
                raise ValueError
            raw = unb64(d["public_key"], 32)
            if raw is None:
                raise ValueError
            pub = ed25519.Ed25519PublicKey.from_public_bytes(raw)
            head = d["head"]
            if head is not None and not (isinstance(head, dict) and isinstance(head.get("n"), int)
                                         and isinstance(head.get("size"), int) and isinstance(head.get("hash"), str)):
                raise ValueError
            cfg = cls(home=h, site=validate_site_name(d["site"]), public_key=pub, sign_key=Path(d["sign_key"]),
                      ledger=Path(d["ledger"]), head=head)
        except (ValueError, UnicodeDecodeError, KeyError, TypeError, RecursionError, InputError):
            raise RefusedError(f"site configuration {path} is malformed (edited or corrupted)") from None
        if not document_signed_by(d, pub):
            raise RefusedError(f"site configuration {path}: bad signature (edited without the site key)")
        return cfg


def site_ledger(ledger: str | os.PathLike[str] | None = None,
                home: str | os.PathLike[str] | None = None) -> tuple[Path, "SiteConfig | None"]:
    """The ledger folder a command uses, and the site's configuration (None if unconfigured).

    The folder is ``ledger`` if given, else the configured site's, else ``./marg-ledger``
    (:data:`DEFAULT_LEDGER_DIR`): the one place these defaults are decided (``marg export``,
    ``marg inspect``, ``marg audit``).
    """
    cfg = SiteConfig.load(home)
    if ledger is None:
        return (cfg.ledger if cfg is not None else Path(DEFAULT_LEDGER_DIR)), cfg
    return Path(ledger), cfg


def _resolved(p: str | os.PathLike[str]) -> Path:
    return Path(os.path.abspath(os.path.expanduser(os.fspath(p))))


def init_site(
    site: str,
    sign_key_path: str | os.PathLike[str],
    private_key: ed25519.Ed25519PrivateKey,
    ledger_dir: str | os.PathLike[str] | None = None,
    home: str | os.PathLike[str] | None = None,
) -> SiteConfig:
    """Create the site's configuration (or return it unchanged if it already says the same).

    Parameters
    ----------
    site : the site's name
    sign_key_path : the site's ``SITE.sign.key`` (its path is recorded, the key pinned)
    private_key : that key, loaded
    ledger_dir : the ledger folder; default ``HOME/ledger``
    home : the configuration folder (default :func:`site_home`)

    Raises
    ------
    RefusedError
        A configuration already exists with another site, key or ledger (it is never
        silently replaced: that would reset the budget).
    """
    validate_site_name(site)
    h = site_home(home)
    kp = _resolved(sign_key_path)
    if not kp.name.endswith(SIGN_KEY_SUFFIX):
        raise InputError(f"--key must be the site's NAME{SIGN_KEY_SUFFIX} file, got {kp.name!r}")
    led = _resolved(ledger_dir) if ledger_dir is not None else _resolved(h / DEFAULT_LEDGER)
    old = SiteConfig.load(h)
    if old is not None:
        for what, a, b in (("site", old.site, site), ("key", old.key_id, key_id(private_key)),
                           ("ledger", str(old.ledger), str(led))):
            if a != b:
                shown = (short_id(a), short_id(b)) if what == "key" else (a, b)
                raise RefusedError(f"site configuration {old.path} already names {what} {shown[0]!r}, not {shown[1]!r} "
                                   "(a site is configured once; replacing it would reset its ledger)")
        return old
    cfg = SiteConfig(home=h, site=site, public_key=private_key.public_key(), sign_key=kp, ledger=led)
    cfg.save(private_key)
    return cfg


def resolve_export_ledger(
    ledger_dir: str | os.PathLike[str] | None,
    site: str,
    signing_key: ed25519.Ed25519PrivateKey | None,
    home: str | os.PathLike[str] | None = None,
) -> tuple[Path | None, SiteConfig | None]:
    """Decide where an export is recorded, refusing every way around the site's ledger.

    Parameters
    ----------
    ledger_dir : the ledger folder asked for, or None for no ledger (``--no-ledger``)
    site : the exporting site's name
    signing_key : the key the export signs with
    home : the configuration folder

    Returns
    -------
    (ledger folder or None, the site configuration or None)

    Raises
    ------
    RefusedError
        The site is configured and the export names another site, another ledger, another
        signing key (or none), or no ledger.
    """
    cfg = SiteConfig.load(home)
    if cfg is None:
        return (Path(ledger_dir) if ledger_dir is not None else None), None
    if site != cfg.site:
        raise RefusedError(f"this machine is configured as site {cfg.site!r} ({cfg.path}), not {site!r}")
    if ledger_dir is None:
        raise RefusedError(f"--no-ledger refused: site {cfg.site!r} records every export in its ledger {cfg.ledger}")
    if not cfg.owns(ledger_dir):
        raise RefusedError(f"ledger {ledger_dir} is not site {cfg.site!r}'s configured ledger {cfg.ledger} "
                           f"({cfg.path})")
    if signing_key is None:
        raise RefusedError(f"site {cfg.site!r} signs every export: give its key (--key {cfg.sign_key})")
    if key_id(signing_key) != cfg.key_id:
        raise RefusedError(f"signing key {short_id(key_id(signing_key))} is not site {cfg.site!r}'s pinned key "
                           f"{short_id(cfg.key_id)}")
    return cfg.ledger, cfg
