"""Sparse voting over Boolean monomials (the boosting seed, Goldberg 2010): the MMA pricing engine.

``literals`` (tests and monomials from the codebook), ``points`` (weighted points, the
bounds), ``oracles`` (rows or marginal tables → points), ``cost`` (the code length c(k)),
``mma`` (the branch and bound).
"""
