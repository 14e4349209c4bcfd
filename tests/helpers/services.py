"""Services the source tests need, started by the tests themselves and stopped afterwards.

PostgreSQL: the Debian package's server binaries (``.ci/run`` installs ``postgresql`` when
they are missing) run a throw-away cluster in a temporary folder, as a non-root user
(``postgres`` when the tests run as root), listening on 127.0.0.1 on a free port and on a
socket in that folder, with password authentication. Spark: local mode needs a Java
runtime (``.ci/run`` installs ``default-jre-headless`` when ``java`` is missing).

A service that cannot be started FAILS the tests under CI (``CI=true``); elsewhere its
tests are skipped, and the skip reason says so.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def unavailable(reason: str) -> None:
    """Fail under CI, skip elsewhere."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true: the service must run; .ci/run installs it)", pytrace=False)
    pytest.skip(f"{reason} (skipped because CI is not set; under CI=true this fails)")


def pg_bindir() -> Path | None:
    cands = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    if cands:
        return Path(cands[-1]).parent
    exe = shutil.which("initdb")
    return Path(exe).parent if exe else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class PgServer:
    host: str
    port: int
    user: str
    password: str
    socket_dir: str

    def uri(self, database: str = "postgres", password: str | None = None, **params: str) -> str:
        from urllib.parse import quote, urlencode

        pw = self.password if password is None else password
        q = ("?" + urlencode(params)) if params else ""
        return f"postgresql://{self.user}:{quote(pw, safe='')}@{self.host}:{self.port}/{database}{q}"


def start_postgres():
    """Start a cluster in a new folder under the system temp folder (pytest's own folders
    are private to root, which the server's user could not enter); returns (PgServer, stop)."""
    bindir = pg_bindir()
    if bindir is None:
        unavailable("PostgreSQL server binaries (initdb, pg_ctl) not found")
    root = os.geteuid() == 0
    runas: list[str] = []
    if root:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            unavailable("running as root and there is no 'postgres' user to run the server as")
        runas = ["runuser", "-u", "postgres", "--"]
    base = Path(tempfile.mkdtemp(prefix="marg-pg-"))
    data = base / "data"
    pwfile = base / "pw"
    password = "marg-test-pw"
    pwfile.write_text(password + "\n")
    if root:
        shutil.chown(base, "postgres", "postgres")
        shutil.chown(pwfile, "postgres", "postgres")
    os.chmod(base, 0o700)
    user = "site_admin"

    def run(*cmd: str) -> None:
        r = subprocess.run([*runas, *cmd], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            unavailable(f"{Path(cmd[0]).name} failed: {(r.stderr or r.stdout).strip().splitlines()[-1:]}")

    run(str(bindir / "initdb"), "-D", str(data), "-U", user, "--pwfile", str(pwfile), "--auth", "scram-sha-256",
        "-E", "UTF8", "--no-instructions")
    # free_port() releases the port before the server binds it: another process on the machine (a
    # parallel test worker, another cluster) can take it in between. The server then fails to bind
    # and says so in its log; try another port (three times) instead of failing the run.
    for attempt in range(3):
        port = free_port()
        opts = f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={base} -c fsync=off"
        log = base / f"log{attempt}"
        r = subprocess.run([*runas, str(bindir / "pg_ctl"), "-D", str(data), "-o", opts, "-l", str(log), "-w", "-t", "60", "start"],
                           capture_output=True, text=True, timeout=120)
        if r.returncode == 0:
            break
        said = log.read_text(errors="replace") if log.exists() else ""
        if "could not bind" not in said and "already in use" not in said:
            unavailable(f"pg_ctl failed: {(r.stderr or r.stdout).strip().splitlines()[-1:]}")
    else:
        unavailable(f"pg_ctl failed: no free port after 3 attempts ({(r.stderr or r.stdout).strip().splitlines()[-1:]})")

    def stop() -> None:
        subprocess.run([*runas, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                       capture_output=True, timeout=120)
        shutil.rmtree(base, ignore_errors=True)

    return PgServer("127.0.0.1", port, user, password, str(base)), stop


def java_available() -> bool:
    if os.environ.get("JAVA_HOME") and Path(os.environ["JAVA_HOME"], "bin", "java").exists():
        return True
    return shutil.which("java") is not None


def wait_until(pred, timeout: float = 10.0) -> bool:
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.05)
    return False
