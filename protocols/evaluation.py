"""A site's evaluation release: a model's confusion matrix on the site's held-out rows, protected, signed, ledgered.

``marg export DATA --evaluate MODEL`` (:func:`evaluate_site`) is the second half of the
holdout protocol of :mod:`marg.marginals.holdout`: the site recomputes the split it used
when it exported (refusing if the data's row counts changed), predicts the held-out rows
with the model's deterministic rule and releases one count table N[predicted, y] — the
confusion matrix, K×K cells, sensitivity 1 (a patient is one cell) — with the same
mechanisms, budget check and ledger as any export. The bundle's codebook is the derived
*evaluation codebook* (one feature ``predicted`` whose levels are the classes, the study's
label); its header names the model's digest and the study's fingerprint, so the learner
can check that every site evaluated the same model (:mod:`marg.learners.holdout_certificate`).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Callable

import numpy as np

from marg._util import atomic_write_bytes
from marg.errors import InputError
from marg.marginals.codebook import CategoricalFeature, Codebook, Label
from marg.marginals.disclosure import apply_min_cell
from marg.marginals.holdout import recall, select
from marg.marginals.noise import NoiseRecord
from marg.marginals.privacy import PrivacyCost, check_budget, plan_cost, privatize, read_budget, rho_for_epsilon
from marg.marginals.tables import MarginalTable

from .bundle import Bundle
from .export import ExportResult

PREDICTED = "predicted"


def evaluation_codebook(study: Codebook) -> Codebook:
    """The derived codebook of an evaluation release: feature ``predicted`` (levels: the
    classes) and the study's label."""
    classes = tuple(study.label.classes)
    return Codebook(features=(CategoricalFeature(PREDICTED, classes),), label=Label(study.label.name, classes))


def model_digest(path: str | Path) -> str:
    """SHA-256 of a model file's bytes: the name under which sites evaluate it."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def confusion_on_holdout(data: str | Path, model: Any, ledger_dir: str | Path, site: str,
                         progress: Callable[[int], None] | None = None) -> tuple[np.ndarray, int]:
    """N[predicted, y] (K, K) of ``model`` on the held-out rows of ``data``, and their number.

    Refuses when no split is remembered for this study and site, or when the file's row
    counts differ from those at export time.
    """
    from marg.marginals.encoding import iter_encoded

    cb = model.codebook
    spec, n_rows, n_held = recall(ledger_dir, cb.fingerprint, site)
    K = cb.n_classes
    conf = np.zeros((K, K), dtype=np.int64)
    seen = held = 0
    for enc in iter_encoded(data, cb, progress=progress):
        n = len(enc.y)
        mask = spec.mask(enc.start_row, n)
        seen += n
        if not mask.any():
            continue
        part = select(enc, mask)
        held += int(mask.sum())
        pred = np.asarray(model.predict(part.X), dtype=np.int64)
        np.add.at(conf, (pred, part.y), 1)
    if (seen, held) != (n_rows, n_held):
        raise InputError(f"{Path(data).name}: {seen} rows ({held} held out), but the export counted {n_rows} "
                         f"({n_held} held out): the data changed since the export, so its held-out rows are unknown")
    if held == 0:
        raise InputError(f"{Path(data).name}: no held-out rows")
    return conf, held


def evaluate_site(
    data: str | Path,
    model: Any,
    model_file_digest: str,
    site: str,
    out: str | Path,
    *,
    epsilon: float | None = None,
    rho: float | None = None,
    delta: float = 1e-6,
    mechanism: str = "laplace",
    min_cell: int = 3,
    min_cell_policy: str = "refuse",
    signing_key: Any = None,
    recipient: Any = None,
    recipient_name: str | None = None,
    ledger_dir: str | Path,
    progress: Callable[[int], None] | None = None,
) -> ExportResult:
    """Release ``model``'s confusion matrix on this site's held-out rows (see the module docstring).

    Privacy arguments as for :func:`marg.protocols.export.export_site`, but ``epsilon`` is
    spent by the Laplace mechanism by default: for one table of K² cells its noise is far
    below the Gaussian's at δ = 1e-6. The cost is checked against the dataset's budget
    before any data is read and recorded in its ledger.
    """
    from .ledger import Ledger
    from .signing import finalize_bundle

    out = Path(out)
    if not (out.parent if str(out.parent) else Path(".")).exists():
        raise InputError(f"output folder does not exist: {out.parent}")
    if epsilon is not None and rho is not None:
        raise InputError("give --epsilon or --rho, not both")
    if mechanism not in ("gaussian", "laplace"):
        raise InputError(f"unknown --mechanism {mechanism!r} (expected gaussian or laplace)")
    if epsilon is not None and mechanism == "gaussian":
        rho, epsilon = rho_for_epsilon(epsilon, delta), None
    dp = epsilon is not None or rho is not None
    ecb = evaluation_codebook(model.codebook)
    clique = (PREDICTED, ecb.label.name)
    requested = plan_cost([clique], ecb, epsilon=epsilon, rho=rho, delta=delta) if dp else PrivacyCost.unbounded()
    ledger = Ledger(ledger_dir)
    cap = read_budget(ledger_dir)
    if cap is not None:
        check_budget(cap, ledger.spent(), requested)

    conf, held = confusion_on_holdout(data, model, ledger_dir, site, progress)
    tables = [MarginalTable(clique=clique, counts=conf, noise=NoiseRecord.exact())]
    if dp:
        tables, cost = privatize(tables, epsilon=epsilon, rho=rho, delta=delta, codebook=ecb)
        privacy = {"mechanism": "laplace" if epsilon is not None else "gaussian", **cost.to_dict()}
        released_n = None
    else:
        tables, suppressed = apply_min_cell(tables, k=min_cell, policy=min_cell_policy, label=ecb.label.name, codebook=ecb)
        cost = PrivacyCost.unbounded()
        privacy = {"mechanism": "none", "epsilon": 0.0, "delta": 0.0, "rho": 0.0}
        released_n = held
    extra = {"evaluation": {"model": model_file_digest, "study": model.codebook.fingerprint, "learner": model.learner}}
    bundle = Bundle.build(ecb, tables, site=site, n_rows=released_n, privacy=privacy, extra=extra)
    final, file_bytes = finalize_bundle(bundle, signing_key, recipient)
    file_digest = hashlib.sha256(file_bytes).hexdigest() if recipient is not None else None
    entry = ledger.record(final, signing_key, file_digest=file_digest, cost=cost, recipient_name=recipient_name)
    atomic_write_bytes(out, file_bytes)
    return ExportResult(bundle=final, path=out, n_rows=held, tables=tables, cost=cost, sealed=recipient is not None,
                        ledger_entry=entry, suppressed=[])
