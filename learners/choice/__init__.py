"""The machinery of the automatic choice among fitted candidates (:class:`marg.learners.auto.AutoLearner` composes it).

:mod:`.candidates` (what a candidate is, the generators that propose them), :mod:`.screened`
(screen-then-learn as a generator), :mod:`.cross_site` and :mod:`.study_bootstrap` (each
candidate's estimated error from count tables), :mod:`.choice_rule` (the one rule that chooses).
"""
