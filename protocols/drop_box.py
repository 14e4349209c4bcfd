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

import os
import re
import secrets
from pathlib import Path
from typing import Any

from marg._util import atomic_write_bytes
from marg.errors import InputError, RefusedError

URL = re.compile(r"^([a-z][a-z0-9+.-]*)://")


def url_fs(url: str) -> tuple[Any, str]:
    """(fsspec filesystem, path) of ``url``; SFTP host keys checked against ``known_hosts``
    (:func:`_known_hosts_policy`); every failure one line (InputError) naming host and user, never a password."""
    try:
        import fsspec
    except ImportError:
        raise InputError(f"{shown(url)}: paths that are URLs need fsspec: pip install 'marg[remote]'") from None
    import logging

    logging.getLogger("paramiko").addHandler(logging.NullHandler())  # its transport thread logs tracebacks to stderr
    extra = {"host_key_policy": _known_hosts_policy()} if url.split("://", 1)[0] in ("sftp", "ssh") else {}
    try:
        return fsspec.core.url_to_fs(url, **extra)
    except ImportError as exc:
        raise InputError(f"{shown(url)}: {first_line(exc)} (pip install 'marg[remote]' for sftp://)") from None
    except RefusedError:
        raise
    except Exception as exc:  # noqa: BLE001 - SSH and store failures (auth, no key, not SSH, DNS): one line, no password
        raise InputError(f"cannot connect to {where(url)}: {scrub(first_line(exc), url)}") from None


def scrub(text: str, url: str) -> str:
    """``text`` (a library's message) with the URL's password, if any, replaced by ``***``."""
    m = re.match(r"^[a-z][a-z0-9+.-]*://(.*)@", url)
    if m is not None and ":" in m.group(1):
        secret = m.group(1).split(":", 1)[1]
        if secret:
            text = text.replace(secret, "***")
    return text.replace(url, shown(url))


ACCEPT_NEW = {"on": False}  # --accept-new-host-key of the running command (set by marg.cli.remote)
STAGED: dict[str, str] = {}  # local copy -> the URL it was fetched from, password hidden (set by marg.cli.remote)


def source_name(path: Any) -> str:
    """What a file the running command read is called where it is recorded (a model's provenance, the
    learner's history): the URL it was fetched from, password hidden, when it was staged from one (the
    local copy is deleted when the command ends), else the path as given."""
    p = str(path)
    return STAGED.get(p, p)


def known_hosts_path() -> Path:
    """The user's ``~/.ssh/known_hosts`` (as ``ssh`` reads it)."""
    return Path(os.path.expanduser("~")) / ".ssh" / "known_hosts"


def _known_hosts_policy():
    """A paramiko host-key policy that checks the server's key against ``known_hosts`` as ``ssh`` does.

    fsspec's SFTP client loads no known hosts, so every key reaches this policy: a key listed for
    the host is accepted; a host listed with another key is refused (a man in the middle, or a
    re-installed server: check with its administrator); an unknown host is refused unless
    ``--accept-new-host-key``, which adds its key to ``known_hosts`` (ssh's ``accept-new``).
    """
    import base64
    import hashlib

    import paramiko

    class KnownHosts(paramiko.MissingHostKeyPolicy):
        def missing_host_key(self, client: Any, hostname: str, key: Any) -> None:
            path = known_hosts_path()
            known = paramiko.HostKeys()
            if path.exists():
                try:
                    known.load(str(path))
                except (OSError, UnicodeDecodeError, paramiko.SSHException):
                    raise paramiko.SSHException(f"cannot read {path}") from None
            fp = "SHA256:" + base64.b64encode(hashlib.sha256(key.asbytes()).digest()).decode().rstrip("=")
            entry = known.lookup(hostname)
            if entry is not None and key.get_name() in entry:
                if entry[key.get_name()] == key:
                    return
                raise paramiko.SSHException(f"host key of {hostname} ({fp}) differs from the one in {path}: refused "
                                            "(a man in the middle, or a re-installed server: ask its administrator)")
            if entry is not None and not ACCEPT_NEW["on"]:
                raise paramiko.SSHException(f"host {hostname} presents a {key.get_name()} key ({fp}) that {path} does "
                                            "not list for it: refused")
            if not ACCEPT_NEW["on"]:
                raise paramiko.SSHException(f"unknown host key of {hostname} ({fp}): refused; confirm the fingerprint "
                                            f"with the drop's administrator and add it to {path} (ssh to it once), or "
                                            "pass --accept-new-host-key")
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            with open(path, "a", encoding="ascii") as f:
                f.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
            import sys

            sys.stderr.write(f"marg: note: added the host key of {hostname} ({fp}) to {path}\n")

    return KnownHosts()


def where(url: str) -> str:
    """``host (user U)`` of a URL for messages — never a password."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        host, user, port = parts.hostname, parts.username, parts.port
    except ValueError:
        return shown(url)
    if not host:
        return shown(url)
    return (f"{parts.scheme}://{host}{f':{port}' if port else ''} (user {user!r})" if user
            else f"{parts.scheme}://{host}")


def shown(url: str) -> str:
    """The URL without a password, also when it does not parse (everything between ``user:`` and the last
    ``@`` is hidden: a password may hold ``/``, ``@`` or ``:``)."""
    m = re.match(r"^([a-z][a-z0-9+.-]*://)(.*)@", url)
    if m is None or ":" not in m.group(2):
        return url
    return m.group(1) + m.group(2).split(":", 1)[0] + ":***@" + url[m.end():]


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class DropBox:
    """The drop box at ``location`` (a folder path or a URL); names inside are ``/``-separated."""

    def __init__(self, location: str) -> None:
        self.location = str(location)
        m = URL.match(self.location)
        if m is not None and m.group(1) != "file":
            try:
                self.fs, self.root = url_fs(self.location)
            except InputError as exc:  # fsspec missing, SSH or store failures: named as the drop box
                raise InputError(f"drop box: {exc}") from None
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
