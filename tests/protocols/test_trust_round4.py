"""Trust, round four (issue 45): every key pinned where it is trusted.

Secure aggregation, unmasked by the learner alone: a roster listing the other sites' real signing
keys beside sealing keys of the learner's own lets the learner open every share addressed to them
and recover one site's exact table with no reveal and no Sybil. Each test reproduces the attack,
then shows the refusal (in one line, before anything is sealed or written)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from marg.errors import RefusedError
from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label
from marg.marginals.counts.counting import count_tables
from marg.marginals.synthetic import SITES, demo_codebook, generate, write_csv
from marg.marginals.counts.tables import plan_cliques
from marg.protocols import keys as K
from marg.protocols import shamir
from marg.protocols.pinning import PinnedKeys
from marg.protocols.sealing import open_sealed
from marg.protocols.secagg import pair_seed, recover_sum
from marg.protocols.secagg_round import check_roster, make_reveal, make_upload, parse_round, parse_upload, \
    start_round
from marg.protocols.secagg_tables import decode_tables
from marg.protocols.signing import sign_document, unb64
from tests.helpers.console import marg, run

CB = Codebook(features=(CategoricalFeature("a", ("0", "1", "2")), CategoricalFeature("b", ("u", "v"))),
              label=Label("y", ("neg", "pos")))
NAMES = ["city", "north", "south"]


def _copy(src, dst, site, kinds=("sign", "seal"), as_site=None):
    dst.mkdir(parents=True, exist_ok=True)
    for kind in kinds:
        (dst / f"{as_site or site}.{kind}.pub").write_bytes((src / f"{site}.{kind}.pub").read_bytes())


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """Real keys of three sites and a learner; the learner's own sealing keys under south's and city's
    names (its 'fake' folder); north's pinned members folder (both keys of every site)."""
    d = tmp_path_factory.mktemp("keys")
    real, fake = d / "real", d / "fake"
    kf = {s: K.generate_keys(s, real, role="learner" if s == "learner" else "site") for s in NAMES + ["learner"]}
    ff = {s: K.generate_keys(s, fake) for s in ("south", "city")}
    members = d / "north-members"
    for s in NAMES:
        _copy(real, members, s)
    evil = d / "evil-roster"  # the sites' real signing keys, the learner's sealing keys for south and city
    for s in NAMES:
        _copy(real, evil, s, ("sign",))
        _copy(real if s == "north" else fake, evil, s, ("seal",))
    sk = {s: (K.load_signing_key(kf[s].sign_key), K.load_seal_key(kf[s].seal_key)) for s in kf}
    fake_seal = {s: K.load_seal_key(ff[s].seal_key) for s in ff}
    return d, sk, fake_seal, members, evil


def test_the_learner_alone_unmasks_a_site_with_sealing_keys_of_its_own_and_the_pinned_roster_refuses(keys):
    d, sk, fake_seal, members, evil = keys
    rng = np.random.default_rng(45)
    X, y = np.column_stack([rng.integers(0, 3, 400), rng.integers(0, 2, 400)]), rng.integers(0, 2, 400)
    north = count_tables(CB, X, y, plan_cliques(CB, "all"))
    doc = start_round(evil, NAMES, CB.fingerprint, sk["learner"][0], "learner")
    rnd = parse_round(doc, learner_pub=sk["learner"][0].public_key())
    # the attack, where the roster's sealing keys are not pinned: north's upload alone gives its table
    up = parse_upload(make_upload(rnd, "north", north, sk["north"][1], sk["north"][0]), rnd)
    shares = {}
    for holder in ("south", "city"):
        body = json.loads(open_sealed(unb64(up.envelopes[holder]), fake_seal[holder]))
        shares[rnd.member(holder).index] = shamir.share_int(body["shares"]["b"])
    self_seed = shamir.combine(shares, rnd.threshold)
    north_pub = rnd.member("north").seal_pub
    dangling = {("north", j): pair_seed(fake_seal[j], north_pub, *sorted(("north", j)), rnd.id)
                for j in ("south", "city")}
    got = decode_tables(recover_sum({"north": up.masked.vector}, {"north": self_seed}, dangling), [up.masked])
    for g, t in zip(got, north):
        assert np.array_equal(np.asarray(g.counts), np.asarray(t.counts))  # north's exact table, unmasked
    # refused with north's pinned keys (signing and sealing), before anything is sealed
    pinned = PinnedKeys.from_dir(members)
    with pytest.raises(RefusedError, match="site 'city' appears under a sealing key that is not the one pinned"):
        check_roster(rnd, pinned, "north")
    # at reveal too: a request of the learner's for that round is refused by the roster check first
    req = sign_document({"format": "marg-secagg-request", "version": 1, "round": rnd.id,
                         "survivors": ["north", "south"],
                         "dropped": ["city"], "shares": {}}, sk["learner"][0])
    with pytest.raises(RefusedError, match="request refused: site 'city' appears under a sealing key"):
        make_reveal(rnd, req, "north", sk["north"][1], sk["north"][0], members=pinned)
    honest = parse_round(start_round(d / "real", NAMES, CB.fingerprint, sk["learner"][0], "learner"),
                         learner_pub=sk["learner"][0].public_key())
    assert check_roster(honest, pinned, "north") == NAMES
    # a members folder with signing keys only pins nothing for sealing: refused, naming the fix
    bare = d / "sign-only"
    for s in NAMES:
        _copy(d / "real", bare, s, ("sign",))
    with pytest.raises(RefusedError, match=r"is not pinned with both its signing and sealing key .*SITE.seal.pub"):
        check_roster(honest, PinnedKeys.from_dir(bare), "north")


def test_secagg_submit_refuses_the_unmasking_roster_through_the_console(keys, tmp_path):
    """The acceptance test: item 1's roster refused at ``marg secagg submit`` before anything is sealed,
    counted or written; the members folder filled by ``marg keys trust SITE.sign.pub`` pins both keys."""
    from marg.protocols.key_roles import with_role
    from marg.protocols.secagg_round import write_doc

    d, sk, _, _, evil = keys
    real = d / "real"
    schema = tmp_path / "codebook.json"
    demo_codebook().save(schema)
    write_csv(tmp_path / "north.csv", generate(300, SITES[0], seed=45))
    members = tmp_path / "members"
    for s in NAMES:  # the site's own list: `marg keys trust` copies SITE.seal.pub beside SITE.sign.pub
        r = run("keys", "trust", real / f"{s}.sign.pub", "--trust", members)
        assert r.exit_code == 0 and "sealing key beside it" in r.output, r.output
    assert sorted(p.name for p in members.iterdir()) == sorted(f"{s}.{k}.pub" for s in NAMES for k in ("seal", "sign"))
    trust = tmp_path / "trust"
    trust.mkdir()
    (trust / "learner.sign.pub").write_bytes(with_role((real / "learner.sign.pub").read_bytes(), "learner"))
    for roster, name in ((evil, "evil"), (real, "honest")):
        write_doc(start_round(roster, NAMES, demo_codebook().fingerprint, sk["learner"][0], "learner"),
                  tmp_path / f"{name}.json")

    def submit(name):
        return marg("secagg", "submit", "north.csv", "--schema", schema, "--round", f"{name}.json", "--site", "north",
                    "--trust", trust, "--members", members, "--seal-key", real / "north.seal.key", "--key",
                    real / "north.sign.key", "--ledger", f"{name}-ledger", "--out", f"{name}.upload", "--epsilon", "1",
                    cwd=tmp_path)

    r = submit("evil")
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "appears under a sealing key that is not the one pinned" in r.stderr and "nothing was sealed" in r.stderr
    assert not (tmp_path / "evil.upload").exists() and not (tmp_path / "evil-ledger").exists()
    r = submit("honest")  # the same site, the honest roster: answered
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "honest.upload").exists()


def test_a_known_site_under_a_new_key_is_refused_unless_re_trusted_with_replace(tmp_path):
    """The trust store's north.sign.pub replaced (a store, a copied folder): the learner's history knows
    north's real key, so a bundle signed with the new one is refused; ``marg keys trust --replace``
    re-trusts it explicitly and says so in the history."""
    from marg.protocols.export import export_site

    cb = demo_codebook()
    schema = tmp_path / "codebook.json"
    cb.save(schema)
    write_csv(tmp_path / "north.csv", generate(300, SITES[0], seed=7))
    old, new = K.generate_keys("north", tmp_path / "old"), K.generate_keys("north", tmp_path / "new")
    for name, kf in (("b1", old), ("b2", new)):
        export_site(tmp_path / "north.csv", cb, "north", tmp_path / f"{name}.bundle", stats="first", epsilon=1.0,
                    mechanism="laplace", signing_key=K.load_signing_key(kf.sign_key),
                    ledger_dir=tmp_path / f"{name}-ledger")
    trust, hist = tmp_path / "trust", tmp_path / "history.json"
    assert run("keys", "trust", old.sign_pub, "--trust", trust).exit_code == 0

    def learn(name, console=False):
        args = ("learn", tmp_path / f"{name}.bundle", "--trust", trust, "--history", hist, "--learner", "nb", "--out",
                tmp_path / "m.json")
        return marg(*args, cwd=tmp_path) if console else run(*args)

    assert learn("b1").exit_code == 0
    (trust / "north.sign.pub").write_bytes(new.sign_pub.read_bytes())  # the attack: the store swapped north's key
    r = learn("b2", console=True)
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "site 'north' arrives under signing key" in r.stderr and "--replace" in r.stderr
    (trust / "north.sign.pub").write_bytes(old.sign_pub.read_bytes())
    r = run("keys", "trust", new.sign_pub, "--trust", trust, "--history", hist)
    assert r.exit_code == 1 and "add --replace" in r.output  # never replaced silently
    r = run("keys", "trust", new.sign_pub, "--trust", trust, "--history", hist, "--replace")
    assert r.exit_code == 0 and "recorded in the learner history" in r.output, r.output
    said = json.loads(hist.read_text())["replaced"]
    assert [(x["site"], x["from"], x["to"]) for x in said] == [("north", K.key_id(K.load_verify_key(old.sign_pub)),
                                                                 K.key_id(K.load_verify_key(new.sign_pub)))]
    assert learn("b2").exit_code == 0


def test_trust_stays_local_keys_and_trust_stores_from_a_url_are_refused(tmp_path):
    """Issue 45's second high: ``marg learn --trust s3://…/trust/`` took a key the store replaced; a site took a
    store-supplied learner key and request. Trust stores, members, rosters and key files refuse a URL in one
    line (before anything is fetched, read or spent)."""
    write_csv(tmp_path / "north.csv", generate(50, SITES[0], seed=1))
    demo_codebook().save(tmp_path / "cb.json")
    cases = [
        ("learn", "north.bundle", "--trust", "s3://drop/trust/", "--out", "m.json"),
        ("export", "north.csv", "--schema", "cb.json", "--site", "north", "--out", "b.bundle", "--request",
         "r.json", "--trust", "s3://drop/trust/"),
        ("export", "north.csv", "--schema", "cb.json", "--site", "north", "--out", "b.bundle", "--to",
         "sftp://drop.example/learner.seal.pub"),
        ("secagg", "reveal", "req.json", "--round", "round.json", "--site", "north", "--trust", "t", "--members",
         "s3://drop/members/", "--seal-key", "k", "--out", "o"),
    ]
    for args in cases:
        r = marg(*args, cwd=tmp_path)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, (args, r.stderr)
        assert "never read from a URL" in r.stderr and "copy the keys in once" in r.stderr, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cb.json", "north.csv"]  # nothing written, no ledger


def test_a_codebook_by_url_needs_the_fingerprint_given_locally(tmp_path):
    """A codebook read from the store is accepted only when its fingerprint matches one given on the command line."""
    import fsspec

    cb = demo_codebook()
    write_csv(tmp_path / "north.csv", generate(60, SITES[0], seed=2))
    r = marg("schema", "check", "north.csv", "--schema", "s3://drop/cb.json", cwd=tmp_path)  # refused before any fetch
    assert r.returncode == 2 and "needs its fingerprint given here (--schema-fingerprint" in r.stderr, r.stderr
    mem = fsspec.filesystem("memory")
    with mem.open("/trust45/cb.json", "wb") as f:
        f.write(json.dumps(cb.to_dict()).encode())
    try:
        url = "memory://trust45/cb.json"
        ok = run("schema", "check", tmp_path / "north.csv", "--schema", url, "--schema-fingerprint", cb.fingerprint)
        assert ok.exit_code == 0, ok.output
        other = Codebook(features=cb.features[:-1], label=cb.label)
        with mem.open("/trust45/cb.json", "wb") as f:  # the store's codebook replaced
            f.write(json.dumps(other.to_dict()).encode())
        bad = run("schema", "check", tmp_path / "north.csv", "--schema", url, "--schema-fingerprint", cb.fingerprint)
        assert bad.exit_code == 1 and "its fingerprint is" in bad.output and "not the" in bad.output, bad.output
        short = run("schema", "check", tmp_path / "north.csv", "--schema", url, "--schema-fingerprint",
                    cb.fingerprint[:8])
        assert short.exit_code == 2 and "at least 32 hex" in short.output
    finally:
        mem.rm("/trust45", recursive=True)


# ------------------------------------------------------------------ the privacy unit cannot be switched off
def _visits(n=120, seed=1):
    from marg.marginals.synthetic import visits

    return visits(generate(n, SITES[0], seed=seed), seed=seed + 1)


def test_a_codebook_declaring_row_does_not_switch_off_the_repeat_check(tmp_path):
    """Issue 45: ``"privacy_unit": {"column": "row"}`` in the coordinator's codebook released every visit as a
    person. Refused through the console script when an id-like column repeats; so is a unique unit declared
    while the patient column repeats (naming both)."""
    from marg.marginals.privacy_unit import PrivacyUnit, check_unit
    from marg.marginals.sources import open_source

    d = demo_codebook().to_dict()
    d["privacy_unit"] = {"column": "row"}
    Codebook.from_dict(d).save(tmp_path / "cb.json")
    cols = _visits()
    cols["visit_no"] = [str(i) for i in range(len(cols["patient_id"]))]  # unique: one row each
    write_csv(tmp_path / "v.csv", cols)
    r = marg("export", "v.csv", "--schema", "cb.json", "--site", "north", "--out", "x.bundle", "--epsilon", "1",
             "--ledger", "led", cwd=tmp_path)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "privacy unit 'row' refused: column 'patient_id' repeats" in r.stderr
    assert not (tmp_path / "x.bundle").exists() and not (tmp_path / "led" / "ledger.jsonl").exists()
    with open_source(tmp_path / "v.csv") as src:
        with pytest.raises(Exception, match="privacy unit 'visit_no' refused: it is unique .* column 'patient_id' "
                                            "repeats"):
            check_unit(src, demo_codebook(), PrivacyUnit("visit_no", 2))
        check_unit(src, demo_codebook(), PrivacyUnit("patient_id", 2))  # the patient: accepted


@pytest.mark.parametrize("name", ["pid", "patid", "subject", "person", "chart_ref", "encounter", "ref_code"])
def test_clinical_id_names_and_near_unique_columns_are_id_like(tmp_path, name):
    """The id names the attack used are recognised; a column ≥ 90 % distinct that repeats is id-like whatever
    its name (``ref_code``); a floating-point column is not."""
    from marg.marginals.privacy_unit import repeating_column
    from marg.marginals.sources import open_source

    cols = generate(200, SITES[0], seed=3)
    ids = [f"X{i:05d}" for i in range(200)]
    ids[1] = ids[0]  # one patient twice: 199 distinct of 200
    # float, near unique, repeats: read first
    cols["lab_value"] = [f"{0.5 + i / 7:.3f}" for i in range(199)] + ["0.500"]
    cols[name] = ids
    write_csv(tmp_path / "d.csv", cols)
    with open_source(tmp_path / "d.csv") as src:
        assert repeating_column(src, demo_codebook()) == (name, 2)


def test_one_patient_under_twelve_spellings_of_its_id_is_one_unit(tmp_path):
    """Case, dashes, inner and zero-width spaces, full-width digits: one patient (normalised: NFKC, case,
    separators and spaces), so the bound K = 1 keeps one of its 12 rows."""
    from marg.marginals.privacy_unit import PrivacyUnit, count_rows
    from marg.marginals.sources import open_source

    spellings = ["P-0012", "p-0012", "P0012", "p0012", "P 0012", "P\u200b0012", "Ｐ００１２", "P-00-12", "P_0012",
                 " P.0012 ", "P\u00a00012", "p\u2013 0012"]
    cols = generate(40, SITES[0], seed=4)
    cols = {c: v[:28] + [v[0]] * 12 for c, v in cols.items()}
    cols["patient_id"] = [f"Q{i:04d}" for i in range(28)] + spellings
    write_csv(tmp_path / "d.csv", cols)
    cb = demo_codebook()
    with open_source(tmp_path / "d.csv") as src:
        _, n, _, bound = count_rows(src, cb, [(cb.label.name,)], PrivacyUnit("patient_id", 1))
    assert bound.units == 29 and bound.largest == 12 and n == 29


def test_round_two_refuses_another_unit_and_releases_a_table_asked_twice_once(tmp_path):
    """A study's rounds count one unit: round 2 declaring another privacy unit than round 1 is refused
    before anything is read. A table asked twice in another order, (a, b) and (b, a), is released once."""
    from marg.marginals.request import StudyRequest
    from marg.protocols.study import STUDY_FORMAT, Round2, _save_study

    cb = demo_codebook()
    f0, f1 = cb.discrete_names[:2]
    unit = {"column": "patient_id", "max_rows_per_unit": 2}
    _save_study(tmp_path, cb.fingerprint, {"format": STUDY_FORMAT, "fingerprint": cb.fingerprint, "site": "north",
                                           "total": {"epsilon": 2.0, "delta": 1e-6, "rho": 0.1},
                                           "round1": {"bundle": "0" * 64, "seq": 2, "rho": 0.04, "unit": unit},
                                           "round2": None})
    req = StudyRequest(cb.fingerprint, ((f0, f1), (f1, f0)), (0.5, 0.5), {"north": 0.06}, {})
    with pytest.raises(RefusedError, match="round 2 declares privacy unit none declared, round 1 .* declared "
                                           "'patient_id'"):
        Round2(req, "d" * 64, None, unit=None, max_rows=1).check(tmp_path, cb, "north")
    r2 = Round2(req, "d" * 64, None, unit=unit, max_rows=2)
    r2.check(tmp_path, cb, "north")
    assert r2.cliques(cb) == [(f0, f1, cb.label.name)] and len(r2.release_plan.tables) == 1


# ------------------------------------------------------------------ the smaller items
def test_audit_refuses_a_folder_with_no_ledger_and_inspect_neutralises_escape_sequences(tmp_path):
    """``audit show --ledger WRONG_FOLDER`` said "0 releases, verified" and exited 0; a hostile codebook's names
    reached the learner's terminal as escape sequences through ``marg inspect``."""
    from marg.protocols.bundle import Bundle
    from marg.protocols.signing import finalize_bundle

    (tmp_path / "empty").mkdir()
    for cmd in ("show", "verify"):
        r = marg("audit", cmd, "--ledger", "empty", cwd=tmp_path)
        assert r.returncode == 2 and "holds no ledger" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    evil = Codebook(features=(CategoricalFeature("a\x1b]0;pwned\x07\x1b[2J", ("0", "1")),),
                    label=Label("y\u202e", ("neg", "pos\x1b[31m")))
    X, y = np.array([[0], [1], [1], [0]]), np.array([0, 1, 1, 0])
    _, data = finalize_bundle(Bundle.build(evil, count_tables(evil, X, y, plan_cliques(evil, "first")), site="north",
                                           n_rows=4), None)
    (tmp_path / "evil.bundle").write_bytes(data)
    r = marg("inspect", "evil.bundle", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout and "\u202e" not in r.stdout
    assert "\\x1b]0;pwned" in r.stdout and "\\u202e" in r.stdout


# ------------------------------------------------------------------ remote paths that fail before spending
class _Store:
    """An fsspec store (memory) whose ``/locked`` folder cannot be written, and whose uploads fail when ``broken``."""

    broken = False

    @classmethod
    def register(cls):
        import fsspec
        from fsspec.implementations.memory import MemoryFileSystem

        class Locked(MemoryFileSystem):
            protocol = "margtest"
            root_marker = "/"
            store = {}
            pseudo_dirs = [""]

            def _denied(self, path):
                return "locked" in str(path) or cls.broken

            def _open(self, path, mode="rb", **kw):
                if "w" in mode and self._denied(path):
                    raise PermissionError("Access Denied")
                return super()._open(path, mode, **kw)

            def pipe_file(self, path, value, **kw):
                if self._denied(path):
                    raise PermissionError("Access Denied")
                return super().pipe_file(path, value, **kw)

            def put_file(self, lpath, rpath, *a, **kw):
                if self._denied(rpath):
                    raise PermissionError("Access Denied")
                return super().put_file(lpath, rpath, *a, **kw)

        fsspec.register_implementation("margtest", Locked, clobber=True)
        return Locked


def test_a_remote_out_that_cannot_be_written_is_found_before_the_ledger_charges(tmp_path, monkeypatch):
    """A bucket folder the account cannot write was found only after the export was charged, and stdout and
    ``--json`` still said ``wrote``. Now a probe is written and removed before counting; an upload that still
    fails says so on stdout and in ``--json`` (``"written": false``, the parked file)."""
    store = _Store.register()
    demo_codebook().save(tmp_path / "cb.json")
    write_csv(tmp_path / "d.csv", generate(200, SITES[0], seed=9))
    monkeypatch.chdir(tmp_path)
    base = ("export", "d.csv", "--schema", "cb.json", "--site", "north", "--epsilon", "1", "--stats", "first",
            "--mechanism", "laplace", "--ledger", "led", "--json")
    r = run(*base, "--out", "margtest://locked/north.bundle")
    assert r.exit_code == 2 and "cannot reach margtest://locked/north.bundle" in r.output, r.output
    assert not (tmp_path / "led" / "ledger.jsonl").exists()  # nothing counted or charged
    try:
        _Store.broken = False
        r = run(*base, "--out", "margtest://drop/ok.bundle")
        assert r.exit_code == 0 and json.loads(r.stdout)["out"] == "margtest://drop/ok.bundle", r.output
        probe = [p for p in store.store if "probe" in p]
        assert probe == []  # the probe was removed
        _Store.broken = True  # the probe passes (written before), the upload then fails
        monkeypatch.setattr("marg.cli.remote._probe", lambda fs, path: None)
        r = run(*base, "--out", "margtest://drop/late.bundle")
        assert r.exit_code == 1 and "could not upload" in r.stderr, r.output
        said = json.loads(r.stdout)
        assert said["written"] is False and Path(said["parked"]).exists()
    finally:
        _Store.broken = False
        store.store.clear()


def test_ssh_failures_are_one_line_input_errors_naming_host_and_user_never_a_password(tmp_path):
    """A port that is not SSH, and a URL that does not parse: one line, exit 2, the host and user named, the
    password never echoed."""
    import socket
    import threading

    pytest.importorskip("paramiko")
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]

    def not_ssh():
        conn, _ = srv.accept()
        conn.sendall(b"HTTP/1.0 400 Bad Request\r\n\r\n")
        conn.close()

    threading.Thread(target=not_ssh, daemon=True).start()
    r = marg("inspect", f"sftp://alice:hunter2@127.0.0.1:{port}/x.bundle", cwd=tmp_path, timeout=60)
    srv.close()
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"sftp://127.0.0.1:{port} (user 'alice')" in r.stderr and "hunter2" not in r.stderr + r.stdout, r.stderr
    r = marg("inspect", "sftp://alice:hun/ter@2@127.0.0.1:notaport/x.bundle", cwd=tmp_path, timeout=60)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "hun/ter@2" not in r.stderr and "ter@2" not in r.stderr and "hun/" not in r.stderr, r.stderr


def test_sftp_verifies_the_host_key_against_known_hosts(tmp_path):
    """fsspec's SFTP accepted any host key; now an unknown host is refused unless ``--accept-new-host-key`` (which
    adds it to known_hosts), a known one is accepted (the connection goes on to authentication), another key for a
    known host is refused. A paramiko server on 127.0.0.1 presents the key (it lets nobody log in)."""
    import socket
    import threading

    paramiko = pytest.importorskip("paramiko")
    pytest.importorskip("fsspec")
    key = paramiko.ECDSAKey.generate()
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    port = srv.getsockname()[1]

    def serve():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            t = paramiko.Transport(conn)
            t.add_server_key(key)
            try:
                t.start_server(server=paramiko.ServerInterface())
            except Exception:  # noqa: BLE001 - the client hung up after refusing the key
                pass

    threading.Thread(target=serve, daemon=True).start()
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    known = home / ".ssh" / "known_hosts"
    url = f"sftp://alice@127.0.0.1:{port}/x.bundle"
    env = {"HOME": str(home)}
    try:
        r = marg("inspect", url, cwd=tmp_path, env=env, timeout=60)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert f"unknown host key of [127.0.0.1]:{port}" in r.stderr and "--accept-new-host-key" in r.stderr
        r = run("inspect", url, "--accept-new-host-key", env=env)
        assert r.exit_code == 2 and "host key" not in r.output.split("note:")[-1].split("\n", 1)[-1], r.output
        assert f"[127.0.0.1]:{port} ecdsa-sha2-nistp256 {key.get_base64()}" in known.read_text()
        r = run("inspect", url, env=env)  # known now: the connection goes on (and fails at authentication)
        assert r.exit_code == 2 and "cannot connect" in r.output and "host key" not in r.output, r.output
        other = paramiko.ECDSAKey.generate()
        known.write_text(f"[127.0.0.1]:{port} ecdsa-sha2-nistp256 {other.get_base64()}\n")
        r = run("inspect", url, "--accept-new-host-key", env=env)
        assert r.exit_code == 2 and "differs from the one in" in r.output, r.output
    finally:
        srv.close()


def test_a_refused_holdout_export_leaves_no_split_key_behind(tmp_path):
    """An export refused for an unknown level with ``--holdout`` created the site's secret split key all the same."""
    demo_codebook().save(tmp_path / "cb.json")
    cols = generate(100, SITES[0], seed=5)
    cols["sex"][-1] = "SECRET_LEVEL_77"  # a level the codebook lacks, in the last row: found while counting
    write_csv(tmp_path / "d.csv", cols)
    (tmp_path / "led").mkdir()
    r = marg("export", "d.csv", "--schema", "cb.json", "--site", "north", "--out", "x.bundle", "--epsilon", "1",
             "--holdout", "0.3", "--ledger", "led", cwd=tmp_path)
    assert r.returncode == 2 and "SECRET_LEVEL_77" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    # the ledger's lock file only (taken to check the cap): no holdout.json with a split key, no ledger, no bundle
    assert sorted(p.name for p in (tmp_path / "led").iterdir()) == [".lock"] and not (tmp_path / "x.bundle").exists()


def test_evaluate_dry_run_shows_the_evaluations_release(tmp_path, monkeypatch):
    """``export --evaluate MODEL --dry-run`` previewed the export's Gaussian tables, not the 2-cell error count the
    real command releases; now it shows that one table, its noise and cost, reading and charging nothing."""
    demo_codebook().save(tmp_path / "cb.json")
    write_csv(tmp_path / "d.csv", generate(300, SITES[0], seed=8))
    site = ("--schema", "cb.json", "--site", "north", "--ledger", "led")
    monkeypatch.chdir(tmp_path)
    assert run("export", "d.csv", *site, "--out", "t.bundle", "--holdout", "0.3", "--min-cell", "1").exit_code == 0
    assert run("learn", "t.bundle", "--out", "m.json", "--learner", "nb", "--no-sign",
               "--allow-unsigned").exit_code == 0
    before = (tmp_path / "led" / "ledger.jsonl").read_bytes()
    r = marg("export", "d.csv", *site, "--out", "e.eval", "--evaluate", "m.json", "--allow-unsigned", "--epsilon", "1",
             "--dry-run", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    said = json.loads(r.stdout)
    assert [t["cells"] for t in said["tables"]] == [2] and said["tables"][0]["mechanism"] == "laplace"
    assert said["cost"]["epsilon"] == pytest.approx(1.0)
    assert (tmp_path / "led" / "ledger.jsonl").read_bytes() == before and not (tmp_path / "e.eval").exists()
