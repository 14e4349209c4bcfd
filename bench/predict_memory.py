"""Peak memory of ``marg predict`` against the size of its input, side by side in one run (issue 18).

Run (files go to a temporary folder; ~1.3 GB of disk at the largest size):

    python bench/predict_memory.py                          # 2 M-row CSV, then 5x and 10x it
    python bench/predict_memory.py --rows 200000 --copies 1,10

A model is fitted once (an exact first-order export of the demo data, MRC); each input file is
the demo CSV repeated ``copies`` times. Every ``marg predict`` runs as its own process; its peak
resident memory is read from ``wait4``. The floor is a process that only imports what predict
imports. Streaming means the peak does not grow with the file.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARG = Path(sys.executable).parent / "marg"


def peak(cmd: list[str]) -> tuple[float, float]:
    """(peak RSS in MiB, seconds) of one child process."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {p.stderr.read().decode()}")
    return usage.ru_maxrss / 1024, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--copies", default="1,5,10")
    args = ap.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        # the data is generated in a child: this process stays small, since a child's peak RSS
        # (wait4) starts from its parent's size at fork
        subprocess.run([sys.executable, "-c", "import sys; from marg.marginals.synthetic import SITES, demo_codebook, "
                        "generate, write_csv; demo_codebook().save(sys.argv[1] + '/codebook.json'); "
                        "write_csv(sys.argv[1] + '/base.csv', generate(int(sys.argv[2]), SITES[0], seed=1))",
                        str(d), str(args.rows)], check=True)
        subprocess.run([str(MARG), "export", str(d / "base.csv"), "--schema", str(d / "codebook.json"), "--site",
                        "north",
                        "--out", str(d / "a.bundle"), "--stats", "first", "--min-cell", "1", "--no-ledger"], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run([str(MARG), "learn", str(d / "a.bundle"), "--learner", "mrc", "--out", str(d / "m.json"),
                        "--allow-unsigned"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        floor, _ = peak([sys.executable, "-c", "import marg.api, marg.learners.classifiers.mrc, "
                                               "marg.marginals.data.encoding, pyarrow.csv"])
        print(f"\nimports alone: {floor:.0f} MiB\n")
        print("| input | rows | file (MiB) | peak RSS (MiB) | seconds |")
        print("|---|---|---|---|---|")
        for k in (int(c) for c in args.copies.split(",")):
            f = d / f"x{k}.csv"
            with open(f, "wb") as out:
                for j in range(k):  # streamed: this process never holds the data
                    with open(d / "base.csv", "rb") as src:
                        head = src.readline()
                        if j == 0:
                            out.write(head)
                        shutil.copyfileobj(src, out, 1 << 20)
            rss, sec = peak([str(MARG), "predict", str(d / "m.json"), str(f), "--out", str(d / "p.csv"),
                             "--schema", str(d / "codebook.json"), "--allow-unsigned"])
            print(f"| demo x{k} | {k * args.rows:,} | {f.stat().st_size / 2**20:,.0f} | {rss:,.0f} | {sec:.1f} |")
            f.unlink()


if __name__ == "__main__":
    main()
