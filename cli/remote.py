"""Paths that are URLs: an SFTP drop or an object-store bucket, read and written through fsspec.

Every file or folder a command reads (data, codebooks, bundles, models, trust stores, round and
request files) and every file it writes (``--out``, ``--html``) may be an fsspec URL —
``sftp://user@host[:port]/path``, ``s3://bucket/key``, ``file:///abs/path`` (any protocol fsspec
knows: ``gs://``, ``az://``, …) — when the optional extra ``marg[remote]`` (fsspec, paramiko) is
installed. Sealed, signed bundles make an untrusted store safe: what is read is verified as a
local file would be. The command works on local copies in a private temporary folder: inputs are
fetched before it starts; outputs are uploaded after it succeeded (to a temporary name, then
renamed over the target), never after a refusal, and an existing remote ``--out`` is fetched
first so the command's own overwrite rule applies to it. **The ledger stays local**: ``--ledger``
and ``--history`` refuse a URL, as do folders a command writes into (``keys init --dir``, ``keys trust --trust``). A
failed upload keeps the local file and names it. **Trust stays local** (issue 45): trust stores, members and rosters
(``--trust``, ``--members``, ``--roster``) and key files (``--key``, ``--sign-key``, ``--seal-key``, ``--to``, a key
argument, passphrase files) refuse a URL: the store is untrusted, and a key read from it would make
whatever it holds trusted. Copy the keys in once. A codebook read from a URL (``--schema URL``) is
accepted only with ``--schema-fingerprint FP`` given on the command line (the fingerprint the
coordinator read out, ``marg inspect codebook.json``), and refused when the file's fingerprint
differs; every command that takes ``--schema`` takes ``--schema-fingerprint`` (it checks a local
codebook too).

Credentials never go on the command line: SFTP uses the user's SSH keys and known hosts as
``ssh`` does (or ``FSSPEC_SFTP_KEY_FILENAME=…``), S3 the usual ``AWS_*`` variables (an endpoint
of your own: ``AWS_ENDPOINT_URL`` or ``FSSPEC_S3_ENDPOINT_URL``); fsspec reads
``FSSPEC_<PROTOCOL>_<OPTION>`` variables for any other option.
"""

import os
import re
import shutil
import tempfile
from pathlib import Path, PurePath
from typing import Any

from marg.errors import InputError, RefusedError
from marg.protocols.drop_box import ACCEPT_NEW as _ACCEPT_NEW, STAGED as _STAGED, first_line as _first, \
    known_hosts_path, scrub as _scrub, shown as _shown, url_fs as _fs, where as _where  # noqa: F401  (the one URL layer: protocols.drop_box)

URL = re.compile(r"^([a-z][a-z0-9+.-]*)://")
_MANGLED = re.compile(r"^([a-z][a-z0-9+.-]*):/(?!/)")  # a URL through pathlib.Path: sftp://h/p -> sftp:/h/p
# sources a database or Spark opens itself
NOT_FILES = ("duckdb", "postgresql", "postgres", "omop+duckdb", "omop+postgresql", "omop+postgres", "s3a", "hdfs",
             "jdbc")
LOCAL_ONLY = ("ledger", "history", "workdir", "directory")  # the site's ledger and the learner's record stay here
# what decides whom to trust stays here too: a store could swap a key (issue 45)
TRUST_ONLY = ("trust", "members", "roster", "key", "sign_key", "seal_key", "to", "key_file", "passphrase_file",
              "sign_passphrase_file")
SCHEMA, SCHEMA_FINGERPRINT = "schema", "schema_fingerprint"
WRITTEN_FOLDERS = {"keys.trust_cmd": ("trust",)}  # a folder a command adds files to: local (a copy would be lost)
OUTPUTS = ("out", "html")


def as_url(value: Any) -> str | None:
    """The URL ``value`` holds (a string, or a Path that collapsed its ``//``), or None for a local path."""
    if not isinstance(value, (str, PurePath)):
        return None
    text = str(value)
    if isinstance(value, PurePath):
        text = _MANGLED.sub(r"\1://", text)
        if text.startswith("file://") and not text.startswith("file:///"):
            text = "file:///" + text[len("file://"):]
    m = URL.match(text)
    if m is None or m.group(1) in NOT_FILES:
        return None
    return text


NOT_STAGED = ("drop",)  # a study's drop box: read and written by the study runner itself (protocols.drop_box)
ACCEPT_NEW_HOST_KEY = "accept_new_host_key"
REMOTE_PANEL = "Paths that are URLs (sftp://, s3://)"


def _probe(fs: Any, path: str) -> None:
    """Write and remove a small file beside ``path``: a missing bucket or a folder this account cannot write
    fails here, before the command counts or charges anything."""
    probe = f"{path}.marg-probe-{os.getpid()}"
    fs.pipe_file(probe, b"marg: can this be written?\n")
    fs.rm(probe)


class Staging:
    """Local copies of a command's URL arguments (module docstring); :meth:`finish` uploads the outputs."""

    def __init__(self) -> None:
        self.dir: Path | None = None
        self.uploads: list[tuple[Path, str]] = []
        self.staged: list[tuple[Path, str]] = []
        self.parked: tuple[str, Path] | None = None  # (URL, local copy) of an upload that failed

    def names(self) -> list[tuple[str, str]]:
        """(local copy, URL as shown) of everything staged, for messages."""
        return [(str(local), _shown(url)) for local, url in self.staged]

    def _local(self, url: str) -> Path:
        if self.dir is None:
            self.dir = Path(tempfile.mkdtemp(prefix="marg-remote-"))
        name = url.rstrip("/").rsplit("/", 1)[-1] or "root"
        k = 0
        while (self.dir / f"{k}" / name).exists():
            k += 1
        (self.dir / f"{k}").mkdir(parents=True, exist_ok=True)
        return self.dir / f"{k}" / name

    def fetch(self, url: str) -> Path:
        """A local copy of the file or folder at ``url`` (InputError naming it when it cannot be read)."""
        return self._stage(url, output=False)

    def output(self, url: str) -> Path:
        """A local path the command writes in place of ``url``; an existing remote file is fetched first."""
        return self._stage(url, output=True)

    def _stage(self, url: str, output: bool) -> Path:
        if url.startswith("file://"):
            return Path(url[len("file://"):])
        fs, path = _fs(url)
        local = self._local(url)
        try:
            if output:
                if fs.exists(path):  # the command's own overwrite rule then applies to it
                    fs.get(path, str(local))
                _probe(fs, path)  # the bucket exists and the folder is writable, before anything is spent
            elif fs.isdir(path):
                fs.get(path.rstrip("/") + "/", str(local), recursive=True)
            else:
                fs.get(path, str(local))
        except FileNotFoundError:
            raise InputError(f"not found: {_shown(url)}") from None
        except Exception as exc:  # noqa: BLE001 - any store's failure is one line naming the URL
            raise InputError(f"cannot {'reach' if output else 'read'} {_shown(url)}: "
                             f"{_scrub(_first(exc), url)}") from None
        if output:
            self.uploads.append((local, url))
        self.staged.append((local, url))
        return local

    def finish(self) -> None:
        """Upload every output the command wrote (to a temporary name, then renamed over the target)."""
        for local, url in self.uploads:
            if not local.exists():
                continue
            fs, path = _fs(url)
            part = f"{path}.part-{os.getpid()}"
            try:
                fs.put(str(local), part)
                if fs.exists(path):
                    fs.rm(path)
                fs.mv(part, path)
            except Exception as exc:  # noqa: BLE001
                keep = Path(tempfile.mkdtemp(prefix="marg-unsent-")) / local.name
                shutil.copy2(local, keep)
                self.parked = (url, keep)
                raise RefusedError(f"could not upload {_shown(url)} ({_scrub(_first(exc), url)}); the file is kept at "
                                   f"{keep}: copy it there yourself") from None

    def close(self) -> None:
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)


def stage_arguments(kwargs: dict[str, Any], staging: Staging, local_only: tuple[str, ...] = ()) -> dict[str, Any]:
    """``kwargs`` with every URL replaced by its local copy (inputs) or local stand-in (outputs);
    a URL for a parameter in :data:`LOCAL_ONLY` or ``local_only`` is refused in one line."""
    spark = kwargs.get("engine") == "spark"
    out = dict(kwargs)
    for name, value in kwargs.items():
        if (name == "data" and spark) or name in NOT_STAGED:
            continue  # Spark reads its own file systems; the drop box is the study runner's
        many = isinstance(value, (list, tuple))
        items = list(value) if many else [value]
        urls = [as_url(v) for v in items]
        if not any(urls):
            continue
        if name in TRUST_ONLY:
            raise InputError(f"--{name.replace('_', '-')} {_shown(next(u for u in urls if u))}: keys and trust stores "
                             "are never read from a URL (a store could swap a key): copy the keys in once, confirm "
                             "their ids (marg keys show), and give the local file or folder")
        if name in LOCAL_ONLY or name in local_only:
            raise InputError(f"--{name.replace('_', '-')} {_shown(next(u for u in urls if u))}: give a local folder "
                             "(ledgers, the learner's history, key and trust folders stay on this machine); bundles, "
                             "models and data may be URLs")
        staged = []
        for v, u in zip(items, urls):
            if u is None:
                staged.append(v)
                continue
            local = staging.output(u) if name in OUTPUTS else staging.fetch(u)
            staged.append(str(local) if isinstance(v, str) else local)
        out[name] = type(value)(staged) if many else staged[0]
    return out


class _Named:
    """A text stream that writes each staged local path as the URL it stands for (messages name what
    the user gave: ``wrote sftp://…/north.bundle``, not the private temporary copy)."""

    def __init__(self, inner: Any, names: list[tuple[str, str]]):
        self._inner, self._names = inner, names

    def write(self, text: str) -> int:
        if isinstance(text, str):
            for local, url in self._names:
                text = text.replace(local, url)
        return self._inner.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _check_schema(path: Any, fingerprint: str | None, shown: str) -> None:
    """Refuse the codebook at ``path`` unless its fingerprint starts with ``fingerprint`` (None: no check)."""
    if fingerprint is None or path is None:
        return
    fp = fingerprint.strip().lower()
    if not re.fullmatch(r"[0-9a-f]{32,64}", fp):
        raise InputError(f"--schema-fingerprint {fingerprint!r}: give at least 32 hex characters of the codebook's "
                         "fingerprint (marg inspect CODEBOOK --json)")
    from marg.marginals.data.codebook import Codebook

    got = Codebook.load(Path(path)).fingerprint
    if not got.startswith(fp):
        raise RefusedError(f"codebook {shown} refused: its fingerprint is {got[:16]}…, not the {fp[:16]}… given with "
                           "--schema-fingerprint (a codebook changed in the store?)")


def _with_options(fn, wrapper, pins_schema: bool) -> None:
    """Give ``wrapper`` the options every staged command takes (``--accept-new-host-key``) and, for a command
    taking ``--schema``, ``--schema-fingerprint``, seen by Typer."""
    import inspect
    from typing import Annotated, Optional

    import typer

    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    if pins_schema:
        params.append(inspect.Parameter(
            SCHEMA_FINGERPRINT, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[
                Optional[str], typer.Option("--schema-fingerprint", help="The codebook's fingerprint as given to you "
                                            "(at least 32 hex characters): required when --schema is a URL, checked "
                                            "when given.")]))
    params.append(inspect.Parameter(
        ACCEPT_NEW_HOST_KEY, inspect.Parameter.KEYWORD_ONLY, default=False, annotation=Annotated[
            bool, typer.Option("--accept-new-host-key",
                               help="sftp:// paths: accept a host not yet in ~/.ssh/known_hosts and add its key "
                               "(refused otherwise; a host listed with another key is always refused).",
                               rich_help_panel=REMOTE_PANEL)]))
    wrapper.__signature__ = sig.replace(parameters=params)


def staged(fn):
    """``fn`` (a command) with its URL arguments staged (module docstring): fetched before it runs,
    its outputs uploaded after it succeeded, each upload said on stderr; its messages name the URLs.
    A command taking ``--schema`` also takes ``--schema-fingerprint`` (required for a codebook URL)."""
    import functools
    import inspect
    import sys

    from marg.errors import MargError

    pins_schema = SCHEMA in inspect.signature(fn).parameters

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _ACCEPT_NEW["on"] = bool(kwargs.pop(ACCEPT_NEW_HOST_KEY, False))
        fingerprint = kwargs.pop(SCHEMA_FINGERPRINT, None) if pins_schema else None
        schema_url = as_url(kwargs.get(SCHEMA)) if pins_schema else None
        if schema_url is not None and not schema_url.startswith("file://") and fingerprint is None:
            raise InputError(f"--schema {_shown(schema_url)}: a codebook read from a URL needs its fingerprint given "
                             "here (--schema-fingerprint FP, as the study's coordinator read it out), or a local copy")
        if not any(as_url(v) for value in kwargs.values()
                   for v in (value if isinstance(value, (list, tuple)) else [value])):
            if pins_schema:
                _check_schema(kwargs.get(SCHEMA), fingerprint, str(kwargs.get(SCHEMA)))
            return fn(*args, **kwargs)
        staging = Staging()
        out, errs = sys.stdout, sys.stderr
        try:
            command = f"{fn.__module__.rsplit('.', 1)[-1]}.{fn.__name__}"
            local_kwargs = stage_arguments(kwargs, staging, WRITTEN_FOLDERS.get(command, ()))
            if pins_schema:
                _check_schema(local_kwargs.get(SCHEMA), fingerprint, _shown(schema_url or str(kwargs.get(SCHEMA))))
            names = sorted(staging.names(), key=lambda p: -len(p[0]))
            _STAGED.clear()
            _STAGED.update(dict(names))  # records (a model's provenance) name the URL, not the deleted copy
            import io

            said = io.StringIO()  # stdout waits for the uploads: a failed one is said there too
            sys.stdout, sys.stderr = _Named(said if staging.uploads else out, names), _Named(errs, names)
            try:
                rv = fn(*args, **local_kwargs)
            except MargError as exc:
                exc.args = tuple(_rename(a, names) for a in exc.args)
                out.write(said.getvalue())
                raise
            finally:
                sys.stdout, sys.stderr = out, errs
            if rv not in (None, 0):
                out.write(said.getvalue())
                return rv
            try:
                staging.finish()
            except MargError:
                out.write(_not_written(said.getvalue(), staging.parked))
                raise
            out.write(said.getvalue())
            from .common import err

            for _, url in staging.uploads:
                err(f"uploaded {_shown(url)}")
            return rv
        finally:
            _STAGED.clear()
            staging.close()

    _with_options(fn, wrapper, pins_schema)
    return wrapper


def _not_written(text: str, parked: tuple[str, Path] | None) -> str:
    """The command's stdout when an upload failed: ``--json`` gains ``"written": false`` and the parked
    file's path; text says the file was not written and where it is kept."""
    import json

    url, keep = parked if parked is not None else ("", None)
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if isinstance(doc, dict):
        doc.update({"written": False, "parked": str(keep) if keep else None})
        return json.dumps(doc) + "\n"
    shown = _shown(url)
    return text.replace(f"wrote {shown}", f"NOT written: {shown}") + (
        f"not written: {shown} could not be uploaded; the file is kept at {keep}\n" if keep else "")


def _rename(arg: Any, names: list[tuple[str, str]]) -> Any:
    if not isinstance(arg, str):
        return arg
    for local, url in names:
        arg = arg.replace(local, url)
    return arg
