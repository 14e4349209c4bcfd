"""SIGKILL at random points during 100 exports (issue 18): the ledger always verifies, the budget is
never exceeded, and every bundle on disk has its ledger entry."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from marg.marginals.privacy import PrivacyCost
from marg.marginals.synthetic import SITES, demo_codebook, generate, write_csv
from marg.protocols import keys as K
from marg.protocols.ledger import Ledger
from marg.protocols.site import SiteConfig, init_site

REPO = Path(__file__).resolve().parents[1]
CAP, EPS = 6.0, 0.1  # room for 60 exports: the rest must be refused, never squeezed in

CHILD = textwrap.dedent("""
    import sys, uuid
    from pathlib import Path
    from marg.errors import RefusedError
    from marg.marginals.codebook import Codebook
    from marg.protocols.export import export_site
    from marg.protocols.keys import load_signing_key
    from marg.protocols.site import SiteConfig
    root = Path(sys.argv[1])
    cb = Codebook.load(root / "codebook.json")
    cfg = SiteConfig.load(root / "home")
    key = load_signing_key(cfg.sign_key)
    print("ready", flush=True)
    while True:
        print("start", flush=True)
        try:
            export_site(root / "rows.csv", cb, "north", root / "out" / f"{uuid.uuid4().hex}.bundle", stats="first",
                        epsilon=float(sys.argv[2]), mechanism="laplace", signing_key=key, ledger_dir=cfg.ledger,
                        site_home=cfg.home)
            print("done", flush=True)
        except RefusedError as exc:
            print("refused", str(exc)[:60], flush=True)
""")


def check(root: Path) -> tuple[int, int]:
    """The ledger verifies with every bundle on disk; the spend is within the cap. Returns
    (entries, bundles)."""
    cfg = SiteConfig.load(root / "home")
    led = Ledger(cfg.ledger, site=cfg)
    bundles = sorted((root / "out").glob("*.bundle"))
    rep = led.verify(bundle_paths=bundles or None)
    assert rep.ok, rep.reason
    spent = PrivacyCost.from_dict(rep.spent)
    assert spent.epsilon <= CAP * (1 + 1e-9), spent
    assert led.state().cumulative == spent  # the checkpointed state agrees with the full check
    releases = sum(1 for e in led.entries() if e["kind"] == "release")
    assert releases >= len(bundles)  # an entry may outlive its bundle (killed before the write), never the reverse
    return releases, len(bundles)


@pytest.mark.slow
def test_sigkill_at_random_points_during_100_exports(tmp_path):
    root = tmp_path
    demo_codebook().save(root / "codebook.json")
    write_csv(root / "rows.csv", generate(300, SITES[0], seed=9))
    (root / "out").mkdir()
    kf = K.generate_keys("north", root / "keys")
    sk = K.load_signing_key(kf.sign_key)
    cfg = init_site("north", kf.sign_key, sk, root / "ledger", home=root / "home")
    Ledger(cfg.ledger, site=cfg).set_cap(PrivacyCost(epsilon=CAP), sk, "north")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    rng = random.Random(18)
    started = kills = 0
    while started < 100:
        p = subprocess.Popen([sys.executable, "-c", CHILD, str(root), str(EPS)], stdout=subprocess.PIPE, text=True, env=env)
        assert p.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.0, 0.6))  # somewhere inside some export: counting, signing, the append, the write
        p.send_signal(signal.SIGKILL)
        out, _ = p.communicate(timeout=60)
        kills += 1
        started += out.count("start")
        check(root)
    releases, bundles = check(root)
    assert started >= 100 and kills > 10
    assert releases >= min(60, bundles)
