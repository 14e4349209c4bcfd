"""The automatic choice (``marg learn`` without --learner) on small clinical sets and on adult under DP (issue 24).

Run: nice -n 10 python bench/auto_choice.py [--reps 5] [--sets credit,bcw,clvheart,huheart] [--adult-reps 1]
[--small-dp] [--epsilon 1]

Protocol (every number from one run):
- Each repetition (seed = 1000 + rep) draws a random 70/30 train/test split; the training rows
  go to three sites of 50 / 30 / 20 %. Each site's **exact** count tables (first-order and
  every pair-with-label table: ``--stats all``) are counted; the learner's Summary sums them
  and keeps each site's own tables (as ``marg learn`` does for 2-20 sites).
- ``auto`` is :class:`marg.learners.auto.AutoLearner` with every default (``prefer="balanced"``:
  the smallest certificate among the candidates whose leave-one-site-out estimated error is
  within 0.02 of the best). Every candidate is printed side by side: its estimated error,
  its certificate and its **test error** (deterministic rule on the 30 % test rows).
- Targets: the default's certificate < 0.5 on every split, and its test error within 0.02 of
  the best candidate's test error on that split.
- Sets: credit-a (bench/privacy.py's coding: PMLB levels, continuous columns cut at the
  training rows' terciles), breast-w, cleveland (num > 0) and hungarian under the public
  codebooks of bench/boost_data.py.
- ``--adult-reps R``: adult, 80/20 split, the same three sites each exporting with
  ``marg export --epsilon 1`` defaults (bench/privacy.py's ``default_path``), learned by
  ``marg learn`` defaults; the default's error, certificate, the candidates and, when every
  certificate is trivial, the patients a non-trivial one would need.
- ``--with-boost``: an experiment, boost as a sixth candidate (10–65 s per fit, so not a default).
- ``--small-dp``: the small sets at ε per site (split 0, same sites): the default's
  certificates and the one line on the patients a non-trivial certificate would need.
- ``--replay FILE``: the studies a ``--dump FILE`` run saved, re-chosen by the current rule (the
  candidates' estimates and certificates do not depend on it), reported in the same table.
- ``--sim-dp N`` (issue 38): N simulated small-site DP studies per population
  (``--sim-sets``, default adult and kr-vs-kp): each draws 3 sites × ``--site-rows`` (300) patients
  without replacement from the set, every site exports at ``--epsilon`` (1) with the export's
  defaults, the learner runs ``AutoLearner()`` (``marg learn`` defaults) on the loaded summary,
  and every candidate's true error is its error on the set's remaining rows (the population).
  Reported side by side: the fraction of studies whose default choice is within 0.02 of the best
  candidate's true error (target ≥ 0.90; Wilson 95 % interval), and the same for always naive
  Bayes, always the smallest estimate (``--prefer accuracy``) and always the label-only rule.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))


def _bench_module(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


SHARES = (0.5, 0.3, 0.2)


def load(name: str):
    """(make(train idx) → (codebook, X codes), y) of one set."""
    if name == "credit":
        return _bench_module("privacy").load_set("credit")
    cb, X, y = _bench_module("boost_data").load(name)
    return (lambda tr: (cb, X)), y


def site_summary(cb, X, y, sites):
    from marg.marginals.summary import Summary, sum_tables
    from marg.marginals.counts.counting import count_tables
    from marg.marginals.counts.tables import plan_cliques

    plan = plan_cliques(cb, "all")
    parts = [(f"site{k}", count_tables(cb, X[s], y[s], plan)) for k, s in enumerate(sites)]
    return Summary(cb, sum_tables([p[1] for p in parts])[0], site_parts=parts)


def one_split(name: str, rep: int, test_share: float = 0.3, extra: tuple = ()):
    from marg.learners.auto import DEFAULT_CANDIDATES, AutoLearner

    make, y = load(name)
    rng = np.random.default_rng(1000 + rep)
    perm = rng.permutation(y.size)
    n_te = int(round(test_share * y.size))
    te, tr = perm[:n_te], perm[n_te:]
    cb, X = make(tr)
    cuts = np.cumsum([int(SHARES[0] * tr.size), int(SHARES[1] * tr.size)])
    sites = np.split(tr, cuts)
    S = site_summary(cb, X, y, sites)
    t0 = time.perf_counter()
    auto = AutoLearner(candidates=[*DEFAULT_CANDIDATES, *extra] if extra else None).fit(S)
    secs = time.perf_counter() - t0
    cands = []
    for row, est in zip(auto.candidates_, auto.fitted_):
        test = float(np.mean(est.predict(X[te]) != y[te])) if est is not None else float("nan")
        cands.append({**row.to_dict(), "test": test})
    return {"n_train": int(tr.size), "n_test": int(te.size), "sites": [int(s.size) for s in sites],
            "candidates": cands, "seconds": secs}


def name_of(c: dict) -> str:
    return c["learner"] + ("" if not c["params"] else "(" + ",".join(f"{k}={v}" for k, v in c["params"].items()) + ")")


def report_small(sets, reps, extra: tuple = ()) -> None:
    print("| set | split | n train (sites) | " + "candidate: est. error / certificate / test error "
                                                 "| " * (5 + len(extra))
          + "default | default cert < 0.5 | default test − best test | a candidate meets both? | s |")
    print("|---|---|---|" + "---|" * (5 + len(extra)) + "---|---|---|---|---|")
    summary = []
    for name in sets:
        met_c = met_e = any_both = 0
        for rep in range(reps):
            r = one_split(name, rep, extra=extra)
            cs = r["candidates"]
            chosen = next(c for c in cs if c["chosen"])
            best_test = min(c["test"] for c in cs if c["certificate"] is not None)
            gap = chosen["test"] - best_test
            ok_c, ok_e = chosen["certificate"] < 0.5, gap <= 0.02 + 1e-12
            met_c += ok_c
            met_e += ok_e
            both = [name_of(c) for c in cs if c["certificate"] is not None and c["certificate"] < 0.5
                    and c["test"] <= best_test + 0.02 + 1e-12]
            any_both += bool(both)
            cells = []
            for c in cs:
                est = "—" if c["error"] is None else f"{c['error']:.3f}"
                cert = "—" if c["certificate"] is None else f"{c['certificate']:.3f}"
                cells.append(f"{name_of(c)}: {est} / {cert} / {c['test']:.3f}")
            print(f"| {name} | {rep} | {r['n_train']} ({'/'.join(map(str, r['sites']))}) | " + " | ".join(cells)
                  + f" | {name_of(chosen)} | {'yes' if ok_c else 'NO'} ({chosen['certificate']:.3f}) | "
                  f"{gap:+.3f} {'ok' if ok_e else 'NOT MET'} | {', '.join(both) if both else 'none'} | "
                  f"{r['seconds']:.1f} |", flush=True)
        summary.append((name, met_c, met_e, any_both))
    print()
    for name, mc, me, ab in summary:
        print(f"- {name}: certificate < 0.5 on {mc}/{reps} splits; test error within 0.02 of the best candidate on "
              f"{me}/{reps}; some candidate met both on {ab}/{reps}")


def report_adult(reps: int, eps: float) -> None:
    """adult under DP: each site exports with ``marg export --epsilon eps`` defaults, the learner runs
    the default choice (``AutoLearner()`` = ``marg learn`` without options) on the loaded summary."""
    from marg.learners.auto import AutoLearner
    from marg.learners.certification.sample_size import patients_line
    from marg.protocols.export import export_site
    from marg.protocols.load import load_summary

    priv = _bench_module("privacy")
    make, y = priv.load_set("adult")
    print(f"\nadult, ε = {eps:g} per site, sites 50/30/20 % of an 80 % training split, `marg learn` defaults:\n")
    print("| split | candidate | est. error | certificate | test error | chosen |")
    print("|---|---|---|---|---|---|")
    for rep in range(reps):
        te, tr, cb, X, sites = priv.adult_style_split(make, y.size, rep)
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for k, s in enumerate(sites):
                out = Path(d) / f"site{k}.bundle"
                export_site(priv.ArraySource(f"site{k}", X[s], y[s]), cb, f"site{k}", out, epsilon=eps)
                paths.append(out)
            summary = load_summary(paths, allow_unsigned=True)
        auto = AutoLearner().fit(summary)
        for row, est in zip(auto.candidates_, auto.fitted_):
            test = float(np.mean(est.predict(X[te]) != y[te])) if est is not None else float("nan")
            est_err = "—" if row.error is None else f"{row.error:.4f}"
            cert = "—" if row.certificate is None else f"{row.certificate:.4f} ({row.kind})"
            print(f"| {rep} | {name_of(row.to_dict())} | {est_err} | {cert} | {test:.4f} | "
                  f"{'**yes**' if row.chosen else ''} |")
        line = patients_line(auto.choice_report())
        print(f"\nsplit {rep}: the default chose {auto.chosen_.learner}: test error "
              f"{float(np.mean(auto.predict(X[te]) != y[te])):.4f}, certificate {auto.certificate_.value:.4f} "
              f"({time.perf_counter() - t0:.0f} s){'; ' + line if line else ''}\n")


def report_small_dp(sets, eps: float) -> None:
    """The small sets under DP (split 0): each site exports with ``marg export --epsilon eps`` defaults;
    the default's certificate, and the one line saying how many patients a non-trivial one needs."""
    from marg.learners.auto import AutoLearner
    from marg.learners.certification.sample_size import patients_line
    from marg.protocols.export import export_site
    from marg.protocols.load import load_summary

    priv = _bench_module("privacy")
    print(f"\nthe small sets at ε = {eps:g} per site (split 0, the same three sites), `marg learn` defaults:\n")
    for name in sets:
        make, y = load(name)
        rng = np.random.default_rng(1000)
        perm = rng.permutation(y.size)
        n_te = int(round(0.3 * y.size))
        te, tr = perm[:n_te], perm[n_te:]
        cb, X = make(tr)
        cuts = np.cumsum([int(SHARES[0] * tr.size), int(SHARES[1] * tr.size)])
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for k, s in enumerate(np.split(tr, cuts)):
                out = Path(d) / f"site{k}.bundle"
                export_site(priv.ArraySource(f"site{k}", X[s], y[s]), cb, f"site{k}", out, epsilon=eps)
                paths.append(out)
            summary = load_summary(paths, allow_unsigned=True)
        auto = AutoLearner().fit(summary)
        certs = ", ".join(f"{name_of(r.to_dict())} {r.certificate:.3f}"
                          for r in auto.candidates_ if r.certificate is not None)
        line = patients_line(auto.choice_report()) or "(some certificate is informative)"
        print(f"- {name}: chose {auto.chosen_.learner}, test error {float(np.mean(auto.predict(X[te]) != y[te])):.3f}; "
              f"certificates {certs}; {time.perf_counter() - t0:.0f} s.\n  `{line}`")


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of k successes in n."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    c = (p + z * z / (2 * n)) / (1 + z * z / n)
    h = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return float(max(0.0, c - h)), float(min(1.0, c + h))


def sim_study(name: str, seed: int, eps: float, site_rows: int):
    """One simulated small-site DP study (module docstring, ``--sim-dp``): the candidates' rows with their true
    errors."""
    from marg.learners.auto import AutoLearner, choose
    from marg.protocols.export import export_site
    from marg.protocols.load import load_summary

    priv = _bench_module("privacy")
    make, y = LOADED.setdefault(name, priv.load_set(name) if name in ("adult", "kr-vs-kp") else load(name))
    rng = np.random.default_rng(seed)
    perm = rng.permutation(y.size)
    tr, te = perm[: 3 * site_rows], perm[3 * site_rows:]
    cb, X = make(tr)
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for k in range(3):
            s = tr[k * site_rows:(k + 1) * site_rows]
            out = Path(d) / f"site{k}.bundle"
            export_site(priv.ArraySource(f"site{k}", X[s], y[s]), cb, f"site{k}", out, epsilon=eps)
            paths.append(out)
        summary = load_summary(paths, allow_unsigned=True)
    auto = AutoLearner().fit(summary)
    rows = []
    for row, est in zip(auto.candidates_, auto.fitted_):
        test = float(np.mean(est.predict(X[te]) != y[te])) if est is not None else float("nan")
        rows.append({**row.to_dict(), "test": test})
    acc = choose(auto.candidates_, "accuracy")[0]
    return rows, acc


LOADED: dict = {}
DUMP: str = ""
SEED0 = 5000


def replay(path: str):
    """The studies a ``--dump`` file holds, each candidate's row re-chosen by the current rule (the rows —
    estimates, folds, certificates — do not depend on the rule): yields (set, rows, default index, accuracy index)."""
    from marg.learners.auto import CandidateRow, choose

    fields = set(CandidateRow.__dataclass_fields__)
    for line in open(path):
        d = json.loads(line)
        objs = [CandidateRow(**{k: v for k, v in r.items() if k in fields}) for r in d["rows"]]
        yield d["set"], d["rows"], choose(objs)[0], choose(objs, "accuracy")[0]


def report_sim_dp(sets, studies: int, eps: float, site_rows: int, source: str = "") -> None:
    print(f"\nsimulated small-site DP studies: 3 sites × {site_rows} patients drawn from the set, ε = {eps:g} per "
          f"site, `marg learn` defaults; true error = error on the set's remaining rows\n")
    print("| population | studies | default within 0.02 of the best | always nb | smallest estimate | always prior | "
          "default chose (counts) | mean gap default − best | s / study |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in sets:
        hits = {"default": 0, "nb": 0, "accuracy": 0, "prior": 0}
        studies_run = 0
        chosen_counts: dict = {}
        gaps = []
        t0 = time.perf_counter()
        done = [(rows, k, a) for st, rows, k, a in replay(source) if st == name] if source else None
        for k in range(len(done) if done is not None else studies):
            if done is not None:
                rows, chosen, acc = done[k]
                for j, r in enumerate(rows):
                    r["chosen"] = j == chosen
            else:
                rows, acc = sim_study(name, SEED0 + k, eps, site_rows)
            if DUMP:  # every candidate's row and true error, to compare rules on the same studies
                with open(DUMP, "a") as fh:
                    fh.write(json.dumps({"set": name, "study": k, "rows": rows}) + "\n")
            best = min(r["test"] for r in rows if r["certificate"] is not None)
            pick = {"default": next(r for r in rows if r["chosen"]),
                    "nb": next(r for r in rows if r["learner"] == "nb"),
                    "accuracy": rows[acc], "prior": next(r for r in rows if r["learner"] == "prior")}
            for key, r in pick.items():
                hits[key] += r["test"] <= best + 0.02 + 1e-12
            nm = name_of(pick["default"])
            chosen_counts[nm] = chosen_counts.get(nm, 0) + 1
            gaps.append(pick["default"]["test"] - best)
            studies_run += 1
            print(f"  {name} study {k}: default {nm} {pick['default']['test']:.4f}, best {best:.4f}, nb "
                  f"{pick['nb']['test']:.4f}, prior {pick['prior']['test']:.4f}; within so far "
                  f"{hits['default']}/{k + 1}", file=sys.stderr, flush=True)
        secs = (time.perf_counter() - t0) / max(studies_run, 1)
        if not studies_run:
            continue

        def cell(key: str) -> str:
            lo, hi = wilson(hits[key], studies_run)
            return f"{hits[key] / studies_run:.3f} [{lo:.3f}, {hi:.3f}]"

        counts = ", ".join(f"{n} {c}" for n, c in sorted(chosen_counts.items(), key=lambda t: -t[1]))
        print(f"| {name} | {studies_run} | {cell('default')} | {cell('nb')} | {cell('accuracy')} | {cell('prior')} | "
              f"{counts} | {np.mean(gaps):+.4f} | {secs:.1f} |", flush=True)


def main() -> None:
    import warnings

    warnings.filterwarnings("ignore")
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--sets", default="credit,bcw,clvheart,huheart")
    ap.add_argument("--adult-reps", type=int, default=0)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--small-dp", action="store_true", help="also the small sets at --epsilon (split 0)")
    ap.add_argument("--sim-dp", type=int, default=0, help="simulated small-site DP studies per population (issue 38)")
    ap.add_argument("--sim-sets", default="adult,kr-vs-kp")
    ap.add_argument("--site-rows", type=int, default=300)
    ap.add_argument("--seed", type=int, default=5000, help="--sim-dp: study k draws its patients with seed SEED + k")
    ap.add_argument("--replay", default="", help="the studies of a --dump file, re-chosen by the current rule")
    ap.add_argument("--dump", default="", help="append each simulated study's candidate rows (JSON lines) to this file")
    ap.add_argument("--with-boost", action="store_true", help="experiment: boost as a sixth candidate (not a default)")
    args = ap.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"numpy {np.__version__}; {args.reps} seeded splits per set; sites 50/30/20 % of the training rows\n")
    sets = [s for s in args.sets.split(",") if s]
    if sets:
        report_small(sets, args.reps, extra=(("boost", {}),) if args.with_boost else ())
    if args.small_dp:
        report_small_dp(sets, args.epsilon)
    if args.adult_reps:
        report_adult(args.adult_reps, args.epsilon)
    global DUMP, SEED0
    DUMP, SEED0 = args.dump, args.seed
    if args.sim_dp or args.replay:
        report_sim_dp([s for s in args.sim_sets.split(",") if s], args.sim_dp, args.epsilon, args.site_rows,
                      args.replay)


if __name__ == "__main__":
    main()
