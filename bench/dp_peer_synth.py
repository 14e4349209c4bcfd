"""Central DP synthetic data, then logistic regression: the peer of bench/dp_select.py (issue 34).

Runs in the peer's own Python (``$MARG_PEER_PYTHON``: a venv with smartnoise-synth, which pins
its own opendp and private-pgm (``mbi``), so it never enters marg's venv); bench/dp_select.py
calls it as a subprocess with a time box. Not importable from marg's venv (it imports snsynth).

The peer's venv (smartnoise-synth 1.0.8 pins ``mbi<2`` — private-pgm on JAX — and, through
smartnoise-sql, ``opendp<0.15``; its ``opacus`` and ``pac-synth`` serve only the GAN and
MWEM-style synthesizers, and opacus pulls torch with several GB of CUDA wheels, so it is
installed without them)::

    python3.11 -m venv /work/wt/peer-venv
    /work/wt/peer-venv/bin/pip install --no-deps smartnoise-synth==1.0.8
    /work/wt/peer-venv/bin/pip install "mbi>=1.1,<2" "smartnoise-sql>=1.0.10" "disjoint-set>=0.9,<0.10" \\
        Faker scikit-learn pandas
    export MARG_PEER_PYTHON=/work/wt/peer-venv/bin/python

Run: $MARG_PEER_PYTHON bench/dp_peer_synth.py ARRAYS.npz METHOD EPSILON DELTA SEED [OPTIONS-JSON]

``OPTIONS-JSON`` (optional): keyword arguments for the synthesizer's constructor, e.g.
``{"rounds": 37}`` for AIM (smartnoise-synth's ``AIMSynthesizer(rounds=, max_model_size=,
max_cells=, degree=, num_marginals=)``); bench/dp_select.py's ``--aim-rounds`` passes them.

``ARRAYS.npz`` holds the pooled training rows' codes ``Xtr`` (n × p, integer codes of the
study's codebook), their labels ``ytr``, the test rows ``Xte``, ``yte`` and ``levels`` (the
number of codes of each feature: the codebook's public domain). ``METHOD``:

- ``aim`` / ``mst``: smartnoise-synth's AIM / MST at (EPSILON, DELTA) on every training row
  and its label pooled at one curator (every column categorical; ``preprocessor_eps = 0``:
  smartnoise's transformer reads the categories from the data, the peer's default usage),
  a synthetic table of n rows, then scikit-learn's LogisticRegression (C = 1, one-hot codes
  over the public domain) fitted on it and scored on the real test rows;
- ``lr``: the same logistic regression on the real training rows (no privacy: context).

Prints one JSON line last: ``{"error": …, "seconds": …, "classes_in_synthetic": …}``.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np


def logistic_error(A, ya, B, yb, levels) -> float:
    """Test error of LogisticRegression (C = 1) on the one-hot codes (categories = the public domain);
    a training table with one class answers that class."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import OneHotEncoder

    if np.unique(ya).size < 2:
        return float(np.mean(yb != ya[0]))
    enc = OneHotEncoder(categories=[np.arange(int(m)) for m in levels], handle_unknown="ignore")
    enc.fit(np.zeros((1, len(levels)), dtype=int))
    model = LogisticRegression(C=1.0, max_iter=2000).fit(enc.transform(A), ya)
    return float(np.mean(model.predict(enc.transform(B)) != yb))


def synthesize(method: str, Xtr, ytr, epsilon: float, delta: float, seed: int, options: dict | None = None):
    """(synthetic codes, synthetic labels) from smartnoise-synth's ``method`` on the pooled rows;
    ``options``: further keyword arguments of the synthesizer (its documented constructor)."""
    import pandas as pd
    from snsynth import Synthesizer

    np.random.seed(seed)
    cols = [f"x{j}" for j in range(Xtr.shape[1])] + ["label"]
    df = pd.DataFrame(np.column_stack([Xtr, ytr]).astype(np.int64), columns=cols)
    synth = Synthesizer.create(method, epsilon=epsilon, delta=delta, verbose=False, **(options or {}))
    synth.fit(df, categorical_columns=cols, preprocessor_eps=0.0)
    out = synth.sample(len(df))
    S = out[cols].to_numpy(dtype=np.int64)
    return S[:, :-1], S[:, -1]


def main() -> None:
    path, method, eps, delta, seed = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
    options = json.loads(sys.argv[6]) if len(sys.argv) > 6 else {}
    d = np.load(path)
    Xtr, ytr, Xte, yte, levels = d["Xtr"], d["ytr"], d["Xte"], d["yte"], d["levels"]
    t0 = time.perf_counter()
    if method == "lr":
        A, ya = Xtr, ytr
    else:
        A, ya = synthesize(method, Xtr, ytr, eps, delta, seed, options)
    A = np.clip(A, 0, np.asarray(levels) - 1)
    err = logistic_error(A, ya, Xte, yte, levels)
    print(json.dumps({"error": err, "seconds": time.perf_counter() - t0,
                      "classes_in_synthetic": int(np.unique(ya).size), "options": options}), flush=True)


if __name__ == "__main__":
    main()
