"""One release's side of bench/regression.py: fit every configuration on the tables it is given, in its own process.

Run by bench/regression.py (not by hand): ``PYTHONPATH=SITE python bench/regression_worker.py INPUTS``,
where SITE is a ``pip install --target`` of one release and INPUTS the folder the parent wrote
once for both sides (``cases.json``: codebooks, table records, configurations; ``arrays.npz``:
the counts and the test rows). The worker reads commands, one JSON object a line, on stdin and
answers each with one JSON line on stdout:

- ``{"op": "fit", "case": i, "config": j, "keep": bool}`` → ``{"seconds": wall, "cpu": process}``: one fit, timed, on a
  Summary built for it (untimed: a Summary keeps the marginals a fit read; a second fit on it would not pay for them);
  with ``keep`` its R*, certificate, μ (or z) and test-row predictions are kept for the dump;
- ``{"op": "select", "case": i, "task": j, "keep": bool}`` → the same for one feature selection;
- ``{"op": "dump", "path": P}``: every kept result, with the times of its fits (those not sent
  with ``"warm": true``), written to P as JSON; then the worker exits.

It uses only what stays put when the learners move inside ``marg.learners``: the ``import marg``
entry points (``marg.MRC``, ``marg.DCC``, ``marg.RenyiClassifier``, ``marg.BoostVote``,
``marg.Summary``, ``marg.Codebook``), the marginals layer's table and noise records, and, for
feature selection, the one adapter :func:`select_features` (new path first, then the old).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from importlib import import_module
from pathlib import Path

import numpy as np

import marg


def _first_module(*names: str):
    """The first of ``names`` this release has (its layout since issue 47 first, then the one before)."""
    for name in names[:-1]:
        try:
            return import_module(name)
        except ImportError:
            continue
    return import_module(names[-1])


NoiseRecord = _first_module("marg.marginals.counts.noise", "marg.marginals.noise").NoiseRecord
MarginalTable = _first_module("marg.marginals.counts.tables", "marg.marginals.tables").MarginalTable

ESTIMATORS = {"mrc": "MRC", "dcc": "DCC", "renyi": "RenyiClassifier", "boost": "BoostVote"}
"""A configuration's kind → its ``import marg`` entry point."""

def select_features():
    """The release's ``select_features``: the grouped layout's module, or the flat one before issue 47."""
    return _first_module("marg.learners.selection.select", "marg.learners.selection").select_features


def summary(case: dict, arrays) -> object:
    """The case's Summary, built from the parent's table records (the same numbers on both sides)."""
    accepted = {f.name for f in dataclasses.fields(NoiseRecord)}
    tables = []
    for t in case["tables"]:
        rec = {k: v for k, v in t["noise"].items() if k in accepted}
        if "parts" in rec:
            rec["parts"] = tuple(tuple(p) for p in rec["parts"])
        extra = {"hidden": arrays[t["hidden"]]} if t.get("hidden") else {}
        tables.append(MarginalTable(clique=tuple(t["clique"]), counts=arrays[t["counts"]], noise=NoiseRecord(**rec),
                                    kind=t["kind"], **extra))
    return marg.Summary.from_tables(marg.Codebook.from_dict(case["codebook"]), tables)


def outcome(est, X: np.ndarray) -> dict:
    """What the parent compares: R*, the certificate, μ (or z) and the deterministic predictions."""
    rstar = getattr(est, "minimax_risk_", None)
    cert = est.certificate_
    record = cert.record() if hasattr(cert, "record") else {}
    coef = getattr(est, "mu_", None)
    if coef is None:
        coef = getattr(est, "z_", None)
    box = [{k: np.asarray(v).tolist() for k, v in dict(b).items()} for b in record.get("box", ())]
    return {"R": float(est.worst_case_error_), "Rstar": None if rstar is None else float(rstar.value),
            "certificate": {**est.report()["certificate"], "value": float(cert.value), "box": box},
            "coef": None if coef is None else np.asarray(coef, dtype=float).tolist(),
            "pred": np.asarray(est.predict(X)).astype(int).tolist()}


def main() -> None:
    inputs = Path(sys.argv[1])
    cases = json.loads((inputs / "cases.json").read_text())
    with np.load(inputs / "arrays.npz") as npz:
        arrays = dict(npz)
    proto, sys.stdout = sys.stdout, sys.stderr  # the library's prints go to stderr; stdout carries the answers
    proto.write(json.dumps({"marg": str(Path(marg.__file__).resolve().parent), "version": marg.__version__}) + "\n")
    proto.flush()
    kept: dict[str, dict] = {}
    times: dict[str, list[dict]] = {}
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["op"] == "dump":
            Path(cmd["path"]).write_text(json.dumps({k: {**v, "times": times.get(k, [])} for k, v in kept.items()}))
            proto.write("{}\n")
            proto.flush()
            return
        case = cases[cmd["case"]]
        S = summary(case, arrays)  # a fresh Summary for every fit: a Summary caches what fits read from it
        if cmd["op"] == "fit":
            name, kind, params = case["configs"][cmd["config"]]
            est = getattr(marg, ESTIMATORS[kind])(**params)
            t, c = time.perf_counter(), time.process_time()
            est.fit(S)
            seconds, cpu = time.perf_counter() - t, time.process_time() - c
            if cmd["keep"]:
                kept[f"{case['id']}|{name}"] = outcome(est, arrays[case["X_test"]])
        else:
            name, method, kw = case["selection"][cmd["task"]]
            select = select_features()
            t, c = time.perf_counter(), time.process_time()
            r = select(S, method=method, **kw)
            seconds, cpu = time.perf_counter() - t, time.process_time() - c
            if cmd["keep"]:
                kept[f"{case['id']}|{name}"] = {"selected": list(r.selected), "objective": float(r.objective)}
        if not cmd.get("warm"):
            times.setdefault(f"{case['id']}|{name}", []).append({"seconds": seconds, "cpu": cpu})
        proto.write(json.dumps({"seconds": seconds, "cpu": cpu}) + "\n")
        proto.flush()


if __name__ == "__main__":
    main()
