"""Issue acceptance on UCI house-votes-84: MRC and Rényi from summaries, 10 random 70/30 splits."""

import numpy as np
import pytest

from marg.learners.classifiers.mrc import MRC
from marg.learners.classifiers.renyi import RenyiClassifier
from marg.marginals.draft import draft_codebook
from marg.marginals.data.encoding import encode_file
from marg.marginals.summary import Summary


@pytest.fixture(scope="module")
def votes(request):
    from tests.conftest import datasets_dir

    p = datasets_dir() / "house-votes-84" / "house-votes-84.tsv.gz"
    if not p.exists():
        pytest.skip(f"dataset not found: {p}")
    cb = draft_codebook(p, "target")
    enc = encode_file(p, cb)
    return cb, enc.X, enc.y


def test_house_votes_errors_and_certificates(votes):
    cb, X, y = votes
    n = len(y)
    err_mrc, err_renyi, covered = [], [], 0
    for seed in range(10):
        idx = np.random.default_rng(seed).permutation(n)
        tr, te = idx[: int(round(0.7 * n))], idx[int(round(0.7 * n)) :]
        s = Summary.from_rows(cb, X[tr], y[tr], stats="all")
        mrc = MRC().fit(s)
        renyi = RenyiClassifier().fit(s)
        e_m = float(np.mean(mrc.predict(X[te]) != y[te]))
        err_mrc.append(e_m)
        err_renyi.append(float(np.mean(renyi.predict(X[te]) != y[te])))
        covered += mrc.worst_case_error_ >= e_m
    assert np.mean(err_mrc) <= 0.06, err_mrc
    assert np.mean(err_renyi) <= 0.06, err_renyi
    assert covered >= 9
