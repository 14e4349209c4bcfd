"""Issue 49: naive Bayes on a suppressed release with and without the features whose class column is hidden at every site.

Run: MARG_DATASETS=/work/shared/datasets nice -n 10 python bench/hidden_everywhere_49.py [--sets huheart,clvheart,vote,credit]

The same splits and sites as ``bench/choice_49.py`` (seed 1000 + split, 70/30, three sites 50/30/20 %, exact tables
with ``min_cell_policy="suppress"``). A class column hidden at every site has no released part, so naive Bayes reads
it spread evenly (:mod:`marg.marginals.hidden`); printed per split: the test error of marg's ``NaiveBayes`` on the
measured features, and on those without such a column (the same, when none would be left).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]


def main() -> None:
    from marg.learners.naive_bayes import NaiveBayes
    from marg.protocols.export import export_site
    from marg.protocols.load import load_summary

    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", default="huheart,clvheart,vote,credit")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    spec = importlib.util.spec_from_file_location("choice_49", ROOT / "bench" / "choice_49.py")
    c49 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(c49)
    priv = c49._bench("privacy")
    for name in a.sets.split(","):
        make, y = c49.load(name)
        res = []
        for rep in range(a.reps):
            rng = np.random.default_rng(1000 + rep)
            perm = rng.permutation(y.size)
            n_te = int(round(0.3 * y.size))
            te, tr = perm[:n_te], perm[n_te:]
            cb, X = make(tr)
            sites = np.split(tr, np.cumsum([int(c49.SHARES[0] * tr.size), int(c49.SHARES[1] * tr.size)]))
            with tempfile.TemporaryDirectory() as d:
                paths = []
                for k, s in enumerate(sites):
                    out = Path(d) / f"site{k}.bundle"
                    export_site(priv.ArraySource(f"site{k}", X[s], y[s]), cb, f"site{k}", out, min_cell_policy="suppress")
                    paths.append(out)
                S = load_summary(paths, allow_unsigned=True)
            lab = cb.label.name
            meas = [f.name for f in cb.features if f.name not in S.unmeasured]
            everywhere = [f for f in meas if (b := S.count_bounds((f, lab))) is not None
                          and np.any((b[0].sum(axis=0) == 0) & (S.class_counts > 0))]
            rest = [f for f in meas if f not in everywhere]
            err = lambda m: float(np.mean(m.predict(X[te]) != y[te]))  # noqa: E731
            full = err(NaiveBayes(features=meas).fit(S))
            res.append((full, err(NaiveBayes(features=rest).fit(S)) if rest else full))
            print(f"{name} split {rep}: nb {res[-1][0]:.3f}, without the {len(everywhere)} of {len(meas)} features hidden "
                  f"everywhere {res[-1][1]:.3f}", flush=True)
        m = np.mean(res, axis=0)
        print(f"{name} mean: nb {m[0]:.3f}, without {m[1]:.3f}", flush=True)


if __name__ == "__main__":
    main()
