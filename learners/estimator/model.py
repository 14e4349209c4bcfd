"""Model files: a fitted learner, its certificate and where it came from, as JSON.

A model file records the study codebook (and its fingerprint), the learner, the estimator
(its hyper-parameters once, and its fitted state: :meth:`marg.learners.estimator.base.MarginalEstimator.to_dict`),
the certificate (an upper bound on the worst-case error) and the provenance of the
summaries it was fitted on (``info``). Loading re-creates the estimator through the learner
registry; files of the previous release (version 1) are read too. Applying a model to data
first checks that the data's codebook has the model's fingerprint.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from marg.marginals.data.codebook import Codebook
from marg.errors import InputError, MargError
from marg._util import atomic_write_bytes, now_iso

from .base import LEARNERS, estimator_class

FORMAT = "marg-model"
VERSION = 2
READS = (1, 2)
"""Model-file versions this release reads (1: parameters inside the estimator state)."""

__all__ = ["Model", "FORMAT", "VERSION", "LEARNERS", "estimator_class", "evaluate", "model_info", "now_iso"]


@dataclass
class Model:
    """A fitted model bound to its study codebook."""

    learner: str
    codebook: Codebook
    estimator: Any
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def fingerprint(self) -> str:
        return self.codebook.fingerprint

    @property
    def worst_case_error(self) -> float:
        return float(self.estimator.worst_case_error_)

    @property
    def classes(self) -> tuple[str, ...]:
        return self.codebook.label.classes

    def check_codebook(self, codebook: Codebook) -> None:
        """Refuse data coded under another codebook. A model of a select-then-measure study reads the
        features measured (its codebook is the study's restricted to them): the study's codebook,
        recorded as ``study_fingerprint``, is accepted when restricted to them it is the model's."""
        study = (self.info or {}).get("study_fingerprint") if isinstance(self.info, dict) else None
        if study is not None and codebook.fingerprint == study and codebook.fingerprint != self.fingerprint:
            names = self.codebook.feature_names
            if (all(n in codebook.feature_names for n in names)
                and codebook.subset(names).fingerprint == self.fingerprint):
                return
        if codebook.fingerprint != self.fingerprint:
            raise InputError(
                f"codebook fingerprint {codebook.fingerprint[:16]}… differs from the model's {self.fingerprint[:16]}… "
                "(the data is coded under another schema)"
            )

    def codes(self, X: Any) -> np.ndarray:
        """Codes (n, d) of ``X``: rows of values (a data frame, a pyarrow Table, a file path)
        encoded through the codebook, or integer codes as given
        (:func:`marg.marginals.data.frames.feature_codes`; an unknown level is one InputError line
        naming column, value and row)."""
        from marg.marginals.data.frames import feature_codes

        return feature_codes(X, self.codebook)

    def predict(self, X: Any) -> np.ndarray:
        """Class codes (n,) by the learner's deterministic rule; ``X`` as in :meth:`codes`
        (:meth:`predict_labels` gives the class names)."""
        return np.asarray(self.estimator.predict(self.codes(X)))

    def predict_labels(self, X: Any) -> list[str]:
        """Class names (n,) by the deterministic rule."""
        return [self.classes[int(k)] for k in self.predict(X)]

    def predict_proba(self, X: Any) -> np.ndarray:
        """(n, K) class probabilities of the learner's randomized rule (rows sum to 1); ``X`` as in :meth:`codes`."""
        return np.asarray(self.estimator.predict_proba(self.codes(X)))

    def score(self, X: Any, y: Any = None) -> float:
        """Accuracy of the deterministic rule, the fraction of rows with ``predict(X) == y``.

        Parameters
        ----------
        X : rows (n) as in :meth:`codes`
        y : class names or codes (n,), optional
            Without it, the label column of ``X`` (a data frame, table or file of labelled rows).
        """
        from marg.marginals.data.frames import encode_rows, is_rows, label_codes_of

        if y is None:
            if not is_rows(X):
                raise InputError("score needs labels y when X is an array of codes")
            enc = encode_rows(X, self.codebook, with_label=True)
            Xc, yc = enc.X, enc.y
        else:
            Xc, yc = self.codes(X), label_codes_of(y, self.codebook)
        if len(yc) != len(Xc):
            raise InputError(f"{len(Xc)} rows but {len(yc)} labels")
        if len(yc) == 0:
            raise InputError("no rows to score")
        return float(np.mean(np.asarray(self.estimator.predict(Xc)) == yc))

    @property
    def has_uncertainty_set(self) -> bool:
        """The model records the cells its uncertainty set rules out (mrc, dcc), so :meth:`outside` applies."""
        return self.estimator.has_uncertainty_set

    def outside(self, X: Any) -> np.ndarray | None:
        """Rows outside the model's uncertainty set (bool (n,); see
        :meth:`marg.learners.classifiers.minimax_rules.MinimaxRules.outside`), or None for a learner without one
        recorded (renyi)."""
        out = self.estimator.outside(self.codes(X))
        return None if out is None else np.asarray(out, dtype=bool)

    def __repr__(self) -> str:
        cert = self.estimator.certificate_
        cov = f", {cert.coverage:.0%} coverage" if cert.coverage is not None else ""
        info = self.info if isinstance(self.info, dict) else {}
        signed = ("signature not checked" if "signed_by" not in info else
                  "unsigned" if info["signed_by"] is None else f"signed by {info['signed_by']}")
        return (f"<marg Model: learner {self.learner!r}, predicts {self.codebook.label.name!r} "
                f"({', '.join(self.classes)}) from {self.codebook.n_features} features; "
                f"certificate {cert.kind} ≤ {cert.value:.4f}{cov}; {signed}>")

    # -------------------------------------------------------------- files
    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "learner": self.learner,
            "codebook_fingerprint": self.fingerprint,
            "codebook": self.codebook.to_dict(include_draft=False),
            "worst_case_error": self.worst_case_error,
            "info": self.info,
            "estimator": self.estimator.to_dict(),
        }

    def save(self, path: str | Path) -> None:
        text = json.dumps(self.to_dict(), indent=1, sort_keys=True, default=_json_default) + "\n"
        atomic_write_bytes(Path(path), text.encode("utf-8"))

    @classmethod
    def from_dict(cls, d: Any, source: str = "model") -> "Model":
        """A model from its JSON dict; anything malformed is one InputError line naming ``source``."""
        try:
            return cls._from_dict(d, source)
        except MargError:
            raise
        except (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError) as exc:
            raise InputError(f"{source}: malformed model file ({type(exc).__name__}: "
                             f"{str(exc).splitlines()[0] if str(exc) else ''})") from None

    @classmethod
    def _from_dict(cls, d: Any, source: str = "model") -> "Model":
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise InputError(f"{source}: not a marg model file")
        if d.get("version") not in READS:
            raise InputError(f"{source}: unsupported model version {d.get('version')!r} (this marg reads "
                             f"{', '.join(map(str, READS))})")
        cb = Codebook.from_dict(d.get("codebook"))
        if cb.fingerprint != d.get("codebook_fingerprint"):
            raise InputError(f"{source}: embedded codebook does not match the recorded fingerprint (altered file?)")
        learner = d.get("learner")
        est_d = d.get("estimator")
        if not isinstance(est_d, dict):
            raise InputError(f"{source}: model file has no estimator state")
        try:
            est = estimator_class(str(learner)).from_dict(est_d)
        except InputError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{source}: malformed {learner} estimator state ({type(exc).__name__}: {exc})") from None
        return cls(learner=str(learner), codebook=cb, estimator=est, info=dict(d.get("info") or {}))

    @classmethod
    def load(cls, path: str | Path) -> "Model":
        return cls.read(path)[0]

    @classmethod
    def read(cls, path: str | Path) -> tuple["Model", str]:
        """The model file read once: the model and the SHA-256 of the very bytes it was built from
        (the name under which sites evaluate it)."""
        import hashlib

        p = Path(path)
        try:
            data = p.read_bytes()
        except FileNotFoundError:
            raise InputError(f"model file not found: {p}") from None
        except OSError as exc:
            raise InputError(f"cannot read model {p}: {exc}") from None
        return cls.from_bytes(data, source=str(p)), hashlib.sha256(data).hexdigest()

    @classmethod
    def from_bytes(cls, data: bytes, source: str = "model") -> "Model":
        """A model from a model file's bytes (those a signature was verified over: read once)."""
        try:
            d = json.loads(data.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise InputError(f"cannot read model {source}: {exc}") from None
        except json.JSONDecodeError as exc:
            raise InputError(f"{source}: model file is not valid JSON ({exc.msg} at line {exc.lineno})") from None
        return cls.from_dict(d, source=source)


def _json_default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def model_info(summary: Any, report: dict[str, Any]) -> dict[str, Any]:
    """A model file's provenance record: when, n (and ``n_exact`` for an exact release), the
    sites, the learn report, and each level's released counts with their noise half-width
    (:func:`marg.marginals.level_counts.level_counts`: the card's caveats on noise-set weights)."""
    from marg.marginals.level_counts import level_counts

    info = {"created": now_iso(), "n": summary.n, "sites": summary.provenance.get("sites", []), "report": report}
    if summary.fingerprint != summary.codebook.fingerprint:  # fitted on the study's measured features only
        info["study_fingerprint"] = summary.fingerprint
    if summary.n_exact is not None:
        info["n_exact"] = summary.n_exact
    levels = level_counts(summary)
    if levels is not None:
        info["level_counts"] = levels
    return info


def evaluate(model: Model, X: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    """Accuracy, error, certificate and confusion matrix of ``model`` on coded data.

    ``outside`` counts the rows outside the model's uncertainty set (:meth:`Model.outside`;
    None for renyi), about which the certificate says nothing, and ``outside_error`` is the
    error on them (None when there are none).
    """
    y = np.asarray(y, dtype=np.int64)
    n = int(len(y))
    if n == 0:
        raise InputError("no rows to evaluate on")
    pred = model.predict(X)
    K = len(model.classes)
    conf = np.zeros((K, K), dtype=np.int64)
    np.add.at(conf, (y, pred), 1)
    acc = float(np.mean(pred == y))
    proba = model.predict_proba(X)
    # Expected error of the randomized rule: 1 − mean h(y_i | x_i).
    rand_err = float(1.0 - np.mean(proba[np.arange(n), y]))
    out = model.outside(X)
    return {
        "n": n,
        "accuracy": acc,
        "error": 1.0 - acc,
        "randomized_error": rand_err,
        "worst_case_error": model.worst_case_error,
        "classes": list(model.classes),
        "confusion": conf.tolist(),
        "outside": None if out is None else int(out.sum()),
        "outside_error": None if out is None or not out.any() else float(np.mean(pred[out] != y[out])),
    }
