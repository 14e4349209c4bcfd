"""Key generation, loading, ids and trust stores (protocols.keys)."""

from __future__ import annotations

import hashlib
import json
import os
import stat

import pytest
import typer
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, x25519

from typer.testing import CliRunner

from marg.cli import keys as keys_cli
from marg.errors import InputError, RefusedError
from marg.protocols import keys as K
from marg.protocols.trust_store import TrustStore


def _raw(pub):
    return pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def test_generate_writes_four_pem_files_with_owner_only_private_keys(tmp_path):
    kf = K.generate_keys("site-a", tmp_path / "keys")
    for p in (kf.sign_key, kf.seal_key):
        assert stat.S_IMODE(os.stat(p).st_mode) == 0o600
        assert b"-----BEGIN PRIVATE KEY-----" in p.read_bytes()
    for p in (kf.sign_pub, kf.seal_pub):
        assert b"-----BEGIN PUBLIC KEY-----" in p.read_bytes()
    assert sorted(x.name for x in (tmp_path / "keys").iterdir()) == [
        "site-a.seal.key", "site-a.seal.pub", "site-a.sign.key", "site-a.sign.pub",
    ]
    sk = K.load_signing_key(kf.sign_key)
    pk = K.load_verify_key(kf.sign_pub)
    # the pair matches: a signature by the private key verifies under the public key
    pk.verify(sk.sign(b"hello"), b"hello")
    assert _raw(sk.public_key()) == _raw(pk)
    xk = K.load_seal_key(kf.seal_key)
    xp = K.load_seal_public_key(kf.seal_pub)
    assert _raw(xk.public_key()) == _raw(xp)
    # key id = sha256 of the raw public bytes, same for the private half
    assert K.key_id(pk) == hashlib.sha256(_raw(pk)).hexdigest() == kf.sign_id == K.key_id(sk)
    assert K.key_id(xp) == kf.seal_id != kf.sign_id
    assert K.short_id(kf.sign_id) == kf.sign_id[:16]


def test_passphrase_encrypted_keys(tmp_path):
    kf = K.generate_keys("h1", tmp_path, passphrase=b"correct horse")
    assert kf.encrypted
    assert b"ENCRYPTED PRIVATE KEY" in kf.sign_key.read_bytes()
    sk = K.load_signing_key(kf.sign_key, b"correct horse")
    assert K.key_id(sk) == kf.sign_id
    assert K.key_id(K.load_seal_key(kf.seal_key, b"correct horse")) == kf.seal_id
    with pytest.raises(RefusedError, match="wrong passphrase"):
        K.load_signing_key(kf.sign_key, b"wrong")
    with pytest.raises(InputError, match="passphrase-encrypted"):
        K.load_seal_key(kf.seal_key)


def test_passphrase_given_for_plain_key_and_passphrase_file(tmp_path):
    kf = K.generate_keys("h1", tmp_path)
    with pytest.raises(InputError, match="not encrypted"):
        K.load_signing_key(kf.sign_key, b"x")
    f = tmp_path / "pw.txt"
    f.write_bytes(b"s3cret\n")
    assert K.read_passphrase_file(f) == b"s3cret"
    f.write_bytes(b"\n")
    with pytest.raises(InputError, match="empty"):
        K.read_passphrase_file(f)
    with pytest.raises(InputError, match="cannot read"):
        K.read_passphrase_file(tmp_path / "nope")


def test_wrong_key_types_and_garbage_are_one_line_input_errors(tmp_path):
    kf = K.generate_keys("h1", tmp_path)
    cases = [
        (K.load_signing_key, kf.seal_key, "X25519 private"),  # sealing key used to sign
        (K.load_seal_key, kf.sign_key, "Ed25519 private"),
        (K.load_signing_key, kf.sign_pub, "public key"),
        (K.load_verify_key, kf.sign_key, "private key"),
        (K.load_verify_key, kf.seal_pub, "X25519 public"),
        (K.load_seal_public_key, kf.sign_pub, "Ed25519 public"),
    ]
    for fn, path, words in cases:
        with pytest.raises(InputError) as ei:
            fn(path)
        msg = str(ei.value)
        assert words in msg and "\n" not in msg and str(path) in msg
    junk = tmp_path / "junk.pem"
    junk.write_bytes(b"this is not a key\n")
    for fn in (K.load_signing_key, K.load_verify_key, K.load_seal_key, K.load_seal_public_key):
        with pytest.raises(InputError, match="not a PEM"):
            fn(junk)
    with pytest.raises(InputError, match="not found"):
        K.load_verify_key(tmp_path / "missing.sign.pub")
    with pytest.raises(InputError, match="directory"):
        K.load_verify_key(tmp_path)


def test_no_overwrite_and_site_name_validation(tmp_path):
    kf = K.generate_keys("h1", tmp_path)
    before = kf.sign_key.read_bytes()
    with pytest.raises(RefusedError, match="already exists"):
        K.generate_keys("h1", tmp_path)
    assert kf.sign_key.read_bytes() == before
    kf2 = K.generate_keys("h1", tmp_path, overwrite=True)
    assert kf2.sign_id != kf.sign_id
    for bad in ("", "../evil", "a b", ".hidden", "x/y", "a" * 200, "s.sign"):
        with pytest.raises(InputError, match="invalid site name"):
            K.generate_keys(bad, tmp_path)
    # nothing stray was written by the refused calls
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["h1.sign.key", "h1.sign.pub", "h1.seal.key", "h1.seal.pub"]
    )


def test_trust_store_maps_key_ids_to_site_names(tmp_path):
    sites = ["alpha", "beta", "gamma"]
    ids = {s: K.generate_keys(s, tmp_path / "all").sign_id for s in sites}
    trust = tmp_path / "trust"
    trust.mkdir()
    for s in sites[:2]:
        (trust / f"{s}.sign.pub").write_bytes((tmp_path / "all" / f"{s}.sign.pub").read_bytes())
    (trust / "README.txt").write_text("ignored")
    (trust / "alpha.seal.pub").write_bytes((tmp_path / "all" / "alpha.seal.pub").read_bytes())  # ignored
    ts = TrustStore(trust)
    assert len(ts) == 2
    for s in sites[:2]:
        site, key = ts.lookup(ids[s])
        assert site == s and K.key_id(key) == ids[s]
    assert ts.lookup(ids["gamma"]) is None
    assert ts.sites() == {"alpha": [ids["alpha"]], "beta": [ids["beta"]]}
    # a broken *.sign.pub is an error, never silently skipped
    (trust / "delta.sign.pub").write_bytes(b"garbage")
    with pytest.raises(InputError, match="delta.sign.pub"):
        TrustStore(trust)
    # the same key under two names is ambiguous
    (trust / "delta.sign.pub").write_bytes((trust / "alpha.sign.pub").read_bytes())
    with pytest.raises(InputError, match="two sites"):
        TrustStore(trust)
    with pytest.raises(InputError, match="not a directory"):
        TrustStore(tmp_path / "nowhere")


def test_in_memory_trust_store():
    k = ed25519.Ed25519PrivateKey.generate()
    ts = TrustStore.from_keys({"s1": k.public_key()})
    assert ts.lookup(K.key_id(k))[0] == "s1"
    with pytest.raises(InputError):
        TrustStore.from_keys({"s1": x25519.X25519PrivateKey.generate().public_key()})


# ---------------------------------------------------------------------------------------
# `marg keys` commands, mounted on a small root app
# ---------------------------------------------------------------------------------------
root = typer.Typer()
root.add_typer(keys_cli.app, name="keys")
runner = CliRunner()


def test_cli_keys_init_writes_loadable_keys_and_reports_ids(tmp_path):
    d = tmp_path / "k"
    res = runner.invoke(root, ["keys", "init", "--site", "north", "--dir", str(d), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["sign_key_id"] == K.key_id(K.load_verify_key(d / "north.sign.pub"))
    assert out["seal_key_id"] == K.key_id(K.load_seal_key(d / "north.seal.key"))
    assert stat.S_IMODE(os.stat(d / "north.sign.key").st_mode) == 0o600
    # a second init refuses (exit 1, one line) and leaves the keys alone
    before = (d / "north.sign.key").read_bytes()
    res = runner.invoke(root, ["keys", "init", "--site", "north", "--dir", str(d)])
    assert res.exit_code == 1 and "already exists" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert (d / "north.sign.key").read_bytes() == before
    # keys show prints the same id
    res = runner.invoke(root, ["keys", "show", str(d / "north.sign.pub")])
    assert res.exit_code == 0 and out["sign_key_id"] in res.stdout


def test_cli_keys_init_with_passphrase_file(tmp_path):
    pw = tmp_path / "pw"
    pw.write_text("hunter2\n")
    d = tmp_path / "k"
    res = runner.invoke(root, ["keys", "init", "--site", "lab", "--dir", str(d), "--passphrase-file", str(pw)])
    assert res.exit_code == 0, res.output
    assert K.key_id(K.load_signing_key(d / "lab.sign.key",
                                       b"hunter2")) == K.key_id(K.load_verify_key(d / "lab.sign.pub"))
    res = runner.invoke(root, ["keys", "init", "--site", "bad name", "--dir", str(d)])
    assert res.exit_code == 2 and "invalid site name" in res.stderr


def test_cli_keys_trust(tmp_path):
    kf = K.generate_keys("south", tmp_path / "k")
    trust = tmp_path / "trust"
    res = runner.invoke(root, ["keys", "trust", str(kf.sign_pub), "--trust", str(trust), "--expect-id", "00000000"])
    assert res.exit_code == 1 and "does not match" in res.stderr and not trust.exists()
    res = runner.invoke(root, ["keys", "trust", str(kf.sign_pub), "--trust", str(trust), "--expect-id",
                               kf.sign_id[:12]])
    assert res.exit_code == 0, res.output
    ts = TrustStore(trust)
    assert ts.lookup(kf.sign_id)[0] == "south"
    other = K.generate_keys("south", tmp_path / "k2")
    res = runner.invoke(root, ["keys", "trust", str(other.sign_pub), "--trust", str(trust)])
    assert res.exit_code == 1 and "different key" in res.stderr
    # a sealing key goes into the folder as a secure-aggregation roster entry (SITE.seal.pub) ...
    res = runner.invoke(root, ["keys", "trust", str(kf.seal_pub), "--trust", str(trust)])
    assert res.exit_code == 0 and (trust / "south.seal.pub").exists()
    # ... but never as a signing key
    fake = tmp_path / "fake" / "south.sign.pub"
    fake.parent.mkdir()
    fake.write_bytes(kf.seal_pub.read_bytes())
    res = runner.invoke(root, ["keys", "trust", str(fake), "--trust", str(tmp_path / "t2")])
    assert res.exit_code == 2 and "X25519" in res.stderr
