"""The classifiers fitted from a Summary, each an estimator certifying its own rule.

:mod:`.mrc` (the 0-1 minimax risk classifier, first-order features), :mod:`.dcc` and
:mod:`.dcc_hinge` (the pairwise classifier and its hinge-loss formulation), :mod:`.minimax_rules`
(the fitted state and two rules every minimax classifier shares, boost's vote included),
:mod:`.naive_bayes`, :mod:`.renyi` with :mod:`.renyi_problem` and :mod:`.renyi_summary` (the Rényi
classifier, its least-squares problem, what it reads from a Summary) and :mod:`.label_only` (one
class for every row). Boost's vote has a package of its own (:mod:`marg.learners.boost`).
"""
