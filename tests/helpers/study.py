"""The multi-site study the tests run on: the demo codebook, the demo sites' rows, their bundles.

One builder for every test that needs sites (``write_study``), one exporter (``export_study``),
and the session's shared exact study (the ``demo_study`` fixture in ``tests/conftest.py``).
"""

from __future__ import annotations

import contextlib

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Study:
    """A study written to ``dir``.

    Attributes
    ----------
    dir : the folder holding everything below
    schema : the codebook file (the demo codebook)
    data : site name -> CSV of the site's rows (the training rows when a test split was asked)
    test : site name -> CSV of the rows held back for testing (empty without a split)
    bundles : the sites' bundles in the sites' order (empty until exported)
    """

    dir: Path
    schema: Path
    data: dict[str, Path]
    test: dict[str, Path] = field(default_factory=dict)
    bundles: list[Path] = field(default_factory=list)


def write_study(directory: Path, rows: int, seed: int, train: int | None = None, sites: int | None = None,
                schema: str = "codebook.json") -> Study:
    """The demo codebook and the demo sites' rows written to ``directory``.

    Site ``k`` (of the first ``sites`` demo sites, default all three) draws ``rows`` rows with seed
    ``seed + k``; the first ``train`` (default all) go to ``NAME.csv``, the rest to ``NAME_test.csv``.
    """
    from marg.marginals.synthetic import SITES, demo_codebook, generate, write_csv

    directory = Path(directory)
    cb_path = directory / schema
    demo_codebook().save(cb_path)
    train = rows if train is None else train
    data, test = {}, {}
    for k, prof in enumerate(SITES[: sites or len(SITES)]):
        cols = generate(rows, prof, seed=seed + k)
        data[prof.name] = directory / f"{prof.name}.csv"
        write_csv(data[prof.name], cols, slice(0, train))
        if train < rows:
            test[prof.name] = directory / f"{prof.name}_test.csv"
            write_csv(test[prof.name], cols, slice(train, rows))
    return Study(directory, cb_path, data, test)


def export_study(study: Study, *options: object, script: bool = False, suffix: str = ".bundle") -> Study:
    """Export every site's rows exactly with every pair table at min-cell 1 (then ``options``).

    ``script``: through the installed console script (a subprocess, in ``study.dir``) instead of
    in this process. Returns the study with its bundles (``NAME`` + ``suffix`` in ``study.dir``).
    """
    from tests.helpers.console import marg, run

    bundles = []
    for name, data in study.data.items():
        out = study.dir / f"{name}{suffix}"
        args = ["export", data, "--schema", study.schema, "--site", name, "--out", out, "--stats", "all",
                "--min-cell", "1", *options]
        if script:
            r = marg(*args, cwd=study.dir)
            assert r.returncode == 0, r.stderr
        else:  # in study.dir: a module-scoped fixture runs before the per-test chdir, and the default
            # ledger (marg-ledger/) must not land in the checkout, shared by the test processes
            with contextlib.chdir(study.dir):
                r = run(*args)
            assert r.exit_code == 0, r.output
        bundles.append(out)
    return Study(study.dir, study.schema, study.data, study.test, bundles)


def demo_bundles(tmp: Path, seed: int, n: int = 300) -> list[Path]:
    """The three demo sites' CSVs (``n`` rows each) exported exactly, every pair table, by the installed
    script into ``tmp`` (``codebook.json`` there too); the bundles in the sites' order."""
    return export_study(write_study(tmp, n, seed), "--no-ledger", script=True).bundles



@dataclass(frozen=True)
class Parties:
    """A declared study (``marg study init``) and its parties' homes: ``home[name]`` is each site's and the learner's
    $MARG_HOME (keys in ``HOME/keys``), ``drop`` the drop box folder, ``study`` the signed study file."""

    dir: Path
    study: Path
    drop: Path
    home: dict[str, Path]
    data: dict[str, Path]
    schema: Path


def declare_study(directory: Path, rows: int = 300, seed: int = 0, *options: object, sites: int | None = None,
                  script: bool = True, drop: str | None = None) -> Parties:
    """The demo sites' rows (:func:`write_study`), every party's keys in its own home, the roster folder, and the
    study file signed by the learner (``marg study init ... options``), through the installed script (``script``)
    or in this process; ``drop`` a drop box URL (default: the folder ``directory/drop``)."""
    from tests.helpers.console import marg, run

    st = write_study(directory, rows, seed, sites=sites)
    roster, folder = directory / "roster", directory / "drop"
    roster.mkdir()
    folder.mkdir()
    homes = {}
    for name, role in [(s, "site") for s in st.data] + [("learner", "learner")]:
        homes[name] = directory / f"home-{name}"
        args = ["keys", "init", "--site", name, "--role", role, "--dir", homes[name] / "keys"]
        r = marg(*args, cwd=directory) if script else run(*args)
        assert (r.returncode if script else r.exit_code) == 0
        for suffix in (".sign.pub", ".seal.pub"):
            (roster / f"{name}{suffix}").write_bytes((homes[name] / "keys" / f"{name}{suffix}").read_bytes())
    study = directory / "study.json"
    args = ["study", "init", "--schema", st.schema, "--roster", roster, "--epsilon", "1", "--delta", "1e-6", "--drop",
            drop or folder, "--sign-key", homes["learner"] / "keys" / "learner.sign.key", "--out", study, *options]
    r = marg(*args, cwd=directory) if script else run(*args)
    assert (r.returncode if script else r.exit_code) == 0, (r.stderr if script else r.output)
    return Parties(directory, study, folder, homes, st.data, st.schema)


def round1_records(chosen: list[list[str]], candidates: int, cells: int) -> dict:
    """A Summary's provenance of select-then-measure round-1 study records: site ``s{i}`` chose ``chosen[i]``
    among ``candidates`` features, the round's plan over ``cells`` cells (fixed spends: ρ 0.005 a round)."""
    sites = []
    for s, feats in enumerate(chosen):
        rec = {"format": "marg-study", "round": 1, "spent": {"rho": 0.005},
               "plan": {"rho_total": 0.02, "cells": cells, "candidates": candidates},
               "selection": {"features": feats, "candidates": candidates, "scale": 1.0, "sensitivity": 1.0,
                             "rho": 0.004}}
        sites.append({"site": f"s{s}", "rounds": [{"study": rec}]})
    return {"sites": sites}
