"""The study's drop box: an untrusted folder (local, ``sftp://``, ``s3://``, any fsspec URL) of signed or sealed files.

Every party of a study reads and writes its round files here (:mod:`marg.study_runner`); nothing
in it is trusted: each file is verified by its signature when read. Writes are whole files: a
local file through :func:`marg._util.atomic_write_bytes`, a remote one to a temporary name then
renamed (a reader never sees half a file). URLs go through fsspec (``pip install 'marg[remote]'``),
with the user's SSH keys or ``AWS_*`` variables, never credentials on the command line;
:func:`url_fs`, :func:`shown` and :func:`first_line` are also what ``marg``'s URL arguments use
(:mod:`marg.cli.remote`).
"""

from __future__ import annotations

import re
import secrets
from pathlib import Path
from typing import Any

from marg._util import atomic_write_bytes
from marg.errors import InputError

URL = re.compile(r"^([a-z][a-z0-9+.-]*)://")


def shown(url: str) -> str:
    """The URL without a password."""
    return re.sub(r"(://[^/@:]+):[^/@]*@", r"\1:***@", url)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def url_fs(url: str) -> tuple[Any, str]:
    """(fsspec filesystem, path) of ``url``; one-line InputError when fsspec or the protocol is missing."""
    try:
        import fsspec
    except ImportError:
        raise InputError(f"{shown(url)}: paths that are URLs need fsspec: pip install 'marg[remote]'") from None
    try:
        return fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as exc:
        raise InputError(f"{shown(url)}: {first_line(exc)} (pip install 'marg[remote]' for sftp://)") from None


class DropBox:
    """The drop box at ``location`` (a folder path or a URL); names inside are ``/``-separated."""

    def __init__(self, location: str) -> None:
        self.location = str(location)
        m = URL.match(self.location)
        if m is not None and m.group(1) != "file":
            try:
                self.fs, self.root = url_fs(self.location)
            except InputError:
                raise
            except Exception as exc:  # noqa: BLE001 - a server that does not answer, refused credentials
                raise InputError(f"drop box {shown(self.location)}: cannot reach it: {first_line(exc)}") from None
            self.root = self.root.rstrip("/")
            self.local: Path | None = None
        else:
            self.fs = None
            self.local = Path(self.location[len("file://"):] if m is not None else self.location)
            self.root = str(self.local)

    def __str__(self) -> str:
        return shown(self.location)

    def _path(self, name: str) -> str:
        return f"{self.root}/{name}"

    def _fail(self, what: str, name: str, exc: BaseException) -> InputError:
        return InputError(f"drop box {self}: cannot {what} {name}: {first_line(exc)}")

    def exists(self, name: str) -> bool:
        try:
            if self.local is not None:
                return (self.local / name).exists()
            return bool(self.fs.exists(self._path(name)))
        except OSError as exc:
            raise self._fail("reach", name, exc) from None

    def read(self, name: str) -> bytes | None:
        """The file's bytes, or None when it is not there."""
        try:
            if self.local is not None:
                return (self.local / name).read_bytes()
            with self.fs.open(self._path(name), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None
        except Exception as exc:  # noqa: BLE001 - any store's failure is one line naming the drop box
            raise self._fail("read", name, exc) from None

    def write(self, name: str, data: bytes) -> None:
        """Write a whole file (never half of one)."""
        try:
            if self.local is not None:
                p = self.local / name
                p.parent.mkdir(parents=True, exist_ok=True)
                atomic_write_bytes(p, data)
                return
            target = self._path(name)
            parent = target.rsplit("/", 1)[0]
            self.fs.makedirs(parent, exist_ok=True)
            tmp = f"{parent}/.tmp-{secrets.token_hex(6)}"
            with self.fs.open(tmp, "wb") as f:
                f.write(data)
            if self.fs.exists(target):
                self.fs.rm(target)
            self.fs.mv(tmp, target)
        except Exception as exc:  # noqa: BLE001
            raise self._fail("write", name, exc) from None

    def remove(self, name: str) -> None:
        try:
            if self.local is not None:
                (self.local / name).unlink(missing_ok=True)
            elif self.fs.exists(self._path(name)):
                self.fs.rm(self._path(name))
        except Exception as exc:  # noqa: BLE001
            raise self._fail("remove", name, exc) from None

    def check_writable(self) -> None:
        """Write and remove a probe file: a drop box that cannot be written is found before anything is spent."""
        if self.local is not None and not self.local.is_dir():
            raise InputError(f"drop box {self} is not a folder (create it first)")
        name = f".probe-{secrets.token_hex(6)}"
        self.write(name, b"marg\n")
        if self.read(name) != b"marg\n":
            raise InputError(f"drop box {self}: a file written there does not read back")
        self.remove(name)
