"""The certificate a model carries: an upper bound on its worst-case error, what kind of bound it is, the box it was
computed over.

A value type of its own (below :mod:`marg.learners.estimator.base`), so that the modules which compute
certificates (:mod:`marg.learners.certification.certify`, :mod:`marg.learners.certification.certify_labels`,
:mod:`marg.learners.certification.choice_certificates`) need not import the estimator base — and the base's
:meth:`~marg.learners.estimator.base.MarginalEstimator.certificate` can use them without an import cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .params import check_choice

CertificateKind = Literal["R*", "R*_L", "hinge", "2gamma", "W(h)", "holdout"]


@dataclass(frozen=True)
class Certificate:
    """An upper bound on a model's worst-case error, and what kind of bound it is.

    Attributes
    ----------
    value : float
        The bound.
    kind : {"R*", "R*_L", "hinge", "2gamma", "W(h)"}
        ``R*``: the exact minimax 0-1 risk over the uncertainty set (a worst case over every
        distribution whose released statistics lie within ±λ); ``R*_L``: its local-polytope
        upper bound (graphs with cycles); ``hinge``: the worst-case hinge loss (= 2R*), which
        bounds the deterministic rule's 0-1 error; ``2gamma``: the Rényi bound 2γ, for
        distributions with exactly the released pairwise marginals; ``W(h)``: the exact
        worst-case 0-1 error of the model's own (deterministic) rule over the uncertainty set;
        ``holdout``: an upper confidence bound on the deterministic rule's error rate from
        the sites' held-out rows (:mod:`marg.learners.certification.holdout_certificate`).
    coverage : float or None
        Probability with which the uncertainty set holds the truth (λ calibrated to a
        simultaneous coverage level); None when λ was set by hand (``s``).
    approximate : bool
        The bound rests on an approximation (e.g. a normal approximation of DP noise).
    n_classes : int
    note : str
        Why the bound is what it is when that is not the usual story (e.g. an empty confidence
        box under DP noise gives the trivial 1); "" otherwise. Not saved in the model file.
    box : tuple of dict
        The uncertainty box the bound was computed over, per released table
        (:func:`marg.learners.features.box.box_tables`: ``{"features", "lower", "upper"}``,
        joint cell probabilities; boost: one record per monomial, its cells and bounds); () for
        bounds not computed over a box (2γ, holdout). Saved in the model file.
    """

    value: float
    kind: CertificateKind
    coverage: float | None
    approximate: bool
    n_classes: int
    note: str = ""
    box: tuple = field(default=(), hash=False)

    def __repr__(self) -> str:
        """One short line: the bound and its kind; the box (thousands of cell bounds) is summarised —
        ``.box`` (or :meth:`record`) holds it in full."""
        note = f", note={self.note!r}" if self.note else ""
        box = f", box=<{len(self.box)} table{'s' if len(self.box) != 1 else ''}: see .box>" if self.box else ""
        return (f"Certificate(value={self.value:.4f}, kind={self.kind!r}, coverage={self.coverage!r}, "
                f"approximate={self.approximate}, n_classes={self.n_classes}{note}{box})")

    def record(self) -> dict[str, Any]:
        """The certificate as the model file records it (``marg inspect MODEL --json``'s ``certificate``)."""
        return {"value": float(self.value), "kind": self.kind, "coverage": self.coverage,
                "approximate": bool(self.approximate), "box": [dict(t) for t in self.box]}

    @property
    def trivial(self) -> bool:
        """A 0-1 bound no better than guessing uniformly: value ≥ 1 − 1/K."""
        if self.kind not in ("R*", "R*_L", "W(h)", "holdout"):
            return False
        return self.value >= 1.0 - 1.0 / self.n_classes - 1e-9

    def words(self) -> str:
        """What the bound promises, in a clause for the CLI."""
        if self.kind == "2gamma":
            return "(2γ: for distributions with the released pairwise marginals; no sampling margin)"
        if self.kind == "hinge":
            return "(worst-case hinge loss, = 2·R*: bounds the deterministic rule's worst-case error)"
        if self.kind == "holdout":
            return (f"(the rule's error rate on the sites' held-out patients' population, released with its noise; "
                    f"holds with probability ≥ {self.coverage:.0%} over the held-out sample and the noise)")
        bound = {"R*_L": "local-polytope bound R*_L ≥ R*, ", "W(h)": "the rule's own worst case, "}.get(self.kind, "")
        if self.coverage is None:
            return f"({bound}λ set by --s; not calibrated to a coverage level)"
        return f"({bound}holds with probability ≥ {self.coverage:.0%} over the sample)"


def certificate_from(rec: Any, n_classes: int) -> Certificate:
    if not isinstance(rec, dict):
        raise TypeError(f"certificate must be an object, got {type(rec).__name__}")
    kind = check_choice("certificate kind", rec.get("kind"), CertificateKind)
    value = float(rec["value"])
    if not 0.0 <= value <= 1.0 + 1e-9 and kind != "hinge":
        raise ValueError(f"certificate value {value!r} outside [0, 1]")
    cov = rec.get("coverage")
    box = rec.get("box") or []
    if (not isinstance(box, list) or not all(isinstance(t, dict) and {"features", "lower", "upper"} <= set(t)
                                             for t in box)):
        raise ValueError("certificate box must be a list of {features, lower, upper} records")
    return Certificate(value, kind, None if cov is None else float(cov), bool(rec.get("approximate", False)), n_classes,
                       box=tuple(box))
