"""Boost on DP releases before and after its box read the tables as released (issue 47).

Run: python bench/boost_released_n.py export DIR [--sets vote] [--folds 3] [--eps 1]
     python bench/boost_released_n.py fit DIR OUT.json        (with PYTHONPATH at the release to measure)
     python bench/boost_released_n.py compare BEFORE.json AFTER.json

``export`` deals each fold's training rows (``boost_data.folds``, repetition 0) to three sites and
exports their bundles at ε (``export_site``, stats = all), once, so that both releases fit the SAME
noisy tables: the noise is drawn at export. ``fit`` loads each fold's bundles (``load_summary``) and
fits ``BoostVote()`` (the default calibrated λ) with whatever ``marg`` is on the path; it records
the two n's, accuracy on the test rows, the certificate, ‖μ‖₀ and the rules. ``compare`` prints
one line per fold and the means.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE))

import numpy as np  # noqa: E402


def export(root: Path, sets: list[str], n_folds: int, eps: float) -> None:
    from boost_data import folds, load
    from privacy import ArraySource

    from marg.protocols.export import export_site

    for name in sets:
        cb, X, y = load(name)
        for f, (tr, te) in enumerate(folds(y, 0)[:n_folds]):
            d = root / name / str(f)
            d.mkdir(parents=True, exist_ok=True)
            site = np.random.default_rng(f).integers(0, 3, size=tr.size)
            for k in range(3):
                rows = tr[site == k]
                export_site(ArraySource(f"site{k}", X[rows], y[rows]), cb, f"site{k}", d / f"site{k}.bundle",
                            epsilon=eps, stats="all")
            (d / "test.json").write_text(json.dumps([int(i) for i in te]))


def fit(root: Path, out: Path) -> None:
    from boost_data import load

    from marg.learners.boost.vote import BoostVote
    from marg.protocols.load import load_summary

    recs = []
    for d in sorted(p for p in root.glob("*/*") if p.is_dir()):
        name = d.parent.name
        cb, X, y = load(name)
        te = np.asarray(json.loads((d / "test.json").read_text()))
        S = load_summary(sorted(d.glob("site*.bundle")), allow_unsigned=True)
        t0 = time.perf_counter()
        est = BoostVote().fit(S)
        recs.append({"set": name, "fold": int(d.name), "n": float(S.n), "n_released": float(S.released().n),
                     "acc": float(np.mean(est.predict(X[te].astype(float)) == y[te])),
                     "certificate": float(est.certificate_.value), "terms": int(est.n_terms_),
                     "rules": [f"{r['weight']:+.4f} {r['class']}: {r['rule']}" for r in est.rules()],
                     "seconds": round(time.perf_counter() - t0, 2)})
        print(json.dumps({k: v for k, v in recs[-1].items() if k != "rules"}), flush=True)
    out.write_text(json.dumps(recs, indent=1))


def compare(before: Path, after: Path) -> None:
    b, a = json.loads(before.read_text()), json.loads(after.read_text())
    for x, z in zip(b, a):
        print(f"{x['set']} fold {x['fold']}: n {x['n']:.1f} n_released {x['n_released']:.1f} | certificate "
              f"{x['certificate']:.4f} -> {z['certificate']:.4f} | acc {x['acc']:.3f} -> {z['acc']:.3f} | terms "
              f"{x['terms']} -> {z['terms']} | rules {'same' if x['rules'] == z['rules'] else 'differ'}")
    for k in ("certificate", "acc", "terms", "seconds"):
        print(f"mean {k}: {np.mean([x[k] for x in b]):.4f} -> {np.mean([z[k] for z in a]):.4f}")


if __name__ == "__main__":
    cmd, *args = sys.argv[1:]
    if cmd == "export":
        import argparse

        ap = argparse.ArgumentParser()
        ap.add_argument("dir")
        ap.add_argument("--sets", default="vote")
        ap.add_argument("--folds", type=int, default=3)
        ap.add_argument("--eps", type=float, default=1.0)
        o = ap.parse_args(args)
        export(Path(o.dir), o.sets.split(","), o.folds, o.eps)
    elif cmd == "fit":
        fit(Path(args[0]), Path(args[1]))
    else:
        compare(Path(args[0]), Path(args[1]))
