"""Certificates of fitted rules: an upper bound on a rule's error, from the released tables or held-out rows.

:mod:`.certify` (a model's own rule over the box of a Summary), :mod:`.certify_labels` (W(h) of a
minimax classifier's deterministic rule), :mod:`.choice_certificates` (one confidence event for a
choice among candidates; each candidate's own certificate), :mod:`.selection_certificate` (a rule
on features selected from the same patients), :mod:`.holdout_certificate` and :mod:`.holdout_plan`
(the bound from held-out rows, and its plan before anything is spent), :mod:`.sample_size` (how
many patients a non-trivial certificate would need). The value they return is
:class:`marg.learners.core.certificate.Certificate`; the LPs they solve are the engine's
(:mod:`marg.learners.minimax`).
"""
