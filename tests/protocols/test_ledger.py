"""The site's release ledger (protocols.ledger): chain, signatures, budget, crash safety."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import typer
from cryptography.hazmat.primitives.asymmetric import ed25519, x25519
from typer.testing import CliRunner

from marg.cli import audit as audit_cli
from marg._util import canonical_json
from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label
from marg.errors import InputError, RefusedError
from marg.marginals.accounting import PrivacyCost
from marg.marginals.budget_file import write_budget
from marg.marginals.counts.counting import count_tables
from marg.marginals.counts.tables import plan_cliques
from marg.protocols import keys as K
from marg.protocols.bundle import Bundle
from marg.protocols.ledger import Ledger
from marg.protocols.ledger_format import GENESIS, entry_signing_bytes, line_hash, parse_entry
from marg.protocols.ledger_verify import verify_ledger_bytes
from marg.protocols.signing import finalize_bundle, verify_bytes, unb64

REPO = Path(__file__).resolve().parents[2]


def make_bundle(site="north", seed=0, n=30) -> Bundle:
    cb = Codebook(
        features=(CategoricalFeature("a", ("0", "1")), CategoricalFeature("b", ("x", "y", "z"))),
        label=Label("y", ("neg", "pos")),
    )
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.integers(0, 2, n), rng.integers(0, 3, n)]).astype(float)
    tables = count_tables(cb, X, rng.integers(0, 2, n), plan_cliques(cb, "all"))
    return Bundle.build(cb, tables, site=site, n_rows=n)


def _stats(rng, k):
    return [{"name": f"N[f{i},y]", "kind": "counts", "clique": [f"f{i}", "y"], "shape": [int(rng.integers(2, 5)), 2],
             "mechanism": "laplace", "std": 1.5} for i in range(k)]


def _digest(i: int) -> str:
    return hashlib.sha256(f"bundle {i}".encode()).hexdigest()


def fill(ledger: Ledger, key, n: int, seed: int = 0) -> list[PrivacyCost]:
    rng = np.random.default_rng(seed)
    costs = []
    for i in range(n):
        c = PrivacyCost(epsilon=float(rng.uniform(0.05, 0.5)))
        ledger.append(bundle_digest=_digest(i), site="north", statistics=_stats(rng, 3), cost=c,
                      recipient=None, private_key=key)
        costs.append(c)
    return costs


@pytest.fixture
def key():
    return ed25519.Ed25519PrivateKey.generate()


def lines_of(ledger: Ledger) -> list[bytes]:
    return ledger.path.read_bytes().split(b"\n")[:-1]


def write_lines(ledger: Ledger, lines: list[bytes]) -> None:
    ledger.path.write_bytes(b"".join(ln + b"\n" for ln in lines))


# ---------------------------------------------------------------------------------------
def test_append_builds_a_signed_hash_chain_and_spent_adds_up(tmp_path, key):
    led = Ledger(tmp_path / "L")
    assert led.entries() == [] and led.spent() == PrivacyCost.zero()
    costs = fill(led, key, 6)
    es = led.entries()
    raw = lines_of(led)
    assert [e["seq"] for e in es] == list(range(1, 7))
    assert es[0]["prev"] == GENESIS
    for k in range(1, 6):
        assert es[k]["prev"] == line_hash(raw[k - 1]) == hashlib.sha256(raw[k - 1]).hexdigest()
    pub = key.public_key()
    for e, ln in zip(es, raw):
        assert canonical_json(e) == ln
        assert verify_bytes(entry_signing_bytes(e), unb64(e["signature"], 64), pub)
        assert e["key_id"] == K.key_id(key)
    total = sum(c.epsilon for c in costs)
    assert led.spent().epsilon == pytest.approx(total, rel=1e-12)
    assert PrivacyCost.from_dict(es[-1]["cumulative"]).epsilon == pytest.approx(total, rel=1e-12)
    rep = led.verify(public_key=pub)
    assert rep.ok and rep.n_entries == 6 and rep.key_source == "given" and rep.head == line_hash(raw[-1])
    # no key copies in the ledger folder are trusted: without a key the signatures are unchecked, a failure
    rep = led.verify()
    assert not rep.ok and "no key" in rep.reason and rep.key_source == "none"
    assert not (led.directory / "keys").exists()


def test_verify_with_a_foreign_key_or_unsigned_entries_fails(tmp_path, key):
    led = Ledger(tmp_path / "L")
    fill(led, key, 3)
    rep = led.verify(public_key=ed25519.Ed25519PrivateKey.generate().public_key())
    assert not rep.ok and rep.first_bad_line == 1 and "not the site's key" in rep.reason
    led2 = Ledger(tmp_path / "U")
    fill(led2, None, 3)
    rep = led2.verify()
    assert not rep.ok and "unsigned" in rep.reason and rep.first_bad_seq == 1
    rep = led2.verify(allow_unsigned=True)
    assert rep.ok and rep.unsigned == [1, 2, 3]


def test_budget_is_enforced_before_anything_is_written(tmp_path, key):
    led = Ledger(tmp_path / "L")
    led.set_cap(PrivacyCost(epsilon=1.0), key, "s")
    stats = _stats(np.random.default_rng(0), 2)
    led.append(bundle_digest=_digest(0), site="s", statistics=stats, cost=PrivacyCost(epsilon=0.4), private_key=key)
    led.append(bundle_digest=_digest(1), site="s", statistics=stats, cost=PrivacyCost(epsilon=0.4), private_key=key)
    before = led.path.read_bytes()
    with pytest.raises(RefusedError, match="budget exhausted"):
        led.append(bundle_digest=_digest(2), site="s", statistics=stats, cost=PrivacyCost(epsilon=0.4), private_key=key)
    with pytest.raises(RefusedError, match="an exact release .* admits only DP releases"):
        led.append(bundle_digest=_digest(2), site="s", statistics=stats, cost=PrivacyCost.unbounded(), private_key=key)
    assert led.path.read_bytes() == before
    # exactly up to the cap is allowed
    e = led.append(bundle_digest=_digest(3), site="s", statistics=stats, cost=PrivacyCost(epsilon=0.2), private_key=key)
    assert e["cap"] == PrivacyCost(epsilon=1.0).to_dict()
    assert led.spent().epsilon == pytest.approx(1.0)
    assert led.verify(public_key=key.public_key()).ok


def test_cap_lives_in_the_chain_can_be_lowered_never_raised(tmp_path, key):
    led = Ledger(tmp_path / "L")
    with pytest.raises(InputError, match="signed"):
        led.set_cap(PrivacyCost(epsilon=1.0), None, "s")
    led.set_cap(PrivacyCost(epsilon=2.0), key, "s")
    led.append(bundle_digest=_digest(0), site="s", statistics=[], cost=PrivacyCost(epsilon=0.5), private_key=key)
    before = led.path.read_bytes()
    for raised in (PrivacyCost(epsilon=3.0), PrivacyCost(rho=5.0), PrivacyCost(epsilon=2.0, delta=1e-6)):
        with pytest.raises(RefusedError, match="raises the privacy cap"):
            led.set_cap(raised, key, "s")
    assert led.path.read_bytes() == before
    led.set_cap(PrivacyCost(epsilon=1.0), key, "s")  # lowering is fine
    with pytest.raises(RefusedError, match="budget exhausted"):
        led.append(bundle_digest=_digest(1), site="s", statistics=[], cost=PrivacyCost(epsilon=0.6), private_key=key)
    assert led.cap() == PrivacyCost(epsilon=1.0) and led.verify(public_key=key.public_key()).ok
    # budget.json beside the chain is ignored once the cap is in the chain, and editing it changes nothing
    write_budget(led.directory, PrivacyCost(epsilon=1000.0))
    with pytest.raises(RefusedError, match="budget exhausted"):
        led.append(bundle_digest=_digest(1), site="s", statistics=[], cost=PrivacyCost(epsilon=0.6), private_key=key)


def test_a_legacy_budget_json_refuses_appends_until_recorded(tmp_path, key):
    led = Ledger(tmp_path / "L")
    write_budget(led.directory, PrivacyCost(epsilon=1.0))
    with pytest.raises(RefusedError, match="outside the signed chain"):
        led.append(bundle_digest=_digest(0), site="s", statistics=[], cost=PrivacyCost(epsilon=0.5), private_key=key)
    with pytest.raises(RefusedError, match="record that one"):
        led.set_cap(PrivacyCost(epsilon=5.0), key, "s")
    led.set_cap(PrivacyCost(epsilon=1.0), key, "s")
    assert not (led.directory / "budget.json").exists() and led.cap() == PrivacyCost(epsilon=1.0)


def test_record_a_real_sealed_bundle_and_account_for_the_files(tmp_path, key):
    led = Ledger(tmp_path / "L")
    learner = x25519.X25519PrivateKey.generate()
    files = []
    for i, site_seed in enumerate([1, 2, 3]):
        # three sites' exact releases (one site's exact releases of changed data would be refused: differencing)
        final, blob = finalize_bundle(make_bundle(f"site{i}", site_seed), key, learner.public_key() if i == 1 else None)
        e = led.record(final, key, file_digest=hashlib.sha256(blob).hexdigest() if i == 1 else None,
                       recipient_name="learner" if i == 1 else None)
        assert e["bundle"] == final.digest()
        assert [s["clique"] for s in e["statistics"]] == [s["clique"] for s in final.statistics]
        assert [s["shape"] for s in e["statistics"]] == [s["shape"] for s in final.statistics]
        # an exact (noise-free) release carries no DP guarantee: its cost is unbounded
        assert e["cost"]["epsilon"] == "inf" and e["mechanism"] == "none"
        p = tmp_path / f"b{i}.bundle"
        p.write_bytes(blob)
        files.append(p)
    assert led.entries()[1]["recipient"] == K.key_id(learner) and led.entries()[1]["recipient_name"] == "learner"
    rep = led.verify(bundle_paths=files, public_key=key.public_key())
    assert rep.ok, rep.reason
    assert [b["seq"] for b in rep.bundles] == [1, 2, 3]
    # a release that is not in the ledger is named
    stray = tmp_path / "stray.bundle"
    stray.write_bytes(finalize_bundle(make_bundle("north", 9), key)[1])
    rep = led.verify(bundle_paths=files + [stray], public_key=key.public_key())
    assert not rep.ok and "stray.bundle" in rep.reason and "no ledger entry" in rep.reason
    # deleting the LAST entry keeps a valid chain, but the checkpoint and the bundle check catch it
    write_lines(led, lines_of(led)[:-1])
    rep = led.verify(public_key=key.public_key())
    assert not rep.ok and "truncated" in rep.reason
    rep = led.verify(bundle_paths=files, public_key=key.public_key())
    assert not rep.ok and ("b2.bundle" in rep.reason or "truncated" in rep.reason)
    assert any(not b["ok"] for b in rep.bundles)
    with pytest.raises(RefusedError, match="truncated"):
        led.append(bundle_digest=_digest(1), site="north", statistics=[], cost=PrivacyCost(epsilon=0.1),
                   private_key=key)


def _edit(line: bytes, **changes) -> bytes:
    obj = json.loads(line)
    obj.update(changes)
    return canonical_json(obj)


@pytest.mark.parametrize("signed", [True, False])
def test_chain_catches_edit_delete_reorder_and_mid_truncation_at_every_position(tmp_path, key, signed):
    n = 6
    led = Ledger(tmp_path / "L")
    fill(led, key if signed else None, n)
    orig = lines_of(led)
    kw = {"public_key": key.public_key()} if signed else {"allow_unsigned": True}
    assert led.verify(**kw).ok

    def check(lines, line, why):
        write_lines(led, lines)
        rep = led.verify(**kw)
        assert not rep.ok and rep.first_bad_line == line and why in rep.reason, (rep.reason, line)
        assert "\n" not in rep.reason

    for k in range(1, n + 1):
        # edit entry k: its cost lowered (valid canonical JSON, old signature kept)
        edited = list(orig)
        edited[k - 1] = _edit(orig[k - 1], cost={"epsilon": 0.0, "delta": 0.0, "rho": 0.0})
        if signed:
            check(edited, k, "bad signature")
        elif k < n:
            # without signatures, the edited entry's own sums and the next prev-hash give it away
            write_lines(led, edited)
            rep = led.verify(**kw)
            assert not rep.ok and rep.first_bad_line == k and "cumulative" in rep.reason
        # edit + re-sign with a key the ledger never used
        if signed:
            other = ed25519.Ed25519PrivateKey.generate()
            obj = json.loads(edited[k - 1])
            obj["key_id"] = K.key_id(other)
            from marg.protocols.signing import b64

            obj["signature"] = b64(other.sign(entry_signing_bytes(obj)))
            resigned = list(orig)
            resigned[k - 1] = canonical_json(obj)
            check(resigned, k, "not the site's key")
        if k < n:
            # delete entry k
            check(orig[: k - 1] + orig[k:], k, "deleted")
            # reorder entries k and k+1
            swapped = list(orig)
            swapped[k - 1], swapped[k] = swapped[k], swapped[k - 1]
            check(swapped, k, "expected seq")
            # truncate entry k in the middle of the file
            cut = list(orig)
            cut[k - 1] = orig[k - 1][: len(orig[k - 1]) // 2]
            check(cut, k, "malformed")
            # remove a chunk spanning the end of line k and the start of line k+1
            blob = b"".join(ln + b"\n" for ln in orig)
            end_k = sum(len(ln) + 1 for ln in orig[:k])
            led.path.write_bytes(blob[: end_k - 10] + blob[end_k + 10:])
            rep = led.verify(**kw)
            assert not rep.ok and rep.first_bad_line == k
    write_lines(led, orig)
    assert led.verify(**kw).ok


def test_any_single_byte_flip_is_caught_or_is_a_visible_torn_tail(tmp_path, key):
    led = Ledger(tmp_path / "L")
    fill(led, key, 3)
    data = led.path.read_bytes()
    keys = {K.key_id(key): key.public_key()}
    assert verify_ledger_bytes(data, keys).ok
    rng = np.random.default_rng(0)
    for i in range(len(data)):
        bad = bytearray(data)
        bad[i] ^= int(rng.integers(1, 256))
        rep = verify_ledger_bytes(bytes(bad), keys)
        if i == len(data) - 1:
            # the final newline: the last entry becomes an incomplete line, shown as such
            assert rep.torn_tail and rep.n_entries == 2 and "incomplete" in rep.message()
        else:
            assert not rep.ok, i


def _run(code: str, ledger_dir: Path, key_file: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), str(ledger_dir), str(key_file)],
                          env=env, capture_output=True, text=True, timeout=60)


_CRASH = """
import os, signal, sys, hashlib
from marg.protocols.ledger import Ledger
from marg.protocols import ledger as L
from marg.protocols.keys import load_signing_key
from marg.marginals.accounting import PrivacyCost
led, key = Ledger(sys.argv[1]), load_signing_key(sys.argv[2])
def app(i):
    led.append(bundle_digest=hashlib.sha256(str(i).encode()).hexdigest(), site="north",
               statistics=[{"name": "N[a,y]", "clique": ["a", "y"], "shape": [2, 2]}],
               cost=PrivacyCost(epsilon=0.1), private_key=key)
for i in range(3):
    app(i)
def die(*a, **k):
    os.kill(os.getpid(), signal.SIGKILL)
L.os.{target} = die
app(99)
"""


@pytest.mark.parametrize("target", ["replace", "fsync"])
def test_crash_mid_append_keeps_a_verifiable_ledger(tmp_path, target):
    """SIGKILL at the line's fsync or at the checkpoint's rename: the entry is there or not,
    whole; the next append accounts for it, cleans the stale temp file and extends the chain."""
    kf = K.generate_keys("north", tmp_path / "keys")
    d = tmp_path / "L"
    res = _run(_CRASH.replace("{target}", target), d, kf.sign_key)
    assert res.returncode == -9, res.stderr
    led = Ledger(d, public_key=kf.sign_pub)
    rep = led.verify()
    assert rep.ok and rep.n_entries in (3, 4) and not rep.torn_tail and rep.checkpoint == 3, rep.reason
    assert led.spent().epsilon == pytest.approx(0.1 * rep.n_entries)
    if target == "replace":
        assert len(list(d.glob(".checkpoint.json.*.tmp"))) == 1  # the killed writer's temp file
    e = led.append(bundle_digest=_digest(5), site="north", statistics=[], cost=PrivacyCost(epsilon=0.1),
                   private_key=K.load_signing_key(kf.sign_key))
    assert e["seq"] == rep.n_entries + 1
    rep = led.verify()
    assert rep.ok and rep.checkpoint == e["seq"] and not list(d.glob(".*.tmp"))


def test_torn_last_line_is_ignored_then_repaired(tmp_path, key):
    led = Ledger(tmp_path / "L")
    fill(led, key, 4)
    good = led.path.read_bytes()
    spent = led.spent()
    # a torn write (as an O_APPEND writer could leave): a prefix of one more entry
    extra = lines_of(led)[-1]
    for cut in (1, len(extra) // 2, len(extra) - 1):
        led.path.write_bytes(good + extra[:cut])
        rep = led.verify(public_key=key.public_key())
        assert rep.ok and rep.torn_tail and rep.n_entries == 4
        assert len(led.entries()) == 4 and led.spent() == spent
    # the next append drops the torn tail and chains onto entry 4
    e = led.append(bundle_digest=_digest(7), site="north", statistics=[], cost=PrivacyCost(epsilon=0.1),
                   private_key=key)
    assert e["seq"] == 5
    rep = led.verify(public_key=key.public_key())
    assert rep.ok and not rep.torn_tail and led.path.read_bytes().startswith(good)
    # a last entry that lost its newline is no entry: the checkpoint shows the ledger truncated
    led.path.write_bytes(led.path.read_bytes()[:-1])
    assert len(led.entries()) == 4
    assert "truncated" in led.verify(public_key=key.public_key()).reason
    with pytest.raises(RefusedError, match="truncated"):
        led.spent()


def test_malformed_ledger_refuses_spend_and_append(tmp_path, key):
    led = Ledger(tmp_path / "L")
    fill(led, key, 3)
    lines = lines_of(led)
    lines[1] = b'{"seq": 2, "oops"'
    write_lines(led, lines)
    before = led.path.read_bytes()
    with pytest.raises(InputError, match="line 2"):
        led.entries()
    with pytest.raises(RefusedError, match="truncated|does not match its checkpoint"):
        led.spent()
    (led.directory / "checkpoint.json").unlink()  # without the checkpoint, the full check names the line
    with pytest.raises(RefusedError, match="malformed ledger.*entry 2"):
        led.spent()
    with pytest.raises(RefusedError, match="malformed ledger"):
        led.append(bundle_digest=_digest(9), site="north", statistics=[], cost=PrivacyCost(epsilon=0.1),
                   private_key=key)
    assert led.path.read_bytes() == before


def test_parse_entry_rejects_non_canonical_and_mistyped_entries(tmp_path, key):
    led = Ledger(tmp_path / "L")
    fill(led, key, 1)
    line = lines_of(led)[0]
    e = parse_entry(line)
    pretty = json.dumps(e, sort_keys=True).encode()  # same content, spaces
    with pytest.raises(InputError, match="canonical"):
        parse_entry(pretty)
    for change in ({"seq": "1"}, {"seq": True}, {"prev": "abc"}, {"cost": {"epsilon": -1}}, {"statistics": [1]}):
        with pytest.raises(InputError):
            parse_entry(_edit(line, **change))
    obj = dict(e)
    del obj["cap"]
    with pytest.raises(InputError, match="field"):
        parse_entry(canonical_json(obj))


_CONCURRENT = """
import sys, hashlib
from marg.protocols.ledger import Ledger
from marg.protocols.keys import load_signing_key
from marg.marginals.accounting import PrivacyCost
led, key = Ledger(sys.argv[1]), load_signing_key(sys.argv[2])
tag = sys.argv[3]
for i in range(8):
    led.append(bundle_digest=hashlib.sha256(f"{tag}{i}".encode()).hexdigest(), site="north", statistics=[],
               cost=PrivacyCost(epsilon=0.01), private_key=key)
"""


def test_concurrent_appends_are_serialised(tmp_path):
    kf = K.generate_keys("north", tmp_path / "keys")
    d = tmp_path / "L"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, "-c", _CONCURRENT, str(d), str(kf.sign_key), t], env=env)
             for t in ("a", "b")]
    assert all(p.wait(timeout=60) == 0 for p in procs)
    led = Ledger(d)
    rep = led.verify(public_key=kf.sign_pub)
    assert rep.ok and rep.n_entries == 16
    assert led.spent().epsilon == pytest.approx(0.16)


# ---------------------------------------------------------------------------------------
# `marg audit` commands, mounted on a small root app
# ---------------------------------------------------------------------------------------
root = typer.Typer()
root.add_typer(audit_cli.app, name="audit")
runner = CliRunner()


def test_cli_audit_show_lists_every_release_with_running_totals(tmp_path, key):
    led = Ledger(tmp_path / "L")
    led.set_cap(PrivacyCost(epsilon=2.0), key, "north")
    costs = fill(led, key, 4, seed=3)
    pub = tmp_path / "north.sign.pub"
    from cryptography.hazmat.primitives import serialization

    pub.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                  serialization.PublicFormat.SubjectPublicKeyInfo))
    res = runner.invoke(root, ["audit", "show", "--ledger", str(led.directory), "--json", "--key", str(pub)])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["n_entries"] == 5 and out["entries"] == led.entries() and out["entries"][0]["kind"] == "cap"
    assert out["cap"] == PrivacyCost(epsilon=2.0).to_dict()
    assert out["spent"]["epsilon"] == pytest.approx(sum(c.epsilon for c in costs))
    assert out["integrity"]["ok"] and out["head"] == line_hash(lines_of(led)[-1])
    res = runner.invoke(root, ["audit", "show", "--ledger", str(led.directory), "--key", str(pub)])
    assert res.exit_code == 0
    rows = [ln for ln in res.stdout.splitlines() if ln.strip()[:1].isdigit()]
    assert len(rows) == 5 and "privacy cap set to ε=2" in rows[0]
    running = 0.0
    for row, c in zip(rows[1:], costs):
        running += c.epsilon
        assert f"{running:.4g}/2" in row and f"{c.epsilon:.4g}" in row
    assert "Integrity: verified" in res.stdout
    # without a key the signatures are not checked, and show says so
    res = runner.invoke(root, ["audit", "show", "--ledger", str(led.directory)])
    assert res.exit_code == 0 and "signatures not checked" in res.stdout
    res = runner.invoke(root, ["audit", "show", "--ledger", str(tmp_path / "none")])
    assert res.exit_code == 2 and "no ledger" in res.stderr


def test_cli_audit_verify_exit_codes_and_first_bad_entry(tmp_path, key):
    kf = K.generate_keys("north", tmp_path / "keys")
    sk = K.load_signing_key(kf.sign_key)
    led = Ledger(tmp_path / "L")
    bdir = tmp_path / "out"
    bdir.mkdir()
    for i in range(3):
        final, blob = finalize_bundle(make_bundle("north", 0).with_header(created=f"2024-01-0{i + 1}T00:00:00+00:00"),
                                      sk)
        led.record(final, sk)  # the same exact numbers again: allowed (it discloses nothing new)
        (bdir / f"b{i}.bundle").write_bytes(blob)
    (bdir / "notes.txt").write_text("not a bundle; ignored when a folder is given")
    args = ["audit", "verify", "--ledger", str(led.directory), "--key", str(kf.sign_pub)]
    res = runner.invoke(root, args + ["--bundles", str(bdir)])
    assert res.exit_code == 0, res.output
    assert "OK: 3 entries" in res.stdout and "3 bundle file(s)" in res.stdout
    res = runner.invoke(root, args + ["--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["ok"]
    # a foreign key refuses every entry
    res = runner.invoke(root, ["audit", "verify", "--ledger", str(led.directory), "--key",
                               str(K.generate_keys("x", tmp_path / "k2").sign_pub)])
    assert res.exit_code == 1 and "not the site's key" in res.stderr
    # edit entry 2: exit 1, one line naming it
    lines = lines_of(led)
    lines[1] = _edit(lines[1], site="elsewhere")
    write_lines(led, lines)
    res = runner.invoke(root, args)
    assert res.exit_code == 1
    assert len(res.stderr.strip().splitlines()) == 1 and "entry seq 2" in res.stderr and "bad signature" in res.stderr
    res = runner.invoke(root, args + ["--json"])
    rep = json.loads(res.stdout)
    assert res.exit_code == 1 and rep["first_bad_seq"] == 2 and rep["first_bad_line"] == 2 and not rep["ok"]


def test_a_version_1_ledger_is_verified_taken_over_and_extended(tmp_path, key):
    """A ledger written by the previous release (version-1 entries, no checkpoint, cap from
    budget.json at the time) verifies, is taken over by marg audit init's checkpoint, and grows."""
    from marg.protocols.signing import b64

    d = tmp_path / "old"
    d.mkdir()
    prev, lines, total = GENESIS, [], 0.0
    for i in range(3):
        total += 0.5
        e = {"v": 1, "seq": i + 1, "time": "2026-01-01T00:00:00+00:00", "prev": prev, "site": "north",
             "recipient": None, "recipient_name": None, "bundle": _digest(i), "file_sha256": None, "n_rows": None,
             "statistics": _stats(np.random.default_rng(i), 2), "mechanism": "laplace",
             "cost": {"epsilon": 0.5, "delta": 0.0, "rho": 0.0},
             "cumulative": {"epsilon": total, "delta": 0.0, "rho": 0.0},
             "cap": {"epsilon": 4.0, "delta": 0.0, "rho": 0.0}, "key_id": K.key_id(key), "signature": None}
        e["signature"] = b64(key.sign(entry_signing_bytes(e)))
        lines.append(canonical_json(e))
        prev = line_hash(lines[-1])
    (d / "ledger.jsonl").write_bytes(b"".join(ln + b"\n" for ln in lines))
    led = Ledger(d, public_key=key.public_key())
    rep = led.verify()
    assert rep.ok, rep.reason
    assert led.spent().epsilon == pytest.approx(1.5)
    state = led.checkpoint(key)  # what marg audit init does with an existing ledger
    assert state.n == 3 and (d / "checkpoint.json").exists()
    e = led.append(bundle_digest=_digest(9), site="north", statistics=[], cost=PrivacyCost(epsilon=0.5),
                   private_key=key)
    assert e["v"] == 2 and e["seq"] == 4 and e["prev"] == line_hash(lines[-1])
    assert led.verify().ok and led.spent().epsilon == pytest.approx(2.0)
    # its old cap lived in budget.json: until it is recorded in the chain, appends are refused
    write_budget(d, PrivacyCost(epsilon=4.0))
    with pytest.raises(RefusedError, match="outside the signed chain"):
        led.append(bundle_digest=_digest(10), site="north", statistics=[], cost=PrivacyCost(epsilon=0.5),
                   private_key=key)
    led.set_cap(PrivacyCost(epsilon=4.0), key, "north")
    with pytest.raises(RefusedError, match="budget exhausted"):
        led.append(bundle_digest=_digest(10), site="north", statistics=[], cost=PrivacyCost(epsilon=2.5),
                   private_key=key)
