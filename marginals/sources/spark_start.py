"""Starting the SparkContext of ``--engine spark``: its JVMs' options (a class-data-sharing archive, the
client compiler) and its executors' Python workers started at once.

Measured on the tests' 2-worker cluster (BENCHMARKS.md, issue 48, spark fifth session), most of a short
Spark command's time is the JVMs' start: loading, verifying and compiling some ten thousand classes
(the driver's SparkSession alone runs Scala reflection at its start). Two JVM features cut that work
without changing what Spark computes:

- a dynamic class-data-sharing (AppCDS) archive: the first run's driver JVM writes the classes it
  loaded at its exit (``-XX:ArchiveClassesAtExit``, JDK 13+) to a file under the user's cache
  (``$MARG_CACHE_DIR``, else ``$XDG_CACHE_HOME/marg``, else ``~/.cache/marg``; then ``spark/``); later
  runs map it (``-XX:SharedArchiveFile``): the driver, and the executors when they run on this machine
  (a standalone master on the loopback address) and so see the same file. The file is named after what
  it depends on (the Java binary, Spark's jars, the configuration folder on the class path), so a
  changed install makes a new one; the JVM checks the rest itself and, with ``-XX:+VerifySharedSpaces``
  (a checksum of the regions), ignores a corrupt or mismatched archive and loads the classes
  from the jars as without it (``-Xshare:auto``; its notices silenced: ``-Xlog:cds*=off``). A run writes
  its archive to its own temporary name and renames it into place, its length in its name, only when its
  JVM exited cleanly (:meth:`JvmOptions.finish`); a file whose length is not its name's (cut short) is
  removed, not mapped, and the next run writes a new one.
- the client compiler only (``-XX:TieredStopAtLevel=1``): the JVMs' work here is start-up and moving
  small results; the optimising compiler's threads would compete for the cores with the workers.

The executors' Python workers start (a process, then the imports of the counting path) when their first
task arrives; :func:`start_context` runs a small job at once in a thread of its own (:func:`_warm_up`), so
they start beside the driver's next steps (the SparkSession, the listing, the codebook).

``MARG_SPARK_JVM=default`` leaves the JVMs' options to Spark. Options set in ``spark-defaults.conf`` are
kept (ours come first, so theirs win where they overlap).
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import sys
import threading
from pathlib import Path
from typing import Any, Iterator

COMMON = ("-XX:TieredStopAtLevel=1", "-Xshare:auto", "-XX:+VerifySharedSpaces", "-Xlog:cds*=off")
LOOPBACK = ("spark://127.0.0.1:", "spark://localhost:", "spark://[::1]:")
DUMP_WAIT = 180  # seconds a clean exit may take to write the archive
WARM_WAIT = 60  # seconds the exit waits for the executors' warm-up job (a command that ends before it did)


def cache_dir() -> Path:
    """The folder of marg's Spark archives (module docstring)."""
    root = os.environ.get("MARG_CACHE_DIR") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "marg"
    return Path(root) / "spark"


def spark_home() -> Path:
    """The Spark installation the JVMs start from: ``$SPARK_HOME``, else PySpark's own."""
    if os.environ.get("SPARK_HOME"):
        return Path(os.environ["SPARK_HOME"])
    import pyspark

    return Path(pyspark.__file__).parent


def _conf_dir(home: Path) -> Path:
    return Path(os.environ.get("SPARK_CONF_DIR") or home / "conf")


def archive_key(home: Path | None = None) -> str:
    """A name for what an archive depends on: the Java binary, Spark's jars (names, sizes, times), the
    configuration folder (first on the JVMs' class path) and these options."""
    home = home or spark_home()
    java = Path(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else shutil.which("java")
    h = hashlib.blake2b(digest_size=8)
    parts: list[Any] = [COMMON, str(_conf_dir(home))]
    if java and Path(java).exists():
        real = Path(java).resolve()
        st = real.stat()
        parts += [str(real), st.st_size, st.st_mtime_ns]
    jars = home / "jars"
    if jars.is_dir():
        parts += sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in jars.iterdir())
    h.update(repr(parts).encode())
    return h.hexdigest()


def _defaults(home: Path, key: str) -> str:
    """``key``'s value in ``spark-defaults.conf`` ('' when absent): spark-submit would drop it for ours."""
    f = _conf_dir(home) / "spark-defaults.conf"
    try:
        lines = f.read_text().splitlines()
    except OSError:
        return ""
    value = ""
    for line in lines:
        parts = line.strip().split(None, 1)
        if len(parts) == 2 and parts[0] == key:
            value = parts[1].strip()
    return value


class JvmOptions:
    """The options for one session's JVMs (:meth:`conf`), and the archive it may leave (:meth:`finish`).

    Parameters
    ----------
    master : str
        The session's master URL (the executors map the archive only on a loopback standalone master).
    """

    def __init__(self, master: str):
        self.master = master
        self.home = spark_home()
        self.folder = cache_dir()
        self.key = archive_key(self.home)
        self.archive = self._intact()
        self.dump: Path | None = None

    def _intact(self) -> Path | None:
        """This key's archive whose length is the one it was written with (in its name), else None; a cut
        one is removed (the JVM's own checksum, ``-XX:+VerifySharedSpaces``, reads past the end of a cut
        file and crashes: only a whole file is given to it), and so is the partial dump of a run that is gone."""
        found = None
        for f in self.folder.glob("jvm-*.*.tmp") if self.folder.is_dir() else ():  # a stopped run's partial dump
            try:
                pid = int(f.suffixes[-2][1:])
                os.kill(pid, 0)
            except ProcessLookupError:
                f.unlink(missing_ok=True)
            except (ValueError, IndexError, OSError):
                pass
        for f in self.folder.glob(f"jvm-{self.key}-*.jsa") if self.folder.is_dir() else ():
            try:
                whole = f.stat().st_size == int(f.stem.rsplit("-", 1)[1])
            except (OSError, ValueError):
                whole = False
            if whole and found is None:
                found = f
            elif not whole:
                try:
                    f.unlink()
                except OSError:
                    pass
        return found

    def conf(self) -> dict[str, str]:
        """``{Spark setting: value}`` for the session's configuration ({} under ``MARG_SPARK_JVM=default``)."""
        if os.environ.get("MARG_SPARK_JVM", "").lower() == "default":
            return {}
        driver, executor = list(COMMON), list(COMMON)
        if self.archive is not None:
            driver.append(f"-XX:SharedArchiveFile={self.archive}")
            if self.master.startswith(LOOPBACK):
                executor.append(f"-XX:SharedArchiveFile={self.archive}")
        else:
            try:
                self.folder.mkdir(parents=True, exist_ok=True)
                probe = self.folder / f".w{os.getpid()}"
                probe.touch()
                probe.unlink()
            except OSError:
                pass  # no cache folder: no archive, the JVM as without one
            else:
                self.dump = self.folder / f"jvm-{self.key}.{os.getpid()}.tmp"
                driver.append(f"-XX:ArchiveClassesAtExit={self.dump}")
        out = {}
        for role, opts in (("driver", driver), ("executor", executor)):
            key = f"spark.{role}.extraJavaOptions"
            out[key] = " ".join(opts + [_defaults(self.home, key)]).strip()
        return out

    def finish(self, proc: Any) -> None:
        """After the session stopped: close the driver JVM's ``proc`` (PySpark's gateway process) and, if it
        was writing an archive and exited cleanly, move the archive into place; otherwise drop it."""
        if self.dump is None or proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()  # the gateway's JVM exits at the end of its input (and writes the archive)
            code = proc.wait(DUMP_WAIT)
        except Exception:  # noqa: BLE001 - a JVM that will not stop: leave it, keep no archive
            code = None
        try:
            size = self.dump.stat().st_size if self.dump.is_file() else 0
            if code == 0 and size > 0:
                self.archive = self.folder / f"jvm-{self.key}-{size}.jsa"
                os.replace(self.dump, self.archive)
            else:
                self.dump.unlink(missing_ok=True)
        except OSError:
            pass
        self.dump = None


def start_context(master: str) -> Any:
    """A SparkContext for ``master``: its Python workers running this interpreter, its JVMs with
    :class:`JvmOptions`' options, its executors' Python workers started at once; at this process's exit it
    is stopped and the archive its driver JVM wrote is kept (:func:`_stop`)."""
    from pyspark import SparkConf, SparkContext

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the executors' Python: this one, with marg
    jvm = JvmOptions(master)
    conf = (SparkConf().setMaster(master).setAppName("marg export").set("spark.ui.enabled", "false")
            .set("spark.ui.showConsoleProgress", "false")
            .set("spark.pyspark.python", os.environ.get("PYSPARK_PYTHON", sys.executable)))
    for k, v in jvm.conf().items():
        conf.set(k, v)
    sc = SparkContext.getOrCreate(conf)
    sc.setLogLevel("ERROR")
    atexit.register(_stop, sc, jvm, _warm_up(sc))
    return sc


def _warm(_rows: Iterator[Any]) -> Iterator[Any]:
    """Executor side of :func:`_warm_up`: this worker imports the counting path."""
    from . import spark_files  # noqa: F401
    from ..counts import counting  # noqa: F401
    from ..data import encoding  # noqa: F401

    return iter(())


def _warm_up(sc: Any) -> threading.Thread:
    """Start the executors' Python workers now, in a job of its own beside the driver's next steps (the
    session, the listing): the first count then finds them running. A failure here is the count's to report.
    The thread that waits for the job is returned: :func:`_stop` lets it end before the context stops."""
    def job() -> None:
        try:
            n = sc.defaultParallelism
            sc.parallelize(range(n), n).mapPartitions(_warm).count()
        except Exception:  # noqa: BLE001 - a stopped context, an unreachable cluster: the real job reports it
            pass

    thread = threading.Thread(target=job, name="marg spark warm-up", daemon=True)
    thread.start()
    return thread


def _stop(sc: Any, jvm: Any, warm: threading.Thread | None = None) -> None:
    """At exit, a context this source started: its warm-up job ended (:data:`WARM_WAIT` at most), the context
    stopped, and its driver JVM's archive kept (:meth:`JvmOptions.finish`) when it was writing one.

    A command that ends while Spark still runs tasks (the warm-up's, or a job's last accumulator updates)
    would otherwise leave the JVM to log their failure (a Java stack trace) after marg's own last line, as
    PySpark kills the JVM at the interpreter's exit; stopping the context first ends them in order."""
    from pyspark import SparkContext

    if warm is not None:
        warm.join(WARM_WAIT)
    proc = getattr(SparkContext._gateway, "proc", None)
    try:
        sc.stop()
    except Exception:  # noqa: BLE001 - already stopped
        pass
    jvm.finish(proc)
