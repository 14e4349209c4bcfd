"""The Spark JVMs' options (marginals/sources/spark_start.py): the class-data archive is written by a first run
to a temporary name and kept only from a clean exit, mapped by the next runs (the executors only on this
machine), and a truncated, corrupt or stale archive does not break a run: the JVM loads its classes from the
jars and the tables are the same."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from marg.marginals.sources import spark_start
from marg.marginals.sources.spark_start import COMMON, JvmOptions

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MARG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("MARG_SPARK_JVM", raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "conf"))
    return tmp_path / "cache" / "spark"


def _opts(conf: dict, role: str) -> list[str]:
    return conf[f"spark.{role}.extraJavaOptions"].split()


def test_a_first_run_writes_an_archive_and_the_next_map_it(cache, tmp_path, monkeypatch):
    pytest.importorskip("pyspark")
    first = JvmOptions("spark://127.0.0.1:7077")
    conf = first.conf()
    driver, executor = _opts(conf, "driver"), _opts(conf, "executor")
    assert driver[:len(COMMON)] == list(COMMON) and executor == list(COMMON)
    assert driver[-1] == f"-XX:ArchiveClassesAtExit={first.dump}" and first.dump.parent == cache
    assert first.archive is None and first.dump.name.endswith(".tmp")
    cut = cache / f"jvm-{first.key}-11.jsa"  # written with 11 bytes, now 10: removed, and a new one written
    cut.write_bytes(b"an archive")
    assert JvmOptions("local[2]").archive is None and not cut.exists()
    whole = cache / f"jvm-{first.key}-10.jsa"
    whole.write_bytes(b"an archive")
    for master, shared in (("spark://127.0.0.1:7077", True), ("spark://10.1.2.3:7077", False), ("local[2]", False)):
        conf = JvmOptions(master).conf()
        assert _opts(conf, "driver")[-1] == f"-XX:SharedArchiveFile={whole}"
        assert (_opts(conf, "executor")[-1] == f"-XX:SharedArchiveFile={whole}") == shared
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "spark-defaults.conf").write_text("spark.executor.extraJavaOptions  -Dtheirs=1 -Xss4m\n")
    assert _opts(JvmOptions("local[2]").conf(), "executor")[-2:] == ["-Dtheirs=1", "-Xss4m"]  # kept, last: theirs win
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "other"))  # another class path head: another archive
    assert JvmOptions("local[2]").key != first.key
    monkeypatch.setenv("MARG_SPARK_JVM", "default")
    assert JvmOptions("local[2]").conf() == {}


@pytest.mark.parametrize("code, kept", [(0, True), (3, False)])
def test_an_archive_is_kept_only_from_a_clean_exit(cache, code, kept):
    pytest.importorskip("pyspark")
    jvm = JvmOptions("local[1]")
    jvm.conf()
    jvm.dump.write_bytes(b"written at exit")
    proc = subprocess.Popen([sys.executable, "-c", f"import sys; sys.stdin.read(); sys.exit({code})"],
                            stdin=subprocess.PIPE)
    jvm.finish(proc)  # closes the process's input, as the gateway's JVM is stopped
    assert proc.returncode == code and not list(cache.glob("*.tmp"))
    assert [p.name for p in cache.glob("*.jsa")] == ([f"jvm-{jvm.key}-15.jsa"] if kept else [])
    assert JvmOptions("local[1]").archive == (cache / f"jvm-{jvm.key}-15.jsa" if kept else None)


def test_a_gone_runs_partial_dump_is_removed(cache):
    pytest.importorskip("pyspark")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    key = JvmOptions("local[1]").key
    cache.mkdir(parents=True, exist_ok=True)
    stopped, running = cache / f"jvm-{key}.{gone.stdout.strip()}.tmp", cache / f"jvm-{key}.{os.getpid()}.tmp"
    stopped.write_bytes(b"cut")
    running.write_bytes(b"being written")
    JvmOptions("local[1]")
    assert not stopped.exists() and running.exists()


COUNT = """
import json, sys
from marg.marginals.sources import open_source
from marg.marginals.counts.tables import plan_cliques
from tests.helpers.visits import CB
with open_source(sys.argv[1], engine="spark", spark_master="local[1]") as src:
    tables, n = src.count(CB, plan_cliques(CB, "first"))
print(json.dumps([n, [t.counts.tolist() for t in tables]]))
"""


def _count(parts: str, env: dict) -> tuple[list, list[str]]:
    out = subprocess.run([sys.executable, "-c", COUNT, parts], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert len(lines) == 1, out.stdout[:2000]  # nothing of the JVM's on the output
    return json.loads(lines[0]), sorted(p.name for p in Path(env["MARG_CACHE_DIR"], "spark").iterdir())


def test_a_truncated_corrupt_or_stale_archive_does_not_break_a_run(tmp_path):
    """Whole processes on local[1]: the first writes the archive at its exit, the next maps it; then the
    archive cut to half (removed and written anew), a block overwritten, and another JVM's archive (another
    class path) in its place: each run ends cleanly, nothing of the JVM's on its output, the same tables."""
    pytest.importorskip("pyspark")
    from tests.helpers.services import java_available, unavailable
    from tests.helpers.visits import rows, write

    if not java_available():
        unavailable("the Spark JVM options need a Java runtime (java not found)")
    _, parts = write(tmp_path, rows(seed=31, n=600))
    env = {k: v for k, v in os.environ.items() if k not in ("MARG_SPARK_JVM", "SPARK_CONF_DIR", "PYSPARK_SUBMIT_ARGS")}
    env["MARG_CACHE_DIR"] = str(tmp_path / "cache")
    folder = tmp_path / "cache" / "spark"
    want, files = _count(parts, env)
    assert want[0] == 660 and len(files) == 1 and files[0].endswith(".jsa")  # written, renamed into place
    archive = folder / files[0]
    good = archive.read_bytes()
    assert len(good) > 1 << 20 and archive.name.endswith(f"-{len(good)}.jsa")
    assert _count(parts, env) == (want, files)  # mapped
    archive.chmod(0o644)
    archive.write_bytes(good[:len(good) // 2])  # cut short: not given to the JVM (its checksum would crash), rewritten
    got, now = _count(parts, env)
    assert got == want and len(now) == 1 and (folder / now[0]).stat().st_size > 1 << 20
    (folder / now[0]).unlink()
    middle = len(good) // 2  # a block overwritten: the JVM's checksum (-XX:+VerifySharedSpaces) refuses it
    archive.write_bytes(good[:middle] + bytes(4096) + good[middle + 4096:])
    assert _count(parts, env) == (want, files)
    archive.unlink()
    java = Path(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else "java"
    stale = tmp_path / "stale.jsa"  # whole, but another JVM's (another class path): the JVM refuses it
    subprocess.run([str(java), "-Xlog:cds*=off", f"-XX:ArchiveClassesAtExit={stale}", "-version"], check=True,
                   capture_output=True)
    other = folder / f"{archive.name.rsplit('-', 1)[0]}-{stale.stat().st_size}.jsa"
    other.write_bytes(stale.read_bytes())
    assert _count(parts, env) == (want, [other.name])


def test_the_key_follows_the_jars(tmp_path, monkeypatch):
    home = tmp_path / "spark"
    (home / "jars").mkdir(parents=True)
    (home / "jars" / "a.jar").write_bytes(b"1")
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    before = spark_start.archive_key(home)
    assert spark_start.archive_key(home) == before
    (home / "jars" / "b.jar").write_bytes(b"2")
    assert spark_start.archive_key(home) != before


def test_a_refusal_through_spark_is_marg_s_last_line(tmp_path):
    """A command that ends while Spark may still run tasks (the executors' warm-up job, a job's last accumulator
    updates): the context is stopped in order at exit, so marg's one-line error stays the last line of standard
    error, with no Java stack trace after it (before, 1 run in 4 of this refusal ended in one). Whole processes,
    local[2], the archive in place after the first run."""
    pytest.importorskip("pyspark")
    from tests.helpers.console import marg
    from tests.helpers.services import java_available, unavailable
    from tests.helpers.visits import CB, rows, write

    if not java_available():
        unavailable("a Spark export needs a Java runtime (java not found)")
    _, parts = write(tmp_path, rows(seed=5, n=600))
    CB.save(tmp_path / "cb.json")
    env = {"MARG_CACHE_DIR": str(tmp_path / "cache")}
    for k in range(4):
        res = marg("export", parts, "--schema", "cb.json", "--site", "s1", "--out", f"o{k}.bundle", "--ledger", "l",
                   "--engine", "spark", "--spark-master", "local[2]", "--stats", "all", "--min-cell", "40",
                   cwd=tmp_path, env=env)
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert res.returncode == 1 and lines, res.stderr[-2000:]
        assert lines[-1].startswith("marg: error: min-cell rule:"), res.stderr[-2000:]
        assert not (tmp_path / f"o{k}.bundle").exists()
