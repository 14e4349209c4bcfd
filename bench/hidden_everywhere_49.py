"""Issue 49: naive Bayes on a suppressed release — hidden tails against whole hidden columns, and without the
features hidden whole at every site.

Run: MARG_DATASETS=/work/shared/datasets nice -n 10 python bench/hidden_everywhere_49.py
[--sets bcw,clvheart,huheart,credit,vote,adult] [--reps 5]

The same splits and sites as ``bench/choice_49.py`` (seed 1000 + split, 70/30, three sites 50/30/20 %, exact
first-order tables, ``min_cell_policy="suppress"``, k = 3, each site's bundle loaded by ``marg learn``'s loader).
Printed per split, the test error of marg's ``NaiveBayes`` on

- ``tails``: the release as exported (each class column holding a small cell hides its tail,
  :mod:`marg.marginals.suppression`);
- ``whole``: the former rule's release of the same rows — every class column holding a small cell hidden whole
  (what the release lost before issue 49 (hidden); naive Bayes reads it the same way, :mod:`marg.marginals.hidden`);
- ``tails, measured``: the tails release without the features whose class columns are hidden whole at every site
  (nothing released of them beyond the class totals: naive Bayes reads them spread evenly);
- ``unsuppressed``: the same rows' exact tables without suppression (what any release rule can reach);

and the hidden cells of each release.
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


def whole_columns(site_tables, label: str):
    """One site's release under the former rule: each class column that hides a tail, hidden whole (the truth is
    not needed: a tail's column is released as 0 from the top, its rows all known by the class total)."""
    from marg.marginals.hidden import mark_hidden
    from marg.marginals.counts.tables import MarginalTable

    out = []
    for t in site_tables:
        if t.hidden is not None:
            c = np.array(t.counts, dtype=np.float64)
            gone = sorted({p.cls for p in t.hidden_tails})
            c[:, gone] = 0
            t = MarginalTable(t.clique, c, t.noise, t.kind)
        out.append(t)
    return mark_hidden(out, label)


def main() -> None:
    from marg.learners.classifiers.naive_bayes import NaiveBayes
    from marg.marginals.summary import Summary, sum_tables
    from marg.protocols.bundle import load_bundle
    from marg.protocols.export import export_site
    from marg.protocols.load import load_summary
    from marg.marginals.hidden import mark_hidden

    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", default="bcw,clvheart,huheart,credit,vote,adult")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    spec = importlib.util.spec_from_file_location("choice_49", ROOT / "bench" / "choice_49.py")
    c49 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(c49)
    priv = c49._bench("privacy")
    print("| set | split | hidden cells (tails / whole) | nb tails | nb whole | nb tails, measured | nb unsuppressed "
          "| nb rows |")
    print("|---|---|---|---|---|---|---|---|")
    means = {}
    for name in a.sets.split(","):
        make, y = c49.load(name)
        res = []
        for rep in range(a.reps):
            rng = np.random.default_rng(1000 + rep)
            perm = rng.permutation(y.size)
            n_te = int(round(0.3 * y.size))
            te, tr = perm[:n_te], perm[n_te:]
            cb, X = make(tr)
            lab = cb.label.name
            sites = np.split(tr, np.cumsum([int(c49.SHARES[0] * tr.size), int(c49.SHARES[1] * tr.size)]))
            with tempfile.TemporaryDirectory() as d:
                paths = []
                for k, s in enumerate(sites):
                    out = Path(d) / f"site{k}.bundle"
                    export_site(priv.ArraySource(f"site{k}", X[s], y[s]), cb, f"site{k}", out,
                                min_cell_policy="suppress")
                    paths.append(out)
                S = load_summary(paths, allow_unsigned=True)
                per_site = [mark_hidden(load_bundle(p).tables, lab) for p in paths]
            old = [whole_columns(ts, lab) for ts in per_site]
            W = Summary(cb, sum_tables(old)[0])
            n_tail = sum(m - p.start for ts in per_site for t in ts for p in t.hidden_tails for m in [t.shape[0]])
            n_whole = sum(t.shape[0] for ts in old for t in ts for _ in t.hidden_tails)
            meas = [f.name for f in cb.features if f.name not in S.unmeasured]
            everywhere = [f for f in meas if (b := S.count_bounds((f, lab))) is not None
                          and np.any((b[0].sum(axis=0) == 0) & (S.class_counts > 0))]
            rest = [f for f in meas if f not in everywhere]
            err = lambda m: float(np.mean(m.predict(X[te]) != y[te]))  # noqa: E731
            tails = err(NaiveBayes(features=meas).fit(S))
            whole = err(NaiveBayes(features=[f for f in meas if f not in W.unmeasured] or meas).fit(W))
            measured = err(NaiveBayes(features=rest).fit(S)) if rest else tails
            unsup = err(NaiveBayes().fit(Summary.from_rows(cb, X[tr], y[tr])))
            rows = c49.pooled_baselines(X, y, tr, te, cb)["nb_rows"]
            res.append((tails, whole, measured, unsup, rows))
            print(f"| {c49.NAMES.get(name, name)} | {rep} | {n_tail} / {n_whole} | {tails:.3f} | {whole:.3f} | "
                  f"{measured:.3f} | {unsup:.3f} | {rows:.3f} |", flush=True)
        means[name] = np.mean(res, axis=0)
    print("\n| set | nb tails | nb whole | nb tails, measured | nb unsuppressed | nb rows |")
    print("|---|---|---|---|---|---|")
    for name, m in means.items():
        print(f"| {c49.NAMES.get(name, name)} | " + " | ".join(f"{v:.3f}" for v in m) + " |")


if __name__ == "__main__":
    main()
