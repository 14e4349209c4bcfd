"""The study side by side (issue 44's acceptance, first bullet): the study's default beside today's paths.

Run (one process per set may run at once; ``--report`` merges their JSON files)::

    nice -n 10 .venv/bin/python bench/study_accept.py --sets breast-w,credit-a --splits 5 --json R.json
    .venv/bin/python bench/study_accept.py --report R1.json R2.json --out bench/results/study_accept_DATE.md

Per set and split (a seeded 20 % test share, the rest in three sites of 50 / 30 / 20 %:
bench/privacy.py's ``adult_style_split``; codebooks: bench/privacy.py's for credit-a, house-votes-84,
kr-vs-kp and adult, bench/codebooks' public ones for breast-w, cleveland and hungarian, decoded by
bench/boost_data.py), ε = 1 and δ = 10⁻⁶ per site for everything it releases, on the same test rows:

(a) **study**: the study's default through the installed console script — ``marg study init`` (the
    roster of the three sites' and the learner's keys, ``--rows`` the sites' stated row counts, a local
    folder as the drop box), then ``marg study run`` at each site (its own ``$MARG_HOME``: keys, ledger,
    study state) and ``marg study run --learner`` until the learner says there is nothing next; the
    final model ``DROP/final/model.json`` scored by ``marg evaluate``; its certificate is the study's
    (held-out patients, pooled by secure aggregation; ``marg study status``);
(b) **two rounds**: today's per-site path, ``marg export --epsilon 1``, ``marg request``, ``marg export
    --request``, ``marg learn`` (bench/dp_select.py's :func:`marg_dp`, ``select``);
(c) **one round**: ``marg export --epsilon 1 --rounds 1``, ``marg learn`` (``marg_dp``, ``one-round``);
(d) **exact**: marg with exact summaries (``marg_exact``: every pair table up to 60 features);
(e) **larger class** of the training rows;
(f) **LR**: scikit-learn's LogisticRegression on the one-hot codes of the pooled training rows, the same
    bins (bench/uci.py's ``row_baseline_predict``; not private, a reference).

**Modes** (``--mode``): ``inprocess`` (the default) runs every command in this process — the study through
the library functions ``marg study`` calls (:func:`marg.study_runner.init_study`,
:func:`marg.study_site.run_site`, :func:`marg.study_learner.run_learner`, :func:`marg.study_runner.status`; each
party under its own ``$MARG_HOME``, :func:`party`), its model scored by :func:`marg.api.load_verified_model` and
:func:`marg.api.evaluate_file`; the per-site and exact paths through ``marg.cli.main``'s app in process
(:class:`InProcess`: ``marg export`` builds its request from options and site configuration the library does not
hold alone, so the command itself is called, without the subprocess). A split of a small set costs seconds.
``console`` runs each command as a subprocess of the installed script (the check that both agree; the path
``study (console)`` runs the study that way beside the in-process one). The noise is not seeded (OpenDP), and
every shared-noise share has σ ≥ ½ (:mod:`marg.marginals.shared_noise`), so two runs of the same split never
give bit-identical tables, even at a large ``--epsilon``: agreement is checked on repeated runs.

``--sites N`` re-splits each split's training rows into N equal sites (the issue's 10-site table); every path's
row records the noise its pooled tables carry (:func:`study_calls.pooled_noise`). The path ``study (top-k
what-if)`` is a diagnosis, not the study's behaviour (:func:`study_calls.top_k_what_if`): round 2 measures the
design's top k instead of only the features whose round-1 score is positive at 95 %.

The certificate column is each path's own (the study: holdout; the per-site paths: what ``marg learn``
reports). A path that fails on a split is recorded with its command and last error line.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


sys.path.insert(0, str(ROOT / "bench"))
import study_calls  # noqa: E402  (bench/study_calls.py: the one loader of the benches this one shares)

_bench = study_calls._bench


D = _bench("dp_select")  # the console, the sites' folders, the per-site DP and exact paths, the splits
U = _bench("uci")  # logistic regression on the pooled rows
C = _bench("study_calls")  # the study's commands in process or through the console; the pooled tables' noise
InProcess, StudyCalls, marg_study, pooled_noise, HOLDOUT_KEYS = (C.InProcess, C.StudyCalls, C.marg_study,
                                                                 C.pooled_noise, C.HOLDOUT_KEYS)
score_final = C.score_final
BOOST = {"breast-w": "bcw", "cleveland": "clvheart", "hungarian": "huheart"}
"""Our names → bench/boost_data.py's (public codebooks in bench/codebooks)."""
PATHS = ("study", "study (guard round)", "study (top-k what-if)", "study (console)", "two rounds", "one round", "exact",
         "larger class", "LR (pooled rows)")
TOL_EXACT = {"breast-w": 0.03, "credit-a": 0.03, "cleveland": 0.05, "hungarian": 0.05, "house-votes-84": 0.05}
"""The issue's tolerance of the study's mean against exact summaries' mean, on the sets under 1,000 patients."""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


_column_text = D.column_text


def column_text(feature, codes: np.ndarray) -> np.ndarray:
    """bench/dp_select.py's ``column_text``, and an empty cell (the reader's missing value) for the codebooks'
    missing code (one past the last bin: breast-w's Bare_Nuclei and the heart sets' '?')."""
    codes = np.asarray(codes, dtype=np.int64)
    values = len(feature.levels) if isinstance(feature, D.CategoricalFeature) else len(feature.edges) + 1
    missing = codes >= values
    text = _column_text(feature, np.where(missing, 0, codes))
    text[missing] = ""
    return text


D.column_text = column_text  # what D.write_rows calls, for the sites' and the test rows' files


class Sets(D.Sets):
    """bench/dp_select.py's sets, and breast-w, cleveland, hungarian with their public codebooks."""

    @staticmethod
    def _load(name: str):
        if name in BOOST:
            cb, X, y = _bench("boost_data").load(BOOST[name])
            X = np.asarray(X, dtype=np.float64)
            return (lambda tr: (cb, X)), np.asarray(y, dtype=np.int64)
        return D.Sets._load(name)


def one_split(name: str, rep: int, sets: Sets, marg, keys: Path, paths: set[str], sink, console=None) -> None:
    """Every path on split ``rep`` of ``name``; each result goes to ``sink`` as soon as it is known."""
    te, cb, X, y, sites = sets.split(name, rep)
    tr = np.concatenate(sites)
    if N_SITES["n"] != len(sites):  # --sites N: the same training rows in N sites of (nearly) equal size
        sites = np.array_split(np.random.default_rng(4400 + rep).permutation(tr), N_SITES["n"])
    rec = {"set": name, "split": rep, "n_train": int(tr.size), "n_test": int(te.size), "features": cb.n_features,
           "sites": [int(s.size) for s in sites]}

    def add(path, res, secs):
        r = dict(rec, path=path, seconds=round(secs, 1), **res)
        sink(r)
        log(f"{name} split {rep} {path}: " + (f"{r['error']:.4f}" + (f" (certificate {r['certificate']})"
                                                                     if r.get("certificate") is not None else "")
                                              if "error" in r
                                              else r.get("status", "?")) + f" ({secs:.0f} s)")

    maj = int(np.argmax(np.bincount(y[tr], minlength=len(cb.label.classes))))
    add("larger class", {"error": float(np.mean(y[te] != maj))}, 0.0)
    t0 = time.perf_counter()
    pred = U.row_baseline_predict("logreg-rows", cb, X[tr], y[tr], X[te])
    add("LR (pooled rows)", {"error": float(np.mean(pred != y[te]))}, time.perf_counter() - t0)
    with tempfile.TemporaryDirectory(prefix=f"accept-{name}-{rep}-") as d:
        runs = {
            "study": lambda w, st: marg_study(StudyCalls(marg, isinstance(marg, InProcess)), st, keys, w, cb, X[te],
                                              y[te]),
            "study (top-k what-if)": lambda w, st: _what_if(marg, st, keys, w, cb, X[te], y[te]),
            "study (console)": lambda w, st: marg_study(StudyCalls(console, False), st, keys, w, cb, X[te], y[te]),
            "two rounds": lambda w, st: D.marg_dp(marg, st, "select"),
            "one round": lambda w, st: D.marg_dp(marg, st, "one-round"),
            "exact": lambda w, st: D.marg_exact(marg, st, cb.n_features),
        }
        for path, fn in runs.items():
            if path not in paths:
                continue
            work = Path(d) / path.replace(" ", "-")
            work.mkdir()
            st = D.Study(work, keys, cb, X, y, sites, te)  # each path: its own sites' folders, homes and ledgers
            t0 = time.perf_counter()
            try:
                res = fn(work, st)
                res.update(pooled_noise(path, work, st))
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                res = {"status": f"failed: {exc}"[:400]}
            add(path, res, time.perf_counter() - t0)


def _what_if(marg, st, keys, work, cb, Xte, yte) -> dict:
    """The study in process with round 2 measuring the design's top k (:func:`study_calls.top_k_what_if`)."""
    with C.top_k_what_if():
        return marg_study(StudyCalls(marg, True), st, keys, work, cb, Xte, yte)


N_SITES: dict = {"n": 3}
"""``--sites N``: the split's training rows re-split into N equal sites (3: the issue's 50 / 30 / 20 %)."""


# --------------------------------------------------------------------------- the report


def _by(rows: list[dict]) -> dict:
    by: dict = {}
    for r in rows:
        by.setdefault(r["path"], {})[r["split"]] = r
    return by


def targets(rows: list[dict], name: str) -> list[str]:
    """The issue's targets for the study path on one set, each met / not met with its numbers."""
    by = _by(rows)
    st, maj, ex = by.get("study", {}), by.get("larger class", {}), by.get("exact", {})
    ok = {s: r["error"] for s, r in st.items() if "error" in r}
    failed = sorted(s for s, r in st.items() if "error" not in r)
    lines = []
    worst = {s: e - maj[s]["error"] for s, e in ok.items()}
    if ok:
        above = [s for s, v in worst.items() if v > 0.01]
        lines.append(f"never above the larger class + 0.01: **{'not met' if above else 'met'}** on {len(ok)} split(s) "
                     f"(worst study − larger class {max(worst.values()):+.3f}"
                     + (f"; above on split {', '.join(map(str, above))}" if above else "") + ")")
        below = sum(v < 0 for v in worst.values())
        need = 4 if len(ok) >= 5 else None
        lines.append("strictly below the larger class on ≥ 4 of 5 splits: "
                     + (f"**{'met' if below >= 4 else 'not met'}** ({below} of {len(ok)})" if need else
                        f"**not assessable** ({below} of {len(ok)} splits run; 5 needed)"))
        exs = [ex[s]["error"] for s in ok if s in ex and "error" in ex[s]]
        if name in TOL_EXACT and exs:
            gap = float(np.mean([ok[s] for s in ok if s in ex and "error" in ex[s]]) - np.mean(exs))
            lines.append(f"within {TOL_EXACT[name]:.2f} of exact summaries (mean): "
                         f"**{'met' if gap <= TOL_EXACT[name] else 'not met'}** (study − exact {gap:+.3f} over "
                         f"{len(exs)} split(s))")
    if failed:
        lines.append(f"the study failed on split(s) {', '.join(map(str, failed))} (error text in the table)")
    return lines


def table(rows: list[dict], name: str) -> list[str]:
    by = _by(rows)
    splits = sorted({r["split"] for r in rows})
    present = [p for p in PATHS if p in by]
    head = "| split | " + " | ".join(f"{p}: error (cert.)" if p not in ("larger class", "LR (pooled rows)")
                                     else f"{p}: error"
                                      for p in present) + " |"
    lines = [head, "|---|" + "---|" * len(present)]

    def cell(r):
        if r is None:
            return "–"
        if "error" not in r:
            return r.get("status", "?")
        c = r.get("certificate")
        return f"{r['error']:.3f}" + (f" ({c:.3f})" if isinstance(c, (int, float)) else "")

    for s in splits:
        lines.append(f"| {s} | " + " | ".join(cell(by[p].get(s)) for p in present) + " |")
    means = []
    for p in present:
        e = [by[p][s]["error"] for s in splits if s in by[p] and "error" in by[p][s]]
        c = [by[p][s]["certificate"] for s in splits if s in by[p]
             and isinstance(by[p][s].get("certificate"), (int, float))]
        means.append((f"{np.mean(e):.3f}" if e else "–") + (f" ({np.mean(c):.3f})" if c else "")
                     + (f" [{len(e)} of {len(splits)}]" if len(e) < len(splits) else ""))
    lines.append("| mean | " + " | ".join(means) + " |")
    secs = [f"{np.mean([by[p][s]['seconds'] for s in by[p]]):.0f}" for p in present]
    lines.append("| wall s / split | " + " | ".join(secs) + " |")
    chose = {s: by["study"][s].get("chose") for s in splits if s in by.get("study", {}) and by["study"][s].get("chose")}
    if chose:
        lines += ["", "The study's model per split: " + "; ".join(f"{s}: {c}" for s, c in chose.items())]
    return lines


def report(files: list[Path], out: Path) -> None:
    keyed, meta = {}, []
    for f in files:  # a later file's result for the same (set, split, path) replaces an earlier one's
        d = json.loads(Path(f).read_text())
        for r in d["results"]:
            keyed[(r["set"], r["split"], r["path"])] = r
        meta += d["meta"] if isinstance(d["meta"], list) else [d["meta"]]  # an earlier report's merge: its runs
    rows = list(keyed.values())
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "results": rows}, indent=1))
    text = [f"# The study side by side (issue 44's acceptance; {meta[0]['date']})", ""]
    text += [f"- `{m['command']}` — {m['machine']}; {m.get('wall_seconds', 0):.0f} s" for m in meta] + [""]
    for name in dict.fromkeys(r["set"] for r in rows):
        rs = [r for r in rows if r["set"] == name]
        r0 = rs[0]
        text += [f"## {name} ({r0['n_train']} training rows in sites {'/'.join(map(str, r0['sites']))}, "
                 f"{r0['n_test']} test rows, {r0['features']} features; {len({r['split'] for r in rs})} split(s))", ""]
        text += table(rs, name) + [""] + [f"- {t}" for t in targets(rs, name)] + [""]
    out.write_text("\n".join(text) + "\n")
    print("\n".join(text))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="breast-w,cleveland,hungarian,house-votes-84,credit-a",
                    help="comma-separated: breast-w, cleveland, hungarian, house-votes-84, credit-a, kr-vs-kp, adult")
    ap.add_argument("--splits", type=int, default=5)
    ap.add_argument("--first-split", type=int, default=0)
    ap.add_argument("--paths", default="study,two rounds,one round,exact",
                    help="which marg paths to run (the larger class and LR always run)")
    ap.add_argument("--mode", choices=("inprocess", "console"), default="inprocess",
                    help="inprocess (default): the study through marg.study_runner / study_site / study_learner and "
                         "the per-site commands through marg.cli.main's app, in this process; console: every command "
                         "a subprocess of the installed script. The path 'study (console)' runs the study through the "
                         "console beside it")
    ap.add_argument("--sites", type=int, default=3, help="sites per split (3: 50/30/20 %%; else equal sites)")
    ap.add_argument("--epsilon", type=float, default=D.EPSILON,
                    help="each site's total ε (default 1, the issue's); a large ε makes the noise negligible, so both "
                         "modes must give the same model (with --holdout-key-seed)")
    ap.add_argument("--holdout-key-seed", help="derive each study site's held-out split key from this (agreement "
                                               "check)")
    ap.add_argument("--marg-timeout", type=float, default=3600.0, help="seconds per marg command")
    ap.add_argument("--json", type=Path, help="raw results, rewritten after every path (default beside --out)")
    ap.add_argument("--report", type=Path, nargs="+", help="render these JSON files as markdown (no run)")
    ap.add_argument("--out", type=Path, help="the markdown (default bench/results/study_accept_DATE.md)")
    ap.add_argument("--score-final", type=Path, nargs="+", metavar="SET:SPLIT:DIR",
                    help="no run: score the final models copied from finished studies' drop boxes (DIR/model.json, "
                         "DIR/result.json) as the study path's rows of those splits, into --json")
    a = ap.parse_args()
    date = dt.date.today().isoformat()
    md = a.out or ROOT / "bench" / "results" / f"study_accept_{date}.md"
    if a.report:
        return report(a.report, md)
    if a.score_final:
        rows = []
        for spec in a.score_final:
            name, rep, final = str(spec).split(":", 2)
            te, cb, X, y, sites = Sets().split(name, int(rep))
            rows.append({"set": name, "split": int(rep), "n_train": int(sum(map(len, sites))), "n_test": int(te.size),
                         "features": cb.n_features, "sites": [int(s.size) for s in sites], "path": "study",
                         "seconds": 0.0,
                         **score_final(Path(final), cb, X[te], y[te]),
                         "evaluate": "scored from the final model copied from the study's drop box"})
        meta = {"date": date, "command": "python bench/study_accept.py " + " ".join(sys.argv[1:]),
                "machine": platform.machine()}
        return (a.json or md.with_suffix(".scored.json")).write_text(json.dumps({"meta": meta, "results": rows},
                                                                                indent=1))
    import warnings

    warnings.filterwarnings("ignore")
    paths = {p.strip() for p in a.paths.split(",") if p.strip()}
    t_run = time.perf_counter()
    meta = {"date": date, "command": "python bench/study_accept.py " + " ".join(sys.argv[1:]),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()} (loaded by "
                       "parallel work)"}
    D.EPSILON = a.epsilon
    N_SITES["n"] = a.sites
    HOLDOUT_KEYS["seed"] = a.holdout_key_seed
    console = D.Console(a.marg_timeout)
    sets, marg, results = Sets(), (InProcess() if a.mode == "inprocess" else console), []
    meta["mode"] = a.mode
    js = a.json or md.with_suffix(".run.json")
    with tempfile.TemporaryDirectory(prefix="accept-keys-") as kd:
        keys = Path(kd)
        D.make_keys(marg, keys, a.sites)

        def sink(r: dict) -> None:  # after every path: partial results survive a stopped run
            results.append(r)
            meta["wall_seconds"] = time.perf_counter() - t_run
            js.write_text(json.dumps({"meta": meta, "results": results}, indent=1))

        for name in [s.strip() for s in a.sets.split(",") if s.strip()]:
            for rep in range(a.first_split, a.first_split + a.splits):
                one_split(name, rep, sets, marg, keys, paths, sink, console)
    report([js], md)


if __name__ == "__main__":
    main()
