"""Fit time and test error of marg's learners vs scikit-learn's LogisticRegression.

Run: python bench/learn.py [--splits 5]
     python bench/learn.py --adult-sites [--learners mrc,dcc,nb,renyi,auto,boost] [--baseline OTHER/bin/marg]
     [--vs-logreg]

``--adult-sites``: adult's training rows (a seeded 70/30 split) dealt to three sites, each
exported through the installed console script (``marg export SITE.tsv --epsilon 1``: with
DP, first-order and every pair table), then ``marg learn`` with each learner, timed as a
fresh process (start-up and bundle loading included), its test accuracy and certificate
beside it (``--timeout`` stops a learner; it is then reported as stopped). ``--baseline``
names another installation's ``marg`` (e.g. a virtual environment of an earlier commit): each
learner is then run by both, one after the other on the same bundles, side by side.
``--vs-logreg``: before each learner, scikit-learn's logistic regression on the pooled rows
(``bench/logreg_pooled.py``, a fresh process: start-up, reading, fit and predict), and the
ratios of the two wall times and of their CPU times (user + sys of the finished child,
``RUSAGE_CHILDREN``; interleaved pairs, so the load is shared). The exports are one
release of every table (``--rounds 1``), not the default select-then-measure study.

On kr-vs-kp and adult (codebook drafted by `marg schema init`'s drafting code: categorical
levels as seen, 4 quantile bins for numeric columns), random 70/30 splits. marg's learners
are fitted from a Summary of the training rows (first order + all pairs with the label);
the baseline is a non-private LogisticRegression trained on the one-hot encoded training
rows themselves. Time = summary already built → fitted model (the learner's work); the
time to count the tables is reported separately.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from marg.learners.classifiers.mrc import MRC  # noqa: E402
from marg.learners.classifiers.renyi import RenyiClassifier  # noqa: E402
from marg.marginals.draft import draft_codebook  # noqa: E402
from marg.marginals.data.encoding import encode_file  # noqa: E402
from marg.marginals.summary import Summary  # noqa: E402

DATASETS = Path(os.environ.get("MARG_DATASETS", ROOT.parent / "shared" / "datasets"))
SETS = {"kr-vs-kp": "kr-vs-kp/kr-vs-kp.tsv.gz", "adult": "adult/adult.tsv.gz"}


def onehot(cb, X):
    return np.hstack([np.eye(f.n_levels)[X[:, i].astype(int)] for i, f in enumerate(cb.features)])


def main() -> None:
    from sklearn.linear_model import LogisticRegression

    ap = argparse.ArgumentParser()
    ap.add_argument("--splits", type=int, default=5)
    args = ap.parse_args()
    print(f"# Learners vs LogisticRegression ({args.splits} random 70/30 splits; mean ± std)")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}\n")
    print("| dataset | n | features | count tables (s) | learner | fit time (s) | test error % | certificate |")
    print("|---|---|---|---|---|---|---|---|")
    for name, rel in SETS.items():
        path = DATASETS / rel
        cb = draft_codebook(path, "target")
        enc = encode_file(path, cb)
        X, y = enc.X, enc.y
        n = len(y)
        res: dict[str, dict[str, list]] = {k: {"t": [], "e": [], "c": []} for k in ("mrc", "renyi", "logreg")}
        t_count = []
        for seed in range(args.splits):
            idx = np.random.default_rng(seed).permutation(n)
            tr, te = idx[: int(0.7 * n)], idx[int(0.7 * n):]
            t0 = time.perf_counter()
            s = Summary.from_rows(cb, X[tr], y[tr], stats="all")
            t_count.append(time.perf_counter() - t0)
            for key, est in (("mrc", MRC()), ("renyi", RenyiClassifier())):
                t0 = time.perf_counter()
                est.fit(s)
                res[key]["t"].append(time.perf_counter() - t0)
                res[key]["e"].append(np.mean(est.predict(X[te]) != y[te]))
                res[key]["c"].append(est.worst_case_error_)
            Z = onehot(cb, X)
            t0 = time.perf_counter()
            lr = LogisticRegression(max_iter=2000).fit(Z[tr], y[tr])
            res["logreg"]["t"].append(time.perf_counter() - t0)
            res["logreg"]["e"].append(np.mean(lr.predict(Z[te]) != y[te]))
        for key, label in (("mrc", "marg MRC (from summaries)"), ("renyi", "marg Rényi (from summaries)"),
                           ("logreg", "sklearn LogisticRegression (raw rows)")):
            r = res[key]
            cert = f"{np.mean(r['c']):.3f}" if r["c"] else "—"
            print(f"| {name} | {n:,} | {cb.n_features} | {np.mean(t_count):.3f} | {label} | {np.mean(r['t']):.3f} ± "
                  f"{np.std(r['t']):.3f} | {100 * np.mean(r['e']):.2f} ± {100 * np.std(r['e']):.2f} | {cert} |")


def adult_sites(args) -> None:
    import gzip
    import subprocess
    import tempfile

    from marg.marginals.data.encoding import encode_file

    sys.path.insert(0, str(ROOT / "bench"))
    from privacy import adult_codebook

    exe = Path(sys.executable).parent / "marg"
    work = Path(tempfile.mkdtemp(prefix="marg-adult-sites-"))
    cb = adult_codebook()
    cb.save(work / "cb.json")
    lines = gzip.open(DATASETS / SETS["adult"], "rt").read().splitlines()
    head, rows = lines[0], lines[1:]
    idx = np.random.default_rng(0).permutation(len(rows))
    tr, te = idx[: int(0.7 * len(rows))], idx[int(0.7 * len(rows)):]
    bundles = []
    for k in range(3):
        (work / f"site{k}.tsv").write_text(head + "\n" + "\n".join(rows[i] for i in tr[k::3]) + "\n")
        subprocess.run([str(exe), "export", str(work / f"site{k}.tsv"), "--schema", str(work / "cb.json"), "--site",
                        f"site{k}",
                        "--epsilon", "1", "--rounds", "1", "--ledger", str(work / f"ledger{k}"), "--out",
                        str(work / f"site{k}.bundle")],
                       check=True, capture_output=True)
        bundles.append(str(work / f"site{k}.bundle"))
    (work / "test.tsv").write_text(head + "\n" + "\n".join(rows[i] for i in te) + "\n")
    test = encode_file(work / "test.tsv", cb)
    print(f"# adult, three sites ({len(tr):,} training rows, ε = 1 each, first-order and all pair tables), "
          f"{len(te):,} test rows")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"load average {os.getloadavg()[0]:.1f}\n")
    runs = [("", exe)] if not args.baseline else [("baseline ", Path(args.baseline)), ("", exe)]
    head = " | ".join(f"{who}`marg learn` (s) | {who}test accuracy | {who}certificate" for who, _ in runs)
    lr_head = (" logreg (s) | logreg CPU (s) | logreg accuracy | marg / logreg (wall) | marg / logreg (CPU) |"
               if args.vs_logreg else "")
    print(f"| learner | {head} |{lr_head}")
    print("|---|" + "---|---|---|" * len(runs) + "---|---|---|---|---|" * bool(args.vs_logreg))
    for learner in args.learners.split(","):
        cells, name = [], learner
        if args.vs_logreg:
            t0, c0 = time.perf_counter(), children_cpu()
            lr = subprocess.run([sys.executable, str(ROOT / "bench" / "logreg_pooled.py"),
                                 *(str(work / f"site{k}.tsv") for k in range(3)),
                                 "--test", str(work / "test.tsv")], check=True, capture_output=True, text=True)
            t_lr, cpu_lr = time.perf_counter() - t0, children_cpu() - c0
        for who, marg in runs:
            cell, chose, cpu = run_learner(marg, bundles, learner, work / f"{who.strip() or 'this'}-{learner}.model",
                                           work, test,
                                      args.timeout)
            cells.append(cell)
            name = f"auto (chose {chose})" if learner == "auto" and chose else name
        tail = ""
        if args.vs_logreg:
            t_marg = cells[-1].split(" ")[0]
            ratio = f"{float(t_marg) / t_lr:.2f}" if t_marg.replace(".", "").isdigit() else "—"
            tail = f" {t_lr:.1f} | {cpu_lr:.2f} | {lr.stdout.strip()} | {ratio} | {cpu / cpu_lr:.2f} |"
        print(f"| {name} | " + " | ".join(cells) + " |" + tail, flush=True)


def run_learner(marg, bundles, learner, out, work, test, timeout):
    """``marg learn`` as a fresh process: its table cells (seconds | accuracy | certificate), for auto the
    learner it chose, and the process's CPU seconds."""
    import json
    import subprocess

    from marg.api import load_model

    cmd = [str(marg), "learn", *bundles, "--learner", learner, "--allow-unsigned", "--no-sign", "--out", str(out),
           "--json"]
    t0, c0 = time.perf_counter(), children_cpu()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"stopped at {timeout:g} | — | —", None, children_cpu() - c0
    dt, cpu = time.perf_counter() - t0, children_cpu() - c0
    if r.returncode != 0:
        return f"{dt:.1f} (exit {r.returncode}: {r.stderr.strip().splitlines()[-1]}) | — | —", None, cpu
    rep = json.loads(r.stdout)
    value = rep.get("worst_case_error")
    model = load_model(out, allow_unsigned=True, schema=work / "cb.json")
    acc = float(np.mean(model.predict(test.X) == test.y))
    return f"{dt:.1f} | {acc:.4f} | {value if value is None else f'{float(value):.4f}'}", rep.get("learner"), cpu


def children_cpu() -> float:
    """User + sys CPU seconds of every finished child process so far."""
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime

if __name__ == "__main__":
    if "--adult-sites" in sys.argv:
        ap = argparse.ArgumentParser()
        ap.add_argument("--adult-sites", action="store_true")
        ap.add_argument("--learners", default="mrc,dcc,nb,renyi,auto,boost")
        ap.add_argument("--timeout", type=float, default=300.0)
        ap.add_argument("--baseline", default=None, help="another installation's marg console script, run side by side")
        ap.add_argument("--vs-logreg", action="store_true",
                        help="scikit-learn's logistic regression on the pooled rows beside each learner")
        adult_sites(ap.parse_args())
    else:
        main()
