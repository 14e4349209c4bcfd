"""Whole processes side by side, interleaved, measured by the OS: CPU (user + sys) and peak RSS of
each run from ``wait4``'s resource usage, wall time beside; medians and ratios to the first or a
named reference. For a machine shared with other work, where only ratios of interleaved runs mean
anything.

Run:

    python bench/cpu_pairs.py --repeat 5 --ref duckdb \\
        'ours=.venv/bin/marg export F --schema CB --site s1 --stats first --out {tmp}/b --ledger {tmp}/l' \\
        'base=OTHER/bin/marg export F --schema CB --site s1 --stats first --out {tmp}/b --ledger {tmp}/l' \\
        'duckdb=.venv/bin/python bench/wide.py duckdb F'

Each ``NAME=COMMAND`` runs once a round, in the order given (A B C A B C …); ``{tmp}`` is a fresh
empty folder for that run, removed after it. A command that fails stops the benchmark. ``--env
K=V`` sets a variable for every run (e.g. ``PYTHONDONTWRITEBYTECODE=1``, or unset it with ``K=``).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def run(cmd: str, env: dict) -> tuple[float, float, float]:
    """(CPU s, wall s, peak RSS MiB) of one run of ``cmd`` (its own process, output discarded)."""
    tmp = tempfile.mkdtemp(prefix="marg-pairs-")
    try:
        argv = shlex.split(cmd.replace("{tmp}", tmp))
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        err = p.stderr.read().decode(errors="replace") if p.stderr else ""
        p.stderr.close()
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            raise SystemExit(f"exit {code}: {cmd}\n{err[-2000:]}")
        return ru.ru_utime + ru.ru_stime, wall, ru.ru_maxrss / 1024
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("commands", nargs="+", help="NAME=COMMAND")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--ref", default=None, help="the NAME ratios are taken to (default: the last)")
    ap.add_argument("--env", action="append", default=[], help="K=V for every run (K= unsets K)")
    args = ap.parse_args(argv)
    env = dict(os.environ)
    for kv in args.env:
        k, _, v = kv.partition("=")
        if v:
            env[k] = v
        else:
            env.pop(k, None)
    cmds = [c.split("=", 1) for c in args.commands]
    ref = args.ref or cmds[-1][0]
    res: dict[str, list[tuple[float, float, float]]] = {n: [] for n, _ in cmds}
    for _ in range(args.repeat):
        for name, cmd in cmds:
            res[name].append(run(cmd, env))
    print(f"# {args.repeat} interleaved rounds; load average {os.getloadavg()[0]:.1f}; "
          f"env {' '.join(args.env) or '(inherited)'}")
    print("| run | CPU s (median) | CPU s per round | wall s (median) | peak RSS MiB (median) | peak RSS MiB per "
          f"round | CPU / {ref} (median of rounds) |\n|---|---|---|---|---|---|---|")
    for name, _ in cmds:
        cpu = [r[0] for r in res[name]]
        ratio = statistics.median(a[0] / b[0] for a, b in zip(res[name], res[ref]))
        print(f"| {name} | {statistics.median(cpu):.2f} | {' '.join(f'{c:.2f}' for c in cpu)} | "
              f"{statistics.median(r[1] for r in res[name]):.2f} | {statistics.median(r[2] for r in res[name]):.0f} | "
              f"{' '.join(f'{r[2]:.0f}' for r in res[name])} | {ratio:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
