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
import sys
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
    cands = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
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
        r = subprocess.run([*runas, str(bindir / "pg_ctl"), "-D", str(data), "-o", opts, "-l", str(log), "-w", "-t",
                            "60", "start"],
                           capture_output=True, text=True, timeout=120)
        if r.returncode == 0:
            break
        said = log.read_text(errors="replace") if log.exists() else ""
        if "could not bind" not in said and "already in use" not in said:
            unavailable(f"pg_ctl failed: {(r.stderr or r.stdout).strip().splitlines()[-1:]}")
    else:
        unavailable("pg_ctl failed: no free port after 3 attempts "
                    f"({(r.stderr or r.stdout).strip().splitlines()[-1:]})")

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


def end_process(proc: subprocess.Popen) -> None:
    """Stop a server this module started (its own process, by its handle)."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


def local_spark():
    """A Spark session in local mode for the tests (generator: yields it, stops it after)."""
    pytest.importorskip("pyspark")
    if not java_available():
        unavailable("Spark local mode needs a Java runtime (java not found)")
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the executors' Python (read when the context starts)
    session = (SparkSession.builder.master("local[2]").appName("marg tests").config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false").config("spark.sql.shuffle.partitions", "4")
               .config("spark.pyspark.python", sys.executable).getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def local_postgres():
    """A throw-away PostgreSQL cluster for the tests (generator: yields the server, stops it after)."""
    pytest.importorskip("psycopg")
    server, stop = start_postgres()
    yield server
    stop()


# ----------------------------------------------------------------------------- SFTP (OpenSSH)
@dataclass
class SftpServer:
    """An OpenSSH server on 127.0.0.1 serving SFTP to one user with one key, its drop folder ``root``."""

    host: str
    port: int
    user: str
    key_file: str
    root: str
    home: str = ""  # a HOME whose ~/.ssh/known_hosts lists the server's host key (marg checks host keys as ssh does)

    def url(self, path: str = "") -> str:
        return f"sftp://{self.user}@{self.host}:{self.port}{self.root}/{path.lstrip('/')}"

    def env(self) -> dict[str, str]:
        """What a client needs to log in (fsspec reads FSSPEC_SFTP_* as the sftp file system's options)."""
        return {"FSSPEC_SFTP_KEY_FILENAME": self.key_file, **({"HOME": self.home} if self.home else {})}


def sshd_binary() -> str | None:
    return shutil.which("sshd") or next((p for p in ("/usr/sbin/sshd",) if Path(p).exists()), None)


SFTP_USER = "marg-sftp"


def sftp_user() -> str:
    """The non-root user the test SSH server runs as, and logs in, when the tests run as root: created
    once (a system user without home or shell). OpenSSH refuses accounts whose password is locked (``*``,
    ``!``, as every system user's is), so it gets a password field that is no hash: no password opens it."""
    try:
        pwd.getpwnam(SFTP_USER)
    except KeyError:
        r = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", SFTP_USER],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            unavailable(f"useradd {SFTP_USER} failed: {r.stderr.strip()[-200:]}")
    r = subprocess.run(["usermod", "-p", "no-password-opens-this", SFTP_USER], capture_output=True, text=True,
                       timeout=60)
    if r.returncode != 0:
        unavailable(f"usermod {SFTP_USER} failed: {r.stderr.strip()[-200:]}")
    return SFTP_USER


def start_sftp():
    """Start Debian's OpenSSH server (``openssh-server``; ``.ci/run`` installs it when missing) in a new
    folder under the system temp folder, as a non-root user (:func:`sftp_user` when the tests run as root):
    its own host key, one authorised client key, public-key login only, SFTP only (internal-sftp),
    listening on 127.0.0.1 on a free port. Returns (SftpServer, stop)."""
    sshd = sshd_binary()
    keygen = shutil.which("ssh-keygen")
    if sshd is None or keygen is None:
        unavailable("OpenSSH server not found (sshd, ssh-keygen: Debian's openssh-server)")
    root = os.geteuid() == 0
    user = sftp_user() if root else pwd.getpwuid(os.geteuid()).pw_name
    base = Path(tempfile.mkdtemp(prefix="marg-sftp-"))
    drop = base / "drop"
    drop.mkdir()
    for name in ("host", "client"):
        r = subprocess.run([keygen, "-q", "-t", "ed25519", "-N", "", "-f", str(base / name)], capture_output=True,
                           text=True, timeout=60)
        if r.returncode != 0:
            unavailable(f"ssh-keygen failed: {r.stderr.strip()[-200:]}")
    (base / "authorized_keys").write_text((base / "client.pub").read_text())
    if root:
        for p in (base, drop, base / "host", base / "host.pub", base / "authorized_keys"):
            shutil.chown(p, user)
    os.chmod(base, 0o755)
    os.chmod(base / "host", 0o600)
    runas = ["runuser", "-u", user, "--"] if root else []
    for attempt in range(3):
        port = free_port()
        cfg = base / "sshd_config"
        cfg.write_text("\n".join([
            f"Port {port}", "ListenAddress 127.0.0.1", f"HostKey {base / 'host'}", f"PidFile {base / 'sshd.pid'}",
            f"AuthorizedKeysFile {base / 'authorized_keys'}", "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PubkeyAuthentication yes", "UsePAM no", "StrictModes no", "Subsystem sftp internal-sftp",
            "ForceCommand internal-sftp", f"AllowUsers {user}", "LogLevel ERROR", ""]))
        proc = subprocess.Popen([*runas, sshd, "-D", "-e", "-f", str(cfg)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)

        def listening() -> bool:
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0

        if wait_until(lambda: listening() or proc.poll() is not None, 20) and proc.poll() is None:
            break
        said = proc.stderr.read() if proc.poll() is not None else ""
        proc.kill()
        if "Address already in use" not in said:
            shutil.rmtree(base, ignore_errors=True)
            unavailable(f"sshd did not start: {said.strip()[-300:]}")
    else:
        unavailable("sshd: no free port after 3 attempts")

    def stop() -> None:
        end_process(proc)
        shutil.rmtree(base, ignore_errors=True)

    home = base / "client-home"  # the client's known_hosts: the server's host key, as `ssh` would have recorded it
    (home / ".ssh").mkdir(parents=True)
    kind, key = (base / "host.pub").read_text().split()[:2]
    (home / ".ssh" / "known_hosts").write_text(f"[127.0.0.1]:{port} {kind} {key}\n")
    return SftpServer("127.0.0.1", port, user, str(base / "client"), str(drop), str(home)), stop


# ----------------------------------------------------------------------------- S3 (moto's server)
def start_s3():
    """moto's S3 server (PyPI ``moto[server]``, in the test extra) on 127.0.0.1 on a free port, a real HTTP
    endpoint speaking the S3 protocol. Returns (endpoint URL, env for clients, stop)."""
    import sys

    exe = Path(sys.executable).parent / "moto_server"
    if not exe.exists():
        unavailable("moto_server not found beside the interpreter (pip install 'moto[server]')")
    port = free_port()
    proc = subprocess.Popen([str(exe), "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)

    def listening() -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    if not wait_until(lambda: listening() or proc.poll() is not None, 30) or proc.poll() is not None:
        proc.kill()
        unavailable("moto_server did not start")
    endpoint = f"http://127.0.0.1:{port}"
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
           "FSSPEC_S3_ENDPOINT_URL": endpoint}

    return endpoint, env, lambda: end_process(proc)


def standalone_spark(workers: int = 2, tmp: Path | None = None):
    """A Spark standalone cluster on 127.0.0.1 for the tests: a master and ``workers`` workers (one core,
    512 MiB each) started from pyspark's own ``bin/spark-class``, and a session on it (generator: yields
    the session, stops it and the processes it started, by their handles, after)."""
    pytest.importorskip("pyspark")
    if not java_available():
        unavailable("a Spark standalone cluster needs a Java runtime (java not found)")
    import pyspark
    from pyspark.sql import SparkSession

    home = Path(pyspark.__file__).parent
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    work = Path(tempfile.mkdtemp(prefix="marg-spark-", dir=tmp))
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    cls = [str(home / "bin" / "spark-class")]
    procs = [subprocess.Popen(cls + ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port",
                                     str(port),
                                     "--webui-port", str(free_port())], env=env, stdout=subprocess.DEVNULL,
                              stderr=open(work / "master.log", "wb"))]
    session = None
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the executors' Python (read when the context starts)
    try:
        def listening() -> bool:
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0

        if not wait_until(listening, timeout=90):
            pytest.fail("the Spark master did not listen within 90 s: " + (work / "master.log").read_text()[-500:])
        for i in range(workers):
            procs.append(subprocess.Popen(
                cls + ["org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--cores", "1",
                       "--memory", "1g", "--webui-port", str(free_port()), "--work-dir", str(work / f"w{i}")],
                env=env, stdout=subprocess.DEVNULL, stderr=open(work / f"worker{i}.log", "wb")))
        session = (SparkSession.builder.master(url).appName("marg cluster tests").config("spark.ui.enabled", "false")
                   .config("spark.ui.showConsoleProgress", "false").config("spark.driver.host", "127.0.0.1")
                   .config("spark.driver.bindAddress", "127.0.0.1").config("spark.executor.memory", "512m")
                   .config("spark.executor.cores", "1").config("spark.pyspark.python", sys.executable).getOrCreate())
        session.sparkContext.setLogLevel("ERROR")
        jsc = session.sparkContext._jsc.sc()
        if not wait_until(lambda: jsc.getExecutorMemoryStatus().size() >= workers + 1, timeout=120):
            pytest.fail(f"{workers} Spark workers did not register within 120 s: "
                        + (work / "worker0.log").read_text()[-500:])
        yield session
    finally:
        if session is not None:
            session.stop()
        for p in reversed(procs):
            end_process(p)
        shutil.rmtree(work, ignore_errors=True)
