"""marg learn on tiny DP sites: tables whose released label counts sum to n ≤ 0 get the trivial certificate, not a
crash."""

from __future__ import annotations

import numpy as np

from marg.learners.certification.certify import certify
from marg.learners.classifiers.naive_bayes import NaiveBayes
from marg.marginals.data.codebook import CategoricalFeature, Codebook, Label
from marg.marginals.counts.noise import NoiseRecord
from marg.marginals.summary import Summary
from marg.marginals.counts.tables import MarginalTable


def test_noisy_tables_summing_to_a_negative_count_give_the_trivial_certificate():
    cb = Codebook(features=(CategoricalFeature("a", ("0", "1")), CategoricalFeature("b", ("0", "1"))),
                  label=Label("y", ("no", "yes")))
    rec = NoiseRecord(mechanism="gaussian", scale=40.0, std=40.0, epsilon=0.1, delta=1e-6, rho=0.0003)
    tables = [MarginalTable(("y",), np.array([-30, -12]), rec),
              MarginalTable(("a", "y"), np.array([[25, -3], [4, 9]]), rec),
              MarginalTable(("b", "y"), np.array([[-8, 14], [30, 2]]), rec)]
    s = Summary(cb, tables)  # post-processed: non-negative and consistent
    assert s.n > 0
    est = NaiveBayes().fit(s)
    cert = certify(est, s)
    assert cert.value == 1.0 and "admit no interval" in cert.note and "-42" in cert.note
