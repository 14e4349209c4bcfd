"""The five binarized UCI sets of the boosting seed's Table 3.1, coded under public codebooks.

BCW (breast-w), VOTE (house-votes-84), CLVHEART (cleveland, num > 0), HUHEART (hungarian)
and SONAR from ``../shared/datasets`` (PMLB copies; MANIFEST.md section D). Each PMLB column
is first decoded back to the UCI text value (PMLB label-encoded some columns in string
order: BCW's Bare_Nuclei, the heart sets' ca / thal and Hungarian's nine columns with '?'),
then encoded by marg's own encoder under the codebook in ``bench/codebooks/<set>.json``,
whose bin edges are public facts (documented in BENCHMARKS.md), never data quantiles.

Benchmarks only: nothing here is part of an export.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from marg.marginals.data.codebook import Codebook
from marg.marginals.data.encoding import encode_batch

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("MARG_DATASETS", ROOT.parent / "shared" / "datasets"))
CODEBOOKS = Path(__file__).resolve().parent / "codebooks"

FILES = {
    "bcw": "breast-w/breast-w.tsv.gz",
    "vote": "house-votes-84/house-votes-84.tsv.gz",
    "clvheart": "cleveland/cleveland.tsv.gz",
    "huheart": "hungarian/hungarian.tsv.gz",
    "sonar": "sonar/sonar.tsv.gz",
}
SETS = tuple(FILES)

# MANIFEST.md section D: PMLB code k of these Hungarian columns is the k-th UCI string.
HU_TRESTBPS = (
    "100,105,106,108,110,112,113,115,118,120,122,124,125,128,130,132,135,136,138,140,142,145,150,155,160,170,180,190,200,92,98,?".split(","))
HU_CHOL = (
    "100,117,129,132,147,156,160,161,163,164,166,167,168,171,172,173,175,179,180,182,184,186,187,188,190,193,194,195,196,198,200,201,202,204,205,206,207,208,209,210,211,212,213,214,215,216,217,218,219,220,221,222,223,224,225,226,227,228,229,230,231,233,234,237,238,240,241,242,243,245,246,247,248,249,250,251,253,254,255,256,257,259,260,263,264,265,266,267,268,269,270,271,272,273,274,275,276,277,279,280,281,282,283,284,285,287,288,289,290,291,292,294,295,297,298,303,305,306,307,308,309,312,315,318,320,326,328,329,331,336,338,339,340,341,342,344,347,355,358,365,388,392,393,394,404,412,466,468,491,518,529,603,85,?".split(","))
HU_THALACH = (
    "100,102,103,105,106,108,110,112,114,115,116,118,119,120,121,122,124,125,126,127,128,129,130,132,134,135,136,137,138,139,140,142,143,144,145,146,148,150,152,153,154,155,156,158,160,162,164,165,166,167,168,170,172,174,175,176,178,180,184,185,188,190,82,87,90,91,92,94,96,98,99,?".split(","))


def _num(v) -> str | None:
    """A numeric cell as text ('?' and NaN → None, the encoder's missing value)."""
    if v is None or v == "?" or (isinstance(v, float) and np.isnan(v)):
        return None
    x = float(v)
    return str(int(x)) if x == int(x) else repr(round(x, 4))


def _decode(name: str, df: pd.DataFrame) -> tuple[dict[str, list], list[str]]:
    """UCI text values per codebook column, and the label text per row."""
    cols: dict[str, list] = {}
    t = df["target"].to_numpy()
    if name == "bcw":
        bare = {0: "1", 1: "10", 10: None} | {k: str(k) for k in range(2, 10)}
        for c in df.columns[:-1]:
            cols[c] = [bare[int(v)] for v in df[c]] if c == "Bare_Nuclei" else [_num(v) for v in df[c]]
        return cols, ["malignant" if v == 1 else "benign" for v in t]
    if name == "vote":
        for c in df.columns[:-1]:
            cols[c] = [("?", "n", "y")[int(v)] for v in df[c]]
        return cols, ["republican" if v == 1 else "democrat" for v in t]
    if name in ("clvheart", "huheart"):
        hu = name == "huheart"
        for c in ("age", "oldpeak"):
            cols[c] = [_num(v) for v in df[c]]
        for c in ("sex", "cp"):
            cols[c] = [str(int(v)) for v in df[c]]
        if hu:
            cols["trestbps"] = [_num(HU_TRESTBPS[int(v)]) for v in df["trestbps"]]
            cols["chol"] = [_num(HU_CHOL[int(v)]) for v in df["chol"]]
            cols["thalach"] = [_num(HU_THALACH[int(v)]) for v in df["thalach"]]
            for c in ("fbs", "exang"):
                cols[c] = [("0", "1", "?")[int(v)] for v in df[c]]
            cols["restecg"] = [("0", "1", "2", "?")[int(v)] for v in df["restecg"]]
            cols["slope"] = [("1", "2", "3", "?")[int(v)] for v in df["slope"]]
            cols["ca"] = [(None if int(v) == 1 else "0") for v in df["ca"]]  # codes: 0='0', 1='?'
        else:
            for c in ("trestbps", "chol", "thalach"):
                cols[c] = [_num(v) for v in df[c]]
            for c in ("fbs", "exang", "restecg", "slope"):
                cols[c] = [str(int(v)) for v in df[c]]
            cols["ca"] = [(None if int(v) == 4 else str(int(v))) for v in df["ca"]]  # 4 = '?'
        cols["thal"] = [("3", "6", "7", "?")[int(v)] for v in df["thal"]]
        return cols, ["present" if v > 0 else "absent" for v in t]
    if name == "sonar":
        for c in df.columns[:-1]:
            cols[c] = [repr(round(float(v), 4)) for v in df[c]]
        return cols, ["R" if v == 1 else "M" for v in t]
    raise SystemExit(f"unknown data set {name!r} (expected one of {', '.join(SETS)})")


def load(name: str) -> tuple[Codebook, np.ndarray, np.ndarray]:
    """(codebook, X codes (n, p), y class codes (n,)) of one set; class 1 is the seed's Ω⁺."""
    path = DATA / FILES[name]
    if not path.exists():
        raise SystemExit(f"dataset not found: {path} (set MARG_DATASETS)")
    cb = Codebook.load(CODEBOOKS / f"{name}.json")
    cols, labels = _decode(name, pd.read_csv(path, sep="\t"))
    batch = {f: pa.array(cols[f], type=pa.string()) for f in cb.feature_names}
    batch[cb.label.name] = pa.array(labels, type=pa.string())
    enc = encode_batch(cb, batch, 1)
    return cb, enc.X, enc.y


def folds(y: np.ndarray, rep: int, n_folds: int = 10) -> list[tuple[np.ndarray, np.ndarray]]:
    """Stratified ``n_folds``-fold split of repetition ``rep`` (seeded by rep): (train, test) index pairs.

    Each class's rows are shuffled with ``default_rng(rep)`` and dealt round-robin to the
    folds, so every benchmark that names the same repetition uses the same folds.
    """
    rng = np.random.default_rng(rep)
    fold_of = np.empty(y.shape[0], dtype=np.int64)
    for c in np.unique(y):
        idx = np.flatnonzero(y == c)
        idx = idx[rng.permutation(idx.size)]
        fold_of[idx] = (np.arange(idx.size) + rng.integers(n_folds)) % n_folds
    return [(np.flatnonzero(fold_of != f), np.flatnonzero(fold_of == f)) for f in range(n_folds)]
