"""A DP study end to end through the installed console script, timed per command (issue 44).

Three demo sites of ROWS patients each and a learner, each with its own $MARG_HOME, meet only in the drop
box (a local folder, or with ``--sftp`` the tests' OpenSSH server on 127.0.0.1); each party runs only
``marg study run`` until the study is done. Every command's wall time is recorded with what it did.

    .venv/bin/python bench/study_e2e.py [--rows 300] [--sftp] [--drop-out city] [--out bench/results/study_e2e.json]

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
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "study_e2e.json"))
    a = ap.parse_args()
    from tests.helpers.study import write_study

    exe = str(Path(sys.executable).parent / "marg")
    tmp = Path(tempfile.mkdtemp(prefix="marg-study-bench-"))
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
        r = subprocess.run([exe, *map(str, args)], cwd=tmp, env=env, capture_output=True, text=True)
        dt = time.perf_counter() - t0
        if r.returncode != 0:
            raise SystemExit(f"{kind}: {r.stderr.strip()}")
        out = r.stdout
        did = ""
        if "--json" in args:
            d = json.loads(out)
            did = "; ".join(x["did"] for x in d.get("did", [])) if isinstance(d.get("did"), list) else ""
        log.append({"kind": kind, "seconds": round(dt, 2), "did": did})
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
    by: dict[str, list[float]] = {}
    for e in log:
        if e["kind"] == "keys init":
            continue
        key = (e["kind"] + (" (" + e["did"].split(" '")[0] + ")" if e["did"]
                            else " (nothing to do)" if "run" in e["kind"] else ""))
        by.setdefault(key, []).append(e["seconds"])
    dropped = None
    if a.drop_out:
        led = homes[a.drop_out] / "ledger" / "ledger.jsonl"
        spent = [json.loads(x)["cost"]["rho"] for x in led.read_text().splitlines()
                 if x.strip() and json.loads(x).get("kind") == "release"]
        plan = json.loads(study.read_text())["plan"]["rho"]
        dropped = {"site": a.drop_out, "state": status["sites"][a.drop_out]["state"], "ledger_rho": spent,
                   "round_1_rho": plan["select"],
                   "round_1_only": len(spent) == 1 and abs(spent[0] - plan["select"]) < 1e-12}
    summary = {"rows_per_site": a.rows, "sites": len(st.data), "drop": "sftp" if a.sftp else "folder",
               "done": status["done"],
               "dropped": dropped,
               "certificate": (status.get("result") or {}).get("certificate"), "total_seconds": round(total, 1),
               "commands": len([e for e in log if e["kind"] != "keys init"]),
               "per_command": {k: {"n": len(v), "mean_s": round(sum(v) / len(v), 2), "max_s": max(v)}
                               for k, v in by.items()},
               "log": log}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(summary, indent=1) + "\n")
    print(f"{summary['sites']} sites x {a.rows} patients, drop {summary['drop']}: done={summary['done']}, "
          f"{summary['commands']} commands, {summary['total_seconds']} s in all; certificate {summary['certificate']}")
    if dropped:
        print(f"dropped {dropped['site']}: {dropped['state']}; its ledger: ρ {dropped['ledger_rho']} "
              f"(round 1's ρ = {dropped['round_1_rho']:.6g}; round 1 only: {dropped['round_1_only']})")
    print("| command (what it did) | runs | mean s | max s |\n|---|---|---|---|")
    for k, v in summary["per_command"].items():
        print(f"| {k} | {v['n']} | {v['mean_s']} | {v['max_s']} |")


if __name__ == "__main__":
    main()
