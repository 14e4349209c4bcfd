"""SIGKILL at random points during 100 exports of a configured site: after every kill the ledger
verifies, the budget is never exceeded, and every bundle on disk has its ledger entry (slow)."""

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

from marg.protocols.keys import generate_keys, load_signing_key
from marg.protocols.ledger import Ledger
from marg.protocols.site import SiteConfig, init_site

REPO = Path(__file__).resolve().parents[2]

WORKER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from marg.errors import RefusedError
    from marg.marginals.data.codebook import Codebook
    from marg.protocols.export import export_site
    from marg.protocols.keys import load_signing_key
    from marg.protocols.site import SiteConfig
    d = Path(sys.argv[1]); start = int(sys.argv[2]); stop = int(sys.argv[3])
    cb = Codebook.load(d / "codebook.json"); key = load_signing_key(sys.argv[4]); cfg = SiteConfig.load(d / "home")
    for i in range(start, stop):
        try:
            # force: a worker killed after writing bundle i but before saying so exports i again (a retry)
            export_site(d / "rows.csv", cb, "north", d / "out" / f"b{i:04d}.bundle", stats="first", epsilon=0.1,
                        mechanism="laplace", signing_key=key, ledger_dir=cfg.ledger, site_home=cfg.home, force=True)
        except RefusedError:
            pass  # the cap: refused before anything is written
        print(i, flush=True)
""")


@pytest.mark.slow
def test_random_kills_during_100_exports(tmp_path):
    from marg.marginals.accounting import PrivacyCost
    from marg.marginals.synthetic import SITES, demo_codebook, generate, write_csv

    demo_codebook().save(tmp_path / "codebook.json")
    write_csv(tmp_path / "rows.csv", generate(300, SITES[0], seed=1))
    (tmp_path / "out").mkdir()
    keys = generate_keys("north", tmp_path / "keys")
    cap = PrivacyCost(epsilon=6.0)  # 60 exports of 0.1 fit: the last ones must be refused
    sk = load_signing_key(keys.sign_key)
    cfg = init_site("north", keys.sign_key, sk, tmp_path / "ledger", home=tmp_path / "home")
    Ledger(cfg.ledger, site=cfg).set_cap(cap, sk, "north")  # the cap: a signed entry of the chain

    def check() -> tuple[Ledger, list[Path]]:
        led = Ledger(tmp_path / "ledger", site=SiteConfig.load(tmp_path / "home"))  # pinned key, recorded head
        bundles = sorted((tmp_path / "out").glob("*.bundle"))
        rep = led.verify(bundle_paths=bundles or None)
        assert rep.ok, rep.reason  # the chain verifies and every bundle on disk has its entry
        assert led.spent().epsilon <= cap.epsilon * (1 + 1e-9)
        assert led.state().to_dict()["cumulative"] == rep.spent  # the checkpoint agrees with the full check
        return led, bundles

    rng = random.Random(7)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done, kills = 0, 0
    while done < 100:
        p = subprocess.Popen([sys.executable, "-c", WORKER, str(tmp_path), str(done), "100", str(keys.sign_key)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        let_finish = rng.randint(0, 4)  # exports to let through, then kill within the next one
        seen = []
        while len(seen) <= let_finish:
            line = p.stdout.readline()
            if not line:
                break
            seen.append(int(line))
            if len(seen) == let_finish + 1 or seen[-1] == 99:
                break
        if p.poll() is None and seen and seen[-1] < 99:
            time.sleep(rng.uniform(0.0, 0.03))
            p.send_signal(signal.SIGKILL)
        rest, err = p.communicate(timeout=120)
        seen += [int(x) for x in rest.split()]
        assert p.returncode in (0, -9), err
        kills += p.returncode == -9
        done = (max(seen) + 1) if seen else done
        check()
    assert kills >= 10, kills
    led, bundles = check()
    releases = [e for e in led.entries() if e["kind"] == "release"]
    assert len(releases) >= len(bundles) and len(bundles) >= 50
