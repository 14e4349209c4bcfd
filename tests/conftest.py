"""Shared fixtures: the real-datasets folder, small random codebooks and data."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import numpy as np
import pytest

from marg.marginals.codebook import CategoricalFeature, Codebook, Label, NumericFeature
from marg.errors import InputError


def datasets_dir() -> Path:
    env = os.environ.get("MARG_DATASETS")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "datasets"


@pytest.fixture
def datasets() -> Path:
    d = datasets_dir()
    if not d.is_dir():
        pytest.skip(f"shared datasets not found at {d}")
    return d


def random_codebook(rng: np.random.Generator, n_features: int = 4, max_levels: int = 3, n_classes: int = 2,
                    numeric: int = 0) -> Codebook:
    feats = []
    for i in range(n_features):
        m = int(rng.integers(2, max_levels + 1))
        feats.append(CategoricalFeature(f"f{i}", tuple(f"l{k}" for k in range(m))))
    for j in range(numeric):
        feats.append(NumericFeature(f"num{j}", lo=-1.0, hi=2.0))
    return Codebook(features=tuple(feats), label=Label("y", tuple(f"c{k}" for k in range(n_classes))))


def gene_study(directory: Path, n: int = 150, p: int = 300, seed: int = 0) -> tuple[Path, Path]:
    """A 3-class gene study written to ``directory``: codebook.json and genes.csv (genes "lo/mid/hi";
    gene j < 12 is "hi" for half the rows of class j mod 3 and "lo" for the other half), on which
    MRC column generation with one feature per iteration takes several iterations.

    Returns
    -------
    (codebook path, data path)
    """
    import csv

    rng = np.random.default_rng(seed)
    levels, labels = ("lo", "mid", "hi"), ("a", "b", "c")
    y = rng.integers(0, 3, n)
    X = rng.integers(0, 3, (n, p))
    for j in range(12):
        flip = rng.random(n) < 0.5
        X[flip, j] = np.where(y[flip] == j % 3, 2, 0)
    cb = Codebook(features=tuple(CategoricalFeature(f"g{j}", levels) for j in range(p)), label=Label("tumour", labels))
    schema, data = directory / "codebook.json", directory / "genes.csv"
    cb.save(schema)
    with data.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow([f"g{j}" for j in range(p)] + ["tumour"])
        for i in range(n):
            w.writerow([levels[v] for v in X[i]] + [labels[y[i]]])
    return schema, data


def random_rows(rng: np.random.Generator, cb: Codebook, n: int) -> tuple[np.ndarray, np.ndarray]:
    cols = []
    for f in cb.features:
        if f.is_discrete:
            cols.append(rng.integers(0, f.n_levels, n).astype(float))
        else:
            cols.append(rng.uniform(f.lo, f.hi, n))
    y = rng.integers(0, cb.n_classes, n)
    return np.column_stack(cols), y


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


@pytest.fixture
def demo_bundles(tmp_path):
    """Factory: export the three demo sites (``rows`` each, seeds ``seed``, ``seed``+1, …) with
    every pair table through the CLI; returns the bundle paths (unsigned, min-cell 1)."""
    from typer.testing import CliRunner

    from marg.cli.main import app
    from marg.marginals.synthetic import SITES, demo_codebook, generate, write_csv

    def make(rows: int = 400, seed: int = 200) -> list[Path]:
        runner = CliRunner()
        schema = tmp_path / "codebook.json"
        demo_codebook().save(schema)
        bundles = []
        for k, prof in enumerate(SITES):
            cols = generate(rows, prof, seed=seed + k)
            data = tmp_path / f"{prof.name}.csv"
            write_csv(data, cols, slice(0, rows))
            b = tmp_path / f"{prof.name}.bundle"
            args = ["export", data, "--schema", schema, "--site", prof.name, "--out", b, "--stats", "all", "--min-cell", "1"]
            r = runner.invoke(app, [str(a) for a in args])
            assert r.exit_code == 0, r.output
            bundles.append(b)
        return bundles

    return make


@pytest.fixture
def learn_dcc(tmp_path):
    """Factory: ``marg learn BUNDLES --learner dcc --s 0 OPTION VALUE --json`` through the CLI;
    returns (the --json report, the saved model's estimator)."""
    from typer.testing import CliRunner

    from marg.cli.main import app
    from marg.learners.model import Model

    def run(bundles: list[Path], option: str, value: str) -> tuple[dict, object]:
        out = tmp_path / f"dcc_{option.strip('-')}_{value}.json"
        args = ["learn", *bundles, "--learner", "dcc", "--s", "0", option, value, "--out", out, "--json", "--allow-unsigned"]
        r = CliRunner().invoke(app, [str(a) for a in args])
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout), Model.load(out).estimator

    return run


def check_malformed_models(cls, d):
    """A damaged model file gives one InputError line naming what is wrong, never a traceback.

    ``d`` is ``to_dict()`` output; its fitted state is damaged in each way in turn."""
    def damaged(edit):
        bad = copy.deepcopy(d)
        edit(bad["state"])
        return bad

    bad = damaged(lambda st: st.__setitem__("mu", st["mu"][:-1]))
    with pytest.raises(InputError, match=r"model mu has shape"):
        cls.from_dict(bad)
    bad = damaged(lambda st: st["mu"][0].__setitem__(0, float("nan")))
    with pytest.raises(InputError, match="NaN or infinity"):
        cls.from_dict(bad)
    bad = damaged(lambda st: st.pop("phi"))
    with pytest.raises(InputError, match=r"malformed .* model: 'phi'"):
        cls.from_dict(bad)
    bad = damaged(lambda st: st.__setitem__("ruled_out", [[10**6]] + st.get("ruled_out", st["impossible"])[1:]))  # stored only when it differs
    with pytest.raises(InputError, match="'ruled_out' cells out of range"):
        cls.from_dict(bad)
    bad = damaged(lambda st: st.__setitem__("nb_logp", st["nb_logp"][:1]))
    with pytest.raises(InputError, match="nb_logp must be finite with mu's shape"):
        cls.from_dict(bad)
    bad = damaged(lambda st: st.__setitem__("worst_case_error", "high"))
    with pytest.raises(InputError, match="malformed .* model"):
        cls.from_dict(bad)
