"""Dropout-tolerant secure aggregation on files (issue 18): the sum is exact when sites drop out,
the learner cannot unmask one site, and a round can be neither reused nor asked twice."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from marg.cli.main import app
from marg.errors import InputError, RefusedError
from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label, NumericFeature
from marg.marginals.summary import sum_tables
from marg.marginals.synthetic import SITES, demo_codebook, generate, write_csv
from marg.marginals.counts.counting import count_tables
from marg.marginals.counts.tables import plan_cliques
from marg.protocols import keys as K
from marg.protocols.pinning import PinnedKeys
from marg.protocols.trust_store import TrustStore
from marg.protocols.export import count_file
from marg.protocols.secagg import expand, unmask_sum
from marg.protocols.signing import unb64
from tests.helpers.files import folder_bytes
from marg.protocols.secagg_round import (
    finish,
    make_request,
    make_reveal,
    make_upload,
    parse_round,
    parse_upload,
    start_round,
)

CB = Codebook(features=(CategoricalFeature("a", ("0", "1", "2")), CategoricalFeature("b", ("u", "v")),
                        NumericFeature("age", lo=0.0, hi=100.0)), label=Label("y", ("neg", "pos")))


@pytest.fixture(scope="module")
def ten(tmp_path_factory):
    """Ten sites' keys in a roster, a learner key, each site's exact tables (pairs and moments)."""
    d = tmp_path_factory.mktemp("roster")
    names = [f"site{i:02d}" for i in range(10)]
    kf = {s: K.generate_keys(s, d) for s in names + ["learner"]}
    rng = np.random.default_rng(3)
    tables = {}
    for s in names:
        n = int(rng.integers(30, 90))
        X = np.column_stack([rng.integers(0, 3, n), rng.integers(0, 2, n), rng.uniform(0, 100, n)])
        tables[s] = count_tables(CB, X, rng.integers(0, 2, n), plan_cliques(CB, "all"))
    keys = {s: (K.load_signing_key(kf[s].sign_key), K.load_seal_key(kf[s].seal_key)) for s in names + ["learner"]}
    return d, names, keys, tables


def _round(ten, **kw):
    d, names, keys, _ = ten
    doc = start_round(d, names, CB.fingerprint, keys["learner"][0], "learner", **kw)
    return doc, parse_round(doc, learner_pub=keys["learner"][0].public_key())


def _uploads(ten, rnd, sites):
    _, _, keys, tables = ten
    return {s: parse_upload(json.loads(json.dumps(make_upload(rnd, s, tables[s], keys[s][1], keys[s][0]))), rnd, s)
            for s in sites}


def _plain(ten, sites):
    _, _, _, tables = ten
    return sum_tables([tables[s] for s in sites])[0]


@pytest.mark.parametrize("late", [0, 2])
def test_two_of_ten_sites_drop_out_and_the_sum_is_exact(ten, late):
    """Two sites never upload; ``late`` more survivors never reveal. Threshold 6."""
    d, names, keys, tables = ten
    _, rnd = _round(ten)
    assert rnd.threshold == 6
    survivors = [s for s in names if s not in ("site03", "site07")]
    ups = _uploads(ten, rnd, survivors)
    req = make_request(rnd, list(ups.values()), keys["learner"][0])
    assert req["dropped"] == ["site03", "site07"]
    answering = survivors[late:]
    reveals = [make_reveal(rnd, req, s, keys[s][1], keys[s][0], members=PinnedKeys.from_dir(d)) for s in answering]
    out, info = finish(rnd, list(ups.values()), req, reveals)
    want = _plain(ten, survivors)
    for t, w in zip(out, want):
        assert t.clique == w.clique and t.kind == w.kind
        if t.kind == "counts":
            assert np.array_equal(t.counts, w.counts)  # exact
        else:
            np.testing.assert_allclose(t.counts, w.counts, atol=len(survivors) * 2.0**-17)
    assert info["sites"] == survivors and info["dropped"] == ["site03", "site07"]
    # the naive sum of the uploads (what the old library returned after a dropout) is garbage
    naive = unmask_sum([u.masked.vector for u in ups.values()])
    assert not np.array_equal(naive[: want[0].counts.size], want[0].counts.ravel())


def test_too_few_uploads_or_reveals_are_refused(ten):
    d, names, keys, tables = ten
    _, rnd = _round(ten)
    ups = _uploads(ten, rnd, names[:5])
    with pytest.raises(RefusedError, match="5 of 10 sites uploaded, the threshold is 6"):
        make_request(rnd, list(ups.values()), keys["learner"][0])
    ups = _uploads(ten, rnd, names[:7])
    req = make_request(rnd, list(ups.values()), keys["learner"][0])
    reveals = [make_reveal(rnd, req, s, keys[s][1], keys[s][0], members=PinnedKeys.from_dir(d)) for s in names[:5]]
    with pytest.raises(RefusedError, match="5 sites revealed their shares, the threshold is 6"):
        finish(rnd, list(ups.values()), req, reveals)


def test_the_learner_cannot_unmask_one_site(ten):
    """With everything the learner holds (uploads, request, t reveals), one survivor's vector minus
    its self mask and its dangling masks is still hidden by its masks with the other survivors."""
    d, names, keys, tables = ten
    _, rnd = _round(ten)
    survivors = names[:8]
    ups = _uploads(ten, rnd, survivors)
    req = make_request(rnd, list(ups.values()), keys["learner"][0])
    reveals = [make_reveal(rnd, req, s, keys[s][1], keys[s][0], members=PinnedKeys.from_dir(d)) for s in survivors[:6]]
    # what a learner can rebuild: every survivor's self seed and the seeds shared with dropped sites
    from marg.protocols import shamir

    target = "site01"
    shares = {rnd.member(r["site"]).index: shamir.share_int(r["shares"][target]["b"]) for r in reveals}
    b = shamir.combine(shares, rnd.threshold)
    vec = ups[target].masked.vector
    partial = vec - expand(b, vec.size)
    for j in ("site08", "site09"):
        k = {rnd.member(r["site"]).index: shamir.share_int(r["shares"][target][f"k:{j}"]) for r in reveals}
        m = expand(shamir.combine(k, rnd.threshold), vec.size)
        partial = partial - m  # target < j: it added m
    plain = np.concatenate([np.asarray(t.counts, dtype=np.int64).ravel() if t.kind == "counts"
                            else np.rint(np.asarray(t.counts) * 2**16).astype(np.int64).ravel()
                            for t in tables[target]])
    same = np.mean(partial.view(np.int64) == plain)
    assert same < 0.01  # essentially no cell recovered
    # no reveal carries a pairwise seed between two survivors
    assert all(set(r["shares"][target]) == {"b", "k:site08", "k:site09"} for r in reveals)


def test_refusals_tampering_foreign_keys_and_thresholds(ten, tmp_path):
    d, names, keys, tables = ten
    doc, rnd = _round(ten)
    up = make_upload(rnd, "site00", tables["site00"], keys["site00"][1], keys["site00"][0])
    bad = dict(up)
    bad["vector"] = bad["vector"][:-4] + ("AAAA" if bad["vector"][-4:] != "AAAA" else "BBBB")
    with pytest.raises(RefusedError, match="bad signature"):
        parse_upload(bad, rnd)
    with pytest.raises(RefusedError, match="not the ones round"):  # another site's keys
        make_upload(rnd, "site00", tables["site00"], keys["site01"][1], keys["site01"][0])
    with pytest.raises(RefusedError, match="not in round"):
        make_upload(rnd, "mallory", tables["site00"], keys["site00"][1], keys["site00"][0])
    # a round signed by a learner the site does not trust
    other = K.generate_keys("learner", tmp_path / "other")
    forged = start_round(d, names, CB.fingerprint, K.load_signing_key(other.sign_key), "learner")
    trust = TrustStore.from_keys({"learner": keys["learner"][0].public_key()}, roles={"learner": "learner"})
    assert parse_round(doc, trust=trust).id == rnd.id
    with pytest.raises(RefusedError, match="a site's key: a learner's signature is needed"):  # key roles (issue 25)
        parse_round(doc, trust=TrustStore.from_keys({"learner": keys["learner"][0].public_key()},
                                                    roles={"learner": "site"}))
    with pytest.raises(RefusedError, match="not a learner in trust store"):
        parse_round(forged, trust=trust)
    with pytest.raises(InputError, match="more than half"):
        start_round(d, names, CB.fingerprint, keys["learner"][0], "learner", threshold=5)
    # an upload replayed into another round
    _, rnd2 = _round(ten)
    with pytest.raises(RefusedError, match="replayed"):
        parse_upload(up, rnd2)


def one_line_refusal(r, words):
    assert r.exit_code == 1, r.output
    assert r.stderr.count("\n") == 1 and r.stderr.endswith("\n") and words in r.stderr, r.stderr


def test_two_rounds_get_different_ids(tmp_path):
    """Every marg secagg start draws a fresh round id (a reused id would let a site's second masked
    vector be combined with its first)."""
    runner = CliRunner()
    schema = tmp_path / "codebook.json"
    demo_codebook().save(schema)
    for s in ("north", "south", "learner"):
        assert runner.invoke(app, ["keys", "init", "--site", s, "--dir", str(tmp_path / "keys"), "--role",
                                   "learner" if s == "learner" else "site"]).exit_code == 0
    for s in ("north", "south"):
        for kind in ("sign", "seal"):
            r = runner.invoke(app, ["keys", "trust", str(tmp_path / "keys" / f"{s}.{kind}.pub"), "--trust",
                                    str(tmp_path / "roster")])
            assert r.exit_code == 0, r.output
    ids = []
    for k in range(2):
        out = tmp_path / f"round{k}.json"
        r = runner.invoke(app, ["secagg", "start", "--schema", str(schema), "--roster", str(tmp_path / "roster"),
                                "--key", str(tmp_path / "keys" / "learner.sign.key"), "--out", str(out)])
        assert r.exit_code == 0, r.output
        doc = json.loads(out.read_text())
        assert doc["id"] in r.stdout and [m["site"] for m in doc["members"]] == ["north", "south"]
        ids.append(doc["id"])
    assert len(ids[0]) == 32 and ids[0] != ids[1]


def test_secure_round_through_the_cli(tmp_path):
    """Three sites, threshold 2: one drops out; the sum is the two survivors' tables (with their DP
    noise), marg learn reads it, each site answers the round once and reveals once."""
    from tests.helpers.console import run

    schema = tmp_path / "codebook.json"
    demo_codebook().save(schema)
    roster, site_trust = tmp_path / "roster", tmp_path / "site-trust"
    sites = ["north", "south", "city"]
    for s in sites + ["learner"]:
        assert run("keys", "init", "--site", s, "--dir", tmp_path / "keys", "--role",
                   "learner" if s == "learner" else "site").exit_code == 0
    for s in sites:
        for kind in ("sign", "seal"):
            assert run("keys", "trust", tmp_path / "keys" / f"{s}.{kind}.pub", "--trust", roster).exit_code == 0
    for store in (site_trust, roster):
        assert run("keys", "trust", tmp_path / "keys" / "learner.sign.pub", "--trust", store, "--role",
                   "learner").exit_code == 0
    members = tmp_path / "members"  # each site's own list of the study's sites
    for s in sites:
        assert run("keys", "trust", tmp_path / "keys" / f"{s}.sign.pub", "--trust", members).exit_code == 0
    r = run("secagg", "start", "--schema", schema, "--roster", roster, "--key", tmp_path / "keys" / "learner.sign.key",
            "--out", tmp_path / "round.json")
    assert r.exit_code == 0, r.output
    assert "threshold 2" in r.stdout and "at most 1 drop out" in r.stdout

    def submit(s, *extra, out=None):
        return run("secagg", "submit", tmp_path / f"{s}.csv", "--schema", schema, "--round", tmp_path / "round.json",
                   "--site", s, "--trust", site_trust, "--members", members, "--seal-key",
                   tmp_path / "keys" / f"{s}.seal.key",
                   "--key", tmp_path / "keys" / f"{s}.sign.key", "--ledger", tmp_path / f"{s}-ledger",
                   "--out", out or tmp_path / f"{s}.upload", *extra)

    for k, s in enumerate(sites[:2]):  # city drops out
        write_csv(tmp_path / f"{s}.csv", generate(500, SITES[k], seed=40 + k))
        r = submit(s, "--epsilon", "1", "--mechanism", "laplace")
        assert r.exit_code == 0, r.output
    # each upload is masked: its vector is nowhere near the site's true counts (nor its noisy ones,
    # which lie within a few noise stds of them)
    true = {}
    for s in sites[:2]:
        up = json.loads((tmp_path / f"{s}.upload").read_text())
        cliques = [tuple(x["clique"]) for x in up["layout"]]
        assert all(x["kind"] == "counts" for x in up["layout"])
        true[s], n = count_file(tmp_path / f"{s}.csv", demo_codebook(), cliques)
        assert n == 500
        plain = np.concatenate([np.asarray(tb.counts, dtype=np.int64).ravel() for tb in true[s]])
        vec = np.frombuffer(unb64(up["vector"]), dtype="<u8").view(np.int64)
        assert vec.shape == plain.shape
        far = np.abs(vec.astype(np.float64) - plain) > 2.0**40
        assert far.mean() > 0.99, f"{s}'s upload is not masked"
    # a second submission to the same round: refused in one line before any data is read, nothing
    # written (another output path, which stays absent; the site's ledger folder byte-identical)
    before = folder_bytes(tmp_path / "north-ledger")
    r = submit("north", "--epsilon", "1", "--mechanism", "laplace", out=tmp_path / "north-again.upload")
    one_line_refusal(r, "already answered")
    assert not (tmp_path / "north-again.upload").exists()
    assert folder_bytes(tmp_path / "north-ledger") == before
    ups = [tmp_path / f"{s}.upload" for s in sites[:2]]
    r = run("secagg", "collect", *ups, "--round", tmp_path / "round.json", "--key",
            tmp_path / "keys" / "learner.sign.key",
            "--out", tmp_path / "request.json", "--json")
    assert r.exit_code == 0, r.output
    said = json.loads(r.stdout)  # --json: the whole of stdout is one object
    assert said["dropped"] == ["city"] and said["survivors"] == ["north", "south"] and said["threshold"] == 2
    reveals = []
    for s in sites[:2]:
        r = run("secagg", "reveal", tmp_path / "request.json", "--round", tmp_path / "round.json", "--site", s,
                "--trust", site_trust, "--members", members, "--seal-key", tmp_path / "keys" / f"{s}.seal.key",
                "--key", tmp_path / "keys" / f"{s}.sign.key", "--ledger", tmp_path / f"{s}-ledger",
                "--out", tmp_path / f"{s}.reveal")
        assert r.exit_code == 0, r.output
        reveals += ["--reveal", tmp_path / f"{s}.reveal"]
    # the same site asked again (e.g. with another survivor set): refused in one line, nothing written
    before = folder_bytes(tmp_path / "north-ledger")
    assert (tmp_path / "north.reveal").exists() and not (tmp_path / "north-again.reveal").exists()
    def reveal_again(ledger):
        return run("secagg", "reveal", tmp_path / "request.json", "--round", tmp_path / "round.json", "--site", "north",
                   "--trust", site_trust, "--members", members, "--seal-key", tmp_path / "keys" / "north.seal.key",
                   "--key", tmp_path / "keys" / "north.sign.key", "--ledger", ledger, "--out",
                   tmp_path / "north-again.reveal")

    one_line_refusal(reveal_again(tmp_path / "north-ledger"), "already answered")
    # the attack of issue 25: the second reveal pointed at a fresh ledger folder, which forgets the first
    one_line_refusal(reveal_again(tmp_path / "elsewhere"), "records no upload of site 'north'")
    assert not (tmp_path / "north-again.reveal").exists() and not (tmp_path / "elsewhere").exists()
    assert folder_bytes(tmp_path / "north-ledger") == before
    r = run("secagg", "finish", *ups, "--round", tmp_path / "round.json", "--request", tmp_path / "request.json",
            *reveals, "--schema", schema, "--key", tmp_path / "keys" / "learner.sign.key", "--out",
            tmp_path / "sum.bundle")
    assert r.exit_code == 0, r.output
    assert "1 dropped out (city)" in r.stdout
    from marg.protocols.bundle import load_bundle

    total = load_bundle(tmp_path / "sum.bundle")
    assert total.header["secagg"]["sites"] == ["north", "south"] and total.header["secagg"]["dropped"] == ["city"]
    # the same counts as the two sites' noisy tables summed: the sites' ledgers hold their bundles' digests
    assert all(t.noise.mechanism == "laplace" for t in total.tables)
    # DP noise was added at the sites: the sum differs from the exact sum of the survivors' true
    # tables, by noise of the recorded std (each table's std is the sites' stds in quadrature)
    site_std = {s: [x["noise"]["std"] for x in json.loads((tmp_path / f"{s}.upload").read_text())["layout"]]
                for s in sites[:2]}
    exact = sum_tables([true[s] for s in sites[:2]])[0]
    z = []
    for k, (tb, ex) in enumerate(zip(total.tables, exact)):
        assert tb.clique == ex.clique
        want_std = float(np.hypot(site_std["north"][k], site_std["south"][k]))
        assert want_std > 0 and tb.noise.std == pytest.approx(want_std, rel=1e-9)
        z.append(((np.asarray(tb.counts, dtype=float) - ex.counts) / tb.noise.std).ravel())
    z = np.concatenate(z)
    assert np.mean(z != 0) > 0.5  # noise was added
    assert 0.5 < np.sqrt(np.mean(z**2)) < 2.0, np.sqrt(np.mean(z**2))  # of the recorded size
    for s in sites[:2]:
        e = json.loads((tmp_path / f"{s}-ledger" / "ledger.jsonl").read_text().splitlines()[-1])
        assert e["round"] == json.loads((tmp_path / "round.json").read_text())["id"]
        r = run("audit", "verify", "--ledger", tmp_path / f"{s}-ledger", "--key", tmp_path / "keys" / f"{s}.sign.pub",
                "--bundles", tmp_path / f"{s}.upload")
        assert r.exit_code == 0, r.output
    r = run("learn", tmp_path / "sum.bundle", "--learner", "mrc", "--trust", roster, "--out", tmp_path / "m.json",
            "--json")
    assert r.exit_code == 0, r.output


def test_a_roster_padded_with_a_sybil_is_refused(ten, tmp_path):
    """Issue 25: the learner puts a key of its own (site01) beside site00 in a two-site roster: with
    site00's reveal and its own it reads site00's exact table. site00 checks the roster against its own
    list of study members and refuses it; a roster holding the threshold of known sites passes."""
    from marg.protocols.secagg_round import check_roster

    d, names, keys, tables = ten
    doc = start_round(d, ["site00", "site01"], CB.fingerprint, keys["learner"][0], "learner")
    rnd = parse_round(doc, learner_pub=keys["learner"][0].public_key())
    ups = _uploads(ten, rnd, ["site00", "site01"])
    req = make_request(rnd, list(ups.values()), keys["learner"][0])
    reveals = [make_reveal(rnd, req, s, keys[s][1], keys[s][0], members=PinnedKeys.from_dir(d))
               for s in ("site00", "site01")]
    out, _ = finish(rnd, list(ups.values()), req, reveals)
    for got, sybil, victim in zip(out, tables["site01"], tables["site00"]):  # the attack: sum minus the Sybil's own
        if got.kind == "counts":
            assert np.array_equal(got.counts - sybil.counts, victim.counts)
    members = tmp_path / "members"  # site00's own list of the study: site00, site02, site03 (both keys pinned)
    members.mkdir()
    for s in ("site00", "site02", "site03"):
        for kind in ("sign", "seal"):
            (members / f"{s}.{kind}.pub").write_bytes((d / f"{s}.{kind}.pub").read_bytes())
    store = PinnedKeys.from_dir(members)
    with pytest.raises(RefusedError, match=r"only 1 of its 2 sites have both keys pinned .* threshold 2; not pinned: "
                                           r"site01"):
        check_roster(rnd, store, "site00")
    ok = parse_round(start_round(d, ["site00", "site01", "site02"], CB.fingerprint, keys["learner"][0], "learner"),
                     learner_pub=keys["learner"][0].public_key())
    assert check_roster(ok, store, "site00") == ["site00", "site02"]  # the threshold 2; the one Sybil holds 1 share
    # a pinned name under another key is refused outright (issue 45: no longer merely "not known")
    for kind in ("sign", "seal"):
        (members / f"site01.{kind}.pub").write_bytes((d / f"site04.{kind}.pub").read_bytes())
    with pytest.raises(RefusedError, match="site 'site01' appears under signing key"):
        check_roster(rnd, PinnedKeys.from_dir(members), "site00")


def test_a_sybil_through_the_drop_out_path_is_refused_at_reveal(ten, tmp_path):
    """Issue 35: roster {site00, site02, site01 = the learner's Sybil}, threshold 2. site00 knows site00 and
    site02, so the roster passes its --members check; the learner declares site02 dropped and asks site00
    to reveal for the survivors {site00, site01}: with the Sybil's shares it rebuilds site00's self mask and
    reads its table. site00 now refuses unless t − 1 known members other than itself survived — also
    through the installed console script."""
    from marg.protocols.secagg_round import check_roster, check_survivors, write_doc
    from tests.helpers.console import marg

    d, names, keys, tables = ten
    doc = start_round(d, ["site00", "site02", "site01"], CB.fingerprint, keys["learner"][0], "learner")
    rnd = parse_round(doc, learner_pub=keys["learner"][0].public_key())
    members = tmp_path / "members"  # site00's own list of the study (both keys pinned)
    members.mkdir()
    for s in ("site00", "site02"):
        for kind in ("sign", "seal"):
            (members / f"{s}.{kind}.pub").write_bytes((d / f"{s}.{kind}.pub").read_bytes())
    check_roster(rnd, PinnedKeys.from_dir(members), "site00")  # passes: 2 pinned sites, the threshold
    ups = _uploads(ten, rnd, ["site00", "site02", "site01"])
    req = make_request(rnd, [ups["site00"], ups["site01"]], keys["learner"][0])  # site02 "dropped out"
    # the attack, where the check is skipped (the Sybil's store knows everyone): site00's table, exactly
    reveals = [make_reveal(rnd, req, s, keys[s][1], keys[s][0], members=PinnedKeys.from_dir(d))
               for s in ("site00", "site01")]
    out, _ = finish(rnd, [ups["site00"], ups["site01"]], req, reveals)
    for got, sybil, victim in zip(out, tables["site01"], tables["site00"]):
        if got.kind == "counts":
            assert np.array_equal(got.counts - sybil.counts, victim.counts)
    with pytest.raises(RefusedError, match=r"only 0 of the other survivors .* threshold minus one \(1\); not pinned: "
                                           r"site01"):
        make_reveal(rnd, req, "site00", keys["site00"][1], keys["site00"][0], members=PinnedKeys.from_dir(members))
    check_survivors(rnd, PinnedKeys.from_dir(members), "site00", ["site00", "site02"])  # a pinned survivor: revealed
    # through the console script: refused before anything is written or remembered
    write_doc(doc, tmp_path / "round.json")
    write_doc(req, tmp_path / "request.json")
    trust = tmp_path / "trust"  # the learners site00 trusts: the ten's learner, marked with its role
    trust.mkdir()
    from marg.protocols.key_roles import with_role

    (trust / "learner.sign.pub").write_bytes(with_role((d / "learner.sign.pub").read_bytes(), "learner"))
    r = marg("secagg", "reveal", tmp_path / "request.json", "--round", tmp_path / "round.json", "--site", "site00",
             "--trust", trust, "--members", members, "--seal-key", d / "site00.seal.key", "--key",
             d / "site00.sign.key",
             "--ledger", tmp_path / "ledger", "--out", tmp_path / "reveal.json", cwd=tmp_path)
    assert r.returncode == 1 and "other survivors have both keys pinned" in r.stderr, r.stderr
    assert not (tmp_path / "reveal.json").exists() and not (tmp_path / "ledger").exists()
