"""Rows under the study's codebook: the schema, reading files and frames, coding values into integer codes.

It owns the codebook (:mod:`.codebook`, with its OMOP CDM definitions in :mod:`.omop`), the readers of
tabular files (:mod:`.io`) and frames (:mod:`.frames`), the one text of a value (:mod:`.value_text`,
:mod:`.arrays`) and the rules that code a column, a chunk and a file (:mod:`.column_codes`,
:mod:`.batch_codes`, :mod:`.encoding`). It sits below every other module of ``marginals``: it imports
nothing of ``marginals`` outside itself, so the sources (``marginals/sources``) and the counting
(``marginals/counts``) read it sideways.
"""
