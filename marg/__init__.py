"""marg: privacy-preserving, marginals-only learning.

The installed namespace. The repository keeps its layers at its top and installs them as
``marg.marginals`` (site side: codebook, encoding, counting, noise, summaries),
``marg.protocols`` (bundles, signatures, sealing, ledger, aggregation), ``marg.learners``
(classifiers fitted from summaries) and ``marg.cli`` (the ``marg`` command). Modules at
this level are below every layer: :mod:`marg.errors` and :mod:`marg._util`.
"""

from __future__ import annotations

from pathlib import Path as _Path

__version__ = "0.2.0"

# In a source checkout (``python -m pytest`` or ``python bench/x.py`` from the repository's
# top) the layers sit beside this folder rather than inside it; make them importable as
# ``marg.<layer>`` there too. An installed copy has them inside and skips this.
_top = _Path(__file__).resolve().parent.parent
if not (_Path(__file__).resolve().parent / "learners").is_dir() and (_top / "learners" / "__init__.py").is_file():
    __path__.append(str(_top))  # type: ignore[name-defined]
