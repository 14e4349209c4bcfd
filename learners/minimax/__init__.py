"""The minimax engine: one 0-1 minimax problem, one fit — a formulation and a search — and its one certificate.

:mod:`.from_summary` (``problem_from``: the problem from a Summary), :mod:`.problem` and
:mod:`.layout` (the problem, its label subsets, μ's layout), :mod:`.fit` (``fit(problem,
formulation, search)``: build, solve, search, finish, certificate; the searches ``One``,
``Columns``, ``Greedy``), :mod:`.registry` (the formulations and what each accepts),
:mod:`.first_order` and :mod:`.pair_formulations` (the formulations, registered there),
:mod:`.lp_model` (the one LP model), :mod:`.separation` and :mod:`.forest` (exact maximisation
over the domain), :mod:`.first_order_models`, :mod:`.forest_models`, :mod:`.forest_lp`,
:mod:`.local` and :mod:`.rows` (the LP models the formulations build), :mod:`.generation` (the
one column- and row-generation loop), :mod:`.pricing`, :mod:`.empty_cells`, :mod:`.gauge`,
:mod:`.worst_case`, :mod:`.solution` (the one result type), :mod:`.fixed_rule`,
:mod:`.fixed_rule_fit` and :mod:`.fixed_rule_lp` (the worst case of a fixed rule). The engine
imports nothing of learners but :mod:`marg.learners.features`: the estimators on it live in
:mod:`marg.learners.classifiers` and :mod:`marg.learners.boost`.
"""
