"""The minimax engine: one 0-1 minimax problem, its separators, LP formulations and drivers.

:mod:`.problem` (the problem and its label subsets), :mod:`.lp_model` (the one LP model: ν, the
μ columns, the solve and its read-outs), :mod:`.separation` and :mod:`.forest` (exact
maximisation over the domain), :mod:`.formulation`, :mod:`.forest_lp`, :mod:`.local` and
:mod:`.rows` (writing the maximum as rows on the model), :mod:`.formulations` (which
statistics each formulation accepts), :mod:`.generation` (the one column- and row-generation
driver), :mod:`.drivers` and :mod:`.forest_drivers` (its adapters: one solve, column generation,
greedy structure), :mod:`.pricing`,
:mod:`.empty_cells`, :mod:`.gauge`, :mod:`.worst_case`, :mod:`.solution` and
:mod:`.rules` (the fitted classifier's two rules).
"""
