"""Marginal count tables: what a table is, counting them from coded rows, and the noise record each carries.

It owns :class:`~.tables.MarginalTable` and the plan of which cliques a release holds (:mod:`.tables`),
counting every table of a plan in one pass (:mod:`.counting`), the record of the noise a released table
carries (:mod:`.noise`) with the noise distributions it names (:mod:`.noise_kinds`) and OpenDP's
conversions between privacy definitions that state their cost (:mod:`.dp_conversions`). Of
``marginals`` it imports only the sibling :mod:`marg.marginals.data` (the codebook and the coded rows),
so the sources (``marginals/sources``) read it sideways and nothing in it reads up.
"""
