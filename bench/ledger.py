"""Ledger append cost against ledger length, side by side in one run: this release and the previous one.

Run:

    python bench/ledger.py                      # appends at 10 and 10,000 entries (+ the old ledger at 10 and 1,000)
    python bench/ledger.py --large 2000 --rounds 9 --old-large 300   # quicker

Each ledger is a configured site's (pinned key, site configuration recording the head, a
signed cap entry first) filled with signed DP releases of 37 tables each (the demo's
``--stats all``: an entry of ~4.8 KB), through the real append (its fsyncs skipped while
filling, then one ``sync``). Every round restores each ledger folder and site configuration
from its filled template and syncs the disk (untimed: otherwise the timed append's fsync would
also flush the restored copy), then times ONE append to each, in alternating order, so both
sizes see the same machine noise; the median over rounds is reported. The
previous release's ledger (``protocols/ledger.py`` at ``--base``, default 6080a08, the last
commit before issue 18; loaded from git) re-reads and
rewrites the whole file per append; it is filled to ``--old-large`` entries only (its fill is
quadratic).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import types
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cryptography.hazmat.primitives.asymmetric import ed25519  # noqa: E402

from marg.marginals.accounting import PrivacyCost  # noqa: E402
from marg.protocols.keys import generate_keys, load_signing_key  # noqa: E402
from marg.protocols.ledger import Ledger  # noqa: E402
from marg.protocols.site import SiteConfig, init_site  # noqa: E402

FEATURES = [f"f{i}" for i in range(8)]
STATS = ([{"name": "N[y]", "kind": "counts", "clique": ["y"], "shape": [2], "mechanism": "laplace", "std": 2.83}]
         + [{"name": f"N[{a},y]", "kind": "counts", "clique": [a, "y"], "shape": [4, 2], "mechanism": "laplace",
             "std": 2.83}
            for a in FEATURES]
         + [{"name": f"N[{a},{b},y]", "kind": "counts", "clique": [a, b, "y"], "shape": [4, 4, 2],
             "mechanism": "laplace",
             "std": 39.6} for i, a in enumerate(FEATURES) for b in FEATURES[i + 1:]])
COST = PrivacyCost(epsilon=1e-4)


def machine() -> str:
    return (f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()} "
            f"{platform.release()}")


@contextmanager
def no_fsync():
    """Skip fsync while filling the templates (the state is what matters, not its durability)."""
    real = os.fsync
    os.fsync = lambda fd: None
    try:
        yield
    finally:
        os.fsync = real
        os.sync()


def digest(i: int) -> str:
    return hashlib.sha256(f"bundle {i}".encode()).hexdigest()


# ---------------------------------------------------------------------------------------
# this release
# ---------------------------------------------------------------------------------------
class NewSite:
    """A configured site whose ledger holds ``n`` entries (a cap entry, then releases)."""

    def __init__(self, root: Path, n: int):
        self.root = root
        self.home, self.ledger = root / "home", root / "ledger"
        kf = generate_keys("north", root / "keys")
        self.key = load_signing_key(kf.sign_key)
        cfg = init_site("north", kf.sign_key, self.key, self.ledger, home=self.home)
        led = Ledger(self.ledger, site=cfg)
        led.set_cap(PrivacyCost(epsilon=1e9), self.key, "north")
        with no_fsync():
            for i in range(n - 1):
                led.append(bundle_digest=digest(i), site="north", statistics=STATS, cost=COST, private_key=self.key)
        self.template = root / "template"
        shutil.copytree(self.home, self.template / "home")
        shutil.copytree(self.ledger, self.template / "ledger")
        self.count = 0

    def restore(self) -> None:
        for name in ("home", "ledger"):
            shutil.rmtree(self.root / name)
            shutil.copytree(self.template / name, self.root / name)
        os.sync()

    def append(self) -> float:
        self.count += 1
        t0 = time.perf_counter()
        led = Ledger(self.ledger, site=SiteConfig.load(self.home))  # what an export does
        led.append(bundle_digest=digest(10**9 + self.count), site="north", statistics=STATS, cost=COST,
                   private_key=self.key)
        return time.perf_counter() - t0

    def entries(self) -> int:
        return len((self.ledger / "ledger.jsonl").read_bytes().split(b"\n")) - 1


# ---------------------------------------------------------------------------------------
# the previous release (loaded from git)
# ---------------------------------------------------------------------------------------
def old_ledger_module(base: str) -> types.ModuleType:
    src = subprocess.run(["git", "-C", str(ROOT), "show", f"{base}:protocols/ledger.py"], capture_output=True,
                         text=True, check=True).stdout
    for mod in ("keys", "signing", "bundle"):
        src = src.replace(f"from .{mod} import", f"from marg.protocols.{mod} import")
    spec = importlib.util.spec_from_loader("old_ledger", loader=None)
    module = importlib.util.module_from_spec(spec)
    sys.modules["old_ledger"] = module  # dataclasses look their module up
    exec(compile(src, f"{base}:protocols/ledger.py", "exec"), module.__dict__)
    return module


class OldSite:
    def __init__(self, module: types.ModuleType, root: Path, n: int):
        self.root, self.module = root, module
        self.key = ed25519.Ed25519PrivateKey.generate()
        self.ledger = root / "ledger"
        led = module.Ledger(self.ledger)
        with no_fsync():
            for i in range(n):
                led.append(bundle_digest=digest(i), site="north", statistics=STATS, cost=COST, private_key=self.key)
        self.template = root / "template"
        shutil.copytree(self.ledger, self.template)
        self.count = 0

    def restore(self) -> None:
        shutil.rmtree(self.ledger)
        shutil.copytree(self.template, self.ledger)
        os.sync()

    def append(self) -> float:
        self.count += 1
        t0 = time.perf_counter()
        self.module.Ledger(self.ledger).append(bundle_digest=digest(10**9 + self.count), site="north", statistics=STATS,
                                               cost=COST, private_key=self.key)
        return time.perf_counter() - t0


def measure(sites: dict[str, object], rounds: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {k: [] for k in sites}
    order = list(sites)
    for r in range(rounds):
        for s in sites.values():
            s.restore()
        for k in (order if r % 2 == 0 else order[::-1]):
            times[k].append(sites[k].append())
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", type=int, default=10)
    ap.add_argument("--large", type=int, default=10_000)
    ap.add_argument("--old-large", type=int, default=1_000)
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--base", default="6080a08",
                    help="git revision of the previous release's ledger (the last before issue 18)")
    args = ap.parse_args()
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        sites: dict[str, object] = {f"new@{args.small}": NewSite(root / "ns", args.small)}
        sites[f"new@{args.large}"] = NewSite(root / "nl", args.large)
        fill_new = time.perf_counter() - t0
        print(f"filled this release's ledgers ({args.small} and {args.large} entries) in {fill_new:.1f} s; entry "
              f"{len((root / 'nl' / 'ledger' / 'ledger.jsonl').read_bytes()) // args.large} bytes")
        if args.old_large > 0:
            old = old_ledger_module(args.base)
            t0 = time.perf_counter()
            sites[f"old@{args.small}"] = OldSite(old, root / "os", args.small)
            sites[f"old@{args.old_large}"] = OldSite(old, root / "ol", args.old_large)
            print(f"filled the previous release's ledgers ({args.small} and {args.old_large} entries) in "
                  f"{time.perf_counter() - t0:.1f} s")
        times = measure(sites, args.rounds)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"\nmedian of {args.rounds} rounds (one append per ledger per round, alternating order):")
    print("| ledger | entries before the append | median append (ms) | min (ms) | max (ms) |")
    print("|---|---|---|---|---|")
    for k, v in times.items():
        who, n = k.split("@")
        print(f"| {'this release' if who == 'new' else 'previous release'} | {int(n):,} | {1e3 * med[k]:.2f} | "
              f"{1e3 * min(v):.2f} | {1e3 * max(v):.2f} |")
    ratio = med[f"new@{args.large}"] / med[f"new@{args.small}"]
    print(f"\nthis release: append at {args.large:,} / append at {args.small:,} = {ratio:.2f} (target <= 1.5)")
    if args.old_large > 0:
        print(f"previous release: append at {args.old_large:,} / append at {args.small:,} = "
              f"{med[f'old@{args.old_large}'] / med[f'old@{args.small}']:.2f}")


if __name__ == "__main__":
    main()
