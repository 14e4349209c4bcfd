"""The learner's side of a two-round study: select, then measure, then the final model.

:mod:`.two_round` (what round 2 measures, its budget, the model on what it measured),
:mod:`.unselected` (the final rule against the larger class on evidence that did not select its
features), :mod:`.final_choice` (the final model among the best on the evaluation counts).
"""
