"""What a learner reads from a Summary's tables: feature maps, their moments, the box around them, the pair structure.

:mod:`.blocks` (node blocks, the first-order map), :mod:`.pairwise` (nodes plus pair
indicators), :mod:`.statistics` (τ, its sample std and the noise std for a map),
:mod:`.quadratic` (the Rényi second moments Q and d), :mod:`.calibration` (λ, the half-widths
of the box |E_p Φ − τ| ≤ λ), :mod:`.box` (the box as per-table cell bounds, as a model file
records it), :mod:`.structure` (the pair structure: a maximum spanning forest on the pairs'
conditional mutual information).
"""
