"""Fuzzing the trust layer's parsers, ~10⁵ inputs in all (slow): ledger files, checkpoints, site
configurations, secure-aggregation documents (round, upload, request, reveal), signed model
records, sealed files and Parquet data — only the project's own one-line errors (MargError)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519, x25519
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from marg.errors import MargError
from marg.marginals.accounting import PrivacyCost
from marg.marginals.summary import Summary
from marg.protocols import keys as K
from marg.protocols.pinning import PinnedKeys
from marg.protocols.trust_store import TrustStore
from marg.protocols.ledger import Ledger
from marg.protocols.ledger_state import parse_checkpoint
from marg.protocols.ledger_verify import verify_ledger_bytes
from marg.protocols.sealing import open_sealed, seal
from marg.protocols.secagg_round import (
    finish,
    make_request,
    make_reveal,
    make_upload,
    parse_request,
    parse_round,
    parse_upload,
    start_round,
)
from marg.protocols.site import SiteConfig, init_site
from tests.conftest import random_codebook, random_rows
from tests.helpers.fuzzing import json_values, mutate as _mutate, paths as _paths, random_json, seeded as _seeded

N = int(os.environ.get("MARG_FUZZ_N", "8000"))  # per test: ~4.2·10⁴ inputs here, ~1.5·10⁵ with test_fuzz_parsers
FUZZ = settings(max_examples=N, deadline=None, suppress_health_check=list(HealthCheck), database=None)
# The JSON documents' tests: a tenth of their N inputs from hypothesis, the rest from the seeded generator
# (tests/marg/test_fuzz_parsers.py says why).
HYPOTHESIS_SHARE = settings(max_examples=max(1, N // 10), deadline=None, suppress_health_check=list(HealthCheck),
                            database=None)
SEEDED = N - max(1, N // 10)


def _only_marg_errors(fn, *a):
    try:
        return fn(*a)
    except MargError as exc:
        assert "\n" not in str(exc), str(exc)
    return None


# ---------------------------------------------------------------------------------------
# a ledger, its checkpoint and a site configuration
# ---------------------------------------------------------------------------------------
WORK = Path(tempfile.mkdtemp(prefix="marg-fuzz-trust-"))
KF = K.generate_keys("north", WORK / "keys")
SK = K.load_signing_key(KF.sign_key)
CFG = init_site("north", KF.sign_key, SK, WORK / "ledger", home=WORK / "home")
_led = Ledger(CFG.ledger, site=CFG)
_led.set_cap(PrivacyCost(epsilon=5.0), SK, "north")
for _i in range(3):
    _led.append(bundle_digest=f"{_i:064x}", site="north", statistics=[{"name": "N[a,y]", "clique": ["a", "y"],
                "shape": [2, 2], "kind": "counts", "mechanism": "laplace", "std": 1.0}], cost=PrivacyCost(epsilon=0.5),
                private_key=SK, round=f"r{_i}", exact={"codebook": "x", "m:[\"y\"]": "ab"} if _i == 0 else None)
LEDGER = (CFG.ledger / "ledger.jsonl").read_bytes()
CHECKPOINT = json.loads((CFG.ledger / "checkpoint.json").read_text())
SITE = json.loads((WORK / "home" / "site.json").read_text())
KEYS = {K.key_id(SK): SK.public_key()}
LINES = LEDGER.split(b"\n")[:-1]
ENTRY = json.loads(LINES[1])


@pytest.mark.slow
@FUZZ
@given(st.integers(0, len(LEDGER) - 1), st.integers(0, 255), st.binary(max_size=40))
def test_ledger_files_changed_bytes(i, b, tail):
    data = bytearray(LEDGER)
    data[i] = b
    rep = verify_ledger_bytes(bytes(data) + tail, KEYS)
    assert "\n" not in rep.message()
    if rep.ok:  # what verifies is the original chain
        assert LEDGER.startswith(b"\n".join(bytes(data).split(b"\n")[: rep.n_entries]))


ENTRY_PATHS = [q for q in _paths(ENTRY) if q]


@pytest.mark.slow
@HYPOTHESIS_SHARE
@given(st.sampled_from(ENTRY_PATHS), json_values | st.just(None))
def test_ledger_entry_fields(path, value):
    _ledger_entry(path, value)


@pytest.mark.slow
def test_ledger_entry_fields_seeded():
    _seeded(6411, lambda pv: _ledger_entry(*pv), lambda rng: (rng.choice(ENTRY_PATHS), random_json(rng)), SEEDED)


def _ledger_entry(path, value):
    e = _mutate(ENTRY, path, value)
    try:
        from marg._util import canonical_json

        line = canonical_json(e)
    except (ValueError, TypeError):
        return
    rep = verify_ledger_bytes(b"\n".join([LINES[0], line, *LINES[2:]]) + b"\n", KEYS)
    assert "\n" not in rep.message()
    assert not rep.ok or line == LINES[1]


CONFIG_PATHS = [q for q in _paths(CHECKPOINT) if q] + [q for q in _paths(SITE) if q]


@pytest.mark.slow
@HYPOTHESIS_SHARE
@given(st.sampled_from(CONFIG_PATHS), json_values | st.just(None), st.booleans())
def test_checkpoints_and_site_configurations(path, value, which):
    _checkpoint_or_site(path, value, which)


@pytest.mark.slow
def test_checkpoints_and_site_configurations_seeded():
    _seeded(6412, lambda a: _checkpoint_or_site(*a),
            lambda rng: (rng.choice(CONFIG_PATHS), random_json(rng), rng.random() < 0.5), SEEDED)


def _checkpoint_or_site(path, value, which):
    from marg._util import canonical_json

    if which:
        try:
            doc = _mutate(CHECKPOINT, path, value)
        except (KeyError, IndexError, TypeError):
            return
        try:
            _only_marg_errors(parse_checkpoint, canonical_json(doc), KEYS, "checkpoint")
        except ValueError:  # NaN/inf: not canonical JSON; the writer never produces it
            pass
        _only_marg_errors(parse_checkpoint, json.dumps(doc).encode(), KEYS, "checkpoint")
        _only_marg_errors(parse_checkpoint, json.dumps(doc).encode(), None, "checkpoint")
    else:
        try:
            doc = _mutate(SITE, path, value)
        except (KeyError, IndexError, TypeError):
            return
        home = WORK / "fz-home"
        home.mkdir(exist_ok=True)
        (home / "site.json").write_text(json.dumps(doc))
        _only_marg_errors(SiteConfig.load, home)


# ---------------------------------------------------------------------------------------
# secure aggregation documents
# ---------------------------------------------------------------------------------------
RNG = np.random.default_rng(18)
CB = random_codebook(RNG, n_features=2)
ROSTER = WORK / "roster"
SITES = ["s1", "s2", "s3"]
SK_S = {}
for _s in SITES + ["learner"]:
    _kf = K.generate_keys(_s, ROSTER)
    SK_S[_s] = (K.load_signing_key(_kf.sign_key), K.load_seal_key(_kf.seal_key))
ROUND = start_round(ROSTER, SITES, CB.fingerprint, SK_S["learner"][0], "learner")
RND = parse_round(ROUND, learner_pub=SK_S["learner"][0].public_key())
TABLES = {s: Summary.from_rows(CB, *random_rows(RNG, CB, 40)).tables for s in SITES}
UPLOADS = {s: make_upload(RND, s, TABLES[s], SK_S[s][1], SK_S[s][0]) for s in SITES[:2]}
PARSED = [parse_upload(UPLOADS[s], RND) for s in SITES[:2]]
REQUEST = make_request(RND, PARSED, SK_S["learner"][0])
REVEALS = [make_reveal(RND, REQUEST, s, SK_S[s][1], SK_S[s][0], members=PinnedKeys.from_dir(ROSTER)) for s in SITES[:2]]
DOCS = {"round": ROUND, "upload": UPLOADS["s1"], "request": REQUEST, "reveal": REVEALS[0]}


def _secagg(kind, doc):
    if kind == "round":
        parse_round(doc, learner_pub=SK_S["learner"][0].public_key())
        parse_round(doc, trust=TrustStore.from_keys({"learner": SK_S["learner"][0].public_key()}))
    elif kind == "upload":
        parse_upload(doc, RND)
    elif kind == "request":
        parse_request(doc, RND)
        make_reveal(RND, doc, "s1", SK_S["s1"][1], SK_S["s1"][0], members=PinnedKeys.from_dir(ROSTER))
    else:
        finish(RND, PARSED, REQUEST, [doc, REVEALS[1]])


@pytest.mark.slow
@HYPOTHESIS_SHARE
@given(st.sampled_from(sorted(DOCS)), st.data())
def test_secure_aggregation_documents(kind, data):
    doc = DOCS[kind]
    path = data.draw(st.sampled_from([q for q in _paths(doc) if q]))
    _secagg_field(kind, path, data.draw(json_values | st.just(None)))


@pytest.mark.slow
def test_secure_aggregation_documents_seeded():
    def make(rng):
        kind = rng.choice(sorted(DOCS))
        return kind, rng.choice([q for q in _paths(DOCS[kind]) if q]), random_json(rng)

    _seeded(6413, lambda a: _secagg_field(*a), make, SEEDED)


def _secagg_field(kind, path, value):
    doc = DOCS[kind]
    try:
        mutated = _mutate(doc, path, value)
    except (KeyError, IndexError, TypeError):
        return
    _only_marg_errors(_secagg, kind, mutated)


# ---------------------------------------------------------------------------------------
# signed model records, sealed files, Parquet data
# ---------------------------------------------------------------------------------------
LEARNER = x25519.X25519PrivateKey.generate()
SEALED = seal(b"marg" * 40, LEARNER.public_key())


@pytest.mark.slow
@HYPOTHESIS_SHARE
@given(json_values, st.integers(0, len(SEALED) - 1), st.integers(0, 255))
def test_model_signature_records_and_sealed_files(value, i, b):
    _signature_and_sealed(value, i, b)


@pytest.mark.slow
def test_model_signature_records_and_sealed_files_seeded():
    _seeded(6414, lambda a: _signature_and_sealed(*a),
            lambda rng: (random_json(rng), rng.randrange(len(SEALED)), rng.randrange(256)), SEEDED)


def _signature_and_sealed(value, i, b):
    from marg.protocols.model_signing import verify_model_file

    p = WORK / "m.json"
    p.write_text(json.dumps({"format": "marg-model", "signature": value}))
    store = TrustStore.from_keys({"learner": ed25519.Ed25519PrivateKey.generate().public_key()})
    _only_marg_errors(verify_model_file, p, store)
    raw = bytearray(SEALED)
    raw[i] = b
    _only_marg_errors(open_sealed, bytes(raw), LEARNER)


@pytest.mark.slow
@settings(max_examples=N // 8, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(st.binary(min_size=0, max_size=400), st.booleans())
def test_parquet_data(data, real_head):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from marg.marginals.data.encoding import encode_file

    p = WORK / "d.parquet"
    if real_head:
        table = pa.table({f.name: ["0", "1"] for f in CB.features} | {CB.label.name: ["c0", "c1"]})
        pq.write_table(table, p)
        raw = bytearray(p.read_bytes())
        for k, byte in enumerate(data[:8]):
            raw[(k * 97 + byte) % len(raw)] = byte
        p.write_bytes(bytes(raw))
    else:
        p.write_bytes(b"PAR1" + data + b"PAR1")
    _only_marg_errors(encode_file, p, CB)
