"""Ledger append time at entry 10 and at entry 10,000, side by side in one run (issue 18).

Run: python bench/ledger.py [--big 10000] [--reps 30]

Two ledgers in one temporary folder (with their own $MARG_HOME checkpoints), filled with signed
entries of a typical first-order release (15 statistics); then ``--reps`` further appends to
each, interleaved, timed one by one (median reported). An append verifies the ledger from the
site's checkpoint on, writes one fsynced line and updates the checkpoint, so its cost should not
depend on the ledger's length (target: ratio ≤ 1.5).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", type=int, default=10)
    ap.add_argument("--big", type=int, default=10_000)
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        os.environ["MARG_HOME"] = str(Path(d) / "home")
        from cryptography.hazmat.primitives.asymmetric import ed25519

        from marg.marginals.privacy import PrivacyCost
        from marg.protocols.ledger import Ledger

        key = ed25519.Ed25519PrivateKey.generate()
        stats = [{"name": f"N[f{i},y]", "kind": "counts", "clique": [f"f{i}", "y"], "shape": [4, 2],
                  "mechanism": "laplace", "std": 14.1} for i in range(15)]
        k = [0]

        def append(led: Ledger) -> float:
            k[0] += 1
            t = time.perf_counter()
            led.append(bundle_digest=hashlib.sha256(str(k[0]).encode()).hexdigest(), site="north", statistics=stats,
                       cost=PrivacyCost(epsilon=1e-6), private_key=key)
            return time.perf_counter() - t

        small, big = Ledger(Path(d) / "small"), Ledger(Path(d) / "big")
        t0 = time.perf_counter()
        for _ in range(args.small):
            append(small)
        for _ in range(args.big):
            append(big)
        fill = time.perf_counter() - t0
        ts, tb = [], []
        for _ in range(args.reps):
            ts.append(append(small))
            tb.append(append(big))
        ms, mb = 1e3 * statistics.median(ts), 1e3 * statistics.median(tb)
        size = (big.path.stat().st_size) / 2**20
        print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
        print(f"filled {args.small:,} + {args.big:,} signed entries in {fill:.1f} s; the big ledger is {size:.1f} MiB\n")
        print("| ledger length | median append (ms) | min | max |")
        print("|---|---|---|---|")
        print(f"| {args.small:,} | {ms:.2f} | {1e3 * min(ts):.2f} | {1e3 * max(ts):.2f} |")
        print(f"| {args.big:,} | {mb:.2f} | {1e3 * min(tb):.2f} | {1e3 * max(tb):.2f} |")
        print(f"\nratio (entry {args.big:,} / entry {args.small:,}): {mb / ms:.2f} (target ≤ 1.5)")
        assert big.verify(public_key=key.public_key()).ok


if __name__ == "__main__":
    main()
