"""A model's confusion matrix on a site's held-out rows, counted where the rows are.

``marg export --evaluate`` (:func:`marg.protocols.evaluation.confusion_on_holdout`) predicts the
rows the export held out — within the privacy unit's bound — and releases one table of the
result. :func:`held_confusion` reads any Source the way the export does
(:func:`~marg.marginals.privacy_unit.bounded_batches`: the same split, the same rows kept); a
source that runs code where its rows are (Spark: ``source.partitions``) runs
:func:`partition_confusion` on each of its partitions instead — after the export's shuffle
(:func:`~marg.marginals.privacy_unit.shuffle_key`) when a unit's bound or a holdout by content
decides on groups of rows — and only each partition's K × K matrix and tallies come back. The
matrix is N[predicted, y]; matrices and tallies add up over partitions, so the result is the local
path's to the count. ``predict`` is a picklable function of a chunk's codes ``X`` (a model's
``predict``): it travels to the executors, which are the site's own cluster.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

import numpy as np

from .holdout import Splitter, select
from .privacy_unit import RowBound, add_partition_tallies, bounded_batches, shuffle_key


def _confusion(source: Any, codebook: Any, predict: Callable[[Any], Any], split: Splitter, bound: RowBound | None,
               progress: Callable[[int], None] | None = None) -> np.ndarray:
    """N[predicted, y] (K, K) over the rows of ``source`` that ``split`` holds out and ``bound`` keeps."""
    K = codebook.n_classes
    conf = np.zeros((K, K), dtype=np.int64)
    for enc, held, counted in bounded_batches(source, codebook, bound, split, progress=progress):
        mask = held & counted
        if not mask.any():
            continue
        part = select(enc, mask)
        pred = np.asarray(predict(part.X), dtype=np.int64)
        np.add.at(conf, (pred, part.y), 1)
    return conf


def partition_confusion(rows: Any, *, codebook: Any, predict: Callable[[Any], Any], split: Splitter,
                        unit: Any) -> dict[str, Any]:
    """:func:`held_confusion`'s steps on one partition (all rows of a unit, or of a content, in it): its
    matrix and the tallies of its split (rows, held, fingerprint) and bound (units, over, dropped, largest)."""
    split = Splitter(split.spec, split.key)  # a fresh tally for this partition
    bound = RowBound(unit) if unit is not None and unit.column is not None else None
    conf = _confusion(rows, codebook, predict, split, bound)
    return {"conf": conf, "split": (split.rows, split.held, split.fingerprint),
            "bound": (bound.units, bound.over, bound.dropped, bound.largest) if bound is not None else None}


def held_confusion(source: Any, codebook: Any, predict: Callable[[Any], Any], split: Splitter, unit: Any = None,
                   progress: Callable[[int], None] | None = None) -> tuple[np.ndarray, RowBound | None]:
    """N[predicted, y] (K, K) of ``predict`` on the rows of ``source`` held out by ``split`` and kept by
    ``unit``'s bound (a :class:`~marg.marginals.privacy_unit.PrivacyUnit` with a column, or None), and the bound.

    ``split`` keeps the tally of every row seen (rows, held, fingerprint), as on the local path: the caller
    compares it with the export's. Partitioned sources run :func:`partition_confusion` where the rows are.
    """
    bound = RowBound(unit) if unit is not None and unit.column is not None else None
    if not hasattr(source, "partitions"):
        return _confusion(source, codebook, predict, split, bound, progress), bound
    ucol = bound.unit.column if bound is not None else None
    hcol = split.spec.id_column
    columns = list(dict.fromkeys(codebook.feature_names + [codebook.label.name] + [c for c in (ucol, hcol) if c]))
    shuffle = partial(shuffle_key, codebook=codebook, unit_column=ucol) if ucol is not None or hcol is None else None
    work = partial(partition_confusion, codebook=codebook, predict=predict, split=Splitter(split.spec, split.key),
                   unit=unit)
    K = codebook.n_classes
    conf = np.zeros((K, K), dtype=np.int64)
    for part in source.partitions(columns, work, shuffle, reread=bound is not None):
        conf += part["conf"]
        add_partition_tallies(part, split, bound)
    if progress is not None:
        progress(split.rows)
    return conf, bound
