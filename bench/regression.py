"""Regression against the previous release: the same R*, μ, predictions and certificates, fit times side by side.

Run: MARG_DATASETS=/work/wt/shared/datasets python bench/regression.py [--prev REV] [--new REV|DIR] [--quick]
     [--groups uci,dp,cg] [--repeat N] [--out bench/out/regression.md] [--json bench/results/regression.json]

Each release runs in its own process, so both may be under ``marg.`` with any inner layout:

1. each side is a git revision, extracted with ``git archive`` (``--prev``, default
   :data:`PREVIOUS`: the last commit before issue 47 moved the learners), or a directory
   (``--new``, default this working tree, copied without its build folders); it is installed
   non-editable with ``pip install --no-deps --target`` into its own folder
   under bench/out/regression/ (a revision once, a directory on every run);
2. this process draws the inputs once, with this checkout's marginals layer — the count tables
   of every case (exact tables of the UCI splits and gene sets; under DP the same noisy tables,
   summed over three sites) and its test rows — and writes them to a folder of this run (JSON
   and .npz; bench/regression_cases.py);
3. one worker per side (bench/regression_worker.py, ``PYTHONPATH`` its install only) builds
   its Summary from those tables and fits on command; the fits alternate prev, new, new, prev, …
   (so that neither side always runs second; ``--repeat`` each, after one untimed fit of each
   configuration a side has not fitted yet, more for fits of a fraction of a second,
   :data:`FAST_ROUNDS`; one BLAS thread each), and the median of each side's fit times is
   reported with new/prev, per configuration and per learner (the sum of its configurations'
   medians). The time compared is the worker's CPU time
   (``time.process_time``; ``--clock wall`` for wall-clock time, recorded in the JSON either way):
   on a machine shared with other jobs a fit's wall time also counts the neighbours' slices;
4. each worker dumps R* (``minimax_risk_``), the certificate (``worst_case_error_``, kind,
   coverage, box), μ (or Rényi's z) and its predictions on the test rows, from its first fit;
   this process compares them: max |ΔR*| and |ΔW| ≤ 1e-9, no prediction differing, the
   certificates equal (kind, coverage, flags; value and box within 1e-9), max |Δμ| ≤ 1e-6.

Configurations (``--groups``; the default is ``uci,dp,cg``):

- ``uci``: the UCI sets of bench/uci.py (house-votes-84, credit-a, kr-vs-kp, promoters; adult
  outside ``--quick``; 70/30 splits, seeds 0.., 4 bins): dcc (CMI forest), dcc-label, gdcc,
  dcc-cal, dcc-hinge, dcc-all (local polytope; not on promoters and adult), gdcc-cal, mrc
  (full LP, s = 0), mrc-cal, mrc-cg, mrc-cg-cal, renyi; group-lasso and gbd selection on
  votes and credit (selected features and objective);
- ``dp``: bench/privacy.py's adult (3 sites, ε = 1 per site, Laplace): mrc on first-order
  tables, renyi and dcc on all pairs;
- ``cg`` (not under ``--quick``): bench/mrc_highdim.py's colon, leukemia, arcene (terciles):
  MRC by column generation at s = 0.3 and calibrated;
- ``engine``: MRC and DCC on the row-generation formulation (full, column generation, greedy
  edges) on votes, credit, kr-vs-kp;
- ``boost``: ``BoostVote(time_limit=None)`` as bench/regression_boost.py fits it.

``--quick``: one split, the small UCI sets, DP, 4 fits a side (under 10 minutes on 2 shared cores).
The table goes to ``--out`` (Markdown), every number to ``--json``; the exit status is 1 when
a configuration differs.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import io
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))
WORK = ROOT / "bench" / "out" / "regression"
WORKER = ROOT / "bench" / "regression_worker.py"
PREVIOUS = "2ba34d8"
"""The previous release: main when issue 47 began (flat ``learners/``, the minimax engine's old module names)."""
TOL = 1e-9
MU_TOL = 1e-6
"""μ (or z) within this of the previous release's: an LP's point to its solver's tolerance."""
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
FAST_ROUNDS, FAST_SECONDS = 5, 2.0
"""A fast fit gets more rounds: up to FAST_ROUNDS × ``--repeat`` while both sides took under FAST_SECONDS for it."""


def bench_module(name: str):
    """A bench/ script as a module (bench/ is not a package, and stays off ``sys.path``)."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ------------------------------------------------------------------ the two sides
def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True).stdout.strip()


def source_tree(side: str) -> tuple[Path, str, bool]:
    """(source folder, label, cached): a directory as it is, or a revision extracted by ``git archive``."""
    if Path(side).is_dir():
        d = Path(side).resolve()
        dest = WORK / f"src-dir-{hashlib.sha1(str(d).encode()).hexdigest()[:8]}"
        shutil.rmtree(dest, ignore_errors=True)
        junk = shutil.ignore_patterns(".git", ".venv", "out", "build", "dist", "*.egg-info", "__pycache__",
                                      ".pytest_cache",
                                      ".hypothesis")
        shutil.copytree(d, dest, ignore=junk)
        try:
            head = git("rev-parse", "--short", "HEAD", cwd=d)
            dirty = " + uncommitted changes" if git("status", "--porcelain", "--untracked-files=no", cwd=d) else ""
        except subprocess.CalledProcessError:
            head, dirty = "?", ""
        return dest, f"{d} (at {head}{dirty})", False
    sha = git("rev-parse", "--verify", f"{side}^{{commit}}")
    dest = WORK / f"src-{sha[:12]}"
    if not (dest / "pyproject.toml").is_file():
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        data = subprocess.run(["git", "-C", str(ROOT), "archive", sha], check=True, capture_output=True).stdout
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            tar.extractall(dest, filter="data")
    return dest, f"{side} ({sha[:12]})", True


def install(src: Path, cached: bool) -> Path:
    """``pip install --target`` of ``src`` into its own folder (a revision's install is kept)."""
    site = WORK / ("site-" + src.name[4:])
    if cached and (site / "marg" / "__init__.py").is_file():
        return site
    shutil.rmtree(site, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(site), str(src)], check=True, cwd=src)
    return site


class Worker:
    """One side's worker process: commands in, one JSON answer a line out."""

    def __init__(self, label: str, site: Path, inputs: Path, threads: int = 1):
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        env["PYTHONPATH"] = str(site)
        for var in THREAD_VARS:  # one BLAS thread: on a shared machine a second thread's wait is most of the spread
            env[var] = str(threads)
        self.label, self.site = label, site
        self.proc = subprocess.Popen([sys.executable, str(WORKER), str(inputs)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=env, cwd=str(WORK), text=True, bufsize=1)
        hello = self.answer()
        if Path(hello["marg"]).resolve() != (site / "marg").resolve():
            raise SystemExit(f"{label}: the worker imported marg from {hello['marg']}, not from {site}")
        self.version = hello["version"]

    def answer(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"{self.label}: the worker stopped (exit {self.proc.wait()}); its stderr says why")
        return json.loads(line)

    def ask(self, **cmd) -> dict:
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        return self.answer()

    def dump(self, path: Path) -> dict:
        self.ask(op="dump", path=str(path))
        self.proc.wait()
        return json.loads(path.read_text())


CASES = bench_module("regression_cases")
Inputs, draw_inputs = CASES.Inputs, CASES.draw_inputs


# ------------------------------------------------------------------ comparison
def max_abs(a, b) -> float:
    if a is None and b is None:
        return 0.0
    if a is None or b is None or np.shape(a) != np.shape(b):
        return float("inf")
    return float(np.max(np.abs(np.asarray(a, dtype=float) - np.asarray(b, dtype=float)), initial=0.0))


def same(a, b) -> bool:
    """Equal records: numbers within :data:`TOL`, everything else (names, kinds, flags, None) exactly."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool):
        return abs(a - b) <= TOL or a == b  # a == b: the same infinity
    return a == b


def compare_fit(p: dict, n: dict) -> dict:
    """The differences of one configuration's two fits (see the module docstring)."""
    cp = p["certificate"]
    dR = max(abs(p["R"] - n["R"]), max_abs(p["Rstar"], n["Rstar"]))
    dpred = int(np.sum(np.asarray(p["pred"]) != np.asarray(n["pred"]))) if len(p["pred"]) == len(n["pred"]) else -1
    cert_equal = same(cp, n["certificate"])
    return {"dR": dR, "dpred": dpred, "dcoef": max_abs(p["coef"], n["coef"]), "certificate_equal": cert_equal,
            "R_prev": p["R"], "Rstar_prev": p["Rstar"], "kind": cp.get("kind"),
            "identical": dR <= TOL and dpred == 0 and cert_equal and max_abs(p["coef"], n["coef"]) <= MU_TOL}


def compare_selection(p: dict, n: dict) -> dict:
    d = abs(p["objective"] - n["objective"])
    return {"dR": d, "dpred": int(p["selected"] != n["selected"]), "dcoef": 0.0, "certificate_equal": True,
            "selected_prev": p["selected"], "identical": d <= TOL and p["selected"] == n["selected"]}


def learner_of(case: dict, name: str) -> str:
    """The estimator a configuration fits (mrc, dcc, renyi, boost) or the selection method it runs."""
    kinds = {c[0]: c[1] for c in case["configs"]} | {s[0]: s[1] for s in case["selection"]}
    return kinds[name]


def jobs_of(case: dict) -> list[tuple[str, dict, str]]:
    """(op, its index argument, name) of every fit and selection of a case, in order."""
    return ([("fit", {"config": j}, c[0]) for j, c in enumerate(case["configs"])]
            + [("select", {"task": j}, t[0]) for j, t in enumerate(case["selection"])])


def time_fits(workers: dict[str, Worker], cases: list[dict], repeat: int, clock: str) -> dict[str, dict[str, list]]:
    """Every fit of every case on both sides, prev and new alternating; each side's fit times by case|config
    (``clock``: the times the rounds and the report read, "cpu" or "seconds"; ``wall_prev``, ``wall_new`` kept too)."""
    times: dict[str, dict[str, list[float]]] = {}
    warm: set[str] = set()
    for i, case in enumerate(cases):
        for op, arg, name in jobs_of(case):
            t = times.setdefault(f"{case['id']}|{name}", {"prev": [], "new": [], "wall_prev": [], "wall_new": []})
            if name not in warm:  # the first fit of a configuration in a process imports what it needs: untimed
                for k in ("prev", "new"):
                    workers[k].ask(op=op, case=i, keep=False, warm=True, **arg)
                warm.add(name)
            r = 0
            while r < repeat or (r < FAST_ROUNDS * repeat and sum(t["prev"]) + sum(t["new"]) < FAST_SECONDS):
                for k in ("prev", "new") if r % 2 == 0 else ("new", "prev"):  # ABBA: neither side always second
                    got = workers[k].ask(op=op, case=i, keep=r == 0, **arg)
                    t[k].append(got[clock])
                    t[f"wall_{k}"].append(got["seconds"])
                r += 1
            print(f"  {case['id']} {name}: prev {np.median(t['prev']):.3f} s, new {np.median(t['new']):.3f} s",
                  file=sys.stderr, flush=True)
    return times


def compare_all(cases: list[dict], dumps: dict[str, dict], times: dict) -> list[dict]:
    """One row per configuration: its differences (:func:`compare_fit`) and both sides' fit times."""
    rows = []
    for case in cases:
        for _, _, name in jobs_of(case):
            key = f"{case['id']}|{name}"
            p, n = dumps["prev"][key], dumps["new"][key]
            r = compare_selection(p, n) if "selected" in p else compare_fit(p, n)
            tp, tn = float(np.median(times[key]["prev"])), float(np.median(times[key]["new"]))
            r.update(group=case["group"], data=case["data"], config=name, learner=learner_of(case, name), t_prev=tp,
                     t_new=tn, ratio=tn / max(tp, 1e-9), times_prev=times[key]["prev"], times_new=times[key]["new"],
                     wall_prev=times[key]["wall_prev"], wall_new=times[key]["wall_new"],
                     wall_ratio=float(np.median(times[key]["wall_new"]) / max(np.median(times[key]["wall_prev"]),
                                                                              1e-9)))
            rows.append(r)
    return rows


def per_learner(rows: list[dict]) -> dict[str, dict]:
    """Each learner's ratio of summed median fit times (the verdict) and the geometric mean of its configurations'."""
    out: dict[str, dict] = {}
    for r in rows:
        v = out.setdefault(r["learner"], {"configs": 0, "t_prev": 0.0, "t_new": 0.0, "log_ratios": []})
        v["configs"] += 1
        v["t_prev"] += r["t_prev"]
        v["t_new"] += r["t_new"]
        v["log_ratios"].append(float(np.log(r["ratio"])))
    for v in out.values():
        v["ratio"] = v["t_new"] / max(v["t_prev"], 1e-9)
        v["geomean_ratio"] = float(np.exp(np.mean(v.pop("log_ratios"))))
    return out


def table(title: str, setup: str, rows: list[dict], learners: dict[str, dict], verdict: str) -> list[str]:
    """The Markdown report: one line per configuration, one per learner, the verdict."""
    lines = [f"# {title}", "", setup, "",
             "| group | data | config | max \\|ΔR\\| | predictions differing | max \\|Δμ\\| | certificate "
             "| prev s | new s | new/prev | |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['group']} | {r['data']} | {r['config']} | {r['dR']:.1e} | {r['dpred']} | "
                     f"{r['dcoef']:.1e} | "
                     f"{'equal' if r['certificate_equal'] else 'DIFFERS'} | {r['t_prev']:.3f} | {r['t_new']:.3f} | "
                     f"{r['ratio']:.2f} | {'ok' if r['identical'] else 'DIFF'} |")
    lines += ["", "| learner | configurations | prev s (sum of medians) | new s | new/prev "
              "| geometric mean of ratios |",
              "|---|---|---|---|---|---|"]
    lines += [f"| {b} | {v['configs']} | {v['t_prev']:.2f} | {v['t_new']:.2f} | {v['ratio']:.3f} | "
              f"{v['geomean_ratio']:.3f} |"
              for b, v in learners.items()]
    return lines + ["", verdict]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prev", default=PREVIOUS, help=f"the previous release: a git revision or directory ({PREVIOUS})")
    ap.add_argument("--new", default=str(ROOT), help="this release: a git revision or a directory (this working tree)")
    ap.add_argument("--quick", action="store_true", help="one split of the small UCI sets and DP; no gene sets")
    ap.add_argument("--seeds", type=int, default=2, help="splits of the small UCI sets (adult: one)")
    ap.add_argument("--repeat", type=int, default=None, help="timed fits per side and configuration (4 quick, else 6)")
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                    help="the fit time compared: the worker's CPU time (default) or wall-clock time")
    ap.add_argument("--threads", type=int, default=1, help="BLAS threads of each worker (default 1)")
    ap.add_argument("--groups", default="uci,dp,cg", help="comma-separated: uci (and selection), dp, cg, engine, boost")
    ap.add_argument("--out", default=str(WORK / "regression.md"), help="the Markdown table")
    ap.add_argument("--json", default=str(WORK / "regression.json"), help="every number of the run")
    args = ap.parse_args()
    repeat = max(1, args.repeat or (4 if args.quick else 6))
    groups = {g.strip() for g in args.groups.split(",") if g.strip()}
    WORK.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()

    sides = {}
    for key, spec in (("prev", args.prev), ("new", args.new)):
        src, label, cached = source_tree(spec)
        sides[key] = (label, install(src, cached))
    inputs = draw_inputs(groups, args.quick, args.seeds)
    run = Path(tempfile.mkdtemp(prefix="run-", dir=WORK))  # this run's inputs and dumps (runs may overlap)
    inputs.write(run)
    workers = {k: Worker(label, site, run, args.threads) for k, (label, site) in sides.items()}
    times = time_fits(workers, inputs.cases, repeat, "cpu" if args.clock == "cpu" else "seconds")
    dumps = {k: w.dump(run / f"worker-{k}.json") for k, w in workers.items()}
    shutil.rmtree(run)
    rows = compare_all(inputs.cases, dumps, times)
    learners = per_learner(rows)

    command = f"python bench/regression.py {' '.join(sys.argv[1:])}"
    bad = [r for r in rows if not r["identical"]]
    slow = [b for b, v in learners.items() if v["ratio"] > 1.05]
    seconds = time.perf_counter() - t_start
    verdict = (f"{len(rows)} configurations, {len(bad)} differ; learners over 1.05x: {', '.join(slow) or 'none'}; "
               f"{seconds:.0f} s")
    setup = (f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, numpy "
             f"{np.__version__}; `{command}`. Each side in its own process ({args.threads} BLAS thread); fit times "
             f"({args.clock}): the median of {repeat} fits per side (up to {FAST_ROUNDS * repeat} for fast fits), "
             "alternating prev and new.")
    lines = table(f"Regression: {sides['new'][0]} against {sides['prev'][0]}", setup, rows, learners, verdict)
    print("\n".join(lines), flush=True)
    for path, text in ((args.out, "\n".join(lines) + "\n"), (args.json, json.dumps({
            "command": command, "prev": sides["prev"][0], "new": sides["new"][0],
            "versions": {k: w.version for k, w in workers.items()}, "repeat": repeat, "groups": sorted(groups),
            "quick": args.quick, "threads": args.threads, "clock": args.clock, "load_average": os.getloadavg(),
            "machine": {"arch": platform.machine(), "cores": os.cpu_count(), "python": platform.python_version(),
                        "numpy": np.__version__},
            "configurations": rows, "per_learner": learners, "differ": len(bad), "slow_learners": slow,
            "seconds": seconds}, indent=1))):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text)
    print(f"table written to {args.out}, numbers to {args.json}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
