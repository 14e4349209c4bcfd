"""The study's commands for the benches (issue 44's acceptance): in process, or through the installed console script.

:class:`StudyCalls` runs ``marg study init | run | status`` and the final model's evaluation through the library
functions the commands call (:mod:`marg.study_runner`, :mod:`marg.study_site`, :mod:`marg.study_learner`,
:mod:`marg.api`), each party under its own ``$MARG_HOME`` (:func:`party`), or as subprocesses of the ``marg``
script; :class:`InProcess` runs any other ``marg`` command through ``marg.cli.main``'s app in this process;
:func:`marg_study` runs a whole study with them; :func:`pooled_noise` reads the noise the learner's pooled tables
carry from the bundles' records. Used by bench/study_accept.py and bench/study_certificate.py.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import math
import os
import shutil
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _bench(name: str):
    """bench/NAME.py as a module, loaded once (shared by every bench that loads it: one ``dp_select``, so a change of
    its ``EPSILON`` or ``column_text`` is seen by all)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


D = _bench("dp_select")  # the console, the sites' folders, the splits; EPSILON and DELTA per site


class InProcess:
    """The console's commands run in this process (``marg.cli.main``'s app, what the ``marg`` script calls, without
    a subprocess): the same parsing and the same library calls. Each call runs as its party: ``$MARG_HOME`` = ``home``
    (the other ``MARG_*`` variables cleared, as :class:`bench/dp_select.Console` does), in ``cwd``; stdout is
    returned, and a non-zero exit raises with the command's last line, as the console does."""

    def __init__(self, timeout: float = 0.0):
        self.helps: dict = {}

    def __call__(self, *args, home: Path | None = None, cwd: Path | None = None) -> str:
        import contextlib
        import io

        from marg.cli.main import app

        out, err = io.StringIO(), io.StringIO()
        with party(home, cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                app(args=[str(a) for a in args], prog_name="marg")
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if code != 0:
            last = (err.getvalue().strip() or out.getvalue().strip()).splitlines()[-1:] or ["(no output)"]
            raise RuntimeError(f"marg {args[0]} {args[1] if len(args) > 1 else ''} exited {code}: {last[0]}")
        return out.getvalue()

    has_option = D.Console.has_option


@contextlib.contextmanager
def party(home: Path | None, cwd: Path | None):
    """Run the body as a party runs its command: ``$MARG_HOME`` = ``home`` (every other ``MARG_*`` variable
    cleared), in folder ``cwd``; both restored after."""
    saved = {k: v for k, v in os.environ.items() if k.startswith("MARG_")}
    here = os.getcwd()
    for k in saved:
        del os.environ[k]
    if home is not None:
        os.environ["MARG_HOME"] = str(home)
    try:
        if cwd is not None:
            os.chdir(cwd)
        yield
    finally:
        os.chdir(here)
        for k in [k for k in os.environ if k.startswith("MARG_")]:
            del os.environ[k]
        os.environ.update(saved)


class StudyCalls:
    """The study's commands as :mod:`marg.cli.study_cmd` runs them: ``init`` → :func:`marg.study_runner.init_study`,
    ``run --learner`` → :func:`marg.study_learner.run_learner`, ``run --site`` → :func:`marg.study_site.run_site`,
    ``status`` → :func:`marg.study_runner.status`, ``evaluate`` → :func:`marg.api.load_verified_model` and
    :func:`marg.api.evaluate_file`; in process (``inprocess``) or through the console script (each a subprocess),
    the same JSON documents either way."""

    def __init__(self, marg, inprocess: bool):
        self.marg, self.inprocess = marg, inprocess

    def init(self, st, roster: Path, drop: Path, study: Path, homes: dict, work: Path) -> None:
        if self.inprocess:
            from marg.study_runner import init_study

            with party(homes["learner"], work):
                init_study(st.schema, roster, D.EPSILON, D.DELTA, str(drop),
                           homes["learner"] / "keys" / "learner.sign.key",
                           study, rows=list(st.rows))
            return
        self.marg("study", "init", "--schema", st.schema, "--roster", roster, "--epsilon", D.EPSILON, "--delta",
                  D.DELTA,
                  "--drop", drop, "--sign-key", homes["learner"] / "keys" / "learner.sign.key", "--out", study,
                  "--rows", ",".join(map(str, st.rows)), "--json", home=homes["learner"], cwd=work)

    def learner(self, study: Path, home: Path, work: Path) -> dict:
        if self.inprocess:
            from marg.study_learner import run_learner

            with party(home, work):
                return json.loads(json.dumps(run_learner(study), default=str))
        return json.loads(self.marg("study", "run", study, "--learner", "--json", home=home, cwd=work))

    def site(self, study: Path, name: str, data: Path, home: Path, cwd: Path) -> dict:
        if self.inprocess:
            from marg.study_site import run_site

            with party(home, cwd):
                return json.loads(json.dumps(run_site(study, name, str(data)), default=str))
        return json.loads(self.marg("study", "run", study, "--site", name, "--data", data, "--json", home=home,
                                    cwd=cwd))

    def status(self, study: Path, work: Path) -> dict:
        if self.inprocess:
            from marg.study_runner import status

            with party(None, work):
                return json.loads(json.dumps(status(study), default=str))
        return json.loads(self.marg("study", "status", study, "--json", cwd=work))

    def evaluate(self, model: Path, st) -> dict:
        if self.inprocess:
            from marg import api
            from marg.errors import InputError, RefusedError

            try:
                m, _, _ = api.load_verified_model(model, st.schema, st.learner_trust)
                return api.evaluate_file(m, st.test)
            except (InputError, RefusedError) as exc:
                raise RuntimeError(f"marg evaluate (in process): {exc}") from None
        return json.loads(self.marg("evaluate", model, st.test, "--schema", st.schema, "--trust", st.learner_trust,
                                    "--json"))


def marg_study(calls: StudyCalls, st, keys: Path, work: Path, cb, Xte: np.ndarray, yte: np.ndarray) -> dict:
    """(a) the study's default: init, every party's ``marg study run`` until done, the final model scored."""
    roster, drop = work / "roster", work / "drop"
    roster.mkdir()
    drop.mkdir()
    homes = {}
    for name in [*st.names, "learner"]:
        homes[name] = work / f"home-{name}"
        (homes[name] / "keys").mkdir(parents=True)
        for f in (keys / name).iterdir():
            if f.name.startswith(f"{name}.") and f.suffix in (".key", ".pub"):
                shutil.copy(f, homes[name] / "keys" / f.name)
        for suffix in (".sign.pub", ".seal.pub"):
            shutil.copy(keys / name / f"{name}{suffix}", roster / f"{name}{suffix}")
    if HOLDOUT_KEYS.get("seed") is not None:  # the agreement check: the same held-out patients in both modes
        from marg.marginals.holdout import FORMAT, HOLDOUT_FILE
        from marg.protocols.site import DEFAULT_LEDGER

        for s in st.names:
            led = homes[s] / DEFAULT_LEDGER
            led.mkdir(mode=0o700)
            key = hashlib.blake2b(f"{HOLDOUT_KEYS['seed']}:{s}".encode(), digest_size=32).hexdigest()
            (led / HOLDOUT_FILE).write_text(json.dumps({"format": FORMAT, "version": 2, "splits": {}, "key": key}))
    study = work / "study.json"
    calls.init(st, roster, drop, study, homes, work)
    runs = 0
    for _ in range(10):
        res = calls.learner(study, homes["learner"], work)
        runs += 1
        if str(res.get("next", "")).startswith("none"):
            break
        for s in st.names:
            calls.site(study, s, st.data[s], homes[s], work / s)
            runs += 1
    status = calls.status(study, work)
    if not status.get("done"):
        raise RuntimeError(f"marg study status: not done after 10 rounds of runs ({res.get('next')})")
    model = drop / "final" / "model.json"
    result = status.get("result") or {}
    extra = {"runs": runs, **_model_facts(model, cb, Xte), "selection": _selection(drop)}
    try:
        ev = calls.evaluate(model, st)
        return {**outcome(result), "error": float(ev["error"]), **extra}
    except RuntimeError as exc:  # scored in-process on the model's features' codes instead, and the refusal recorded
        return {**score_final(drop / "final", cb, Xte, yte), "evaluate": str(exc)[:300], "runs": runs}


def _model_facts(model: Path, cb, Xte: np.ndarray) -> dict:
    """What identifies the final model across two runs: the features it reads and a digest of its predicted
    class probabilities on the test rows (rounded to 9 decimals)."""
    from marg.learners.estimator.model import Model

    m, _ = Model.read(model)
    cols = [cb.index(n) for n in m.codebook.feature_names]
    proba = np.round(np.asarray(m.predict_proba(Xte[:, cols]), dtype=np.float64), 9)
    return {"features_read": list(m.codebook.feature_names),
            "predictions_digest": hashlib.sha256(proba.tobytes()).hexdigest()[:16]}


def _selection(drop: Path) -> dict | None:
    """What the learner's round-2 plan says of round 1's selection (``DROP/measure/round.json``'s ``selection``:
    the features ranked, those measured, the pair tables, how many scores were positive), and the design's k."""
    def find(d):
        if isinstance(d, dict):
            if "selection" in d and isinstance(d["selection"], dict) and "ranked" in d["selection"]:
                return d["selection"]
            for v in d.values():
                if (f := find(v)) is not None:
                    return f
        elif isinstance(d, list):
            for v in d:
                if (f := find(v)) is not None:
                    return f
        return None

    f = drop / "measure" / "round.json"
    return find(json.loads(f.read_text())) if f.exists() else None


@contextlib.contextmanager
def top_k_what_if():
    """A diagnosis, not the study's behaviour: while active, the learner's round-2 plan
    (:func:`marg.study_learner._plan`, ``kept = (scores.rank() or scores.order()[:1])[:k]``) measures the design's
    top k by round 1's scores (``scores.order()[:k]``) instead of only the features whose score is positive at 95 %
    (and one feature when none is). Only calls of ``screen_scores`` from ``_plan`` are changed (the learners' own
    screening is left alone)."""
    import inspect

    import marg.learners.selection.screening as scr

    real = scr.screen_scores

    def patched(*args, **kwargs):
        sc = real(*args, **kwargs)
        if inspect.stack()[1].function == "_plan":
            sc.rank = sc.order  # the instance's rank(): every feature, best first; _plan keeps [:k]
        return sc

    scr.screen_scores = patched
    try:
        yield
    finally:
        scr.screen_scores = real


HOLDOUT_KEYS: dict = {"seed": None}
"""``--holdout-key-seed``: each study site's held-out split key derived from it (the same patients held out in
either mode; the sites' keys are otherwise random, so two runs hold out different patients)."""


def outcome(result: dict) -> dict:
    """The study's certificate and choice from its result document (``DROP/final/result.json``)."""
    kept = (result.get("evaluation") or {}).get("kept", "?")
    return {"certificate": result.get("certificate"), "chose": f"{result.get('learner', '?')} (kept: {kept})"}


def score_final(final: Path, cb, Xte: np.ndarray, yte: np.ndarray) -> dict:
    """A study's final model (``final/model.json``, its ``result.json`` beside it) scored on the test codes
    of the features it reads (in-process: ``marg evaluate`` refuses the study's model under the study codebook)."""
    from marg.learners.estimator.model import Model

    m, _ = Model.read(final / "model.json")
    cols = [cb.index(n) for n in m.codebook.feature_names]
    err = float(np.mean(np.asarray(m.predict(Xte[:, cols])) != yte))
    return {**outcome(json.loads((final / "result.json").read_text())), "error": err,
            "features_read": list(m.codebook.feature_names)}


def pooled_noise(path: str, work: Path, st) -> dict:
    """The noise on the pooled tables the learner got, per round, from the bundles' noise records: the study's
    summed bundle (``DROP/select/sum.bundle``, ``DROP/measure/sum.bundle``: the sum of the survivors' shares) or the
    sum of the sites' per-site bundles (std² added). ``label_std``: the pooled label table's std per cell;
    ``rms_std``: over every cell of the round's noisy tables; ``rms_std_at_rho1``: each table's pooled std × √ρ,
    ρ the table's guarantee (the shared sum's, or each site's own per-site ρ), i.e. the std at ρ = 1 — the per-site
    path over the study's is √t at the same ρ (√(S/t) against √S)."""
    from marg.protocols.bundle import load_bundle

    if path.startswith("study"):
        files = {r: [work / "drop" / r / "sum.bundle"] for r in ("select", "measure")}
    elif path in ("two rounds", "one round"):
        files = {r: [st.work / s / f"{s}.{k}" for s in st.names] for r, k in (("select", "r1"), ("measure", "r2"))}
    else:
        return {}
    out = {}
    for r, fs in files.items():
        fs = [f for f in fs if f.exists()]
        if not fs:
            continue
        per: dict = {}
        for f in fs:
            for t in load_bundle(f).tables:
                if t.noise.mechanism != "none":
                    per.setdefault(tuple(t.clique),
                                   []).append((float(t.noise.std), float(t.noise.rho), int(np.size(t.counts))))
        if not per:
            continue
        pooled = {c: (math.sqrt(sum(v[0] ** 2 for v in vs)), float(np.mean([v[1] for v in vs])), vs[0][2])
                  for c, vs in per.items()}
        cells = sum(v[2] for v in pooled.values())
        label = [v[0] for c, v in pooled.items() if len(c) == 1]
        out[f"noise_{r}"] = {"tables": len(pooled), "cells": cells, "label_std": label[0] if label else None,
                             "rms_std": math.sqrt(sum(v[2] * v[0] ** 2 for v in pooled.values()) / cells),
                             "rms_std_at_rho1": math.sqrt(sum(v[2] * v[0] ** 2 * v[1]
                                                              for v in pooled.values()) / cells),
                             "sites": len(fs) if not path.startswith("study") else None}
    return out
