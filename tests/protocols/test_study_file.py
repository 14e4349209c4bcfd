"""The study file (issue 44): signed once by the learner, every field covered, every key pinned.

A study file altered after signing is refused; a key not in it is refused everywhere: a site's own key
files must be its entry, a second study file for the same id is refused after the first, a learner not in
the site's trust store is refused, and a round whose roster carries any key but the study's (a swapped
sealing key: the learner could open every share) is refused before anything is sealed.
"""

from __future__ import annotations

import json

import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519, x25519

from marg.errors import InputError, RefusedError
from marg.marginals.synthetic import demo_codebook
from marg.protocols.pinning import Pinned
from marg.protocols.signing import sign_document
from marg.protocols.study_file import check_own_keys, make_study, parse_study, pin_learner, read_study, write_study
from marg.protocols.study_round import round_doc, site_round

PLAN = {"rho": {"select": 0.01, "measure": 0.01, "evaluate": 0.004}, "rho_total": 0.024}


def parties(n=3):
    keys = {}
    for name in ["learner"] + [f"s{k}" for k in range(n)]:
        keys[name] = (ed25519.Ed25519PrivateKey.generate(), x25519.X25519PrivateKey.generate())
    pinned = [Pinned(n, s.public_key(), c.public_key()) for n, (s, c) in keys.items()]
    return keys, pinned


def declared(tmp_path, n=3, **kw):
    keys, pinned = parties(n)
    doc = make_study(demo_codebook(), pinned, "learner", keys["learner"][0], epsilon=1.0, delta=1e-6,
                     drop=str(tmp_path / "drop"), plan=PLAN, holdout=0.3, **kw)
    path = tmp_path / "study.json"
    write_study(doc, path)
    return keys, doc, path


def test_a_study_file_reads_back_as_declared(tmp_path):
    keys, doc, path = declared(tmp_path)
    st = read_study(path)
    assert st.study_id == doc["study_id"] and len(st.study_id) == 32
    assert st.names == ["s0", "s1", "s2"] and st.learner.site == "learner"
    assert st.threshold == 2 and st.noise == "shared" and st.holdout == 0.3
    assert st.fingerprint == demo_codebook().fingerprint and st.codebook.fingerprint == st.fingerprint
    pk = st.pinned()
    for s in st.names:
        assert pk.get(s).sign_id == st.site(s).sign_id and pk.get(s).seals_to(keys[s][1].public_key())
    assert st.round_rho("measure") == 0.01
    two = read_study(path)
    assert two.digest == st.digest


@pytest.mark.parametrize("field,value", [("epsilon", 2.0), ("delta", 1e-3), ("threshold", 3), ("holdout", 0.1),
                                         ("drop", "/other"), ("noise", "per-site"), ("plan", {"rho": {}})])
def test_any_field_altered_after_signing_is_refused(tmp_path, field, value):
    _, doc, _ = declared(tmp_path)
    with pytest.raises(RefusedError, match="altered"):
        parse_study({**doc, field: value}, "study.json")


def test_a_swapped_key_or_codebook_is_refused(tmp_path):
    keys, doc, _ = declared(tmp_path)
    other = x25519.X25519PrivateKey.generate().public_key()
    from marg.protocols.keys import public_bytes
    from marg.protocols.signing import b64

    sites = [dict(s) for s in doc["sites"]]
    sites[0]["seal_pub"] = b64(public_bytes(other))
    with pytest.raises(RefusedError, match="altered"):
        parse_study({**doc, "sites": sites}, "study.json")
    # re-signed by the learner, the codebook no longer matching its fingerprint
    cb = json.loads(json.dumps(doc["codebook"]))
    cb["label"]["classes"] = list(reversed(cb["label"]["classes"]))
    body = {k: v for k, v in doc.items() if k not in ("key_id", "signature")}
    with pytest.raises(RefusedError, match="fingerprint"):
        parse_study(sign_document({**body, "codebook": cb}, keys["learner"][0]), "study.json")
    # a malformed key, re-signed
    sites = [dict(s) for s in doc["sites"]]
    sites[1]["sign_pub"] = "not-a-key"
    with pytest.raises(InputError, match="32-byte"):
        parse_study(sign_document({**body, "sites": sites}, keys["learner"][0]), "study.json")


def test_a_site_s_own_keys_must_be_its_entry(tmp_path):
    keys, _, path = declared(tmp_path)
    st = read_study(path)
    check_own_keys(st, "s1", *keys["s1"])
    with pytest.raises(RefusedError, match="not the keys the study file lists"):
        check_own_keys(st, "s1", keys["s1"][0], x25519.X25519PrivateKey.generate())
    with pytest.raises(RefusedError):
        check_own_keys(st, "s1", *keys["s2"])
    with pytest.raises(InputError, match="not in study"):
        check_own_keys(st, "elsewhere", *keys["s1"])


def test_the_learner_is_pinned_on_first_use_and_by_the_trust_store(tmp_path):
    keys, _, path = declared(tmp_path)
    home = tmp_path / "home"
    st = read_study(path)
    pin_learner(st, home)
    pin_learner(st, home)  # the same file again: fine
    d = json.loads(path.read_text())
    body = {k: v for k, v in d.items() if k not in ("key_id", "signature")}
    resigned = tmp_path / "again.json"
    write_study(sign_document({**body, "epsilon": 5.0}, keys["learner"][0]), resigned)
    with pytest.raises(RefusedError, match="declared once"):
        pin_learner(read_study(resigned), home)
    # a site whose trust store holds learner keys refuses another learner
    from marg.protocols.keys import generate_keys

    trusting = tmp_path / "trusting"
    kf = generate_keys("someone", tmp_path / "k", role="learner")
    (trusting / "trust").mkdir(parents=True)
    (trusting / "trust" / "someone.sign.pub").write_bytes(kf.sign_pub.read_bytes())
    with pytest.raises(RefusedError, match="trust store"):
        pin_learner(st, trusting)
    assert not (trusting / "studies").exists()


def test_a_round_with_any_key_but_the_study_s_is_refused_before_anything_is_sealed(tmp_path):
    keys, _, path = declared(tmp_path)
    st = read_study(path)
    good = round_doc(st, "select", st.names, keys["learner"][0], {"cliques": [["cv_event"]], "rho": 0.01})
    rnd, block = site_round(st, good, "select", "s0", "round.json")
    assert rnd.names == st.names and block["rho"] == 0.01
    # the learner swaps s1's sealing key for one it holds, and signs the round: refused at s0
    from marg.protocols.keys import public_bytes
    from marg.protocols.signing import b64

    members = [dict(m) for m in good["members"]]
    members[1]["seal_pub"] = b64(public_bytes(x25519.X25519PrivateKey.generate().public_key()))
    body = {k: v for k, v in good.items() if k not in ("key_id", "signature")}
    bad = sign_document({**body, "members": members}, keys["learner"][0])
    with pytest.raises(RefusedError, match="sealing key"):
        site_round(st, bad, "select", "s0", "round.json")
    # a round of another study, or another round's name, is refused (replayed)
    with pytest.raises(RefusedError, match="replayed"):
        site_round(st, good, "measure", "s0", "round.json")
    # a round signed by anyone but the study's learner
    with pytest.raises(RefusedError):
        site_round(st, sign_document(body, keys["s2"][0]), "select", "s0", "round.json")
    # too few sites left for the threshold: the learner cannot open the round
    with pytest.raises(RefusedError, match="threshold"):
        round_doc(st, "measure", ["s0"], keys["learner"][0], {"cliques": [], "rho": 0.01})
