"""The learners layer: classifiers fitted from a Summary's released tables, each certified, and the choice among them.

Packages, from the bottom up (a package imports only those below it; the lint test checks it):
:mod:`.core` (the Certificate type and parameter constraints), :mod:`.features` (what a learner
reads from a Summary: feature maps, τ, λ, the pair structure), :mod:`.minimax` (the minimax
engine), :mod:`.certification` (certificates of fitted rules: W(h), holdout, after a selection),
:mod:`.estimator` (the estimator base, the learner registry, model files), :mod:`.selection`
(feature selection and screening), :mod:`.classifiers` (MRC, DCC, naive Bayes, Rényi, the
label-only rule), :mod:`.boost` (the monomial vote), :mod:`.choice` (candidates, estimated
errors, the one rule), :mod:`.study` (the learner's side of a two-round study). At this level:
:mod:`.auto` (the automatic choice as an estimator) and :mod:`.learn` (``marg learn`` as a call).
"""
