"""SIGKILL at random points during 100 exports: the ledger verifies, the budget is never exceeded,
and every bundle on disk has its ledger entry (slow)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from marg.protocols.keys import generate_keys, load_verify_key
from marg.protocols.ledger import Ledger

REPO = Path(__file__).resolve().parents[1]

WORKER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from marg.errors import RefusedError
    from marg.marginals.codebook import Codebook
    from marg.protocols.export import export_site
    from marg.protocols.keys import load_signing_key
    d = Path(sys.argv[1]); start = int(sys.argv[2]); stop = int(sys.argv[3])
    cb = Codebook.load(d / "codebook.json"); key = load_signing_key(sys.argv[4])
    for i in range(start, stop):
        try:
            export_site(d / "rows.csv", cb, "north", d / "out" / f"b{i:04d}.bundle", stats="first", epsilon=0.1,
                        mechanism="laplace", signing_key=key, ledger_dir=d / "ledger")
        except RefusedError:
            pass  # the cap: refused before anything is written
        print(i, flush=True)
""")


@pytest.mark.slow
def test_random_kills_during_100_exports(tmp_path):
    from marg.marginals.privacy import PrivacyCost, write_budget
    from marg.marginals.synthetic import SITES, demo_codebook, generate, write_csv

    demo_codebook().save(tmp_path / "codebook.json")
    write_csv(tmp_path / "rows.csv", generate(300, SITES[0], seed=1))
    (tmp_path / "out").mkdir()
    keys = generate_keys("north", tmp_path / "keys")
    cap = PrivacyCost(epsilon=6.0)  # 60 exports of 0.1 fit: the last ones must be refused
    write_budget(tmp_path / "ledger", cap)
    rng = random.Random(7)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done, kills = 0, 0
    while done < 100:
        stop = min(100, done + 8)  # a few exports per worker, so that kills land among them
        p = subprocess.Popen([sys.executable, "-c", WORKER, str(tmp_path), str(done), str(stop), str(keys.sign_key)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        try:
            out, err = p.communicate(timeout=rng.uniform(0.6, 2.5))
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGKILL)
            out, err = p.communicate(timeout=60)
        assert p.returncode in (0, -9), err
        kills += p.returncode == -9
        finished = [int(x) for x in out.split()]
        done = (max(finished) + 1) if finished else done
    assert kills >= 10, kills
    led = Ledger(tmp_path / "ledger")
    bundles = sorted((tmp_path / "out").glob("*.bundle"))
    rep = led.verify(bundle_paths=bundles, public_key=load_verify_key(keys.sign_pub))
    assert rep.ok, rep.reason  # the chain verifies and every bundle on disk has its entry
    assert led.spent().epsilon <= cap.epsilon * (1 + 1e-9)
    assert len(led.entries()) >= len(bundles) and len(bundles) >= 50
