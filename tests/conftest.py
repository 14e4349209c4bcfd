"""Shared fixtures: the real-datasets folder, a seeded generator, every test in its own folder, and
the studies the tests run on (tests/helpers/study.py builds them).

The helpers the tests import live in tests/helpers/; the names below re-exported from there keep
``from tests.conftest import random_codebook`` working.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.data import datasets_dir, gene_study, random_codebook, random_rows  # noqa: F401  (re-exported)
from tests.helpers.model_files import check_malformed_models  # noqa: F401  (re-exported)
from tests.helpers.study import Study, export_study, write_study


SERVICE_GROUPS = {"spark": "spark"}
"""A test using one of these fixtures runs in that service's group, so one Spark JVM (one per
process) serves them instead of one per worker. The PostgreSQL tests are not grouped: every module
that needs the server starts its own throw-away cluster (a module-scoped ``pg`` fixture on a free
port), so grouping them saved no start and only queued four modules, the OMOP study among them,
behind each other on one worker."""


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    """Units of work for ``pytest -n 2 --dist loadgroup`` (pytest-xdist): a test module is one unit,
    so its module-scoped fixtures are built once and its tests keep their order; a service's tests
    are one unit (SERVICE_GROUPS); a test marked ``slow`` (the fuzzing, 10⁴ inputs each) is a unit
    of its own, so the two workers share them; an explicit ``xdist_group`` mark is kept."""
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        used = getattr(item, "fixturenames", ())
        group = next((g for f, g in SERVICE_GROUPS.items() if f in used), None)
        if group is None and item.get_closest_marker("slow") is None:
            group = item.nodeid.split("::")[0]
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


def _cpu_seconds() -> float:
    """CPU seconds of this process and of its waited-for children (the console scripts a test runs)."""
    import resource

    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With ``MARG_CPU_REPORT=FILE``: each test's CPU seconds (setup, call and teardown; its console
    scripts included) appended to FILE as ``seconds<TAB>node id`` lines. CPU, not wall time, so the
    slowest tests can be found on a loaded machine (``sort -rn FILE | head``)."""
    report = os.environ.get("MARG_CPU_REPORT")
    t0 = _cpu_seconds() if report else 0.0
    yield
    if report:
        with open(report, "a", encoding="utf-8") as f:
            f.write(f"{_cpu_seconds() - t0:.2f}\t{item.nodeid}\n")


@pytest.fixture
def datasets() -> Path:
    d = datasets_dir()
    if not d.is_dir():
        pytest.skip(f"shared datasets not found at {d}")
    return d


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


@pytest.fixture(autouse=True, scope="session")
def _session_marg_home(tmp_path_factory):
    """Module-scoped fixtures export too: their ledger checkpoints go to a session folder, never ~/.config."""
    old = os.environ.get("MARG_HOME")
    os.environ["MARG_HOME"] = str(tmp_path_factory.mktemp("marg-home"))
    yield
    if old is None:
        os.environ.pop("MARG_HOME", None)
    else:
        os.environ["MARG_HOME"] = old


@pytest.fixture(autouse=True)
def _in_tmp_dir(tmp_path, monkeypatch):
    """Run every test in its own folder, so default paths (marg-ledger/) never land in the repo,
    with its own site configuration (ledger checkpoints) under MARG_HOME."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MARG_HOME", str(tmp_path / ".marg-home"))


@pytest.fixture(scope="session")
def demo_study(tmp_path_factory) -> Study:
    """The session's exact study, built once per test process: the three demo sites' 400 rows
    each (seeds 10, 11, 12) and their exact bundles with every pair table (min-cell 1, no ledger).

    Read-only for the tests: a test writes its own outputs under names of its own (or in its
    ``tmp_path``), never over the study's files.
    """
    return export_study(write_study(tmp_path_factory.mktemp("study"), 400, seed=10), "--no-ledger")


@pytest.fixture(scope="session")
def site_bundles(demo_study) -> tuple[Path, list[Path]]:
    """(the study's folder, its bundles): the demo sites exported exactly, every pair table."""
    return demo_study.dir, demo_study.bundles


@pytest.fixture(scope="session")
def demo(tmp_path_factory) -> dict:
    """One ``marg demo`` run (``marg.demo.run_demo``) for the session: its folder, bundles, models,
    keys and reports. Read-only for the tests, like ``demo_study``."""
    from marg.demo import run_demo

    return run_demo(tmp_path_factory.mktemp("demo") / "d", echo=lambda s: None)


@pytest.fixture
def demo_bundles(tmp_path):
    """Factory: export the three demo sites (``rows`` each, seeds ``seed``, ``seed``+1, …) with
    every pair table through the CLI; returns the bundle paths (unsigned, min-cell 1)."""

    def make(rows: int = 400, seed: int = 200) -> list[Path]:
        return export_study(write_study(tmp_path, rows, seed)).bundles

    return make


@pytest.fixture
def learn_dcc(tmp_path):
    """Factory: ``marg learn BUNDLES --learner dcc --s 0 OPTION VALUE --json`` through the CLI;
    returns (the --json report, the saved model's estimator)."""
    from marg.learners.estimator.model import Model
    from tests.helpers.console import run as marg_run

    def run(bundles: list[Path], option: str, value: str) -> tuple[dict, object]:
        out = tmp_path / f"dcc_{option.strip('-')}_{value}.json"
        r = marg_run("learn", *bundles, "--learner", "dcc", "--s", "0", option, value, "--out", out, "--json",
                     "--allow-unsigned")
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout), Model.load(out).estimator

    return run
