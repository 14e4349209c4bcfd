"""Feature maps and the statistics learners derive from a Summary's tables.

:mod:`.blocks` (node blocks, the first-order map), :mod:`.pairwise` (nodes plus pair
indicators), :mod:`.statistics` (τ, its sample std and the noise std for a map),
:mod:`.quadratic` (the Rényi second moments Q and d).
"""
