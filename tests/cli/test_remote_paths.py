"""Bundles and evaluations through an SFTP drop and an object-store bucket (issue 37, remote paths).

A real OpenSSH server (Debian's ``openssh-server``, started here as a non-root user on 127.0.0.1,
stopped afterwards: :func:`tests.helpers.services.start_sftp`) is the drop between two sites and the
learner: the sites read their data and the codebook from it and write their sealed bundles to it, the
learner learns from it and writes the signed model to it, the sites evaluate that model and the
learner certifies from the drop; every path an ``sftp://`` URL, the ledgers local (a URL refused).
moto's S3 server on 127.0.0.1 stands in for a bucket the same way. Through the installed console
script, as a site's IT would run it.
"""

from __future__ import annotations

import json
import os

import pytest

from marg.marginals.synthetic import SITES, demo_codebook, generate, write_csv
from tests.helpers.console import marg

pytest.importorskip("fsspec")
pytest.importorskip("paramiko")


@pytest.fixture(scope="module")
def sftp():
    from tests.helpers.services import start_sftp

    server, stop = start_sftp()
    yield server
    stop()


def put(server, local, name):
    import fsspec

    fs = fsspec.filesystem("sftp", host=server.host, port=server.port, username=server.user,
                           key_filename=server.key_file)
    fs.put(str(local), f"{server.root}/{name}")
    return fs


def test_a_study_through_an_sftp_drop(tmp_path, sftp):
    env = {**sftp.env(), "MARG_HOME": str(tmp_path / "learner-home")}
    url = sftp.url
    cb = demo_codebook()
    cb.save(tmp_path / "cb.json")
    put(sftp, tmp_path / "cb.json", "cb.json")
    for k, site in enumerate(("north", "south")):
        write_csv(tmp_path / f"{site}.csv", generate(400, SITES[k], seed=20 + k), slice(0, 400))
        put(sftp, tmp_path / f"{site}.csv", f"{site}.csv")
    keys = tmp_path / "keys"
    for who, role in (("north", "site"), ("south", "site"), ("learner", "learner")):
        assert marg("keys", "init", "--site", who, "--role", role, "--dir", keys, cwd=tmp_path, env=env).returncode == 0
    trust, learner_trust = tmp_path / "trust", tmp_path / "learner-trust"
    trust.mkdir()
    learner_trust.mkdir()
    (learner_trust / "learner.sign.pub").write_bytes((keys / "learner.sign.pub").read_bytes())

    def site_export(site, *extra):
        return marg("export", url(f"{site}.csv"), "--schema", url("cb.json"), "--schema-fingerprint", cb.fingerprint,
                    "--site", site, "--key",
                    keys / f"{site}.sign.key", "--to", keys / "learner.seal.pub", "--ledger",
                    tmp_path / f"{site}-ledger",
                    *extra, cwd=tmp_path, env=env)

    for site in ("north", "south"):
        (trust / f"{site}.sign.pub").write_bytes((keys / f"{site}.sign.pub").read_bytes())
        r = site_export(site, "--out", url(f"{site}.bundle"), "--epsilon", "1", "--holdout", "0.3", "--stats", "first")
        assert r.returncode == 0, r.stderr
        assert f"wrote {url(site + '.bundle')}" in r.stdout and f"uploaded {url(site + '.bundle')}" in r.stderr
    # the ledger stays local: a URL is refused, nothing spent; an existing --out is refused as a local one is
    r = site_export("north", "--out", url("x.bundle"), "--epsilon", "1", "--stats", "first", "--ledger", url("ledger"))
    assert r.returncode == 2 and f"--ledger {url('ledger')}: give a local folder (ledgers" in r.stderr
    r = marg("keys", "trust", keys / "north.sign.pub", "--trust", url("trust"), cwd=tmp_path, env=env)
    assert r.returncode == 2 and "never read from a URL" in r.stderr  # trust stays local (issue 45)
    before = os.path.getsize(f"{sftp.root}/north.bundle")
    r = site_export("north", "--out", url("north.bundle"), "--epsilon", "1", "--stats", "first")
    assert r.returncode == 2 and f"{url('north.bundle')} exists: refusing to overwrite it" in r.stderr
    assert os.path.getsize(f"{sftp.root}/north.bundle") == before
    # the learner: learns from the drop, writes the signed model to it
    r = marg("learn", url("north.bundle"), url("south.bundle"), "--learner", "mrc", "--out", url("model.json"),
             "--trust", trust, "--key", keys / "learner.seal.key", "--sign-key", keys / "learner.sign.key",
             cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert os.path.exists(f"{sftp.root}/model.json")
    # round 2 at each site, from the drop's model to the drop; the certificate from the drop
    for site in ("north", "south"):
        r = site_export(site, "--out", url(f"{site}.eval"), "--evaluate", url("model.json"), "--trust", learner_trust,
                        "--epsilon", "0.5")
        assert r.returncode == 0, r.stderr
    r = marg("certify", url("model.json"), url("north.eval"), url("south.eval"), "--out", url("certified.json"),
             "--trust", trust, "--key", keys / "learner.seal.key", "--sign-key", keys / "learner.sign.key", "--json",
             cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)  # --json: stdout is the one object; the upload is said on stderr
    r = marg("evaluate", url("certified.json"), url("north.csv"), "--trust", learner_trust, "--schema", url("cb.json"),
             "--schema-fingerprint", cb.fingerprint, "--json", cwd=tmp_path, env=env)
    assert r.returncode == 0 and json.loads(r.stdout)["n"] == 400, r.stderr
    # the site's audit checks the bundles in the drop against its local ledger
    r = marg("audit", "verify", "--ledger", tmp_path / "north-ledger", "--key", keys / "north.sign.pub",
             "--bundles", url("north.bundle"), url("north.eval"), cwd=tmp_path, env=env)
    assert r.returncode == 0 and "2 bundle file(s) matched their entries" in r.stdout, r.stdout + r.stderr
    assert sorted(os.listdir(sftp.root)) == sorted(["certified.json", "cb.json", "model.json", "north.bundle",
                                                    "north.csv",
                                                    # no .part left
                                                    "north.eval", "south.bundle", "south.csv", "south.eval"])


def test_a_missing_file_in_the_drop_is_one_line(tmp_path, sftp):
    r = marg("inspect", sftp.url("nothing.bundle"), cwd=tmp_path, env=sftp.env())
    assert r.returncode == 2 and r.stderr.strip() == f"marg: error: not found: {sftp.url('nothing.bundle')}"


def test_bundles_through_an_s3_bucket(tmp_path):
    pytest.importorskip("s3fs")
    from tests.helpers.services import start_s3

    endpoint, env, stop = start_s3()
    try:
        import s3fs

        fs = s3fs.S3FileSystem(key="testing", secret="testing", endpoint_url=endpoint)
        fs.mkdir("drop")
        env = {**env, "MARG_HOME": str(tmp_path / "home")}
        demo_codebook().save(tmp_path / "cb.json")
        bundles = []
        for k, site in enumerate(("north", "south")):
            write_csv(tmp_path / f"{site}.csv", generate(300, SITES[k], seed=30 + k), slice(0, 300))
            r = marg("export", tmp_path / f"{site}.csv", "--schema", tmp_path / "cb.json", "--site", site, "--out",
                     f"s3://drop/{site}.bundle", "--epsilon", "1", "--stats", "first", "--ledger",
                     tmp_path / f"{site}-l",
                     cwd=tmp_path, env=env)
            assert r.returncode == 0, r.stderr
            bundles.append(f"s3://drop/{site}.bundle")
        assert sorted(fs.ls("drop")) == ["drop/north.bundle", "drop/south.bundle"]
        r = marg("learn", *bundles, "--learner", "mrc", "--out", "s3://drop/model.json", "--allow-unsigned",
                 "--no-sign",
                 "--allow-unledgered", cwd=tmp_path, env=env)
        assert r.returncode == 0, r.stderr
        r = marg("inspect", "s3://drop/model.json", "--json", cwd=tmp_path, env=env)
        assert r.returncode == 0 and json.loads(r.stdout)["learner"] == "mrc", r.stderr
    finally:
        stop()
