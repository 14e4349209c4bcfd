"""The values every learner shares, below the engine and the estimators: the Certificate type a model
carries (:mod:`.certificate`) and the parameter constraints an estimator declares (:mod:`.params`).

Both import nothing of learners, so the modules that compute certificates (:mod:`marg.learners.certification`)
and the estimator base that asks them (:mod:`marg.learners.estimator`) share them without a cycle.
"""
