"""Fuzzing every parser a user can feed a file to, 10⁵ inputs in all (slow): model files,
codebooks, request and round files, CSV data, and bundles — only the project's own one-line
errors (MargError), never another exception or a traceback.

The JSON documents' inputs: a tenth drawn by hypothesis (its edge cases, and a shrunk example on
failure), the other nine tenths by a seeded generator of the same family
(:func:`tests.helpers.fuzzing.random_json`), about 50 times cheaper per input than hypothesis'
draw (which was 89 % of these tests' CPU); a failing seeded input is named in the failure."""

from __future__ import annotations

import json
import os
import random
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from marg.errors import MargError
from marg.learners.estimator.model import Model
from marg.learners.classifiers.mrc import MRC
from marg.marginals.data.codebook import Codebook
from marg.marginals.data.encoding import encode_file
from marg.marginals.request import read_request
from marg.marginals.summary import Summary
from marg.protocols.bundle import Bundle
from marg.protocols.rounds import read_round
from tests.conftest import random_codebook, random_rows
from tests.helpers.fuzzing import (DELETE as _DELETE, json_values, mutate as _mutate, paths as _paths, random_json,
                                   seeded)

N = int(os.environ.get("MARG_FUZZ_N", "20000"))  # per test: 5 × N + N/8 ≈ 1.0·10⁵ inputs
FUZZ = settings(max_examples=N, deadline=None, suppress_health_check=list(HealthCheck), database=None)
HYPOTHESIS_SHARE = settings(max_examples=max(1, N // 10), deadline=None, suppress_health_check=list(HealthCheck),
                            database=None)
SEEDED = N - max(1, N // 10)  # the rest of a JSON test's N inputs: the seeded generator's

RNG = np.random.default_rng(2026)
CB = random_codebook(RNG, n_features=3, numeric=1)
X, Y = random_rows(RNG, CB, 200)
MODEL = Model("mrc", CB, MRC().fit(Summary.from_rows(CB, X, Y)), {"n": 200}).to_dict()
MODEL = json.loads(json.dumps(MODEL, default=float))
BUNDLE = Bundle.build(CB, Summary.from_rows(CB, X, Y).tables, site="north", n_rows=200).to_bytes()

MODEL_PATHS = [p for p in _paths(MODEL) if p]
CB_DICT = CB.to_dict()
CB_PATHS = [p for p in _paths(CB_DICT) if p]


@pytest.fixture(autouse=True, scope="module")
def _bounded_memory():
    """A runaway allocation fails this module's tests (MemoryError) instead of the machine."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (8 << 30, hard))
    yield
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _only_marg_errors(fn, *a):
    try:
        fn(*a)
    except MargError as exc:
        assert "\n" not in str(exc), str(exc)


def _seeded(seed: int, check: Callable[[Any], None], make: Callable[[random.Random], Any]) -> None:
    seeded(seed, check, make, SEEDED)


def _field_value(rng: random.Random, paths: list) -> tuple[int, Any]:
    return rng.randrange(len(paths)), _DELETE if rng.random() < 0.1 else random_json(rng)


@pytest.mark.slow
@HYPOTHESIS_SHARE
@given(st.integers(0, len(MODEL_PATHS) - 1), json_values | st.just(_DELETE))
def test_model_files(k, value):
    _only_marg_errors(Model.from_dict, _mutate(MODEL, MODEL_PATHS[k], value))


@pytest.mark.slow
def test_model_files_seeded():
    _seeded(6401, lambda kv: _only_marg_errors(Model.from_dict, _mutate(MODEL, MODEL_PATHS[kv[0]], kv[1])),
            lambda rng: _field_value(rng, MODEL_PATHS))


@pytest.mark.slow
@HYPOTHESIS_SHARE
@given(st.integers(0, len(CB_PATHS) - 1), json_values | st.just(_DELETE))
def test_codebooks(k, value):
    _only_marg_errors(Codebook.from_dict, _mutate(CB_DICT, CB_PATHS[k], value))


@pytest.mark.slow
def test_codebooks_seeded():
    _seeded(6402, lambda kv: _only_marg_errors(Codebook.from_dict, _mutate(CB_DICT, CB_PATHS[kv[0]], kv[1])),
            lambda rng: _field_value(rng, CB_PATHS))


@pytest.mark.slow
@FUZZ
@given(st.binary(max_size=300))
def test_bundles_random_bytes(data):
    _only_marg_errors(Bundle.from_bytes, BUNDLE[:64] + data)


@pytest.mark.slow
@FUZZ
@given(st.integers(0, len(BUNDLE) - 1), st.integers(0, 255))
def test_bundles_one_byte_changed(i, b):
    raw = bytearray(BUNDLE)
    raw[i] = b
    _only_marg_errors(Bundle.from_bytes, bytes(raw))


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


def _request_or_round(p, kind: str, value: Any) -> None:
    p.write_text(json.dumps({"format": kind, "version": 1, "x": value,
                             "id": value, "pairs": value, "features": value, "fingerprint": value}))
    _only_marg_errors(read_request, p)
    _only_marg_errors(read_round, p)


@pytest.mark.slow
@HYPOTHESIS_SHARE
@given(json_values)
def test_request_and_round_files(scratch, value):
    _request_or_round(scratch / "f.json", random.choice(["marg-request", "marg-round"]), value)


@pytest.mark.slow
def test_request_and_round_files_seeded(scratch):
    _seeded(6403, lambda kv: _request_or_round(scratch / "f.json", *kv),
            lambda rng: (rng.choice(["marg-request", "marg-round"]), random_json(rng)))


@pytest.mark.slow
@settings(max_examples=N // 8, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(st.lists(st.lists(st.text(alphabet='abl0123456789.,-"\n eE', max_size=6), min_size=1, max_size=6),
                min_size=0, max_size=6))
def test_csv_data(scratch, rows):
    header = ",".join(f.name for f in CB.features) + "," + CB.label.name
    p = scratch / "d.csv"
    p.write_text(header + "\n" + "\n".join(",".join(r) for r in rows) + "\n")
    _only_marg_errors(encode_file, p, CB)
