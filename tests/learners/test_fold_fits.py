"""Work the automatic choice's fits share or skip leaves every model as it was.

- ``fit_predictor`` (the leave-one-site-out folds' fit) is ``fit`` without the certificate: the same
  rule (μ, z, intercept) and the same labels on every cell of the domain, and no W(h) LP is run.
- DCC fits on one Summary share the pair weights, the problem and, for the same parameters and
  search, the LP's solution: a fit after another on the same Summary is the fit on a fresh copy.
- The console script runs BLAS on one thread unless the environment says otherwise.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest

from marg.learners.classifiers.dcc import DCC
from marg.learners.classifiers.mrc import MRC
from marg.learners.classifiers.naive_bayes import NaiveBayes
from marg.learners.classifiers.renyi import RenyiClassifier
from marg.marginals.privacy import privatize
from marg.marginals.summary import Summary
from tests.helpers.tan import three_sites


@pytest.fixture(scope="module")
def noisy():
    """A noisy Summary that is the same on every run: OpenDP's noise is not seeded, so the
    released tables keep their noise records (ε = 1) and take a seeded draw at that scale."""
    cb, exact, _ = three_sites(np.random.default_rng(7), (400, 300, 250))
    released, _ = privatize(list(exact.tables), epsilon=1.0, codebook=cb)
    draw = np.random.default_rng(8)
    tables = [replace(r, counts=e.counts + np.rint(draw.laplace(0.0, r.noise.scale,
                                                                e.counts.shape)).astype(e.counts.dtype))
              for e, r in zip(exact.tables, released)]
    return Summary(cb, tables)


def _domain(summary):
    sizes = [summary.codebook.attribute_size(f.name) for f in summary.codebook.features]
    return np.array(list(itertools.product(*[range(m) for m in sizes])), dtype=float)


def _copy(summary):
    """An equal Summary that is another object (nothing shared with ``summary``'s fits)."""
    return Summary(summary.codebook, list(summary.tables), postprocess=False)


@pytest.mark.parametrize("make", [MRC, lambda: DCC(edge_weight="label"), lambda: DCC(edge_weight="cmi"),
                                  RenyiClassifier],
                         ids=["mrc", "dcc-label", "dcc-cmi", "renyi"])
def test_fit_predictor_is_the_fit_without_its_certificate(make, noisy, monkeypatch):
    X = _domain(noisy)
    full = make().fit(_copy(noisy))
    import marg.learners.certification.certify as certify_module
    import marg.learners.certification.certify_labels as labels_module

    def refuse(*a, **k):
        raise AssertionError("a certificate LP ran in fit_predictor")

    with monkeypatch.context() as m:
        m.setattr(labels_module, "labels_certificate", refuse)
        m.setattr("marg.learners.classifiers.renyi.certify", refuse)
        m.setattr(certify_module, "certify", refuse)
        rule = make().fit_predictor(_copy(noisy))
    np.testing.assert_array_equal(rule.predict(X), full.predict(X))
    np.testing.assert_array_equal(rule.predict_proba(X), full.predict_proba(X))
    if isinstance(full, RenyiClassifier):
        np.testing.assert_array_equal(rule.z_, full.z_)
        np.testing.assert_array_equal(rule.intercept_, full.intercept_)
        assert rule.certificate_ == full.training_bound_  # 2γ, the bound the fit had on the way
    else:
        np.testing.assert_array_equal(rule.mu_, full.mu_)
        assert rule.certificate_ == full.minimax_risk_  # R*, not the labels' W(h)
        assert full.certificate_.kind == "W(h)"
    assert not hasattr(rule, "_predictor_only")  # the next fit of the same estimator certifies again
    again = rule.fit(_copy(noisy))
    assert again.certificate_.value == full.certificate_.value


def test_a_learner_without_its_own_fit_predictor_fits(noisy):
    X = _domain(noisy)
    a, b = NaiveBayes(certify="bound").fit(noisy), NaiveBayes(certify="bound").fit_predictor(noisy)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    assert a.certificate_.value == b.certificate_.value


def test_dcc_fits_on_one_summary_are_the_fits_on_fresh_copies(noisy, monkeypatch):
    X = _domain(noisy)
    fresh = {w: DCC(edge_weight=w).fit(_copy(noisy)) for w in ("label", "cmi")}
    assert fresh["label"].edges_ != fresh["cmi"].edges_  # the two weights choose different forests here
    shared = _copy(noisy)
    for w in ("label", "cmi", "label"):
        d = DCC(edge_weight=w).fit(shared)
        assert d.edges_ == fresh[w].edges_
        np.testing.assert_array_equal(d.mu_, fresh[w].mu_)
        np.testing.assert_array_equal(d.predict(X), fresh[w].predict(X))
        assert d.certificate_.value == fresh[w].certificate_.value
        assert d.edge_weights_ == fresh[w].edge_weights_


def test_the_same_dcc_lp_on_one_summary_is_solved_once(noisy, monkeypatch):
    import marg.learners.classifiers.dcc as dcc_module

    solves = []
    real = dcc_module.fit
    monkeypatch.setattr(dcc_module, "fit", lambda *a, **k: solves.append(1) or real(*a, **k))
    s = _copy(noisy)
    a, b = DCC().fit(s), DCC().fit_predictor(s)
    assert len(solves) == 1
    np.testing.assert_array_equal(a.mu_, b.mu_)
    DCC(s=0.5).fit(s)  # another box: another LP
    DCC().fit(_copy(noisy))  # another Summary: nothing shared
    assert len(solves) == 3
    seen = []
    DCC(callback=seen.append).fit(s)  # a progress callback sees its own solve
    assert len(solves) == 4


def test_the_console_script_runs_blas_on_one_thread_unless_told(monkeypatch):
    import marg.cli.main as main_module

    got = {}
    monkeypatch.setattr(main_module, "app", lambda prog_name: got.update({v: main_module.os.environ.get(v)
                                                                        for v in main_module.BLAS_THREADS}))
    for v in main_module.BLAS_THREADS:
        monkeypatch.delenv(v, raising=False)
    main_module.main()
    assert got == {v: "1" for v in main_module.BLAS_THREADS}
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    main_module.main()
    assert got["OPENBLAS_NUM_THREADS"] == "2"


def test_what_dcc_fits_share_goes_with_the_summary(noisy):
    import gc
    import weakref

    from marg.learners.classifiers.dcc import _SHARED

    s = _copy(noisy)
    model = DCC().fit(s)
    gone = weakref.ref(s)
    assert s in _SHARED
    del s
    gc.collect()
    assert gone() is None  # nothing the fit kept (the model, the shared solution) holds the Summary
    assert model.predict(_domain(noisy)).shape == (len(_domain(noisy)),)
