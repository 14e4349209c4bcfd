"""A DP study end to end through the installed console script, timed per command (issue 44).

Three demo sites of ROWS patients each and a learner, each with its own $MARG_HOME, meet only in the drop
box (a local folder, or with ``--sftp`` the tests' OpenSSH server on 127.0.0.1); each party runs only
``marg study run`` until the study is done. Every command's wall time is recorded with what it did.

    .venv/bin/python bench/study_e2e.py [--rows 300] [--sftp] [--drop-out city] [--out bench/results/study_e2e.json]
    .venv/bin/python bench/study_e2e.py --planted 20000 --rows 1000    # the planted wide study (bench/wide.py), CSV

``--planted P``: the sites' rows are bench/wide.py's planted study (P binary features, the same 10 informative
at every site: one draw of 3 × ROWS rows split in three) instead of the demo sites'. Every command's CPU
(user + sys) and peak RSS come from the OS (``wait4``) beside its wall time.

``--drop-out SITE``: that site answers round 1 only (t = 2); the learner, finding it missing from round 2,
re-runs with ``--close`` (still ``marg study run``), and the study must end in a certified model with the
dropped site's ledger holding round 1's spend alone (checked, printed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=300)
    ap.add_argument("--seed", type=int, default=44)
    ap.add_argument("--sftp", action="store_true")
    ap.add_argument("--drop-out", default=None, help="a site that answers round 1 only (the study runs with t = 2)")
    ap.add_argument("--planted", type=int, default=0, help="P: bench/wide.py's planted study of P binary features")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "study_e2e.json"))
    a = ap.parse_args()
    from tests.helpers.study import write_study

    exe = str(Path(sys.executable).parent / "marg")
    tmp = Path(tempfile.mkdtemp(prefix="marg-study-bench-"))
    if a.planted:  # written by a child: this process's size would be every command's peak RSS (wait4 counts it)
        subprocess.run([sys.executable, __file__, "--write-planted", str(tmp), str(a.rows), str(a.planted),
                        str(a.seed)], check=True)
        st = planted_study(tmp, write=False)
    else:
        st = write_study(tmp, a.rows, a.seed)
    env0 = {k: v for k, v in os.environ.items() if k != "MARG_DEBUG"}
    stop = None
    drop = str(tmp / "drop")
    if a.sftp:
        from tests.helpers.services import start_sftp

        server, stop = start_sftp()
        env0.update(server.env())
        drop = server.url("study-drop")
    else:
        Path(drop).mkdir()
    log: list[dict] = []

    def marg(kind: str, *args: object, home: Path | None = None) -> str:
        env = dict(env0)
        if home is not None:
            env["MARG_HOME"] = str(home)
        t0 = time.perf_counter()
        with tempfile.TemporaryFile() as o, tempfile.TemporaryFile() as e:
            p = subprocess.Popen([exe, *map(str, args)], cwd=tmp, env=env, stdout=o, stderr=e)
            _, status, ru = os.wait4(p.pid, 0)
            dt = time.perf_counter() - t0
            o.seek(0)
            e.seek(0)
            out, err = o.read().decode(), e.read().decode()
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"{kind}: {err.strip()}")
        did = ""
        if "--json" in args:
            d = json.loads(out)
            did = "; ".join(x["did"] for x in d.get("did", [])) if isinstance(d.get("did"), list) else ""
        log.append({"kind": kind, "seconds": round(dt, 2), "cpu_s": round(ru.ru_utime + ru.ru_stime, 2),
                    "peak_mib": round(ru.ru_maxrss / 1024), "did": did})
        return out

    try:
        roster = tmp / "roster"
        roster.mkdir()
        homes = {}
        for name, role in [(s, "site") for s in st.data] + [("learner", "learner")]:
            homes[name] = tmp / f"home-{name}"
            marg("keys init", "keys", "init", "--site", name, "--role", role, "--dir", homes[name] / "keys")
            for suffix in (".sign.pub", ".seal.pub"):
                (roster / f"{name}{suffix}").write_bytes((homes[name] / "keys" / f"{name}{suffix}").read_bytes())
        study = tmp / "study.json"
        t_all = time.perf_counter()
        marg("study init", "study", "init", "--schema", st.schema, "--roster", roster, "--epsilon", "1", "--delta",
             "1e-6",
             "--drop", drop, "--sign-key", homes["learner"] / "keys" / "learner.sign.key", "--out", study, "--json",
             *(["--threshold", "2"] if a.drop_out else []), home=homes["learner"])
        gone = False
        for _ in range(10):
            res = json.loads(marg("study run --learner", "study", "run", study, "--learner", "--json",
                                  home=homes["learner"]))
            if res["next"].startswith("waiting for") and a.drop_out and a.drop_out in res["next"]:
                res = json.loads(marg("study run --learner --close", "study", "run", study, "--learner", "--close",
                                      "--json",
                                      home=homes["learner"]))
            if res["next"].startswith("none"):
                break
            gone = gone or any(d["did"].startswith("opened round 'measure'") for d in res["did"])
            for s in st.data:
                if not (gone and s == a.drop_out):
                    marg("study run --site", "study", "run", study, "--site", s, "--data", st.data[s], "--json",
                         home=homes[s])
        status = json.loads(marg("study status", "study", "status", study, "--json"))
        total = time.perf_counter() - t_all
    finally:
        if stop is not None:
            stop()
    by: dict[str, list[dict]] = {}
    for e in log:
        if e["kind"] == "keys init":
            continue
        did = e["did"].split("; ")[0].split(" for ")[0].split(" over ")[0]  # the round named, not the sites
        key = e["kind"] + (f" ({did})" if did else " (nothing to do)" if "run" in e["kind"] else "")
        by.setdefault(key, []).append(e)
    dropped = None
    if a.drop_out:
        led = homes[a.drop_out] / "ledger" / "ledger.jsonl"
        spent = [json.loads(x)["cost"]["rho"] for x in led.read_text().splitlines()
                 if x.strip() and json.loads(x).get("kind") == "release"]
        plan = json.loads(study.read_text())["plan"]["rho"]
        dropped = {"site": a.drop_out, "state": status["sites"][a.drop_out]["state"], "ledger_rho": spent,
                   "round_1_rho": plan["select"],
                   "round_1_only": len(spent) == 1 and abs(spent[0] - plan["select"]) < 1e-12}
    summary = {"rows_per_site": a.rows, "planted_features": a.planted, "sites": len(st.data),
               "drop": "sftp" if a.sftp else "folder",
               "done": status["done"],
               "dropped": dropped,
               "certificate": (status.get("result") or {}).get("certificate"), "total_seconds": round(total, 1),
               "commands": len([e for e in log if e["kind"] != "keys init"]),
               "per_command": {k: {"n": len(v), "mean_s": round(sum(e["seconds"] for e in v) / len(v), 2),
                                   "max_s": max(e["seconds"] for e in v), "max_cpu_s": max(e["cpu_s"] for e in v),
                                   "max_peak_mib": max(e["peak_mib"] for e in v)}
                               for k, v in by.items()},
               "log": log}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(summary, indent=1) + "\n")
    print(f"{summary['sites']} sites x {a.rows} patients, drop {summary['drop']}: done={summary['done']}, "
          f"{summary['commands']} commands, {summary['total_seconds']} s in all; certificate {summary['certificate']}")
    if dropped:
        print(f"dropped {dropped['site']}: {dropped['state']}; its ledger: ρ {dropped['ledger_rho']} "
              f"(round 1's ρ = {dropped['round_1_rho']:.6g}; round 1 only: {dropped['round_1_only']})")
    print(f"load average {os.getloadavg()[0]:.1f}")
    print("| command (what it did) | runs | mean s | max s | max CPU s | max peak RSS MiB |\n|---|---|---|---|---|---|")
    for k, v in summary["per_command"].items():
        print(f"| {k} | {v['n']} | {v['mean_s']} | {v['max_s']} | {v['max_cpu_s']} | {v['max_peak_mib']} |")


def planted_study(tmp: Path, rows: int = 0, features: int = 0, seed: int = 0, write: bool = True):
    """The planted wide study's three sites (bench/wide.py: one draw of 3 × ``rows``, the same informative features
    at every site) as CSV, named as the demo sites, and its codebook (``write``: written, else only named)."""
    from marg.marginals.synthetic import SITES
    from tests.helpers.study import Study

    data = {prof.name: tmp / f"{prof.name}.csv" for prof in SITES[:3]}
    if write:
        sys.path.insert(0, str(ROOT / "bench"))
        from wide import codebook_for, planted, write_csv

        X, y = planted(3 * rows, features, 10, 0.3, 0.01, seed)
        cb = codebook_for(features, True)
        cb.save(tmp / "codebook.json")
        for k, path in enumerate(data.values()):
            write_csv(path, cb, X[k * rows:(k + 1) * rows], y[k * rows:(k + 1) * rows])
    return Study(tmp, tmp / "codebook.json", data)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--write-planted"]:
        planted_study(Path(sys.argv[2]), *map(int, sys.argv[3:6]))
    else:
        main()
