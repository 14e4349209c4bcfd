"""Feature selection from a Summary: which features a learner keeps.

:mod:`.select` (robust Rényi group lasso or exact best-M, the entry point), :mod:`.group_lasso`,
:mod:`.gbd` (Generalized Benders Decomposition) and :mod:`.group_norms` (the norms and proximal
maps both use), :mod:`.screening` (rank features by their dependence on the label from first-order
tables, valid under DP noise).
"""
