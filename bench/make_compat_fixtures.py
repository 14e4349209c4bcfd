"""Write model files of the previous release as test fixtures (tests/fixtures/compat/).

Run: python bench/make_compat_fixtures.py [--prev 3c9b7f2]

With the previous release (extracted by bench/regression.py into bench/out/prev-REV) this
fits small models on generated data — MRC (column generation, calibrated; full LP, s = 0),
DCC (CMI forest, greedy, every pair, hinge loss), Rényi (binary, and three classes), and an
MRC on features chosen by group lasso — saves each model file as that release wrote it
(model-file version 1), the data they are applied to, and what that release predicted:
labels, probabilities and certificate. tests/learners/estimator/test_model_compat.py loads them with this
release and requires the same. Files are small (generated data, a few features).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "compat"


def _prev(rev: str) -> Path:
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_regression", ROOT / "bench" / "regression.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.extract_previous(rev)


def build(rev: str) -> None:
    prev = _prev(rev)
    sys.path.insert(0, str(prev))
    from learners.dcc import DCC  # type: ignore[import-not-found]
    from learners.model import Model  # type: ignore[import-not-found]
    from learners.mrc import MRC  # type: ignore[import-not-found]
    from learners.renyi import RenyiClassifier  # type: ignore[import-not-found]
    from learners.selection import select_features  # type: ignore[import-not-found]
    from marginals.codebook import CategoricalFeature, Codebook, Label  # type: ignore[import-not-found]
    from marginals.encoding import encode_file  # type: ignore[import-not-found]
    from marginals.summary import Summary  # type: ignore[import-not-found]
    from marginals.synthetic import demo_codebook, generate, write_csv  # type: ignore[import-not-found]

    OUT.mkdir(parents=True, exist_ok=True)
    # binary: the demo codebook (8 features), 600 generated rows to learn from, 80 to apply to
    cb = demo_codebook()
    cols = generate(680, "north", seed=5)
    write_csv(OUT / "binary_train.csv", cols, slice(0, 600))
    write_csv(OUT / "binary.csv", cols, slice(600, 680))
    tr = encode_file(OUT / "binary_train.csv", cb)
    (OUT / "binary_train.csv").unlink()
    S = Summary.from_rows(cb, tr.X, tr.y, stats="all")
    te = encode_file(OUT / "binary.csv", cb)
    sel = select_features(S, method="group-lasso", max_features=3)
    models = {
        "mrc_cg": MRC(), "mrc_full_s0": MRC(s=0.0, solver="full"), "dcc_forest": DCC(s=0.0),
        "dcc_greedy": DCC(s=0.0, greedy=True), "dcc_all": DCC(s=0.0, structure="all"),
        "dcc_hinge": DCC(s=0.0, loss="hinge"), "renyi": RenyiClassifier(), "mrc_selected": MRC(features=sel.selected),
    }
    expected = {}
    for name, est in models.items():
        est.fit(S)
        learner = type(est).__name__.lower().replace("renyiclassifier", "renyi")
        m = Model(learner=learner, codebook=cb, estimator=est, info={"fixture": f"written by {rev}"})
        m.save(OUT / f"{name}.json")
        expected[name] = {"data": "binary.csv", "predict": m.predict(te.X).tolist(),
                          "proba": m.predict_proba(te.X).tolist(), "worst_case_error": m.worst_case_error}
    # three classes: a small random codebook
    rng = np.random.default_rng(9)
    cb3 = Codebook(features=tuple(CategoricalFeature(f"f{i}", ("a", "b", "c")) for i in range(4)),
                   label=Label("y", ("u", "v", "w")))
    X = rng.integers(0, 3, size=(500, 4)).astype(float)
    y = ((X[:, 0] + X[:, 1] + rng.integers(0, 2, 500)) % 3).astype(int)
    S3 = Summary.from_rows(cb3, X[:420], y[:420], stats="all")
    lines = (["f0,f1,f2,f3,y"] + [",".join("abc"[int(v)] for v in row) + "," + "uvw"[t]
                                  for row, t in zip(X[420:], y[420:])])
    (OUT / "three.csv").write_text("\n".join(lines) + "\n")
    for name, est in {"renyi_three": RenyiClassifier(), "mrc_three": MRC(), "dcc_three": DCC(s=0.0)}.items():
        est.fit(S3)
        learner = type(est).__name__.lower().replace("renyiclassifier", "renyi")
        m = Model(learner=learner, codebook=cb3, estimator=est, info={"fixture": f"written by {rev}"})
        m.save(OUT / f"{name}.json")
        expected[name] = {"data": "three.csv", "predict": m.predict(X[420:]).tolist(),
                          "proba": m.predict_proba(X[420:]).tolist(), "worst_case_error": m.worst_case_error}
    (OUT / "expected.json").write_text(json.dumps({"release": rev, "models": expected}, indent=1) + "\n")
    print(f"wrote {len(expected)} model files and expected.json to {OUT}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--prev", default="3c9b7f2")
    build(ap.parse_args().prev)
