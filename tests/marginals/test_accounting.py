"""Privacy accounting (issue 25): releases compose in zCDP and convert once through OpenDP;
the cap holds the composed spend; lowering a cap changes only what is named."""

from __future__ import annotations

import json
import math

import opendp.prelude as dp
import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519

from marg.marginals.accounting import DEFAULT_DELTA, PrivacyCost, Spend, check_budget
from marg.marginals.counts.dp_conversions import rho_for_epsilon
from marg.marginals.synthetic import SITES, demo_codebook, generate, write_csv
from marg.protocols.ledger import Ledger
from marg.protocols.ledger_state import checkpoint_bytes
from tests.helpers.console import marg

dp.enable_features("contrib")


def _gauss(rho: float):
    """A real OpenDP Gaussian measurement costing ``rho`` at sensitivity 1."""
    return dp.m.make_gaussian(dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float),
                              scale=1.0 / math.sqrt(2 * rho))


def _laplace(eps: float):
    return dp.m.make_laplace(dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=1.0 / eps)


# ---------------------------------------------------------------------------------------
# the composed spend against OpenDP itself
# ---------------------------------------------------------------------------------------
def test_spend_of_gaussian_releases_is_opendps_composition_converted_once():
    rho = rho_for_epsilon(1.0, 1e-6)
    costs = [PrivacyCost(epsilon=1.0, delta=1e-6, rho=rho)] * 4
    ms = [_gauss(rho) for _ in costs]
    ref = dp.c.make_zCDP_to_approxDP(dp.c.make_composition(ms)).map(1.0).epsilon(1e-5)
    s = Spend.of(*costs)
    assert s.epsilon_at(1e-5) == pytest.approx(ref, rel=1e-9)
    assert s.rho == pytest.approx(float(dp.c.make_composition(ms).map(1.0)), rel=1e-9)
    assert ref < 2.0 < 4.0  # the four fit a (2, 1e-5) cap; their ε's added would not
    five = Spend.of(*costs, costs[0])
    assert five.epsilon_at(1e-5) > 2.0


def test_laplace_releases_count_as_pure_epsilon_or_zcdp_whichever_is_tighter():
    # few large Laplace releases: pure ε is tighter (no δ needed)
    big = [PrivacyCost(epsilon=1.0, rho=0.5)] * 2
    assert Spend.of(*big).epsilon_at(1e-6) == pytest.approx(2.0)
    # many small ones: zCDP is tighter (ε²/2 each, composed, converted by OpenDP)
    small = [PrivacyCost(epsilon=0.1, rho=0.005)] * 100
    zc = dp.c.make_zCDP_to_approxDP(dp.c.make_composition([dp.c.make_pureDP_to_zCDP(_laplace(0.1))] * 100))
    ref = zc.map(1.0).epsilon(1e-6)
    got = Spend.of(*small).epsilon_at(1e-6)
    assert got == pytest.approx(ref, rel=1e-6) and got < 10.0
    # a Laplace cost recorded without its ρ (an older entry) gets ε²/2 from OpenDP
    assert Spend.of(PrivacyCost(epsilon=0.3)).rho == pytest.approx(0.045)
    # mixed: Laplace pure ε composed with the Gaussians' converted ε, by OpenDP's composition
    g = rho_for_epsilon(1.0, 1e-6)
    mixed = Spend.of(PrivacyCost(epsilon=0.2, rho=0.02), PrivacyCost(epsilon=1.0, delta=1e-6, rho=g))
    parts = [dp.c.make_approximate(_laplace(0.2)), dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(_gauss(g)), 1e-5)]
    ref_b = dp.c.make_composition(parts).map(1.0)[0]
    ref_a = dp.c.make_zCDP_to_approxDP(_gauss(g + 0.02)).map(1.0).epsilon(1e-5)
    assert mixed.epsilon_at(1e-5) == pytest.approx(min(ref_a, ref_b), rel=1e-6)


def test_cap_holds_the_composed_spend_and_exact_releases_exceed_it():
    rho = rho_for_epsilon(1.0, 1e-6)
    c = PrivacyCost(epsilon=1.0, delta=1e-6, rho=rho)
    cap = PrivacyCost(epsilon=2.0, delta=1e-5)
    check_budget(cap, Spend.of(c, c, c), c)
    with pytest.raises(Exception, match="privacy budget exhausted: spent ε=1.88"):
        check_budget(cap, Spend.of(c, c, c, c), c)
    with pytest.raises(Exception, match="an exact release .* admits only DP releases"):
        check_budget(cap, Spend(), PrivacyCost.unbounded())
    assert Spend.from_dict(json.loads(json.dumps(Spend.of(c, PrivacyCost(epsilon=0.5)).to_dict()))) == Spend.of(
        c, PrivacyCost(epsilon=0.5))


def test_a_checkpoint_of_an_older_marg_without_the_composed_spend_is_folded_again(tmp_path):
    key = ed25519.Ed25519PrivateKey.generate()
    led = Ledger(tmp_path / "L")
    led.set_cap(PrivacyCost(epsilon=2.0, delta=1e-5), key, "s")
    rho = rho_for_epsilon(1.0, 1e-6)
    for i in range(3):
        led.append(bundle_digest=f"{i:064x}", site="s", statistics=[],
                   cost=PrivacyCost(epsilon=1.0, delta=1e-6, rho=rho),
                   private_key=key)
    state = led.state()
    # rewrite the checkpoint as an older marg wrote it: the same state without "spend"
    body = json.loads(checkpoint_bytes(state, key, "2025-01-01T00:00:00+00:00"))
    from marg.protocols.signing import sign_document

    old = {k: v for k, v in body.items() if k not in ("key_id", "signature")}
    old["state"] = {k: v for k, v in old["state"].items() if k != "spend"}
    led.checkpoint_path.write_text(json.dumps(sign_document(old, key)))
    assert Ledger(tmp_path / "L", public_key=key.public_key()).state().spend == state.spend
    led.append(bundle_digest=f"{9:064x}", site="s", statistics=[], cost=PrivacyCost(epsilon=1.0, delta=1e-6, rho=rho),
               private_key=key)  # the fourth still fits
    with pytest.raises(Exception, match="privacy budget exhausted"):
        led.append(bundle_digest=f"{10:064x}", site="s", statistics=[],
                   cost=PrivacyCost(epsilon=1.0, delta=1e-6, rho=rho), private_key=key)
    assert led.verify(public_key=key.public_key()).ok


# ---------------------------------------------------------------------------------------
# through the installed console script
# ---------------------------------------------------------------------------------------
@pytest.fixture
def site(tmp_path, monkeypatch):
    monkeypatch.setenv("MARG_HOME", str(tmp_path / "home"))
    demo_codebook().save(tmp_path / "cb.json")
    write_csv(tmp_path / "north.csv", generate(400, SITES[0], seed=3))
    assert marg("keys", "init", "--site", "north", "--dir", "keys", cwd=tmp_path).returncode == 0
    return tmp_path


def _export(site, name, *extra):
    return marg("export", "north.csv", "--schema", "cb.json", "--site", "north", "--out", name, "--stats", "first",
                *extra, cwd=site)


def test_cap_2_at_1e5_admits_exactly_four_gaussian_exports_at_epsilon_1(site):
    r = marg("audit", "init", "--site", "north", "--key", "keys/north.sign.key", "--epsilon", "2", "--delta", "1e-5",
             cwd=site)
    assert r.returncode == 0, r.stderr
    for i in range(4):
        r = _export(site, f"b{i}.bundle", "--epsilon", "1", "--rounds", "1")
        assert r.returncode == 0, r.stderr
    r = _export(site, "b4.bundle", "--epsilon", "1", "--rounds", "1")
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "privacy budget exhausted" in r.stderr
    assert not (site / "b4.bundle").exists()
    shown = marg("audit", "show", cwd=site)
    assert shown.returncode == 0 and "ρ=0.09742" in shown.stdout and "by OpenDP's conversion" in shown.stdout
    out = json.loads(marg("audit", "show", "--json", cwd=site).stdout)
    rho = sum(PrivacyCost.from_dict(e["cost"]).rho for e in out["entries"])
    ref = dp.c.make_zCDP_to_approxDP(_gauss(rho)).map(1.0).epsilon(1e-5)
    assert out["spent"]["rho"] == pytest.approx(rho) and out["spent"]["epsilon"] == pytest.approx(ref, rel=1e-9)
    assert out["spent"]["delta"] == 1e-5 and out["spent_sum"]["epsilon"] == pytest.approx(4.0)
    assert marg("audit", "verify", cwd=site).returncode == 0


def test_lowering_the_cap_changes_only_what_is_named_and_defaults_agree(site):
    # audit init without --delta caps at the δ export uses by default: a default Gaussian export fits
    r = marg("audit", "init", "--site", "north", "--key", "keys/north.sign.key", "--epsilon", "4", cwd=site)
    assert r.returncode == 0, r.stderr
    cap = json.loads(marg("audit", "budget", "--json", cwd=site).stdout)["cap"]
    assert cap == {"epsilon": 4.0, "delta": DEFAULT_DELTA, "rho": 0.0}
    assert _export(site, "a.bundle", "--epsilon", "1", "--rounds", "1").returncode == 0
    # lowering ε keeps δ (the README's `marg audit budget --epsilon 2.4`): later exports still fit
    r = marg("audit", "budget", "--epsilon", "2.4", cwd=site)
    assert r.returncode == 0, r.stderr
    cap = json.loads(marg("audit", "budget", "--json", cwd=site).stdout)["cap"]
    assert cap == {"epsilon": 2.4, "delta": DEFAULT_DELTA, "rho": 0.0}
    assert _export(site, "b.bundle", "--epsilon", "1", "--rounds", "1").returncode == 0
    # raising back is refused in one line, nothing recorded
    n = len((site / "home" / "ledger" / "ledger.jsonl").read_bytes().splitlines())
    r = marg("audit", "budget", "--epsilon", "4", cwd=site)
    assert r.returncode == 1 and "never raised" in r.stderr and r.stderr.count("\n") == 1
    assert len((site / "home" / "ledger" / "ledger.jsonl").read_bytes().splitlines()) == n


def test_the_composed_spend_never_exceeds_the_sum_of_recorded_costs_so_older_ledgers_keep_verifying():
    """Random histories of Laplace and Gaussian releases as marg records them: the composed ε at
    the summed δ is at most the summed ε (the rule older ledgers were checked against)."""
    import numpy as np

    from marg.marginals.counts.dp_conversions import rho_to_epsilon

    rng = np.random.default_rng(11)
    for _ in range(20):
        costs = []
        for _ in range(int(rng.integers(1, 6))):
            if rng.random() < 0.5:
                e = float(rng.uniform(0.05, 2.0))
                costs.append(PrivacyCost(epsilon=e, rho=e * e / 2))
            else:
                r, d = float(rng.uniform(0.001, 0.5)), float(rng.choice([1e-7, 1e-6, 1e-5]))
                costs.append(PrivacyCost(epsilon=rho_to_epsilon(r, d), delta=d, rho=r))
        total = sum(costs, PrivacyCost())
        s = Spend.of(*costs)
        assert s.epsilon_at(total.delta if total.delta > 0 else 1e-6) <= total.epsilon * (1 + 1e-9)
        cap = PrivacyCost(epsilon=total.epsilon, delta=max(total.delta, 1e-9))
        check_budget(cap, Spend.of(*costs[:-1]), costs[-1])  # what the old rule accepted, the new one does


# ---------------------------------------------------------------------------------------
# extreme ε through the console script
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("eps,words", [("1e-300", "above 1e+15 per cell"),
                                       ("1e6", "beyond what OpenDP's zCDP conversion"),
                                       ("1e-300 --mechanism laplace", "above the 1e+15")]
                         + [("RHO1e6", "beyond what OpenDP")])
def test_an_epsilon_that_cannot_be_computed_is_refused_in_one_line_with_nothing_written(site, eps, words):
    assert marg("audit", "init", "--site", "north", "--key", "keys/north.sign.key", cwd=site).returncode == 0
    ledger = site / "home" / "ledger" / "ledger.jsonl"
    before = ledger.read_bytes() if ledger.exists() else b""
    r = _export(site, "x.bundle", *(["--rho", "1e6"] if eps == "RHO1e6" else ["--epsilon", *eps.split()]))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and words in r.stderr, r.stderr
    assert "internal error" not in r.stderr and not (site / "x.bundle").exists()
    assert (ledger.read_bytes() if ledger.exists() else b"") == before


def test_a_release_that_will_be_mostly_noise_is_warned_about_with_its_noise(site):
    r = _export(site, "x.bundle", "--epsilon", "1e-4", "--rounds", "1", "--no-ledger")
    assert r.returncode == 0 and (site / "x.bundle").exists()
    warn = [ln for ln in r.stderr.splitlines() if ln.startswith("warning: the noise std")]
    assert len(warn) == 1 and "9 of 9 tables" in warn[0]
    # the stated std is the std the bundle records, and it is above n / cells
    d = json.loads(marg("inspect", "x.bundle", "--json", cwd=site).stdout)
    worst = max(d["statistics"], key=lambda st: st["noise_std"] * math.prod(st["shape"]))
    assert f"std {worst['noise_std']:.3g}" in warn[0] and worst["noise_std"] >= 400 / math.prod(worst["shape"])
    r = _export(site, "y.bundle", "--epsilon", "5", "--rounds", "1", "--no-ledger")
    assert r.returncode == 0 and "warning: the noise" not in r.stderr


def test_a_sites_rounds_on_the_model_card_are_composed_as_its_ledger_composes_them():
    from marg.protocols.aggregate import composed_privacy

    rho = rho_for_epsilon(1.0, 1e-6)
    rec = {"mechanism": "gaussian", "epsilon": 1.0, "delta": 1e-6, "rho": rho}
    out = composed_privacy([rec] * 4)
    ms = dp.c.make_composition([_gauss(rho)] * 4)
    ref = dp.c.make_zCDP_to_approxDP(ms).map(1.0).epsilon(4e-6)
    assert out["epsilon"] == pytest.approx(ref, rel=1e-9) and out["epsilon"] < 4.0
    assert out["delta"] == pytest.approx(4e-6) and out["rho"] == pytest.approx(4 * rho) and out["rounds"] == 4


def test_ledgers_written_by_the_previous_marg_verify_and_are_held_to_the_composed_spend(tmp_path):
    """tests/fixtures/compat/ledger_v2: written by marg before this accounting (cap (3, 1e-5), one
    Laplace export at ε = 0.5, two Gaussian at ε = 1; and an exact release with codebook-scoped
    digests). They verify; their recorded costs give the composed spend; a further Gaussian
    export that the summed ε (3.5) would have refused fits."""
    import shutil
    from pathlib import Path

    from cryptography.hazmat.primitives import serialization

    from marg.marginals.privacy import plan_cost
    from marg.marginals.counts.tables import plan_cliques

    src = Path(__file__).resolve().parents[1] / "fixtures" / "compat" / "ledger_v2"
    key = serialization.load_pem_private_key((src / "north.sign.key.pem").read_bytes(), None)
    for d in ("dp-ledger", "exact-ledger"):
        shutil.copytree(src / d, tmp_path / d)
    led = Ledger(tmp_path / "dp-ledger", public_key=key.public_key())
    assert led.verify().ok
    costs = [PrivacyCost.from_dict(e["cost"]) for e in led.entries() if e.get("kind") == "release"]
    st = led.state()
    assert st.spend == Spend.of(*costs) and sum(c.epsilon for c in costs) == pytest.approx(2.5)
    g = plan_cost(plan_cliques(demo_codebook(), "first"), demo_codebook(), rho=rho_for_epsilon(1.0, 1e-6), delta=1e-6)
    assert st.spend.add(g).epsilon_at(1e-5) < 3.0 < sum(c.epsilon for c in costs) + g.epsilon
    led.append(bundle_digest="9" * 64, site="north", statistics=[], cost=g, private_key=key)
    assert led.verify().ok and led.state().spend == Spend.of(*costs, g)
    ex = Ledger(tmp_path / "exact-ledger", public_key=key.public_key())
    assert ex.verify().ok and all(not k.endswith("#study") for k in ex.state().exact)


def test_a_new_cap_changes_only_the_fields_named():
    from marg.cli.audit import new_cap

    assert new_cap(None, 2.0, None, None) == PrivacyCost(epsilon=2.0, delta=DEFAULT_DELTA)
    assert new_cap(PrivacyCost(epsilon=4.0, delta=1e-5), 2.4, None, None) == PrivacyCost(epsilon=2.4, delta=1e-5)
    assert new_cap(PrivacyCost(epsilon=4.0), 2.0, None, None) == PrivacyCost(epsilon=2.0)  # a pure cap stays pure
    assert new_cap(PrivacyCost(rho=0.5), 2.0, None, None) == PrivacyCost(epsilon=2.0, delta=DEFAULT_DELTA, rho=0.5)
    assert new_cap(PrivacyCost(epsilon=4.0, delta=1e-5, rho=0.5), None, 1e-6, None) == PrivacyCost(
        epsilon=4.0, delta=1e-6, rho=0.5)


def test_a_mixed_release_keeps_its_own_split_so_the_zcdp_part_is_never_undercounted():
    """Issue 34 (i34j): the pure parts' ρ of a mixed release is computed once, by release_cost (each part's OpenDP
    map), and the ledger's Spend reads it (``pure_rho``). Two Laplace tables beside a Gaussian one: the zCDP part is
    exactly the Gaussian's ρ and ε is OpenDP's pure + zCDP composition. Recomputing the pure ρ from the summed ε
    (ε²/2 of 0.7 > ε²/2 of 0.3 + of 0.4) took 0.12 from the Gaussian's 0.01 and composed ε = 0.7, below the truth.
    A ledger entry written before ``pure_rho`` (one Laplace table) reads OpenDP's map of its pure ε."""
    from marg.marginals.accounting import release_cost
    from marg.marginals.counts.dp_conversions import pure_and_zcdp_to_epsilon, pure_rho

    cost = release_cost([("laplace", 0.3, pure_rho(0.3), 0.0), ("laplace", 0.4, pure_rho(0.4), 0.0),
                         ("gaussian", 0.0, 0.01, 1e-6)])
    assert cost.pure_epsilon == pytest.approx(0.7) and cost.pure_rho == pytest.approx(pure_rho(0.3) + pure_rho(0.4))
    back = PrivacyCost.from_dict(json.loads(json.dumps(cost.to_dict())))
    assert back == cost
    spend = Spend.of(back)
    assert spend.rho_zcdp == pytest.approx(0.01, rel=1e-9) and spend.eps_pure == pytest.approx(0.7)
    assert spend.composition_at(1e-6) == ("pure+zcdp", pytest.approx(pure_and_zcdp_to_epsilon(0.7, 0.01, 1e-6)))
    assert spend.epsilon_at(1e-6) > 0.7 + 0.1
    one = release_cost([("laplace", 0.5, pure_rho(0.5), 0.0), ("gaussian", 0.0, 0.01, 1e-6)]).to_dict()
    del one["pure_rho"]
    assert PrivacyCost.from_dict(one).pure_rho == pytest.approx(pure_rho(0.5), rel=1e-12)
