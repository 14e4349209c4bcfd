"""The study as one composition (issue 44): the selection travels with the Summary, so every estimator's own fit
certifies over a box that covers it — ``fit`` and ``learn`` give the same certificate on a study's summary.

What is checked, for every learner (mrc, dcc, nb, renyi, prior, auto):

- on exact tables whose round-1 records say the features were selected among many candidates, the estimator's
  own ``fit(S)`` and ``learn(S, name)`` give the same certificate, and for an additive rule it is W(h) over the
  box of every candidate's cells at 1 − α/2 — strictly above the certificate the same rule gets when the summary
  does not say it was selected (the test fails if the fit ignores the selection);
- on a DP study made by the library itself (round 1 by ``export_site(..., ReleaseRequest(epsilon=1.0), ...)``,
  round 2 by its signed request), three demo sites of 300 rows, ``fit`` and ``learn`` agree for every learner.
"""

from __future__ import annotations

import numpy as np
import pytest

from marg.errors import InputError

from marg.learners.estimator.base import estimator_class
from marg.learners.learn import learn
from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label
from marg.marginals.summary import Summary
from tests.helpers.study import round1_records

LEARNERS = ("mrc", "dcc", "nb", "renyi", "prior", "auto")
CANDIDATES, CELLS = 60, 120  # round 1 selected 3 of 60 binary candidates: 120 cells, the summary holds 6



@pytest.fixture(scope="module")
def selected():
    """3 binary features measured after the sites agreed on them, 2 of them carrying the label; 2,400 rows, exact."""
    rng = np.random.default_rng(11)
    n = 2400
    cb = Codebook(features=tuple(CategoricalFeature(f"f{j}", ("0", "1")) for j in range(3)),
                  label=Label("y", ("a", "b")))
    y = rng.integers(0, 2, n)
    X = rng.integers(0, 2, (n, 3))
    for j, p in ((0, 0.85), (1, 0.75)):
        X[:, j] = np.where(rng.random(n) < p, y, 1 - y)
    tables = Summary.from_rows(cb, X.astype(np.float64), y, stats="all").tables
    records = round1_records([["f0", "f1", "f2"]] * 3, CANDIDATES, CELLS)
    return Summary(cb, tables, provenance=records), Summary(cb, tables)


@pytest.mark.parametrize("name", LEARNERS)
def test_fit_and_learn_give_the_same_certificate_on_a_study_summary(selected, name):
    S, plain = selected
    assert S.selection is not None and S.selection.cells == CELLS and plain.selection is None
    est = estimator_class(name)().fit(S)
    fitted = est.model_estimator()
    model = learn(S, name).model
    assert model.learner == fitted.learner  # the sites agreed: the rule, not the larger class
    assert fitted.certificate_.value == pytest.approx(model.estimator.certificate_.value, abs=1e-12)
    assert fitted.certificate_.coverage == model.estimator.certificate_.coverage == 0.95
    if name in ("mrc", "nb", "renyi"):  # an additive rule: W(h) over every candidate's box at 1 − α/2
        from marg.learners.certification.certify import certify

        ref = certify(fitted, S, coverage=0.975, structure="first", n_intervals=2 * CELLS)
        assert fitted.certificate_.value == pytest.approx(ref.value, abs=1e-12)
        own = estimator_class(name)().fit(plain).certificate_.value  # the same rule, its selection not said
        assert fitted.certificate_.value > own + 1e-3 and fitted.certificate_.value < 0.5
    if name == "auto":  # the study's choice comes with the summary (two_round.study_choice): prefer accuracy
        assert est.prefer_ == "accuracy" and model.info["report"]["auto_prefer"] == "accuracy"


@pytest.fixture(scope="module")
def dp_study(tmp_path_factory):
    """Three demo sites of 300 rows through both rounds, exported by the library (the kind decided by it)."""
    import contextlib

    from marg.marginals.synthetic import SITES, demo_codebook, generate, write_csv
    from marg.protocols.export import export_site
    from marg.protocols.load import load_summary
    from marg.protocols.release_request import Delivery, ReleaseRequest
    from tests.helpers.console import run

    tmp = tmp_path_factory.mktemp("study")
    cb = demo_codebook()
    data = {}
    for k, prof in enumerate(SITES):
        data[prof.name] = tmp / f"{prof.name}.csv"
        write_csv(data[prof.name], generate(300, prof, seed=31 + k), slice(0, 300))
    r1 = [export_site(f, cb, site, tmp / f"{site}.r1", ReleaseRequest(epsilon=1.0, plan_rows=[300], plan_sites=3),
                      Delivery(ledger_dir=tmp / f"ledger-{site}")).path for site, f in data.items()]
    keys, trust = tmp / "keys", tmp / "trust"
    with contextlib.chdir(tmp):
        assert run("keys", "init", "--site", "learner", "--dir", keys, "--role", "learner").exit_code == 0
        trust.mkdir()
        (trust / "learner.sign.pub").write_bytes((keys / "learner.sign.pub").read_bytes())
        r = run("request", *r1, "--out", tmp / "req.json", "--allow-unsigned", "--sign-key", keys / "learner.sign.key")
        assert r.exit_code == 0, r.output
    r2 = [export_site(f, cb, site, tmp / f"{site}.r2", ReleaseRequest(study_request=tmp / "req.json", trust=trust),
                      Delivery(ledger_dir=tmp / f"ledger-{site}")).path for site, f in data.items()]
    return load_summary([*r1, *r2], allow_unsigned=True)


@pytest.mark.parametrize("name", LEARNERS)
def test_fit_and_learn_agree_on_a_dp_study_the_library_ran(dp_study, name):
    S = dp_study
    assert S.selection is not None and len(S.selection.rounds) == 3 and S.is_noisy
    try:
        fitted = estimator_class(name)().fit(S).model_estimator()
    except InputError as refused:  # the study's noisy round 1 asked for no pair tables: both routes refuse alike
        with pytest.raises(InputError) as also:
            learn(S, name)
        assert str(also.value) == str(refused)
        return
    model = learn(S, name).model
    if model.learner != fitted.learner:  # nothing above the noise: the study's model is the larger class,
        assert model.learner == "prior"  # certified as the label-only rule fitted on S certifies itself
        fitted = estimator_class("prior")().fit(S)
    assert fitted.certificate_.value == pytest.approx(model.estimator.certificate_.value, abs=1e-12)
