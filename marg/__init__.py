"""marg: privacy-preserving, marginals-only learning.

The installed namespace. The repository keeps its layers at its top and installs them as
``marg.marginals`` (site side: codebook, encoding, counting, noise, summaries),
``marg.protocols`` (bundles, signatures, sealing, ledger, aggregation), ``marg.learners``
(classifiers fitted from summaries) and ``marg.cli`` (the ``marg`` command). Of the modules at
this level, :mod:`marg.errors`, :mod:`marg._util` and :mod:`marg.lp` are below every layer;
:mod:`marg.api`, :mod:`marg.notebook`, :mod:`marg.reports` and :mod:`marg.demo` sit on top of the layers.

For a notebook, ``import marg`` gives the entry points (:mod:`marg.notebook`):
:func:`load_summary` (bundles → verified Summary), :func:`learn` (Summary → certified
Model), :func:`load_model` (a model file, its signature verified), :func:`save_model`,
:func:`model_card`; the estimators (:class:`MRC`, :class:`DCC`, :class:`RenyiClassifier`,
:class:`NaiveBayes`, :class:`BoostVote`) and the :class:`Summary`, :class:`Model`,
:class:`Codebook` and :class:`Certificate` types. They are imported on first use (PEP 562
``__getattr__``), so ``import marg`` — and ``marg --version`` — load none of them.
"""

from __future__ import annotations

from importlib import import_module as _import_module
from pathlib import Path as _Path

__version__ = "0.2.0"

# In a source checkout (``python -m pytest`` or ``python bench/x.py`` from the repository's
# top) the layers sit beside this folder rather than inside it; make them importable as
# ``marg.<layer>`` there too. An installed copy has them inside and skips this.
_top = _Path(__file__).resolve().parent.parent
if not (_Path(__file__).resolve().parent / "learners").is_dir() and (_top / "learners" / "__init__.py").is_file():
    __path__.append(str(_top))  # type: ignore[name-defined]

_LAZY: dict[str, tuple[str, str]] = {
    "load_summary": ("marg.notebook", "load_summary"),
    "learn": ("marg.notebook", "learn"),
    "load_model": ("marg.api", "load_model"),
    "save_model": ("marg.notebook", "save_model"),
    "model_card": ("marg.notebook", "model_card"),
    "MRC": ("marg.learners.classifiers.mrc", "MRC"),
    "DCC": ("marg.learners.classifiers.dcc", "DCC"),
    "RenyiClassifier": ("marg.learners.classifiers.renyi", "RenyiClassifier"),
    "NaiveBayes": ("marg.learners.classifiers.naive_bayes", "NaiveBayes"),
    "BoostVote": ("marg.learners.boost.vote", "BoostVote"),
    "Summary": ("marg.marginals.summary", "Summary"),
    "Model": ("marg.learners.estimator.model", "Model"),
    "Codebook": ("marg.marginals.data.codebook", "Codebook"),
    "Certificate": ("marg.learners.core.certificate", "Certificate"),
    "LEARNERS": ("marg.learners.estimator.base", "LEARNERS"),
}
"""Public name → (module, attribute), imported on first access."""

__all__ = ["__version__", *_LAZY]
_SUBMODULES = ("errors", "api", "notebook", "marginals", "learners", "protocols", "reports")
"""Submodules reachable as attributes (imported on first access too)."""


def __getattr__(name: str) -> object:
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(_import_module(module), attr)
        globals()[name] = value  # later accesses skip this function
        return value
    if name in _SUBMODULES:
        return _import_module(f"marg.{name}")
    raise AttributeError(f"module 'marg' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(__all__) | set(_SUBMODULES))
