"""The minimax engine: one 0-1 minimax problem, one fit — a formulation and a search — and its one certificate.

:mod:`.from_summary` (``problem_from``: the problem from a Summary), :mod:`.problem` and
:mod:`.layout` (the problem, its label subsets, μ's layout), :mod:`.fit` (``fit(problem,
formulation, search)``: build, solve, search, finish, certificate; the searches ``One``,
``Columns``, ``Greedy``), :mod:`.formulations` (the registry: what each formulation accepts),
:mod:`.first_order` and :mod:`.pair_formulations` (the formulations, registered there),
:mod:`.lp_model` (the one LP model), :mod:`.separation` and :mod:`.forest` (exact maximisation
over the domain), :mod:`.formulation`, :mod:`.forest_lp`, :mod:`.local`, :mod:`.rows` and
:mod:`.forest_drivers` (the LP models the formulations build), :mod:`.generation` (the one
column- and row-generation loop), :mod:`.pricing`, :mod:`.empty_cells`, :mod:`.gauge`,
:mod:`.worst_case`, :mod:`.solution` (the one result type) and :mod:`.rules` (the fitted
classifier's two rules); :mod:`.drivers` names the first-order fit.
"""
