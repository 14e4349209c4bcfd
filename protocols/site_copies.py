"""The site's own copies of what it released: how a site reads a bundle it sealed to the learner.

A sealed bundle (:mod:`protocols.sealing`) opens only with the learner's X25519 key: the
ephemeral key that sealed it is gone. So that a site can still see exactly what it sent,
``marg export`` keeps the plain signed bundle beside the site's ledger::

    LEDGER/released/<bundle digest>.bundle     the signed bundle (mode 0600)

and the ledger entry records both digests: ``bundle`` (sha256 of the plain signed bundle)
and ``file_sha256`` (sha256 of the sealed file that left). :func:`open_own` finds the entry
whose ``file_sha256`` is the sealed file's, reads the copy and checks it against the entry's
``bundle`` digest, so what is shown is provably what was sealed (the seal was made from
those bytes) — or refuses in one line.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from marg._util import atomic_write_bytes
from marg.errors import InputError, RefusedError

COPIES_DIR = "released"


def copy_path(ledger_dir: str | Path, digest: str) -> Path:
    return Path(ledger_dir) / COPIES_DIR / f"{digest}.bundle"


def keep(ledger_dir: str | Path, bundle: Any) -> Path:
    """Write the plain signed ``bundle`` under the ledger folder (atomically, mode 0600)."""
    path = copy_path(ledger_dir, bundle.digest())
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    atomic_write_bytes(path, bundle.to_bytes(), mode=0o600)
    return path


def open_own(file_bytes: bytes, ledger_dir: str | Path, name: str = "bundle") -> tuple[Any, dict[str, Any]]:
    """The site's plain copy of the sealed file ``file_bytes``, and the ledger entry that recorded it.

    Raises
    ------
    InputError
        The ledger records no release with this file's digest (not this site's file, or
        another ledger), or the copy was not kept (``--no-keep-copy``) or deleted.
    RefusedError
        The copy's digest is not the one the ledger recorded (the copy was altered).
    """
    from .bundle import Bundle
    from .ledger import Ledger

    sha = hashlib.sha256(file_bytes).hexdigest()
    led = Ledger(ledger_dir)
    if not led.path.exists():
        raise InputError(f"{name} is sealed and there is no ledger at {ledger_dir} to find this site's copy in "
                         "(--ledger DIR)")
    entry = next((e for e in reversed(led.entries()) if e.get("file_sha256") == sha), None)
    if entry is None:
        raise InputError(f"{name} is sealed and ledger {ledger_dir} records no release of it (sha256 {sha[:16]}…): "
                         "not this site's file, or another ledger (--ledger DIR)")
    path = copy_path(ledger_dir, entry["bundle"])
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{name} is ledger entry #{entry['seq']}, but the site's copy {path} was not kept "
                         "(exported with --no-keep-copy) or was deleted") from None
    if hashlib.sha256(raw).hexdigest() != entry["bundle"]:
        raise RefusedError(f"the site's copy {path} does not match ledger entry #{entry['seq']}'s bundle digest "
                           f"{entry['bundle'][:16]}… (altered)")
    return Bundle.from_bytes(raw, source=str(path)), entry
