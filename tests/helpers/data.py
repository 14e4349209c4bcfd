"""Test data made here: small random codebooks and rows, the gene study, the real datasets' folder."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label, NumericFeature


def datasets_dir() -> Path:
    env = os.environ.get("MARG_DATASETS")
    return Path(env) if env else Path(__file__).resolve().parents[3] / "shared" / "datasets"  # beside the repository


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
