"""What every learner is: the estimator base and the learner registry (:mod:`.base`), and model files (:mod:`.model`).

:class:`.base.MarginalEstimator` holds parameters, fitted state, the certificate step (it asks
:mod:`marg.learners.certification`), the report and persistence; :data:`.base.LEARNERS` names each
registered learner's module by string, so importing the base imports no learner.
"""
